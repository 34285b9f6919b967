#ifndef FEDPROF_DEPLOY_CLIENT_CONNECTION_H_
#define FEDPROF_DEPLOY_CLIENT_CONNECTION_H_

// A deployment client's connection to its server (or relay) and its
// registration there. For the deployment's own .cc files and tests.

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "federation.grpc.pb.h"
#include "fedprof/deploy/client/options.h"
#include "fedprof/deploy/shared/backoff.h"

namespace fedprof {

// The client's channel and what its registration gave it: the session the
// server knows it by, the heartbeat interval and the chunk size the server
// asks for; whether the server said the run is done; and when to try again
// after a failed call. Thread-safe.
class ServerConnection {
 public:
  template <typename Reply>
  using Answered = std::function<void(const grpc::Status&, const Reply&)>;

  explicit ServerConnection(const GrpcClientOptions& options);

  federation::v1::Federation::Stub* stub() { return stub_.get(); }

  // The registration this client sends: its claims, and `verify_key`, its
  // secure aggregation key ("" when it has none).
  federation::v1::RegisterRequest RegisterRequest(const std::string& verify_key) const;
  // Takes on what the server's registration reply sets.
  void Registered(const federation::v1::RegisterReply& reply);
  // Its session ("": not registered), the heartbeat interval and the size of
  // a result's model chunks.
  std::string session() const;
  double heartbeat_s() const;
  size_t chunk_bytes() const;
  // The server no longer knows the session: the next call registers again.
  void Forget();

  // What a task request's or a heartbeat's answer says of the run: it is
  // done, or the server forgot the session.
  void Heard(federation::v1::Status status);
  bool done() const { return done_.load(); }

  // A task request waits at the server: it stands in for the heartbeats.
  void set_waiting(bool waiting) { waiting_.store(waiting); }
  // The heartbeat due, if any: none before registration or while a task
  // request waits at the server (whose answer says what a heartbeat's
  // would), so that an idle fleet sends one request per pull_wait_s.
  std::optional<federation::v1::HeartbeatRequest> Heartbeat() const;

  // Whether the channel is up; connecting starts if it is not.
  bool Connected();
  // The server answered (a call succeeded).
  void Contact() { backoff_.Contact(); }
  // A call failed: when to try again, or to give up (the server silent for
  // give_up_s, or withdrawn). Reconnecting starts now.
  Backoff::Step Failed();
  // Whether the options' `withdrawn` says so.
  bool Withdrawn() const { return options_.withdrawn && options_.withdrawn(); }

  // The unary calls, each answered on gRPC's thread.
  void Register(federation::v1::RegisterRequest request, Answered<federation::v1::RegisterReply> answered);
  void Beat(federation::v1::HeartbeatRequest request, Answered<federation::v1::HeartbeatReply> answered);
  // Secure aggregation's reply may be held `wait_s` at the server.
  void SecAgg(federation::v1::SecAggRequest request, double wait_s,
              Answered<federation::v1::SecAggReply> answered);

 private:
  const GrpcClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<federation::v1::Federation::Stub> stub_;
  Backoff backoff_;
  std::atomic<bool> done_{false};     // the server said the run is done
  std::atomic<bool> waiting_{false};  // a task request waits at the server

  mutable std::mutex mutex_;
  std::string session_;  // empty: not registered
  double heartbeat_s_ = 2;
  size_t chunk_bytes_ = size_t{1} << 20;
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_CONNECTION_H_
