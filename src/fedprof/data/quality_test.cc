#include "fedprof/data/quality.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "tests/expect_error.h"

namespace fedprof {
namespace {

using testing_support::ExpectError;

// Fills a float tensor of `sizes` with lo + (hi - lo) * U[0, 1) from a seeded
// stream, independent of torch's global generator.
at::Tensor UniformTensor(std::vector<int64_t> sizes, double lo, double hi,
                         uint64_t seed) {
  at::Tensor t = torch::empty(sizes, torch::kFloat32);
  Rng rng = MakeRng(seed, Stream::kNoise, {1000});
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    p[i] = static_cast<float>(lo + (hi - lo) * Uniform01(rng));
  }
  return t;
}

TEST(QualityTest, DataKindNames) {
  EXPECT_STREQ(DataKindName(DataKind::kClean), "clean");
  EXPECT_STREQ(DataKindName(DataKind::kIrrelevant), "irrelevant");
  EXPECT_STREQ(DataKindName(DataKind::kBlurred), "blurred");
  EXPECT_STREQ(DataKindName(DataKind::kSaltPepper), "salt_pepper");
  EXPECT_STREQ(DataKindName(DataKind::kGaussianNoise), "gaussian_noise");
  EXPECT_STREQ(DataKindName(DataKind::kPolluted), "polluted");
}

TEST(QualityTest, AssignDataKindsCountsAreExactAndSeeded) {
  RunOptions::Quality options;
  options.irrelevant = 0.1;
  options.blurred = 0.2;
  options.salt_pepper = 0.15;
  options.gaussian_noise = 0.05;
  options.polluted = 0.1;
  const std::vector<DataKind> kinds = AssignDataKinds(100, options, 5);
  ASSERT_EQ(kinds.size(), 100u);
  std::map<DataKind, int> counts;
  for (DataKind k : kinds) ++counts[k];
  EXPECT_EQ(counts[DataKind::kIrrelevant], 10);
  EXPECT_EQ(counts[DataKind::kBlurred], 20);
  EXPECT_EQ(counts[DataKind::kSaltPepper], 15);
  EXPECT_EQ(counts[DataKind::kGaussianNoise], 5);
  EXPECT_EQ(counts[DataKind::kPolluted], 10);
  EXPECT_EQ(counts[DataKind::kClean], 40);
  EXPECT_EQ(AssignDataKinds(100, options, 5), kinds);
  EXPECT_NE(AssignDataKinds(100, options, 6), kinds);
  // Not simply the first clients.
  EXPECT_FALSE(std::all_of(kinds.begin(), kinds.begin() + 10, [](DataKind k) {
    return k == DataKind::kIrrelevant;
  }));
}

TEST(QualityTest, AssignDataKindsRoundsAndCapsAtClientCount) {
  RunOptions::Quality options;
  options.irrelevant = 0.5;
  options.blurred = 0.5;
  const std::vector<DataKind> kinds = AssignDataKinds(3, options, 1);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), DataKind::kIrrelevant), 2);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), DataKind::kBlurred), 1);
  EXPECT_EQ(AssignDataKinds(10, RunOptions::Quality{}, 1),
            std::vector<DataKind>(10, DataKind::kClean));
}

TEST(QualityTest, AssignDataKindsRejectsFractionsAboveOne) {
  RunOptions::Quality options;
  options.irrelevant = 0.6;
  options.blurred = 0.5;
  ExpectError([&] { AssignDataKinds(10, options, 1); },
              {"quality.irrelevant", "quality.blurred", "1.1"});
  options.blurred = -0.1;
  ExpectError([&] { AssignDataKinds(10, options, 1); },
              {"quality.blurred"});
}

TEST(QualityTest, SaltPepperHitsTheRequestedShare) {
  at::Tensor images = torch::full({50, 1, 28, 28}, 0.5f);
  Rng rng = MakeRng(1, Stream::kNoise);
  ApplySaltPepper(images, 0.3, rng);
  const double total = static_cast<double>(images.numel());
  const double pepper = images.eq(0.0f).sum().item<int64_t>() / total;
  const double salt = images.eq(1.0f).sum().item<int64_t>() / total;
  const double untouched = images.eq(0.5f).sum().item<int64_t>() / total;
  EXPECT_NEAR(pepper + salt, 0.3, 0.02);
  EXPECT_NEAR(untouched, 0.7, 0.02);
  EXPECT_NEAR(salt / (salt + pepper), 0.5, 0.03);

  at::Tensor again = torch::full({50, 1, 28, 28}, 0.5f);
  Rng same = MakeRng(1, Stream::kNoise);
  ApplySaltPepper(again, 0.3, same);
  EXPECT_TRUE(torch::equal(images, again));
}

