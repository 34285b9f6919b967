#include "fedprof/data/partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "tests/expect_error.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

using Parts = std::vector<std::vector<int64_t>>;

// partition.* of `kind` with a dominant share of 0.6 and equal client sizes.
RunOptions::Partition Options(const std::string& kind) {
  RunOptions::Partition options;
  options.kind = kind;
  options.dominant_share = 0.6;
  return options;
}

// `per_class` samples of each class, in a shuffled order so the partition
// cannot rely on sorted labels.
std::vector<int64_t> Labels(int64_t num_classes, int64_t per_class) {
  std::vector<int64_t> labels;
  for (int64_t c = 0; c < num_classes; ++c)
    labels.insert(labels.end(), per_class, c);
  Rng rng = MakeRng(99, Stream::kNoise);
  const std::vector<int64_t> order =
      Permutation(rng, static_cast<int64_t>(labels.size()));
  std::vector<int64_t> shuffled(labels.size());
  for (size_t i = 0; i < order.size(); ++i) shuffled[i] = labels[order[i]];
  return shuffled;
}

// Every index in range and used at most once; returns how many were used.
int64_t ExpectDisjoint(const Parts& parts, int64_t num_samples) {
  std::vector<char> seen(num_samples, 0);
  int64_t used = 0;
  for (const auto& part : parts) {
    for (int64_t i : part) {
      EXPECT_GE(i, 0);
      EXPECT_LT(i, num_samples);
      if (i < 0 || i >= num_samples) continue;
      EXPECT_FALSE(seen[i]) << "index " << i << " given twice";
      seen[i] = 1;
      ++used;
    }
  }
  return used;
}

TEST(PartitionTest, IidEqualSplitCoversEverySample) {
  const Parts parts = Partition({}, 1000, 0, 10, Options("iid"), 1);
  ASSERT_EQ(parts.size(), 10u);
  for (const auto& p : parts) EXPECT_EQ(p.size(), 100u);
  EXPECT_EQ(ExpectDisjoint(parts, 1000), 1000);
}

TEST(PartitionTest, IidEqualSplitFloorsWhenNotDivisible) {
  const Parts parts = Partition({}, 1009, 0, 10, Options("iid"), 1);
  for (const auto& p : parts) EXPECT_EQ(p.size(), 100u);
  EXPECT_EQ(ExpectDisjoint(parts, 1009), 1000);
  ExpectError([] { Partition({}, 5, 0, 10, Options("iid"), 1); }, "10 clients");
}

TEST(PartitionTest, IidIsShuffled) {
  const Parts parts = Partition({}, 1000, 0, 4, Options("iid"), 5);
  int64_t in_order = 0;
  for (size_t i = 1; i < parts[0].size(); ++i)
    in_order += parts[0][i] == parts[0][i - 1] + 1;
  EXPECT_LT(in_order, 20);
}

TEST(PartitionTest, NormalSizesMatchRequestedMoments) {
  RunOptions::Partition options = Options("iid");
  options.size_mean = 50;
  options.size_sd = 10;
  const int clients = 4000;
  const int64_t n = 250000;
  const Parts parts = Partition({}, n, 0, clients, options, 7);
  ASSERT_EQ(parts.size(), static_cast<size_t>(clients));
  double sum = 0;
  double sum_sq = 0;
  for (const auto& p : parts) {
    EXPECT_GE(p.size(), 1u);
    sum += static_cast<double>(p.size());
    sum_sq += static_cast<double>(p.size()) * static_cast<double>(p.size());
  }
  const double mean = sum / clients;
  const double sd = std::sqrt(sum_sq / clients - mean * mean);
  // Standard error of the mean is 10 / sqrt(4000) ~ 0.16; rounding adds
  // 1/12 to the variance.
  EXPECT_NEAR(mean, 50.0, 0.6);
  EXPECT_NEAR(sd, 10.0, 0.5);
  EXPECT_EQ(ExpectDisjoint(parts, n), static_cast<int64_t>(sum));
}

TEST(PartitionTest, SizesAtLeastOne) {
  RunOptions::Partition options = Options("iid");
  options.size_mean = 1;
  options.size_sd = 5;
  for (const auto& p : Partition({}, 100000, 0, 500, options, 3)) {
    EXPECT_GE(p.size(), 1u);
  }
}

TEST(PartitionTest, SizesBeyondDataSetAreAnError) {
  RunOptions::Partition options = Options("iid");
  options.size_mean = 200;
  options.size_sd = 10;
  ExpectError([&] { Partition({}, 1000, 0, 10, options, 1); },
              "partition.size_mean");
  options.size_sd = -1;
  ExpectError([&] { Partition({}, 100000, 0, 10, options, 1); },
              "partition.size_sd");
}

