#include "fedprof/server/server.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/in_process.h"
#include "tests/blobs.h"

namespace fedprof {
namespace {

// A config fingerprint for the checkpoint tests (any 64 hex digits).
constexpr char kFingerprint[] =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// Two Gaussian blobs in 4 dimensions, split among `n` clients.
std::vector<Client> BlobClients(int n, int per_client, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<Client> clients;
  for (int k = 0; k < n; ++k) {
    clients.emplace_back(k, testing_support::DrawBlobs(per_client));
  }
  return clients;
}

ServerState RunBlobs(int threads, AggregationMode mode, std::vector<Client> clients,
                     int64_t rounds, ServerState state = ServerState()) {
  const ModelSpec spec{"mlp", {4}, 2, {8}, ""};
  torch::manual_seed(11);
  auto eval_model = MakeModel(spec);
  if (state.global.empty()) state.global = Flatten(*eval_model);
  Dataset test = BlobClients(1, 200, 99)[0].data();
  std::vector<ClientInfo> infos;
  for (const Client& c : clients) infos.push_back({c.id(), c.num_samples(), -1});
  // Every result costs 1 + id seconds and 2 J, so a round lasts as long as
  // its highest selected id.
  InProcessTransport transport(
      infos, [&](int id) { return clients[id]; }, /*keep_clients=*/true,
      [&] { return MakeModel(spec); }, threads,
      [](int id, const FitInstructions&, const FitResult&) { return ResultCost{1.0 + id, 2.0, 0, 0}; });
  Strategy strategy("fedavg", MakeUniformSelector(), MakeWeightedAverage(mode));
  ServerOptions o;
  o.rounds = rounds;
  o.fraction = 0.5;
  o.train.epochs = 2;
  o.train.batch_size = 8;
  o.train.lr = 0.05;
  o.lr_decay = 0.99;
  o.progress = false;
  ModelReplicas evaluator([&] { return MakeModel(spec); }, threads);
  Server server(o, transport, strategy, evaluator, test);
  server.Run(state, nullptr);
  return state;
}

TEST(ServerTest, LearnsAndIsIdenticalForOneAndTwoThreads) {
  for (auto mode : {AggregationMode::kFull, AggregationMode::kPartial}) {
    const ServerState one = RunBlobs(1, mode, BlobClients(8, 40, 1), 6);
    const ServerState two = RunBlobs(2, mode, BlobClients(8, 40, 1), 6);
    EXPECT_EQ(one.global, two.global);
    ASSERT_EQ(one.history.size(), 6u);
    for (size_t i = 0; i < one.history.size(); ++i) {
      EXPECT_EQ(one.history[i].accuracy, two.history[i].accuracy);
      EXPECT_EQ(one.history[i].loss, two.history[i].loss);
    }
    EXPECT_GT(one.history.back().accuracy, 0.85);
    double slowest = 0;  // Eq. 27: a round lasts as long as its slowest client
    for (const auto& m : one.history) slowest += m.round_time_s;
    EXPECT_DOUBLE_EQ(one.virtual_time_s, slowest);
    EXPECT_GE(one.virtual_time_s, 6 * 4.0);  // 4 of 8 clients a round: some id >= 3
    EXPECT_DOUBLE_EQ(one.energy_j, 6 * 4 * 2.0);
    EXPECT_EQ(std::accumulate(one.times_selected.begin(), one.times_selected.end(), int64_t{0}),
              24);
  }
}

// Selects every client and asks θ's loss only of those it holds none of: the
// server must deliver each client its own instructions.
class AskOnceSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    (void)rng;
    std::vector<int> ids;
    for (const ClientInfo& c : *context.clients) ids.push_back(c.id);
    return ids;
  }
  void ConfigureReport(int client_id, ReportRequest* report) const override {
    report->loss = losses.count(client_id) == 0;
  }
  void Observe(const FitResult& result) override {
    observed.push_back({result.client_id, result.pre_train_loss});
    if (result.pre_train_loss > 0) losses[result.client_id] = result.pre_train_loss;
  }

  std::map<int, double> losses;
  std::vector<std::pair<int, double>> observed;  // (client, loss reported) per result
};

