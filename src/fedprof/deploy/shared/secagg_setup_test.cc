#include "fedprof/deploy/shared/secagg_setup.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/secagg/crypto.h"
#include "fedprof/secagg/messages.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;

TEST(SecAggSetupTest, ATasksSetupIsCheckedBeforeUse) {
  SecAggPolicy policy;
  secagg::SessionConfig config;
  config.run_id = secagg::RandomBytes(secagg::kKeyBytes);
  config.round = 4;
  config.nonce = secagg::RandomBytes(secagg::kKeyBytes);
  config.length = 11;
  for (int64_t id : {3, 5, 8}) config.verify_keys[id] = secagg::GenerateEd25519().public_key;
  config.tolerance = policy.tolerance;
  config.graph = secagg::ParamsFor(config).graph;
  const pb::SecAggSetup good = SetupToWire(config, 90);
  const secagg::SessionConfig back = SetupFromWire(good, 11, 3, 4, policy);
  EXPECT_EQ(secagg::SessionId(back), secagg::SessionId(config));
  EXPECT_EQ(back.verify_keys, config.verify_keys);
  EXPECT_EQ(back.length, 11u);
  // The round is the task's: another one is another session.
  EXPECT_NE(secagg::SessionId(SetupFromWire(good, 11, 3, 5, policy)), secagg::SessionId(config));

  const auto refused = [&](const std::function<void(pb::SecAggSetup&)>& spoil, const std::string& says,
                           const SecAggPolicy& own) {
    pb::SecAggSetup s = good;
    spoil(s);
    try {
      SetupFromWire(s, 11, 3, 4, own);
      ADD_FAILURE() << "accepted a setup that " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  const auto as_is = [](pb::SecAggSetup&) {};
  refused([](pb::SecAggSetup& s) { s.set_length(12); }, "of 12 words", policy);
  refused([](pb::SecAggSetup& s) { s.mutable_verify_keys(1)->pop_back(); }, "with a key of 31 bytes", policy);
  refused([](pb::SecAggSetup& s) { s.set_clients(1, 3); }, "names client 3 twice", policy);
  refused([](pb::SecAggSetup& s) { s.set_clients(0, 4); }, "without this one", policy);
  refused([](pb::SecAggSetup& s) { s.mutable_run_id()->clear(); }, "run id of 0 bytes", policy);
  refused([](pb::SecAggSetup& s) { s.mutable_nonce()->pop_back(); }, "nonce of 31 bytes", policy);
  // k and t are the client's own: a server that sets them (here as a γ of 0
  // would, t = 1 of 2) or a client that asks for more is refused.
  refused([](pb::SecAggSetup& s) { s.set_threshold(1); },
          "the session's k = 2, t = 1 are not this party's k = 2, t = 2", policy);
  SecAggPolicy stricter = policy;
  stricter.tolerance.corrupt = 0.4;
  refused(as_is, "no threshold lets 3 invited clients", stricter);
  EXPECT_THROW(SetupFromWire(good, 11, 7, 4, policy), Error);

  // Against the keys issued with the certificates (secagg-roster), a key the
  // server substitutes for a client's is refused.
  std::map<int64_t, std::string> roster(config.verify_keys.begin(), config.verify_keys.end());
  EXPECT_EQ(SetupFromWire(good, 11, 3, 4, policy, &roster).verify_keys, config.verify_keys);
  roster[5] = secagg::GenerateEd25519().public_key;
  try {
    SetupFromWire(good, 11, 3, 4, policy, &roster);
    ADD_FAILURE() << "accepted a substituted key";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gives client 5 a verification key that is not secagg-roster's"),
              std::string::npos)
        << e.what();
  }
  roster.erase(5);
  EXPECT_THROW(SetupFromWire(good, 11, 3, 4, policy, &roster), Error);
}

}  // namespace
}  // namespace fedprof
