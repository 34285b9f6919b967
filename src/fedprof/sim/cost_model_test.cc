#include "fedprof/sim/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fedprof/config/config.h"

namespace fedprof {
namespace {

// The cost.* options at their defaults (the option table's).
RunOptions::Cost DefaultCost() { return Config().options().cost; }

constexpr double kMnistBitsPerSample = 28 * 28 * 8;  // BPS of a 28x28 image

TEST(CostModelTest, MatchesEquations29To34) {
  RunOptions::Cost o = DefaultCost();
  o.snr_db = 10;  // linear 10, log2(11) bits/s/Hz
  o.cycles_per_bit = 400;
  const double model_bits = 61706 * 32.0;
  const CostModel model(o, kMnistBitsPerSample, model_bits);
  const ClientSpec spec{2.0, 0.5};
  const ProfilingLoad plain = PlainProfiling(120);
  const ClientCost c = model.Cost(spec, 600, 5, &plain);
  const double rate = 0.5e6 * std::log2(11.0);
  EXPECT_DOUBLE_EQ(c.comm_s, 3 * model_bits / rate);
  EXPECT_DOUBLE_EQ(c.train_s, 5 * 600 * 6272.0 * 400 / 2e9);
  EXPECT_DOUBLE_EQ(c.rp_gen_s, c.train_s / 5);
  EXPECT_DOUBLE_EQ(c.rp_up_s, 64 * 120 / (0.5 * rate));
  const double expected_j =
      0.75 * (c.comm_s + c.rp_up_s) + 0.7 * 8.0 * (c.train_s + c.rp_gen_s);
  EXPECT_DOUBLE_EQ(c.energy_j, expected_j);
  const ClientCost no_profile = model.Cost(spec, 600, 5);
  EXPECT_EQ(no_profile.rp_gen_s, 0);
  EXPECT_LT(no_profile.energy_j, c.energy_j);
}

TEST(CostModelTest, ProfilingCostIsInTheOrderOfThePapersTable4) {
  // EMNIST setup (Table 5): 500 clients of ~560 samples, K = 25, LeNet-5,
  // s ~ N(1, 0.2^2) GHz, bw ~ N(1, 0.3^2) MHz. The papers report 1.340 s and
  // 6.74e-3 Wh of profiling per round (Table 4).
  const RunOptions::Cost o = DefaultCost();
  const CostModel model(o, kMnistBitsPerSample, 61706 * 32.0);
  const auto specs = DrawClientSpecs(25, o, 1);
  const ProfilingLoad plain = PlainProfiling(120);
  double max_rp = 0, energy_rp = 0;
  for (const auto& s : specs) {
    const ClientCost with = model.Cost(s, 560, 5, &plain);
    const ClientCost without = model.Cost(s, 560, 5);
    max_rp = std::max(max_rp, with.rp_gen_s + with.rp_up_s);
    energy_rp += with.energy_j - without.energy_j;
  }
  EXPECT_GT(max_rp, 1.340 / 3);
  EXPECT_LT(max_rp, 1.340 * 3);
  EXPECT_GT(energy_rp / 3600, 6.74e-3 / 3);
  EXPECT_LT(energy_rp / 3600, 6.74e-3 * 3);
}

// A client algorithm's values travel as the model does (Eq. 29): SCAFFOLD's
// c down and Δc_i up, each the model's size, double T_comm and its energy;
// none leaves the cost as it was.
TEST(CostModelTest, AClientAlgorithmsValuesArePricedAsTheModelIs) {
  const RunOptions::Cost o = DefaultCost();
  const double model_bits = 61706 * 32.0;
  const CostModel model(o, kMnistBitsPerSample, model_bits);
  const ClientSpec spec{1.5, 0.8};
  const ClientCost plain = model.Cost(spec, 560, 5);
  const AlgorithmLoad none;
  const ClientCost with_none = model.Cost(spec, 560, 5, nullptr, nullptr, &none);
  EXPECT_EQ(with_none.comm_s, plain.comm_s);
  EXPECT_EQ(with_none.energy_j, plain.energy_j);
  const AlgorithmLoad scaffold{model_bits, model_bits};
  const ClientCost c = model.Cost(spec, 560, 5, nullptr, nullptr, &scaffold);
  EXPECT_DOUBLE_EQ(c.comm_s, 2 * plain.comm_s);
  EXPECT_DOUBLE_EQ(c.energy_j - plain.energy_j, o.p_trans * plain.comm_s);
  EXPECT_EQ(c.train_s, plain.train_s);
  const AlgorithmLoad up_only{0, model_bits};  // a sent vector goes up the half-bandwidth uplink
  EXPECT_DOUBLE_EQ(model.Cost(spec, 560, 5, nullptr, nullptr, &up_only).comm_s - plain.comm_s,
                   2 * model_bits / model.DownlinkBitsPerSecond(spec));
}

// Secure matching (App. C.2) in the cost model: the encrypted reference
// comes down, one ciphertext goes up, and the client's homomorphic work adds
// to T_RPgen; all of it shows in time and energy.
TEST(CostModelTest, SecureMatchingAddsItsTransfersAndWork) {
  const RunOptions::Cost o = DefaultCost();
  const CostModel model(o, kMnistBitsPerSample, 61706 * 32.0);
  const ClientSpec spec{1.0, 1.0};
  const ProfilingLoad plain = PlainProfiling(120);
  const ProfilingLoad secure = SecureProfiling(120, 2048);
  EXPECT_DOUBLE_EQ(secure.upload_bits, 4096);
  EXPECT_DOUBLE_EQ(secure.download_bits, 2048 + 3 * 120 * 4096.0);
  EXPECT_DOUBLE_EQ(secure.extra_cycles, 120 * 4.8e6);
  const ClientCost p = model.Cost(spec, 560, 5, &plain);
  const ClientCost s = model.Cost(spec, 560, 5, &secure);
  const double rate = 1e6 * std::log2(11.0);
  EXPECT_DOUBLE_EQ(s.rp_down_s, secure.download_bits / rate);
  EXPECT_DOUBLE_EQ(s.rp_gen_s - p.rp_gen_s, 120 * 4.8e6 / 1e9);
  EXPECT_GT(s.total_s(), p.total_s());
  EXPECT_GT(s.energy_j, p.energy_j);
  EXPECT_GT(SecureProfiling(120, 3072).extra_cycles, secure.extra_cycles);
}

TEST(CostModelTest, ASecureAggregationSessionIsPricedAsTransfersAndWork) {
  const RunOptions::Cost o = DefaultCost();
  const CostModel model(o, kMnistBitsPerSample, 61706 * 32.0);
  const ClientSpec spec{2.0, 0.5};
  const SessionLoad session{8e6, 2e6, 3e8};
  const ClientCost bare = model.Cost(spec, 600, 1);
  const ClientCost c = model.Cost(spec, 600, 1, nullptr, &session);
  const double rate = 0.5e6 * std::log2(11.0);
  const double transfer_s = 8e6 / (0.5 * rate) + 2e6 / rate;
  EXPECT_DOUBLE_EQ(c.secagg_s, transfer_s + 3e8 / 2e9);
  EXPECT_DOUBLE_EQ(c.total_s(), bare.total_s() + c.secagg_s);
  EXPECT_DOUBLE_EQ(c.energy_j, bare.energy_j + 0.75 * transfer_s + 0.7 * 8.0 * 3e8 / 2e9);
}

TEST(CostModelTest, ClientSpecsFollowTheConfiguredNormals) {
  RunOptions::Cost o = DefaultCost();
  o.speed_mean = 3.0;
  o.speed_sd = 0.4;
  o.bandwidth_mean = 2.0;
  o.bandwidth_sd = 0.2;
  const auto specs = DrawClientSpecs(20000, o, 5);
  double s = 0, s2 = 0, b = 0;
  for (const auto& c : specs) {
    s += c.speed_ghz;
    s2 += c.speed_ghz * c.speed_ghz;
    b += c.bandwidth_mhz;
  }
  const double n = specs.size();
  EXPECT_NEAR(s / n, 3.0, 0.02);
  EXPECT_NEAR(std::sqrt(s2 / n - (s / n) * (s / n)), 0.4, 0.01);
  EXPECT_NEAR(b / n, 2.0, 0.01);
  EXPECT_EQ(DrawClientSpecs(10, o, 5)[3].speed_ghz, specs[3].speed_ghz);
  // Draws never fall to zero or below.
  o.speed_sd = 5;
  for (const auto& c : DrawClientSpecs(1000, o, 6)) EXPECT_GE(c.speed_ghz, 0.3);
}

}  // namespace
}  // namespace fedprof
