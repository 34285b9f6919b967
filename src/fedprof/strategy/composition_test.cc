// Strategies composed from a selector and an aggregator: presets, overrides,
// every combination, state, and the refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fedprof/config/config.h"
#include "fedprof/core/error.h"
#include "fedprof/models/models.h"
#include "fedprof/run/run.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {
namespace {

Config With(const std::vector<std::pair<std::string, std::string>>& settings) {
  Config c;
  for (const auto& [key, value] : settings) c.Set(key, value);
  return c;
}

// A reference profile per model version (mean = version) for the fedprof
// selector.
StrategyContext Context(int n) {
  StrategyContext context;
  context.num_clients = n;
  context.reference_profile = [](const FlatParams&, int64_t version) {
    Profile p;
    p.version = version;
    p.layer = "fc1";
    p.mean = {static_cast<double>(version), 0.0};
    p.var = {1.0, 1.0};
    return p;
  };
  return context;
}

TEST(CompositionTest, PresetsAreTheirCompositions) {
  struct Case {
    std::string preset, selector, aggregator;
    double mu;
  };
  const std::vector<Case> cases = {
      {"fedavg", "uniform", "average", 0},  {"fedavg-rp", "uniform", "average", 0},
      {"fedprox", "size", "average", 0.01}, {"fedadam", "uniform", "fedadam", 0},
      {"afl", "afl", "average", 0},         {"fedbn", "uniform", "fedbn", 0},
      {"cfcfm", "cfcfm", "average", 0},     {"clustered", "clustered", "average", 0},
      {"fedprof", "fedprof", "average", 0}, {"oort", "oort", "average", 0},
      {"fedbuff", "uniform", "fedbuff", 0},
  };
  for (const Case& c : cases) {
    const StrategySpec spec = ResolveStrategy(With({{"strategy.name", c.preset}}).options());
    EXPECT_EQ(spec.selector, c.selector) << c.preset;
    EXPECT_EQ(spec.aggregator, c.aggregator) << c.preset;
    EXPECT_DOUBLE_EQ(spec.proximal_mu, c.mu) << c.preset;
    EXPECT_FALSE(spec.overridden) << c.preset;
    EXPECT_EQ(spec.Label(), c.preset);
    EXPECT_EQ(spec.mode,
              c.preset == "fedavg-rp" ? AggregationMode::kPartial : AggregationMode::kFull);
    auto strategy = MakeStrategy(With({{"strategy.name", c.preset}}).options(), Context(4));
    EXPECT_EQ(strategy->name(), c.preset);
    EXPECT_EQ(strategy->KeepsLocalBatchNorm(), c.preset == "fedbn");
    EXPECT_DOUBLE_EQ(strategy->ProximalMu(), c.mu);
  }
}

// Overrides win; an empty override is the preset's; overriding with the
// preset's own part changes nothing.
TEST(CompositionTest, OverridesWinAndEmptyMeansThePresets) {
  StrategySpec s =
      ResolveStrategy(With({{"strategy.name", "fedprof"}, {"strategy.aggregator", "fedadam"}}).options());
  EXPECT_EQ(s.selector, "fedprof");
  EXPECT_EQ(s.aggregator, "fedadam");
  EXPECT_EQ(s.Label(), "fedprof+fedadam");
  s = ResolveStrategy(With({{"strategy.name", "fedprox"}, {"train.proximal_mu", "0"}}).options());
  EXPECT_EQ(s.selector, "size");
  EXPECT_DOUBLE_EQ(s.proximal_mu, 0);
  EXPECT_EQ(s.Label(), "size+average");
  s = ResolveStrategy(With({{"strategy.name", "fedprox"}, {"fedprox.mu", "0.5"}}).options());
  EXPECT_DOUBLE_EQ(s.proximal_mu, 0.5);
  EXPECT_EQ(s.Label(), "fedprox");
  s = ResolveStrategy(With(
      {{"strategy.name", "fedavg"}, {"train.proximal_mu", "0.1"}, {"strategy.selector", "afl"}}).options());
  EXPECT_EQ(s.Label(), "afl+average+prox");
  EXPECT_DOUBLE_EQ(s.proximal_mu, 0.1);
  s = ResolveStrategy(With({{"strategy.name", "fedprof"},
                            {"strategy.selector", "fedprof"},
                            {"strategy.aggregator", ""}}).options());
  EXPECT_FALSE(s.overridden);
  EXPECT_EQ(s.Label(), "fedprof");
  // FedAvg-RP is partial by definition, whatever else is composed with it.
  s = ResolveStrategy(With({{"strategy.name", "fedavg-rp"},
                            {"strategy.aggregator", "fedadam"},
                            {"strategy.aggregation", "full"}}).options());
  EXPECT_EQ(s.mode, AggregationMode::kPartial);
}

// Every selector with every aggregator: the reports, sketches and local
// batch norm are the parts'.
TEST(CompositionTest, EverySelectorCombinesWithEveryAggregator) {
  for (const std::string selector : {"uniform", "size", "fedprof", "afl", "cfcfm", "clustered", "oort"}) {
    for (const std::string aggregator : {"average", "fedadam", "fedbn", "fedbuff"}) {
      auto s = MakeStrategy(
          With({{"strategy.selector", selector}, {"strategy.aggregator", aggregator}}).options(), Context(6));
      EXPECT_EQ(s->WantedReports().profile, selector == "fedprof") << selector << aggregator;
      EXPECT_EQ(s->WantedReports().loss, selector == "afl") << selector << aggregator;
      EXPECT_EQ(s->SketchDim() > 0, selector == "clustered") << selector << aggregator;
      EXPECT_EQ(s->KeepsLocalBatchNorm(), aggregator == "fedbn") << selector << aggregator;
      // One round: select 3 of 6, aggregate a result.
      s->OnGlobalModel({0.0f, 0.0f}, 0);
      std::vector<ClientInfo> infos;
      for (int k = 0; k < 6; ++k) infos.push_back({k, 10 + k, 1.0 + k});
      Rng rng = MakeRng(1, Stream::kSelection);
      TaskSetup setup;
      setup.round = 1;
      setup.global = std::make_shared<const FlatParams>(FlatParams{0.0f, 0.0f});
      setup.train.lr = 0.125;
      setup.seed = 9;
      const std::vector<ClientInstructions> picked = s->ConfigureFit({1, 3, &infos}, rng, setup);
      EXPECT_EQ(picked.size(), 3u) << selector << aggregator;
      for (const ClientInstructions& c : picked) {
        // Filled whole: the setup's, the reports wanted, the local objective.
        const FitInstructions& ins = c.instructions;
        EXPECT_EQ(ins.global, setup.global) << "θ shared, not copied";
        EXPECT_EQ(ins.train.lr, 0.125);
        EXPECT_EQ(ins.seed, 9u);
        EXPECT_EQ(ins.report.profile, selector == "fedprof") << selector << aggregator;
        EXPECT_EQ(ins.report.loss, selector == "afl") << selector << aggregator;
        EXPECT_EQ(ins.report.sketch_dim, s->SketchDim()) << selector << aggregator;
        EXPECT_FALSE(ins.report.evaluate);
        EXPECT_EQ(ins.objective.keep_local_batch_norm, aggregator == "fedbn");
      }
      ModelSum sum;
      sum.Reset(2);
      sum.Add({1.0f, 2.0f}, 10);
      FlatParams next;
      s->AggregateFit({0.0f, 0.0f}, sum, 100, &next);
      EXPECT_GT(next[0], 0.0f) << selector << aggregator;
    }
  }
}

// A selector that values clients by θ's loss on their data and asks for a
// loss only of the clients it holds none of: clients of the same round are
// told different things.
class ValuesOnceSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    (void)rng;
    std::vector<int> ids;
    for (const ClientInfo& c : *context.clients) ids.push_back(c.id);
    ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(context.num_to_select)));
    return ids;
  }
  void ConfigureReport(int client_id, ReportRequest* report) const override {
    report->loss = valued_.count(client_id) == 0;
  }
  void Observe(const FitResult& result) override {
    valued_[result.client_id] = result.pre_train_loss;
  }

 private:
  std::map<int, double> valued_;
};

