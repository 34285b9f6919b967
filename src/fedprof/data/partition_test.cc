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

}  // namespace
}  // namespace fedprof
