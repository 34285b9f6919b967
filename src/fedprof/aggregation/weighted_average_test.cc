#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/core/error.h"

namespace fedprof {
namespace {

ModelSum SumOf(const std::vector<std::pair<int64_t, FlatParams>>& results) {
  ModelSum sum;
  sum.Reset(results.empty() ? 0 : results[0].second.size());
  for (const auto& [n, w] : results) sum.Add(w, n);
  return sum;
}

TEST(WeightedAverageTest, FullAggregationCountsUnselectedClientsAsGlobal) {
  // N = 4 clients with |D| = 10 + 20 + 30 + 40 = 100; clients 0 and 2 trained.
  const FlatParams global = {1.0f, -2.0f};
  const ModelSum sum = SumOf({{10, {3.0f, 0.0f}}, {30, {-1.0f, 2.0f}}});
  FlatParams next;
  MakeWeightedAverage(AggregationMode::kFull)->Aggregate(global, sum, 100, &next);
  // 0.1*w0 + 0.3*w2 + 0.6*global
  EXPECT_FLOAT_EQ(next[0], 0.1f * 3 + 0.3f * -1 + 0.6f * 1);
  EXPECT_FLOAT_EQ(next[1], 0.1f * 0 + 0.3f * 2 + 0.6f * -2);
}

TEST(WeightedAverageTest, PartialAggregationWeightsBySelectedData) {
  const FlatParams global = {100.0f};
  const ModelSum sum = SumOf({{10, {3.0f}}, {30, {-1.0f}}});
  FlatParams next;
  MakeWeightedAverage(AggregationMode::kPartial)->Aggregate(global, sum, 100, &next);
  EXPECT_FLOAT_EQ(next[0], 0.25f * 3 + 0.75f * -1);  // global plays no part
}

TEST(WeightedAverageTest, NoResultsKeepsTheGlobalModel) {
  const FlatParams global = {1.5f, 2.5f};
  ModelSum empty;
  empty.Reset(2);
  for (auto mode : {AggregationMode::kFull, AggregationMode::kPartial}) {
    FlatParams next;
    MakeWeightedAverage(mode)->Aggregate(global, empty, 100, &next);
    EXPECT_EQ(next, global);
  }
}

TEST(WeightedAverageTest, AllClientsSelectedMakesFullEqualPartial) {
  const FlatParams global = {0.0f, 0.0f};
  const ModelSum sum = SumOf({{25, {1.0f, 2.0f}}, {75, {5.0f, -2.0f}}});
  FlatParams full, partial;
  AverageFull(global, sum, 100, &full);
  AveragePartial(global, sum, &partial);
  EXPECT_FLOAT_EQ(full[0], partial[0]);
  EXPECT_FLOAT_EQ(full[1], partial[1]);
}

// The point of the exact sum: any arrival order, and any grouping into
// partial sums merged later (threads, ranks), gives the same bits.
TEST(ModelSumTest, OrderAndGroupingNeverChangeABit) {
  std::mt19937_64 gen(7);
  std::normal_distribution<float> weight(0.0f, 0.3f);
  std::vector<std::pair<int64_t, FlatParams>> results;
  for (int k = 0; k < 40; ++k) {
    FlatParams w(257);
    for (float& v : w) v = weight(gen) * (k % 5 == 0 ? 1e-6f : 1.0f);
    results.emplace_back(1 + static_cast<int64_t>(gen() % 5000), std::move(w));
  }
  const FlatParams global(257, 0.25f);
  FlatParams reference;
  AveragePartial(global, SumOf(results), &reference);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(results.begin(), results.end(), gen);
    // Three groups of uneven size, merged in a shuffled order.
    ModelSum parts[3];
    for (auto& p : parts) p.Reset(257);
    for (size_t i = 0; i < results.size(); ++i) {
      parts[(i * i + trial) % 3].Add(results[i].second, results[i].first);
    }
    ModelSum merged;
    merged.Reset(257);
    for (int g : {2, 0, 1}) merged.Merge(ModelSum::Parse(parts[g].Serialize(), "test"));
    FlatParams next;
    AveragePartial(global, merged, &next);
    ASSERT_EQ(next, reference) << "trial " << trial;
    EXPECT_EQ(merged.count(), 40);
  }
  // And the average is the weighted mean to float precision.
  double num = 0, den = 0;
  for (const auto& [n, w] : results) {
    num += static_cast<double>(n) * w[3];
    den += static_cast<double>(n);
  }
  EXPECT_FLOAT_EQ(reference[3], static_cast<float>(num / den));
}

// Each value is held to the nearest multiple of 2^-64, whatever its size.
TEST(ModelSumTest, HoldsValuesToTheNearestTwoToTheMinus64) {
  for (float v : {0.0f, 1e-30f, 3e-20f, 1e-10f, 0.3f, -7.5f, 123456.789f, -5e8f, 1.0995e12f / 2}) {
    ModelSum sum;
    sum.Reset(1);
    sum.Add({v}, 1);
    const long double exact = static_cast<long double>(v);
    EXPECT_LE(std::fabs(static_cast<long double>(sum.Centered(0, 0.0f)) - exact),
              std::ldexp(1.0L, -65) + std::fabs(exact) * std::ldexp(1.0L, -53))
        << v;
    ExactSum e;
    e.Add(-static_cast<double>(v));
    e.Add(static_cast<double>(v));
    EXPECT_EQ(e.value(), 0.0) << v;
  }
  ExactSum half;  // a tie (2^-65) rounds away from zero, to one unit
  half.Add(std::ldexp(1.0, -65));
  EXPECT_EQ(half.value(), std::ldexp(1.0, -64));
}

TEST(ModelSumTest, RefusesWhatItCannotHoldExactly) {
  ModelSum sum;
  sum.Reset(2);
  EXPECT_THROW(sum.Add({1.0f}, 1), Error);                  // wrong size
  EXPECT_THROW(sum.Add({1.0f, 2.0f}, 0), Error);            // no weight
  EXPECT_THROW(sum.Add({1.0f, NAN}, 1), Error);             // not finite
  EXPECT_THROW(sum.Add({1.0f, 2e6f}, 1 << 20), Error);      // beyond 2^40
  EXPECT_EQ(sum.count(), 0) << "a refused model leaves the sum unchanged";
  EXPECT_THROW(ModelSum::Parse("short", "test"), Error);
  EXPECT_THROW(ModelSum::Parse(std::string(16 + 15, '\0'), "test"), Error);
  ExactSum loss;
  loss.Add(0.1);
  loss.Add(0.2);
  loss.Add(-0.05);
  EXPECT_DOUBLE_EQ(loss.value(), 0.25);
  EXPECT_THROW(loss.Add(INFINITY), Error);
}

}  // namespace
}  // namespace fedprof
