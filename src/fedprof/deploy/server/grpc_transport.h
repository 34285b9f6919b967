#ifndef FEDPROF_DEPLOY_SERVER_GRPC_TRANSPORT_H_
#define FEDPROF_DEPLOY_SERVER_GRPC_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fedprof/deploy/server/options.h"
#include "fedprof/transport/secure_aggregation.h"
#include "fedprof/transport/transport.h"

namespace fedprof {

class RunObserver;

// The server side of the deployment protocol (proto/federation.proto) over
// gRPC: clients register, send heartbeats, pull tasks and push results.
// A certificate says who a client is, not that it is honest: every request
// is held to its call's size bound, its strings and numbers are checked, and
// the client's certificate must name the id it claims. A result must answer
// the task open for its client, claim the sample count the client
// registered (its aggregation weight), and bring the announced model in
// whole float32 chunks of at most the chunk size; one that fails is refused
// and handed on as a failed result, one that arrives after its round closed
// is dropped. A push is answered with the round loop's own verdict (the
// ResultSink's), so `accepted` means the result counts. Every refusal is
// logged by caller through a RefusalLog (repeats counted).
//
// Clients may also come through relays (proto/federation.proto, `fedprof
// relay`), whose certificates name them relay-<r>: a relay's clients get
// their tasks in one batch per relay (the model once), and their results
// come without models, whose accepted ones arrive as the relay's exact
// partial sum (ResultSink::Sum). A relay that goes silent takes its clients
// with it, as a silent client takes itself.
//
// Under secure aggregation a training task carries its round's session
// setup, a client's result comes without its model, and the accepted
// results' models reach the round loop only as the session's exact sum
// (deploy/server/secagg_sessions.h): no code of the server decodes a client's model
// then. Relays are refused. Thread-safe.
//
// Its parts, each in its own file of deploy/server/: admission.h (what every call
// passes first), client_registry.h (who the clients and relays are, and
// whether they are there), task_streams.h (parked requests and the streams
// that send models), round.h (the current round: its tasks, batches and what
// arrived for judging), result_intake.h (PushResult), relay_hub.h (the
// relays' calls) and secagg_sessions.h (a round's secure aggregation
// session); server.cc binds the port and hands each call to its part.
class GrpcTransport : public Transport {
 public:
  // Starts serving. Throws fedprof::Error when the address cannot be bound
  // or the TLS files cannot be read. `observer` (null: none) hears of the
  // connected clients, the bytes moved and the requests refused.
  explicit GrpcTransport(const GrpcServerOptions& options, RunObserver* observer = nullptr);
  ~GrpcTransport() override;

  // HOST:PORT actually bound.
  std::string address() const;

  int num_clients() const override;
  // Registered clients heard from within the heartbeat timeout; the expected
  // round time is the last one measured (unknown before the first).
  std::vector<ClientInfo> Available() override;
  std::vector<ClientInfo> AvailableOrWait(const std::function<bool(int)>& wanted) override;
  // Opens a task for each client and waits until every one has a result,
  // has left (no heartbeat) or the round deadline passes.
  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) override;
  // FedBuff's tasks, each with its own deadline (deploy.round_timeout_s
  // after it is sent); Fit may run between them (profile reports).
  bool StreamsTasks() const override { return true; }
  void LaunchTasks(const std::vector<ClientInstructions>& tasks) override;
  bool AwaitResult(const ResultSink& sink) override;

  // How long a Fit call waits for results from now on (at first
  // options.round_timeout_s): a relay's follows each batch's deadline.
  void SetRoundTimeout(double seconds);

  // Says where it listens and waits for min_clients (WaitForClients).
  void Open() override;
  // Tells the clients the run is over and gives them two heartbeats and a
  // second to hear it (Finish).
  void Close() override;

  // Waits until `count` clients are available; throws fedprof::Error after
  // `timeout_s` naming how many came.
  void WaitForClients(int count, double timeout_s);

  // Tells clients the run has finished (they exit) and waits up to
  // `grace_s` for every available client to have heard it.
  void Finish(double grace_s);

  // What each client registered with, by id: its sample count and device,
  // and its mean round time as measured over the results it delivered.
  std::vector<ClientDescription> Describe() override;

  // The sample counts clients claimed, for checkpoints: a client that
  // registers again (after a restart of either side) may not change its
  // claim. LoadState throws fedprof::Error on malformed text.
  std::string SaveState() override;
  void LoadState(const std::string& text) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_SERVER_GRPC_TRANSPORT_H_
