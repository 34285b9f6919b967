#include "fedprof/client/client.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "fedprof/core/rng.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/privacy/secure_matching.h"
#include "fedprof/profiling/profiler.h"
#include "fedprof/protocol/sketch.h"

namespace fedprof {

Client::Client(int id, Dataset data, DataKind kind) : id_(id), data_(std::move(data)), kind_(kind) {}

namespace {

namespace F = torch::nn::functional;

torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor& target, bool regression) {
  return regression ? F::mse_loss(output, target) : F::cross_entropy(output, target);
}

}  // namespace

FitResult Client::Fit(const FitInstructions& ins, Model& model, bool model_holds_global) {
  using Clock = std::chrono::steady_clock;
  const auto fit_start = Clock::now();
  auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  FitResult result;
  result.client_id = id_;
  result.num_samples = data_.size();
  ParamLayout layout;
  std::vector<const ParamLayout::Entry*> batch_norm;
  if (ins.keep_local_batch_norm) {
    layout = LayoutOf(model);
    for (const auto& e : layout.entries) {
      if (e.is_batch_norm) batch_norm.push_back(&e);
    }
  }
  // FedBN: training starts from θ with this client's own batch norm.
  const bool own_batch_norm = !batch_norm.empty() && !local_batch_norm_.empty();
  FlatParams with_own;
  if (own_batch_norm) {
    with_own = *ins.global;
    size_t at = 0;
    for (const auto* e : batch_norm) {
      std::copy_n(local_batch_norm_.begin() + at, e->size, with_own.begin() + e->offset);
      at += e->size;
    }
  }
  // Reports are of θ as the server sent it: FedProf matches the profile
  // with its reference profile of θ, AFL values the received model.
  const bool reports = ins.profile || ins.report_loss;
  if ((!own_batch_norm || reports) && !model_holds_global) Unflatten(*ins.global, model);
  if (ins.profile) {
    const auto profiling = Clock::now();
    result.profile = ComputeProfile(model, data_, ins.model_version);
    if (ins.secure_reference) {
      // Only Enc(q·div) leaves the client; the server never sees the profile.
      const PaillierPublicKey key = PaillierPublicKey::Parse(*ins.public_key);
      result.encrypted_divergence = EncryptedDivergence(
          key, SecureReference::Parse(*ins.secure_reference, key), *result.profile);
      result.profile.reset();
    }
    result.cost.profiling_time_s = seconds_since(profiling);
  }
  if (ins.report_loss || ins.evaluate) {
    ModelReplicas single(model);
    const EvalResult e = Evaluate(single, data_);
    if (ins.report_loss) result.pre_train_loss = e.loss;
    if (ins.evaluate) {
      result.eval_samples = e.samples;
      result.eval_correct = e.correct;
      result.eval_loss = e.loss;
    }
  }
  if (own_batch_norm) Unflatten(with_own, model);
  result.ok = true;
  if (ins.train.epochs <= 0) {  // a report only
    result.cost.time_s = seconds_since(fit_start);
    return result;
  }
  // FedProx's anchor: the parameters training starts from (the received
  // global ones; under FedBN with the client's batch norm).
  std::vector<torch::Tensor> anchor;
  if (ins.prox_mu > 0) {
    for (const auto& p : model.parameters()) anchor.push_back(p.detach().clone());
  }
  model.train();
  torch::optim::SGD optimizer(model.parameters(),
                              torch::optim::SGDOptions(ins.train.lr)
                                  .momentum(ins.train.momentum)
                                  .weight_decay(ins.train.weight_decay));
  const int64_t n = data_.size();
  const int64_t batch = std::max<int64_t>(1, std::min(ins.train.batch_size, n));
  const bool regression = data_.is_regression();
  double epoch_loss = 0;
  for (int epoch = 0; epoch < ins.train.epochs; ++epoch) {
    Rng rng = MakeRng(ins.seed, Stream::kLocalTraining,
                      {static_cast<uint64_t>(ins.round), static_cast<uint64_t>(id_),
                       static_cast<uint64_t>(epoch)});
    const std::vector<int64_t> order = Permutation(rng, n);
    const torch::Tensor order_t = torch::from_blob(const_cast<int64_t*>(order.data()), {n},
                                                   torch::kLong);
    double loss_sum = 0;
    for (int64_t start = 0; start < n; start += batch) {
      const int64_t len = std::min(batch, n - start);
      const torch::Tensor idx = order_t.narrow(0, start, len);
      const torch::Tensor x = data_.x.index_select(0, idx);
      const torch::Tensor y = data_.y.index_select(0, idx);
      optimizer.zero_grad();
      const torch::Tensor loss = Loss(model.Forward(x), y, regression);
      torch::Tensor objective = loss;
      if (!anchor.empty()) {
        torch::Tensor prox = torch::zeros({}, torch::kFloat);
        const auto params = model.parameters();
        for (size_t i = 0; i < params.size(); ++i) prox = prox + (params[i] - anchor[i]).pow(2).sum();
        objective = loss + 0.5 * ins.prox_mu * prox;
      }
      objective.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * static_cast<double>(len);
    }
    epoch_loss = loss_sum / static_cast<double>(n);
  }
  result.train_loss = epoch_loss;
  result.params = Flatten(model);
  if (!batch_norm.empty()) {
    local_batch_norm_.clear();
    for (const auto* e : batch_norm) {
      local_batch_norm_.insert(local_batch_norm_.end(), result.params.begin() + e->offset,
                               result.params.begin() + e->offset + e->size);
    }
  }
  // The update is what training changed: from θ, or under FedBN from θ
  // with the client's batch norm. An attacker keeps its honest batch norm
  // and poisons what it sends, its sketch included.
  const FlatParams& start = own_batch_norm ? with_own : *ins.global;
  ApplyAttack(attack_, start, &result.params);
  if (ins.sketch_dim > 0) result.sketch = UpdateSketch(result.params, start, ins.sketch_dim);
  result.cost.time_s = seconds_since(fit_start);
  return result;
}

