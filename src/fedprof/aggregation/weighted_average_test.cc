#include <gtest/gtest.h>

#include "fedprof/aggregation/aggregator.h"

namespace fedprof {
namespace {

FitResult Result(int id, int64_t n, FlatParams w) {
  FitResult r;
  r.client_id = id;
  r.ok = true;
  r.num_samples = n;
  r.params = std::move(w);
  return r;
}

TEST(WeightedAverageTest, FullAggregationCountsUnselectedClientsAsGlobal) {
  // N = 4 clients with |D| = 10 + 20 + 30 + 40 = 100; clients 0 and 2 trained.
  const FlatParams global = {1.0f, -2.0f};
  const FitResult r0 = Result(0, 10, {3.0f, 0.0f});
  const FitResult r2 = Result(2, 30, {-1.0f, 2.0f});
  FlatParams next;
  MakeWeightedAverage(AggregationMode::kFull)->Aggregate(global, {&r0, &r2}, 100, &next);
  // 0.1*w0 + 0.3*w2 + 0.6*global
  EXPECT_FLOAT_EQ(next[0], 0.1f * 3 + 0.3f * -1 + 0.6f * 1);
  EXPECT_FLOAT_EQ(next[1], 0.1f * 0 + 0.3f * 2 + 0.6f * -2);
}

TEST(WeightedAverageTest, PartialAggregationWeightsBySelectedData) {
  const FlatParams global = {100.0f};
  const FitResult r0 = Result(0, 10, {3.0f});
  const FitResult r2 = Result(2, 30, {-1.0f});
  FlatParams next;
  MakeWeightedAverage(AggregationMode::kPartial)->Aggregate(global, {&r0, &r2}, 100, &next);
  EXPECT_FLOAT_EQ(next[0], 0.25f * 3 + 0.75f * -1);  // global plays no part
}

TEST(WeightedAverageTest, NoResultsKeepsTheGlobalModel) {
  const FlatParams global = {1.5f, 2.5f};
  for (auto mode : {AggregationMode::kFull, AggregationMode::kPartial}) {
    FlatParams next;
    MakeWeightedAverage(mode)->Aggregate(global, {}, 100, &next);
    EXPECT_EQ(next, global);
  }
}

TEST(WeightedAverageTest, AllClientsSelectedMakesFullEqualPartial) {
  const FlatParams global = {0.0f, 0.0f};
  const FitResult a = Result(0, 25, {1.0f, 2.0f});
  const FitResult b = Result(1, 75, {5.0f, -2.0f});
  FlatParams full, partial;
  AverageFull(global, {&a, &b}, 100, &full);
  AveragePartial(global, {&a, &b}, &partial);
  EXPECT_FLOAT_EQ(full[0], partial[0]);
  EXPECT_FLOAT_EQ(full[1], partial[1]);
}

}  // namespace
}  // namespace fedprof
