// What FedBuff's event machinery costs at scale (docs/scale.md): N simulated
// clients, half of them online at a time (on_off periods of 10 virtual
// minutes), `concurrency` training at once, a server step every `buffer`
// results, uniform selection among the idle online clients.
//
//  1. Training replaced by a no-op (a client returns the LeNet-5 model it
//     received): client events (results arriving, lost ones included) per
//     second of the whole loop: availability, selection, staleness, the
//     buffer and its steps (each result's 61,706 values copied and summed);
//     then the same with an MLP of 805 values (784-1-10), which leaves the
//     machinery with almost no per-value work.
//  2. LeNet-5 clients of `--samples` Fashion-MNIST samples (default 20, as
//     bench/availability_scale.sh's million), 1 epoch: the share of
//     the run's wall time spent outside the clients' training (the
//     transport's Fit), i.e. in the same machinery.
//
//   fedbuff_events [--clients N] [--concurrency C] [--buffer B] [--steps S] [--samples M]
//                  [--no-op-only 1]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "fedprof/aggregation/fedbuff.h"
#include "fedprof/core/params.h"
#include "fedprof/core/single_threaded_ops.h"
#include "fedprof/data/loaders.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/availability.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/availability.h"
#include "fedprof/transport/forwarding.h"
#include "fedprof/transport/in_process.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// A client's task time: 20 to 120 virtual seconds, fixed per client.
double TaskSeconds(int k) { return 20.0 + static_cast<double>((k * 7919) % 101); }

std::vector<fedprof::ClientInfo> Infos(int n, int samples) {
  std::vector<fedprof::ClientInfo> infos(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) infos[k] = {k, samples, TaskSeconds(k)};
  return infos;
}

// Clients whose training is a no-op.
class NoOpClients : public fedprof::Transport {
 public:
  explicit NoOpClients(int n) : infos_(Infos(n, 20)) {}
  int num_clients() const override { return static_cast<int>(infos_.size()); }
  std::vector<fedprof::ClientInfo> Available() override { return infos_; }
  const std::vector<fedprof::ClientInfo>* VirtualPopulation(fedprof::Availability** availability) override {
    *availability = nullptr;
    return &infos_;
  }
  void Fit(const std::vector<fedprof::ClientInstructions>& tasks, const ResultSink& sink) override {
    for (size_t i = 0; i < tasks.size(); ++i) {
      fedprof::FitResult r;
      r.client_id = tasks[i].client_id;
      r.ok = true;
      r.num_samples = 20;
      r.params = *tasks[i].instructions.global;
      r.cost.time_s = TaskSeconds(r.client_id);
      sink(i, std::move(r));
    }
  }

 private:
  std::vector<fedprof::ClientInfo> infos_;
};

// The time spent in the inner transport's Fit: the clients' training.
class TimedFit : public fedprof::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  void Fit(const std::vector<fedprof::ClientInstructions>& tasks, const ResultSink& sink) override {
    const auto start = Clock::now();
    inner_.Fit(tasks, sink);
    fit_s += Seconds(start);
  }
  double fit_s = 0;
};

struct Outcome {
  double wall_s = 0, fit_s = 0;
  int64_t events = 0, steps = 0;
  double staleness = 0;
};

Outcome Run(fedprof::Transport& clients, TimedFit& timed, const fedprof::ModelSpec& spec, int concurrency,
            int buffer, fedprof::FedBuffOptions::Refill refill, int64_t steps, const fedprof::Dataset& test) {
  fedprof::AvailabilityTransport available(
      timed, std::make_unique<fedprof::OnOffAvailability>(clients.num_clients(), 600, 600, 1), 1, concurrency);
  fedprof::FedBuffOptions o;
  o.concurrency = concurrency;
  o.buffer = buffer;
  o.refill = refill;
  fedprof::Strategy strategy("fedbuff", fedprof::MakeUniformSelector(),
                             fedprof::MakeFedBuff(fedprof::AggregationMode::kPartial, o));
  fedprof::ServerOptions so;
  so.rounds = steps;
  so.train.epochs = 1;
  so.train.batch_size = 32;
  so.eval_every = steps + 1;  // one evaluation, at the end
  so.progress = false;
  torch::manual_seed(0);
  auto eval_model = fedprof::MakeModel(spec);
  fedprof::ServerState state;
  state.global = fedprof::Flatten(*eval_model);
  fedprof::ModelReplicas evaluator(*eval_model);
  fedprof::Server server(so, available, strategy, evaluator, test);
  const auto start = Clock::now();
  server.Run(state, nullptr);
  Outcome out;
  out.wall_s = Seconds(start);
  out.fit_s = timed.fit_s;
  out.steps = static_cast<int64_t>(state.history.size());
  for (const auto& m : state.history) {
    out.events += m.returned + m.refused + m.timed_out;
    out.staleness += m.staleness / static_cast<double>(state.history.size());
  }
  return out;
}

}  // namespace

