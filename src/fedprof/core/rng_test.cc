#include "fedprof/core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fedprof/core/thread_pool.h"

namespace fedprof {
namespace {

TEST(RngTest, StreamsDependOnlyOnSeedAndTags) {
  Rng a = MakeRng(7, Stream::kSelection, {3});
  Rng b = MakeRng(7, Stream::kSelection, {3});
  Rng c = MakeRng(7, Stream::kSelection, {4});
  Rng d = MakeRng(8, Stream::kSelection, {3});
  const uint64_t first = a();
  EXPECT_EQ(first, b());
  EXPECT_NE(first, c());
  EXPECT_NE(first, d());
}

// One draw per key: keyed like MakeRng, uniform, and uncorrelated between
// neighbouring keys.
TEST(RngTest, HashUniformIsKeyedAndUniform) {
  EXPECT_EQ(HashUniform01(7, Stream::kAvailability, {3, 1}), HashUniform01(7, Stream::kAvailability, {3, 1}));
  EXPECT_NE(HashUniform01(7, Stream::kAvailability, {3, 1}), HashUniform01(7, Stream::kAvailability, {3, 2}));
  EXPECT_NE(HashUniform01(7, Stream::kAvailability, {3}), HashUniform01(7, Stream::kSelection, {3}));
  const int n = 200000;
  double sum = 0, lag = 0, previous = 0.5;
  int buckets[10] = {};
  for (int i = 0; i < n; ++i) {
    const double u = HashUniform01(1, Stream::kAvailability,
                                   {static_cast<uint64_t>(i / 100), static_cast<uint64_t>(i % 100)});
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    lag += (u - 0.5) * (previous - 0.5);
    previous = u;
    ++buckets[static_cast<int>(u * 10)];
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(lag / n, 0.0, 0.002);  // 1/12 would be full correlation
  for (int b : buckets) EXPECT_NEAR(b, n / 10, 600);
}

TEST(RngTest, UniformAndNormalMoments) {
  Rng rng = MakeRng(1, Stream::kNoise);
  const int n = 200000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = Uniform01(rng);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    su += u;
    const double z = StandardNormal(rng);
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
}

TEST(RngTest, DirichletMomentsAndTinyConcentrations) {
  // Dir(a, ..., a) over n: mean 1/n, variance (n - 1) / (n^2 (n a + 1)).
  for (double a : {0.1, 0.5, 1.0, 3.0}) {
    Rng rng = MakeRng(11, Stream::kPartition);
    const int n = 4, draws = 20000;
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < draws; ++i) {
      const std::vector<double> p = SymmetricDirichlet(rng, a, n);
      double total = 0;
      for (double v : p) total += v;
      ASSERT_NEAR(total, 1.0, 1e-12);
      sum += p[0];
      sum_sq += p[0] * p[0];
    }
    const double mean = sum / draws, var = sum_sq / draws - mean * mean;
    EXPECT_NEAR(mean, 0.25, 0.01) << "alpha " << a;
    EXPECT_NEAR(var, 3.0 / (16.0 * (n * a + 1)), 0.1 * 3.0 / (16.0 * (n * a + 1))) << "alpha " << a;
  }
  // A concentration whose Gamma draws underflow a double still sums to 1.
  Rng rng = MakeRng(12, Stream::kPartition);
  for (int i = 0; i < 100; ++i) {
    const std::vector<double> p = SymmetricDirichlet(rng, 1e-4, 10);
    double total = 0;
    for (double v : p) {
      ASSERT_TRUE(std::isfinite(v));
      total += v;
    }
    ASSERT_NEAR(total, 1.0, 1e-12);
  }
}

TEST(RngTest, PermutationIsAPermutation) {
  Rng rng = MakeRng(3, Stream::kPartition);
  std::vector<int64_t> p = Permutation(rng, 1000);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(p, sorted);
}

TEST(ThreadPoolTest, RunsEveryIndexOnceAndRethrows) {
  ThreadPool pool(2);
  std::vector<int> hits(1000, 0);
  pool.ParallelFor(1000, [&](int64_t i, int worker) {
    ASSERT_GE(worker, 0);
    ASSERT_LT(worker, pool.size());
    hits[i] += 1;
  });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000);
  EXPECT_THROW(pool.ParallelFor(10, [](int64_t i, int) {
                 if (i == 5) throw std::runtime_error("boom");
               }),
               std::runtime_error);
  // The pool still works after an exception.
  int64_t sum = 0;
  std::mutex m;
  pool.ParallelFor(100, [&](int64_t i, int) {
    std::lock_guard<std::mutex> lock(m);
    sum += i;
  });
  EXPECT_EQ(sum, 4950);
}

}  // namespace
}  // namespace fedprof
