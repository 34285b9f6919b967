#include "fedprof/profiling/profile.h"
#include "fedprof/profiling/profiler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "fedprof/models/models.h"

namespace fedprof {
namespace {

Profile MakeProfile(std::vector<double> mean, std::vector<double> var, int64_t version = 0) {
  Profile p;
  p.version = version;
  p.layer = "fc1";
  p.mean = std::move(mean);
  p.var = std::move(var);
  return p;
}

TEST(ProfileTest, KlClosedForms) {
  EXPECT_DOUBLE_EQ(GaussianKl(0, 1, 0, 1), 0.0);
  // Same variance: KL = (Δμ)² / (2σ²).
  EXPECT_DOUBLE_EQ(GaussianKl(3, 4, 1, 4), 4.0 / 8.0);
  // Same mean: KL = ½(log(σv²/σk²) + σk²/σv² − 1).
  EXPECT_NEAR(GaussianKl(0, 1, 0, 4), 0.5 * (std::log(4.0) + 0.25 - 1), 1e-15);
  // KL is not symmetric.
  EXPECT_NE(GaussianKl(0, 1, 0, 4), GaussianKl(0, 4, 0, 1));
  EXPECT_GT(GaussianKl(0, 1, 0, 4), 0);
}

TEST(ProfileTest, IdenticalProfilesHaveZeroDivergenceAndScoreOne) {
  const Profile p = MakeProfile({0.5, -2, 7}, {1, 0.1, 30});
  EXPECT_EQ(Divergence(p, p), 0.0);
  EXPECT_EQ(Score(Divergence(p, p), 10), 1.0);
}

TEST(ProfileTest, DivergenceIsTheMeanUnitKlAndScoreDecays) {
  const Profile k = MakeProfile({1, 0}, {1, 2});
  const Profile v = MakeProfile({0, 0}, {1, 1});
  const double kl0 = 0.5, kl1 = 0.5 * std::log(0.5) + 0.5;
  const std::vector<double> kl = UnitKl(k, v);
  EXPECT_DOUBLE_EQ(kl[0], kl0);
  EXPECT_DOUBLE_EQ(kl[1], kl1);
  EXPECT_DOUBLE_EQ(Divergence(k, v), (kl0 + kl1) / 2);
  EXPECT_DOUBLE_EQ(Score(0.3, 10), std::exp(-3.0));
  EXPECT_EQ(Score(123.0, 0), 1.0);  // α = 0: every client scores alike
}

TEST(ProfileTest, KlAgreesWithMonteCarlo) {
  // E_{x~N_k}[log p_k(x) − log p_v(x)] by sampling.
  const double mk = 0.7, vk = 2.0, mv = -0.4, vv = 0.5;
  Rng rng = MakeRng(5, Stream::kNoise);
  const int n = 400000;
  double sum = 0;
  auto log_pdf = [](double x, double m, double v) {
    return -0.5 * std::log(2 * M_PI * v) - (x - m) * (x - m) / (2 * v);
  };
  for (int i = 0; i < n; ++i) {
    const double x = mk + std::sqrt(vk) * StandardNormal(rng);
    sum += log_pdf(x, mk, vk) - log_pdf(x, mv, vv);
  }
  EXPECT_NEAR(sum / n, GaussianKl(mk, vk, mv, vv), 0.02);
}

TEST(ProfileTest, ComputedProfileEqualsDirectStatisticsOfTheLayer) {
  torch::manual_seed(4);
  for (const std::string layer : {"fc1", "conv2"}) {
    auto model = MakeModel({"lenet5", {1, 28, 28}, 10, {}, layer});
    Dataset data;
    data.x = torch::rand({250, 1, 28, 28});
    data.y = torch::zeros({250}, torch::kLong);
    data.num_classes = 10;
    // Batches of 64 must give what one pass over all samples gives.
    const Profile p = ComputeProfile(*model, data, 3, 64);
    EXPECT_EQ(p.version, 3);
    EXPECT_EQ(p.layer, layer);
    torch::NoGradGuard no_grad;
    const auto params = model->named_parameters();
    torch::Tensor h;
    if (layer == "fc1") {
      namespace F = torch::nn::functional;
      auto c1 = F::max_pool2d(torch::relu(torch::conv2d(data.x, params["conv1.weight"],
                                                        params["conv1.bias"], 1, 2)),
                              F::MaxPool2dFuncOptions(2));
      auto c2 = F::max_pool2d(
          torch::relu(torch::conv2d(c1, params["conv2.weight"], params["conv2.bias"])),
          F::MaxPool2dFuncOptions(2));
      h = torch::addmm(params["fc1.bias"], c2.flatten(1), params["fc1.weight"].t());
      ASSERT_EQ(p.units(), 120u);
    } else {
      namespace F = torch::nn::functional;
      auto c1 = F::max_pool2d(torch::relu(torch::conv2d(data.x, params["conv1.weight"],
                                                        params["conv1.bias"], 1, 2)),
                              F::MaxPool2dFuncOptions(2));
      h = torch::conv2d(c1, params["conv2.weight"], params["conv2.bias"]).sum({2, 3});
      ASSERT_EQ(p.units(), 16u);
    }
    const torch::Tensor mean = h.to(torch::kDouble).mean(0);
    const torch::Tensor var = h.to(torch::kDouble).var(0, /*unbiased=*/false);
    for (size_t i = 0; i < p.units(); ++i) {
      EXPECT_NEAR(p.mean[i], mean[i].item<double>(), 1e-4 * (1 + std::fabs(p.mean[i])));
      EXPECT_NEAR(p.var[i], std::max(var[i].item<double>(), kVarianceFloor),
                  1e-4 * (1 + p.var[i]));
    }
  }
}

// Many small data sets profiled in shared passes: each profile is its own
// data's, within float rounding of its own pass (exactly it when alone),
// whatever data sets share the passes; a large one is cut into its passes
// as ComputeProfile cuts it.
TEST(ProfileTest, ProfilesComputedTogetherAreEachDataSetsOwn) {
  torch::manual_seed(5);
  for (const std::string layer : {"fc1", "conv2"}) {
    auto model = MakeModel({"lenet5", {1, 28, 28}, 10, {}, layer});
    std::vector<Dataset> sets;
    for (int64_t n : {20, 0, 7, 130, 64, 1, 45}) {
      Dataset d;
      d.x = torch::rand({n, 1, 28, 28});
      d.y = torch::zeros({n}, torch::kLong);
      d.num_classes = 10;
      sets.push_back(d);
    }
    std::vector<const Dataset*> all;
    for (const Dataset& d : sets) all.push_back(&d);
    const std::vector<Profile> together = ComputeProfiles(*model, all, 2);
    ASSERT_EQ(together.size(), sets.size());
    for (size_t i = 0; i < sets.size(); ++i) {
      const Profile alone = ComputeProfile(*model, sets[i], 2);
      EXPECT_EQ(together[i].version, 2);
      EXPECT_EQ(together[i].layer, layer);
      ASSERT_EQ(together[i].units(), alone.units()) << i;
      EXPECT_EQ(ComputeProfiles(*model, {&sets[i]}, 2)[0].mean, alone.mean) << i;
      EXPECT_EQ(ComputeProfiles(*model, {&sets[i]}, 2)[0].var, alone.var) << i;
      for (size_t u = 0; u < alone.units(); ++u) {
        EXPECT_NEAR(together[i].mean[u], alone.mean[u], 1e-6 * (1 + std::fabs(alone.mean[u])));
        EXPECT_NEAR(together[i].var[u], alone.var[u], 1e-6 * (1 + alone.var[u]));
      }
      if (sets[i].size() > 0) EXPECT_LT(Divergence(together[i], alone), 1e-6) << i;
    }
    // The same data sets in the same order: the same profiles, bit for bit.
    const std::vector<Profile> again = ComputeProfiles(*model, all, 2);
    for (size_t i = 0; i < sets.size(); ++i) EXPECT_EQ(again[i].mean, together[i].mean);
  }
}

TEST(ProfileTest, ConstantUnitsGetTheVarianceFloor) {
  auto model = MakeModel({"mlp", {3}, 2, {4}, ""});
  Dataset data;
  data.x = torch::ones({10, 3});
  data.y = torch::zeros({10}, torch::kLong);
  data.num_classes = 2;
  const Profile p = ComputeProfile(*model, data, 0);
  for (double v : p.var) EXPECT_EQ(v, kVarianceFloor);
  EXPECT_TRUE(std::isfinite(Divergence(p, p)));
}

TEST(ProfileTest, MalformedProfilesAreNamed) {
  const Profile ref = MakeProfile({0, 0}, {1, 1}, 2);
  EXPECT_EQ(CheckProfile(MakeProfile({1, 2}, {1, 1}, 2), ref), "");
  EXPECT_NE(CheckProfile(MakeProfile({NAN, 2}, {1, 1}, 2), ref).find("non-finite mean"),
            std::string::npos);
  EXPECT_NE(CheckProfile(MakeProfile({1, 2}, {1, -1}, 2), ref).find("variance <= 0 at unit 1"),
            std::string::npos);
  EXPECT_NE(CheckProfile(MakeProfile({1, 2}, {1, 0}, 2), ref).find("variance <= 0"),
            std::string::npos);
  EXPECT_NE(CheckProfile(MakeProfile({1, 2}, {1}, 2), ref).find("units, var"), std::string::npos);
  EXPECT_NE(CheckProfile(MakeProfile({1, 2, 3}, {1, 1, 1}, 2), ref).find("the reference 2"),
            std::string::npos);
  EXPECT_NE(CheckProfile(MakeProfile({1, 2}, {1, 1}, 1), ref).find("version 1"),
            std::string::npos);
}

TEST(ProfileTest, JsonRoundTripsAndRefusesGarbage) {
  const Profile p = MakeProfile({0.1, -3.25}, {2.5, 1e-3}, 7);
  const Profile back = ProfileFromJson(ProfileToJson(p), "p.json");
  EXPECT_EQ(back.version, 7);
  EXPECT_EQ(back.layer, "fc1");
  EXPECT_EQ(back.mean, p.mean);
  EXPECT_EQ(back.var, p.var);
  EXPECT_THROW(ProfileFromJson("{\"version\": 1}", "p.json"), Error);
  EXPECT_THROW(ProfileFromJson("[1, 2", "p.json"), Error);
}

}  // namespace
}  // namespace fedprof