FEDPROF_SINGLE_THREADED_OPS;

int main(int argc, char** argv) {
  int clients = 100000, concurrency = 1000, buffer = 100, samples = 20, no_op_only = 0;
  int64_t steps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--clients")) clients = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--concurrency")) concurrency = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--buffer")) buffer = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--samples")) samples = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--no-op-only")) no_op_only = std::atoi(argv[i + 1]);
  }
  const std::string dir = fedprof::DefaultDataDir("fashion-mnist");
  const fedprof::Dataset train = fedprof::LoadIdx(dir + "/train-images-idx3-ubyte.gz",
                                                  dir + "/train-labels-idx1-ubyte.gz", 10);
  std::vector<int64_t> first(500);
  for (int64_t i = 0; i < 500; ++i) first[i] = i;
  const fedprof::Dataset test = fedprof::Subset(train, first);
  std::printf("FedBuff, %d clients (half online), concurrency %d, buffer %d, uniform selection\n", clients,
              concurrency, buffer);
  std::printf("| training | steps | client events | wall s | in training s | events/s | machinery share |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  auto print = [](const char* what, const Outcome& o) {
    std::printf("| %s | %lld | %lld | %.2f | %.2f | %.0f | %.1f%% |\n", what, static_cast<long long>(o.steps),
                static_cast<long long>(o.events), o.wall_s, o.fit_s, static_cast<double>(o.events) / o.wall_s,
                100.0 * (o.wall_s - o.fit_s) / o.wall_s);
  };
  const fedprof::ModelSpec lenet{"lenet5", {1, 28, 28}, 10, {}, ""};
  using Refill = fedprof::FedBuffOptions::Refill;
  const std::pair<Refill, std::string> refills[] = {{Refill::kOnArrival, "refill on arrival"},
                                                     {Refill::kOnStep, "refill on step"}};
  const fedprof::ModelSpec tiny{"mlp", {1, 28, 28}, 10, {1}, ""};
  for (const auto& [spec, model] : {std::pair{lenet, "LeNet-5"}, std::pair{tiny, "MLP of 805 values"}}) {
    for (const auto& [refill, name] : refills) {
      NoOpClients noop(clients);
      TimedFit timed(noop);
      const std::string what = std::string("no-op (") + model + " returned as received), " + name;
      print(what.c_str(), Run(noop, timed, spec, concurrency, buffer, refill, steps, test));
    }
  }
  for (const auto& [refill, name] : refills) {
    if (no_op_only) break;
    const int64_t n = train.size();
    fedprof::InProcessTransport lenet_clients(
        Infos(clients, samples),
        [&](int k) {
          std::vector<int64_t> idx(static_cast<size_t>(samples));
          for (int64_t i = 0; i < samples; ++i) idx[i] = (static_cast<int64_t>(k) * samples + i) % n;
          return fedprof::Client(k, fedprof::Subset(train, idx));
        },
        /*keep_clients=*/false, [&] { return fedprof::MakeModel(lenet); }, 1,
        [](int id, const fedprof::FitInstructions&, const fedprof::FitResult&) {
          return fedprof::ResultCost{TaskSeconds(id), 1, 0, 0};
        });
    TimedFit timed(lenet_clients);
    const std::string what = "LeNet-5, 1 epoch of " + std::to_string(samples) + " samples, " + name;
    print(what.c_str(),
          Run(lenet_clients, timed, lenet, concurrency, buffer, refill, std::max<int64_t>(1, steps / 4), test));
  }
  return 0;
}
