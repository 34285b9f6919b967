#include "fedprof/fbftl/scheme_runner.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "fedprof/core/rng.h"
#include "fedprof/models/staged_model.h"

namespace fedprof {

void ForEachIteration(const SchemeSetup& setup, uint64_t scheme_id, SchemeRun* run,
                      const std::function<void(int64_t, const std::vector<size_t>&)>& iterate,
                      const std::function<double()>& accuracy) {
  const RunOptions::Transfer& o = setup.options;
  const auto per_iteration = static_cast<size_t>(setup.per_iteration);
  int64_t iteration = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    Rng order_rng = MakeRng(setup.seed, Stream::kSelection, {scheme_id, static_cast<uint64_t>(epoch)});
    const std::vector<int64_t> order =
        Permutation(order_rng, static_cast<int64_t>(setup.clients.size()));
    for (size_t start = 0; start < order.size(); start += per_iteration) {
      const size_t end = std::min(order.size(), start + per_iteration);
      std::vector<size_t> selected;
      for (size_t i = start; i < end; ++i) {
        const auto u = static_cast<size_t>(order[i]);
        if (setup.clients[u].size() > 0) selected.push_back(u);
      }
      iterate(iteration++, selected);
    }
    run->curve.push_back({epoch, run->uplink_bytes, accuracy()});
  }
  run->accuracy = run->curve.empty() ? 0 : run->curve.back().test_accuracy;
}

void SeedTorch(uint64_t seed, uint64_t scheme_id) {
  torch::manual_seed(
      Mix64(seed ^ Mix64(static_cast<uint64_t>(Stream::kModelInit) + 97 * scheme_id)));
}

double Accuracy(StagedModel& model, size_t from, const at::Tensor& x, const at::Tensor& y) {
  torch::NoGradGuard no_grad;
  model.train(false);
  int64_t correct = 0;
  for (int64_t i = 0; i < x.size(0); i += 256) {
    const int64_t end = std::min<int64_t>(x.size(0), i + 256);
    const at::Tensor out = model.ForwardStages(x.slice(0, i, end), from, model.num_stages());
    correct += out.argmax(1).eq(y.slice(0, i, end)).sum().item<int64_t>();
  }
  return x.size(0) > 0 ? static_cast<double>(correct) / static_cast<double>(x.size(0)) : 0;
}

at::Tensor Features(StagedModel& model, size_t cut, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  model.train(false);
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < x.size(0); i += 256) {
    parts.push_back(
        model.ForwardStages(x.slice(0, i, std::min<int64_t>(x.size(0), i + 256)), 0, cut));
  }
  return torch::cat(parts).flatten(1);
}

std::vector<float> ToVector(const at::Tensor& t) {
  at::Tensor c = t.detach().to(torch::kFloat32).contiguous().reshape({-1});
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

std::vector<float> Concat(const std::vector<at::Tensor>& tensors, bool grads) {
  std::vector<float> out;
  for (const at::Tensor& t : tensors) {
    const at::Tensor v = grads ? (t.grad().defined() ? t.grad() : torch::zeros_like(t)) : t;
    const std::vector<float> part = ToVector(v);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

int64_t Numel(const std::vector<at::Tensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

bool AllFinite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float f) { return std::isfinite(f); });
}

double MacsOf(const std::vector<LayerCount>& layers, size_t from, size_t to) {
  double x = 0;
  for (size_t m = from; m < to; ++m) x += layers[m].macs;
  return x;
}

torch::optim::SGD MakeSgd(const std::vector<at::Tensor>& params, const RunOptions::Transfer& options) {
  return torch::optim::SGD(params, torch::optim::SGDOptions(options.lr)
                                       .momentum(options.momentum)
                                       .weight_decay(options.weight_decay));
}

}  // namespace fedprof
