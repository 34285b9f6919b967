#include "fedprof/deploy/client/secagg.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/secagg/server.h"
#include "fedprof/secagg/wire.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;

// Round 4's session among clients 3, 5 and 8, each with its signing key,
// for models of `num_params` values.
struct SessionOfThreeClients {
  explicit SessionOfThreeClients(int64_t num_params) {
    config.run_id = secagg::RandomBytes(secagg::kKeyBytes);
    config.round = 4;
    config.nonce = secagg::RandomBytes(secagg::kKeyBytes);
    config.length = static_cast<size_t>(num_params) + 1;
    for (int64_t id : {3, 5, 8}) {
      secagg::KeyPair key = secagg::GenerateEd25519();
      config.verify_keys[id] = key.public_key;
      signing[id] = key.secret;
    }
    config.graph = secagg::ParamsFor(config).graph;
  }

  ReceivedTask Task() const {
    ReceivedTask task;
    task.status = pb::TASK;
    task.got = true;
    task.instructions.round = 4;
    task.instructions.train.epochs = 1;
    task.task_id = 77;
    task.secagg = config;
    task.secagg_wait_s = 90;
    return task;
  }

  secagg::SessionConfig config;
  std::map<int64_t, secagg::Bytes> signing;
};

FitResult ModelOf(int64_t id, size_t values) {
  FitResult r;
  r.ok = true;
  r.client_id = static_cast<int>(id);
  r.num_samples = 10 * id;
  for (size_t i = 0; i < values; ++i)
    r.params.push_back(static_cast<float>(id) * 0.5f + static_cast<float>(i));
  return r;
}

TEST(ClientSecAggTest, ThreeClientsModelsReachTheSumMaskedAndInChunks) {
  const int64_t num_params = 6;  // 7 words a client, 2 a chunk of 32 bytes
  SessionOfThreeClients session(num_params);
  std::map<int64_t, std::unique_ptr<SecAggParticipation>> parts;
  std::vector<secagg::Word> expected(num_params + 1, 0);
  for (const auto& [id, key] : session.signing) {
    FitResult result = ModelOf(id, num_params);
    const std::vector<secagg::Word> words = ModelSum::TermWords(result.params, result.num_samples);
    for (size_t i = 0; i < words.size(); ++i) expected[i] += words[i];
    parts[id] = SecAggParticipation::Join(session.Task(), id, key, /*chunk_bytes=*/32, &result);
    ASSERT_TRUE(parts[id]);
    EXPECT_TRUE(result.ok);
    EXPECT_TRUE(result.params.empty());  // the result goes without its model
    EXPECT_EQ(parts[id]->round(), 4);
    EXPECT_EQ(parts[id]->wait_s(), 90);
  }
  secagg::SecAggServer server(session.config);
  const std::string who = "a test client";
  for (auto& [id, part] : parts) {
    const pb::SecAggRequest advertise = part->Answer(pb::SecAggReply()).request;
    EXPECT_TRUE(server.ReceiveAdvertise(id, secagg::FromWire(advertise.advertise(), who)));
  }
  pb::SecAggReply reply;
  *reply.mutable_roster() = secagg::ToWire(server.CloseAdvertise());
  for (auto& [id, part] : parts) {
    const pb::SecAggRequest signature = part->Answer(reply).request;
    EXPECT_TRUE(server.ReceiveRosterSignature(id, secagg::FromWire(signature.roster_signature(), who)));
  }
  for (const auto& [id, directory] : server.CloseRoster()) {
    *reply.mutable_directory() = secagg::ToWire(directory);
    EXPECT_TRUE(
        server.ReceiveShares(id, secagg::FromWire(parts.at(id)->Answer(reply).request.shares(), who)));
  }
  for (const auto& [id, bundle] : server.CloseShares()) {
    *reply.mutable_bundle() = secagg::ToWire(bundle);
    SecAggParticipation::Step step = parts.at(id)->Answer(reply);
    secagg::MaskedInputAssembler masked(session.config.length, who);
    int chunks = 0;
    for (; step.request.has_masked() && chunks < 100; ++chunks) {
      EXPECT_FALSE(step.delivered);
      masked.Add(step.request.masked());
      step = parts.at(id)->Answer(pb::SecAggReply());  // the chunk taken
    }
    EXPECT_EQ(chunks, 4);
    // Delivered: a message of none asks for the survivor list.
    EXPECT_TRUE(step.delivered);
    EXPECT_EQ(step.request.message_case(), pb::SecAggRequest::MESSAGE_NOT_SET);
    EXPECT_TRUE(server.ReceiveMasked(id, masked.Finish()));
  }
  *reply.mutable_survivors() = secagg::ToWire(server.CloseMasked());
  for (auto& [id, part] : parts) {
    EXPECT_TRUE(server.ReceiveSignature(id, secagg::FromWire(part->Answer(reply).request.signature(), who)));
  }
  *reply.mutable_unmask() = secagg::ToWire(server.CloseConsistency());
  for (int64_t id : server.signers()) {
    EXPECT_TRUE(
        server.ReceiveUnmask(id, secagg::FromWire(parts.at(id)->Answer(reply).request.unmask(), who)));
  }
  const secagg::AggregateResult sum = server.Finish();
  EXPECT_EQ(sum.survivors, std::vector<int64_t>({3, 5, 8}));
  EXPECT_TRUE(sum.sum == expected);
}