TEST(CompositionTest, ConfigureFitTellsEachClientWhatTheStrategyAsksOfIt) {
  Strategy s("values-once", std::make_unique<ValuesOnceSelector>(),
             MakeWeightedAverage(AggregationMode::kFull));
  s.SetProximalMu(0.5);
  FitResult reported;
  reported.client_id = 1;
  reported.pre_train_loss = 0.7;
  s.Observe(reported);
  std::vector<ClientInfo> infos;
  for (int k = 0; k < 4; ++k) infos.push_back({k, 10, -1});
  TaskSetup setup;
  setup.round = 3;
  setup.global = std::make_shared<const FlatParams>(FlatParams{1.0f, 2.0f});
  setup.model_version = 2;
  setup.train.epochs = 2;
  Rng rng = MakeRng(1, Stream::kSelection);
  const std::vector<ClientInstructions> picked = s.ConfigureFit({3, 3, &infos}, rng, setup);
  ASSERT_EQ(picked.size(), 3u);
  for (size_t i = 0; i < picked.size(); ++i) {
    const FitInstructions& ins = picked[i].instructions;
    EXPECT_EQ(picked[i].client_id, static_cast<int>(i));
    EXPECT_EQ(ins.report.loss, i != 1) << "client 1 already reported its loss";
    EXPECT_EQ(ins.global, setup.global) << "θ shared, not copied";
    EXPECT_EQ(ins.round, 3);
    EXPECT_EQ(ins.model_version, 2);
    EXPECT_EQ(ins.train.epochs, 2);
    EXPECT_EQ(ins.objective.prox_mu, 0.5);
  }
  // Reports are asked of the same clients the same way, and never train.
  const std::vector<ClientInstructions> reports = s.ConfigureReports({0, 1}, setup);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_TRUE(reports[0].instructions.report.loss);
  EXPECT_FALSE(reports[1].instructions.report.loss);
  EXPECT_EQ(reports[0].instructions.train.epochs, 0);
  EXPECT_EQ(reports[1].instructions.global, setup.global);
}

