#include "fedprof/profiling/profile.h"
#include "fedprof/profiling/profiler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <thread>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/params.h"
#include "fedprof/core/rng.h"
#include "fedprof/models/models.h"
#include "tests/expect_error.h"

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

// A data set of one pass: its profile is exactly the double-precision mean
// and population variance of the layer's rows, the sums divided by n, as
// they have always been computed (runs keep their numbers).
TEST(ProfileTest, ProfileOfOnePassIsItsRowsStatisticsBitForBit) {
  torch::manual_seed(6);
  auto model = MakeModel({"lenet5", {1, 28, 28}, 10, {}, "fc1"});
  Dataset data;
  data.x = torch::rand({37, 1, 28, 28});
  data.y = torch::zeros({37}, torch::kLong);
  data.num_classes = 10;
  torch::Tensor rep;
  {
    torch::NoGradGuard no_grad;
    model->eval();
    model->Forward(data.x, &rep);
  }
  const torch::Tensor r = rep.to(torch::kDouble);
  const torch::Tensor mean = r.sum(0) / 37.0;
  const torch::Tensor var = (r.pow(2).sum(0) / 37.0 - mean.pow(2)).clamp_min(kVarianceFloor);
  const std::vector<double> expected_mean(mean.data_ptr<double>(), mean.data_ptr<double>() + 120);
  const std::vector<double> expected_var(var.data_ptr<double>(), var.data_ptr<double>() + 120);
  const Profile alone = ComputeProfile(*model, data, 0);
  EXPECT_EQ(alone.mean, expected_mean);
  EXPECT_EQ(alone.var, expected_var);
  EXPECT_EQ(ComputeProfiles(*model, {&data}, 0)[0].mean, expected_mean);
  EXPECT_EQ(ComputeProfiles(*model, {&data}, 0)[0].var, expected_var);
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
      if (sets[i].size() > 0) {
        EXPECT_LT(Divergence(together[i], alone), 1e-6) << i;
      }
    }
    // The same data sets in the same order: the same profiles, bit for bit.
    const std::vector<Profile> again = ComputeProfiles(*model, all, 2);
    for (size_t i = 0; i < sets.size(); ++i) EXPECT_EQ(again[i].mean, together[i].mean);
  }
}

// Data sets made of rows of shared input tables: each layer row is that of
// its table's pass of 128 consecutive rows, bit for bit, whichever data set
// asks for it first and on whichever thread; each profile is within float
// rounding of the data set's own pass.
TEST(ProfileTest, ProfilesFromSharedRowsAreEachDataSetsOwn) {
  torch::manual_seed(9);
  const std::vector<torch::Tensor> images = {torch::rand({300, 1, 28, 28}),
                                             torch::rand({50, 1, 28, 28})};
  InputTables tables;
  tables.sizes = {300, 50};
  tables.inputs = [&](int t, int64_t start, int64_t len) { return images.at(t).narrow(0, start, len); };
  // Rows repeated, of both tables, out of order; one set of none.
  std::vector<TableRows> sets = {
      {0, {5, 299, 5, 130, 0}}, {1, {49}}, {0, {}}, {1, {3, 1, 4, 1, 5, 9, 2, 6}}, {0, {}}};
  for (int64_t r = 0; r < 127; ++r) sets.back().rows.push_back((r * 37) % 300);
  std::vector<const TableRows*> all;
  for (const TableRows& s : sets) all.push_back(&s);
  for (const std::string layer : {"fc1", "conv2"}) {
    auto model = MakeModel({"lenet5", {1, 28, 28}, 10, {}, layer});
    SharedRepresentations shared(tables);
    const torch::Tensor rows = shared.Gather(*model, all);
    torch::NoGradGuard no_grad;
    model->eval();
    int64_t i = 0;
    for (const TableRows& s : sets) {
      for (const int64_t r : s.rows) {
        const int64_t start = r / kProfileBatch * kProfileBatch;
        torch::Tensor rep;
        model->Forward(
            images[s.table].narrow(0, start, std::min(kProfileBatch, tables.sizes[s.table] - start)),
            &rep);
        EXPECT_TRUE(torch::equal(rows[i++], rep[r - start])) << layer << " table " << s.table << " row " << r;
      }
    }
    ASSERT_EQ(i, rows.size(0));

    std::vector<int64_t> sizes;
    for (const TableRows& s : sets) sizes.push_back(static_cast<int64_t>(s.rows.size()));
    const std::vector<Profile> profiles = ProfilesFromRows(rows, sizes, 4, model->profiled_layer());
    ASSERT_EQ(profiles.size(), sets.size());
    for (size_t k = 0; k < sets.size(); ++k) {
      Dataset own;
      own.x = images[sets[k].table].index_select(0, torch::tensor(sets[k].rows, torch::kLong));
      own.y = torch::zeros({own.x.size(0)}, torch::kLong);
      own.num_classes = 10;
      const Profile alone = ComputeProfile(*model, own, 4);
      EXPECT_EQ(profiles[k].version, 4);
      EXPECT_EQ(profiles[k].layer, layer);
      ASSERT_EQ(profiles[k].units(), alone.units()) << k;
      for (size_t u = 0; u < alone.units(); ++u) {
        EXPECT_NEAR(profiles[k].mean[u], alone.mean[u], 1e-6 * (1 + std::fabs(alone.mean[u])));
        EXPECT_NEAR(profiles[k].var[u], alone.var[u], 1e-6 * (1 + alone.var[u]));
      }
      if (!sets[k].rows.empty()) {
        EXPECT_LT(Divergence(profiles[k], alone), 1e-6) << k;
      }
    }

    // Asked for set by set in another order, on two threads with a replica
    // each: the same rows.
    SharedRepresentations again(tables);
    auto replica = MakeModel({"lenet5", {1, 28, 28}, 10, {}, layer});
    Unflatten(Flatten(*model), *replica);
    std::vector<torch::Tensor> parts(sets.size());
    std::thread other([&] {
      torch::NoGradGuard guard;
      for (size_t k = 1; k < sets.size(); k += 2) parts[k] = again.Gather(*replica, {&sets[k]});
    });
    for (size_t k = sets.size() - 1; k < sets.size(); k -= 2) parts[k] = again.Gather(*model, {&sets[k]});
    other.join();
    std::vector<torch::Tensor> defined;
    for (const torch::Tensor& t : parts) {
      if (t.defined()) defined.push_back(t);
    }
    EXPECT_TRUE(torch::equal(torch::cat(defined), rows)) << layer;
  }
  auto model = MakeModel({"lenet5", {1, 28, 28}, 10, {}, "fc1"});
  SharedRepresentations shared(tables);
  const TableRows beyond{1, {50}}, no_table{2, {0}};
  testing_support::ExpectError([&] { shared.Gather(*model, {&beyond}); },
                               {"row 50 of table 1", "has 50"});
  testing_support::ExpectError([&] { shared.Gather(*model, {&no_table}); }, "no table 2");
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
