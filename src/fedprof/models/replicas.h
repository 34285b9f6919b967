#ifndef FEDPROF_MODELS_REPLICAS_H_
#define FEDPROF_MODELS_REPLICAS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "fedprof/core/params.h"
#include "fedprof/core/thread_pool.h"

namespace fedprof {

class Model;

// Copies of one model, one per thread, for data-parallel inference
// (evaluation, profiling). Results must be combined in batch order so they do
// not depend on the number of threads.
class ModelReplicas {
 public:
  using Factory = std::function<std::shared_ptr<Model>()>;

  // `threads` replicas made by `make` (<= 0: all cores).
  ModelReplicas(const Factory& make, int threads);
  // A single, borrowed model (no extra threads).
  explicit ModelReplicas(Model& model);

  // Copies `global` into every replica.
  void Load(const FlatParams& global);

  Model& primary() { return *models_[0]; }

  // Calls fn(batch, start, length, model) for each batch of `batch_size`
  // samples of [0, n), spread over the threads; returns when all are done.
  void ForEachBatch(int64_t n, int64_t batch_size,
                    const std::function<void(int64_t, int64_t, int64_t, Model&)>& fn);

 private:
  std::vector<std::shared_ptr<Model>> owned_;
  std::vector<Model*> models_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace fedprof

#endif  // FEDPROF_MODELS_REPLICAS_H_
