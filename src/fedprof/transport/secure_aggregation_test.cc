#include "fedprof/transport/secure_aggregation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/models/models.h"
#include "fedprof/run/plan.h"
#include "fedprof/secagg/in_process.h"
#include "fedprof/transport/in_process.h"
#include "tests/blobs.h"
#include "tests/expect_error.h"
#include "tests/simulate_summary.h"

namespace fedprof {
namespace {

using testing_support::kBlobMlp;
using testing_support::ExpectError;

// Client k holds 6 + k samples of two Gaussian blobs.
std::vector<Dataset> BlobClients(int n) {
  torch::manual_seed(100);
  std::vector<Dataset> sets;
  for (int k = 0; k < n; ++k) sets.push_back(testing_support::DrawBlobs(6 + k));
  return sets;
}

class SecureAggregationTest : public testing::Test {
 protected:
  static constexpr int kClients = 6;

  SecureAggregationTest() : data_(BlobClients(kClients)) {
    torch::manual_seed(7);
    FitInstructions ins;
    ins.round = 3;
    ins.global = std::make_shared<const FlatParams>(Flatten(*MakeModel(kBlobMlp)));
    ins.train.epochs = 1;
    ins.train.batch_size = 4;
    ins.train.lr = 0.1;
    ins.seed = 3;
    for (int k = 0; k < kClients; ++k) tasks_.push_back({k, ins});
  }

  std::unique_ptr<InProcessTransport> Clients() {
    std::vector<ClientInfo> infos;
    for (int k = 0; k < kClients; ++k) infos.push_back({k, data_[k].size(), -1});
    return std::make_unique<InProcessTransport>(
        infos, [this](int id) { return Client(id, data_[id]); }, /*keep_clients=*/false,
        [] { return MakeModel(kBlobMlp); }, /*num_threads=*/2);
  }

