#include "fedprof/deploy/client/task.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/deploy/server/secagg_sessions.h"
#include "fedprof/protocol/wire.h"
#include "fedprof/secagg/crypto.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;

constexpr int64_t kClient = 3;

pb::TaskChunk StatusChunk(pb::Status status) {
  pb::TaskChunk chunk;
  chunk.set_status(status);
  return chunk;
}

// A task header of round 4 for a model of `num_params` values.
pb::TaskChunk HeaderChunk(int64_t num_params, int epochs = 1) {
  FitInstructions ins;
  ins.round = 4;
  ins.train.epochs = epochs;
  pb::TaskChunk chunk;
  ToWire(ins, /*task_id=*/77, num_params, chunk.mutable_header());
  return chunk;
}

pb::TaskChunk ParamsChunk(const FlatParams& values) {
  pb::TaskChunk chunk;
  std::string* bytes = chunk.mutable_params();
  bytes->resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(bytes->data(), values.data(), bytes->size());
  return chunk;
}

// The session of round 4 among clients 3, 5 and 8 for a model of
// `num_params` values, as a server sets it.
pb::SecAggSetup SessionOfThree(int64_t num_params) {
  secagg::SessionConfig config;
  config.run_id = secagg::RandomBytes(secagg::kKeyBytes);
  config.round = 4;
  config.nonce = secagg::RandomBytes(secagg::kKeyBytes);
  config.length = static_cast<size_t>(num_params) + 1;
  for (int64_t id : {3, 5, 8}) config.verify_keys[id] = secagg::GenerateEd25519().public_key;
  config.graph = secagg::ParamsFor(config).graph;
  return SetupToWire(config, 90);
}

TaskChecks ChecksOf(int64_t id) {
  TaskChecks checks;
  checks.client_id = id;
  return checks;
}

// Feeds `chunks` to a stream until it asks for no more.
ReceivedTask ReceiveAll(const std::vector<pb::TaskChunk>& chunks, TaskChecks checks = ChecksOf(kClient)) {
  TaskStream stream(std::move(checks));
  for (const pb::TaskChunk& chunk : chunks) {
    if (!stream.Take(chunk)) break;
  }
  return stream.Finish();
}

TEST(ClientTaskStreamTest, ATaskIsItsStatusHeaderAndWholeModel) {
  const ReceivedTask task =
      ReceiveAll({StatusChunk(pb::TASK), HeaderChunk(5), ParamsChunk({1, 2}), ParamsChunk({3, 4, 5})});
  EXPECT_EQ(task.status, pb::TASK);
  EXPECT_TRUE(task.got);
  EXPECT_EQ(task.task_id, 77);
  EXPECT_EQ(task.instructions.round, 4);
  ASSERT_TRUE(task.instructions.global);
  EXPECT_EQ(*task.instructions.global, FlatParams({1, 2, 3, 4, 5}));
  EXPECT_FALSE(task.secagg);
  EXPECT_EQ(task.malformed, "");
  EXPECT_EQ(task.refused, "");
}

TEST(ClientTaskStreamTest, NoTaskIsOnlyAStatus) {
  for (pb::Status status : {pb::WAIT, pb::DONE, pb::UNKNOWN_SESSION}) {
    TaskStream stream(ChecksOf(kClient));
    EXPECT_FALSE(stream.Take(StatusChunk(status)));
    const ReceivedTask task = stream.Finish();
    EXPECT_EQ(task.status, status);
    EXPECT_FALSE(task.got);
  }
}

TEST(ClientTaskStreamTest, AStreamOutOfOrderOrCutShortBringsNoTask) {
  // A header where the status belongs: read no further.
  TaskStream stream(ChecksOf(kClient));
  EXPECT_FALSE(stream.Take(HeaderChunk(5)));
  EXPECT_EQ(stream.Finish().status, pb::WAIT);
  EXPECT_FALSE(ReceiveAll({StatusChunk(pb::TASK), ParamsChunk({1})}).got);
  EXPECT_FALSE(ReceiveAll({StatusChunk(pb::TASK), HeaderChunk(5), ParamsChunk({1, 2})}).got);
  EXPECT_FALSE(
      ReceiveAll({StatusChunk(pb::TASK), HeaderChunk(2), ParamsChunk({1}), StatusChunk(pb::TASK)}).got);
}

