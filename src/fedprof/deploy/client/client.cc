#include "fedprof/deploy/client/client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "federation.grpc.pb.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/client/connection.h"
#include "fedprof/deploy/client/result.h"
#include "fedprof/deploy/client/secagg.h"
#include "fedprof/deploy/client/swarm.h"
#include "fedprof/deploy/client/task.h"
#include "fedprof/deploy/shared/backoff.h"
#include "fedprof/deploy/shared/calls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {

namespace pb = federation::v1;
using Clock = std::chrono::steady_clock;

namespace {

// One client. Its main flow is one step at a time (register, pull a task,
// compute it, push the result, take part in its secure aggregation session,
// or wait out a back-off), each step started by the end of the one before,
// on whatever thread that ended on; heartbeats run beside it. Every callback
// holds the client (shared_ptr), and `pending_` counts what is in flight, so
// that the client is finished (ClientSwarm::Finished) only once it has ended
// and nothing of it is left.
class DeploymentClient : public std::enable_shared_from_this<DeploymentClient> {
 public:
  DeploymentClient(const GrpcClientOptions& options, GrpcClientWork work, ClientSwarm* swarm)
      : options_(options),
        work_(std::move(work)),
        swarm_(swarm),
        connection_(options),
        identity_(LoadSecAggIdentity(options.tls_dir, options.id)),
        ledger_(options.ledger, options.ledger_delta, options.budget, options.reports) {
    checks_.client_id = options.id;
    checks_.policy = options.secagg;
    checks_.keys_missing = identity_.missing;
    if (!options.tls_dir.empty()) {
      checks_.roster = [swarm, tls_dir = options.tls_dir] { return swarm->RosterOf(tls_dir); };
    }
  }

  void Start() {
    Register();
    ScheduleHeartbeat();
  }

  // The error that ended the client ("" = the run is done); once finished.
  std::string error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }

 private:
  // --- The main flow ----------------------------------------------------

  void Register() {
    if (connection_.done()) {
      End("");
      return;
    }
    Begin();
    connection_.Register(
        connection_.RegisterRequest(identity_.verify_key),
        [self = shared_from_this()](const grpc::Status& status, const pb::RegisterReply& reply) {
          self->OnRegistered(status, reply);
          self->Done();
        });
  }

  void OnRegistered(const grpc::Status& status, const pb::RegisterReply& reply) {
    if (!status.ok()) {
      if (Permanent(status)) {
        End("server " + options_.server + " refused: " + Said(status) +
            (identity_.missing.empty() ? "" : " (" + identity_.missing + ")"));
      } else {
        BackOff("cannot register with " + options_.server + ": " + Said(status), &DeploymentClient::Register);
      }
      return;
    }
    const std::string mismatch = ProtocolMismatch(reply.protocol_version(), "the server");
    if (!mismatch.empty()) {
      End(mismatch);
      return;
    }
    connection_.Contact();
    OnWorker([this, reply] { Prepared(reply); });
  }

  // On a worker: the client builds the server's model, then is registered.
  void Prepared(const pb::RegisterReply& reply) {
    try {
      if (work_.prepare) work_.prepare({FromWire(reply.model()), reply.num_params(), FromWire(reply.features()), reply.run_id()});
    } catch (const std::exception& e) {
      End(e.what());
      return;
    }
    run_id_ = reply.run_id();
    connection_.Registered(reply);
    Pull();
  }

  // Asks for a task.
  void Pull() {
    if (connection_.done()) {
      End("");
      return;
    }
    pb::PullRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_client_id(options_.id);
    // Read once: a heartbeat may forget the session meanwhile, and a request
    // without one is refused for good.
    const std::string current = connection_.session();
    if (current.empty()) {
      Register();
      return;
    }
    request.set_session(current);
    // A long wait only over a connection that is up: on one still being
    // made (after losing the server) the request would wait out its whole
    // deadline, and with it the heartbeats, should the connection stall.
    const bool connected = connection_.Connected();
    const double wait_s = connected ? options_.pull_wait_s : 0;
    request.set_wait_s(wait_s);
    // A request waiting at the server says this client is there.
    if (connected) connection_.set_waiting(true);
    Begin();
    PullTask(
        connection_.stub(), request, wait_s + (connected ? 60 : 10), checks_,
        // Answered (or broken): no longer waiting.
        [connection = &connection_] { connection->set_waiting(false); },
        [self = shared_from_this()](const grpc::Status& status, ReceivedTask task) {
          self->OnPulled(status, std::move(task));
          self->Done();
        });
  }

