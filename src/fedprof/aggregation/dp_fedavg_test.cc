#include "fedprof/aggregation/dp_fedavg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/privacy/rdp.h"

namespace fedprof {
namespace {

// Andrew et al.: z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2). z = 1, σ_b = 5 (K = 100,
// σ_b = K/20): (1 − 1/100)^(−1/2) = 1.0050378.
TEST(DpAdaptiveClipTest, TheCountTakesItsShareOfTheNoise) {
  EXPECT_NEAR(UpdateNoiseMultiplier(1.0, 5.0), 1.0050378152592121, 1e-12);
  EXPECT_NEAR(UpdateNoiseMultiplier(2.0, 2.0), 1 / std::sqrt(0.25 - 1.0 / 16), 1e-12);
  EXPECT_EQ(UpdateNoiseMultiplier(0.0, 1.0), 0.0);
  EXPECT_THROW(UpdateNoiseMultiplier(1.0, 0.5), Error);  // 2σ_b = z: nothing left
}

TEST(DpAdaptiveClipTest, TheClipNormStepsByHand) {
  // 10 results, 8 within C, no noise, K = 10: b̄ = (8 − 5)/10 + 1/2 = 0.8.
  EXPECT_DOUBLE_EQ(UnclippedShare(8, 10, 0.0, 10), 0.8);
  EXPECT_DOUBLE_EQ(UnclippedShare(8, 10, 2.0, 10), 1.0);
  // C ← C exp(−η_C (b̄ − γ)) with η_C = 0.2, γ = 0.5.
  EXPECT_DOUBLE_EQ(NextClipNorm(1.0, 0.8, 0.5, 0.2), std::exp(-0.06));
  EXPECT_DOUBLE_EQ(NextClipNorm(2.0, 0.0, 0.5, 0.2), 2 * std::exp(0.1));
  EXPECT_DOUBLE_EQ(NextClipNorm(2.0, 0.5, 0.5, 0.2), 2.0);
}

// On scripted norms 0.1, 0.2, ..., 1.0 every round (no noise in the count
// beyond what is scripted), C settles at the target quantile of them.
TEST(DpAdaptiveClipTest, TheClipNormFindsTheTargetQuantileOfScriptedNorms) {
  for (double gamma : {0.3, 0.5, 0.8}) {
    double clip = 5.0;
    for (int round = 0; round < 300; ++round) {
      int within = 0;
      for (int k = 1; k <= 10; ++k) within += 0.1 * k <= clip ? 1 : 0;
      clip = NextClipNorm(clip, UnclippedShare(within, 10, 0.0, 10), gamma, 0.2);
    }
    EXPECT_NEAR(clip, gamma, 0.1) << "gamma " << gamma;
  }
}

DpFedAvgOptions Options(double z, double clip, int64_t n, int64_t k) {
  DpFedAvgOptions o;
  o.noise_multiplier = z;
  o.clip_norm = clip;
  o.num_clients = n;
  o.expected_clients = k;
  o.seed = 3;
  return o;
}

// Weight 1 per result and the fixed denominator K, whatever the results
// claim: θ + (Δ1 + Δ2) / K.
TEST(DpFedAvgTest, TheMeanUpdateHasFixedWeightsAndTheExpectedDenominator) {
  DpFedAvg dp(MakeWeightedAverage(AggregationMode::kPartial), Options(0.0, 10.0, 100, 4));
  dp.OnGlobalModel(0);
  const FlatParams global = {1, 2, 3};
  ModelSum sum;
  sum.Reset(3);
  sum.Add({2, 2, 3}, 1);  // Δ1 = (1, 0, 0)
  sum.Add({1, 6, 3}, 1);  // Δ2 = (0, 4, 0)
  FlatParams next;
  dp.Aggregate(global, sum, 1000, &next);
  EXPECT_EQ(next, (FlatParams{1.25f, 3.0f, 3.0f}));
  dp.OnGlobalModel(1);
  EXPECT_EQ(dp.rounds(), 1);
  EXPECT_TRUE(std::isinf(dp.Epsilon())) << "no noise: no guarantee";
}

// With no result at all the round still releases noise: sd z C / K per
// coordinate, seeded by (seed, round) alone.
TEST(DpFedAvgTest, TheNoiseHasTheMechanismsSpreadAndComesFromTheSeedAndRound) {
  const size_t d = 200000;
  const FlatParams global(d, 0.0f);
  auto noised = [&](int64_t version, uint64_t seed) {
    DpFedAvgOptions o = Options(2.0, 0.5, 1000, 10);
    o.seed = seed;
    DpFedAvg dp(MakeWeightedAverage(AggregationMode::kPartial), o);
    dp.OnGlobalModel(version);
    ModelSum empty;
    empty.Reset(d);
    FlatParams next;
    dp.Aggregate(global, empty, 0, &next);
    return next;
  };
  const FlatParams a = noised(0, 3);
  double mean = 0, sq = 0;
  for (float v : a) mean += v;
  mean /= d;
  for (float v : a) sq += (v - mean) * (v - mean);
  const double sd = std::sqrt(sq / (d - 1));
  EXPECT_NEAR(mean, 0.0, 5 * 0.1 / std::sqrt(static_cast<double>(d)));
  EXPECT_NEAR(sd / 0.1, 1.0, 0.01);  // z C / K = 2 · 0.5 / 10
  EXPECT_EQ(noised(0, 3), a);
  EXPECT_NE(noised(1, 3), a) << "another round";
  EXPECT_NE(noised(0, 4), a) << "another seed";
}

// dp.noise = secret: the same spread, but from OpenSSL's generator, so the
// seed does not give it away and no two aggregations repeat it; keyed: the
// same spread from the server's key, the same for the same key, another
// for another key, and not the seed's.
TEST(DpFedAvgTest, SecretNoiseHasTheSameSpreadAndNeverRepeats) {
  const size_t d = 100000;
  const FlatParams global(d, 0.0f);
  auto noised = [&](NoiseKind kind, const std::string& key = "") {
    DpFedAvgOptions o = Options(2.0, 0.5, 1000, 10);
    o.noise.kind = kind;
    o.noise.key = key;
    DpFedAvg dp(MakeWeightedAverage(AggregationMode::kPartial), o);
    dp.OnGlobalModel(0);
    ModelSum empty;
    empty.Reset(d);
    FlatParams next;
    dp.Aggregate(global, empty, 0, &next);
    return next;
  };
  const FlatParams a = noised(NoiseKind::kSecret);
  double sq = 0;
  for (float v : a) sq += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(sq / d) / 0.1, 1.0, 0.015);
  EXPECT_NE(noised(NoiseKind::kSecret), a);
  EXPECT_NE(noised(NoiseKind::kSeeded), a) << "not the seeded noise";
  EXPECT_EQ(noised(NoiseKind::kSeeded), noised(NoiseKind::kSeeded));
  const std::string key(32, 'k');
  const FlatParams keyed = noised(NoiseKind::kKeyed, key);
  sq = 0;
  for (float v : keyed) sq += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(sq / d) / 0.1, 1.0, 0.015);
  EXPECT_EQ(noised(NoiseKind::kKeyed, key), keyed) << "whoever holds the key";
  EXPECT_NE(noised(NoiseKind::kKeyed, std::string(32, 'l')), keyed) << "another key";
  EXPECT_NE(noised(NoiseKind::kSeeded), keyed) << "not the seed's";
}

