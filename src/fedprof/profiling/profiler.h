#ifndef FEDPROF_PROFILING_PROFILER_H_
#define FEDPROF_PROFILING_PROFILER_H_

#include <cstdint>
#include <vector>

#include "fedprof/data/dataset.h"
#include "fedprof/profiling/profile.h"

namespace fedprof {

class Model;
class ModelReplicas;

// Samples per forward pass when profiling.
constexpr int64_t kProfileBatch = 128;

// The profile of `data` under `model` in one no-grad, eval-mode pass over
// batches of `batch_size`: the model's profiled layer's representation
// (pre-activation for dense layers, channel sums for conv layers), with the
// population variance (divide by n), floored at kVarianceFloor. Sums are
// accumulated in double, per batch and then in batch order.
Profile ComputeProfile(Model& model, const Dataset& data, int64_t version,
                       int64_t batch_size = kProfileBatch);
// The same with batches spread over the threads of `replicas` (identical
// result for any number of threads).
Profile ComputeProfile(ModelReplicas& replicas, const Dataset& data, int64_t version,
                       int64_t batch_size = kProfileBatch);

// The profiles of several data sets under one model, their samples run
// through it together: the samples of data[0], data[1], ... in order, in
// forward passes of `batch_size` samples, so that many small data sets cost
// a few full passes instead of one small pass each. Each profile is reduced
// from its own rows exactly as ComputeProfile reduces them; it can differ
// from ComputeProfile's only where the model's arithmetic on one sample
// depends on the rest of its pass (the rows of a BLAS matrix product: by
// about 1e-7 relative, docs/scale.md). The result depends only on the data
// sets and their order.
std::vector<Profile> ComputeProfiles(Model& model, const std::vector<const Dataset*>& data,
                                     int64_t version, int64_t batch_size = kProfileBatch);

}  // namespace fedprof

#endif  // FEDPROF_PROFILING_PROFILER_H_