TEST(ServerTest, EachClientGetsTheInstructionsTheStrategyChoseForIt) {
  std::vector<Client> clients = BlobClients(3, 20, 4);
  const ModelSpec spec{"mlp", {4}, 2, {8}, ""};
  torch::manual_seed(11);
  ServerState state;
  state.global = Flatten(*MakeModel(spec));
  std::vector<ClientInfo> infos;
  for (const Client& c : clients) infos.push_back({c.id(), c.num_samples(), -1});
  InProcessTransport transport(
      infos, [&](int id) { return clients[id]; }, /*keep_clients=*/true,
      [&] { return MakeModel(spec); }, /*num_threads=*/2);
  auto selector = std::make_unique<AskOnceSelector>();
  AskOnceSelector* asked = selector.get();
  Strategy strategy("ask-once", std::move(selector), MakeWeightedAverage(AggregationMode::kFull));
  asked->losses[1] = 0.5;  // valued before: not asked again
  ServerOptions o;
  o.rounds = 2;
  o.fraction = 1.0;
  o.train.epochs = 1;
  o.progress = false;
  ModelReplicas evaluator([&] { return MakeModel(spec); }, 1);
  Server server(o, transport, strategy, evaluator, clients[0].data());
  server.Run(state, nullptr);
  ASSERT_EQ(asked->observed.size(), 6u);
  std::map<int, int> reported;  // results with a loss, by client
  for (const auto& [id, loss] : asked->observed) reported[id] += loss > 0 ? 1 : 0;
  EXPECT_EQ(reported[0], 1) << "asked in round 1 only";
  EXPECT_EQ(reported[1], 0) << "never asked";
  EXPECT_EQ(reported[2], 1) << "asked in round 1 only";
}

TEST(ServerTest, ClientSendingNaNIsSkipped) {
  std::vector<Client> clients = BlobClients(4, 20, 2);
  Dataset poisoned = clients[1].data();
  poisoned.x = poisoned.x.clone();
  poisoned.x[0][0] = std::nanf("");
  clients[1] = Client(1, poisoned);
  testing::internal::CaptureStderr();
  const ServerState s = RunBlobs(1, AggregationMode::kPartial, std::move(clients), 4);
  const std::string log = testing::internal::GetCapturedStderr();
  int refused = 0, returned = 0, selected = 0;
  for (const auto& m : s.history) {
    refused += m.refused;
    returned += m.returned;
    selected += m.selected;
  }
  EXPECT_EQ(refused, s.times_selected[1]);
  EXPECT_GT(refused, 0);
  EXPECT_EQ(returned + refused, selected);
  EXPECT_NE(log.find("client 1 refused: non-finite value"), std::string::npos) << log;
  for (float v : s.global) ASSERT_TRUE(std::isfinite(v));
}

TEST(ServerTest, ValidateNamesWhatIsWrong) {
  FitResult r;
  r.ok = true;
  r.num_samples = 3;
  r.params = {1.0f, 2.0f};
  EXPECT_EQ(Server::Validate(r, 2, true), "");
  EXPECT_NE(Server::Validate(r, 3, true).find("expected 3"), std::string::npos);
  EXPECT_EQ(Server::Validate(r, 3, false), "") << "a report carries no model";
  r.params[1] = INFINITY;
  EXPECT_NE(Server::Validate(r, 2, true).find("index 1"), std::string::npos);
  r.params[1] = 1e12f;
  EXPECT_NE(Server::Validate(r, 2, true).find("beyond 2^40"), std::string::npos);
  r.params[1] = 2.0f;
  r.train_loss = NAN;
  EXPECT_NE(Server::Validate(r, 2, true).find("loss"), std::string::npos);
  r.train_loss = 0;
  r.num_samples = 0;
  EXPECT_NE(Server::Validate(r, 2, true).find("claims 0 samples"), std::string::npos);
  r.num_samples = kMaxClaimedSamples + 1;
  EXPECT_NE(Server::Validate(r, 2, false).find("samples"), std::string::npos);
  r.ok = false;
  r.error = "out of memory";
  EXPECT_EQ(Server::Validate(r, 2, true), "out of memory");
}

