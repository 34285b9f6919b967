#include "fedprof/client/client.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "fedprof/algorithms/local_algorithm.h"
#include "fedprof/client/local_state.h"
#include "fedprof/client/local_training.h"
#include "fedprof/client/packaging.h"
#include "fedprof/client/reports.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"

namespace fedprof {

Client::Client(int id, Dataset data) : id_(id), data_(std::move(data)) {}

FitResult Client::Fit(const FitInstructions& ins, Model& model, bool model_holds_global) {
  const auto fit_start = std::chrono::steady_clock::now();
  FitResult result;
  result.client_id = id_;
  result.num_samples = data_.size();
  const TrainingStart start =
      ins.objective.keep_local_batch_norm
          ? StartOfTraining(ins.objective, LayoutOf(model), local_batch_norm_, *ins.global)
          : TrainingStart();
  if ((!start.from_own || NeedsReceivedModel(ins.report)) && !model_holds_global) {
    Unflatten(*ins.global, model);
  }
  MakeReports(ins.report, ins.model_version, model, data_, &result);
  if (start.from_own) Unflatten(start.own, model);
  result.ok = true;
  if (ins.train.epochs > 0) {
    const std::vector<std::unique_ptr<LocalAlgorithm>> algorithms =
        MakeLocalAlgorithms(ins, id_, model, algorithm_state_);
    const EpochLoss loss = TrainLocally(ins.train, {ins.seed, ins.round, id_}, data_, model, algorithms);
    result.train_loss = loss.mean;
    result.train_loss_rms = loss.rms;
    for (const auto& algorithm : algorithms) {
      FlatParams kept = algorithm->End(model, loss.steps, &result);
      if (!kept.empty()) algorithm_state_ = std::move(kept);
    }
    FlatParams trained = Flatten(model);
    if (!start.batch_norm.empty()) local_batch_norm_ = LocalStateAfter(start, trained);
    PackageUpdate(ins.report, attack_, ins.clip_norm, start.Params(*ins.global), std::move(trained), &result);
  }
  result.cost.time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fit_start).count();
  return result;
}

namespace {

namespace F = torch::nn::functional;

}  // namespace

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