  std::vector<Dataset> data_;
  std::vector<ClientInstructions> tasks_;
};

// What the round loop's side of the transport is handed.
struct ServerView {
  std::map<size_t, FitResult> results;
  std::vector<std::pair<std::vector<size_t>, std::string>> sums;  // indices, serialised sum
  std::vector<std::pair<std::vector<size_t>, std::string>> lost;  // indices, why
};

// The server's side: results without models, then sums; `refuse` is
// refused as a server's checks would.
ServerView FitSecurely(Transport& transport, const std::vector<ClientInstructions>& tasks,
                       int refuse) {
  ServerView view;
  transport.Fit(tasks, Transport::ResultSink(
                           [&](size_t index, FitResult&& r) -> std::string {
                             const int id = r.client_id;
                             view.results[index] = std::move(r);
                             return id == refuse ? "refused by the test" : "";
                           },
                           [&](const std::vector<size_t>& indices, const ModelSum* sum,
                               const std::string& lost) -> std::string {
                             if (sum == nullptr) {
                               view.lost.emplace_back(indices, lost);
                             } else {
                               view.sums.emplace_back(indices, sum->Serialize());
                             }
                             return "";
                           }));
  return view;
}

// The server never holds a model: every result reaches it without one, and
// the only models it gets are one sum, bit for bit the plaintext sum of the
// accepted clients' models, with or without dropouts after masking.
TEST_F(SecureAggregationTest, TheServerGetsResultsWithoutModelsAndTheirExactSum) {
  // The plaintext models, from the same clients and instructions.
  std::map<int, FitResult> plain;
  Clients()->Fit(tasks_, [&](size_t, FitResult&& r) {
    const int id = r.client_id;
    plain[id] = std::move(r);
    return std::string();
  });
  ASSERT_EQ(plain.size(), static_cast<size_t>(kClients));
  ModelSum expected;
  expected.Reset(plain.at(0).params.size());
  for (const auto& [id, r] : plain) {
    ASSERT_TRUE(r.ok) << r.error;
    if (id != 4) expected.Add(r.params, r.num_samples);
  }

  for (const auto& [protocol, drop] :
       std::vector<std::pair<secagg::Protocol, double>>{{secagg::Protocol::kSecAgg, 0},
                                                         {secagg::Protocol::kSecAggPlus, 0},
                                                         {secagg::Protocol::kSecAggPlus, 0.2}}) {
    SCOPED_TRACE(secagg::ProtocolName(protocol) + " dropping " + std::to_string(drop));
    const std::unique_ptr<InProcessTransport> clients = Clients();
    SecureAggregationOptions options;
    options.protocol = protocol;
    options.tolerance.dropout = 0.2;  // one of the five may drop: t = 3 of k = 4
    options.drop_after_masking = drop;
    SecureAggregationTransport secure(*clients, options);
    const ServerView view = FitSecurely(secure, tasks_, /*refuse=*/4);
    ASSERT_EQ(view.results.size(), static_cast<size_t>(kClients));
    for (const auto& [index, r] : view.results) {
      EXPECT_TRUE(r.ok) << r.error;
      EXPECT_TRUE(r.summed) << "client " << r.client_id;
      EXPECT_TRUE(r.params.empty()) << "client " << r.client_id << "'s model reached the server";
      EXPECT_EQ(r.num_samples, plain.at(r.client_id).num_samples);
      // The strategy asked for no loss: the client's stays with it.
      EXPECT_EQ(r.train_loss, 0) << "client " << r.client_id;
      EXPECT_GT(plain.at(r.client_id).train_loss, 0);
    }
    EXPECT_TRUE(view.lost.empty());
    ASSERT_EQ(view.sums.size(), 1u);
    EXPECT_EQ(view.sums[0].first, (std::vector<size_t>{0, 1, 2, 3, 5})) << "the refused one is out";
    EXPECT_EQ(view.sums[0].second, expected.Serialize());
    ASSERT_EQ(secure.sessions().size(), 1u);
    const SecureAggregationCost& cost = secure.sessions()[0];
    EXPECT_EQ(cost.clients, 5);
    EXPECT_EQ(cost.survivors, 5);
    EXPECT_GT(cost.client_bytes_sent, 16.0 * static_cast<double>(expected.size()))
        << "a masked model is 16 bytes a value";
    if (drop == 0) {
      // The cost model charges each client what it sent and received, up to
      // the bytes its ids take (protobuf leaves out an id of 0).
      const secagg::ClientTraffic charged = secagg::TrafficOfOneClient(
          5, cost.neighbors, secagg::ParamsFor(protocol, 5, options.tolerance).quorum, expected.size() + 1,
          secagg::kChunkWords);
      EXPECT_NEAR(cost.client_bytes_sent, static_cast<double>(charged.sent), 10);
      EXPECT_NEAR(cost.client_bytes_received, static_cast<double>(charged.received), 10);
    }
  }
}

// Distributed DP: everything the server holds in a session (each masked
// input, its aggregation buffer after each, the unmasked sum) differs from
// the un-noised sum of the clients' encodings in almost every value, and
// the sum it unmasks is the noised one, whose decoding carries the five
// clients' noise together (sd √5 σ) on top of the sum of their updates.
TEST_F(SecureAggregationTest, UnderDistributedDpTheServerNeverHoldsAnUnnoisedSum) {
  const FlatParams& global = *tasks_[0].instructions.global;
  DdgParams ddg;
  ddg.clip_norm = 1;
  ddg.noise_sd = 0.05;
  ddg.bits = 32;
  ddg.rounding_beta = std::exp(-0.5);
  ddg.dim = global.size();
  ddg.granularity = DdgGranularity(1, ddg.noise_sd, 32, 5, ddg.padded());
  ddg.rotation_seed = DdgRotationSeed(11, 3);
  FitInstructions task = tasks_[0].instructions;
  task.ddg = ddg;
  FitInstructions clean_task = task;
  clean_task.ddg->noise_sd = 0;

  secagg::SessionConfig config;
  config.run_id = secagg::RandomBytes(secagg::kKeyBytes);
  config.nonce = secagg::RandomBytes(secagg::kKeyBytes);
  config.protocol = secagg::Protocol::kSecAggPlus;
  config.length = SessionLength(task, ddg.dim);
  config.word_bits = SessionWordBits(task);
  ASSERT_EQ(config.word_bits, 32);
  std::map<int64_t, secagg::Bytes> signing;
  std::map<int64_t, std::vector<secagg::Word>> inputs;
  std::vector<uint64_t> clean(ddg.padded(), 0);
  std::vector<double> updates(ddg.dim, 0.0);
  Rng directions(5);
  for (int64_t id = 0; id < 5; ++id) {
    const secagg::KeyPair key = secagg::GenerateEd25519();
    config.verify_keys[id] = key.public_key;
    signing[id] = key.secret;
    FitResult r;
    r.params = global;
    for (size_t i = 0; i < r.params.size(); ++i) {
      r.params[i] += static_cast<float>(0.2 * StandardNormal(directions) / std::sqrt(double(ddg.dim)));
      updates[i] += static_cast<double>(r.params[i]) - global[i];
    }
    const std::string noise_key(32, static_cast<char>('a' + id));
    const auto noise = ClientNoise(NoiseKind::kKeyed, noise_key, 11, task, id);
    inputs[id] = SessionInput(task, r, *noise);
    // The same client without noise: the same rounding (its draws come
    // first), so the two differ by the noise alone.
    const auto same = ClientNoise(NoiseKind::kKeyed, noise_key, 11, task, id);
    const std::vector<secagg::Word> unnoised = SessionInput(clean_task, r, *same);
    for (size_t i = 0; i < clean.size(); ++i) clean[i] += static_cast<uint64_t>(unnoised[i]);
  }
  config.graph = secagg::ParamsFor(config).graph;
  const secagg::SessionReport report =
      secagg::RunInProcess(config, signing, inputs, {}, {}, /*keep_snapshots=*/true);
  ASSERT_EQ(report.result.survivors.size(), 5u);
  // 4 bytes a value, not 16.
  const secagg::ClientTraffic wide = secagg::TrafficOfOneClient(
      5, report.params.graph.neighbors, report.params.quorum, config.length, secagg::kChunkWords);
  for (const auto& [id, cost] : report.clients) {
    EXPECT_LT(cost.bytes_sent, wide.sent - static_cast<int64_t>(11 * config.length)) << "client " << id;
  }

  const uint64_t mask = (uint64_t{1} << 32) - 1;
  const auto share_equal_to_clean = [&](const std::vector<secagg::Word>& held) {
    size_t equal = 0;
    for (size_t i = 0; i < clean.size(); ++i)
      equal += ((static_cast<uint64_t>(held[i]) - clean[i]) & mask) == 0;
    return static_cast<double>(equal) / static_cast<double>(clean.size());
  };
  ASSERT_FALSE(report.buffer_snapshots.empty());
  for (const auto& buffer : report.buffer_snapshots) EXPECT_LT(share_equal_to_clean(buffer), 0.01);
  for (const auto& masked : report.masked_inputs) EXPECT_LT(share_equal_to_clean(masked.masked), 0.01);
  EXPECT_LT(share_equal_to_clean(report.result.sum), 0.01);

  // The unmasked sum is the noised encodings' sum; decoded, the sum of the
  // updates plus noise of sd √5 σ per value.
  const ModelSum sum = SessionSum(task, report.result.sum, 5);
  double sq = 0;
  for (size_t i = 0; i < ddg.dim; ++i) {
    const double noise = sum.Centered(i, global[i]) - updates[i];
    sq += noise * noise;
  }
  const double sd = std::sqrt(sq / static_cast<double>(ddg.dim));
  // 58 values: the estimate's own sd is about 9%.
  EXPECT_NEAR(sd / (std::sqrt(5.0) * ddg.noise_sd), 1, 0.3) << ddg.dim << " values";
}

// A session that cannot finish (more dropouts than its threshold allows)
// loses the round's models with the reason, and hands over no sum.
TEST_F(SecureAggregationTest, ASessionThatCannotFinishLosesTheModels) {
  const std::unique_ptr<InProcessTransport> clients = Clients();
  SecureAggregationOptions options;
  options.protocol = secagg::Protocol::kSecAgg;
  options.tolerance.dropout = 0.1;
  options.drop_after_masking = 0.5;
  SecureAggregationTransport secure(*clients, options);
  const ServerView view = FitSecurely(secure, tasks_, /*refuse=*/-1);
  EXPECT_TRUE(view.sums.empty());
  ASSERT_EQ(view.lost.size(), 1u);
  EXPECT_EQ(view.lost[0].first.size(), static_cast<size_t>(kClients));
  EXPECT_NE(view.lost[0].second.find("secure aggregation failed: "), std::string::npos)
      << view.lost[0].second;
}

// A client whose input is garbage (words no model could make) cannot be
// told apart under the masks: the sum is refused whole, each survivor's
// model is lost with the reason, and no client is named for it.
TEST(SecureAggregationHandOverTest, AGarbageSumIsRefusedWholeWithItsReason) {
  secagg::SessionConfig config;
  config.run_id = secagg::RandomBytes(secagg::kKeyBytes);
  config.nonce = secagg::RandomBytes(secagg::kKeyBytes);
  config.protocol = secagg::Protocol::kSecAgg;
  config.length = 4;
  std::map<int64_t, secagg::Bytes> signing;
  std::map<int64_t, std::vector<secagg::Word>> inputs;
  for (int64_t id = 0; id < 5; ++id) {
    const secagg::KeyPair key = secagg::GenerateEd25519();
    config.verify_keys[id] = key.public_key;
    signing[id] = key.secret;
    inputs[id] = ModelSum::TermWords({0.5f, -1.0f, 2.0f}, 10 + id);
  }
  inputs[3] = std::vector<secagg::Word>(4, ~secagg::Word{0} / 3);  // out of every bound
  config.graph = secagg::ParamsFor(config).graph;
  SessionOutcome outcome;
  outcome.clients = {0, 1, 2, 3, 4};
  outcome.result = secagg::RunInProcess(config, signing, inputs).result;
  outcome.finished = true;
  std::vector<std::pair<std::vector<size_t>, std::string>> lost;
  const Transport::ResultSink sink([](size_t, FitResult&&) { return std::string(); },
                                   [&](const std::vector<size_t>& indices, const ModelSum* sum,
                                       const std::string& why) -> std::string {
                                     EXPECT_EQ(sum, nullptr);
                                     lost.emplace_back(indices, why);
                                     return "";
                                   });
  HandOverSession(outcome, {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}}, FitInstructions(), sink);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].first, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_NE(lost[0].second.find("the secure aggregation's sum"), std::string::npos) << lost[0].second;
}

