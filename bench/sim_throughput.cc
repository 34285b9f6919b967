// Training throughput of the simulator against a bare LibTorch loop.
//
// Both train LeNet-5 (batch 32, SGD with momentum) on the same number of
// Fashion-MNIST samples. The simulator runs whole rounds (selection,
// broadcast, local training of K clients, validation, aggregation, a small
// evaluation); the bare loop only trains, with one model per thread. Runs
// are interleaved and the best of several repetitions is kept, since this
// machine is shared and noisy.
//
//   sim_throughput [--samples N] [--clients K] [--reps R]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "fedprof/core/params.h"
#include "fedprof/core/single_threaded_ops.h"
#include "fedprof/data/loaders.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/in_process.h"

namespace {

using Clock = std::chrono::steady_clock;
const fedprof::ModelSpec kSpec{"lenet5", {1, 28, 28}, 10, {}, ""};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// One model per thread, each training one epoch over its own slice.
double BareLoop(const fedprof::Dataset& data, int64_t samples, int threads) {
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      at::set_num_threads(1);
      torch::manual_seed(t);
      auto model = fedprof::MakeModel(kSpec);
      model->train();
      torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
      const int64_t per = samples / threads;
      const torch::Tensor x = data.x.narrow(0, t * per, per);
      const torch::Tensor y = data.y.narrow(0, t * per, per);
      const torch::Tensor order = torch::randperm(per, torch::kLong);
      for (int64_t s = 0; s < per; s += 32) {
        const torch::Tensor idx = order.narrow(0, s, std::min<int64_t>(32, per - s));
        opt.zero_grad();
        torch::nn::functional::cross_entropy(model->Forward(x.index_select(0, idx)), y.index_select(0, idx))
            .backward();
        opt.step();
      }
    });
  }
  for (auto& w : workers) w.join();
  return static_cast<double>(samples) / Seconds(start);
}

// One simulator round in which K clients of samples/K each train one epoch.
double SimulatorRound(const fedprof::Dataset& data, const fedprof::Dataset& test, int64_t samples,
                      int clients, int threads) {
  const int64_t per = samples / clients;
  std::vector<fedprof::ClientInfo> infos;
  for (int k = 0; k < clients; ++k) infos.push_back({k, per, -1});
  auto make_client = [&](int k) {
    std::vector<int64_t> idx(per);
    for (int64_t i = 0; i < per; ++i) idx[i] = k * per + i;
    return fedprof::Client(k, fedprof::Subset(data, idx), fedprof::DataKind::kClean);
  };
  torch::manual_seed(0);
  auto eval_model = fedprof::MakeModel(kSpec);
  fedprof::InProcessTransport transport(infos, make_client, /*keep_clients=*/false,
                                        [] { return fedprof::MakeModel(kSpec); }, threads);
  fedprof::Strategy strategy("fedavg", fedprof::MakeUniformSelector(),
                             fedprof::MakeWeightedAverage(fedprof::AggregationMode::kFull));
  fedprof::ServerOptions o;
  o.rounds = 1;
  o.fraction = 1.0;
  o.train.epochs = 1;
  o.train.batch_size = 32;
  o.progress = false;
  fedprof::ModelReplicas evaluator(*eval_model);
  fedprof::Server server(o, transport, strategy, evaluator, test);
  fedprof::ServerState state;
  state.global = fedprof::Flatten(*eval_model);
  const auto start = Clock::now();
  server.Run(state, nullptr);
  return static_cast<double>(per * clients) / Seconds(start);
}

}  // namespace

int main(int argc, char** argv) {
  fedprof::EnsureSingleThreadedOps(argv);
  int64_t samples = 12000;
  int clients = 10, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--samples")) samples = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--clients")) clients = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  const std::string dir = fedprof::DefaultDataDir("fashion-mnist");
  const fedprof::Dataset train = fedprof::LoadIdx(dir + "/train-images-idx3-ubyte.gz",
                                                  dir + "/train-labels-idx1-ubyte.gz", 10);
  fedprof::Dataset test = fedprof::Subset(train, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  std::printf("LeNet-5, batch 32, %lld Fashion-MNIST samples per round (%d clients), best of %d\n",
              static_cast<long long>(samples), clients, reps);
  double bare[3] = {0, 0, 0}, sim[3] = {0, 0, 0};
  BareLoop(train, 2000, 1);  // warm-up
  for (int r = 0; r < reps; ++r) {
    for (int t = 1; t <= 2; ++t) {
      bare[t] = std::max(bare[t], BareLoop(train, samples, t));
      sim[t] = std::max(sim[t], SimulatorRound(train, test, samples, clients, t));
    }
  }
  std::printf("%-8s %14s %14s %10s\n", "threads", "bare samples/s", "sim samples/s", "overhead");
  for (int t = 1; t <= 2; ++t) {
    std::printf("%-8d %14.0f %14.0f %9.1f%%\n", t, bare[t], sim[t], 100.0 * (1 - sim[t] / bare[t]));
  }
  std::printf("2-thread speed-up: bare %.2fx, simulator %.2fx (target >= 1.8x)\n",
              bare[2] / bare[1], sim[2] / sim[1]);
  return 0;
}