TEST(DpFedAvgTest, AdaptiveClippingMovesTheClipAndCheckpointsIt) {
  DpFedAvgOptions o = Options(0.5, 1.0, 100, 10);
  o.adaptive = true;
  DpFedAvg dp(MakeWeightedAverage(AggregationMode::kPartial), o);
  EXPECT_EQ(dp.options().count_noise, 0.5) << "K / 20";
  // At a larger z the paper's K / 20 would leave nothing for the update.
  DpFedAvgOptions small = o;
  small.noise_multiplier = 1.1;
  EXPECT_EQ(DpFedAvg(MakeWeightedAverage(AggregationMode::kPartial), small).options().count_noise, 1.1);
  dp.OnGlobalModel(0);
  const FlatParams global = {0, 0};
  ModelSum sum;
  sum.Reset(2);
  for (int k = 0; k < 10; ++k) {
    sum.Add({0.1f, 0.0f}, 1);
    dp.Observe(true);  // every update within C: C shrinks
  }
  FlatParams next;
  dp.Aggregate(global, sum, 0, &next);
  EXPECT_LT(dp.ClipNorm(), 1.0);
  EXPECT_GT(dp.ClipNorm(), std::exp(-0.2 * 0.5) * 0.9);
  DpFedAvg restored(MakeWeightedAverage(AggregationMode::kPartial), o);
  restored.LoadState(dp.SaveState());
  EXPECT_EQ(restored.ClipNorm(), dp.ClipNorm());
  EXPECT_THROW(restored.LoadState("{\"clip_norm\": -1, \"inner\": \"\"}"), Error);
  EXPECT_THROW(restored.LoadState("not json"), Error);
}