  void OnPulled(const grpc::Status& finished, ReceivedTask task) {
    connection_.set_waiting(false);
    if (!task.malformed.empty()) {
      End("task from " + options_.server + ": " + task.malformed);
      return;
    }
    if (!finished.ok()) {
      if (Permanent(finished)) {
        End("server " + options_.server + " refused: " + Said(finished));
      } else {
        BackOff("lost " + options_.server + ": " + Said(finished), &DeploymentClient::Pull);
      }
      return;
    }
    connection_.Contact();
    connection_.Heard(task.status);
    if (task.status != pb::TASK || !task.got) {
      Pull();
      return;
    }
    task.run_id = run_id_;
    OnWorker([this, task = std::move(task)] { Compute(task); });
  }

  // On a worker: the task, then its result on its way (under secure
  // aggregation without its model, which goes masked into the session).
  void Compute(const ReceivedTask& task) {
    const FitInstructions& ins = task.instructions;
    const auto start = Clock::now();
    FitResult result;
    // A task that would break this client's own privacy settings is
    // answered with why, and nothing is computed for it.
    std::string refused;
    try {
      refused = RefusedReceivedTask(task, options_.secagg, &ledger_);
    } catch (const Error& e) {  // its ledger cannot be read or written
      End(e.what());
      return;
    }
    if (!refused.empty()) {
      LogWarning("client " + std::to_string(options_.id) + ": round " + std::to_string(ins.round) + ": " +
                 refused);
      result.error = refused;
      result.num_samples = options_.num_samples;  // the weight it registered, as every result states
    } else {
      // A process of many clients says one line a round for them all; only
      // each one's privacy ledger under distributed DP is worth a line apiece.
      if (task.secagg && ins.train.epochs > 0 && (!swarm_->many() || ins.ddg)) {
        LogProgress("client " + std::to_string(options_.id) + ": round " + std::to_string(ins.round) +
                    ": contributes to a " + SessionAssumptions(task, options_.secagg) +
                    "; its ledger: " + ledger_.Describe());
      }
      try {
        result = work_.fit(ins);
      } catch (const std::exception& e) {
        End(e.what());
        return;
      }
    }
    const double compute_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (options_.progress && swarm_->many()) {
      swarm_->Computed(ins.round, ins.train.epochs > 0, result.ok, compute_s);
    } else if (options_.progress) {
      LogProgress("client " + std::to_string(options_.id) + ": round " + std::to_string(ins.round) +
                  (ins.train.epochs > 0 ? " trained" : " reported") + " in " + std::to_string(compute_s) +
                  " s" + (result.ok ? "" : " (failed: " + result.error + ")"));
    }
    result.client_id = options_.id;
    // Under distributed DP no result carries a figure of the client's own,
    // a report or a failure included.
    if (options_.secagg.distributed_dp) KeepOnlyWhatTheTaskAsks(ins, true, &result);
    if (task.secagg && result.ok && !result.params.empty()) {
      secagg_ = SecAggParticipation::Join(task, options_.id, identity_.signing_key, connection_.chunk_bytes(),
                                          &result, options_.secagg);
    }
    result_ = std::move(result);
    task_id_ = task.task_id;
    compute_s_ = ClockSent(options_.secagg, compute_s, &result_);
    Push();
  }

  // The task stays open on the server until its round ends: a push that
  // cannot get through is tried again until then.
  void Push() {
    if (connection_.done()) {
      End("");
      return;
    }
    const std::string current = connection_.session();  // read once, as in Pull
    if (current.empty()) {                              // the server forgot us: the task is lost
      Register();
      return;
    }
    Begin();
    PushResult(connection_.stub(),
               ResultChunks(result_, current, task_id_, compute_s_, connection_.chunk_bytes()),
               [self = shared_from_this()](const grpc::Status& status, const pb::PushReply& reply) {
                 self->OnPushed(status, reply);
                 self->Done();
               });
  }

