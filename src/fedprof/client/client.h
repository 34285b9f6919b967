#ifndef FEDPROF_CLIENT_CLIENT_H_
#define FEDPROF_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fedprof/core/params.h"
#include "fedprof/data/dataset.h"
#include "fedprof/data/quality.h"
#include "fedprof/profiling/profile.h"

namespace fedprof {

class Model;

struct TrainOptions {
  int epochs = 5;
  int64_t batch_size = 32;
  double lr = 0.01;  // this round's learning rate (decay already applied)
  double momentum = 0.9;
  double weight_decay = 0;
};

// What the server sends a selected client for one round.
struct FitInstructions {
  int64_t round = 0;
  std::shared_ptr<const FlatParams> global;  // the global model θ
  int64_t model_version = 0;                 // v: the round that produced θ
  // Before training, profile the local data with θ (FedProf, Alg. 2 line 15)
  // and/or report θ's mean loss on it (AFL's valuation). With
  // train.epochs == 0 the client only reports.
  bool profile = false;
  bool report_loss = false;
  // μ of FedProx's proximal term μ/2 ||w − θ||² in the local objective.
  double prox_mu = 0;
  // FedBN: the client keeps its own batch-norm parameters and statistics,
  // replacing θ's with them (after its first round).
  bool keep_local_batch_norm = false;
  TrainOptions train;
  uint64_t seed = 0;  // run seed; the client derives its batch order from it
};

// What a client returns. `ok` false means the client failed and its
// contribution must be skipped; `error` says why.
struct FitResult {
  int client_id = -1;
  bool ok = false;
  std::string error;
  FlatParams params;        // the locally trained model
  int64_t num_samples = 0;  // |D_k|
  double train_loss = 0;    // mean loss over the last local epoch
  std::optional<Profile> profile;  // when asked for
  double pre_train_loss = 0;       // θ's mean loss on the local data, when asked for
};

struct EvalResult {
  double loss = 0;      // mean cross-entropy, or mean squared error
  double accuracy = 0;  // classification accuracy, or R^2 for regression
  double rmse = 0;      // regression only
};

// A federated client holding its private data and, under FedBN, its own
// batch-norm values. Thread-compatible: distinct clients may train
// concurrently, each on its own model instance.
class Client {
 public:
  Client(int id, Dataset data, DataKind kind);

  int id() const { return id_; }
  const Dataset& data() const { return data_; }
  DataKind kind() const { return kind_; }
  int64_t num_samples() const { return data_.size(); }

  // Loads the global model into `model` (scratch owned by the caller),
  // profiles the local data if asked, and runs E epochs of mini-batch SGD
  // with momentum; batch order comes from (seed, round, client, epoch) alone.
  FitResult Fit(const FitInstructions& instructions, Model& model);

  // State kept between rounds (FedBN's batch-norm values), for checkpoints.
  const FlatParams& local_state() const { return local_batch_norm_; }
  void set_local_state(FlatParams state) { local_batch_norm_ = std::move(state); }

 private:
  int id_;
  Dataset data_;
  DataKind kind_;
  FlatParams local_batch_norm_;  // batch-norm entries in layout order; empty until kept
};

class ModelReplicas;

// Loss and accuracy (or R^2 and RMSE) of the model in `replicas` on `data`,
// in eval mode without gradients, batches spread over the replicas' threads.
EvalResult Evaluate(ModelReplicas& replicas, const Dataset& data, int64_t batch_size = 128);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_CLIENT_H_
