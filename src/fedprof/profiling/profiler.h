#ifndef FEDPROF_PROFILING_PROFILER_H_
#define FEDPROF_PROFILING_PROFILER_H_

#include <cstdint>

#include "fedprof/data/dataset.h"
#include "fedprof/profiling/profile.h"

namespace fedprof {

class Model;
class ModelReplicas;

// The profile of `data` under `model` in one no-grad, eval-mode pass over
// batches of `batch_size`: the model's profiled layer's representation
// (pre-activation for dense layers, channel sums for conv layers), with the
// population variance (divide by n), floored at kVarianceFloor. Sums are
// accumulated in double, per batch and then in batch order.
Profile ComputeProfile(Model& model, const Dataset& data, int64_t version,
                       int64_t batch_size = 128);
// The same with batches spread over the threads of `replicas` (identical
// result for any number of threads).
Profile ComputeProfile(ModelReplicas& replicas, const Dataset& data, int64_t version,
                       int64_t batch_size = 128);

}  // namespace fedprof

#endif  // FEDPROF_PROFILING_PROFILER_H_
