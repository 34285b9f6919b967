#include "fedprof/deploy/server/secagg_sessions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/secagg/client.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;
using secagg::Word;

constexpr int64_t kLength = 10;  // words of each input

// The server's side of a session driven as the gRPC handlers drive it, by
// clients that are the real state machines: each message goes in through
// Take, each answer comes back through its held reply.
class SessionHarness {
 public:
  // `corrupt`: γ, which with δ = `dropout` sets k and t.
  SessionHarness(int n, double dropout, std::set<int64_t> admitted, double corrupt = 0.1,
                 RefusalLog* refusals = nullptr) {
    config_.run_id = secagg::RandomBytes(secagg::kKeyBytes);
    config_.round = 3;
    config_.nonce = secagg::RandomBytes(secagg::kKeyBytes);
    config_.protocol = secagg::Protocol::kSecAggPlus;
    config_.tolerance.dropout = dropout;
    config_.tolerance.corrupt = corrupt;
    config_.length = kLength;
    std::map<int64_t, int64_t> task_of;
    for (int64_t id = 0; id < n; ++id) {
      secagg::KeyPair key = secagg::GenerateEd25519();
      config_.verify_keys[id] = key.public_key;
      signing_[id] = key.secret;
      task_of[id] = 100 + id;
    }
    config_.graph = secagg::ParamsFor(config_).graph;
    for (int64_t id = 0; id < n; ++id) {
      clients_[id] = std::make_unique<secagg::SecAggClient>(config_, id, signing_[id]);
    }
    session_ = std::make_unique<SecAggRendezvous>(config_, task_of, /*phase_timeout_s=*/20, refusals);
    for (int64_t id : admitted) session_->Admit(id);
  }

  secagg::SecAggClient& client(int64_t id) { return *clients_.at(id); }
  SecAggRendezvous& session() { return *session_; }

  void Send(int64_t id, pb::SecAggRequest request) {
    request.set_task_id(100 + id);
    auto reply = std::make_shared<pb::SecAggReply>();
    session_->Take(id, request, HeldReply{reply.get(), [this, id, reply] {
                                            std::lock_guard<std::mutex> lock(mutex_);
                                            answers_[id] = *reply;
                                            answered_.notify_all();
                                          }});
  }

  // Client `id`'s answer, within 30 s.
  pb::SecAggReply Await(int64_t id) {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool came =
        answered_.wait_for(lock, std::chrono::seconds(30), [&] { return answers_.count(id) > 0; });
    if (!came) throw Error("no answer for client " + std::to_string(id));
    pb::SecAggReply reply = answers_.at(id);
    answers_.erase(id);
    return reply;
  }

 private:
  secagg::SessionConfig config_;
  std::map<int64_t, secagg::Bytes> signing_;
  std::map<int64_t, std::unique_ptr<secagg::SecAggClient>> clients_;
  std::mutex mutex_;
  std::condition_variable answered_;
  std::map<int64_t, pb::SecAggReply> answers_;
  // Last: it answers what it still holds when destroyed.
  std::unique_ptr<SecAggRendezvous> session_;
};

std::vector<Word> InputOf(int64_t id) {
  std::vector<Word> x(kLength);
  for (int64_t i = 0; i < kLength; ++i)
    x[i] = (static_cast<Word>(id + 1) << 100) + static_cast<Word>(i * 7 + id);
  return x;
}

// Keys advertised and the roster signed by each of `ids`: the directory
// each then holds in (*got)[id].
void AdvertiseAndSign(SessionHarness& h, const std::vector<int64_t>& ids,
                      std::map<int64_t, pb::SecAggReply>* got) {
  for (int64_t id : ids) {
    pb::SecAggRequest r;
    *r.mutable_advertise() = secagg::ToWire(h.client(id).Advertise());
    h.Send(id, r);
  }
  for (int64_t id : ids) {
    (*got)[id] = h.Await(id);
    ASSERT_TRUE((*got)[id].more() && (*got)[id].has_roster()) << id << ": " << (*got)[id].reason();
  }
  for (int64_t id : ids) {
    pb::SecAggRequest r;
    *r.mutable_roster_signature() =
        secagg::ToWire(h.client(id).SignRoster(secagg::FromWire((*got)[id].roster(), "server")));
    h.Send(id, r);
  }
  for (int64_t id : ids) {
    (*got)[id] = h.Await(id);
    ASSERT_TRUE((*got)[id].more() && (*got)[id].has_directory()) << id << ": " << (*got)[id].reason();
  }
}