using testing_support::HaveFashionMnist;

// A short Fashion-MNIST simulation with `sets` applied: its summary.
nlohmann::json Simulate(const std::string& name, const testing_support::Settings& sets) {
  return testing_support::SimulateSummary(
      "secagg_run_" + name,
      {{"data.train_limit", "2000"}, {"data.test_limit", "200"}, {"clients.count", "10"},
       {"strategy.fraction", "0.5"}, {"train.epochs", "1"}, {"rounds", "3"},
       {"data.holdout_share", "0.1"}, {"report.progress", "false"}, {"threads", "2"},
       {"secagg.min_clients", "5"}},
      sets);
}

// The acceptance test of secure aggregation in simulation: SecAgg and
// SecAgg+ (with a client of each round dropping out after masking) give
// the plaintext run's final model bit for bit, for FedAvg and for FedProf
// with Paillier matching, whose server then sees neither profiles nor
// models.
TEST(SecureAggregationRunTest, SimulatedRunsEqualPlaintextBitForBit) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string fedavg = Simulate("fedavg", {}).at("final_model_sha256");
  EXPECT_EQ(Simulate("fedavg_secagg", {{"secagg.protocol", "secagg"}}).at("final_model_sha256"),
            fedavg);
  EXPECT_EQ(Simulate("fedavg_secagg_plus", {{"secagg.protocol", "secagg+"},
                                            {"secagg.dropout", "0.2"},
                                            {"secagg.drop_after_masking", "0.2"}})
                .at("final_model_sha256"),
            fedavg);
  // conv2's 16 channels keep Paillier's work small.
  const testing_support::Settings fedprof = {
      {"strategy.name", "fedprof"}, {"fedprof.secure_matching", "paillier"}, {"model.profile_layer", "conv2"}};
  const std::string plain = Simulate("fedprof", fedprof).at("final_model_sha256");
  testing_support::Settings secure = fedprof;
  secure.push_back({"secagg.protocol", "secagg+"});
  EXPECT_EQ(Simulate("fedprof_secagg_plus", secure).at("final_model_sha256"), plain);
  EXPECT_NE(plain, fedavg);
}