// Against a published value of the RDP accountant (Opacus's
// compute_dp_sgd_privacy documentation): q = 1%, z = 1.0, 300 steps,
// δ = 1e-5, orders {2, 5, 10, 20, 100} give ε = 2.39 at α = 5. The ledger
// searches orders 2..256, so its ε is at most that.
TEST(DpLedgerTest, AgreesWithAPublishedAccountantValue) {
  const std::vector<double> orders = {2, 5, 10, 20, 100};
  std::vector<double> rdp;
  for (double a : orders) rdp.push_back(SampledGaussianRdp(0.01, 1.0, 300, static_cast<int>(a)));
  const EpsilonAtOrder published = EpsilonFromRdp(orders, rdp, 1e-5);
  EXPECT_NEAR(published.epsilon, 2.39, 0.005);
  EXPECT_EQ(published.order, 5);
  DpFedAvgOptions o = Options(1.0, 1.0, 1000, 10);  // q = 1%
  o.delta = 1e-5;
  const double epsilon = DpEpsilon(o, 300);
  EXPECT_EQ(epsilon, SampledGaussianEpsilon(0.01, 1.0, 300, 1e-5).epsilon);
  EXPECT_LE(epsilon, published.epsilon);
  EXPECT_EQ(DpEpsilon(o, 0), 0.0);
  EXPECT_DOUBLE_EQ(DpDelta(Options(1.0, 1.0, 1000, 10)), 1e-3) << "δ = 1/N by default";
}

TEST(DpLedgerTest, TheTargetStopsBeforeTheRoundThatWouldPassIt) {
  DpFedAvgOptions o = Options(1.0, 1.0, 1000, 10);
  o.target_epsilon = DpEpsilon(o, 5) + 1e-9;  // exactly 5 rounds fit
  DpFedAvg dp(MakeWeightedAverage(AggregationMode::kPartial), o);
  dp.OnGlobalModel(4);
  EXPECT_TRUE(dp.MayRunAnotherRound());
  dp.OnGlobalModel(5);
  EXPECT_FALSE(dp.MayRunAnotherRound());
}