TEST(PartitionTest, DominantShareIsExact) {
  const int64_t classes = 10;
  const std::vector<int64_t> labels = Labels(classes, 6000);
  const auto n = static_cast<int64_t>(labels.size());
  RunOptions::Partition options = Options("dominant");
  options.dominant_share = 0.6;
  options.size_mean = 200;
  options.size_sd = 40;
  const int clients = 100;
  const Parts parts = Partition(labels, n, classes, clients, options, 11);
  ExpectDisjoint(parts, n);
  // Non-dominant draws per class, and what uniform choice predicts.
  std::vector<double> others(classes, 0);
  std::vector<double> expected(classes, 0);
  for (int k = 0; k < clients; ++k) {
    const auto& p = parts[k];
    const int64_t dominant = k % classes;
    int64_t own = 0;
    for (int64_t i : p) {
      if (labels[i] == dominant) {
        ++own;
      } else {
        others[labels[i]] += 1;
      }
    }
    const auto size = static_cast<double>(p.size());
    EXPECT_EQ(own, static_cast<int64_t>(std::round(0.6 * size)))
        << "client " << k;
    for (int64_t c = 0; c < classes; ++c) {
      if (c != dominant)
        expected[c] += (size - std::round(0.6 * size)) / (classes - 1);
    }
  }
  for (int64_t c = 0; c < classes; ++c) {
    EXPECT_NEAR(others[c], expected[c], 0.1 * expected[c]) << "class " << c;
  }
}

TEST(PartitionTest, DominantEqualSizes) {
  // An equal split uses the whole set, so only share 1 is always feasible.
  const std::vector<int64_t> labels = Labels(4, 500);
  RunOptions::Partition options = Options("dominant");
  options.dominant_share = 1.0;
  const Parts parts = Partition(labels, 2000, 4, 8, options, 2);
  for (size_t k = 0; k < parts.size(); ++k) {
    ASSERT_EQ(parts[k].size(), 2000u / 8);
    for (int64_t i : parts[k])
      EXPECT_EQ(labels[i], static_cast<int64_t>(k % 4));
  }
  EXPECT_EQ(ExpectDisjoint(parts, 2000), 2000);
}

TEST(PartitionTest, DominantEqualSplitOfUnbalancedClassesUsesEverySample) {
  // Class sizes 270..324 as in a prefix of a real data set; an equal split
  // takes all 3000 samples, so every class must drain exactly.
  std::vector<int64_t> labels;
  for (int64_t c = 0; c < 10; ++c) {
    for (int64_t i = 0; i < 270 + 6 * c; ++i) labels.push_back(c);
  }
  while (labels.size() < 3000) labels.push_back(labels.size() % 10);
  RunOptions::Partition options = Options("dominant");
  options.dominant_share = 0.6;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Parts parts = Partition(labels, 3000, 10, 10, options, seed);
    EXPECT_EQ(ExpectDisjoint(parts, 3000), 3000);
    for (size_t k = 0; k < parts.size(); ++k) {
      int64_t dominant = 0;
      for (int64_t i : parts[k]) dominant += labels[i] == static_cast<int64_t>(k % 10);
      EXPECT_EQ(dominant, 180) << "client " << k << " seed " << seed;
    }
  }
}

TEST(PartitionTest, DominantPoolRunningOutIsAnError) {
  const std::vector<int64_t> labels = Labels(2, 100);
  RunOptions::Partition options = Options("dominant");
  options.dominant_share = 0.9;
  options.size_mean = 60;
  // Clients 0 and 2 each want 54 samples of class 0, which has 100.
  ExpectError([&] { Partition(labels, 200, 2, 3, options, 1); },
              "partition.dominant_share");
  options.dominant_share = 0.5;
  options.size_mean = 0;
  ExpectError(
      [&] { Partition(std::vector<int64_t>(10, 0), 10, 1, 2, options, 1); },
      "partition.dominant_share");
  options.dominant_share = 1.0;
  EXPECT_NO_THROW(Partition(std::vector<int64_t>(10, 0), 10, 1, 2, options, 1));
  ExpectError([&] { Partition({}, 10, 0, 2, options, 1); },
              "partition.kind");
  options.dominant_share = 1.5;
  ExpectError([&] { Partition(labels, 200, 2, 2, options, 1); },
              "partition.dominant_share");
}

