// Each client algorithm's halves by hand on a tiny model: what the client
// keeps and sends, how a step is corrected, what the server's step is.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "fedprof/algorithms/algorithm.h"
#include "fedprof/algorithms/kinds.h"
#include "fedprof/algorithms/local_algorithm.h"
#include "fedprof/config/config.h"
#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/models/models.h"
#include "tests/blobs.h"

namespace fedprof {
namespace {

using testing_support::kBlobMlp;

// The blob MLP holding 0.01 · (i + 1) at value i.
std::shared_ptr<Model> TinyModel() {
  std::shared_ptr<Model> model = MakeModel(kBlobMlp);
  FlatParams p = Flatten(*model);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.01f * static_cast<float>(i + 1);
  Unflatten(p, *model);
  return model;
}

FlatParams Filled(size_t n, float first, float step) {
  FlatParams v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + step * static_cast<float>(i);
  return v;
}

FitInstructions Task(const std::string& algorithm, double lr = 0.1) {
  FitInstructions ins;
  ins.objective.algorithm = algorithm;
  ins.train.lr = lr;
  ins.train.momentum = 0.5;
  return ins;
}

TEST(ScaffoldTest, EachStepIsCorrectedByCMinusCiAndOptionTwoUpdatesCi) {
  const std::shared_ptr<Model> model = TinyModel();
  const FlatParams x = Flatten(*model);
  const size_t n = x.size();
  FitInstructions ins = Task("scaffold", 0.1);
  ins.algorithm_values = std::make_shared<const FlatParams>(Filled(n, 0.5f, 0.0f));  // c
  const FlatParams c_i = Filled(n, 0.2f, 0.0f);
  std::unique_ptr<LocalAlgorithm> scaffold = MakeScaffoldLocal(ins, *model, c_i);
  // One step's correction: y ← y − η (c − c_i) = y − 0.1 · 0.3.
  scaffold->AfterStep(*model);
  const FlatParams y = Flatten(*model);
  for (size_t j = 0; j < n; ++j) EXPECT_NEAR(y[j], x[j] - 0.03f, 1e-7) << j;
  // After K = 2 steps: c_i⁺ = c_i − c + (x − y) / (K η) = 0.2 − 0.5 + 0.03 / 0.2.
  FitResult result;
  const FlatParams kept = scaffold->End(*model, 2, &result);
  ASSERT_EQ(kept.size(), n);
  ASSERT_EQ(result.algorithm_values.size(), n);
  for (size_t j = 0; j < n; ++j) {
    EXPECT_NEAR(kept[j], 0.2 - 0.5 + 0.15, 1e-5) << j;
    EXPECT_NEAR(result.algorithm_values[j], kept[j] - 0.2f, 1e-6) << "Δc_i = c_i⁺ − c_i";
  }
  // scaffold.correct = false: the step is SGD's own.
  ins.objective.scaffold_correct = false;
  std::unique_ptr<LocalAlgorithm> plain = MakeScaffoldLocal(ins, *model, c_i);
  const FlatParams before = Flatten(*model);
  plain->AfterStep(*model);
  EXPECT_EQ(Flatten(*model), before);
  // A kept state of another size is reset to c_i = 0.
  std::unique_ptr<LocalAlgorithm> reset = MakeScaffoldLocal(ins, *model, FlatParams(3, 1.0f));
  FitResult fresh;
  const FlatParams from_zero = reset->End(*model, 1, &fresh);
  EXPECT_NEAR(from_zero[0], 0.0 - 0.5 + 0.0, 1e-6);
}

TEST(ScaffoldTest, TheServerAddsTheMeanDeltaOverTheWholePopulationToC) {
  std::unique_ptr<ServerAlgorithm> server = MakeScaffoldServer(0.5);
  EXPECT_EQ(server->Broadcast(), nullptr) << "c = 0 before the first round";
  const FlatParams global = {1.0f, 2.0f};
  FitResult a, b;
  a.algorithm_values = {0.4f, -0.8f};
  b.algorithm_values = {0.4f, 0.0f};
  EXPECT_EQ(server->Check(a, 2), "");
  EXPECT_NE(server->Check(a, 3), "");
  FitResult bad = a;
  bad.algorithm_values[1] = NAN;
  EXPECT_NE(server->Check(bad, 2).find("not finite"), std::string::npos);
  server->Observe(b, global);  // the order of arrival does not matter
  server->Observe(a, global);
  FlatParams next = {3.0f, 0.0f};  // the aggregator's average x̄
  server->Finish(global, 4, &next);
  // x ← x + η_g (x̄ − x) = (1 + 0.5 · 2, 2 + 0.5 · −2); c ← 0 + (0.8, −0.8) / 4.
  EXPECT_EQ(next, (FlatParams{2.0f, 1.0f}));
  ASSERT_NE(server->Broadcast(), nullptr);
  EXPECT_EQ(*server->Broadcast(), (FlatParams{0.2f, -0.2f}));
  // The state a checkpoint keeps brings c back.
  std::unique_ptr<ServerAlgorithm> resumed = MakeScaffoldServer(0.5);
  resumed->LoadState(server->SaveState());
  EXPECT_EQ(*resumed->Broadcast(), *server->Broadcast());
}

TEST(FedNovaTest, EffectiveStepsWithMomentumAndTheNormalisedStep) {
  TrainOptions train;
  train.momentum = 0.5;
  FitResult r;
  std::unique_ptr<LocalAlgorithm> local = MakeFedNovaLocal(train);
  const std::shared_ptr<Model> model = TinyModel();
  EXPECT_TRUE(local->End(*model, 3, &r).empty()) << "FedNova keeps nothing";
  // [τ − ρ (1 − ρ^τ) / (1 − ρ)] / (1 − ρ) = (3 − 0.875) / 0.5.
  EXPECT_DOUBLE_EQ(r.algorithm_scalar, 4.25);
  train.momentum = 0;
  MakeFedNovaLocal(train)->End(*model, 3, &r);
  EXPECT_DOUBLE_EQ(r.algorithm_scalar, 3.0);

  // Two clients from x = 0: y_1 = −2 after a_1 = 2 (n_1 = 1), y_2 = −6 after
  // a_2 = 3 (n_2 = 3): d = (1, 2), p = (1/4, 3/4), τ_eff = 2.75,
  // x ← 0 − 2.75 · 1.75.
  std::unique_ptr<ServerAlgorithm> server = MakeFedNovaServer();
  const FlatParams global = {0.0f};
  FitResult one, two;
  one.client_id = 0, one.num_samples = 1, one.params = {-2.0f}, one.algorithm_scalar = 2;
  two.client_id = 1, two.num_samples = 3, two.params = {-6.0f}, two.algorithm_scalar = 3;
  server->Observe(two, global);
  server->Observe(one, global);
  FlatParams next = {-5.0f};  // the average, which unequal steps replace
  server->Finish(global, 2, &next);
  EXPECT_FLOAT_EQ(next[0], -2.75f * 1.75f);
  // Equal steps: the average stands as it is.
  two.algorithm_scalar = 2;
  server->Observe(one, global);
  server->Observe(two, global);
  next = {-5.0f};
  server->Finish(global, 2, &next);
  EXPECT_EQ(next[0], -5.0f);
  FitResult lying = one;
  for (double a : {0.0, -1.0, std::nan(""), 1e10}) {
    lying.algorithm_scalar = a;
    EXPECT_NE(server->Check(lying, 1), "") << a;
  }
}

TEST(FedDynTest, TheLocalTermsAndStateAndTheServersCorrection) {
  const std::shared_ptr<Model> model = TinyModel();
  const FlatParams x = Flatten(*model);
  const size_t n = x.size();
  FitInstructions ins = Task("feddyn");
  ins.objective.feddyn_alpha = 0.5;
  const FlatParams g = Filled(n, 0.1f, 0.0f);
  std::unique_ptr<LocalAlgorithm> feddyn = MakeFedDynLocal(ins, *model, g);
  // At θ = θ^{t−1} the quadratic term is 0 and the linear one −⟨g, θ⟩.
  double dot = 0;
  for (size_t j = 0; j < n; ++j) dot += 0.1 * x[j];
  EXPECT_NEAR(feddyn->LossTerm(*model, {}).item<double>(), -dot, 1e-4);
  // Move θ by +0.2 everywhere: α/2 · n · 0.04 − ⟨g, θ + 0.2⟩.
  FlatParams moved = x;
  for (float& v : moved) v += 0.2f;
  Unflatten(moved, *model);
  EXPECT_NEAR(feddyn->LossTerm(*model, {}).item<double>(), 0.25 * n * 0.04 - (dot + 0.1 * 0.2 * n), 1e-3);
  FitResult r;
  const FlatParams kept = feddyn->End(*model, 5, &r);
  for (size_t j = 0; j < n; ++j) EXPECT_NEAR(kept[j], 0.1 - 0.5 * 0.2, 1e-6) << "g − α (θ_k − θ^{t−1})";

  // Server: x = 1, mean 3 over |P| = 2 of N = 4, α = 0.5:
  // h = 0 − 0.5 · (2/4) · 2 = −0.5, θ = 3 − h/α = 4.
  std::unique_ptr<ServerAlgorithm> server = MakeFedDynServer(0.5);
  FitResult any;
  server->Observe(any, {1.0f});
  server->Observe(any, {1.0f});
  FlatParams next = {3.0f};
  server->Finish({1.0f}, 4, &next);
  EXPECT_FLOAT_EQ(next[0], 4.0f);
  // h carries over: from 4 with mean 4 (no change), h stays −0.5: θ = 4 + 1.
  server->Observe(any, {4.0f});
  next = {4.0f};
  server->Finish({4.0f}, 4, &next);
  EXPECT_FLOAT_EQ(next[0], 5.0f);
  // α = 0 is FedAvg: the average stands.
  std::unique_ptr<ServerAlgorithm> neutral = MakeFedDynServer(0);
  neutral->Observe(any, {1.0f});
  next = {3.0f};
  neutral->Finish({1.0f}, 4, &next);
  EXPECT_EQ(next[0], 3.0f);
}

// Cosine similarity of rows r of a and b, in double.
double RowCosine(const torch::Tensor& a, const torch::Tensor& b, int64_t r) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t j = 0; j < a.size(1); ++j) {
    const double u = a[r][j].item<double>(), v = b[r][j].item<double>();
    ab += u * v, aa += u * u, bb += v * v;
  }
  return ab / std::sqrt(aa * bb);
}

