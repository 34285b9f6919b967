// The server's asynchronous loop (strategy.aggregator = fedbuff) on a
// scripted event order.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "fedprof/aggregation/fedbuff.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/availability.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/availability.h"
#include "tests/blobs.h"

namespace fedprof {
namespace {

// Client k's task lasts 1 + k virtual seconds, costs 1 J and returns the
// model it received plus k + 1 in every value, from one sample. With
// `population` they name their population, as a simulation does, and the
// run keeps its own index of the idle online ones.
class ScriptedClients : public Transport {
 public:
  explicit ScriptedClients(int n, bool population = false) : n_(n), population_(population) {
    for (int k = 0; k < n_; ++k) infos_.push_back({k, 1, 1.0 + k});
  }
  int num_clients() const override { return n_; }
  std::vector<ClientInfo> Available() override { return infos_; }
  const std::vector<ClientInfo>* VirtualPopulation(Availability** availability) override {
    *availability = nullptr;
    return population_ ? &infos_ : nullptr;
  }
  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override {
    for (size_t i = 0; i < tasks.size(); ++i) {
      const int k = tasks[i].client_id;
      const FitInstructions& ins = tasks[i].instructions;
      fits.emplace_back(k, ins.model_version, ins.round);
      FitResult r;
      r.client_id = k;
      r.ok = true;
      r.num_samples = 1;
      r.train_loss = 0.25;
      r.params = *ins.global;
      for (float& v : r.params) v += static_cast<float>(k + 1);
      r.cost.time_s = 1.0 + k;
      r.cost.energy_j = 1;
      sink(i, std::move(r));
    }
  }
  std::vector<std::tuple<int, int64_t, int64_t>> fits;  // client, model version, round

 private:
  int n_;
  bool population_;
  std::vector<ClientInfo> infos_;
};

// Picks the lowest idle ids.
class LowestIdleIds : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    (void)rng;
    std::vector<int> ids;
    for (int j = 0; j < context.num_to_select; ++j) ids.push_back((*context.clients)[j].id);
    return ids;
  }
};

const ModelSpec kSpec{"mlp", {4}, 2, {8}, ""};

// Three clients, two training at once, a step every two results, up to
// `rounds` steps; `state` may be a resumed one. The clients are `transport`
// (made here when null), or `over` them when given.
ServerState RunScripted(int64_t rounds, ServerState state, ScriptedClients* transport = nullptr,
                        Transport* over = nullptr,
                        FedBuffOptions::Refill refill = FedBuffOptions::Refill::kOnArrival) {
  ScriptedClients own(3);
  ScriptedClients& clients = transport ? *transport : own;
  Transport& t = over ? *over : clients;
  FedBuffOptions o;
  o.concurrency = 2;
  o.buffer = 2;
  o.refill = refill;
  Strategy strategy("lowest+fedbuff", std::make_unique<LowestIdleIds>(),
                    MakeFedBuff(AggregationMode::kPartial, o));
  ServerOptions so;
  so.rounds = rounds;
  so.progress = false;
  torch::manual_seed(3);
  if (state.global.empty()) state.global = Flatten(*MakeModel(kSpec));
  ModelReplicas evaluator([] { return MakeModel(kSpec); }, 1);
  torch::manual_seed(5);
  const Dataset test = testing_support::DrawBlobs(50);
  Server server(so, t, strategy, evaluator, test);
  server.Run(state, nullptr);
  return state;
}