// A profile must be made with the model the server sent that client (a
// straggler's profile of an earlier round, a made-up version).
TEST(ServerTest, AProfileOfAnotherModelVersionIsRefused) {
  FitResult r;
  r.ok = true;
  EXPECT_EQ(Server::CheckProfileVersion(r, 3), "") << "no profile";
  r.profile = Profile{3, "fc1", {0.5}, {1.0}};
  EXPECT_EQ(Server::CheckProfileVersion(r, 3), "");
  EXPECT_EQ(Server::CheckProfileVersion(r, 4),
            "profile of model version 3, not the version 4 the server sent");
  r.profile->version = 9;
  EXPECT_NE(Server::CheckProfileVersion(r, 4), "");
}

// NaN or Inf in any number a client sends refuses the result, a report's too.
TEST(ServerTest, ValidateRefusesANonFiniteNumberAnywhere) {
  FitResult ok;
  ok.ok = true;
  ok.num_samples = 3;
  ok.params = {1.0f, 2.0f};
  ok.profile = Profile{0, "fc1", {0.5, 1.5}, {1.0, 2.0}};
  ok.sketch = {0.25f, -1.0f};
  ASSERT_EQ(Server::Validate(ok, 2, true), "");
  const std::vector<std::pair<std::function<void(FitResult&)>, std::string>> cases = {
      {[](FitResult& r) { r.pre_train_loss = NAN; }, "a non-finite loss"},
      {[](FitResult& r) { r.train_loss_rms = INFINITY; }, "a non-finite loss"},
      {[](FitResult& r) { r.profile->mean[1] = INFINITY; }, "profile unit 1"},
      {[](FitResult& r) { r.profile->var[0] = NAN; }, "profile unit 0"},
      {[](FitResult& r) { r.profile->var[0] = -1; }, "profile unit 0"},
      {[](FitResult& r) { r.sketch[1] = NAN; }, "update sketch"},
      {[](FitResult& r) { r.cost.time_s = NAN; }, "a non-finite cost"},
      {[](FitResult& r) { r.cost.profiling_energy_j = -INFINITY; }, "a non-finite cost"},
  };
  for (const auto& [spoil, why] : cases) {
    FitResult r = ok;
    spoil(r);
    for (bool expect_model : {true, false}) {
      EXPECT_NE(Server::Validate(r, 2, expect_model).find(why), std::string::npos) << why;
    }
  }
}

// A federated evaluation covers the client's whole data, counts at most as
// many correct answers as samples and has a finite loss.
TEST(ServerTest, ValidateEvaluationRefusesImpossibleCounts) {
  FitResult r;
  r.ok = true;
  r.num_samples = 10;
  r.eval_samples = 10;
  r.eval_correct = 7;
  r.eval_loss = 0.5;
  EXPECT_EQ(Server::ValidateEvaluation(r), "");
  r.eval_correct = 11;
  EXPECT_NE(Server::ValidateEvaluation(r).find("11 correct answers of 10"), std::string::npos);
  r.eval_correct = -1;
  EXPECT_NE(Server::ValidateEvaluation(r).find("-1 correct"), std::string::npos);
  r.eval_correct = 7;
  r.eval_samples = 9;
  EXPECT_NE(Server::ValidateEvaluation(r).find("evaluated 9 samples of its 10"), std::string::npos);
  r.eval_samples = 10;
  for (double loss : {-1.0, double(NAN), double(INFINITY)}) {
    r.eval_loss = loss;
    EXPECT_NE(Server::ValidateEvaluation(r).find("evaluation loss"), std::string::npos) << loss;
  }
}

TEST(CheckpointTest, ResumedRunEqualsUninterruptedRun) {
  const ServerState full = RunBlobs(2, AggregationMode::kFull, BlobClients(6, 30, 3), 5);
  const ServerState part = RunBlobs(2, AggregationMode::kFull, BlobClients(6, 30, 3), 2);
  const std::string path = testing::TempDir() + "/ckpt_test.bin";
  SaveCheckpoint(path, part, kFingerprint);
  const ServerState loaded = LoadCheckpoint(path, kFingerprint);
  EXPECT_EQ(loaded.global, part.global);
  EXPECT_EQ(loaded.times_selected, part.times_selected);
  EXPECT_EQ(loaded.history.size(), 2u);
  EXPECT_EQ(loaded.history[1].loss, part.history[1].loss);
  const ServerState resumed =
      RunBlobs(1, AggregationMode::kFull, BlobClients(6, 30, 3), 5, loaded);
  EXPECT_EQ(resumed.global, full.global);
  EXPECT_EQ(resumed.history.back().accuracy, full.history.back().accuracy);
  EXPECT_EQ(resumed.virtual_time_s, full.virtual_time_s);
}