// Federated evaluation asks only for an evaluation, with no training and no
// other report.
TEST(CompositionTest, ConfigureEvaluateAsksOnlyForAnEvaluation) {
  auto s = MakeStrategy(With({{"strategy.name", "fedprof"}}).options(), Context(5));
  s->OnGlobalModel({0.0f, 0.0f}, 0);
  std::vector<ClientInfo> infos;
  for (int k = 0; k < 5; ++k) infos.push_back({k, 10, -1});
  TaskSetup setup;
  setup.round = 4;
  setup.global = std::make_shared<const FlatParams>(FlatParams{0.0f, 0.0f});
  setup.model_version = 4;
  Rng rng = MakeRng(1, Stream::kFederatedEvaluation);
  const std::vector<ClientInstructions> asked = s->ConfigureEvaluate({4, 2, &infos}, rng, setup);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_NE(asked[0].client_id, asked[1].client_id);
  for (const ClientInstructions& c : asked) {
    EXPECT_TRUE(c.instructions.report.evaluate);
    EXPECT_FALSE(c.instructions.report.profile);
    EXPECT_EQ(c.instructions.train.epochs, 0);
    EXPECT_EQ(c.instructions.global, setup.global);
  }
}

// FedProf's selection with FedAdam's aggregation keeps both parts' state:
// the clients' divergences and the server's moments.
TEST(CompositionTest, ComposedStateRoundTrips) {
  const Config c = With({{"strategy.name", "fedprof"}, {"strategy.aggregator", "fedadam"}});
  auto s = MakeStrategy(c.options(), Context(3));
  s->OnGlobalModel({0.0f, 0.0f}, 0);
  FitResult r;
  r.client_id = 1;
  r.ok = true;
  r.profile = Context(3).reference_profile({}, 0);
  r.profile->mean[0] = 0.5;
  ASSERT_EQ(s->CheckResult(r), "");
  s->Observe(r);
  ModelSum sum;
  sum.Reset(2);
  sum.Add({1.0f, -1.0f}, 10);
  FlatParams next;
  s->AggregateFit({0.0f, 0.0f}, sum, 10, &next);
  const std::string state = s->SaveState();
  const nlohmann::json j = nlohmann::json::parse(state);
  EXPECT_TRUE(j.contains("divergences"));
  EXPECT_TRUE(nlohmann::json::parse(j.at("aggregator").get<std::string>()).contains("m"));

  auto restored = MakeStrategy(c.options(), Context(3));
  restored->LoadState(state);
  EXPECT_EQ(restored->SaveState(), state);
  EXPECT_TRUE(restored->HasReport(1));
  EXPECT_FALSE(restored->HasReport(0));
  FlatParams a, b;
  s->AggregateFit({0.0f, 0.0f}, sum, 10, &a);
  restored->AggregateFit({0.0f, 0.0f}, sum, 10, &b);
  EXPECT_EQ(a, b);  // the moments came back too
  EXPECT_THROW(MakeStrategy(c.options(), Context(4))->LoadState(state), Error);
  EXPECT_THROW(restored->LoadState("{\"divergences\": [null, null, null]}"), Error);
}

