#include "fedprof/run/run.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/run/plan.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/algorithms/registry.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/in_process.h"
#include "tests/expect_error.h"
#include "tests/blobs.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using testing_support::FreshDir;
using testing_support::ExpectError;

StrategyContext ForClients(int n) {
  StrategyContext context;
  context.num_clients = n;
  return context;
}

// `n` samples of two Gaussian blobs in 4 dimensions.
Dataset Blobs(int64_t n, uint64_t seed) {
  torch::manual_seed(seed);
  Dataset d = testing_support::DrawBlobs(n);
  d.name = "blobs";
  return d;
}

// A run small enough for a unit test: an MLP on blobs, one thread.
Config TinyConfig() {
  Config c;
  for (const char* set : {"model.name=mlp", "model.hidden=8", "threads=1", "rounds=2",
                          "train.epochs=1", "train.batch_size=8", "strategy.fraction=0.5",
                          "report.progress=false", "seed=5"}) {
    c.SetAssignment(set);
  }
  return c;
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(RunTest, ServerOptionsComeFromTheConfig) {
  Config c;
  for (const char* set : {"rounds=17", "strategy.fraction=0.3", "train.epochs=4",
                          "train.batch_size=12", "train.lr=0.07", "train.momentum=0.5",
                          "train.weight_decay=0.001", "train.lr_decay=0.9", "seed=99",
                          "eval.every=3", "eval.batch_size=64", "report.progress=false"}) {
    c.SetAssignment(set);
  }
  const ServerOptions o = ServerOptionsFrom(c.options(), ClientsLive::kHere);
  EXPECT_EQ(o.rounds, 17);
  EXPECT_DOUBLE_EQ(o.fraction, 0.3);
  EXPECT_EQ(o.train.epochs, 4);
  EXPECT_EQ(o.train.batch_size, 12);
  EXPECT_DOUBLE_EQ(o.train.lr, 0.07);
  EXPECT_DOUBLE_EQ(o.train.momentum, 0.5);
  EXPECT_DOUBLE_EQ(o.train.weight_decay, 0.001);
  EXPECT_DOUBLE_EQ(o.lr_decay, 0.9);
  EXPECT_EQ(o.seed, 99u);
  EXPECT_EQ(o.eval_every, 3);
  EXPECT_EQ(o.eval_batch_size, 64);
  EXPECT_FALSE(o.progress);
  EXPECT_EQ(o.min_results, 0) << "simulated clients need no quorum";
  c.SetAssignment("deploy.min_results=3");
  EXPECT_EQ(ServerOptionsFrom(c.options(), ClientsLive::kElsewhere).min_results, 3)
      << "a deployment's quorum";
}

TEST(RunTest, SpecForTakesTheShapeFromTheData) {
  Config c = TinyConfig();
  c.SetAssignment("model.hidden=16,8");
  c.SetAssignment("model.profile_layer=fc2");
  const ModelSpec spec = SpecFor(c.options().model, Blobs(6, 1));
  EXPECT_EQ(spec.name, "mlp");
  EXPECT_EQ(spec.input_shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(spec.outputs, 2);
  EXPECT_EQ(spec.hidden, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(spec.profile_layer, "fc2");
  EXPECT_TRUE(spec.file.empty());

  Dataset regression = Blobs(6, 1);
  regression.num_classes = 0;
  regression.y = torch::zeros({6, 3});
  EXPECT_EQ(SpecFor(c.options().model, regression).outputs, 3) << "one output per target";

  // Refused by the config or by SpecFor, either way naming the option.
  for (const char* hidden : {"8,,4", "0", "-3", "8x", ""}) {
    ExpectError(
        [&] {
          c.Set("model.hidden", hidden);
          SpecFor(c.options().model, Blobs(6, 1));
        },
        "model.hidden");
  }
  c = TinyConfig();
  c.Set("model.file", testing::TempDir() + "/fedprof_run_no_such_model.pt");
  ExpectError([&] { SpecFor(c.options().model, Blobs(6, 1)); }, {"model.file", "no such file"});
}

TEST(RunTest, InitialModelDependsOnTheSeedAlone) {
  const Config c = TinyConfig();
  const ModelSpec spec = SpecFor(c.options().model, Blobs(6, 1));
  torch::manual_seed(1);
  const FlatParams a = Flatten(*InitialModel(c.options().seed, spec));
  torch::manual_seed(2);  // whatever torch's generator held before
  EXPECT_EQ(Flatten(*InitialModel(c.options().seed, spec)), a);
  Config other = c;
  other.SetAssignment("seed=6");
  EXPECT_NE(Flatten(*InitialModel(other.options().seed, spec)), a);
}

TEST(RunTest, StrategiesTheModelCannotServeAreRefused) {
  Config c = TinyConfig();
  c.SetAssignment("strategy.name=fedbn");
  const std::unique_ptr<Strategy> fedbn = MakeStrategy(c.options(), ForClients(4));
  const ModelSpec mlp = SpecFor(c.options().model, Blobs(6, 1));
  ExpectError([&] { CheckStrategyFitsModel(*fedbn, *MakeModel(mlp), c.options().model); },
              {"strategy fedbn", "model mlp has none"});
  const ModelSpec cnn{"cnn", {1, 4, 4}, 2, {}, ""};
  EXPECT_NO_THROW(CheckStrategyFitsModel(*fedbn, *MakeModel(cnn), c.options().model));
  c = TinyConfig();
  const std::unique_ptr<Strategy> fedavg = MakeStrategy(c.options(), ForClients(4));
  EXPECT_NO_THROW(CheckStrategyFitsModel(*fedavg, *MakeModel(mlp), c.options().model));
  // MOON contrasts the profiled layer's representations: a model without one is refused.
  c.SetAssignment("strategy.name=moon");
  const std::unique_ptr<Strategy> moon = MakeStrategy(c.options(), ForClients(4));
  struct Unprofileable : Model {
    Unprofileable() { why_not_profileable_ = "model.file x.pt cannot be profiled"; }
    at::Tensor Forward(const at::Tensor& x, at::Tensor*) override { return x; }
    std::vector<std::string> ProfileableLayers() const override { return {}; }
  };
  ExpectError([&] { CheckStrategyFitsModel(*moon, Unprofileable(), c.options().model); },
              {"strategy.algorithm = moon", "model.profile_layer", "x.pt cannot be profiled"});
  EXPECT_NO_THROW(CheckStrategyFitsModel(*moon, *MakeModel(mlp), c.options().model));
}

// A client algorithm registered in this process (a Python one, a program's
// own) has its client half here: a deployment's clients cannot run it.
TEST(RunTest, ARegisteredClientAlgorithmRunsOnlyInTheProcessThatRegisteredIt) {
  ClientAlgorithmFactory factory;
  factory.server = [](const RunOptions&) -> std::unique_ptr<ServerAlgorithm> { return nullptr; };
  factory.local = [](const FitInstructions&, int, Model&, const FlatParams&) -> std::unique_ptr<LocalAlgorithm> {
    return nullptr;
  };
  EXPECT_THROW(RegisterClientAlgorithm("scaffold", factory), Error);  // a built-in's name
  RegisterClientAlgorithm("test.here", factory);
  Config c = TinyConfig();
  c.SetAssignment("clients.count=4");
  c.SetAssignment("partition.kind=iid");
  c.SetAssignment("strategy.algorithm=test.here");
  const TrainTest data{Blobs(40, 1), Blobs(20, 2), Dataset(), FeatureScaling()};
  EXPECT_NE(MakePlan(c, ClientsLive::kHere, data)->strategy->name().find("+test.here"), std::string::npos);
  ExpectError([&] { MakePlan(c, ClientsLive::kElsewhere, data); },
              {"strategy.algorithm = test.here", "a deployment's clients have only the built-in ones"});
  // Its server half reads each client's values, which secure aggregation hides.
  c.SetAssignment("secagg.protocol=secagg");
  ExpectError([&] { MakeStrategy(c.options(), ForClients(4)); },
              {"strategy.algorithm = test.here", "hides each client's values from its client half"});
  UnregisterClientAlgorithm("test.here");
  EXPECT_THROW(c.SetAssignment("strategy.algorithm=test.here"), Error);
}

TEST(RunTest, ProfiledUnitsAreThoseOfTheProfiledLayer) {
  const Dataset data = Blobs(3, 1);
  EXPECT_EQ(ProfiledUnits(*MakeModel({"mlp", {4}, 2, {16, 8}, ""}), data), 16);
  EXPECT_EQ(ProfiledUnits(*MakeModel({"mlp", {4}, 2, {16, 8}, "fc2"}), data), 8);
  Dataset images;
  images.x = torch::rand({2, 1, 4, 4});
  images.y = torch::zeros({2}, torch::kLong);
  images.num_classes = 2;
  EXPECT_EQ(ProfiledUnits(*MakeModel({"cnn", {1, 4, 4}, 2, {}, ""}), images), 128);
  EXPECT_EQ(ProfiledUnits(*MakeModel({"cnn", {1, 4, 4}, 2, {}, "block1"}), images), 32)
      << "a conv layer's channels";
}

TEST(RunTest, ReferenceSetIsTheOneConfigured) {
  TrainTest data{Blobs(40, 1), Blobs(10, 2), Blobs(5, 3), FeatureScaling()};
  Config c = TinyConfig();
  EXPECT_TRUE(torch::equal(ReferenceSet(c.options().fedprof, data, nullptr).x, data.holdout.x)) << "default";
  c.Set("fedprof.reference", "test");
  EXPECT_TRUE(torch::equal(ReferenceSet(c.options().fedprof, data, nullptr).x, data.test.x));

  c.Set("fedprof.reference", "client");
  ExpectError([&] { ReferenceSet(c.options().fedprof, data, nullptr); }, {"fedprof.reference", "'client'"});
  c.SetAssignment("clients.count=4");
  c.SetAssignment("partition.kind=iid");
  c.SetAssignment("partition.kind=iid");
  const Population population(data.train, c.options());
  c.Set("fedprof.reference_client", "2");
  EXPECT_TRUE(
      torch::equal(ReferenceSet(c.options().fedprof, data, &population).x, population.MakeClient(2).data().x));
  c.Set("fedprof.reference_client", "4");
  ExpectError([&] { ReferenceSet(c.options().fedprof, data, &population); },
              {"fedprof.reference_client: 4", "expected < 4"});
}

TEST(RunTest, ResumeConfigAllowsOnlyWhatMayChange) {
  const std::string dir = FreshDir("run", "resume_config");
  Config original = TinyConfig();
  original.SetAssignment("train.lr=0.03");
  WriteFileAtomic(dir + "/config.toml", original.ToToml());
  EXPECT_EQ(ResumeConfig(dir, {}), original);
  const Config more = ResumeConfig(dir, {"rounds=9", "threads=2", "report.progress=true"});
  EXPECT_EQ(more.options().rounds, 9);
  EXPECT_EQ(more.options().threads, 2);
  EXPECT_DOUBLE_EQ(more.options().train.lr, 0.03);
  EXPECT_EQ(more.Fingerprint(), original.Fingerprint()) << "nothing that changes the rounds";
  ExpectError([&] { ResumeConfig(dir, {"train.lr=0.5"}); },
              {"--set train.lr", "cannot change on --resume"});
  ExpectError([&] { ResumeConfig(dir, {"rounds=9", "seed=2"}); }, "--set seed");
  ExpectError([&] { ResumeConfig(FreshDir("run", "resume_config_none"), {}); }, "config.toml");
}

// RunRounds on in-process clients: the files it promises, and a resume
// that continues to the same model as an uninterrupted run.
class RunRoundsTest : public ::testing::Test {
 protected:
  static constexpr int kClients = 4;

  void SetUp() override {
    data_ = TrainTest{Blobs(40, 1), Blobs(20, 2), Dataset(), FeatureScaling()};
    for (int k = 0; k < kClients; ++k) {
      clients_.emplace_back(k, Subset(data_.train, {2 * k, 2 * k + 1, 2 * k + 8, 2 * k + 9,
                                                    2 * k + 16, 2 * k + 17}));
    }
  }

  void Run(const Config& config, const std::string& out, ServerState state, bool resume) {
    std::vector<ClientInfo> infos;
    for (const Client& c : clients_) infos.push_back({c.id(), c.num_samples(), -1});
    const std::unique_ptr<RunPlan> plan = MakePlan(config, ClientsLive::kElsewhere, data_);
    const ModelSpec spec = plan->spec;
    OpenCountingTransport transport(
        infos, [&](int id) { return clients_[id]; }, /*keep_clients=*/false,
        [spec] { return MakeModel(spec); }, /*num_threads=*/1);
    transport.set_describe([&] {
      std::vector<ClientDescription> rows;
      for (const Client& c : clients_) rows.push_back({c.num_samples(), "clean", 1.5, 2.0, 0.25, {}});
      return rows;
    });
    RunRounds(*plan, out, std::move(state), resume, transport);
    opened_ += transport.opened;
    closed_ += transport.closed;
  }

  // Counts the round loop's calls of the transport's lifecycle.
  struct OpenCountingTransport : InProcessTransport {
    using InProcessTransport::InProcessTransport;
    void Open() override { ++opened; }
    void Close() override {
      EXPECT_EQ(opened, 1) << "closed after it was opened";
      ++closed;
    }
    int opened = 0, closed = 0;
  };

  TrainTest data_;
  std::vector<Client> clients_;
  int opened_ = 0, closed_ = 0;
};

TEST_F(RunRoundsTest, WritesEveryOutputAndResumesToTheSameModel) {
  const std::string whole = FreshDir("run", "rounds_whole"), parts = FreshDir("run", "rounds_parts");
  Config three = TinyConfig();
  three.SetAssignment("rounds=3");
  Run(three, whole, ServerState(), false);
  EXPECT_EQ(opened_, 1);
  EXPECT_EQ(closed_, 1);

  const DecodedCheckpoint done = DecodeCheckpoint(ReadFile(whole + "/checkpoint.bin"), "whole");
  EXPECT_EQ(done.state.round, 3);
  EXPECT_EQ(done.config_fingerprint, three.Fingerprint());
  const std::string metrics = ReadFile(whole + "/metrics.csv");
  EXPECT_EQ(CountLines(metrics), 1 + 3) << metrics;
  const std::string clients = ReadFile(whole + "/clients.csv");
  ASSERT_EQ(CountLines(clients), 1 + kClients) << clients;
  EXPECT_EQ(clients.substr(0, clients.find('\n')),
            "id,size,data_kind,speed_ghz,bandwidth_mhz,round_s,times_selected");
  int64_t selections = 0;
  std::istringstream rows(clients.substr(clients.find('\n') + 1));
  for (std::string row; std::getline(rows, row);) {
    EXPECT_EQ(row.substr(row.find(','), row.rfind(',') - row.find(',')),
              ",6,clean,1.5,2,0.25") << row;
    selections += std::stoll(row.substr(row.rfind(',') + 1));
  }
  EXPECT_EQ(selections, 3 * 2) << "half of 4 clients in each of 3 rounds";
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(whole + "/summary.json"));
  EXPECT_EQ(summary["rounds"], 3);
  EXPECT_EQ(summary["clients"], kClients);
  EXPECT_EQ(summary["strategy"], "fedavg");
  EXPECT_EQ(summary["final_model_sha256"],
            Sha256Hex(std::string(reinterpret_cast<const char*>(done.state.global.data()),
                                  done.state.global.size() * sizeof(float))));

  // Two rounds, then a resume to three.
  Config two = TinyConfig();
  Run(two, parts, ServerState(), false);
  ServerState stopped = DecodeCheckpoint(ReadFile(parts + "/checkpoint.bin"), "parts").state;
  ASSERT_EQ(stopped.round, 2);
  EXPECT_EQ(CountLines(ReadFile(parts + "/metrics.csv")), 1 + 2);
  ServerState too_small = stopped;
  too_small.global.pop_back();
  ExpectError([&] { Run(three, parts, too_small, true); }, {"checkpoint.bin", "model has"});
  Run(three, parts, stopped, true);
  const ServerState resumed = DecodeCheckpoint(ReadFile(parts + "/checkpoint.bin"), "parts").state;
  EXPECT_EQ(resumed.round, 3);
  EXPECT_EQ(resumed.global, done.state.global);
  EXPECT_EQ(resumed.times_selected, done.state.times_selected);
  EXPECT_EQ(ReadFile(parts + "/clients.csv"), clients);
  EXPECT_EQ(CountLines(ReadFile(parts + "/metrics.csv")), 1 + 3);
}

}  // namespace
}  // namespace fedprof
