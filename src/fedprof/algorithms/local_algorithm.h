#ifndef FEDPROF_ALGORITHMS_LOCAL_ALGORITHM_H_
#define FEDPROF_ALGORITHMS_LOCAL_ALGORITHM_H_

// The client half of a client algorithm (algorithms/algorithm.h): hooks that
// local training (client/local_training.h) calls around its SGD steps.

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "fedprof/core/params.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

class Model;

// One batch of local training as a loss term sees it.
struct LocalBatch {
  at::Tensor x;               // the inputs
  at::Tensor representation;  // the profiled layer's, when NeedsRepresentation()
};

class LocalAlgorithm {
 public:
  virtual ~LocalAlgorithm() = default;

  // Whether LossTerm needs the batch's representation under the model
  // being trained (MOON's z).
  virtual bool NeedsRepresentation() const { return false; }
  // Before each batch's forward pass, while `model` is not yet in that
  // batch's graph (MOON's passes of its reference models).
  virtual void BeforeForward(Model& model, const at::Tensor& x) { (void)model, (void)x; }
  // A term added to the batch's loss, in the graph (FedProx's proximal
  // term, FedDyn's linear and quadratic terms, MOON's contrastive loss);
  // undefined adds nothing.
  virtual at::Tensor LossTerm(Model& model, const LocalBatch& batch) {
    (void)model, (void)batch;
    return {};
  }
  // After each optimiser step (SCAFFOLD's correction).
  virtual void AfterStep(Model& model) { (void)model; }
  // After the last of `steps` steps, `model` holding the trained
  // parameters: sets what the result carries for the algorithm and returns
  // what the client keeps until its next round (empty: nothing).
  virtual FlatParams End(Model& model, int64_t steps, FitResult* result) {
    (void)model, (void)steps, (void)result;
    return {};
  }
};

// The client halves `ins.objective` asks for, in the order they run
// (FedProx's term, then the client algorithm), for client `client_id`'s
// `model` holding the parameters training starts from; `kept` is what the
// client kept of the algorithm (empty before its first round, or after a
// reset). Empty for plain SGD.
std::vector<std::unique_ptr<LocalAlgorithm>> MakeLocalAlgorithms(const FitInstructions& ins, int client_id,
                                                                 Model& model, const FlatParams& kept);

// The model's trainable parameters (Model::parameters(), in order) as
// tensors over `values`, which lays them out as Flatten does: views of
// `values` copied into tensors the parameters' shapes.
std::vector<at::Tensor> ParameterTensors(Model& model, const FlatParams& values);

}  // namespace fedprof

#endif  // FEDPROF_ALGORITHMS_LOCAL_ALGORITHM_H_
