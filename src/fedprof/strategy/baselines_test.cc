// The behaviour that defines each baseline strategy.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "fedprof/client/client.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"
#include "fedprof/protocol/sketch.h"
#include "fedprof/selection/afl_selector.h"
#include "fedprof/selection/clustered_selector.h"
#include "fedprof/selection/oort_selector.h"
#include "fedprof/strategy/strategy.h"
#include "tests/blobs.h"
#include "tests/simulate_summary.h"

namespace fedprof {
namespace {

Dataset Blobs(int n, uint64_t seed) {
  torch::manual_seed(seed);
  return testing_support::DrawBlobs(n, 3.0);
}

double Distance(const FlatParams& a, const FlatParams& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}

TEST(FedProxTest, ProximalTermKeepsTheLocalModelNearTheGlobalOne) {
  torch::manual_seed(3);
  auto model = MakeModel({"mlp", {4}, 2, {8}, ""});
  const auto global = std::make_shared<const FlatParams>(Flatten(*model));
  Client client(0, Blobs(200, 1));
  FitInstructions ins;
  ins.global = global;
  ins.train.epochs = 3;
  ins.train.lr = 0.05;
  const double plain = Distance(client.Fit(ins, *model).params, *global);
  ins.objective.prox_mu = 1.0;
  const double prox = Distance(client.Fit(ins, *model).params, *global);
  EXPECT_LT(prox, 0.7 * plain);
  EXPECT_GT(prox, 0.0);
}

TEST(FedProxTest, SelectionFollowsDataSize) {
  std::vector<ClientInfo> infos = {{0, 100, -1}, {1, 300, -1}, {2, 600, -1}};
  auto selector = MakeSizeWeightedSelector();
  std::vector<int> hits(3, 0);
  for (int t = 0; t < 20000; ++t) {
    Rng rng = MakeRng(1, Stream::kSelection, {static_cast<uint64_t>(t)});
    ++hits[selector->Select({t, 1, &infos}, rng)[0]];
  }
  EXPECT_NEAR(hits[0] / 20000.0, 0.1, 0.01);
  EXPECT_NEAR(hits[2] / 20000.0, 0.6, 0.015);
}

TEST(FedAdamTest, AppliesAdamToTheAveragedUpdate) {
  FedAdamOptions o;
  o.server_lr = 0.1;
  auto agg = MakeFedAdam(AggregationMode::kPartial, o);
  const FlatParams global = {1.0f, -1.0f};
  ModelSum r;
  r.Reset(2);
  r.Add({1.5f, -1.0f}, 10);  // Δ = (0.5, 0)
  FlatParams next;
  agg->Aggregate(global, r, 10, &next);
  const double m = 0.1 * 0.5, v = 0.01 * 0.25;
  EXPECT_NEAR(next[0], 1.0 + 0.1 * m / (std::sqrt(v) + 1e-3), 1e-6);
  EXPECT_FLOAT_EQ(next[1], -1.0f);  // no update, no move
  // The moments persist: the same Δ again moves further than a fresh optimiser would.
  auto fresh = MakeFedAdam(AggregationMode::kPartial, o);
  fresh->LoadState(agg->SaveState());
  FlatParams a, b;
  agg->Aggregate(global, r, 10, &a);
  fresh->Aggregate(global, r, 10, &b);
  EXPECT_EQ(a, b);
  FlatParams c;
  MakeFedAdam(AggregationMode::kPartial, o)->Aggregate(global, r, 10, &c);
  EXPECT_NE(a, c);
}

TEST(AflTest, SelectionKeepsToHighValuesWithARandomShare) {
  std::vector<double> values(100);
  for (int i = 0; i < 100; ++i) values[i] = i;  // client i valued i
  AflOptions o;  // drop 75%, 10% random
  int top = 0, low = 0;
  for (int t = 0; t < 500; ++t) {
    Rng rng = MakeRng(2, Stream::kSelection, {static_cast<uint64_t>(t)});
    const std::vector<int> ids = SelectAfl(values, 10, o, rng);
    ASSERT_EQ(ids.size(), 10u);
    for (int id : ids) (id >= 75 ? top : low)++;
  }
  // 9 of 10 from the top quarter by value; the random one lands there 1/4 of the time.
  EXPECT_NEAR(low / 500.0, 0.75 * 91.0 / 91.0, 0.12);
  EXPECT_GE(top, 9 * 500);
}

TEST(AflTest, ValuationIsSqrtSizeTimesLoss) {
  AflSelector s(AflOptions(), 2);
  FitResult r;
  r.client_id = 1;
  r.num_samples = 16;
  r.pre_train_loss = 0.5;
  EXPECT_EQ(s.CheckResult(r), "");
  EXPECT_FALSE(s.HasReport(1));
  s.Observe(r);
  EXPECT_TRUE(s.HasReport(1));
  EXPECT_FALSE(s.HasReport(0));
  EXPECT_EQ(s.LastScores(), (std::vector<double>{0.0, 2.0}));
  r.pre_train_loss = NAN;
  EXPECT_NE(s.CheckResult(r), "");
  AflSelector t(AflOptions(), 2);
  t.LoadState(s.SaveState());
  EXPECT_EQ(t.LastScores(), s.LastScores());
  EXPECT_TRUE(t.HasReport(1));
}

TEST(OortTest, UtilityStalenessAndPenaltyByHand) {
  // Utilities 1..5: the 0.98 quantile is the 5th (index min(4, floor(4.9))), low = 0.999.
  const OortScale scale = OortUtilityScale({5, 1, 4, 2, 3}, 0.98);
  EXPECT_EQ(scale.clip, 5);
  EXPECT_DOUBLE_EQ(scale.low, 0.999);
  EXPECT_DOUBLE_EQ(scale.range, 4.001);
  // U = 3 in round 10, last trained in round 2: (3 − 0.999)/4.001 + sqrt(0.1 ln 10 / 2)
  // = 0.500125 + 0.339307 = 0.839432; as fast as T = 4 s or faster, unpenalised.
  const double fast = OortScore(3, scale, 10, 2, 4, 4, 2);
  EXPECT_NEAR(fast, 0.839432, 1e-6);
  EXPECT_EQ(OortScore(3, scale, 10, 2, 1, 4, 2), fast);
  // Twice as slow as T: times (4/8)^2.
  EXPECT_NEAR(OortScore(3, scale, 10, 2, 8, 4, 2), 0.839432 / 4, 1e-6);
  EXPECT_NEAR(OortScore(3, scale, 10, 2, 8, 4, 0), fast, 1e-12);  // α = 0: no penalty
  // In round 1 the staleness bonus is 0 (ln 1).
  EXPECT_NEAR(OortScore(5, scale, 1, 1, 1, 4, 2), (5 - 0.999) / 4.001, 1e-12);
  // Utilities past the clip quantile count as it: of {1, 2, 3, 4, 100} the
  // 0.5 quantile is 3, so 100 scores as 3 does.
  const OortScale clipped = OortUtilityScale({1, 2, 3, 4, 100}, 0.5);
  EXPECT_EQ(clipped.clip, 3);
  EXPECT_EQ(OortScore(100, clipped, 5, 1, 1, 1, 2), OortScore(3, clipped, 5, 1, 1, 1, 2));
}

TEST(OortTest, ExplorationDecaysToItsFloor) {
  OortOptions o;  // 0.9, × 0.95 a round, down to 0.2
  EXPECT_EQ(OortExploration(o, 1), 0.9);
  EXPECT_NEAR(OortExploration(o, 2), 0.855, 1e-12);
  EXPECT_NEAR(OortExploration(o, 11), 0.9 * std::pow(0.95, 10), 1e-12);
  EXPECT_EQ(OortExploration(o, 100), 0.2);
}

TEST(OortTest, ThePacerRelaxesTWhenUtilityFalls) {
  // W = 2: checked before rounds 5, 7, 9, ... (2W rounds done, a multiple of W).
  const std::vector<double> falling = {5, 5, 1, 1, 1, 1};
  EXPECT_EQ(OortPacer(falling, 5, 2, 5, 10), 15);   // 5 + 5 > 1 + 1
  EXPECT_EQ(OortPacer(falling, 4, 2, 5, 10), 10);   // 3 rounds done: not a window's end
  EXPECT_EQ(OortPacer(falling, 3, 2, 5, 10), 10);   // fewer than 2W rounds done
  EXPECT_EQ(OortPacer(falling, 7, 2, 5, 10), 10);   // flat: 1 + 1 against 1 + 1
  EXPECT_EQ(OortPacer({1, 1, 5, 5}, 5, 2, 5, 10), 10);  // rising
  EXPECT_EQ(OortPacer(falling, 5, 2, 5, 98), 100);  // at most 100: no penalty
}

TEST(OortTest, ExploresFirstThenExploitsHighUtilityAndPenalisesTheSlow) {
  OortOptions o;
  o.exploration = o.exploration_min = 0.5;  // K = 4: 2 exploited, 2 explored
  o.exploration_decay = 1;
  o.duration_percentile = 50;
  OortSelector s(o, 20);
  std::vector<ClientInfo> clients;
  for (int k = 0; k < 20; ++k) clients.push_back({k, 100, 1.0});
  Rng rng = MakeRng(3, Stream::kSelection);
  const std::vector<int> first = s.Select({1, 4, &clients}, rng);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(s.preferred_duration_s(), 1.0);
  // Their results: two of high utility, two of low.
  auto trained = [&](int id, double rms) {
    FitResult r;
    r.client_id = id;
    r.num_samples = 100;
    r.params = {0.0f};
    r.train_loss_rms = rms;
    s.Observe(r);
  };
  trained(first[0], 2.0);
  trained(first[1], 2.1);
  trained(first[2], 0.1);
  trained(first[3], 0.1);
  FitResult hostile;
  hostile.train_loss_rms = -1;
  EXPECT_EQ(s.CheckResult(hostile), "loss RMS -1 outside [0, 1e6]");
  hostile.train_loss_rms = 2e6;
  EXPECT_NE(s.CheckResult(hostile), "");
  for (int attempt = 0; attempt < 10; ++attempt) {
    const std::vector<int> next = s.Select({2, 4, &clients}, rng);
    ASSERT_EQ(next.size(), 4u);
    // Within c = 0.95 of the 2nd highest score are only the two high-utility clients.
    EXPECT_TRUE(std::count(next.begin(), next.end(), first[0]) && std::count(next.begin(), next.end(), first[1]));
    EXPECT_FALSE(std::count(next.begin(), next.end(), first[2]) || std::count(next.begin(), next.end(), first[3]));
  }
  // first[1] turns 10 times slower than T (the median, 1 s): × 0.1² leaves it out.
  clients[first[1]].expected_time_s = 10;
  const std::vector<int> slow = s.Select({2, 4, &clients}, rng);
  EXPECT_EQ(std::count(slow.begin(), slow.end(), first[1]), 0);
  EXPECT_LT(s.LastScores()[first[1]], s.LastScores()[first[2]]);
  // The state restores every choice.
  OortSelector t(o, 20);
  t.LoadState(s.SaveState());
  Rng a = MakeRng(4, Stream::kSelection), b = MakeRng(4, Stream::kSelection);
  EXPECT_EQ(t.Select({3, 4, &clients}, a), s.Select({3, 4, &clients}, b));
  OortSelector wrong(o, 21);
  EXPECT_THROW(wrong.LoadState(s.SaveState()), Error);
}

// Eight rounds of 4 of 40 Fashion-MNIST clients whose speeds the cost model
// spreads: Oort's penalty keeps to the faster ones (measured: 17.5 s of
// virtual time against FedAvg's 22.7 s), and its choices do not depend on
// the number of threads.
TEST(OortTest, PrefersFastClientsAndIsThreadIndependent) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  auto run = [](const std::string& name, const std::string& strategy, const std::string& threads) {
    return testing_support::SimulateSummary(
        "oort_" + name,
        {{"data.train_limit", "2000"}, {"data.test_limit", "200"}, {"clients.count", "40"},
         {"strategy.fraction", "0.1"}, {"rounds", "8"}, {"train.epochs", "1"}, {"report.progress", "false"}},
        {{"strategy.name", strategy}, {"threads", threads}});
  };
  const nlohmann::json oort = run("two", "oort", "2"), fedavg = run("fedavg", "fedavg", "2");
  EXPECT_LT(oort.at("virtual_time_s").get<double>(), 0.9 * fedavg.at("virtual_time_s").get<double>());
  EXPECT_EQ(run("one", "oort", "1").at("final_model_sha256"), oort.at("final_model_sha256"));
}

TEST(StrategyTest, FedAvgRpAggregatesPartiallyWhateverTheConfigSays) {
  Config c;
  c.Set("strategy.name", "fedavg-rp");
  c.Set("strategy.aggregation", "full");
  auto s = MakeStrategy(c.options(), {});
  ModelSum r;
  r.Reset(1);
  r.Add({4.0f}, 10);
  FlatParams next;
  s->AggregateFit({0.0f}, r, 100, &next);
  EXPECT_FLOAT_EQ(next[0], 4.0f);  // full aggregation would give 0.4
  c.Set("strategy.name", "fedprox");
  EXPECT_DOUBLE_EQ(MakeStrategy(c.options(), {})->ProximalMu(), 0.01);
}

TEST(TextTest, FloatsRoundTripThroughBase64) {
  for (size_t n : {0, 1, 2, 3, 7}) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * -1.25f + 1e-7f;
    EXPECT_EQ(DecodeFloats(EncodeFloats(v)), v);
  }
  EXPECT_THROW(DecodeFloats("abc"), Error);
  EXPECT_THROW(DecodeFloats("ab!d"), Error);
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

TEST(FedBnTest, ClientsKeepTheirOwnBatchNorm) {
  torch::manual_seed(5);
  auto model = MakeModel({"cnn", {1, 8, 8}, 2, {}, ""});
  const ParamLayout layout = LayoutOf(*model);
  Dataset d;
  d.x = torch::rand({40, 1, 8, 8});
  d.y = torch::randint(0, 2, {40}, torch::kLong);
  d.num_classes = 2;
  Client client(0, d);
  FitInstructions ins;
  ins.global = std::make_shared<const FlatParams>(Flatten(*model));
  ins.objective.keep_local_batch_norm = true;
  ins.train.epochs = 1;
  const FitResult first = client.Fit(ins, *model);
  ASSERT_FALSE(client.local_state().empty());
  // A new global model whose batch-norm entries are all 100: the client
  // trains from its own batch-norm values and the global's other weights.
  FlatParams next = first.params;
  for (auto& v : next) v += 0.5f;
  for (const auto& e : layout.entries) {
    if (e.is_batch_norm) std::fill_n(next.begin() + e.offset, e.size, 100.0f);
  }
  ins.global = std::make_shared<const FlatParams>(next);
  ins.train.epochs = 0;  // only loads the model: what the client would start from
  const FitResult second = client.Fit(ins, *model);
  EXPECT_TRUE(second.params.empty()) << "a report carries no model";
  const FlatParams loaded = Flatten(*model);
  for (const auto& e : layout.entries) {
    for (int64_t i = e.offset; i < e.offset + e.size; ++i) {
      if (e.is_batch_norm) {
        ASSERT_EQ(loaded[i], first.params[i]) << e.name;
      } else {
        ASSERT_EQ(loaded[i], next[i]) << e.name;
      }
    }
  }
  // Without FedBN the global batch norm is taken as sent.
  ins.objective.keep_local_batch_norm = false;
  client.Fit(ins, *model);
  EXPECT_EQ(Flatten(*model), next);
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

TEST(CfcfmTest, MergesTheFastestClients) {
  const std::vector<double> times = {3.0, 1.0, 2.0, 1.0, 9.0};
  std::vector<ClientInfo> infos;
  for (int k = 0; k < 5; ++k) infos.push_back({10 + k, 100, times[k]});
  auto selector = MakeFirstComeSelector();
  Rng rng = MakeRng(1, Stream::kSelection);
  EXPECT_EQ(selector->Select({1, 3, &infos}, rng), (std::vector<int>{11, 12, 13}));
  infos[4].expected_time_s = -1;  // unknown: raced first, so it gets measured
  EXPECT_EQ(selector->Select({1, 2, &infos}, rng), (std::vector<int>{11, 14}));
}

TEST(ClusteredTest, AverageLinkageGroupsNearbyItems) {
  const std::vector<double> x = {0.0, 10.0, 0.1, 5.0, 5.1, 10.2};
  const std::vector<int> c =
      AverageLinkage(6, 3, [&](int a, int b) { return std::fabs(x[a] - x[b]); });
  EXPECT_EQ(c, (std::vector<int>{0, 1, 0, 2, 2, 1}));
}

TEST(ClusteredTest, DrawsOneClientFromEachGroupOfSimilarUpdates) {
  // Clients 0-3 moved the model one way, clients 4-7 the opposite way.
  ClusteredSelector s(ClusteredOptions{64}, 8);
  EXPECT_EQ(s.SketchDim(), 64);
  const FlatParams global(100, 0.0f);
  s.OnGlobalModel(global, 0);
  for (int k = 0; k < 8; ++k) {
    FitResult r;
    r.client_id = k;
    r.num_samples = 10;
    r.params.assign(100, 0.0f);
    for (int i = 0; i < 100; ++i) {
      r.params[i] = (k < 4 ? 1.0f : -1.0f) * static_cast<float>(i % 7) + 0.01f * k;
    }
    EXPECT_NE(s.CheckResult(r), "") << "no sketch";
    r.sketch = UpdateSketch(r.params, global, 64);  // what the client computes
    ASSERT_EQ(s.CheckResult(r), "");
    s.Observe(r);
  }
  std::vector<ClientInfo> infos;
  for (int k = 0; k < 8; ++k) infos.push_back({k, 10, -1});
  for (int t = 0; t < 50; ++t) {
    Rng rng = MakeRng(3, Stream::kSelection, {static_cast<uint64_t>(t)});
    const std::vector<int> ids = s.Select({t, 2, &infos}, rng);
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_LT(ids[0], 4);
    EXPECT_GE(ids[1], 4);
  }
  ClusteredSelector restored(ClusteredOptions{64}, 8);
  restored.LoadState(s.SaveState());
  EXPECT_EQ(restored.SaveState(), s.SaveState());
}

}  // namespace
}  // namespace fedprof
