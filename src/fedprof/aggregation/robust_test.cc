#include "fedprof/aggregation/robust.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "fedprof/client/attack.h"
#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/server/server.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/in_process.h"
#include "tests/blobs.h"
#include "tests/simulate_summary.h"

namespace fedprof {
namespace {

// Updates with ids 0, 1, ... holding `models`, each of 10 samples.
std::vector<ClientUpdate> Updates(const std::vector<FlatParams>& models) {
  std::vector<ClientUpdate> u;
  for (size_t k = 0; k < models.size(); ++k) u.push_back({static_cast<int>(k), 10, models[k]});
  return u;
}

FlatParams Partial(Aggregator& a, const std::vector<ClientUpdate>& updates,
                   const FlatParams& global) {
  FlatParams next;
  a.AggregateUpdates(global, updates, 1000, &next);
  return next;
}

TEST(RobustAggregationTest, MedianOfOddAndEvenCounts) {
  auto median = MakeCoordinateMedian(AggregationMode::kPartial);
  EXPECT_TRUE(median->NeedsUpdates());
  // Per coordinate: {1, 3, 2} -> 2 and {10, -2, 5} -> 5.
  EXPECT_EQ(Partial(*median, Updates({{1, 10}, {3, -2}, {2, 5}}), {0, 0}), (FlatParams{2, 5}));
  // Even: the mean of the two middle values, {1, 2, 4, 100} -> 3; {0.5, 0.25, 0, 1} -> 0.375.
  EXPECT_EQ(Partial(*median, Updates({{100, 0.5f}, {1, 0.25f}, {4, 0}, {2, 1}}), {0, 0}),
            (FlatParams{3, 0.375f}));
  // One model is its own median.
  EXPECT_EQ(Partial(*median, Updates({{7, -7}}), {0, 0}), (FlatParams{7, -7}));
}

TEST(RobustAggregationTest, TrimmedMeanCutsFloorBetaNFromEachEnd) {
  const auto five = Updates({{-100}, {1}, {2}, {3}, {100}});
  // β = 0.2, n = 5: one value off each end, mean of {1, 2, 3}.
  EXPECT_EQ(Partial(*MakeTrimmedMean(AggregationMode::kPartial, 0.2), five, {0}), (FlatParams{2}));
  // β = 0.1: ⌊0.5⌋ = 0 cut, the plain mean 6/5.
  EXPECT_FLOAT_EQ(Partial(*MakeTrimmedMean(AggregationMode::kPartial, 0.1), five, {0})[0], 1.2f);
  // β = 0.3, n = 10: βn is 2.9999999999999996 in doubles, still 3 cut.
  std::vector<FlatParams> ten;
  for (float v : {-50.f, -40.f, -30.f, 1.f, 2.f, 3.f, 4.f, 70.f, 80.f, 90.f}) ten.push_back({v});
  EXPECT_EQ(Partial(*MakeTrimmedMean(AggregationMode::kPartial, 0.3), Updates(ten), {0}),
            (FlatParams{2.5f}));
  EXPECT_THROW(MakeTrimmedMean(AggregationMode::kPartial, 0.5), Error);
}

TEST(RobustAggregationTest, KrumScoresAndSelectionByHand) {
  // 1-D models 0, 1, 2, 10 (n = 4: f = 0 at most, n − f − 2 = 2 neighbours).
  // Squared distances: 0: {1, 4, 100} -> 5; 1: {1, 1, 81} -> 2; 2: {4, 1, 64} -> 5;
  // 10: {100, 81, 64} -> 145.
  const auto updates = Updates({{0, 5}, {1, 5}, {2, 5}, {10, 5}});
  const auto order = CanonicalOrder(updates);
  EXPECT_EQ(KrumScores(order, 0), (std::vector<double>{5, 2, 5, 145}));
  // Krum keeps the model of client 1 as it is.
  EXPECT_EQ(Partial(*MakeKrum(AggregationMode::kPartial, {}), updates, {0, 0}), (FlatParams{1, 5}));
  // Multi-Krum, m = 2: client 1, then the tie 0 / 2 (score 5) goes to the lower id.
  EXPECT_EQ(KrumSelection(order, 0, 2), (std::vector<size_t>{1, 0}));
  KrumOptions two;
  two.select = 2;
  EXPECT_EQ(Partial(*MakeKrum(AggregationMode::kPartial, two), updates, {0, 0}),
            (FlatParams{0.5f, 5}));
  // m = 0: n − f = 4 models, the plain mean.
  two.select = 0;
  EXPECT_EQ(Partial(*MakeKrum(AggregationMode::kPartial, two), updates, {0, 0}),
            (FlatParams{3.25f, 5}));
  // f = 1 with n = 5 (n > 2f + 2): 2 neighbours. Models 0, 1, 2, 3, 20:
  // 0: {1, 4} -> 5; 1: {1, 1} -> 2; 2: {1, 1} -> 2; 3: {1, 4} -> 5; 20: {289, 324} -> 613.
  const auto five = Updates({{0}, {1}, {2}, {3}, {20}});
  EXPECT_EQ(KrumScores(CanonicalOrder(five), 1), (std::vector<double>{5, 2, 2, 5, 613}));
}

TEST(RobustAggregationTest, ByzantineCountFollowsTheRound) {
  EXPECT_EQ(EffectiveByzantine(-1, 10), 3);  // 10 > 2·3 + 2
  EXPECT_EQ(EffectiveByzantine(-1, 9), 3);
  EXPECT_EQ(EffectiveByzantine(-1, 8), 2);
  EXPECT_EQ(EffectiveByzantine(3, 10), 3);
  EXPECT_EQ(EffectiveByzantine(3, 8), 2);  // too few results: lowered
  EXPECT_EQ(EffectiveByzantine(1, 2), 0);
  EXPECT_EQ(EffectiveByzantine(-1, 1), 0);
}

// Seven honest models near (1, −1) and one far outlier.
std::vector<ClientUpdate> HonestAndOutlier() {
  std::vector<FlatParams> models;
  for (int k = 0; k < 7; ++k) models.push_back({1.0f + 0.01f * k, -1.0f - 0.01f * k});
  models.push_back({1e6f, 1e6f});
  return Updates(models);
}

TEST(RobustAggregationTest, RobustRulesIgnoreAFarOutlier) {
  const auto updates = HonestAndOutlier();
  KrumOptions multi;
  multi.select = 0;
  for (auto* make : {+[] { return MakeCoordinateMedian(AggregationMode::kPartial); },
                     +[] { return MakeTrimmedMean(AggregationMode::kPartial, 0.2); },
                     +[] { return MakeKrum(AggregationMode::kPartial, {}); }}) {
    const FlatParams w = Partial(*make(), updates, {0, 0});
    EXPECT_NEAR(w[0], 1.03, 0.04);
    EXPECT_NEAR(w[1], -1.03, 0.04);
  }
  const FlatParams w = Partial(*MakeKrum(AggregationMode::kPartial, multi), updates, {0, 0});
  EXPECT_NEAR(w[0], 1.03, 0.04);
  // The average does not.
  ModelSum sum;
  sum.Reset(2);
  for (const auto& u : updates) sum.Add(u.params, u.num_samples);
  FlatParams avg;
  MakeWeightedAverage(AggregationMode::kPartial)->Aggregate({0, 0}, sum, 1000, &avg);
  EXPECT_GT(avg[0], 1e5);
}

TEST(RobustAggregationTest, ResultsDoNotDependOnArrivalOrder) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  std::vector<ClientUpdate> updates;
  for (int k = 0; k < 9; ++k) {
    FlatParams p(257);
    for (float& v : p) v = normal(gen);
    updates.push_back({k * 3 + 1, 5 + k, p});
  }
  const FlatParams global(257, 0.25f);
  KrumOptions multi;
  multi.select = 4;
  for (auto mode : {AggregationMode::kFull, AggregationMode::kPartial}) {
    std::vector<std::unique_ptr<Aggregator>> rules;
    rules.push_back(MakeCoordinateMedian(mode));
    rules.push_back(MakeTrimmedMean(mode, 0.25));
    rules.push_back(MakeKrum(mode, {}));
    rules.push_back(MakeKrum(mode, multi));
    for (auto& rule : rules) {
      FlatParams first;
      rule->AggregateUpdates(global, updates, 200, &first);
      std::vector<ClientUpdate> shuffled = updates;
      for (int t = 0; t < 5; ++t) {
        std::shuffle(shuffled.begin(), shuffled.end(), gen);
        FlatParams again;
        rule->AggregateUpdates(global, shuffled, 200, &again);
        ASSERT_EQ(again, first);
      }
    }
  }
  // Three models with equal Krum scores (each 1 from its nearest): the tie
  // goes to the lowest client id, 2, in whatever order they come.
  std::vector<ClientUpdate> tied = {{5, 10, {1}}, {2, 10, {-1}}, {9, 10, {0}}};
  auto krum = MakeKrum(AggregationMode::kPartial, {});
  const auto by_id = [](const ClientUpdate& a, const ClientUpdate& b) {
    return a.client_id < b.client_id;
  };
  for (int t = 0; t < 6; ++t) {
    std::next_permutation(tied.begin(), tied.end(), by_id);
    EXPECT_EQ(Partial(*krum, tied, {0}), (FlatParams{-1}));
  }
}

TEST(RobustAggregationTest, FullModeStepsByTheClaimedShare) {
  // Median 2 of three models of 10 samples each; |D| = 60: θ + 30/60 (2 − θ).
  auto median = MakeCoordinateMedian(AggregationMode::kFull);
  FlatParams next;
  median->AggregateUpdates({0}, Updates({{1}, {2}, {9}}), 60, &next);
  EXPECT_EQ(next, (FlatParams{1}));
  // Claims beyond |D| never step past ŵ.
  median->AggregateUpdates({0}, Updates({{1}, {2}, {9}}), 20, &next);
  EXPECT_EQ(next, (FlatParams{2}));
  // No result: θ unchanged, in both modes.
  median->AggregateUpdates({4}, {}, 60, &next);
  EXPECT_EQ(next, (FlatParams{4}));
  EXPECT_EQ(Partial(*MakeCoordinateMedian(AggregationMode::kPartial), {}, {4}), (FlatParams{4}));
  // A robust rule cannot work on a sum; a sum rule needs no updates.
  ModelSum sum;
  sum.Reset(1);
  EXPECT_THROW(median->Aggregate({0}, sum, 60, &next), Error);
  EXPECT_FALSE(MakeWeightedAverage(AggregationMode::kFull)->NeedsUpdates());
}

TEST(RobustAggregationTest, NormBoundClipsOrRefuses) {
  // ||θ|| = 5, Δ = (6, 8), ||Δ|| = 10: ratio 2.
  const FlatParams global = {3, 4};
  FlatParams w = {9, 12};
  UpdateNormBound bound{0.5, NormAction::kClip};
  EXPECT_EQ(ApplyUpdateNormBound(bound, global, 10, &w), "");
  EXPECT_EQ(w, (FlatParams{4.5f, 6}));  // Δ scaled by 0.5 / 2
  w = {9, 12};
  bound.action = NormAction::kRefuse;
  const std::string why = ApplyUpdateNormBound(bound, global, 10, &w);
  EXPECT_NE(why.find("update norm 2 x"), std::string::npos) << why;
  EXPECT_NE(why.find("robust.max_update_norm = 0.5"), std::string::npos) << why;
  EXPECT_EQ(w, (FlatParams{9, 12}));
  // Within the bound, or no bound: untouched.
  bound.max_ratio = 2.5;
  EXPECT_EQ(ApplyUpdateNormBound(bound, global, 10, &w), "");
  bound.max_ratio = 0;
  EXPECT_EQ(ApplyUpdateNormBound(bound, global, 10, &w), "");
  EXPECT_EQ(w, (FlatParams{9, 12}));
  // θ = 0: the bound is on ||w|| itself.
  bound = {1, NormAction::kClip};
  w = {0, 4};
  EXPECT_EQ(ApplyUpdateNormBound(bound, {0, 0}, 10, &w), "");
  EXPECT_EQ(w, (FlatParams{0, 1}));
}

TEST(AttackTest, ScaleAndSignFlipByHand) {
  const FlatParams base = {1, 2};
  FlatParams w = {2, 0};  // Δ = (1, −2)
  ApplyAttack({AttackKind::kScale, 3}, base, &w);
  EXPECT_EQ(w, (FlatParams{4, -4}));
  w = {2, 0};
  ApplyAttack({AttackKind::kSignFlip, 2}, base, &w);
  EXPECT_EQ(w, (FlatParams{-1, 6}));
  w = {2, 0};
  ApplyAttack({}, base, &w);
  EXPECT_EQ(w, (FlatParams{2, 0}));
  EXPECT_EQ(ParseAttackKind("sign_flip"), AttackKind::kSignFlip);
  EXPECT_THROW(ParseAttackKind("flip"), Error);
}

TEST(AttackTest, AttackersComeFromTheSeed) {
  const std::vector<char> a = ChooseAttackers(50, 0.3, 1);
  EXPECT_EQ(std::count(a.begin(), a.end(), 1), 15);
  EXPECT_EQ(ChooseAttackers(50, 0.3, 1), a);
  EXPECT_NE(ChooseAttackers(50, 0.3, 2), a);
  const std::vector<char> none = ChooseAttackers(50, 0, 1);
  EXPECT_EQ(std::count(none.begin(), none.end(), 1), 0);
  // Through the config, as every process builds it.
  Config config;
  config.Set("attack.share", "0.1", "test");
  config.Set("attack.kind", "scale", "test");
  const AttackPlan plan = MakeAttackPlan(config.options().attack, config.options().seed, 50);
  int attackers = 0;
  for (int k = 0; k < 50; ++k) {
    if (plan.For(k).active()) {
      ++attackers;
      EXPECT_EQ(plan.For(k).kind, AttackKind::kScale);
      EXPECT_EQ(plan.For(k).scale, 4);
    }
  }
  EXPECT_EQ(attackers, 5);
  EXPECT_FALSE(plan.For(50).active());
}

std::string StrategyError(const std::vector<std::pair<std::string, std::string>>& sets) {
  Config config;
  config.Set("clients.count", "10", "test");
  config.Set("strategy.fraction", "1", "test");
  try {
    for (const auto& [k, v] : sets) config.Set(k, v, "test");
    StrategyContext context;
    context.num_clients = 10;
    context.reference_profile = [](const FlatParams&, int64_t) { return Profile(); };
    MakeStrategy(config.options(), context);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RobustConfigTest, RefusesWhatCannotWork) {
  const std::string unknown = StrategyError({{"strategy.aggregator", "mean"}});
  EXPECT_NE(unknown.find("strategy.aggregator"), std::string::npos) << unknown;
  for (const char* name : {"median", "trimmed_mean", "krum", "multi_krum"}) {
    EXPECT_NE(unknown.find(name), std::string::npos) << unknown;
  }
  // 10 clients a round: f = 3 fits (10 > 8), f = 4 does not (10 <= 10).
  EXPECT_EQ(StrategyError({{"strategy.aggregator", "krum"}, {"robust.byzantine", "3"}}), "");
  const std::string f = StrategyError({{"strategy.aggregator", "krum"}, {"robust.byzantine", "4"}});
  EXPECT_NE(f.find("robust.byzantine"), std::string::npos) << f;
  EXPECT_NE(f.find("2f + 2 = 10"), std::string::npos) << f;
  EXPECT_EQ(f.find('\n'), std::string::npos) << f;
  const std::string m =
      StrategyError({{"strategy.aggregator", "multi_krum"}, {"robust.multi_krum_select", "11"}});
  EXPECT_NE(m.find("robust.multi_krum_select"), std::string::npos) << m;
  EXPECT_NE(StrategyError({{"robust.trim_share", "0.5"}}).find("robust.trim_share"),
            std::string::npos);
  EXPECT_NE(StrategyError({{"robust.norm_action", "drop"}}).find("robust.norm_action"),
            std::string::npos);
  EXPECT_NE(StrategyError({{"attack.kind", "noise"}}).find("attack.kind"), std::string::npos);
  // Every robust rule composes with every selector.
  for (const char* selector : {"uniform", "size", "fedprof", "afl", "cfcfm", "clustered"}) {
    for (const char* rule : {"median", "trimmed_mean", "krum", "multi_krum", "bulyan", "centered_clipping"}) {
      EXPECT_EQ(StrategyError({{"strategy.selector", selector}, {"strategy.aggregator", rule}}), "")
          << selector << "+" << rule;
    }
  }
}

// Two Gaussian blobs in 4 dimensions among `n` clients; the first
// `attackers` of them flip their updates' sign, boosted 4 times.
std::vector<Client> BlobClients(int n, int attackers, const Attack& attack, uint64_t seed = 3) {
  torch::manual_seed(seed);
  std::vector<Client> clients;
  for (int k = 0; k < n; ++k) {
    clients.emplace_back(k, testing_support::DrawBlobs(30));
    if (k < attackers) clients.back().set_attack(attack);
  }
  return clients;
}

struct BlobRun {
  ServerState state;
  int refused = 0, returned = 0;
};

BlobRun RunBlobs(Strategy& strategy, std::vector<Client> clients, int threads) {
  const ModelSpec spec{"mlp", {4}, 2, {8}, ""};
  torch::manual_seed(11);
  BlobRun run;
  run.state.global = Flatten(*MakeModel(spec));
  Dataset test = BlobClients(1, 0, {}, 99)[0].data();
  std::vector<ClientInfo> infos;
  for (const Client& c : clients) infos.push_back({c.id(), c.num_samples(), -1});
  InProcessTransport transport(
      infos, [&](int id) { return clients[id]; }, /*keep_clients=*/true,
      [&] { return MakeModel(spec); }, threads,
      [](int, const FitInstructions&, const FitResult&) { return ResultCost{1.0, 1.0, 0, 0}; });
  ServerOptions o;
  o.rounds = 8;
  o.fraction = 1.0;
  o.train.epochs = 1;
  o.train.batch_size = 8;
  o.train.lr = 0.05;
  o.progress = false;
  ModelReplicas evaluator([&] { return MakeModel(spec); }, threads);
  Server server(o, transport, strategy, evaluator, test);
  server.Run(run.state, nullptr);
  for (const auto& m : run.state.history) {
    run.refused += m.refused;
    run.returned += m.returned;
  }
  return run;
}

TEST(RobustServerTest, MedianKeepsLearningUnderSignFlipAndIsThreadIndependent) {
  const Attack flip{AttackKind::kSignFlip, 4};
  Strategy average("a", MakeUniformSelector(), MakeWeightedAverage(AggregationMode::kPartial));
  const BlobRun attacked_average = RunBlobs(average, BlobClients(10, 3, flip), 1);
  Strategy median1("m", MakeUniformSelector(), MakeCoordinateMedian(AggregationMode::kPartial));
  Strategy median2("m", MakeUniformSelector(), MakeCoordinateMedian(AggregationMode::kPartial));
  const BlobRun one = RunBlobs(median1, BlobClients(10, 3, flip), 1);
  const BlobRun two = RunBlobs(median2, BlobClients(10, 3, flip), 2);
  EXPECT_EQ(one.state.global, two.state.global);
  EXPECT_EQ(one.returned, 80);
  EXPECT_GT(one.state.history.back().accuracy, 0.85);
  EXPECT_LT(attacked_average.state.history.back().accuracy,
            one.state.history.back().accuracy - 0.2);
}

TEST(RobustServerTest, NormBoundRefusesOrClipsTheBoostedClients) {
  const Attack boost{AttackKind::kScale, 50};
  Strategy refuse("r", MakeUniformSelector(), MakeWeightedAverage(AggregationMode::kPartial));
  refuse.SetUpdateNormBound({1.0, NormAction::kRefuse});
  testing::internal::CaptureStderr();
  const BlobRun refused = RunBlobs(refuse, BlobClients(6, 2, boost), 2);
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(refused.refused, 16);  // clients 0 and 1, every round
  EXPECT_EQ(refused.returned, 32);
  EXPECT_NE(log.find("client 1 refused: update norm "), std::string::npos) << log;
  EXPECT_NE(log.find("exceeds robust.max_update_norm = 1"), std::string::npos) << log;
  EXPECT_GT(refused.state.history.back().accuracy, 0.85);
  // Clipped instead: every result counts, and the run still learns.
  Strategy clip("c", MakeUniformSelector(), MakeWeightedAverage(AggregationMode::kPartial));
  clip.SetUpdateNormBound({0.05, NormAction::kClip});
  const BlobRun clipped = RunBlobs(clip, BlobClients(6, 2, boost), 2);
  EXPECT_EQ(clipped.refused, 0);
  EXPECT_EQ(clipped.returned, 48);
  EXPECT_GT(clipped.state.history.back().accuracy, 0.85);
  // Unbounded, the boosted clients wreck the average.
  Strategy open("o", MakeUniformSelector(), MakeWeightedAverage(AggregationMode::kPartial));
  const BlobRun wrecked = RunBlobs(open, BlobClients(6, 2, boost), 2);
  EXPECT_LT(wrecked.state.history.back().accuracy, 0.8);
}

// Ten rounds of a small Fashion-MNIST run (20 clients of 600 images, 10 a
// round) where 6 clients flip their updates' sign, boosted 4 times.
double AttackedAccuracy(const std::string& aggregator) {
  return testing_support::SimulateSummary(
             "robust_e2e_" + aggregator,
             {{"data.train_limit", "12000"}, {"data.test_limit", "1000"}, {"clients.count", "20"},
              {"strategy.fraction", "0.5"}, {"strategy.aggregation", "partial"},
              {"strategy.aggregator", aggregator}, {"train.epochs", "1"}, {"train.lr", "0.05"},
              {"rounds", "10"},
              {"partition.kind", "iid"}, {"attack.share", "0.3"}, {"attack.kind", "sign_flip"},
              {"report.progress", "false"}, {"threads", "2"}})
      .at("final_accuracy")
      .get<double>();
}

// The final model's hash of a short Fashion-MNIST run with `sets` applied.
std::string FinalModelHash(const std::string& name, const testing_support::Settings& sets) {
  return testing_support::SimulateSummary(
             "robust_hash_" + name,
             {{"data.train_limit", "2000"}, {"data.test_limit", "200"}, {"clients.count", "10"},
              {"strategy.fraction", "0.5"}, {"train.epochs", "1"}, {"rounds", "2"},
              {"report.progress", "false"}, {"threads", "2"}},
             sets)
      .at("final_model_sha256")
      .get<std::string>();
}

TEST(RobustEndToEndTest, InertAttackersAndAnUnreachedBoundChangeNoBit) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string plain = FinalModelHash("plain", {});
  // λ = 1: θ + (w − θ) = w exactly; the attackers' draw touches no other stream.
  EXPECT_EQ(FinalModelHash("inert", {{"attack.share", "0.5"}, {"attack.kind", "scale"},
                                     {"attack.scale", "1"}}),
            plain);
  EXPECT_EQ(FinalModelHash("loose", {{"robust.max_update_norm", "1000"}}), plain);
  // Real attackers and a biting bound do change it.
  EXPECT_NE(FinalModelHash("flip", {{"attack.share", "0.5"}}), plain);
  EXPECT_NE(FinalModelHash("tight", {{"robust.max_update_norm", "0.001"}}), plain);
}

TEST(RobustEndToEndTest, MedianHoldsWhereTheAverageFallsUnderSignFlip) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const double average = AttackedAccuracy("average");
  const double median = AttackedAccuracy("median");
  // Measured: average 0.095 (chance), median 0.595 (0.706 without attackers).
  EXPECT_LT(average, 0.2);
  EXPECT_GT(median, 0.45);
  EXPECT_GT(median, average + 0.3) << "average " << average << ", median " << median;
}

}  // namespace
}  // namespace fedprof
