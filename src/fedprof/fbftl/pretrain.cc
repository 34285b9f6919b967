#include "fedprof/fbftl/pretrain.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>

#include "fedprof/core/rng.h"
#include "fedprof/fbftl/scheme_runner.h"
#include "fedprof/models/staged_model.h"

namespace fedprof {

double Pretrain(const RunOptions::Pretrain& o, uint64_t seed, StagedModel& model,
                const Dataset& data, const Dataset& test) {
  const std::vector<at::Tensor> params = model.StageParameters(0, model.num_stages());
  torch::optim::SGD optimizer(params, torch::optim::SGDOptions(o.lr).momentum(0.9));
  double accuracy = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    Rng shuffle = MakeRng(seed, Stream::kLocalTraining, {0, static_cast<uint64_t>(epoch)});
    const at::Tensor order = torch::tensor(Permutation(shuffle, data.size()));
    model.train(true);
    double loss_sum = 0;
    for (int64_t i = 0; i < data.size(); i += o.batch_size) {
      const at::Tensor b = order.slice(0, i, std::min<int64_t>(data.size(), i + o.batch_size));
      optimizer.zero_grad();
      const at::Tensor loss = torch::nn::functional::cross_entropy(
          model.ForwardStages(data.x.index_select(0, b), 0, model.num_stages()),
          data.y.index_select(0, b));
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * static_cast<double>(b.size(0));
    }
    accuracy = Accuracy(model, 0, test.x, test.y);
    std::printf("epoch %d/%d  loss %.4f  test accuracy %.4f\n", epoch, static_cast<int>(o.epochs),
                loss_sum / static_cast<double>(data.size()), accuracy);
    std::fflush(stdout);
  }
  return accuracy;
}

}  // namespace fedprof