// Strategies that need what secure aggregation hides are refused before a
// round, with one line saying why, by simulate and by a server alike; so
// are rounds it cannot protect.
TEST(SecureAggregationRunTest, WhatItCannotServeIsRefusedBeforeARound) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectError([] { Simulate("clustered", {{"secagg.protocol", "secagg+"},
                                          {"strategy.name", "clustered"}}); },
              {"secagg.protocol = secagg+: strategy clustered", "sketches of their individual"});
  ExpectError([] { Simulate("krum", {{"secagg.protocol", "secagg"},
                                     {"strategy.aggregator", "krum"}}); },
              {"secagg.protocol = secagg: the server sees only the sum", "strategy.aggregator"});
  ExpectError([] { Simulate("bounded", {{"secagg.protocol", "secagg"},
                                        {"robust.max_update_norm", "1"}}); },
              {"secagg.protocol = secagg: ", "robust.max_update_norm"});
  ExpectError([] { Simulate("one", {{"secagg.protocol", "secagg"}, {"strategy.fraction", "0.1"}}); },
              {"secagg.protocol = secagg: a sum of one model is that model: 1 clients per round"});
  ExpectError([] { Simulate("five", {{"secagg.protocol", "secagg+"}, {"secagg.dropout", "0.4"}}); },
              {"secagg.protocol = secagg+: 5 clients per round"});
  // FedProf without Paillier matching would send every profile in the clear.
  ExpectError([] { Simulate("profiles", {{"secagg.protocol", "secagg+"}, {"strategy.name", "fedprof"}}); },
              {"secagg.protocol = secagg+: strategy fedprof would have every client send its profile in the "
               "clear", "fedprof.secure_matching = paillier", "secagg.clear_profiles = true"});
  Config config;
  for (const char* set :
       {"model.name=mlp", "model.hidden=8", "secagg.protocol=secagg+", "strategy.aggregator=krum"}) {
    config.SetAssignment(set);
  }
  torch::manual_seed(1);
  ExpectError(
      [&] {
        MakePlan(config, ClientsLive::kElsewhere,
                 TrainTest{testing_support::DrawBlobs(20), testing_support::DrawBlobs(10), Dataset(),
                           FeatureScaling()});
      },
      {"secagg.protocol = secagg+: the server sees only the sum", "strategy.aggregator"});
}

}  // namespace
}  // namespace fedprof
