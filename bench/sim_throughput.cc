// Training throughput of the simulator against a bare LibTorch loop.
//
// Both train LeNet-5 (batch 32, SGD with momentum) on the same number of
// Fashion-MNIST samples. The simulator runs whole rounds (selection,
// broadcast, local training of K clients, validation, aggregation, a small
// evaluation); the bare loop only trains, with one model per thread. Runs
// are interleaved and the best of several repetitions is kept, since this
// machine is shared and noisy.
//
// Then the default experiment's own rounds (configs/default.toml, FedAvg:
// 10 clients of 540 samples, 2 epochs, non-IID, degraded data) against the
// bare loop on as many samples, with evaluation off and, separately, what
// evaluating the global model every round adds.
//
//   sim_throughput [--samples N] [--clients K] [--reps R] [--rounds T]
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/params.h"
#include "fedprof/core/text.h"
#include "fedprof/core/single_threaded_ops.h"
#include "fedprof/data/loaders.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/server/server.h"
#include "fedprof/run/simulation.h"
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
    return fedprof::Client(k, fedprof::Subset(data, idx));
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

// Wall seconds per round of the default experiment over rounds 2..T-1 (the
// first builds the clients, the last always evaluates), with the global
// model evaluated every round or never.
double DefaultExperimentRound(int rounds, bool evaluate, int64_t* samples_per_round) {
  fedprof::Config config;
  config.MergeTomlFile(FEDPROF_SOURCE_DIR "/configs/default.toml");
  config.Set("rounds", std::to_string(rounds));
  config.Set("eval.every", evaluate ? "1" : "1000000");
  config.Set("report.progress", "false");
  // A run folder of its own ($TMPDIR), removed after: a finished run's
  // folder is never written over.
  std::string dir = (std::filesystem::temp_directory_path() / "fedprof_sim_throughput.XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) throw fedprof::Error("sim_throughput: cannot make a folder in $TMPDIR");
  fedprof::RunSimulation(config, dir);
  std::vector<double> wall;
  {
    std::istringstream metrics(fedprof::ReadFile(dir + "/metrics.csv"));
    std::string line;
    std::getline(metrics, line);
    const std::vector<std::string> header = fedprof::Split(line, ',');
    const size_t column = static_cast<size_t>(std::find(header.begin(), header.end(), "wall_s") - header.begin());
    if (column == header.size()) throw fedprof::Error("sim_throughput: metrics.csv has no wall_s column");
    while (std::getline(metrics, line)) wall.push_back(std::stod(fedprof::Split(line, ',').at(column)));
  }
  // Equal client sizes: a round trains K clients x size x epochs samples.
  const std::string clients = fedprof::ReadFile(dir + "/clients.csv");
  std::filesystem::remove_all(dir);
  const std::vector<std::string> row = fedprof::Split(clients.substr(clients.find('\n') + 1), ',');
  *samples_per_round = static_cast<int64_t>(std::lround(config.options().strategy.fraction *
                                                        config.options().clients.count)) *
                       std::stoll(row[1]) * config.options().train.epochs;
  return (wall[rounds - 2] - wall[0]) / (rounds - 2);
}

}  // namespace

FEDPROF_SINGLE_THREADED_OPS;

int main(int argc, char** argv) {
  int64_t samples = 12000;
  int clients = 10, reps = 3, rounds = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--samples")) samples = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--clients")) clients = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(4, std::atoi(argv[i + 1]));
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

  // The default experiment's rounds, best of `reps`, interleaved with the
  // bare loop on a round's samples.
  int64_t round_samples = 0;
  double quiet = 1e300, evaluated = 1e300, loop = 0;
  for (int r = 0; r < reps; ++r) {
    quiet = std::min(quiet, DefaultExperimentRound(rounds, false, &round_samples));
    evaluated = std::min(evaluated, DefaultExperimentRound(rounds, true, &round_samples));
    loop = std::max(loop, BareLoop(train, round_samples, 2));
  }
  const double round_rate = static_cast<double>(round_samples) / quiet;
  std::printf("\ndefault experiment (configs/default.toml, FedAvg), %lld samples a round, 2 threads, "
              "rounds 2..%d, best of %d\n",
              static_cast<long long>(round_samples), rounds - 1, reps);
  std::printf("%-34s %10.3f s  %8.0f samples/s\n", "round, evaluation off", quiet, round_rate);
  std::printf("%-34s %10.3f s  %8.0f samples/s\n", "bare loop, same samples",
              static_cast<double>(round_samples) / loop, loop);
  std::printf("%-34s %9.1f%%  (target >= 90%%)\n", "round throughput / bare loop",
              100 * round_rate / loop);
  std::printf("%-34s %10.3f s  (%.1f%% of an evaluated round)\n",
              "evaluation of the test set", evaluated - quiet, 100 * (evaluated - quiet) / evaluated);
  return 0;
}
