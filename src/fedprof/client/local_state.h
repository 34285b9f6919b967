#ifndef FEDPROF_CLIENT_LOCAL_STATE_H_
#define FEDPROF_CLIENT_LOCAL_STATE_H_

// Client::Fit's first step: where local training starts. Under FedBN
// (Li et al. 2021) a client keeps its own batch-norm parameters and
// statistics between rounds and trains from θ with them in place of θ's;
// any other client trains from θ as received.

#include <cstdint>
#include <utility>
#include <vector>

#include "fedprof/core/params.h"
#include "fedprof/protocol/messages.h"

namespace fedprof {

struct TrainingStart {
  // (offset, size) of each batch-norm entry of the model, in layout order,
  // when the client keeps its own (FedBN); else empty.
  std::vector<std::pair<int64_t, int64_t>> batch_norm;
  // Whether training starts from `own` rather than θ: the client keeps its
  // batch norm and has kept some already (after its first round).
  bool from_own = false;
  FlatParams own;  // θ with the client's batch norm, when from_own

  // The parameters training starts from.
  const FlatParams& Params(const FlatParams& global) const { return from_own ? own : global; }
};

// Where a client holding `kept` (its batch-norm values in layout order, or
// empty) starts training θ = `global` of a model laid out as `layout`.
TrainingStart StartOfTraining(const LocalObjective& objective, const ParamLayout& layout,
                              const FlatParams& kept, const FlatParams& global);

// What the client keeps of its trained model `trained` for its next round:
// the batch-norm values in layout order, or empty when it keeps nothing.
FlatParams LocalStateAfter(const TrainingStart& start, const FlatParams& trained);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_LOCAL_STATE_H_
