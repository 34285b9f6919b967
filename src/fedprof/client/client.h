#ifndef FEDPROF_CLIENT_CLIENT_H_
#define FEDPROF_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "fedprof/client/attack.h"
#include "fedprof/core/params.h"
#include "fedprof/data/dataset.h"
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
  Client(int id, Dataset data);

  int id() const { return id_; }
  const Dataset& data() const { return data_; }
  int64_t num_samples() const { return data_.size(); }

  // One task, in four steps (each in its own file here): the local state
  // (where training starts: θ, or under FedBN θ with this client's batch
  // norm; local_state.h), the reports asked for, always of θ as received
  // (reports.h), local training (local_training.h) and packaging what is
  // sent (packaging.h). `model` is scratch owned by the caller. With
  // train.epochs = 0 it only reports and returns no model (`model` is left
  // as training would start). The result's cost is the measured wall time
  // (a simulation replaces it with the cost model's). `model_holds_global`
  // says `model` already holds *instructions.global (a worker that just
  // reported for another client), which saves loading it again.
  FitResult Fit(const FitInstructions& instructions, Model& model, bool model_holds_global = false);

  // A simulated attacker (client/attack.h) trains honestly, then returns
  // the attack's model; the default attack is none.
  const Attack& attack() const { return attack_; }
  void set_attack(const Attack& attack) { attack_ = attack; }

  // State kept between rounds, for checkpoints: FedBN's batch-norm values,
  // and the client algorithm's (algorithms/local_algorithm.h: SCAFFOLD's
  // c_i, FedDyn's gradient term).
  const FlatParams& local_state() const { return local_batch_norm_; }
  void set_local_state(FlatParams state) { local_batch_norm_ = std::move(state); }
  FlatParams take_local_state() { return std::exchange(local_batch_norm_, FlatParams()); }
  const FlatParams& algorithm_state() const { return algorithm_state_; }
  void set_algorithm_state(FlatParams state) { algorithm_state_ = std::move(state); }
  FlatParams take_algorithm_state() { return std::exchange(algorithm_state_, FlatParams()); }

 private:
  int id_;
  Dataset data_;
  Attack attack_;
  FlatParams local_batch_norm_;  // batch-norm entries in layout order; empty until kept
  FlatParams algorithm_state_;   // empty until kept
};

class ModelReplicas;

// Loss and accuracy (or R^2 and RMSE) of the model in `replicas` on `data`,
// in eval mode without gradients, batches spread over the replicas' threads.
EvalResult Evaluate(ModelReplicas& replicas, const Dataset& data, int64_t batch_size = 128);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_CLIENT_H_