// Each of `ids` masks its input under the bundle in got[id] and sends it in
// chunks of 3 words, each acknowledged at once; then a call of no message
// waits for the survivor list, except from `dies`, which dies before it.
void SendMasked(SessionHarness& h, const std::vector<int64_t>& ids,
                const std::map<int64_t, pb::SecAggReply>& got, int64_t dies) {
  for (int64_t id : ids) {
    const secagg::MaskedInput masked =
        h.client(id).Mask(secagg::FromWire(got.at(id).bundle(), "server"), InputOf(id));
    const std::vector<secagg::pb::MaskedInputChunk> chunks = secagg::ToWire(masked, 3);
    ASSERT_EQ(chunks.size(), 4u);
    for (const secagg::pb::MaskedInputChunk& chunk : chunks) {
      pb::SecAggRequest r;
      *r.mutable_masked() = chunk;
      h.Send(id, r);
      const pb::SecAggReply next = h.Await(id);
      ASSERT_TRUE(next.more() && next.message_case() == pb::SecAggReply::MESSAGE_NOT_SET);
    }
    if (id != dies) h.Send(id, pb::SecAggRequest());
  }
}

TEST(SecAggRendezvousTest, TheSumOfTheSurvivorsWithADropoutAndAMalformedShare) {
  // Six clients: 5 sends encrypted shares of the wrong size and is
  // excluded; 4 sends its masked input and dies. δ = 0.4 tolerates both
  // (with γ = 0: six clients cannot also hold off a corrupt one).
  SessionHarness h(6, 0.4, {0, 1, 2, 3, 4, 5}, /*corrupt=*/0);
  std::atomic<bool> four_alive{true};
  SecAggOutcome out;
  std::thread server(
      [&] { out = h.session().Run([&](int64_t id) { return id != 4 || four_alive.load(); }); });
  const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5};
  std::map<int64_t, pb::SecAggReply> got;
  ASSERT_NO_FATAL_FAILURE(AdvertiseAndSign(h, all, &got));
  for (int64_t id : all) {
    pb::SecAggRequest r;
    *r.mutable_shares() = secagg::ToWire(h.client(id).Share(secagg::FromWire(got[id].directory(), "server")));
    if (id == 5) r.mutable_shares()->mutable_shares(0)->mutable_sealed()->pop_back();
    h.Send(id, r);
  }
  const pb::SecAggReply excluded = h.Await(5);
  EXPECT_FALSE(excluded.more());
  EXPECT_NE(excluded.reason().find("excluded"), std::string::npos) << excluded.reason();
  const std::vector<int64_t> five = {0, 1, 2, 3, 4};
  for (int64_t id : five) {
    got[id] = h.Await(id);
    ASSERT_TRUE(got[id].more() && got[id].has_bundle()) << id << ": " << got[id].reason();
  }
  ASSERT_NO_FATAL_FAILURE(SendMasked(h, five, got, /*dies=*/4));
  four_alive = false;  // it never signs
  const std::vector<int64_t> four = {0, 1, 2, 3};
  for (int64_t id : four) {
    got[id] = h.Await(id);
    ASSERT_TRUE(got[id].more() && got[id].has_survivors()) << id << ": " << got[id].reason();
  }
  for (int64_t id : four) {
    pb::SecAggRequest r;
    *r.mutable_signature() =
        secagg::ToWire(h.client(id).Check(secagg::FromWire(got[id].survivors(), "server")));
    h.Send(id, r);
  }
  for (int64_t id : four) {
    got[id] = h.Await(id);
    ASSERT_TRUE(got[id].more() && got[id].has_unmask()) << id << ": " << got[id].reason();
    pb::SecAggRequest r;
    *r.mutable_unmask() = secagg::ToWire(h.client(id).Unmask(secagg::FromWire(got[id].unmask(), "server")));
    h.Send(id, r);
  }
  for (int64_t id : four) {
    const pb::SecAggReply done = h.Await(id);
    EXPECT_FALSE(done.more());
    EXPECT_EQ(done.reason(), "") << id;  // in the sum
  }
  server.join();

  ASSERT_TRUE(out.finished) << out.failure;
  EXPECT_EQ(out.result.survivors, five);
  std::vector<Word> expected(kLength, 0);
  for (int64_t id : five) {
    const std::vector<Word> x = InputOf(id);
    for (int64_t i = 0; i < kLength; ++i) expected[i] += x[i];
  }
  EXPECT_EQ(out.result.sum, expected);
  ASSERT_EQ(out.Lost().count(5), 1u);
  EXPECT_NE(out.Lost().at(5).find("excluded"), std::string::npos);
  EXPECT_EQ(out.cost.clients, 6);
  EXPECT_EQ(out.cost.survivors, 5);
}