TEST(PartitionTest, BadArgumentsAreErrors) {
  ExpectError([] { Partition({}, 10, 0, 0, Options("iid"), 1); }, "num_clients");
  ExpectError([] { Partition({0, 1}, 3, 2, 1, Options("iid"), 1); }, "labels");
  RunOptions::Partition options = Options("dominant");
  ExpectError(
      [&] {
        Partition({0, 5}, 2, 2, 1, options, 1);
      },
      "label 5");
}

TEST(PartitionTest, SeededAndReproducible) {
  const std::vector<int64_t> labels = Labels(5, 400);
  RunOptions::Partition iid = Options("iid");
  iid.size_mean = 50;
  iid.size_sd = 10;
  RunOptions::Partition dominant = iid;
  dominant.kind = "dominant";
  for (const RunOptions::Partition& options : {iid, dominant}) {
    const Parts a = Partition(labels, 2000, 5, 20, options, 42);
    const Parts b = Partition(labels, 2000, 5, 20, options, 42);
    const Parts c = Partition(labels, 2000, 5, 20, options, 43);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
  }
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

TEST(SampledPartitionTest, DrawsEachClientFromItsOwnSeed) {
  std::vector<int64_t> labels(1000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i % 10);
  RunOptions::Partition o = Options("sampled");
  o.size_mean = 50;
  o.size_sd = 10;
  RunOptions::Partition o_dominant = o;
  o_dominant.kind = "sampled_dominant";
  const SampledPartition iid(labels, 1000, 10, o, 7);
  const SampledPartition again(labels, 1000, 10, o, 7);
  const SampledPartition dominant(labels, 1000, 10, o_dominant, 7);
  for (int k : {0, 3, 999999}) {
    const std::vector<int64_t> idx = iid.Indices(k);
    EXPECT_EQ(static_cast<int64_t>(idx.size()), iid.Size(k));
    EXPECT_EQ(idx, again.Indices(k)) << "client " << k << " is a function of the seed alone";
    for (int64_t i : idx) ASSERT_TRUE(i >= 0 && i < 1000);
    const std::vector<int64_t> d = dominant.Indices(k);
    const int64_t own = std::count_if(d.begin(), d.end(), [&](int64_t i) { return labels[i] == k % 10; });
    EXPECT_GE(own, std::llround(0.6 * d.size())) << "client " << k;
  }
  EXPECT_NE(iid.Indices(1), iid.Indices(2));
  o.size_mean = 0;
  EXPECT_THROW(SampledPartition(labels, 1000, 10, o, 7), Error);
  o_dominant.size_mean = 5;
  EXPECT_THROW(SampledPartition({}, 1000, 10, o_dominant, 7), Error);
}

// The label skews of sampled populations: each client's labels from its own
// seed, the Dirichlet ones concentrated for a small beta, the #C = k ones
// exactly its ClientClasses.
TEST(SampledPartitionTest, LabelSkewsDrawEachClientsLabelsFromItsSeed) {
  const std::vector<int64_t> labels = Labels(10, 100);
  RunOptions::Partition o = Options("sampled_dirichlet");
  o.size_mean = 200;
  o.beta = 0.1;
  o.classes = 2;
  const SampledPartition dirichlet(labels, 1000, 10, o, 3);
  o.kind = "sampled_classes";
  const SampledPartition classes(labels, 1000, 10, o, 3);
  std::vector<std::vector<int64_t>> skewed, held;
  for (int k : {0, 1, 7, 123456}) {
    const std::vector<int64_t> d = dirichlet.Indices(k);
    EXPECT_EQ(static_cast<int64_t>(d.size()), dirichlet.Size(k));
    EXPECT_EQ(d, dirichlet.Indices(k));
    skewed.push_back(LabelCounts({d}, labels, 10)[0]);
    const std::vector<int64_t> c = classes.Indices(k);
    held.push_back(LabelCounts({c}, labels, 10)[0]);
    Rng rng = MakeRng(3, Stream::kPartition, {static_cast<uint64_t>(k)});
    (void)StandardNormal(rng);  // the size's draw
    const std::vector<int64_t> expected = ClientClasses(k, 10, 2, rng);
    for (int64_t label = 0; label < 10; ++label) {
      const bool holds = std::find(expected.begin(), expected.end(), label) != expected.end();
      EXPECT_EQ(held.back()[label] > 0, holds) << "client " << k << " label " << label;
    }
    EXPECT_EQ(expected[0], k % 10);
  }
  // Dir(0.1) over 10 labels puts most of a client's mass on one or two.
  EXPECT_GT(MeanJsDivergence(skewed), 0.4);
  o.classes = 11;
  ExpectError([&] { SampledPartition(labels, 1000, 10, o, 3); }, "partition.classes");
  o.classes = 2;
  o.sizes = "dirichlet";
  ExpectError([&] { SampledPartition(labels, 1000, 10, o, 3); }, "partition.sizes");
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

RunOptions::Partition Dirichlet(double beta, int64_t min_size) {
  RunOptions::Partition o = Options("dirichlet");
  o.beta = beta;
  o.min_size = min_size;
  return o;
}

int64_t HeldClasses(const std::vector<int64_t>& counts) {
  return std::count_if(counts.begin(), counts.end(), [](int64_t v) { return v > 0; });
}

TEST(DirichletPartitionTest, DealsEveryClassOutAndMeetsTheMinimumSize) {
  const std::vector<int64_t> labels = Labels(10, 300);
  for (double beta : {0.1, 0.5, 100.0}) {
    const Parts parts = Partition(labels, 3000, 10, 10, Dirichlet(beta, 10), 1);
    ASSERT_EQ(parts.size(), 10u);
    EXPECT_EQ(ExpectDisjoint(parts, 3000), 3000) << "beta " << beta;
    for (const auto& p : parts) EXPECT_GE(p.size(), 10u) << "beta " << beta;
    EXPECT_EQ(parts, Partition(labels, 3000, 10, 10, Dirichlet(beta, 10), 1));
    EXPECT_NE(parts, Partition(labels, 3000, 10, 10, Dirichlet(beta, 10), 2));
  }
  // The smaller beta, the further the clients' labels from the pooled ones.
  const double skewed = MeanJsDivergence(LabelCounts(Partition(labels, 3000, 10, 10, Dirichlet(0.1, 10), 1), labels, 10));
  const double mild = MeanJsDivergence(LabelCounts(Partition(labels, 3000, 10, 10, Dirichlet(0.5, 10), 1), labels, 10));
  const double flat = MeanJsDivergence(LabelCounts(Partition(labels, 3000, 10, 10, Dirichlet(100, 10), 1), labels, 10));
  EXPECT_GT(skewed, mild);
  EXPECT_GT(mild, flat);
  EXPECT_LT(flat, 0.01);
}

// No class goes to a client that already holds N / n samples: with one
// class per client's worth of samples, a client full after its first
// class takes nothing more.
TEST(DirichletPartitionTest, AFullClientTakesNoMoreOfAnyClass) {
  const std::vector<int64_t> labels = Labels(4, 250);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const Parts parts = Partition(labels, 1000, 4, 4, Dirichlet(0.3, 0), seed);
    // A client's last class came while it held less than N / n = 250; what
    // it held before that class is below the cap. The last client takes
    // what rounding the cut points leaves, full or not (as the paper's code).
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      std::vector<int64_t> counts = LabelCounts({parts[k]}, labels, 4)[0];
      int64_t before_last = 0;
      int64_t last = -1;
      for (int64_t c = 0; c < 4; ++c) {
        if (counts[c] > 0) last = c;
      }
      for (int64_t c = 0; c < last; ++c) before_last += counts[c];
      EXPECT_LT(before_last, 250) << "seed " << seed;
    }
  }
}

