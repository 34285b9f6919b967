#include "fedprof/deploy/client/connection.h"

#include <gtest/gtest.h>

#include <limits>

#include "fedprof/protocol/wire.h"

namespace fedprof {
namespace {

namespace pb = federation::v1;

// A connection to a port nobody listens on: nothing here makes a call.
GrpcClientOptions UnreachableClient() {
  GrpcClientOptions o;
  o.server = "127.0.0.1:1";
  o.id = 4;
  o.num_samples = 120;
  o.speed_ghz = 1.5;
  o.bandwidth_mhz = 20;
  o.model_sha256 = std::string(64, 'a');
  return o;
}

pb::RegisterReply RegisterTerms(const std::string& session, double heartbeat_s, int64_t chunk_bytes) {
  pb::RegisterReply reply;
  reply.set_protocol_version(kProtocolVersion);
  reply.set_session(session);
  reply.set_heartbeat_s(heartbeat_s);
  reply.set_chunk_bytes(chunk_bytes);
  return reply;
}

TEST(ClientConnectionTest, TheRegistrationStatesTheClientsClaimsAndKey) {
  ServerConnection connection(UnreachableClient());
  const pb::RegisterRequest request = connection.RegisterRequest("KEY");
  EXPECT_EQ(request.protocol_version(), kProtocolVersion);
  EXPECT_EQ(request.client_id(), 4);
  EXPECT_EQ(request.num_samples(), 120);
  EXPECT_EQ(request.speed_ghz(), 1.5);
  EXPECT_EQ(request.bandwidth_mhz(), 20);
  EXPECT_EQ(request.model_sha256(), std::string(64, 'a'));
  EXPECT_EQ(request.secagg_verify_key(), "KEY");
}

TEST(ClientConnectionTest, TheServersTermsAreTakenWithinBounds) {
  ServerConnection connection(UnreachableClient());
  EXPECT_EQ(connection.session(), "");
  EXPECT_EQ(connection.heartbeat_s(), 2);
  EXPECT_EQ(connection.chunk_bytes(), size_t{1} << 20);
  connection.Registered(RegisterTerms("s1", 0.001, 10));
  EXPECT_EQ(connection.session(), "s1");
  EXPECT_EQ(connection.heartbeat_s(), 0.05);
  EXPECT_EQ(connection.chunk_bytes(), 1024u);
  connection.Registered(RegisterTerms("s2", 1e9, int64_t{1} << 40));
  EXPECT_EQ(connection.heartbeat_s(), 3600);
  EXPECT_EQ(connection.chunk_bytes(), size_t{3} << 20);
  // An older server states no chunk size: its default, 1 MiB.
  connection.Registered(RegisterTerms("s3", 1, 0));
  EXPECT_EQ(connection.chunk_bytes(), size_t{1} << 20);
}

TEST(ClientConnectionTest, AHeartbeatOnlyWhenRegisteredAndNoTaskRequestWaits) {
  ServerConnection connection(UnreachableClient());
  EXPECT_FALSE(connection.Heartbeat());
  connection.Registered(RegisterTerms("s1", 1, 0));
  const auto beat = connection.Heartbeat();
  ASSERT_TRUE(beat);
  EXPECT_EQ(beat->session(), "s1");
  EXPECT_EQ(beat->client_id(), 4);
  EXPECT_EQ(beat->protocol_version(), kProtocolVersion);
  connection.set_waiting(true);
  EXPECT_FALSE(connection.Heartbeat());
  connection.set_waiting(false);
  EXPECT_TRUE(connection.Heartbeat());
}

TEST(ClientConnectionTest, TheServerEndsTheRunOrForgetsTheSession) {
  ServerConnection connection(UnreachableClient());
  connection.Registered(RegisterTerms("s1", 1, 0));
  connection.Heard(pb::WAIT);
  connection.Heard(pb::TASK);
  EXPECT_EQ(connection.session(), "s1");
  EXPECT_FALSE(connection.done());
  connection.Heard(pb::UNKNOWN_SESSION);
  EXPECT_EQ(connection.session(), "");
  EXPECT_FALSE(connection.done());
  connection.Heard(pb::DONE);
  EXPECT_TRUE(connection.done());
}

TEST(ClientConnectionTest, FailedCallsBackOffAtTheServersCadenceThenGiveUp) {
  ServerConnection connection(UnreachableClient());
  connection.Registered(RegisterTerms("s1", 0.05, 0));  // the longest wait: 1 s
  Backoff::Step step;
  for (int i = 0; i < 10; ++i) step = connection.Failed();
  EXPECT_FALSE(step.give_up);
  EXPECT_LE(step.wait_s, 1);
  connection.Contact();
  EXPECT_TRUE(connection.Failed().first);

  GrpcClientOptions impatient = UnreachableClient();
  impatient.give_up_s = -1;
  EXPECT_TRUE(ServerConnection(impatient).Failed().give_up);

  // Never by time; at the first failure once withdrawn (a node's run no
  // longer offered).
  GrpcClientOptions patient = UnreachableClient();
  patient.give_up_s = std::numeric_limits<double>::infinity();
  bool offered = true;
  patient.withdrawn = [&offered] { return !offered; };
  ServerConnection node_client(patient);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(node_client.Failed().give_up);
  EXPECT_FALSE(node_client.Withdrawn());
  offered = false;
  EXPECT_TRUE(node_client.Withdrawn());
  EXPECT_TRUE(node_client.Failed().give_up);
}

}  // namespace
}  // namespace fedprof