EvalResult Evaluate(ModelReplicas& replicas, const Dataset& data, int64_t batch_size) {
  torch::NoGradGuard no_grad;
  EvalResult r;
  const int64_t n = data.size();
  if (n == 0) return r;
  const bool regression = data.is_regression();
  // Per-batch sums, added up in batch order: independent of the threads.
  struct Sums {
    double loss = 0, correct = 0, sq_err = 0;
  };
  std::vector<Sums> sums((n + batch_size - 1) / batch_size);
  replicas.ForEachBatch(n, batch_size, [&](int64_t b, int64_t start, int64_t len, Model& model) {
    torch::NoGradGuard guard;  // per thread
    model.eval();
    const torch::Tensor x = data.x.narrow(0, start, len);
    const torch::Tensor y = data.y.narrow(0, start, len);
    const torch::Tensor out = model.Forward(x);
    Sums& s = sums[b];
    if (regression) {
      s.sq_err = (out - y).pow(2).sum().item<double>();
      s.loss = s.sq_err / static_cast<double>(y.size(1));
    } else {
      s.loss = F::cross_entropy(out, y, F::CrossEntropyFuncOptions().reduction(torch::kSum))
                   .item<double>();
      s.correct = out.argmax(1).eq(y).sum().item<double>();
    }
  });
  double loss_sum = 0, correct = 0, sq_err = 0;
  for (const Sums& s : sums) {
    loss_sum += s.loss;
    correct += s.correct;
    sq_err += s.sq_err;
  }
  r.loss = loss_sum / static_cast<double>(n);
  r.samples = n;
  r.correct = std::llround(correct);  // a sum of whole counts
  if (regression) {
    const torch::Tensor centered = data.y - data.y.mean(0, /*keepdim=*/true);
    const double ss_tot = centered.pow(2).sum().item<double>();
    r.rmse = std::sqrt(sq_err / static_cast<double>(data.y.numel()));
    r.accuracy = ss_tot > 0 ? 1.0 - sq_err / ss_tot : 0.0;
  } else {
    r.accuracy = correct / static_cast<double>(n);
  }
  return r;
}

}  // namespace fedprof