TEST(ClientSecAggTest, AServerOutOfTurnOrWithAMalformedMessageIsRefused) {
  SessionOfThreeClients session(2);
  FitResult result = ModelOf(3, 2);
  auto part = SecAggParticipation::Join(session.Task(), 3, session.signing.at(3), 1024, &result);
  ASSERT_TRUE(part);
  EXPECT_TRUE(part->Answer(pb::SecAggReply()).request.has_advertise());
  try {
    part->Answer(pb::SecAggReply());
    ADD_FAILURE() << "took a reply of no message after advertising";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("without the session's next message"), std::string::npos)
        << e.what();
  }
  pb::SecAggReply empty_roster;
  empty_roster.mutable_roster();
  EXPECT_THROW(part->Answer(empty_roster), Error);
}

TEST(ClientSecAggTest, AModelThatCannotBeSummedFailsItsResult) {
  SessionOfThreeClients session(2);
  FitResult result = ModelOf(3, 2);
  result.params[1] = std::nanf("");
  EXPECT_FALSE(SecAggParticipation::Join(session.Task(), 3, session.signing.at(3), 1024, &result));
  EXPECT_FALSE(result.ok);
  EXPECT_NE(result.error.find("its model cannot be securely aggregated"), std::string::npos) << result.error;
  EXPECT_TRUE(result.params.empty());  // a failed result announces no model
}

TEST(ClientSecAggTest, ATaskIsRefusedForTheSetupItsPolicyOrAReplayedSession) {
  SessionOfThreeClients session(2);
  ClientLedger ledger("", 1e-5, 0);
  SecAggPolicy policy;
  ReceivedTask plain = session.Task();
  plain.secagg.reset();
  EXPECT_EQ(RefusedReceivedTask(plain, policy, &ledger), "");  // not required: the server decides
  policy.required = true;
  EXPECT_NE(RefusedReceivedTask(plain, policy, &ledger).find("its model in the clear"), std::string::npos);

  // The check of the setup already refused it: said as it was, nothing joined.
  ReceivedTask bad_setup = session.Task();
  bad_setup.refused =
      "refused the server's secure aggregation: task: secure aggregation of clients without this one";
  EXPECT_EQ(RefusedReceivedTask(bad_setup, policy, &ledger), bad_setup.refused);

  EXPECT_EQ(RefusedReceivedTask(session.Task(), policy, &ledger), "");
  const std::string replay = RefusedReceivedTask(session.Task(), policy, &ledger);
  EXPECT_NE(replay.find("refused the server's secure aggregation"), std::string::npos) << replay;
}

TEST(ClientSecAggTest, TheKeysAreTheIssuedOnesUnderTlsAndTheProcesssOwnWithout) {
  const SecAggIdentity own = LoadSecAggIdentity("", 3);
  EXPECT_EQ(own.signing_key.size(), secagg::kKeyBytes);
  EXPECT_EQ(own.verify_key.size(), secagg::kKeyBytes);
  EXPECT_EQ(own.missing, "");

  const std::string dir = testing_support::FreshDir("ClientSecAggTest", "keys");
  const SecAggIdentity none = LoadSecAggIdentity(dir, 3);
  EXPECT_TRUE(none.signing_key.empty());
  EXPECT_TRUE(none.verify_key.empty());
  EXPECT_NE(none.missing.find("client-3.secagg.key"), std::string::npos) << none.missing;

  GenerateClientKeys(dir, 3);
  const SecAggIdentity issued = LoadSecAggIdentity(dir, 3);
  EXPECT_EQ(issued.missing, "");
  EXPECT_EQ(issued.verify_key, SecAggSigningKey(dir, 3).public_key);
  EXPECT_EQ(issued.signing_key, SecAggSigningKey(dir, 3).secret);
}

}  // namespace
}  // namespace fedprof
