#include "fedprof/models/replicas.h"

#include <torch/torch.h>

#include "fedprof/models/models.h"

namespace fedprof {

ModelReplicas::ModelReplicas(const Factory& make, int threads)
    : pool_(std::make_unique<ThreadPool>(threads)) {
  for (int i = 0; i < pool_->size(); ++i) {
    owned_.push_back(make());
    models_.push_back(owned_.back().get());
  }
}

ModelReplicas::ModelReplicas(Model& model) : models_{&model}, pool_(std::make_unique<ThreadPool>(1)) {}

void ModelReplicas::Load(const FlatParams& global) {
  for (Model* m : models_) Unflatten(global, *m);
}

void ModelReplicas::ForEachBatch(int64_t n, int64_t batch_size,
                                 const std::function<void(int64_t, int64_t, int64_t, Model&)>& fn) {
  const int64_t batches = (n + batch_size - 1) / batch_size;
  pool_->ParallelFor(batches, [&](int64_t b, int worker) {
    at::set_num_threads(1);
    const int64_t start = b * batch_size;
    fn(b, start, std::min(batch_size, n - start), *models_[worker]);
  });
}

}  // namespace fedprof