TEST(QualityTest, SaltPepperHitsWholeColourPixels) {
  at::Tensor images = torch::full({4, 3, 16, 16}, 0.5f);
  Rng rng = MakeRng(2, Stream::kNoise);
  ApplySaltPepper(images, 0.5, rng);
  // Every channel of a pixel agrees: all untouched, all 0, or all 1.
  EXPECT_TRUE(torch::equal(images.select(1, 0), images.select(1, 1)));
  EXPECT_TRUE(torch::equal(images.select(1, 0), images.select(1, 2)));
  EXPECT_GT(images.ne(0.5f).sum().item<int64_t>(), 0);
}

TEST(QualityTest, BlurKeepsConstantImages) {
  at::Tensor images = torch::full({2, 3, 16, 20}, 0.7f);
  ApplyGaussianBlur(images, 1.5);
  EXPECT_LT((images - 0.7f).abs().max().item<float>(), 1e-5f);
}

TEST(QualityTest, BlurSpreadsAnImpulseWithVarianceSigmaSquared) {
  const int64_t side = 41;
  const int64_t centre = 20;
  for (double sigma : {1.0, 1.5, 2.5}) {
    at::Tensor images = torch::zeros({1, 1, side, side});
    images[0][0][centre][centre] = 1.0f;
    ApplyGaussianBlur(images, sigma);
    const at::Tensor plane = images[0][0].to(torch::kFloat64);
    EXPECT_NEAR(plane.sum().item<double>(), 1.0, 1e-5);
    const at::Tensor offset = torch::arange(side, torch::kFloat64) - centre;
    const at::Tensor by_row = plane.sum(1);
    const at::Tensor by_col = plane.sum(0);
    EXPECT_NEAR((by_row * offset).sum().item<double>(), 0.0, 1e-6);
    EXPECT_NEAR((by_col * offset).sum().item<double>(), 0.0, 1e-6);
    const double var_y = (by_row * offset * offset).sum().item<double>();
    const double var_x = (by_col * offset * offset).sum().item<double>();
    EXPECT_NEAR(var_y, sigma * sigma, 0.1 * sigma * sigma) << "sigma " << sigma;
    EXPECT_NEAR(var_x, sigma * sigma, 0.1 * sigma * sigma) << "sigma " << sigma;
    EXPECT_GT(plane[centre][centre].item<double>(),
              plane[centre][centre + 1].item<double>());
  }
}

TEST(QualityTest, BlurRemovesHighFrequencies) {
  at::Tensor images = UniformTensor({3, 1, 32, 32}, 0, 1, 3);
  auto energy = [](const at::Tensor& t) {
    using torch::indexing::None;
    using torch::indexing::Slice;
    const auto dx = t.index({Slice(), Slice(), Slice(), Slice(1, None)}) -
                    t.index({Slice(), Slice(), Slice(), Slice(None, -1)});
    const auto dy = t.index({Slice(), Slice(), Slice(1, None), Slice()}) -
                    t.index({Slice(), Slice(), Slice(None, -1), Slice()});
    return (dx.square().sum() + dy.square().sum()).item<double>();
  };
  const double before = energy(images);
  const double mean_before = images.mean().item<double>();
  ApplyGaussianBlur(images, 1.5);
  EXPECT_LT(energy(images), 0.05 * before);
  EXPECT_NEAR(images.mean().item<double>(), mean_before, 0.01);
  EXPECT_GE(images.min().item<float>(), 0.0f);
  EXPECT_LE(images.max().item<float>(), 1.0f);
}

TEST(QualityTest, BlurWorksOnNonContiguousViews) {
  at::Tensor base = UniformTensor({2, 1, 12, 12}, 0, 1, 4);
  at::Tensor expected = base.clone();
  ApplyGaussianBlur(expected, 1.0);
  at::Tensor transposed = base.transpose(2, 3).contiguous().transpose(2, 3);
  ASSERT_FALSE(transposed.is_contiguous());
  ApplyGaussianBlur(transposed, 1.0);
  EXPECT_TRUE(torch::allclose(transposed, expected, 1e-5, 1e-6));
}

TEST(QualityTest, GaussianNoiseHasRequestedSigmaOnTabularData) {
  const at::Tensor clean = UniformTensor({20000, 5}, -3, 8, 5);
  at::Tensor noisy = clean.clone();
  Rng rng = MakeRng(5, Stream::kNoise);
  ApplyGaussianNoise(noisy, 0.3, rng);
  const at::Tensor diff = (noisy - clean).to(torch::kFloat64);
  EXPECT_NEAR(diff.std().item<double>(), 0.3, 0.015);
  EXPECT_NEAR(diff.mean().item<double>(), 0.0, 0.01);
  // Tabular data is not clamped.
  EXPECT_LT(noisy.min().item<float>(), 0.0f);
  EXPECT_GT(noisy.max().item<float>(), 1.0f);
}