// metrics.csv's fallback column is in the checkpoint, so a resumed run
// rewrites it as it was.
TEST(CheckpointTest, TheFallbackColumnSurvivesACheckpoint) {
  ServerState s;
  s.round = 2;
  s.global = {1, 2};
  s.times_selected = {1, 1};
  s.history.resize(2);
  s.history[0].round = 1;
  s.history[0].fell_back = true;
  s.history[1].round = 2;
  const std::string path = testing::TempDir() + "/ckpt_fallback.bin";
  SaveCheckpoint(path, s, kFingerprint);
  const ServerState loaded = LoadCheckpoint(path, kFingerprint);
  ASSERT_EQ(loaded.history.size(), 2u);
  EXPECT_TRUE(loaded.history[0].fell_back);
  EXPECT_FALSE(loaded.history[1].fell_back);
}

// Runs `f`, expects a fedprof::Error of one line containing `substring`.
template <typename F>
void ExpectCheckpointError(F f, const std::string& substring) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << substring << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(substring), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

ServerState SmallState() {
  ServerState s;
  s.round = 2;
  s.global = {1, -2.5f, 3};
  s.times_selected = {1, 0, 1};
  s.strategy_state = "{\"a\":1}";
  s.history.resize(2);
  s.history[0].round = 1;
  s.history[1].round = 2;
  s.history[1].loss = 0.75;
  return s;
}

TEST(CheckpointTest, CorruptFilesAreRefused) {
  const std::string path = testing::TempDir() + "/ckpt_bad.bin";
  WriteFileAtomic(path, "hello\n");
  ExpectCheckpointError([&] { LoadCheckpoint(path, kFingerprint); }, "not a FedProf checkpoint");
  const std::string good = EncodeCheckpoint(SmallState(), kFingerprint);
  // Every truncation, and a flip of every bit of every byte, is caught.
  for (size_t size = 0; size < good.size(); ++size) {
    EXPECT_THROW(DecodeCheckpoint(good.substr(0, size), path), Error) << size;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = good;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      EXPECT_THROW(DecodeCheckpoint(flipped, path), Error) << i << ":" << bit;
    }
  }
  WriteFileAtomic(path, good.substr(0, good.size() - 2));
  ExpectCheckpointError([&] { LoadCheckpoint(path, kFingerprint); }, "checksum mismatch");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 1;
  WriteFileAtomic(path, flipped);
  ExpectCheckpointError([&] { LoadCheckpoint(path, kFingerprint); }, "checksum mismatch");
}

TEST(CheckpointTest, OlderFormatAndOtherConfigAreRefused) {
  const std::string path = testing::TempDir() + "/ckpt_other.bin";
  // Format 1 (no checksum, no fingerprint), as earlier versions wrote it.
  WriteFileAtomic(path, std::string("FEDPROF-CHECKPOINT 1\n{\"round\":0}\n"));
  ExpectCheckpointError([&] { LoadCheckpoint(path, kFingerprint); },
                        "checkpoint format 1 is from an older FedProf");
  WriteFileAtomic(path, std::string("FEDPROF-CHECKPOINT 3\n{}\n"));
  ExpectCheckpointError([&] { LoadCheckpoint(path, kFingerprint); }, "is newer than");
  SaveCheckpoint(path, SmallState(), kFingerprint);
  const std::string other(64, 'e');
  ExpectCheckpointError([&] { LoadCheckpoint(path, other); }, "written by a run of another config");
  EXPECT_EQ(LoadCheckpoint(path, kFingerprint).global, SmallState().global);
}