TEST(DirichletPartitionTest, AMinimumSizeNoDrawMeetsIsAnErrorNamingItsTerms) {
  const std::vector<int64_t> labels = Labels(10, 30);
  ExpectError([&] { Partition(labels, 300, 10, 10, Dirichlet(0.05, 30), 1); },
              "partition.min_size: no partition of 300 samples over 10 clients with class shares ~ "
              "Dir(beta = 0.05) gave every client 30 samples in 1000 draws");
  RunOptions::Partition sized = Dirichlet(0.5, 10);
  sized.size_mean = 20;
  ExpectError([&] { Partition(labels, 300, 10, 10, sized, 1); }, "partition.kind: dirichlet decides");
  ExpectError([&] { Partition({}, 300, 0, 10, Dirichlet(0.5, 10), 1); }, "needs class labels");
}

TEST(ClassesPartitionTest, EachClientHoldsItsLabelsAndEachLabelIsSplitEvenly) {
  const std::vector<int64_t> labels = Labels(10, 101);
  for (int64_t k : {1, 2, 3, 10}) {
    RunOptions::Partition o = Options("classes");
    o.classes = k;
    const Parts parts = Partition(labels, 1010, 10, 10, o, 4);
    const auto counts = LabelCounts(parts, labels, 10);
    std::vector<int64_t> holders(10, 0), dealt(10, 0);
    for (size_t i = 0; i < parts.size(); ++i) {
      EXPECT_EQ(HeldClasses(counts[i]), k) << "client " << i << " #C = " << k;
      EXPECT_GT(counts[i][i % 10], 0) << "client " << i << "'s first label is i mod K";
      for (int64_t c = 0; c < 10; ++c) {
        holders[c] += counts[i][c] > 0;
        dealt[c] += counts[i][c];
      }
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      for (int64_t c = 0; c < 10; ++c) {
        if (counts[i][c] == 0) continue;
        EXPECT_LE(std::abs(counts[i][c] - 101 / holders[c]), 1) << "label " << c << " split evenly";
      }
    }
    for (int64_t c = 0; c < 10; ++c) EXPECT_EQ(dealt[c], holders[c] > 0 ? 101 : 0);
    ExpectDisjoint(parts, 1010);
  }
  RunOptions::Partition o = Options("classes");
  o.classes = 11;
  ExpectError([&] { Partition(labels, 1010, 10, 10, o, 4); },
              "partition.classes: 11 labels a client, but the data has 10 classes");
}

