#ifndef FEDPROF_CLIENT_CLIENT_H_
#define FEDPROF_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "fedprof/client/attack.h"
#include "fedprof/core/params.h"
#include "fedprof/data/dataset.h"
#include "fedprof/data/quality.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

class Model;

struct EvalResult {
  double loss = 0;      // mean cross-entropy, or mean squared error
  double accuracy = 0;  // classification accuracy, or R^2 for regression
  double rmse = 0;      // regression only
  int64_t samples = 0;
  int64_t correct = 0;  // classification only
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
  // profiles the local data and/or reports the model's loss on it if asked,
  // and runs E epochs of mini-batch SGD with momentum; batch order comes
  // from (seed, round, client, epoch) alone. Under FedBN training starts
  // from the global model with this client's batch-norm values, while
  // reports are always of the global model as received. With E = 0 it only
  // reports and returns no model (`model` is left as training would start).
  // The result's cost is the measured wall time (a simulation replaces it
  // with the cost model's). `model_holds_global` says `model` already holds
  // *instructions.global (a worker that just reported for another client),
  // which saves loading it again.
  FitResult Fit(const FitInstructions& instructions, Model& model, bool model_holds_global = false);

  // A simulated attacker (client/attack.h) trains honestly, then returns
  // the attack's model; the default attack is none.
  const Attack& attack() const { return attack_; }
  void set_attack(const Attack& attack) { attack_ = attack; }

  // State kept between rounds (FedBN's batch-norm values), for checkpoints.
  const FlatParams& local_state() const { return local_batch_norm_; }
  void set_local_state(FlatParams state) { local_batch_norm_ = std::move(state); }

 private:
  int id_;
  Dataset data_;
  DataKind kind_;
  Attack attack_;
  FlatParams local_batch_norm_;  // batch-norm entries in layout order; empty until kept
};

class ModelReplicas;

// Loss and accuracy (or R^2 and RMSE) of the model in `replicas` on `data`,
// in eval mode without gradients, batches spread over the replicas' threads.
EvalResult Evaluate(ModelReplicas& replicas, const Dataset& data, int64_t batch_size = 128);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_CLIENT_H_