  void OnPushed(const grpc::Status& status, const pb::PushReply& reply) {
    if (!status.ok()) {
      if (Permanent(status)) {
        End("server " + options_.server + " refused: " + Said(status));
      } else {
        BackOff("cannot deliver a result to " + options_.server + ": " + Said(status),
                &DeploymentClient::Push);
      }
      return;
    }
    connection_.Contact();
    if (!reply.accepted()) {
      LogWarning("client " + std::to_string(options_.id) +
                 ": result not accepted: " + Printable(reply.reason(), 400));
      if (reply.reason().rfind("unknown session", 0) == 0) connection_.Forget();
    }
    result_ = FitResult();
    if (secagg_ && reply.accepted()) {
      OnWorker([this] { SecAggStep(pb::SecAggReply()); });
      return;
    }
    LeaveSecAgg("");
  }

  // --- Secure aggregation of the pushed result's model ------------------

  // On a worker: the session's next message from what the server sent (an
  // empty reply: the start).
  void SecAggStep(const pb::SecAggReply& reply) {
    SecAggParticipation::Step next;
    try {
      next = secagg_->Answer(reply);
    } catch (const Error& e) {
      // An honest client refuses a server that breaks the protocol.
      LeaveSecAgg(std::string("refused the server's secure aggregation: ") + e.what());
      return;
    }
    if (next.delivered && options_.progress && !swarm_->many()) {
      LogProgress("client " + std::to_string(options_.id) + ": round " + std::to_string(secagg_->round()) +
                  " masked model delivered");
    }
    SendSecAgg(std::move(next.request));
  }

  void SendSecAgg(pb::SecAggRequest request) {
    const std::string current = connection_.session();
    if (current.empty()) {  // the server forgot us: the session is lost
      LeaveSecAgg("");
      return;
    }
    request.set_protocol_version(kProtocolVersion);
    request.set_client_id(options_.id);
    request.set_session(current);
    request.set_task_id(task_id_);
    Begin();
    connection_.SecAgg(std::move(request), secagg_->wait_s(),
                       [self = shared_from_this()](const grpc::Status& status, const pb::SecAggReply& reply) {
                         self->OnSecAgg(status, reply);
                         self->Done();
                       });
  }

  void OnSecAgg(const grpc::Status& status, const pb::SecAggReply& reply) {
    if (!status.ok()) {
      if (Permanent(status)) {
        End("server " + options_.server + " refused: " + Said(status));
      } else {
        LeaveSecAgg("lost the server during secure aggregation: " + Said(status));
      }
      return;
    }
    connection_.Contact();
    const std::string mismatch = ProtocolMismatch(reply.protocol_version(), "the server");
    if (!mismatch.empty()) {
      End(mismatch);
      return;
    }
    if (reply.more()) {
      OnWorker([this, reply] { SecAggStep(reply); });
      return;
    }
    if (reply.reason().rfind("unknown session", 0) == 0) connection_.Forget();
    const int64_t round = secagg_->round();
    LeaveSecAgg(reply.reason().empty() ? "" : "secure aggregation ended: " + Printable(reply.reason(), 400));
    if (reply.reason().empty() && options_.progress && !swarm_->many()) {
      LogProgress("client " + std::to_string(options_.id) + ": round " + std::to_string(round) +
                  " model in the secure sum");
    }
  }

  // The session is over for this client (`why`: how, if not in the sum);
  // on to the next task.
  void LeaveSecAgg(const std::string& why) {
    if (!why.empty()) LogWarning("client " + std::to_string(options_.id) + ": " + why);
    secagg_.reset();
    Pull();
  }

  // Waits before `then`, longer after each failure, and ends the client once
  // the server has been silent for give_up_s or the run is withdrawn.
  void BackOff(const std::string& why, void (DeploymentClient::*then)()) {
    const Backoff::Step step = connection_.Failed();
    if (step.give_up) {
      End(connection_.Withdrawn() ? why + "; the run is no longer offered here, giving up"
                                  : GivingUp(why, step.silent_s));
      return;
    }
    if (step.first) LogWarning(why + "; retrying");
    Begin();
    swarm_->timers().After(step.wait_s, [self = shared_from_this(), then] {
      (self.get()->*then)();
      self->Done();
    });
  }

