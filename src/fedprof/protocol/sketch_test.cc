#include "fedprof/protocol/sketch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

// Small integers: every sum the sketch makes is exact in float, so the
// linearity checks below can compare bits, not tolerances.
FlatParams SmallIntegers(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> value(-50, 50);
  FlatParams v(n);
  for (float& x : v) x = static_cast<float>(value(rng));
  return v;
}

FlatParams Gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> value(0.0f, 1.0f);
  FlatParams v(n);
  for (float& x : v) x = value(rng);
  return v;
}

FlatParams Plus(const FlatParams& a, const FlatParams& b, float b_scale = 1.0f) {
  FlatParams out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b_scale * b[i];
  return out;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(SketchTest, RefusesNoBucketsAndModelsOfDifferentSizes) {
  const FlatParams a = {1, 2, 3}, b = {1, 2};
  EXPECT_THROW(UpdateSketch(a, b, 4), Error);
  EXPECT_THROW(UpdateSketch(a, a, 0), Error);
  EXPECT_THROW(UpdateSketch(a, a, -3), Error);
}

TEST(SketchTest, HasTheAskedSizeAndIsZeroForNoUpdate) {
  const FlatParams global = Gaussian(1000, 1);
  for (int dim : {1, 7, 64, 4096}) {
    const std::vector<float> sketch = UpdateSketch(global, global, dim);
    ASSERT_EQ(sketch.size(), static_cast<size_t>(dim));
    for (float s : sketch) EXPECT_EQ(s, 0.0f);
  }
  EXPECT_EQ(UpdateSketch({}, {}, 16), std::vector<float>(16, 0.0f));
}

TEST(SketchTest, IsAFunctionOfTheUpdateAlone) {
  const FlatParams update = SmallIntegers(500, 2);
  const FlatParams base_a = SmallIntegers(500, 3), base_b = SmallIntegers(500, 4);
  const std::vector<float> a = UpdateSketch(Plus(base_a, update), base_a, 32);
  // The same update from another global model, and the same call again:
  // clients that made the same change must look the same to the server.
  EXPECT_EQ(a, UpdateSketch(Plus(base_b, update), base_b, 32));
  EXPECT_EQ(a, UpdateSketch(Plus(base_a, update), base_a, 32));
}

TEST(SketchTest, IsLinearInTheUpdate) {
  const size_t n = 300;
  const FlatParams global = SmallIntegers(n, 5);
  const FlatParams u = SmallIntegers(n, 6), v = SmallIntegers(n, 7);
  const std::vector<float> su = UpdateSketch(Plus(global, u), global, 16);
  const std::vector<float> sv = UpdateSketch(Plus(global, v), global, 16);
  const std::vector<float> sum = UpdateSketch(Plus(Plus(global, u), v), global, 16);
  const std::vector<float> scaled = UpdateSketch(Plus(global, u, -3.0f), global, 16);
  for (int b = 0; b < 16; ++b) {
    EXPECT_EQ(sum[b], su[b] + sv[b]) << "bucket " << b;
    EXPECT_EQ(scaled[b], -3.0f * su[b]) << "bucket " << b;
  }
}

// Each value lands in exactly one bucket with sign ±1: a change to one value
// always changes the sketch, by exactly that change.
TEST(SketchTest, OneValueMovesOneBucketByItsChange) {
  const size_t n = 2000;
  const int dim = 64;
  const FlatParams global(n, 0.0f);
  std::vector<int> per_bucket(dim, 0);
  int positive = 0;
  for (size_t i = 0; i < n; ++i) {
    FlatParams w = global;
    w[i] = 2.5f;
    const std::vector<float> sketch = UpdateSketch(w, global, dim);
    int touched = -1;
    for (int b = 0; b < dim; ++b) {
      if (sketch[b] == 0.0f) continue;
      ASSERT_EQ(touched, -1) << "value " << i << " lands in two buckets";
      touched = b;
      ASSERT_EQ(std::fabs(sketch[b]), 2.5f) << "value " << i;
      positive += sketch[b] > 0;
    }
    ASSERT_NE(touched, -1) << "value " << i << " is not sketched";
    ++per_bucket[touched];
  }
  // The hash spreads values over the buckets and signs (about 31 each).
  for (int b = 0; b < dim; ++b) {
    EXPECT_GT(per_bucket[b], 10) << "bucket " << b;
    EXPECT_LT(per_bucket[b], 60) << "bucket " << b;
  }
  EXPECT_GT(positive, 900);
  EXPECT_LT(positive, 1100);
}

TEST(SketchTest, DifferentUpdatesGiveDifferentSketches) {
  const FlatParams global = Gaussian(1000, 8);
  const FlatParams a = Plus(global, Gaussian(1000, 9));
  const FlatParams b = Plus(global, Gaussian(1000, 10));
  EXPECT_NE(UpdateSketch(a, global, 32), UpdateSketch(b, global, 32));
}

// What clustered sampling relies on: inner products of sketches estimate
// those of the updates (unbiased; relative spread about sqrt(2 / dim)).
TEST(SketchTest, InnerProductsEstimateThoseOfTheUpdates) {
  const size_t n = 20000;
  const int dim = 1024;
  const FlatParams global(n, 0.0f);
  const FlatParams u = Gaussian(n, 11);
  FlatParams v = Plus(u, Gaussian(n, 12), 0.5f);  // correlated with u
  const std::vector<float> su = UpdateSketch(u, global, dim);
  const std::vector<float> sv = UpdateSketch(v, global, dim);
  const std::vector<float> sw = UpdateSketch(Gaussian(n, 13), global, dim);
  const double uu = Dot(u, u), uv = Dot(u, v);
  EXPECT_NEAR(Dot(su, su) / uu, 1.0, 0.2);
  EXPECT_NEAR(Dot(su, sv) / uv, 1.0, 0.2);
  // Independent updates: near-orthogonal sketches.
  EXPECT_LT(std::fabs(Dot(su, sw)) / uu, 0.2);
}

}  // namespace
}  // namespace fedprof
