#include "fedprof/aggregation/fedbuff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

std::shared_ptr<const FlatParams> Model(FlatParams values) {
  return std::make_shared<const FlatParams>(std::move(values));
}

TEST(FedBuffTest, StalenessWeightIsThePapersByDefault) {
  FedBuffOptions o;
  EXPECT_EQ(StalenessWeight(o, 0), 1.0);
  EXPECT_DOUBLE_EQ(StalenessWeight(o, 3), 0.5);  // 1/sqrt(1 + 3)
  EXPECT_DOUBLE_EQ(StalenessWeight(o, 8), 1.0 / 3);
  o.staleness_exponent = 1;
  EXPECT_DOUBLE_EQ(StalenessWeight(o, 3), 0.25);
  o.staleness_exponent = 0;
  EXPECT_EQ(StalenessWeight(o, 1000), 1.0);
  EXPECT_THROW(StalenessWeight(o, -1), Error);
}

// θ' = θ + η Σ n_k s(τ_k) (w_k − θ_{v_k}) / W, by hand.
TEST(FedBuffTest, StepWeighsEachUpdateByItsSamplesAndStaleness) {
  FedBuffOptions o;
  o.server_lr = 0.5;
  const FlatParams global = {10.0f, 20.0f};
  std::vector<BufferedUpdate> buffer = {
      {7, 3, 3, {1.0f, 1.0f}, Model({-1.0f, 0.0f})},  // n 3, s = 1/2: Δ = (2, 1)
      {2, 1, 0, {2.0f, 4.0f}, Model({0.0f, 0.0f})},   // n 1, s = 1: Δ = (2, 4)
  };
  FlatParams next;
  FedBuffStep(o, AggregationMode::kPartial, global, buffer, 100, &next);
  // W = 4: 0.5 (1·2 + 1.5·2) / 4 = 0.625; 0.5 (1·4 + 1.5·1) / 4 = 0.6875.
  EXPECT_FLOAT_EQ(next[0], 10.625f);
  EXPECT_FLOAT_EQ(next[1], 20.6875f);
  FlatParams full;
  FedBuffStep(o, AggregationMode::kFull, global, buffer, 8, &full);  // W = |D| = 8
  EXPECT_FLOAT_EQ(full[0], 10.3125f);
  EXPECT_FLOAT_EQ(full[1], 20.34375f);
  std::swap(buffer[0], buffer[1]);  // the order results arrived in changes no bit
  FlatParams swapped;
  FedBuffStep(o, AggregationMode::kPartial, global, buffer, 100, &swapped);
  EXPECT_EQ(swapped, next);
}

// All fresh at η = 1: the step is the exact weighted average of the models,
// as synchronous averaging computes it.
TEST(FedBuffTest, FreshBufferAtUnitRateIsTheAverage) {
  const FlatParams global = {0.1f, -3.0f, 7.0f};
  std::vector<BufferedUpdate> buffer = {{0, 5, 0, {0.3f, 1.1f, 2.0f}, Model(global)},
                                        {1, 7, 0, {-0.7f, 0.9f, 1e-7f}, Model(global)}};
  ModelSum sum;
  sum.Reset(3);
  for (const BufferedUpdate& u : buffer) sum.Add(u.params, u.num_samples);
  for (AggregationMode mode : {AggregationMode::kPartial, AggregationMode::kFull}) {
    FlatParams step, average;
    FedBuffStep(FedBuffOptions(), mode, global, buffer, 40, &step);
    Average(mode, global, sum, 40, &average);
    EXPECT_EQ(step, average);
  }
  FedBuffOptions slower;
  slower.server_lr = 0.5;
  FlatParams half;
  FedBuffStep(slower, AggregationMode::kPartial, global, buffer, 40, &half);
  FlatParams average;
  Average(AggregationMode::kPartial, global, sum, 40, &average);
  for (size_t i = 0; i < global.size(); ++i) EXPECT_NEAR(half[i], (global[i] + average[i]) / 2, 1e-6);
}

TEST(FedBuffTest, RefusesAnUpdateOfAnotherSize) {
  std::vector<BufferedUpdate> buffer = {{4, 1, 0, {1.0f}, Model({0.0f, 0.0f})}};
  FlatParams next;
  try {
    FedBuffStep(FedBuffOptions(), AggregationMode::kPartial, {0.0f, 0.0f}, buffer, 1, &next);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("client 4"), std::string::npos) << e.what();
  }
  FedBuffOptions none;
  none.buffer = 0;
  EXPECT_THROW(MakeFedBuff(AggregationMode::kPartial, none), Error);
}

}  // namespace
}  // namespace fedprof
