#ifndef FEDPROF_PROFILING_PROFILER_H_
#define FEDPROF_PROFILING_PROFILER_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
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

// The profiles of data sets whose rows of the profiled layer are computed
// already: data set i's are the next sizes[i] rows of `rows` [n, units],
// reduced in passes of `batch_size` as ComputeProfile reduces its passes.
std::vector<Profile> ProfilesFromRows(const at::Tensor& rows, const std::vector<int64_t>& sizes,
                                      int64_t version, const std::string& layer,
                                      int64_t batch_size = kProfileBatch);

// The profiled layer's rows of the samples of `tables` under one model, each
// computed once, when first asked for, in the forward pass of the
// `batch_size` consecutive rows of its table that hold it: a row depends on
// the model and its table alone, not on which data sets ask for it, in
// which order or on which thread. A data set made of table rows
// (TableRows) then needs no forward pass of its own; its profile
// (ProfilesFromRows) differs from its own pass's as ComputeProfiles' do.
// Thread-safe.
class SharedRepresentations {
 public:
  explicit SharedRepresentations(InputTables tables, int64_t batch_size = kProfileBatch);

  // The rows of sets[0], then of sets[1], ...: [total, units]. `model`
  // holds the model these rows are of (the same at every call, any
  // replica); it computes the passes not computed yet. Throws
  // fedprof::Error on a table or row that does not exist.
  at::Tensor Gather(Model& model, const std::vector<const TableRows*>& sets);

 private:
  // Rows [c * batch_size, ...) of table t, c the pass's index in its table.
  const at::Tensor& Pass(Model& model, int table, int64_t c);

  InputTables tables_;
  int64_t batch_size_;
  std::vector<int64_t> first_pass_;  // index in passes_ of each table's first pass
  std::vector<at::Tensor> passes_;
  std::unique_ptr<std::once_flag[]> computed_;
};

}  // namespace fedprof

#endif  // FEDPROF_PROFILING_PROFILER_H_