// A preset's checkpoint state keeps the form it had before strategies were
// composed, so runs checkpointed then resume now.
TEST(CompositionTest, PresetStateKeepsItsForm) {
  EXPECT_EQ(MakeStrategy(With({{"strategy.name", "fedavg"}}).options(), Context(2))->SaveState(), "");
  const nlohmann::json adam = nlohmann::json::parse(
      MakeStrategy(With({{"strategy.name", "fedadam"}}).options(), Context(2))->SaveState());
  EXPECT_TRUE(adam.contains("m") && adam.contains("v"));
  auto fedprof = MakeStrategy(With({{"strategy.name", "fedprof"}}).options(), Context(2));
  EXPECT_EQ(fedprof->SaveState(), "{\"aggregator\":\"\",\"divergences\":[null,null]}");
  auto afl = MakeStrategy(With({{"strategy.name", "afl"}}).options(), Context(2));
  EXPECT_EQ(afl->SaveState(), "{\"aggregator\":\"\",\"reported\":[0,0],\"values\":[0.0,0.0]}");
}

TEST(CompositionTest, OptionsMayBeLeftEmpty) {
  Config c;
  EXPECT_FALSE(c.options().train.proximal_mu.has_value());
  c.Set("train.proximal_mu", "0.25");
  EXPECT_EQ(c.options().train.proximal_mu, 0.25);
  c.Set("train.proximal_mu", "");
  EXPECT_FALSE(c.options().train.proximal_mu.has_value());
  // An empty numeric option survives the round trip through config.toml.
  Config back;
  back.MergeTomlString(c.ToToml(), "config.toml");
  EXPECT_TRUE(back == c);
  try {
    c.Set("strategy.selector", "greedy");
    ADD_FAILURE() << "unknown selector accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("uniform|size|fedprof|afl|cfcfm|clustered|oort or empty"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(c.Set("train.proximal_mu", "-1"), Error);
  EXPECT_THROW(c.Set("strategy.name", ""), Error);  // a preset is always named
}

// FedBN needs batch norm; selection by profiles needs a layer to profile.
TEST(CompositionTest, StrategiesTheModelCannotServeAreRefused) {
  torch::manual_seed(1);
  auto lenet = MakeModel({"lenet5", {1, 28, 28}, 10, {}, ""});
  auto cnn = MakeModel({"cnn", {1, 28, 28}, 10, {}, ""});
  const Config fedbn = With({{"strategy.name", "fedprof"}, {"strategy.aggregator", "fedbn"}});
  auto strategy = MakeStrategy(fedbn.options(), Context(2));
  EXPECT_NO_THROW(CheckStrategyFitsModel(*strategy, *cnn, fedbn.options().model));
  try {
    CheckStrategyFitsModel(*strategy, *lenet, fedbn.options().model);
    ADD_FAILURE() << "FedBN accepted a model without batch norm";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("strategy fedprof+fedbn keeps each client's batch-norm layers local"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("model lenet5 has none"), std::string::npos) << what;
  }
}


// What a deployed client answers beside its model is what its own
// config's strategy reads (SecAggPolicy::reads): each selector's reports,
// training loss and sketch, and federated evaluation where the config runs
// it; a FedProf config under Paillier matching reads the same, without
// making a key.
TEST(CompositionTest, StrategyReadsIsWhatItsSelectorAsksOfAClient) {
  const auto reads = [](const std::vector<std::string>& sets) {
    return StrategyReads(Config::Load("", sets).options());
  };
  const ClientReads fedavg = reads({"strategy.name=fedavg"});
  EXPECT_FALSE(fedavg.profile || fedavg.loss || fedavg.train_loss || fedavg.evaluate);
  EXPECT_EQ(fedavg.sketch_dim, 0);
  EXPECT_TRUE(reads({"strategy.name=fedprof"}).profile);
  EXPECT_TRUE(reads({"strategy.name=fedprof", "fedprof.secure_matching=paillier"}).profile);
  EXPECT_FALSE(reads({"strategy.name=fedprof"}).loss);
  EXPECT_TRUE(reads({"strategy.name=afl"}).loss);
  EXPECT_TRUE(reads({"strategy.name=oort"}).train_loss);
  EXPECT_GT(reads({"strategy.name=clustered"}).sketch_dim, 0);
  EXPECT_TRUE(reads({"strategy.name=fedavg", "eval.federated_every=2"}).evaluate);
  EXPECT_TRUE(reads({"strategy.name=fedavg", "strategy.selector=afl"}).loss) << "the override's selector";
}

}  // namespace
}  // namespace fedprof