// Distributed DP charges a round by the clients its sum holds, and secure
// aggregation may unmask a sum of fewer than were selected: the server
// checks the fewest before anyone trains, where a check at K would let the
// round pass the target. Each round's encoding is its session's: the noise
// for the fewest honest clients of the invited.
TEST(DpLedgerTest, UnderDistributedDpTheTargetHoldsForTheFewestASumMayHold) {
  // Of n invited, a sum holds at least 4n/5, of whom n/10 may collude.
  const auto colluders = [](int64_t invited) { return invited / 10; };
  const auto make = [&](double target) {
    DpFedAvgOptions o = Options(1.0, 1.0, 1000, 100);
    o.distributed = true;
    o.rounding_beta = 0.60653066;
    o.target_epsilon = target;
    o.fewest_in_sum = [](int64_t selected) { return selected - selected / 5; };
    o.fewest_honest_in_sum = [&](int64_t selected) { return selected - selected / 5 - colluders(selected); };
    auto dp = std::make_unique<DpFedAvg>(MakeWeightedAverage(AggregationMode::kPartial), o);
    dp->SetModelSize(4);
    dp->OnGlobalModel(0);
    const FlatParams global(4, 0.0f);
    for (int64_t round = 1; round <= 3; ++round) {
      dp->Invite(150);
      ModelSum sum;
      sum.Reset(4);
      for (int c = 0; c < 100 + 10 * round; ++c) sum.Add(global, 1);
      FlatParams next;
      dp->Aggregate(global, sum, 0, &next);
      dp->OnGlobalModel(round);
    }
    return dp;
  };
  const auto ledger = make(0);
  const auto release = [&](int64_t round, int64_t invited, int64_t clients) {
    return DdgRelease{ledger->RoundEncoding(round, invited), clients, clients - colluders(invited)};
  };
  std::vector<DdgRelease> rounds = {release(1, 150, 110), release(2, 150, 120), release(3, 150, 130)};
  EXPECT_DOUBLE_EQ(ledger->RoundEncoding(1, 150).noise_sd, 1.0 / std::sqrt(150.0 - 30 - 15));
  EXPECT_DOUBLE_EQ(ledger->Epsilon(), DdgEpsilon(rounds, 0.1, 1e-3).epsilon);
  std::vector<DdgRelease> at_k = rounds, at_fewest = rounds;
  at_k.push_back(release(4, 100, 100));
  at_fewest.push_back(release(4, 100, 80));
  EXPECT_DOUBLE_EQ(ledger->NextEpsilon(), DdgEpsilon(at_k, 0.1, 1e-3).epsilon);
  EXPECT_DOUBLE_EQ(ledger->EpsilonWithNextSum(100, 80), DdgEpsilon(at_fewest, 0.1, 1e-3).epsilon);
  const double k = ledger->NextEpsilon(), fewest = ledger->EpsilonWithNextSum(100, 80);
  ASSERT_LT(k, fewest) << "a sum of fewer clients costs more";
  EXPECT_TRUE(ledger->MayReleaseSumOf(100)) << "no target";

  // Against the server: a client in one round is charged at the costliest
  // (the thinnest sum), without amplification and with the honest noise
  // alone; in every round, at all of them.
  EXPECT_DOUBLE_EQ(ledger->EpsilonAgainstServer(1), DdgEpsilonUnsampled({rounds[0]}, true, 1e-3).epsilon);
  EXPECT_DOUBLE_EQ(ledger->EpsilonAgainstServer(3), DdgEpsilonUnsampled(rounds, true, 1e-3).epsilon);
  EXPECT_DOUBLE_EQ(ledger->EpsilonAgainstServer(9), ledger->EpsilonAgainstServer(3));
  EXPECT_EQ(ledger->EpsilonAgainstServer(0), 0);
  EXPECT_GT(ledger->EpsilonAgainstServer(1), ledger->Epsilon()) << "no amplification, fewer noises";

  const auto dp = make((k + fewest) / 2);
  EXPECT_TRUE(dp->MayRunAnotherRound()) << "a round whose sum held K would fit";
  EXPECT_EQ(dp->FewestInSum(100), 80);
  EXPECT_FALSE(dp->MayReleaseSumOf(100)) << "its sum may hold 80";
  EXPECT_TRUE(dp->MayReleaseSumOf(0)) << "no sum, no cost";

  DpFedAvgOptions central = Options(1.0, 1.0, 1000, 100);
  central.target_epsilon = DpEpsilon(central, 1) / 2;
  DpFedAvg central_dp(MakeWeightedAverage(AggregationMode::kPartial), central);
  EXPECT_TRUE(central_dp.MayReleaseSumOf(1)) << "central DP charges a round alike whoever is in it";
  EXPECT_TRUE(std::isinf(central_dp.EpsilonAgainstServer(1))) << "its server sees the clipped updates";
}

}  // namespace
}  // namespace fedprof