TEST(ShardsPartitionTest, TwoShardsOfSortedLabelsAClient) {
  const std::vector<int64_t> labels = Labels(10, 100);
  RunOptions::Partition o = Options("shards");
  o.shards = 2;
  // 20 shards of 50: each lies within one label.
  const Parts parts = Partition(labels, 1000, 10, 10, o, 5);
  EXPECT_EQ(ExpectDisjoint(parts, 1000), 1000);
  for (const auto& counts : LabelCounts(parts, labels, 10)) {
    EXPECT_LE(HeldClasses(counts), 2);
    for (int64_t v : counts) EXPECT_EQ(v % 50, 0);
  }
  EXPECT_NE(parts, Partition(labels, 1000, 10, 10, o, 6));
  o.shards = 101;
  ExpectError([&] { Partition(labels, 1000, 10, 10, o, 5); }, "partition.shards");
}

TEST(QuantitySkewTest, DirichletSizesShareOutTheWholeSet) {
  RunOptions::Partition o = Options("iid");
  o.sizes = "dirichlet";
  o.beta = 0.5;
  o.min_size = 10;
  const Parts parts = Partition({}, 5000, 0, 10, o, 8);
  EXPECT_EQ(ExpectDisjoint(parts, 5000), 5000);
  size_t smallest = 5000, largest = 0;
  for (const auto& p : parts) {
    smallest = std::min(smallest, p.size());
    largest = std::max(largest, p.size());
  }
  EXPECT_GE(smallest, 10u);
  EXPECT_GT(largest, 2 * smallest) << "Dir(0.5) sizes are skewed";
  // With the dominant kind: the sizes as drawn, the dominant share kept.
  const std::vector<int64_t> labels = Labels(10, 1000);
  o.kind = "dominant";
  o.beta = 20;  // mild, so no dominant class runs out
  const Parts dominant = Partition(labels, 10000, 10, 10, o, 8);
  EXPECT_EQ(ExpectDisjoint(dominant, 10000), 10000);
  for (size_t k = 0; k < dominant.size(); ++k) {
    const auto counts = LabelCounts({dominant[k]}, labels, 10)[0];
    EXPECT_GE(counts[k % 10], std::llround(0.6 * static_cast<double>(dominant[k].size())));
  }
  o.kind = "classes";
  ExpectError([&] { Partition(labels, 10000, 10, 10, o, 8); }, "partition.kind: classes decides");
  o.kind = "iid";
  o.min_size = 2000;
  ExpectError([&] { Partition({}, 5000, 0, 10, o, 8); }, "partition.min_size: no client sizes");
}

TEST(PartitionStatisticsTest, JensenShannonByHand) {
  // Two one-label clients: q = (1, 0) against the pooled (1/2, 1/2), whose
  // midpoint is (3/4, 1/4): JS = (log2(4/3) + (log2(2/3) + 1) / 2) / 2.
  const double js = (std::log2(4.0 / 3.0) + 0.5 * (std::log2(2.0 / 3.0) + 1.0)) / 2.0;
  EXPECT_NEAR(MeanJsDivergence({{5, 0}, {0, 5}}), js, 1e-12);
  EXPECT_NEAR(MeanJsDivergence({{3, 1}, {6, 2}, {0, 0}}), 0.0, 1e-12);  // all alike; empty skipped
  EXPECT_EQ(MeanJsDivergence({}), 0.0);
  EXPECT_EQ(LabelCounts({{0, 1, 2}, {3}}, {2, 0, 2, 1}, 3),
            (std::vector<std::vector<int64_t>>{{1, 0, 2}, {0, 1, 0}}));
}

}  // namespace
}  // namespace fedprof
