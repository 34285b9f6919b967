#include "fedprof/server/server.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <numeric>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/in_process.h"

namespace fedprof {
namespace {

// Two Gaussian blobs in 4 dimensions, split among `n` clients.
std::vector<Client> BlobClients(int n, int per_client, uint64_t seed) {
  torch::manual_seed(seed);
  std::vector<Client> clients;
  for (int k = 0; k < n; ++k) {
    Dataset d;
    d.y = torch::randint(0, 2, {per_client}, torch::kLong);
    d.x = torch::randn({per_client, 4}) + d.y.unsqueeze(1).to(torch::kFloat) * 2.0;
    d.num_classes = 2;
    clients.emplace_back(k, std::move(d), DataKind::kClean);
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
      [](int id, const FitInstructions&) { return ResultCost{1.0 + id, 2.0, 0, 0}; });
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

TEST(ServerTest, ClientSendingNaNIsSkipped) {
  std::vector<Client> clients = BlobClients(4, 20, 2);
  Dataset poisoned = clients[1].data();
  poisoned.x = poisoned.x.clone();
  poisoned.x[0][0] = std::nanf("");
  clients[1] = Client(1, poisoned, DataKind::kClean);
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

TEST(CheckpointTest, ResumedRunEqualsUninterruptedRun) {
  const ServerState full = RunBlobs(2, AggregationMode::kFull, BlobClients(6, 30, 3), 5);
  const ServerState part = RunBlobs(2, AggregationMode::kFull, BlobClients(6, 30, 3), 2);
  const std::string path = testing::TempDir() + "/ckpt_test.bin";
  SaveCheckpoint(path, part);
  const ServerState loaded = LoadCheckpoint(path);
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

TEST(CheckpointTest, CorruptFilesAreRefused) {
  const std::string path = testing::TempDir() + "/ckpt_bad.bin";
  WriteFileAtomic(path, "hello\n");
  EXPECT_THROW(LoadCheckpoint(path), Error);
  ServerState s;
  s.global = {1, 2, 3};
  SaveCheckpoint(path, s);
  std::string data = ReadFile(path);
  WriteFileAtomic(path, data.substr(0, data.size() - 2));  // truncated
  try {
    LoadCheckpoint(path);
    FAIL() << "truncated checkpoint accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fedprof
