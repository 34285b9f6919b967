#include "fedprof/privacy/rdp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

TEST(RdpTest, UnsampledGaussianIsAlphaOverTwoSigmaSquared) {
  EXPECT_NEAR(SampledGaussianRdp(1.0, 2.5, 1, 7), 7 / (2 * 2.5 * 2.5), 1e-12);
  EXPECT_NEAR(SampledGaussianRdp(1.0, 1.3, 10, 2), 10 * 2 / (2 * 1.3 * 1.3), 1e-12);
  EXPECT_EQ(SampledGaussianRdp(0.0, 1.0, 100, 5), 0.0);
}

TEST(RdpTest, AgreesWithPublishedSampledGaussianValues) {
  // The reference RDP accountant's values for q = 0.01, σ = 2.5, 50 steps
  // (dp_accounting's rdp_privacy_accountant_test, integer orders).
  EXPECT_NEAR(SampledGaussianRdp(0.01, 2.5, 50, 5) / 2.18075656e-03, 1.0, 1e-4);
  EXPECT_NEAR(SampledGaussianRdp(0.01, 2.5, 50, 50) / 2.38460375e-02, 1.0, 1e-4);
  EXPECT_NEAR(SampledGaussianRdp(0.01, 2.5, 50, 100) / 1.67416308e02, 1.0, 1e-4);
}

TEST(RdpTest, ConversionToEpsilonDelta) {
  // Constant RDP 1.1 over orders 2..32 at δ = 1e-5: ε = 1.32783806176 at
  // order 32 (the same reference tests).
  std::vector<double> orders, rdp;
  for (int a = 2; a <= 32; ++a) {
    orders.push_back(a);
    rdp.push_back(1.1);
  }
  const EpsilonAtOrder e = EpsilonFromRdp(orders, rdp, 1e-5);
  EXPECT_NEAR(e.epsilon, 1.32783806176, 1e-9);
  EXPECT_EQ(e.order, 32);
}

TEST(RdpTest, EpsilonMovesTheRightWay) {
  const double base = SampledGaussianEpsilon(0.01, 1.1, 1000, 1e-5).epsilon;
  EXPECT_GT(base, 0);
  EXPECT_LT(SampledGaussianEpsilon(0.01, 2.0, 1000, 1e-5).epsilon, base);   // more noise
  EXPECT_GT(SampledGaussianEpsilon(0.01, 1.1, 4000, 1e-5).epsilon, base);   // more steps
  EXPECT_GT(SampledGaussianEpsilon(0.05, 1.1, 1000, 1e-5).epsilon, base);   // more sampling
  EXPECT_TRUE(std::isinf(SampledGaussianEpsilon(0.01, 0.0, 10, 1e-5).epsilon));
  EXPECT_THROW(SampledGaussianEpsilon(1.5, 1.0, 10, 1e-5), Error);
  EXPECT_THROW(SampledGaussianEpsilon(0.1, 1.0, 10, 0), Error);
}

// Nothing released (0 steps), or no record ever sampled (q = 0): the
// output does not depend on the data, so ε = 0, not the conversion's
// log(1/δ)-sized bound.
TEST(RdpTest, NoReleaseIsNoLoss) {
  for (double delta : {1e-5, 1e-6, 0.1}) {
    const EpsilonAtOrder none = SampledGaussianEpsilon(0.01, 1.1, 0, delta);
    EXPECT_EQ(none.epsilon, 0.0) << delta;
    EXPECT_EQ(none.order, 0.0);
    EXPECT_EQ(SampledGaussianEpsilon(0.0, 1.1, 1000, delta).epsilon, 0.0) << delta;
  }
  EXPECT_EQ(SampledGaussianEpsilon(0.5, 0.0, 0, 1e-5).epsilon, 0.0);  // no noise, no release
  EXPECT_GT(SampledGaussianEpsilon(0.01, 1.1, 1, 1e-5).epsilon, 0.0);   // one release
}

}  // namespace
}  // namespace fedprof
