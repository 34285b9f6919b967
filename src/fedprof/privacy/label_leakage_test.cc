#include "fedprof/privacy/label_leakage.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

std::vector<double> Uniform(int n) { return std::vector<double>(n, 1.0 / n); }

TEST(LabelLeakageTest, PapersCheckValue) {
  // N = 10 classes, K = 8 labels: |B| = 24,310 and H(B|P_uni) = 13.860 bits.
  EXPECT_EQ(NumBatchTypes(10, 8), 24310.0);
  EXPECT_NEAR(BatchEntropyBits(Uniform(10), 8), 13.860, 5e-4);
}

TEST(LabelLeakageTest, ClosedFormsForSmallCases) {
  // One label: the batch is the label, H = log2 N.
  EXPECT_NEAR(BatchEntropyBits(Uniform(10), 1), std::log2(10.0), 1e-12);
  // Two labels over two classes: {00, 01, 11} with 1/4, 1/2, 1/4: 1.5 bits.
  EXPECT_NEAR(BatchEntropyBits(Uniform(2), 2), 1.5, 1e-12);
  EXPECT_EQ(NumBatchTypes(2, 2), 3.0);
  // A certain label leaves no uncertainty.
  EXPECT_NEAR(BatchEntropyBits({1.0, 0.0, 0.0}, 5), 0.0, 1e-12);
}

TEST(LabelLeakageTest, KnowingASkewedDistributionLeaks) {
  const std::vector<double> skewed = {0.5, 0.2, 0.1, 0.1, 0.1};
  const double h_true = BatchEntropyBits(skewed, 4);
  const double h_uni = BatchEntropyBits(Uniform(5), 4);
  EXPECT_LT(h_true, h_uni);  // L_s > 0 (Eq. 28)
}

TEST(LabelLeakageTest, QueryLeakageVanishesWithManyBatches) {
  // Lemma 2: H(B|C_U) -> H(B|P_true) as U grows.
  const std::vector<double> p = {0.6, 0.3, 0.1};
  const double h_true = BatchEntropyBits(p, 3);
  const double h_many = EmpiricalBatchEntropyBits(p, 3, 200000, 1);
  EXPECT_NEAR(h_many, h_true, 0.01);
  // Few batches: at most log2 U bits, far below H(B|P_true) for large K.
  const double h_few = EmpiricalBatchEntropyBits(Uniform(10), 8, 16, 1);
  EXPECT_LE(h_few, 4.0 + 1e-12);
  EXPECT_EQ(EmpiricalBatchEntropyBits(p, 3, 1000, 7), EmpiricalBatchEntropyBits(p, 3, 1000, 7));
}

TEST(LabelLeakageTest, BadInputIsRefused) {
  EXPECT_THROW(BatchEntropyBits({0.5, 0.6}, 2), Error);
  EXPECT_THROW(BatchEntropyBits(Uniform(10), 0), Error);
  EXPECT_THROW(BatchEntropyBits(Uniform(10), 600), Error);  // |B| far above the limit
  EXPECT_THROW(EmpiricalBatchEntropyBits(Uniform(3), 2, 0, 1), Error);
}

}  // namespace
}  // namespace fedprof
