#include "fedprof/profiling/profiler.h"

#include <torch/torch.h>

#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"

namespace fedprof {

Profile ComputeProfile(ModelReplicas& replicas, const Dataset& data, int64_t version,
                       int64_t batch_size) {
  Profile p;
  p.version = version;
  p.layer = replicas.primary().profiled_layer();
  const int64_t n = data.size();
  if (n == 0) return p;
  std::vector<torch::Tensor> sums((n + batch_size - 1) / batch_size);
  std::vector<torch::Tensor> sums_sq(sums.size());
  replicas.ForEachBatch(n, batch_size, [&](int64_t b, int64_t start, int64_t len, Model& model) {
    torch::NoGradGuard no_grad;
    model.eval();
    torch::Tensor rep;
    model.Forward(data.x.narrow(0, start, len), &rep);
    const torch::Tensor r = rep.to(torch::kDouble);
    sums[b] = r.sum(0);
    sums_sq[b] = r.pow(2).sum(0);
  });
  torch::Tensor sum = sums[0].clone(), sum_sq = sums_sq[0].clone();
  for (size_t b = 1; b < sums.size(); ++b) {
    sum += sums[b];
    sum_sq += sums_sq[b];
  }
  const torch::Tensor mean = sum / static_cast<double>(n);
  const torch::Tensor var =
      (sum_sq / static_cast<double>(n) - mean.pow(2)).clamp_min(kVarianceFloor);
  p.mean.assign(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
  p.var.assign(var.data_ptr<double>(), var.data_ptr<double>() + var.numel());
  return p;
}

Profile ComputeProfile(Model& model, const Dataset& data, int64_t version, int64_t batch_size) {
  ModelReplicas single(model);
  return ComputeProfile(single, data, version, batch_size);
}

}  // namespace fedprof
