#include "fedprof/sim/population.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/files.h"
#include "fedprof/profiling/profiler.h"

namespace fedprof {
namespace {

// 400 random 28x28 images of 10 classes.
Dataset Images() {
  torch::manual_seed(21);
  Dataset d;
  d.x = torch::rand({400, 1, 28, 28});
  d.y = torch::randint(0, 10, {400}, torch::kLong);
  d.num_classes = 10;
  d.name = "images";
  return d;
}

Config Sampled(int clients, const std::string& irrelevant_source = "synthetic") {
  Config c;
  c.Set("clients.count", std::to_string(clients));
  c.Set("partition.kind", "sampled");
  c.Set("partition.size_mean", "20");
  c.Set("partition.size_sd", "5");
  c.Set("quality.blurred", "0.25");
  c.Set("quality.salt_pepper", "0.25");
  c.Set("quality.irrelevant", "0.1");
  c.Set("quality.irrelevant_source", irrelevant_source);
  return c;
}

// The kinds of the clients whose inputs SharedRowsOf says are table rows.
std::map<DataKind, int> SharedKinds(const Population& p) {
  std::map<DataKind, int> kinds;
  for (int k = 0; k < p.size(); ++k) {
    TableRows rows;
    if (p.SharedRowsOf(k, &rows)) ++kinds[p.kind(k)];
  }
  return kinds;
}

// Checks that the inputs of clients [0, clients) whose inputs SharedRowsOf
// says are table rows are exactly those rows, as the table gives them in
// its passes of 128 (what SharedRepresentations runs through the model);
// the kinds of those clients.
std::map<DataKind, int> ExpectInputsAreTableRows(const Population& p, int clients) {
  const InputTables tables = p.SharedTables();
  std::map<std::pair<int, int64_t>, torch::Tensor> passes;
  std::map<DataKind, int> kinds;
  for (int k = 0; k < clients; ++k) {
    TableRows rows;
    if (!p.SharedRowsOf(k, &rows)) continue;
    ++kinds[p.kind(k)];
    const torch::Tensor x = p.MakeClient(k).data().x;
    EXPECT_EQ(x.size(0), static_cast<int64_t>(rows.rows.size())) << "client " << k;
    EXPECT_EQ(x.size(0), p.num_samples(k));
    for (size_t i = 0; i < rows.rows.size() && static_cast<int64_t>(i) < x.size(0); ++i) {
      const int64_t r = rows.rows[i], start = r / kProfileBatch * kProfileBatch;
      torch::Tensor& pass = passes[{rows.table, start}];
      if (!pass.defined()) {
        pass = tables.inputs(rows.table, start,
                             std::min(kProfileBatch, tables.sizes.at(rows.table) - start));
      }
      EXPECT_TRUE(torch::equal(x[static_cast<int64_t>(i)], pass[r - start]))
          << "client " << k << " (" << DataKindName(p.kind(k)) << ") sample " << i;
    }
  }
  return kinds;
}

// Clean clients hold rows of the training set, blurred ones rows of its
// blurred copy, irrelevant ones drawn from a data set on disk rows of that
// set; clients with noise of their own hold none.
TEST(PopulationTest, SharedRowsAreExactlyTheClientsInputs) {
  const Dataset train = Images();
  std::map<DataKind, int> shared = ExpectInputsAreTableRows(Population(train, Sampled(100).options()), 100);
  EXPECT_GT(shared[DataKind::kClean], 0);
  EXPECT_GT(shared[DataKind::kBlurred], 0);
  EXPECT_EQ(shared.count(DataKind::kIrrelevant), 0u) << "synthetic images are drawn per client";
  EXPECT_EQ(shared.count(DataKind::kSaltPepper), 0u);
  if (!FileExists(DefaultDataDir("mnist"))) GTEST_SKIP() << "MNIST not installed";
  // MNIST's 60,000 images serve 3,300 irrelevant clients of ~20 samples.
  Config irrelevant = Sampled(3300, "mnist");
  irrelevant.Set("quality.irrelevant", "1");
  irrelevant.Set("quality.blurred", "0");
  irrelevant.Set("quality.salt_pepper", "0");
  shared = ExpectInputsAreTableRows(Population(train, irrelevant.options()), 40);
  EXPECT_EQ(shared[DataKind::kIrrelevant], 40);
}

// A table serves only when its clients hold at least as many samples as it
// has rows; disjoint partitions hold no sample twice and have no tables.
TEST(PopulationTest, TablesServeOnlyClientsThatHoldAsManySamples) {
  const Dataset train = Images();
  // 100 clients of ~20 samples: 40 clean (~800 samples), 25 blurred (~500).
  EXPECT_EQ(SharedKinds(Population(train, Sampled(100).options())).size(), 2u);
  // 10 clients: 5 clean (~100), 2 or 3 blurred: fewer than the 400 rows.
  EXPECT_TRUE(SharedKinds(Population(train, Sampled(10).options())).empty());
  Config disjoint = Sampled(100);
  disjoint.Set("partition.kind", "iid");
  disjoint.Set("partition.size_mean", "0");
  const Population p(train, disjoint.options());
  EXPECT_TRUE(SharedKinds(p).empty());
  for (const int64_t rows : p.SharedTables().sizes) EXPECT_EQ(rows, 0);
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

// quality.feature_skew: client k of N gets noise of sigma * k / N on top of
// its own samples (client 0 none), and holds the labels LabelCounts says.
TEST(PopulationTest, FeatureSkewGrowsWithTheClientsIndex) {
  const Dataset images = Images();
  Config c;
  c.Set("clients.count", "4");
  c.Set("partition.kind", "iid");
  const Population clean(images, c.options());
  c.Set("quality.feature_skew", "0.8");
  const Population skewed(images, c.options());
  double previous = -1;
  for (int k = 0; k < 4; ++k) {
    const Dataset a = clean.MakeClient(k).data(), b = skewed.MakeClient(k).data();
    ASSERT_TRUE(torch::equal(a.y, b.y));
    // Clamping to [0, 1] shrinks the noise; its growth with k survives.
    const double change = (b.x - a.x).abs().mean().item<double>();
    if (k == 0) {
      EXPECT_EQ(change, 0.0);
    }
    EXPECT_GT(change, previous) << "client " << k;
    previous = change;
    const std::vector<int64_t> counts = skewed.LabelCounts(k);
    ASSERT_EQ(counts.size(), 10u);
    for (int64_t label = 0; label < 10; ++label) {
      EXPECT_EQ(counts[label], a.y.eq(label).sum().item<int64_t>()) << "client " << k;
    }
  }
  c.Set("partition.kind", "sampled");
  c.Set("partition.size_mean", "30");
  const Population sampled(images, c.options());
  TableRows rows;
  EXPECT_FALSE(sampled.SharedRowsOf(1, &rows)) << "noise of its own: no shared rows";
}

}  // namespace
}  // namespace fedprof