TEST(MoonTest, TheContrastiveLossOfTheGlobalAndThePreviousModelsRepresentations) {
  const std::shared_ptr<Model> model = TinyModel();
  const FlatParams global = Flatten(*model);
  FlatParams previous = global;
  for (size_t j = 0; j < previous.size(); ++j) previous[j] = std::sin(static_cast<float>(j));
  FitInstructions ins = Task("moon");
  ins.objective.moon_mu = 2.0;
  ins.objective.moon_tau = 0.5;
  std::unique_ptr<LocalAlgorithm> moon = MakeMoonLocal(ins, *model, previous);
  ASSERT_TRUE(moon->NeedsRepresentation());
  const torch::Tensor x = torch::tensor({0.5f, -1.0f, 2.0f, 0.25f, -0.3f, 0.7f, 1.5f, -2.0f}).reshape({2, 4});
  // The model being trained moves away from w^t before this batch.
  FlatParams current = global;
  for (float& v : current) v += 0.05f;
  Unflatten(current, *model);
  model->train();
  moon->BeforeForward(*model, x);
  EXPECT_EQ(Flatten(*model), current) << "the reference passes leave the model as it was";
  EXPECT_TRUE(model->is_training());
  LocalBatch batch{x, {}};
  model->Forward(x, &batch.representation);
  // Each reference representation by its own pass.
  torch::Tensor z_glob, z_prev;
  {
    torch::NoGradGuard no_grad;
    Unflatten(global, *model);
    model->Forward(x, &z_glob);
    Unflatten(previous, *model);
    model->Forward(x, &z_prev);
    Unflatten(current, *model);
  }
  double expected = 0;
  for (int64_t r = 0; r < 2; ++r) {
    const double pos = RowCosine(batch.representation, z_glob, r) / 0.5;
    const double neg = RowCosine(batch.representation, z_prev, r) / 0.5;
    expected += -std::log(std::exp(pos) / (std::exp(pos) + std::exp(neg))) / 2;
  }
  const torch::Tensor term = moon->LossTerm(*model, batch);
  ASSERT_TRUE(term.defined());
  EXPECT_NEAR(term.item<double>(), 2.0 * expected, 1e-5);
  EXPECT_TRUE(term.requires_grad()) << "the term trains the model";
  // The client keeps its trained model as the next round's w_i^{t−1}.
  FitResult r;
  EXPECT_EQ(moon->End(*model, 3, &r), current);
  EXPECT_TRUE(r.algorithm_values.empty());

  // Before a client's first round, or with a state of another size: no term.
  for (const FlatParams& kept : {FlatParams(), FlatParams(3, 1.0f)}) {
    std::unique_ptr<LocalAlgorithm> first = MakeMoonLocal(ins, *model, kept);
    first->BeforeForward(*model, x);
    EXPECT_FALSE(first->LossTerm(*model, batch).defined()) << kept.size();
  }
  // μ = 0 is plain SGD: no hook at all.
  ins.objective.moon_mu = 0;
  EXPECT_TRUE(MakeLocalAlgorithms(ins, 0, *model, previous).empty());
}