TEST(CheckpointTest, NonFiniteMetricsRoundTrip) {
  // A diverged run (NaN loss, infinite energy) must stay resumable: JSON has
  // no NaN, and nlohmann writes it as null.
  ServerState s = SmallState();
  s.history[0].loss = std::numeric_limits<double>::quiet_NaN();
  s.history[1].train_loss = std::numeric_limits<double>::infinity();
  s.energy_j = -std::numeric_limits<double>::infinity();
  const ServerState back = DecodeCheckpoint(EncodeCheckpoint(s, kFingerprint), "x").state;
  EXPECT_TRUE(std::isnan(back.history[0].loss));
  EXPECT_EQ(back.history[1].train_loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(back.energy_j, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(back.history[1].loss, 0.75);
}

// A sealed checkpoint (correct checksum) around `header` and `model`.
std::string Sealed(const std::string& header, const std::string& model = "") {
  std::string body = "FEDPROF-CHECKPOINT 2\n" + header + "\n" + model;
  const Sha256Digest sum = Sha256(body);
  return body + std::string(reinterpret_cast<const char*>(sum.data()), sum.size());
}

TEST(CheckpointTest, MalformedHeadersBehindAValidChecksumAreRefused) {
  // Found by fuzz/fuzz_checkpoint.cc's design: a header whose checksum is
  // right but whose fields are not what SaveCheckpoint writes.
  const std::string fp = "\"config_fingerprint\":\"" + std::string(kFingerprint) + "\"";
  const std::string rest = "\"times_selected\":[],\"virtual_time_s\":0,\"energy_j\":0,"
                           "\"strategy_state\":\"\",\"client_states\":\"\",\"history\":[]," + fp;
  // num_params * 4 wraps to 0 in 64 bits: once resized to 2^62 floats.
  ExpectCheckpointError(
      [&] { DecodeCheckpoint(Sealed("{\"round\":0,\"num_params\":4611686018427387904," + rest + "}"), "x"); },
      "num_params");
  // A float where an integer belongs (undefined behaviour when converted).
  ExpectCheckpointError(
      [&] { DecodeCheckpoint(Sealed("{\"round\":1e300,\"num_params\":0," + rest + "}"), "x"); },
      "'round'");
  ExpectCheckpointError(
      [&] { DecodeCheckpoint(Sealed("{\"round\":3,\"num_params\":0," + rest + "}"), "x"); },
      "one entry per completed round");
  ExpectCheckpointError([&] { DecodeCheckpoint(Sealed("[1,2]"), "x"); }, "a JSON object");
  ExpectCheckpointError([&] { DecodeCheckpoint(Sealed("{\"round\":0"), "x"); },
                        "bad checkpoint header");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ExpectCheckpointError(
      [&] {
        DecodeCheckpoint(Sealed("{\"round\":0,\"num_params\":1," + rest + "}",
                                std::string(reinterpret_cast<const char*>(&nan), 4)),
                         "x");
      },
      "not finite");
  EXPECT_NO_THROW(DecodeCheckpoint(Sealed("{\"round\":0,\"num_params\":0," + rest + "}"), "x"));
}

// An asynchronous run's clients in training must name model versions the
// file holds, before the round, and dispatches it counted.
TEST(CheckpointTest, MalformedTrainingTasksAreRefused) {
  ServerState state;
  state.round = 2;
  state.global = {1.0f, 2.0f};
  state.history.resize(2);
  state.history[0].round = 1;
  state.history[1].round = 2;
  state.virtual_time_s = 10;
  state.dispatches = 4;
  state.training = {{0, 1, 3, 4.5}, {5, 2, 4, 10}};
  state.training_models[1] = {0.5f, 0.25f};
  const DecodedCheckpoint back = DecodeCheckpoint(EncodeCheckpoint(state, kFingerprint), "x");
  ASSERT_EQ(back.state.training.size(), 2u);
  EXPECT_EQ(back.state.training[1].client_id, 5);
  EXPECT_EQ(back.state.training[0].start_s, 4.5);
  EXPECT_EQ(back.state.training_models.at(1), state.training_models.at(1));
  EXPECT_EQ(back.state.global, state.global);
  EXPECT_EQ(back.state.dispatches, 4);
  auto refused = [&](ServerState bad, const std::string& what) {
    ExpectCheckpointError([&] { DecodeCheckpoint(EncodeCheckpoint(bad, kFingerprint), "x"); }, what);
  };
  ServerState s = state;
  s.training_models.clear();  // version 1's model missing
  refused(s, "training[0].version");
  s = state;
  s.training[1].dispatch = 9;  // beyond the dispatches counted
  refused(s, "training[1].dispatch");
  s = state;
  s.training[0].start_s = 11;  // after the checkpoint's clock
  refused(s, "training[0].start_s");
  s = state;
  s.training_models[2] = {0.0f, 0.0f};  // the current version is the global model
  refused(s, "training_models");
}

}  // namespace
}  // namespace fedprof