  void End(const std::string& error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ended_) return;
      ended_ = true;
      error_ = error;
    }
    // One of many clients says so when it ends, not when all have.
    if (!error.empty() && swarm_->many()) {
      LogWarning("client " + std::to_string(options_.id) + ": " + Printable(error, 400));
    }
    MaybeFinished();
  }

  // --- Heartbeats, beside the main flow ----------------------------------

  // Heartbeats wait on the timers without counting as in flight: those due
  // after the client has ended are dropped.
  void ScheduleHeartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ended_) return;
    }
    swarm_->timers().After(connection_.heartbeat_s(), [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->Beat();
    });
  }

  void Beat() {
    std::optional<pb::HeartbeatRequest> request;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ended_) return;
      request = connection_.Heartbeat();
      if (request) ++pending_;
    }
    if (!request) {
      ScheduleHeartbeat();
      return;
    }
    connection_.Beat(std::move(*request), [self = shared_from_this()](const grpc::Status& status,
                                                                      const pb::HeartbeatReply& reply) {
      if (status.ok()) {
        self->connection_.Contact();
        self->connection_.Heard(reply.status());
      }
      self->ScheduleHeartbeat();
      self->Done();
    });
  }

  // --- Bookkeeping -------------------------------------------------------

  // Runs `step` on a worker, counted as in flight.
  void OnWorker(std::function<void()> step) {
    Begin();
    swarm_->work().Post([self = shared_from_this(), step = std::move(step)] {
      step();
      self->Done();
    });
  }

  void Begin() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pending_;
  }
  void Done() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --pending_;
    }
    MaybeFinished();
  }
  // Tells the swarm, once, that this client has ended and nothing of it is
  // in flight.
  void MaybeFinished() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ended_ || pending_ > 0 || finished_) return;
      finished_ = true;
    }
    swarm_->Finished();
  }

  const GrpcClientOptions options_;
  const GrpcClientWork work_;
  ClientSwarm* const swarm_;
  ServerConnection connection_;
  const SecAggIdentity identity_;
  TaskChecks checks_;             // what each task's setup is checked against
  ClientLedger ledger_;           // what this client contributed to secure sums

  // The main flow's own: the result being delivered, and the secure
  // aggregation session its model goes to.
  FitResult result_;
  int64_t task_id_ = 0;
  double compute_s_ = 0;
  std::unique_ptr<SecAggParticipation> secagg_;
  std::string run_id_;  // the server's, from the last registration

  std::mutex mutex_;
  int pending_ = 0;  // calls, computations and back-offs in flight
  bool ended_ = false;
  bool finished_ = false;
  std::string error_;
};

}  // namespace

std::vector<std::string> RunGrpcClients(const std::vector<GrpcClientOptions>& clients,
                                        const std::vector<GrpcClientWork>& work, int workers) {
  if (clients.size() != work.size()) throw Error("RunGrpcClients: one work per client");
  if (clients.empty()) return {};
  for (const GrpcClientOptions& o : clients) {
    if (o.id < 0) throw Error("--id: a client id >= 0 is required");
  }
  const auto [lowest, highest] = std::minmax_element(
      clients.begin(), clients.end(), [](const GrpcClientOptions& a, const GrpcClientOptions& b) { return a.id < b.id; });
  ClientSwarm swarm(workers, static_cast<int>(clients.size()),
                    "clients " + std::to_string(lowest->id) + "-" + std::to_string(highest->id));
  std::vector<std::shared_ptr<DeploymentClient>> running;
  running.reserve(clients.size());
  for (size_t i = 0; i < clients.size(); ++i) {
    running.push_back(std::make_shared<DeploymentClient>(clients[i], work[i], &swarm));
  }
  for (const auto& c : running) c->Start();
  swarm.AwaitAll();
  std::vector<std::string> errors;
  for (const auto& c : running) errors.push_back(c->error());
  // What gRPC still holds of a client (a callback being destroyed) lets go
  // of it within moments; the client's channel goes with it.
  for (const auto& c : running) {
    for (int i = 0; i < 1000 && c.use_count() > 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return errors;
}

void RunGrpcClient(const GrpcClientOptions& options, const std::function<void(const ServerSetup& setup)>& prepare,
                   const std::function<FitResult(const FitInstructions&)>& fit) {
  const std::vector<std::string> errors = RunGrpcClients({options}, {{prepare, fit}}, 1);
  if (!errors.front().empty()) throw Error(errors.front());
}

}  // namespace fedprof
