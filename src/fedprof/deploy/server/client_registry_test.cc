#include "fedprof/deploy/server/client_registry.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"

namespace fedprof::deploy {
namespace {

GrpcServerOptions Options(int num_clients) {
  GrpcServerOptions o;
  o.num_clients = num_clients;
  o.heartbeat_timeout_s = 10;
  o.max_samples = 5000;
  return o;
}

pb::RegisterRequest Registration(int64_t samples) {
  pb::RegisterRequest r;
  r.set_num_samples(samples);
  r.set_speed_ghz(1.5);
  r.set_bandwidth_mhz(10);
  return r;
}

pb::RelaySyncRequest RelaySync(std::initializer_list<int> ids, int64_t samples = 100) {
  pb::RelaySyncRequest r;
  for (int id : ids) {
    pb::RelayedClient* c = r.add_clients();
    c->set_client_id(id);
    c->set_num_samples(samples);
  }
  return r;
}

// A registry over its own server state, on a clock the test names.
struct Registry {
  explicit Registry(const GrpcServerOptions& o) : state(o, nullptr), registry(&state, {}) {}
  grpc::Status Register(int id, int64_t samples, std::string* session = nullptr) {
    std::string s;
    const grpc::Status status = registry.Register(id, Registration(samples), t0, &s);
    if (session) *session = s;
    return status;
  }
  Clock::time_point At(double s) const { return t0 + Seconds(s); }
  ServiceState state;
  ClientRegistry registry;
  const Clock::time_point t0 = Clock::now();
};

TEST(ClientRegistryTest, ASampleCountClaimedOnceIsTheClientsForTheRun) {
  Registry r(Options(3));
  std::string first, second;
  ASSERT_TRUE(r.Register(0, 100, &first).ok());
  EXPECT_TRUE(IsHex(first, 32)) << first;
  const grpc::Status changed = r.Register(0, 200);
  EXPECT_EQ(changed.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(changed.error_message(), "registered with 100 samples in this run; it may not claim 200 now");
  ASSERT_TRUE(r.Register(0, 100, &second).ok());
  EXPECT_NE(first, second) << "a registration is a new session";
  EXPECT_EQ(r.registry.Touch(0, first), pb::UNKNOWN_SESSION);
  EXPECT_EQ(r.registry.Touch(0, second), pb::WAIT);
}

TEST(ClientRegistryTest, AClientIsThereWhileHeardFromOrWhileItsRequestWaits) {
  Registry r(Options(2));
  ASSERT_TRUE(r.Register(1, 100).ok());
  EXPECT_FALSE(r.registry.Alive(0, r.At(0))) << "never registered";
  EXPECT_TRUE(r.registry.Alive(1, r.At(9.9)));
  EXPECT_FALSE(r.registry.Alive(1, r.At(10.1)));
  r.registry.SetWaiting(1, true);
  EXPECT_TRUE(r.registry.Alive(1, r.At(60)));
  r.registry.SetWaiting(1, false);
  EXPECT_FALSE(r.registry.Alive(1, r.At(60)));
  ASSERT_EQ(r.registry.Available(r.At(1)).size(), 1u);
  EXPECT_EQ(r.registry.Available(r.At(1))[0].num_samples, 100);
}

TEST(ClientRegistryTest, TheServerHoldsAtMostMaxClientsAndTakesOneWhenAnotherLeaves) {
  GrpcServerOptions o = Options(3);
  o.max_clients = 1;
  Registry r(o);
  ASSERT_TRUE(r.Register(0, 100).ok());
  const grpc::Status full = r.Register(1, 100);
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(full.error_message().find("(deploy.max_clients)"), std::string::npos) << full.error_message();
  std::string session;
  EXPECT_TRUE(r.registry.Register(1, Registration(100), r.At(11), &session).ok()) << "client 0 went silent";
}

TEST(ClientRegistryTest, ARelayServesOnlyClientsNobodyElseServes) {
  Registry r(Options(3));
  ASSERT_TRUE(r.Register(0, 100).ok());
  pb::RelaySyncReply first;
  r.registry.SyncRelay(7, RelaySync({0, 1}), r.t0, &first);
  EXPECT_TRUE(IsHex(first.session(), 32));
  ASSERT_EQ(first.refused_ids_size(), 1);
  EXPECT_EQ(first.refused_ids(0), 0);
  EXPECT_EQ(first.refused_reasons(0), "registered with the server directly");
  EXPECT_EQ(r.registry.RelayOf(1), 7);
  EXPECT_TRUE(r.registry.Alive(1, r.At(1)));
  pb::RelaySyncReply other;
  r.registry.SyncRelay(8, RelaySync({1}), r.t0, &other);
  ASSERT_EQ(other.refused_ids_size(), 1);
  EXPECT_EQ(other.refused_reasons(0), "served by relay 7");
  // A relay that goes silent takes its clients with it.
  EXPECT_FALSE(r.registry.Alive(1, r.At(11)));
  pb::RelaySyncRequest stale = RelaySync({1});
  stale.set_session("0123456789abcdef0123456789abcdef");
  pb::RelaySyncReply unknown;
  r.registry.SyncRelay(7, stale, r.t0, &unknown);
  EXPECT_EQ(unknown.status(), pb::UNKNOWN_SESSION);
}

TEST(ClientRegistryTest, ARelayedClientMayNotChangeItsClaimEither) {
  Registry r(Options(2));
  ASSERT_TRUE(r.Register(0, 100).ok());
  pb::RelaySyncReply reply;
  r.registry.SyncRelay(0, RelaySync({0}, 300), r.At(11), &reply);
  ASSERT_EQ(reply.refused_ids_size(), 1);
  EXPECT_EQ(reply.refused_reasons(0), "registered with 100 samples in this run; it may not claim 300 now");
}

TEST(ClientRegistryTest, EveryClientThereHasHeardTheRunIsDone) {
  Registry r(Options(2));
  std::string session;
  ASSERT_TRUE(r.Register(0, 100, &session).ok());
  ASSERT_TRUE(r.Register(1, 100).ok());
  r.state.done = true;
  EXPECT_EQ(r.registry.Touch(0, session), pb::DONE);
  EXPECT_FALSE(r.registry.AllToldDone(Clock::now())) << "client 1 has not heard it";
  r.registry.ToldDone(1);
  EXPECT_TRUE(r.registry.AllToldDone(Clock::now()));
}

TEST(ClientRegistryTest, ClaimsSurviveARestartAndBadOnesAreRefused) {
  Registry before(Options(3));
  ASSERT_TRUE(before.Register(2, 250).ok());
  nlohmann::json claims = nlohmann::json::object();
  before.registry.SaveClaims(&claims);
  EXPECT_EQ(claims.dump(), R"({"2":250})");
  Registry after(Options(3));
  for (const auto& [key, value] : claims.items()) after.registry.LoadClaim(key, value);
  EXPECT_EQ(after.Register(2, 251).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THROW(after.registry.LoadClaim("3", 10), Error) << "not a client of this run";
  EXPECT_THROW(after.registry.LoadClaim("x", 10), Error);
  EXPECT_THROW(after.registry.LoadClaim("1", 0), Error);
  EXPECT_THROW(after.registry.LoadClaim("1", 5001), Error) << "over max_samples";
}

TEST(ClientRegistryTest, ARegistrationIsCheckedBeforeAnythingOfItIsKept) {
  GrpcServerOptions o = Options(2);
  o.model.name = "lenet5";
  Registry r(o);
  pb::RegisterRequest bad = Registration(100);
  bad.set_num_samples(-1);
  EXPECT_EQ(r.registry.CheckRegistration(0, bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  pb::RegisterRequest hash = Registration(100);
  hash.set_model_sha256("not a hash");
  EXPECT_EQ(r.registry.CheckRegistration(0, hash).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  hash.set_model_sha256(std::string(64, 'a'));
  const grpc::Status module = r.registry.CheckRegistration(0, hash);
  EXPECT_EQ(module.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(module.error_message().find("trains the built-in model lenet5"), std::string::npos);
  pb::RegisterRequest key = Registration(100);
  key.set_secagg_verify_key("short");
  EXPECT_EQ(r.registry.CheckRegistration(0, key).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(r.registry.CheckRegistration(0, Registration(100)).ok());
}

}  // namespace
}  // namespace fedprof::deploy