TEST(FedProxTest, TheProximalTermIsHalfMuTimesTheSquaredDistance) {
  const std::shared_ptr<Model> model = TinyModel();
  std::unique_ptr<LocalAlgorithm> prox = MakeFedProxLocal(2.0, *model);
  EXPECT_EQ(prox->LossTerm(*model, {}).item<double>(), 0.0);
  FlatParams moved = Flatten(*model);
  for (float& v : moved) v += 0.5f;
  Unflatten(moved, *model);
  EXPECT_NEAR(prox->LossTerm(*model, {}).item<double>(), 0.5 * 2.0 * 0.25 * static_cast<double>(moved.size()), 1e-4);
}

TEST(ClientAlgorithmTest, PlainSgdHasNoHooksAndAnUnknownAlgorithmIsRefused) {
  const std::shared_ptr<Model> model = TinyModel();
  EXPECT_TRUE(MakeLocalAlgorithms(Task(""), 0, *model, {}).empty());
  EXPECT_TRUE(MakeLocalAlgorithms(Task("none"), 0, *model, {}).empty());
  FitInstructions dyn = Task("feddyn");
  EXPECT_TRUE(MakeLocalAlgorithms(dyn, 0, *model, {}).empty()) << "FedDyn with α = 0 is plain SGD";
  EXPECT_THROW(MakeLocalAlgorithms(Task("moon2"), 0, *model, {}), Error);
  Config config;
  EXPECT_EQ(MakeServerAlgorithm("", config.options()), nullptr);
  EXPECT_THROW(MakeServerAlgorithm("moon2", config.options()), Error);
  EXPECT_EQ(MakeServerAlgorithm("moon", config.options()), nullptr) << "MOON's server half is the average";
}

TEST(ClientAlgorithmTest, TheOptionOffersEveryAlgorithmOfTheTable) {
  const std::vector<OptionSpec>& table = AllOptions();
  const auto it = std::find_if(table.begin(), table.end(),
                               [](const OptionSpec& o) { return std::string(o.name) == "strategy.algorithm"; });
  ASSERT_NE(it, table.end());
  std::string names;
  for (const AlgorithmName& a : kAlgorithmNames) names += std::string(names.empty() ? "" : "|") + a.name;
  EXPECT_EQ(std::string(it->choices), names);
}

}  // namespace
}  // namespace fedprof