TEST(SecAggRendezvousTest, OnlyAdmittedClientsOfTheirOwnTaskJoin) {
  SessionHarness h(3, 0.1, {0, 1});
  pb::SecAggRequest r;
  *r.mutable_advertise() = secagg::ToWire(h.client(2).Advertise());
  h.Send(2, r);  // its result was not accepted
  pb::SecAggReply reply = h.Await(2);
  EXPECT_FALSE(reply.more());
  EXPECT_NE(reply.reason().find("not (or not yet) accepted"), std::string::npos) << reply.reason();

  *r.mutable_advertise() = secagg::ToWire(h.client(0).Advertise());
  r.set_task_id(7);
  auto held = std::make_shared<pb::SecAggReply>();
  bool finished = false;
  h.session().Take(0, r, HeldReply{held.get(), [&] { finished = true; }});  // another task's id
  EXPECT_TRUE(finished);
  EXPECT_FALSE(held->more());
  EXPECT_NE(held->reason().find("task 7"), std::string::npos) << held->reason();

  // A second message while the first awaits its answer excludes the client.
  *r.mutable_advertise() = secagg::ToWire(h.client(1).Advertise());
  h.Send(1, r);
  h.Send(1, r);
  EXPECT_FALSE(h.Await(1).more());
}

TEST(SecAggRendezvousTest, ASessionWithTooFewClientsFailsAndAnswersEveryone) {
  SessionHarness h(3, 0.1, {0, 1, 2});
  pb::SecAggRequest r;
  *r.mutable_advertise() = secagg::ToWire(h.client(0).Advertise());
  h.Send(0, r);
  // 1 and 2 are gone: the advertising round closes with one client.
  const SecAggOutcome out = h.session().Run([](int64_t id) { return id == 0; });
  EXPECT_FALSE(out.finished);
  EXPECT_FALSE(out.failure.empty());
  const pb::SecAggReply reply = h.Await(0);
  EXPECT_FALSE(reply.more());
  EXPECT_NE(reply.reason().find("the session failed"), std::string::npos) << reply.reason();
}

// The keys scripts/make-certs.sh issues read back as each client's pair and
// the roster of their public halves; a roster line that is no key is named.
TEST(SecAggKeysTest, TheIssuedKeysAndRosterReadBackAndABadLineIsNamed) {
  const std::string dir = testing_support::ClearedPath("secagg", "keys");
  const std::string make = "bash " FEDPROF_SOURCE_DIR "/scripts/make-certs.sh " + dir + " 3 > /dev/null";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const std::map<int64_t, std::string> roster = SecAggRoster(dir);
  ASSERT_EQ(roster.size(), 3u);
  for (int id = 0; id < 3; ++id) {
    const SecAggKeyPair pair = SecAggSigningKey(dir, id);
    EXPECT_EQ(roster.at(id), pair.public_key);
    const std::string message = "a statement";
    EXPECT_TRUE(secagg::Verify(pair.public_key, message, secagg::Sign(pair.secret, message)));
  }
  const std::string text = ReadFile(dir + "/secagg-roster");
  const size_t second = text.find('\n') + 1;
  WriteFileAtomic(dir + "/secagg-roster", text.substr(0, second) + "1 not-a-key!\n");
  try {
    SecAggRoster(dir);
    ADD_FAILURE() << "read a roster with a line that is no key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("secagg-roster line 2: "), std::string::npos) << e.what();
  }
  WriteFileAtomic(dir + "/secagg-roster", text.substr(0, second) + text.substr(0, second));
  EXPECT_THROW(SecAggRoster(dir), Error);  // client 0 twice
}