TEST(ClientTaskStreamTest, AMalformedHeaderOrChunkIsRefused) {
  const auto refused = [](const std::vector<pb::TaskChunk>& chunks, const std::string& says) {
    TaskStream stream(ChecksOf(kClient));
    try {
      for (const pb::TaskChunk& chunk : chunks) stream.Take(chunk);
      ADD_FAILURE() << "took a stream whose " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  pb::TaskChunk other_version = HeaderChunk(2);
  other_version.mutable_header()->set_protocol_version(kProtocolVersion + 1);
  refused({StatusChunk(pb::TASK), other_version}, "protocol");
  pb::TaskChunk negative = HeaderChunk(2);
  negative.mutable_header()->set_num_params(-1);
  refused({StatusChunk(pb::TASK), negative}, "model of -1 values");
  pb::TaskChunk ragged = ParamsChunk({1});
  ragged.mutable_params()->push_back('\0');
  refused({StatusChunk(pb::TASK), HeaderChunk(2), ragged}, "not whole float32s");
  refused({StatusChunk(pb::TASK), HeaderChunk(2), ParamsChunk({1, 2, 3})}, "exceed the 2 values announced");
}

TEST(ClientTaskStreamTest, ATrainingTasksSessionIsCheckedAgainstTheClientsOwn) {
  pb::TaskChunk header = HeaderChunk(2);
  *header.mutable_header()->mutable_secagg() = SessionOfThree(2);
  const ReceivedTask task = ReceiveAll({StatusChunk(pb::TASK), header, ParamsChunk({1, 2})});
  EXPECT_TRUE(task.got);
  ASSERT_TRUE(task.secagg);
  EXPECT_EQ(task.secagg->round, 4);
  EXPECT_EQ(task.secagg->verify_keys.size(), 3u);
  EXPECT_EQ(task.secagg_wait_s, 90);
  EXPECT_EQ(task.refused, "");

  // A session without this client is refused, not malformed: the client
  // answers the task with why.
  const ReceivedTask outsider = ReceiveAll({StatusChunk(pb::TASK), header, ParamsChunk({1, 2})}, ChecksOf(4));
  EXPECT_TRUE(outsider.got);
  EXPECT_FALSE(outsider.secagg);
  EXPECT_NE(outsider.refused.find("refused the server's secure aggregation"), std::string::npos)
      << outsider.refused;

  // A report takes part in no session.
  pb::TaskChunk report = HeaderChunk(2, /*epochs=*/0);
  *report.mutable_header()->mutable_secagg() = SessionOfThree(2);
  EXPECT_FALSE(ReceiveAll({StatusChunk(pb::TASK), report, ParamsChunk({1, 2})}).secagg);
}

TEST(ClientTaskStreamTest, ASessionForAClientWithoutKeysIsMalformed) {
  pb::TaskChunk header = HeaderChunk(2);
  *header.mutable_header()->mutable_secagg() = SessionOfThree(2);
  TaskChecks checks = ChecksOf(kClient);
  checks.keys_missing = "tls/client-3.secagg.key: no such file";
  TaskStream stream(checks);
  stream.Take(StatusChunk(pb::TASK));
  EXPECT_THROW(stream.Take(header), Error);
}

TEST(ClientTaskStreamTest, TheSessionsKeysMustBeTheRosters) {
  pb::TaskChunk header = HeaderChunk(2);
  *header.mutable_header()->mutable_secagg() = SessionOfThree(2);
  int reads = 0;
  TaskChecks checks = ChecksOf(kClient);
  checks.roster = [&reads] {
    ++reads;
    return std::make_shared<const std::map<int64_t, std::string>>();
  };
  const ReceivedTask task = ReceiveAll({StatusChunk(pb::TASK), header, ParamsChunk({1, 2})}, checks);
  EXPECT_EQ(reads, 1);
  EXPECT_FALSE(task.secagg);
  EXPECT_NE(task.refused.find("which secagg-roster does not"), std::string::npos) << task.refused;
}

}  // namespace
}  // namespace fedprof
