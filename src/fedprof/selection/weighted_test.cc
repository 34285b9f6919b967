#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "fedprof/selection/selector.h"

namespace fedprof {
namespace {

TEST(SampleByWeightTest, SingleDrawsFollowTheWeights) {
  const std::vector<double> w = {1, 2, 3, 4};
  std::vector<int> hits(4, 0);
  const int trials = 40000;
  for (int t = 0; t < trials; ++t) {
    Rng rng = MakeRng(1, Stream::kSelection, {static_cast<uint64_t>(t)});
    const std::vector<int> ids = SampleByWeight(w, 1, false, rng);
    ASSERT_EQ(ids.size(), 1u);
    ++hits[ids[0]];
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(hits[i] / double(trials), w[i] / 10.0, 0.01) << i;
}

TEST(SampleByWeightTest, WithoutReplacementGivesDistinctClientsAndSkipsZeroWeights) {
  std::vector<double> w(50, 1.0);
  w[3] = w[7] = 0;
  for (int t = 0; t < 200; ++t) {
    Rng rng = MakeRng(2, Stream::kSelection, {static_cast<uint64_t>(t)});
    const std::vector<int> ids = SampleByWeight(w, 10, false, rng);
    ASSERT_EQ(ids.size(), 10u);
    EXPECT_EQ(std::set<int>(ids.begin(), ids.end()).size(), 10u);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    for (int id : ids) EXPECT_TRUE(id != 3 && id != 7);
  }
  // Fewer positive weights than asked: only those.
  Rng rng = MakeRng(3, Stream::kSelection);
  EXPECT_EQ(SampleByWeight({0, 5, 0, 1}, 3, false, rng), (std::vector<int>{1, 3}));
}

TEST(SampleByWeightTest, EqualWeightsAreUniform) {
  // alpha = 0 gives every client score 1: each of 20 clients is then in a
  // sample of 5 with probability 1/4.
  const std::vector<double> w(20, 1.0);
  std::vector<int> hits(20, 0);
  const int trials = 20000;
  for (int t = 0; t < trials; ++t) {
    Rng rng = MakeRng(4, Stream::kSelection, {static_cast<uint64_t>(t)});
    for (int id : SampleByWeight(w, 5, false, rng)) ++hits[id];
  }
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(hits[i] / double(trials), 0.25, 0.015) << i;
}

TEST(SampleByWeightTest, WithReplacementCanRepeatAndCollapsesDuplicates) {
  // Two clients, three draws: with replacement at least one repeats.
  Rng rng = MakeRng(5, Stream::kSelection);
  const std::vector<int> ids = SampleByWeight({1, 1}, 3, true, rng);
  EXPECT_LE(ids.size(), 2u);
  // Expected distinct count of 10 draws over 10 equal clients: 10(1 - 0.9^10).
  double distinct = 0;
  for (int t = 0; t < 5000; ++t) {
    Rng r = MakeRng(6, Stream::kSelection, {static_cast<uint64_t>(t)});
    distinct += SampleByWeight(std::vector<double>(10, 1.0), 10, true, r).size();
  }
  EXPECT_NEAR(distinct / 5000, 10 * (1 - std::pow(0.9, 10)), 0.05);
}

TEST(SampleByWeightTest, AllZeroWeightsFallBackToUniform) {
  Rng rng = MakeRng(7, Stream::kSelection);
  EXPECT_EQ(SampleByWeight({0, 0, 0, 0}, 4, false, rng).size(), 4u);
}

// Water-filling by hand: weights 8, 4, 2, 2, 0, expected 2, cap 0.9. c =
// 2/16 gives the heaviest 1.0 > 0.9, so it is capped; the rest share 1.1 in
// proportion: c = 1.1/8, p = (0.9, 0.55, 0.275, 0.275, 0).
// The uniform selector's draw kept sparse equals the whole partial
// Fisher-Yates shuffle it replaces, draw for draw: every run that selects
// uniformly picks the clients it picked before.
TEST(UniformIndicesTest, EqualsTheWholeShuffle) {
  for (int n : {1, 2, 7, 100, 1000, 100000}) {
    for (int k : {0, 1, 3, 10, 100, 1000}) {
      if (k > n) continue;
      Rng sparse_rng = MakeRng(7, Stream::kSelection, {static_cast<uint64_t>(n), static_cast<uint64_t>(k)});
      Rng whole_rng = sparse_rng;
      std::vector<int> ids(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) ids[i] = i;
      for (int i = 0; i < k; ++i) {
        std::swap(ids[i], ids[i + static_cast<int>(UniformIndex(whole_rng, static_cast<uint64_t>(n - i)))]);
      }
      ids.resize(static_cast<size_t>(k));
      EXPECT_EQ(UniformIndices(n, k, sparse_rng), ids) << n << " choose " << k;
      EXPECT_EQ(sparse_rng(), whole_rng()) << "the same draws consumed";
    }
  }
}

// Drawn by rank or from a list, the uniform selector picks the same ids.
TEST(UniformIndicesTest, RankedClientsGiveTheListsIds) {
  struct EveryThird : RankedClients {
    int size() const override { return 300; }
    ClientInfo At(int rank) const override { return {3 * rank, 1, 1}; }
  } ranked;
  std::vector<ClientInfo> list;
  for (int r = 0; r < 300; ++r) list.push_back(ranked.At(r));
  const auto selector = MakeUniformSelector();
  ASSERT_TRUE(selector->DrawsByRank());
  Rng a = MakeRng(1, Stream::kSelection), b = MakeRng(1, Stream::kSelection);
  const std::vector<int> from_list = selector->Select({1, 20, &list}, a);
  EXPECT_EQ(selector->Select({1, 20, nullptr, &ranked}, b), from_list);
  EXPECT_EQ(from_list.size(), 20u);
  EXPECT_TRUE(std::is_sorted(from_list.begin(), from_list.end()));
}

TEST(PoissonSampleTest, CappedInclusionByHand) {
  const std::vector<double> p = CappedInclusion({8, 4, 2, 2, 0}, 2.0, 0.9);
  const std::vector<double> expected = {0.9, 0.55, 0.275, 0.275, 0};
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], expected[i], 1e-12) << i;
  EXPECT_EQ(CappedInclusion({1, 1, 0}, 5.0, 0.5), (std::vector<double>{0.5, 0.5, 0}))
      << "too few clients: all of them at the cap";
  const std::vector<double> even = CappedInclusion({3, 3, 3, 3}, 1.0, 1.0);
  for (double v : even) EXPECT_DOUBLE_EQ(v, 0.25);
}

TEST(PoissonSampleTest, EachIndexIsDrawnWithItsProbability) {
  const std::vector<double> p = {0.0, 0.1, 0.5, 1.0};
  std::vector<int> hits(4, 0);
  const int trials = 20000;
  for (int t = 0; t < trials; ++t) {
    Rng rng = MakeRng(5, Stream::kSelection, {static_cast<uint64_t>(t)});
    for (int i : PoissonSample(p, rng)) ++hits[i];
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(hits[i] / double(trials), p[i], 0.012) << i;
}

}  // namespace
}  // namespace fedprof