// A client whose configuration says secure aggregation (secagg.protocol)
// refuses whatever would let its model, or what it reveals of it, reach the
// server in the clear: the server cannot turn that off by leaving the setup
// out of a task.
TEST(SecAggPolicyTest, AClientThatRequiresSecureAggregationRefusesADowngrade) {
  SecAggPolicy policy;
  FitInstructions train;
  train.train.epochs = 2;
  const secagg::SessionConfig setup;
  EXPECT_EQ(RefusedTask(train, nullptr, policy), "");  // not required: the server decides
  policy.required = true;
  EXPECT_EQ(RefusedTask(train, &setup, policy), "");
  const std::string clear = RefusedTask(train, nullptr, policy);
  EXPECT_NE(clear.find("refused a task that would send its model in the clear"), std::string::npos) << clear;
  EXPECT_EQ(clear.find('\n'), std::string::npos);
  // A report task brings no model back, but a profile in the clear, or a
  // sketch of the update, is refused unless the client allows it.
  FitInstructions report;
  report.train.epochs = 0;
  report.report.profile = true;
  EXPECT_NE(RefusedTask(report, nullptr, policy).find("its profile in the clear"), std::string::npos);
  report.report.public_key = std::make_shared<const std::string>("paillier");
  EXPECT_EQ(RefusedTask(report, nullptr, policy), "");  // encrypted matching: only Enc(q div) leaves
  report.report.public_key.reset();
  policy.clear_profiles = true;
  EXPECT_EQ(RefusedTask(report, nullptr, policy), "");
  train.report.sketch_dim = 16;
  EXPECT_NE(RefusedTask(train, &setup, policy).find("a sketch of its update"), std::string::npos);
}

// Every message the session refuses is logged, naming its client, once per
// kind and client within the log's window, later repeats counted.
TEST(SecAggRendezvousTest, EveryRefusedMessageIsLoggedOnceNamingItsClient) {
  std::vector<std::string> lines;
  std::mutex lines_mutex;
  RefusalLog log(10, [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(lines_mutex);
    lines.push_back(line);
  });
  SessionHarness h(3, 0.1, {0, 1}, 0.1, &log);
  pb::SecAggRequest advertise;
  *advertise.mutable_advertise() = secagg::ToWire(h.client(2).Advertise());
  h.Send(2, advertise);  // before its result is accepted
  EXPECT_FALSE(h.Await(2).more());
  pb::SecAggRequest signature;
  *signature.mutable_signature() = secagg::ToWire(secagg::ConsistencySignature{0, secagg::Bytes(64, 's')});
  ASSERT_TRUE(signature.has_signature());
  for (int i = 0; i < 50; ++i) {
    h.Send(0, signature);  // out of turn, fifty times
    EXPECT_FALSE(h.Await(0).more());
  }
  auto held = std::make_shared<pb::SecAggReply>();
  pb::SecAggRequest other_task = advertise;
  other_task.set_task_id(999);
  h.session().Take(1, other_task, HeldReply{held.get(), [] {}});  // a task with no session
  EXPECT_FALSE(held->more());
  log.Flush(/*everything=*/true);
  std::lock_guard<std::mutex> lock(lines_mutex);
  const auto count = [&](const std::string& part) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(part) != std::string::npos; });
  };
  EXPECT_EQ(count("client 2"), 1) << ::testing::PrintToString(lines);
  EXPECT_EQ(count("not (or not yet) accepted"), 1);
  EXPECT_EQ(count("client 0 refused: SecAgg: a message the session's current round does not take"), 1)
      << ::testing::PrintToString(lines);
  EXPECT_EQ(count("client 0: 49 more refusals (SecAgg out of turn)"), 1) << ::testing::PrintToString(lines);
  EXPECT_EQ(count("client 1 refused: SecAgg: task 999 has no secure aggregation open"), 1)
      << ::testing::PrintToString(lines);
  for (const std::string& line : lines) EXPECT_EQ(line.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace fedprof