TEST(QualityTest, GaussianNoiseClampsImages) {
  at::Tensor images = torch::full({10, 1, 8, 8}, 0.5f);
  Rng rng = MakeRng(6, Stream::kNoise);
  ApplyGaussianNoise(images, 0.3, rng);
  EXPECT_GE(images.min().item<float>(), 0.0f);
  EXPECT_LE(images.max().item<float>(), 1.0f);
  EXPECT_GT(images.ne(0.5f).sum().item<int64_t>(), 600);
}

TEST(QualityTest, PollutionReplacesShareOfCellsWithFarValues) {
  const int64_t n = 4000;
  // Columns on different scales: [-1, 1] and [100, 400].
  at::Tensor clean = torch::cat(
      {UniformTensor({n, 2}, -1, 1, 7), UniformTensor({n, 2}, 100, 400, 8)}, 1);
  at::Tensor polluted = clean.clone();
  Rng rng = MakeRng(7, Stream::kNoise);
  ApplyPollution(polluted, 0.3, rng);
  const at::Tensor changed = polluted.ne(clean);
  EXPECT_NEAR(changed.to(torch::kFloat64).mean().item<double>(), 0.3, 0.02);
  const at::Tensor col_min = std::get<0>(clean.min(0));
  const at::Tensor col_max = std::get<0>(clean.max(0));
  const at::Tensor range = col_max - col_min;
  // Far outside: more than a whole range beyond the original extremes.
  const at::Tensor far =
      polluted.lt(col_min - range).logical_or(polluted.gt(col_max + range));
  EXPECT_TRUE(torch::equal(far, changed));
  // Both directions occur.
  EXPECT_GT(polluted.lt(col_min).sum().item<int64_t>(), 0);
  EXPECT_GT(polluted.gt(col_max).sum().item<int64_t>(), 0);
}

TEST(QualityTest, IrrelevantImagesComeFromTheSource) {
  Dataset client;
  client.x = UniformTensor({2000, 1, 6, 6}, 0, 1, 9);
  client.y = torch::zeros({2000}, torch::kInt64);
  client.num_classes = 10;
  client.name = "client";
  Dataset source;
  source.x = UniformTensor({40, 1, 6, 6}, 0, 1, 10);
  source.y = torch::zeros({40}, torch::kInt64);
  source.num_classes = 26;
  source.name = "source";
  Rng rng = MakeRng(3, Stream::kNoise);
  const Dataset out = MakeIrrelevant(client, &source, rng);
  ASSERT_EQ(out.x.sizes(), client.x.sizes());
  EXPECT_EQ(out.num_classes, 10);
  // Each output image equals some source image exactly.
  const at::Tensor flat_out = out.x.reshape({2000, -1});
  const at::Tensor flat_src = source.x.reshape({40, -1});
  const at::Tensor matches =
      flat_out.unsqueeze(1).eq(flat_src.unsqueeze(0)).all(2);
  EXPECT_TRUE(matches.any(1).all().item<bool>());
  // Labels roughly uniform over the client's classes (expected 200 each).
  const at::Tensor counts = torch::bincount(out.y, {}, 10);
  ASSERT_EQ(counts.size(0), 10);
  EXPECT_GE(counts.min().item<int64_t>(), 150);
  EXPECT_LE(counts.max().item<int64_t>(), 250);
  EXPECT_LT(out.y.max().item<int64_t>(), 10);
}

TEST(QualityTest, IrrelevantWithoutSourceIsSynthetic) {
  Dataset client;
  client.x = torch::full({500, 1, 8, 8}, 0.25f);
  client.y = torch::zeros({500}, torch::kInt64);
  client.num_classes = 5;
  Rng rng = MakeRng(4, Stream::kNoise);
  const Dataset out = MakeIrrelevant(client, nullptr, rng);
  ASSERT_EQ(out.x.sizes(), client.x.sizes());
  EXPECT_GE(out.x.min().item<float>(), 0.0f);
  EXPECT_LT(out.x.max().item<float>(), 1.0f);
  EXPECT_NEAR(out.x.mean().item<double>(), 0.5, 0.01);
  const at::Tensor counts = torch::bincount(out.y, {}, 5);
  EXPECT_GE(counts.min().item<int64_t>(), 70);
  Rng same = MakeRng(4, Stream::kNoise);
  EXPECT_TRUE(torch::equal(MakeIrrelevant(client, nullptr, same).x, out.x));
}

TEST(QualityTest, IrrelevantRejectsSourceOfOtherShape) {
  Dataset client;
  client.x = torch::zeros({5, 1, 28, 28});
  client.y = torch::zeros({5}, torch::kInt64);
  client.num_classes = 10;
  client.name = "mnist";
  Dataset source;
  source.x = torch::zeros({5, 3, 32, 32});
  source.name = "cifar";
  Rng rng = MakeRng(1, Stream::kNoise);
  ExpectError([&] { MakeIrrelevant(client, &source, rng); },
              {"cifar", "mnist"});
}

}  // namespace
}  // namespace fedprof