// The events, by hand: t=0 clients 0, 1 start on v0; t=1 client 0 arrives,
// 0 restarts; t=2 client 0 arrives (step 1), then 1 (v0: staleness 1);
// 0, 1 start on v1; t=3 client 0 arrives (step 2), restarts on v2; t=4
// clients 0 (fresh) and 1 (v1: staleness 1) arrive (step 3).
TEST(BufferedServerTest, FollowsTheScriptedEventOrder) {
  ScriptedClients transport(3);
  ServerState initial;
  torch::manual_seed(3);
  initial.global = Flatten(*MakeModel(kSpec));
  const FlatParams theta0 = initial.global;
  const ServerState s = RunScripted(3, initial, &transport);
  using Fit = std::tuple<int, int64_t, int64_t>;
  EXPECT_EQ(transport.fits,
            (std::vector<Fit>{{0, 0, 1}, {1, 0, 1}, {0, 0, 2}, {0, 1, 3}, {1, 1, 3}, {0, 2, 4}}));
  ASSERT_EQ(s.history.size(), 3u);
  const double staleness[] = {0, 0.5, 0.5}, time[] = {2, 3, 4}, elapsed[] = {2, 1, 1};
  const int selected[] = {3, 2, 1};
  for (size_t i = 0; i < 3; ++i) {
    const RoundMetrics& m = s.history[i];
    EXPECT_EQ(m.round, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(m.returned, 2);
    EXPECT_EQ(m.selected, selected[i]) << "step " << i + 1;
    EXPECT_EQ(m.staleness, staleness[i]) << "step " << i + 1;
    EXPECT_EQ(m.virtual_time_s, time[i]);
    EXPECT_EQ(m.round_time_s, elapsed[i]);
    EXPECT_DOUBLE_EQ(m.round_energy_wh, 2 / 3600.0);
    EXPECT_TRUE(m.evaluated);
  }
  EXPECT_EQ(s.times_selected, (std::vector<int64_t>{4, 2, 0}));
  EXPECT_EQ(s.dispatches, 4);
  // Step 1: two fresh θ0 + 1. Steps 2 and 3: one fresh update of +1 (weight
  // 1/2) and one of +2 from a version before (weight 1/(2 sqrt 2)).
  const double stale_step = 0.5 + 2 / (2 * std::sqrt(2.0));
  for (size_t i = 0; i < theta0.size(); ++i) {
    EXPECT_NEAR(s.global[i], theta0[i] + 1 + 2 * stale_step, 1e-5) << i;
  }
  EXPECT_TRUE(s.training.empty()) << "the last step took the last results";
}

// Under refill = step a finished client's place waits for the step: at
// concurrency = buffer every step takes the fresh results of clients that
// started together, a synchronous round lasting as long as its slowest.
TEST(BufferedServerTest, RefillOnStepMakesSynchronousRounds) {
  ScriptedClients transport(3);
  const ServerState s = RunScripted(2, ServerState(), &transport, nullptr, FedBuffOptions::Refill::kOnStep);
  using Fit = std::tuple<int, int64_t, int64_t>;
  EXPECT_EQ(transport.fits, (std::vector<Fit>{{0, 0, 1}, {1, 0, 1}, {0, 1, 2}, {1, 1, 2}}));
  ASSERT_EQ(s.history.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(s.history[i].staleness, 0);
    EXPECT_EQ(s.history[i].virtual_time_s, 2.0 * (i + 1)) << "client 1's 2 s, twice";
    EXPECT_EQ(s.history[i].selected, 2);
  }
}

TEST(BufferedServerTest, ResumedFromAnyStepEqualsTheUninterruptedRun) {
  for (auto refill : {FedBuffOptions::Refill::kOnArrival, FedBuffOptions::Refill::kOnStep}) {
    const ServerState whole = RunScripted(5, ServerState(), nullptr, nullptr, refill);
    for (int64_t stop = 1; stop < 5; ++stop) {
      const ServerState part = RunScripted(stop, ServerState(), nullptr, nullptr, refill);
      ServerState resumed = DecodeCheckpoint(EncodeCheckpoint(part, std::string(64, 'a')), "test").state;
      EXPECT_EQ(resumed.training.size(), part.training.size());
      EXPECT_EQ(resumed.training_models.size(), part.training_models.size());
      resumed = RunScripted(5, resumed, nullptr, nullptr, refill);
      EXPECT_EQ(resumed.global, whole.global) << "stopped after step " << stop;
      EXPECT_EQ(resumed.times_selected, whole.times_selected);
      EXPECT_EQ(resumed.dispatches, whole.dispatches);
      ASSERT_EQ(resumed.history.size(), whole.history.size());
      for (size_t i = 0; i < whole.history.size(); ++i) {
        EXPECT_EQ(resumed.history[i].virtual_time_s, whole.history[i].virtual_time_s);
        EXPECT_EQ(resumed.history[i].staleness, whole.history[i].staleness);
        EXPECT_EQ(resumed.history[i].selected, whole.history[i].selected);
        EXPECT_EQ(resumed.history[i].accuracy, whole.history[i].accuracy);
      }
    }
  }
}

// Client 2 is never online; client 1 leaves at t = 1.5 during its first
// task (2 s), which is lost (noticed when it would have finished) and is
// offline until t = 5.
TEST(BufferedServerTest, OnlyOnlineClientsStartAndALeaverIsLost) {
  ScriptedClients clients(3);
  std::vector<std::vector<OnlineInterval>> trace = {{{0, 100}}, {{0, 1.5}, {5, 100}}, {}};
  AvailabilityTransport available(clients, std::make_unique<TraceAvailability>(trace), 1, 2);
  const ServerState s = RunScripted(2, ServerState(), &clients, &available);
  EXPECT_EQ(s.times_selected, (std::vector<int64_t>{4, 1, 0}));
  ASSERT_EQ(s.history.size(), 2u);
  EXPECT_EQ(s.history[0].timed_out, 0);
  EXPECT_EQ(s.history[1].timed_out, 1) << "client 1's lost task, noticed at t = 2";
  EXPECT_EQ(s.history[1].returned, 2);
  EXPECT_EQ(s.history[1].virtual_time_s, 4);
  EXPECT_EQ(s.history[1].online, 1);
  for (const auto& [client, version, round] : clients.fits)
    EXPECT_NE(client, 1) << "a lost task never trains";
}

// 40 clients half online (on/off periods of 5 s), 6 training at once, a step
// every 3 results: the run asking the transport who is online at every
// instant and the run keeping its index (sim/idle_online_index.h) are one.
TEST(BufferedServerTest, TheIndexOfIdleOnlineClientsChangesNothing) {
  const auto run = [](bool population, bool uniform, FedBuffOptions::Refill refill) {
    ScriptedClients clients(40, population);
    AvailabilityTransport available(clients, std::make_unique<OnOffAvailability>(40, 5, 5, 2), 1, 6);
    FedBuffOptions o;
    o.concurrency = 6;
    o.buffer = 3;
    o.refill = refill;
    Strategy strategy("fedbuff", uniform ? MakeUniformSelector() : std::make_unique<LowestIdleIds>(),
                      MakeFedBuff(AggregationMode::kFull, o));
    ServerOptions so;
    so.rounds = 15;
    so.progress = false;
    so.eval_every = 100;
    torch::manual_seed(3);
    ServerState state;
    state.global = Flatten(*MakeModel(kSpec));
    ModelReplicas evaluator([] { return MakeModel(kSpec); }, 1);
    const Dataset test = testing_support::DrawBlobs(10);
    Server server(so, available, strategy, evaluator, test);
    server.Run(state, nullptr);
    return std::make_pair(state, clients.fits);
  };
  for (auto refill : {FedBuffOptions::Refill::kOnArrival, FedBuffOptions::Refill::kOnStep}) {
    for (bool uniform : {true, false}) {
      const auto [asked, asked_fits] = run(false, uniform, refill);
      const auto [indexed, indexed_fits] = run(true, uniform, refill);
      EXPECT_EQ(indexed_fits, asked_fits);
      EXPECT_EQ(indexed.global, asked.global);
      EXPECT_EQ(indexed.times_selected, asked.times_selected);
      ASSERT_EQ(indexed.history.size(), 15u);
      ASSERT_EQ(asked.history.size(), 15u);
      int lost = 0;
      for (size_t i = 0; i < 15; ++i) {
        const RoundMetrics &a = asked.history[i], &b = indexed.history[i];
        EXPECT_EQ(b.virtual_time_s, a.virtual_time_s) << "step " << i + 1;
        EXPECT_EQ(b.online, a.online) << "step " << i + 1;
        EXPECT_EQ(b.selected, a.selected) << "step " << i + 1;
        EXPECT_EQ(b.timed_out, a.timed_out) << "step " << i + 1;
        EXPECT_EQ(b.staleness, a.staleness) << "step " << i + 1;
        EXPECT_GT(a.online, 5);
        EXPECT_LT(a.online, 35);
        lost += a.timed_out;
      }
      EXPECT_GT(lost, 0) << "clients leave mid-task";
    }
  }
}

}  // namespace
}  // namespace fedprof
