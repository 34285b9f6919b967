#include "fedprof/deploy/client/connection.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "fedprof/deploy/shared/calls.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {

namespace pb = federation::v1;

namespace {

// The longest a client's channel waits between two connection attempts.
constexpr int kMaxReconnectBackoffMs = 2000;

template <typename Request, typename Reply>
using ClientAsyncMethod = void (pb::Federation::Stub::async::*)(grpc::ClientContext*, const Request*, Reply*,
                                                                std::function<void(grpc::Status)>);

// Starts a unary call of `stub`'s `method` on gRPC's callback API, with a
// deadline `deadline_s` from now.
template <typename Request, typename Reply>
void StartClientCall(pb::Federation::Stub* stub, ClientAsyncMethod<Request, Reply> method, Request request,
                     double deadline_s, ServerConnection::Answered<Reply> answered) {
  struct Call {
    grpc::ClientContext context;
    Request request;
    Reply reply;
  };
  auto call = std::make_shared<Call>();
  call->request = std::move(request);
  call->context.set_deadline(In(deadline_s));
  (stub->async()->*method)(&call->context, &call->request, &call->reply,
                           [call, answered = std::move(answered)](grpc::Status status) mutable {
                             answered(status, call->reply);
                             // The context goes while `answered` still holds the client: once
                             // the client is let go, its channel may go too, and a context
                             // that outlived its channel aborts inside gRPC.
                             call.reset();
                           });
}

}  // namespace

ServerConnection::ServerConnection(const GrpcClientOptions& options)
    : options_(options), backoff_(options.give_up_s) {
  grpc::ChannelArguments args = CallerChannelArguments();
  // gRPC's own reconnection back-off grows to 120 s while the server (or
  // relay) is down; capped, a client is back within seconds of its return.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
  ExpectPeer(options.tls_dir, options.relay >= 0 ? "relay-" + std::to_string(options.relay) : "server",
             &args);
  channel_ = grpc::CreateCustomChannel(options.server, ClientCredentials(options.tls_dir, options.id), args);
  stub_ = pb::Federation::NewStub(channel_);
}

pb::RegisterRequest ServerConnection::RegisterRequest(const std::string& verify_key) const {
  pb::RegisterRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_client_id(options_.id);
  request.set_num_samples(options_.num_samples);
  request.set_speed_ghz(options_.speed_ghz);
  request.set_bandwidth_mhz(options_.bandwidth_mhz);
  request.set_model_sha256(options_.model_sha256);
  request.set_secagg_verify_key(verify_key);
  return request;
}

void ServerConnection::Registered(const pb::RegisterReply& reply) {
  std::lock_guard<std::mutex> lock(mutex_);
  session_ = reply.session();
  heartbeat_s_ = std::clamp(reply.heartbeat_s(), 0.05, 3600.0);
  // An older server states no chunk size: 1 MiB, its default.
  chunk_bytes_ = reply.chunk_bytes() > 0
                     ? static_cast<size_t>(std::clamp<int64_t>(reply.chunk_bytes(), 1024, 3 << 20))
                     : size_t{1} << 20;
}

std::string ServerConnection::session() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return session_;
}

double ServerConnection::heartbeat_s() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return heartbeat_s_;
}

size_t ServerConnection::chunk_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return chunk_bytes_;
}

void ServerConnection::Forget() {
  std::lock_guard<std::mutex> lock(mutex_);
  session_.clear();
}

void ServerConnection::Heard(pb::Status status) {
  if (status == pb::DONE) done_ = true;
  if (status == pb::UNKNOWN_SESSION) Forget();
}

std::optional<pb::HeartbeatRequest> ServerConnection::Heartbeat() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (session_.empty() || waiting_.load()) return std::nullopt;
  pb::HeartbeatRequest request;
  request.set_protocol_version(kProtocolVersion);
  request.set_client_id(options_.id);
  request.set_session(session_);
  return request;
}

bool ServerConnection::Connected() {
  return channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
}

Backoff::Step ServerConnection::Failed() {
  Backoff::Step step = backoff_.Failed(heartbeat_s());
  if (!step.give_up && Withdrawn()) step.give_up = true;
  if (!step.give_up) channel_->GetState(/*try_to_connect=*/true);
  return step;
}

void ServerConnection::Register(pb::RegisterRequest request, Answered<pb::RegisterReply> answered) {
  StartClientCall(stub(), &pb::Federation::Stub::async::Register, std::move(request), 10,
                  std::move(answered));
}

void ServerConnection::Beat(pb::HeartbeatRequest request, Answered<pb::HeartbeatReply> answered) {
  StartClientCall(stub(), &pb::Federation::Stub::async::Heartbeat, std::move(request), 5,
                  std::move(answered));
}

void ServerConnection::SecAgg(pb::SecAggRequest request, double wait_s, Answered<pb::SecAggReply> answered) {
  // The server holds the answer until the session's round closes.
  StartClientCall(stub(), &pb::Federation::Stub::async::SecAgg, std::move(request), wait_s + 30,
                  std::move(answered));
}

}  // namespace fedprof
