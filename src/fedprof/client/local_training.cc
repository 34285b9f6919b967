#include "fedprof/client/local_training.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fedprof/algorithms/local_algorithm.h"
#include "fedprof/core/rng.h"
#include "fedprof/models/models.h"

namespace fedprof {

namespace {

namespace F = torch::nn::functional;

torch::Tensor Loss(const torch::Tensor& output, const torch::Tensor& target, bool regression) {
  return regression ? F::mse_loss(output, target) : F::cross_entropy(output, target);
}

// Each sample's loss (regression: its squared error averaged over targets),
// outside the graph: the batch's loss and its gradient stay as they are.
torch::Tensor SampleLosses(const torch::Tensor& output, const torch::Tensor& target, bool regression) {
  torch::NoGradGuard no_grad;
  const torch::Tensor out = output.detach();
  if (regression) return F::mse_loss(out, target, F::MSELossFuncOptions().reduction(torch::kNone)).mean(1);
  return F::cross_entropy(out, target, F::CrossEntropyFuncOptions().reduction(torch::kNone));
}

}  // namespace

EpochLoss TrainLocally(const TrainOptions& train, const BatchOrderKey& key, const Dataset& data, Model& model,
                       const std::vector<std::unique_ptr<LocalAlgorithm>>& algorithms) {
  model.train();
  torch::optim::SGD optimizer(model.parameters(), torch::optim::SGDOptions(train.lr)
                                                      .momentum(train.momentum)
                                                      .weight_decay(train.weight_decay));
  const int64_t n = data.size();
  const int64_t batch = std::max<int64_t>(1, std::min(train.batch_size, n));
  const bool regression = data.is_regression();
  const bool wants_representation =
      std::any_of(algorithms.begin(), algorithms.end(), [](const auto& a) { return a->NeedsRepresentation(); });
  EpochLoss epoch_loss;
  for (int epoch = 0; epoch < train.epochs; ++epoch) {
    Rng rng = MakeRng(key.seed, Stream::kLocalTraining,
                      {static_cast<uint64_t>(key.round), static_cast<uint64_t>(key.client_id),
                       static_cast<uint64_t>(epoch)});
    const std::vector<int64_t> order = Permutation(rng, n);
    const torch::Tensor order_t =
        torch::from_blob(const_cast<int64_t*>(order.data()), {n}, torch::kLong);
    double loss_sum = 0, square_sum = 0;
    for (int64_t start = 0; start < n; start += batch) {
      const int64_t len = std::min(batch, n - start);
      const torch::Tensor idx = order_t.narrow(0, start, len);
      const torch::Tensor x = data.x.index_select(0, idx);
      const torch::Tensor y = data.y.index_select(0, idx);
      optimizer.zero_grad();
      for (const auto& algorithm : algorithms) algorithm->BeforeForward(model, x);
      LocalBatch seen{x, {}};
      const torch::Tensor output = model.Forward(x, wants_representation ? &seen.representation : nullptr);
      const torch::Tensor loss = Loss(output, y, regression);
      torch::Tensor total = loss;
      for (const auto& algorithm : algorithms) {
        const torch::Tensor term = algorithm->LossTerm(model, seen);
        if (term.defined()) total = total + term;
      }
      total.backward();
      optimizer.step();
      for (const auto& algorithm : algorithms) algorithm->AfterStep(model);
      ++epoch_loss.steps;
      loss_sum += loss.item<double>() * static_cast<double>(len);
      square_sum += SampleLosses(output, y, regression).to(torch::kDouble).square().sum().item<double>();
    }
    epoch_loss.mean = loss_sum / static_cast<double>(n);
    epoch_loss.rms = std::sqrt(square_sum / static_cast<double>(n));
  }
  return epoch_loss;
}

}  // namespace fedprof
