#include "fedprof/deploy/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "federation.grpc.pb.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/secagg/client.h"
#include "fedprof/secagg/ledger.h"
#include "fedprof/deploy/calls.h"
#include "fedprof/deploy/secagg_sessions.h"
#include "fedprof/deploy/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {

namespace pb = federation::v1;
using Clock = std::chrono::steady_clock;

namespace {

Clock::time_point After(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Runs posted functions, in the order posted, on a fixed set of threads:
// where clients compute.
class Workers {
 public:
  explicit Workers(int threads) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(fn));
    }
    wake_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
};

// Calls each function at its time, from one thread: heartbeats and the ends
// of back-offs. The functions only start calls; they never block. Those
// still due when it is destroyed are dropped.
class Timers {
 public:
  Timers() : thread_([this] { Loop(); }) {}
  ~Timers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void At(Clock::time_point when, std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      due_.emplace(when, std::move(fn));
    }
    wake_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (due_.empty()) {
        wake_.wait(lock);
      } else if (due_.begin()->first <= Clock::now()) {
        std::function<void()> fn = std::move(due_.begin()->second);
        due_.erase(due_.begin());
        lock.unlock();
        fn();
        lock.lock();
      } else {
        wake_.wait_until(lock, due_.begin()->first);
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::multimap<Clock::time_point, std::function<void()>> due_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

// What the clients of one process share, and how the process learns that
// every client has ended with nothing of it left in flight.
struct Swarm {
  explicit Swarm(int workers, int clients) : many(clients > 1), work(workers), unfinished(clients) {}
  const bool many;
  Workers work;
  Timers timers;
  std::mutex mutex;
  std::condition_variable finished_cv;
  int unfinished;

  void Finished() {
    std::lock_guard<std::mutex> lock(mutex);
    if (--unfinished == 0) finished_cv.notify_all();
  }

  // Every client's secure aggregation key as issued (tls.h's SecAggRoster),
  // read once for all the clients of the process, when first needed.
  std::shared_ptr<const std::map<int64_t, std::string>> Roster(const std::string& tls_dir) {
    std::lock_guard<std::mutex> lock(mutex);
    auto& roster = rosters[tls_dir];
    if (!roster) roster = std::make_shared<const std::map<int64_t, std::string>>(SecAggRoster(tls_dir));
    return roster;
  }
  std::map<std::string, std::shared_ptr<const std::map<int64_t, std::string>>> rosters;
};

// The longest a client's channel waits between two connection attempts.
constexpr int kMaxReconnectBackoffMs = 2000;

// One client. Its main flow is one step at a time (register, pull a task,
// compute it, push the result, or wait out a back-off), each step started by
// the end of the one before, on whatever thread that ended on; heartbeats
// run beside it. Every callback holds the session (shared_ptr), and
// `pending_` counts what is in flight, so that the session is finished
// (Swarm::Finished) only once it has ended and nothing of it is left.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(const GrpcClientOptions& options, GrpcClientWork work, Swarm* swarm)
      : options_(options), work_(std::move(work)), swarm_(swarm), ledger_(options.secagg_ledger) {
    grpc::ChannelArguments args;
    const int limit = 8 << 20;  // the server's chunks and headers stay below it
    args.SetMaxReceiveMessageSize(limit);
    args.SetMaxSendMessageSize(limit);
    // gRPC's own reconnection back-off grows to 120 s while the server (or
    // relay) is down; capped, a client is back within seconds of its return.
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kMaxReconnectBackoffMs);
    channel_ = grpc::CreateCustomChannel(options.server, ClientCredentials(options.tls_dir, options.id),
                                         args);
    stub_ = pb::Federation::NewStub(channel_);
    last_contact_ = Clock::now();
    // The client's secure aggregation identity: under TLS the key issued
    // with its certificate, whose public half every client finds in
    // secagg-roster (so the server cannot substitute it); in plaintext
    // (loopback) a key of this process's own.
    if (options.tls_dir.empty()) {
      secagg::KeyPair signing = secagg::GenerateEd25519();
      signing_key_ = std::move(signing.secret);
      verify_key_ = std::move(signing.public_key);
    } else {
      try {
        SecAggKeyPair signing = SecAggSigningKey(options.tls_dir, options.id);
        signing_key_ = std::move(signing.secret);
        verify_key_ = std::move(signing.public_key);
      } catch (const Error& e) {
        // Needed only by a server that aggregates securely, which then
        // refuses the registration: this says why.
        secagg_keys_missing_ = e.what();
        signing_key_.clear();
        verify_key_.clear();
      }
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
  class PullCall;
  class PushCall;
  // The calls are reactors that delete themselves when done.
  void StartPull(const pb::PullRequest& request, double deadline_s);
  void StartPush(const std::string& session);

  // --- The main flow ----------------------------------------------------

  void Register() {
    if (done_) {
      End("");
      return;
    }
    struct Call {
      grpc::ClientContext context;
      pb::RegisterRequest request;
      pb::RegisterReply reply;
    };
    auto call = std::make_shared<Call>();
    pb::RegisterRequest& request = call->request;
    request.set_protocol_version(kProtocolVersion);
    request.set_client_id(options_.id);
    request.set_num_samples(options_.num_samples);
    request.set_speed_ghz(options_.speed_ghz);
    request.set_bandwidth_mhz(options_.bandwidth_mhz);
    request.set_model_sha256(options_.model_sha256);
    request.set_secagg_verify_key(verify_key_.data(), verify_key_.size());
    call->context.set_deadline(In(10));
    Begin();
    stub_->async()->Register(&call->context, &call->request, &call->reply,
                             [self = shared_from_this(), call](grpc::Status status) {
                               self->OnRegistered(status, call->reply);
                               self->Done();
                             });
  }

  void OnRegistered(const grpc::Status& status, const pb::RegisterReply& reply) {
    if (!status.ok()) {
      if (Permanent(status)) {
        End("server " + options_.server + " refused: " + Said(status) +
            (secagg_keys_missing_.empty() ? "" : " (" + secagg_keys_missing_ + ")"));
      } else {
        BackOff("cannot register with " + options_.server + ": " + Said(status), &Session::Register);
      }
      return;
    }
    const std::string mismatch = ProtocolMismatch(reply.protocol_version(), "the server");
    if (!mismatch.empty()) {
      End(mismatch);
      return;
    }
    Contact();
    Begin();
    swarm_->work.Post([self = shared_from_this(), reply] {
      self->Prepared(reply);
      self->Done();
    });
  }

  // On a worker: the client builds the server's model, then is registered.
  void Prepared(const pb::RegisterReply& reply) {
    try {
      if (work_.prepare) work_.prepare(FromWire(reply.model()), reply.num_params());
    } catch (const std::exception& e) {
      End(e.what());
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      session_ = reply.session();
      heartbeat_s_ = std::clamp(reply.heartbeat_s(), 0.05, 3600.0);
      // An older server states no chunk size: 1 MiB, its default.
      chunk_bytes_ = reply.chunk_bytes() > 0
                         ? static_cast<size_t>(std::clamp<int64_t>(reply.chunk_bytes(), 1024, 3 << 20))
                         : size_t{1} << 20;
    }
    Pull();
  }

  // What a PullTask brought.
  struct Pulled {
    pb::Status status = pb::WAIT;
    bool got = false;  // a whole task
    FitInstructions instructions;
    int64_t task_id = 0;
    // The secure aggregation session the task's model goes to, if any.
    std::optional<secagg::SessionConfig> secagg;
    double secagg_wait_s = 0;
    std::string malformed;  // a server speaking another protocol, or a malformed task
    std::string refused;    // why this client will not take part in the task's session
  };

  // Asks for a task.
  void Pull() {
    if (done_) {
      End("");
      return;
    }
    pb::PullRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_client_id(options_.id);
    // Read once: a heartbeat may forget the session meanwhile, and a request
    // without one is refused for good.
    const std::string current = session();
    if (current.empty()) {
      Register();
      return;
    }
    request.set_session(current);
    // A long wait only over a connection that is up: on one still being
    // made (after losing the server) the request would wait out its whole
    // deadline, and with it the heartbeats, should the connection stall.
    const bool connected = channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
    const double wait_s = connected ? options_.pull_wait_s : 0;
    request.set_wait_s(wait_s);
    // A request waiting at the server says this client is there.
    if (connected) waiting_.store(true);
    Begin();
    StartPull(request, wait_s + (connected ? 60 : 10));
  }

  void OnPulled(const grpc::Status& finished, Pulled pulled) {
    waiting_.store(false);
    if (!pulled.malformed.empty()) {
      End("task from " + options_.server + ": " + pulled.malformed);
      return;
    }
    if (!finished.ok()) {
      if (Permanent(finished)) {
        End("server " + options_.server + " refused: " + Said(finished));
      } else {
        BackOff("lost " + options_.server + ": " + Said(finished), &Session::Pull);
      }
      return;
    }
    Contact();
    if (pulled.status == pb::DONE) done_ = true;
    if (pulled.status == pb::UNKNOWN_SESSION) Forget();
    if (pulled.status != pb::TASK || !pulled.got) {
      Pull();
      return;
    }
    Begin();
    swarm_->work.Post([self = shared_from_this(), pulled = std::move(pulled)]() mutable {
      self->Compute(pulled);
      self->Done();
    });
  }

  // On a worker: the task, then its result on its way (under secure
  // aggregation without its model, which goes masked into the session).
  void Compute(const Pulled& pulled) {
    const FitInstructions& ins = pulled.instructions;
    const auto start = Clock::now();
    FitResult result;
    // A task that would break this client's own privacy settings is
    // answered with why, and nothing is computed for it. A session is
    // joined (recorded) before any work: an id seen before is a replay.
    std::string refused = pulled.refused.empty()
                              ? RefusedTask(ins, pulled.secagg.has_value(), options_.secagg)
                              : pulled.refused;
    if (refused.empty() && pulled.secagg) {
      try {
        ledger_.Join(secagg::SessionId(*pulled.secagg));
      } catch (const Error& e) {
        refused = std::string("refused the server's secure aggregation: ") + e.what();
      }
    }
    if (!refused.empty()) {
      LogWarning("client " + std::to_string(options_.id) + ": round " + std::to_string(ins.round) + ": " +
                 refused);
      result.error = refused;
      result.num_samples = options_.num_samples;  // the weight it registered, as every result states
    } else {
      try {
        result = work_.fit(ins);
      } catch (const std::exception& e) {
        End(e.what());
        return;
      }
    }
    const double compute_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (options_.progress) {
      LogProgress("client " + std::to_string(options_.id) + ": round " + std::to_string(ins.round) +
                  (ins.train.epochs > 0 ? " trained" : " reported") + " in " +
                  std::to_string(compute_s) + " s" + (result.ok ? "" : " (failed: " + result.error + ")"));
    }
    result.client_id = options_.id;
    if (pulled.secagg && result.ok && !result.params.empty()) JoinSecAgg(pulled, result);
    result_ = std::move(result);
    task_id_ = pulled.task_id;
    compute_s_ = compute_s;
    Push();
  }

  // The task stays open on the server until its round ends: a push that
  // cannot get through is tried again until then.
  void Push() {
    if (done_) {
      End("");
      return;
    }
    const std::string current = session();  // read once, as in Pull
    if (current.empty()) {  // the server forgot us: the task is lost
      Register();
      return;
    }
    Begin();
    StartPush(current);
  }

  void OnPushed(const grpc::Status& status, const pb::PushReply& reply) {
    if (status.ok()) {
      Contact();
      if (!reply.accepted()) {
        LogWarning("client " + std::to_string(options_.id) + ": result not accepted: " +
                   Printable(reply.reason(), 400));
        if (reply.reason().rfind("unknown session", 0) == 0) Forget();
      }
      result_ = FitResult();
      if (secagg_ && reply.accepted()) {
        Begin();
        swarm_->work.Post([self = shared_from_this()] {
          self->SecAggStep(pb::SecAggReply());
          self->Done();
        });
        return;
      }
      LeaveSecAgg("");
      return;
    }
    if (Permanent(status)) {
      End("server " + options_.server + " refused: " + Said(status));
    } else {
      BackOff("cannot deliver a result to " + options_.server + ": " + Said(status), &Session::Push);
    }
  }

  // --- Secure aggregation of the pushed result's model ------------------

  // The result's model becomes this client's input to the session; the
  // result goes without it.
  void JoinSecAgg(const Pulled& pulled, FitResult& result) {
    try {
      secagg_input_ = ModelSum::TermWords(result.params, result.num_samples);
    } catch (const Error& e) {
      result.ok = false;
      result.error = std::string("its model cannot be securely aggregated: ") + e.what();
    }
    result.params = FlatParams();
    if (!result.ok) return;
    secagg_ = std::make_unique<secagg::SecAggClient>(*pulled.secagg, options_.id, signing_key_);
    secagg_wait_s_ = pulled.secagg_wait_s;
    secagg_round_ = pulled.instructions.round;
  }

  // On a worker: the session's next message from what the server sent (an
  // empty reply: the start).
  void SecAggStep(const pb::SecAggReply& reply) {
    pb::SecAggRequest next;
    try {
      const std::string server = "the server";
      switch (reply.message_case()) {
        case pb::SecAggReply::kRoster:
          *next.mutable_roster_signature() =
              secagg::ToWire(secagg_->SignRoster(secagg::FromWire(reply.roster(), server)));
          break;
        case pb::SecAggReply::kDirectory:
          *next.mutable_shares() = secagg::ToWire(secagg_->Share(secagg::FromWire(reply.directory(), server)));
          break;
        case pb::SecAggReply::kBundle: {
          const secagg::MaskedInput masked =
              secagg_->Mask(secagg::FromWire(reply.bundle(), server), secagg_input_);
          secagg_input_ = {};
          masked_chunks_ = secagg::ToWire(masked, std::max<size_t>(1, chunk_bytes() / sizeof(secagg::Word)));
          next_chunk_ = 0;
          secagg_stage_ = SecAggStage::kSendingMasked;
          SendMaskedChunk();
          return;
        }
        case pb::SecAggReply::kSurvivors:
          *next.mutable_signature() = secagg::ToWire(secagg_->Check(secagg::FromWire(reply.survivors(), server)));
          break;
        case pb::SecAggReply::kUnmask:
          *next.mutable_unmask() = secagg::ToWire(secagg_->Unmask(secagg::FromWire(reply.unmask(), server)));
          break;
        case pb::SecAggReply::MESSAGE_NOT_SET:
          // The start, or a chunk of the masked model taken.
          if (secagg_stage_ == SecAggStage::kNotStarted) {
            secagg_stage_ = SecAggStage::kAdvertised;
            *next.mutable_advertise() = secagg::ToWire(secagg_->Advertise());
            break;
          }
          if (secagg_stage_ != SecAggStage::kSendingMasked) {
            throw Error("the server answered without the session's next message");
          }
          if (next_chunk_ < masked_chunks_.size()) {
            SendMaskedChunk();
            return;
          }
          // The server holds the whole masked model: wait for the survivor list.
          masked_chunks_.clear();
          secagg_stage_ = SecAggStage::kMaskedDelivered;
          if (options_.progress) {
            LogProgress("client " + std::to_string(options_.id) + ": round " + std::to_string(secagg_round_) +
                        " masked model delivered");
          }
          break;
      }
    } catch (const Error& e) {
      // An honest client refuses a server that breaks the protocol.
      LeaveSecAgg(std::string("refused the server's secure aggregation: ") + e.what());
      return;
    }
    SendSecAgg(std::move(next));
  }

  void SendMaskedChunk() {
    pb::SecAggRequest next;
    *next.mutable_masked() = std::move(masked_chunks_[next_chunk_++]);
    SendSecAgg(std::move(next));
  }

  void SendSecAgg(pb::SecAggRequest request) {
    const std::string current = session();
    if (current.empty()) {  // the server forgot us: the session is lost
      LeaveSecAgg("");
      return;
    }
    struct Call {
      grpc::ClientContext context;
      pb::SecAggRequest request;
      pb::SecAggReply reply;
    };
    auto call = std::make_shared<Call>();
    call->request = std::move(request);
    call->request.set_protocol_version(kProtocolVersion);
    call->request.set_client_id(options_.id);
    call->request.set_session(current);
    call->request.set_task_id(task_id_);
    // The server holds the answer until the session's round closes.
    call->context.set_deadline(In(secagg_wait_s_ + 30));
    Begin();
    stub_->async()->SecAgg(&call->context, &call->request, &call->reply,
                           [self = shared_from_this(), call](grpc::Status status) {
                             self->OnSecAgg(status, call->reply);
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
    Contact();
    const std::string mismatch = ProtocolMismatch(reply.protocol_version(), "the server");
    if (!mismatch.empty()) {
      End(mismatch);
      return;
    }
    if (!reply.more()) {
      if (reply.reason().rfind("unknown session", 0) == 0) Forget();
      LeaveSecAgg(reply.reason().empty() ? "" : "secure aggregation ended: " + Printable(reply.reason(), 400));
      if (reply.reason().empty() && options_.progress) {
        LogProgress("client " + std::to_string(options_.id) + ": round " + std::to_string(secagg_round_) +
                    " model in the secure sum");
      }
      return;
    }
    Begin();
    swarm_->work.Post([self = shared_from_this(), reply] {
      self->SecAggStep(reply);
      self->Done();
    });
  }

  // The session is over for this client (`why`: how, if not in the sum);
  // on to the next task.
  void LeaveSecAgg(const std::string& why) {
    if (!why.empty()) LogWarning("client " + std::to_string(options_.id) + ": " + why);
    secagg_.reset();
    secagg_input_ = {};
    masked_chunks_.clear();
    next_chunk_ = 0;
    secagg_stage_ = SecAggStage::kNotStarted;
    Pull();
  }

  // Waits before `then`, longer after each failure (with jitter, so that
  // clients do not retry in step), and ends the client once the server has
  // been silent for give_up_s.
  void BackOff(const std::string& why, void (Session::*then)()) {
    double wait_s = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const double silent = std::chrono::duration<double>(Clock::now() - last_contact_).count();
      if (silent > options_.give_up_s) {
        wait_s = -1;
      } else {
        if (backoff_s_ == 0) LogWarning(why + "; retrying");
        // The longest pause follows the heartbeat cadence the server asked for.
        backoff_s_ = std::clamp(backoff_s_ * 2, 0.25, std::clamp(5 * heartbeat_s_, 1.0, 10.0));
        wait_s = backoff_s_ * std::uniform_real_distribution<double>(0.5, 1.0)(rng_);
      }
    }
    if (wait_s < 0) {
      const double silent = std::chrono::duration<double>(Clock::now() - last_contact()).count();
      End(why + "; no answer for " + std::to_string(static_cast<int>(silent)) +
          " s, giving up (--give-up-after)");
      return;
    }
    channel_->GetState(/*try_to_connect=*/true);  // reconnecting starts now
    Begin();
    swarm_->timers.At(After(wait_s), [self = shared_from_this(), then] {
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
    if (!error.empty() && swarm_->many) {
      LogWarning("client " + std::to_string(options_.id) + ": " + Printable(error, 400));
    }
    MaybeFinished();
  }

  // --- Heartbeats, beside the main flow ----------------------------------

  // Heartbeats wait on the timers without counting as in flight: those due
  // after the client has ended are dropped.
  void ScheduleHeartbeat() {
    double every = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ended_) return;
      every = heartbeat_s_;
    }
    swarm_->timers.At(After(every), [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->Beat();
    });
  }

  void Beat() {
    struct Call {
      grpc::ClientContext context;
      pb::HeartbeatRequest request;
      pb::HeartbeatReply reply;
    };
    auto call = std::make_shared<Call>();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (ended_) return;
      // While a task request waits at the server, the server counts this
      // client as there and the request's answer carries what a heartbeat's
      // would (done, unknown session): an idle fleet sends one request per
      // pull_wait_s instead of one per heartbeat_s.
      if (session_.empty() || waiting_.load()) {
        call.reset();
      } else {
        call->request.set_protocol_version(kProtocolVersion);
        call->request.set_client_id(options_.id);
        call->request.set_session(session_);
        ++pending_;
      }
    }
    if (!call) {
      ScheduleHeartbeat();
      return;
    }
    call->context.set_deadline(In(5));
    stub_->async()->Heartbeat(&call->context, &call->request, &call->reply,
                              [self = shared_from_this(), call](grpc::Status status) {
                                if (status.ok()) {
                                  self->Contact();
                                  if (call->reply.status() == pb::DONE) self->done_ = true;
                                  if (call->reply.status() == pb::UNKNOWN_SESSION) self->Forget();
                                }
                                self->ScheduleHeartbeat();
                                self->Done();
                              });
  }

  // --- Bookkeeping -------------------------------------------------------

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

  void Contact() {
    std::lock_guard<std::mutex> lock(mutex_);
    last_contact_ = Clock::now();
    backoff_s_ = 0;
  }
  Clock::time_point last_contact() {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_contact_;
  }
  std::string session() {
    std::lock_guard<std::mutex> lock(mutex_);
    return session_;
  }
  size_t chunk_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return chunk_bytes_;
  }
  void Forget() {
    std::lock_guard<std::mutex> lock(mutex_);
    session_.clear();
  }

  const GrpcClientOptions options_;
  const GrpcClientWork work_;
  Swarm* const swarm_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Federation::Stub> stub_;
  std::atomic<bool> done_{false};     // the server said the run is done
  std::atomic<bool> waiting_{false};  // a task request waits at the server

  // The main flow's own: the result being delivered, and the secure
  // aggregation session its model goes to.
  FitResult result_;
  int64_t task_id_ = 0;
  double compute_s_ = 0;
  secagg::Bytes signing_key_, verify_key_;  // Ed25519, for every session
  std::string secagg_keys_missing_;         // why this client has none, if so
  secagg::SessionLedger ledger_;            // the sessions it joined
  std::unique_ptr<secagg::SecAggClient> secagg_;
  std::vector<secagg::Word> secagg_input_;
  std::vector<secagg::pb::MaskedInputChunk> masked_chunks_;
  size_t next_chunk_ = 0;
  // Where the session is, for the server's answers that carry no message.
  enum class SecAggStage { kNotStarted, kAdvertised, kSendingMasked, kMaskedDelivered };
  SecAggStage secagg_stage_ = SecAggStage::kNotStarted;
  double secagg_wait_s_ = 0;
  int64_t secagg_round_ = 0;

  std::mutex mutex_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::string session_;  // empty: not registered
  double heartbeat_s_ = 2;
  size_t chunk_bytes_ = size_t{1} << 20;  // of a result's model chunks, as the server asks
  Clock::time_point last_contact_;
  double backoff_s_ = 0;
  int pending_ = 0;  // calls, computations and back-offs in flight
  bool ended_ = false;
  bool finished_ = false;
  std::string error_;
};

// One PullTask call: the status, then for a task its header and the model
// in chunks, each checked as it comes.
class Session::PullCall final : public grpc::ClientReadReactor<pb::TaskChunk> {
 public:
  PullCall(std::shared_ptr<Session> session, const pb::PullRequest& request, double deadline_s)
      : session_(std::move(session)), request_(request) {
    context_.set_deadline(In(deadline_s));
    session_->stub_->async()->PullTask(&context_, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    session_->waiting_.store(false);  // answered (or broken): no longer waiting
    if (!ok) return;  // OnDone follows
    bool more = false;
    try {
      more = Take();
    } catch (const Error& e) {
      pulled_.malformed = e.what();
      context_.TryCancel();
      return;
    }
    if (more) StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override {
    if (global_) {
      pulled_.got = global_->size() == expected_;
      pulled_.instructions.global = std::move(global_);
    }
    session_->OnPulled(status, std::move(pulled_));
    session_->Done();
    delete this;
  }

 private:
  // Takes the chunk just read; whether more are to be read.
  bool Take() {
    switch (stage_++) {
      case 0:  // the status
        if (!chunk_.has_status()) return false;
        pulled_.status = chunk_.status();
        return pulled_.status == pb::TASK;
      case 1: {  // the header
        if (!chunk_.has_header()) return false;
        pulled_.instructions = fedprof::FromWire(chunk_.header());
        pulled_.task_id = chunk_.header().task_id();
        if (chunk_.header().has_secagg() && pulled_.instructions.train.epochs > 0) {
          if (!session_->secagg_keys_missing_.empty()) throw Error(session_->secagg_keys_missing_);
          const std::string& tls_dir = session_->options_.tls_dir;
          const auto roster = tls_dir.empty() ? nullptr : session_->swarm_->Roster(tls_dir);
          try {
            pulled_.secagg =
                SetupFromWire(chunk_.header().secagg(), chunk_.header().num_params(), session_->options_.id,
                              pulled_.instructions.round, session_->options_.secagg, roster.get());
            pulled_.secagg_wait_s = chunk_.header().secagg().reply_wait_s();
          } catch (const Error& e) {
            pulled_.refused = std::string("refused the server's secure aggregation: ") + e.what();
          }
        }
        expected_ = static_cast<size_t>(chunk_.header().num_params());
        global_ = std::make_shared<FlatParams>();
        // What a server announces is not believed before it arrives.
        global_->reserve(std::min<size_t>(expected_, size_t{1} << 24));
        return true;
      }
      default:  // the model's chunks
        if (!chunk_.has_params()) return false;
        AppendFloats(chunk_.params(), expected_, global_.get());
        return true;
    }
  }

  const std::shared_ptr<Session> session_;
  grpc::ClientContext context_;
  const pb::PullRequest request_;
  pb::TaskChunk chunk_;
  int stage_ = 0;
  Pulled pulled_;
  std::shared_ptr<FlatParams> global_;
  size_t expected_ = 0;
};

// One PushResult call: the header, then the model in chunks of the size the
// server asked for; the last message closes the stream.
class Session::PushCall final : public grpc::ClientWriteReactor<pb::ResultChunk> {
 public:
  PushCall(std::shared_ptr<Session> session, const std::string& current)
      : session_(std::move(session)),
        params_(session_->result_.params),
        per_chunk_(std::max<size_t>(1, session_->chunk_bytes() / sizeof(float))) {
    context_.set_deadline(In(120));
    pb::ResultHeader* h = message_.mutable_header();
    ToWire(session_->result_, h);
    h->set_session(current);
    h->set_task_id(session_->task_id_);
    h->set_compute_s(session_->compute_s_);
    h->set_profiling_s(session_->result_.cost.profiling_time_s);
    session_->stub_->async()->PushResult(&context_, &reply_, this);
    Write();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (!ok || at_ >= params_.size()) return;  // broken, or all written: OnDone follows
    message_.Clear();
    const size_t count = std::min(per_chunk_, params_.size() - at_);
    PutFloats(params_, at_, count, message_.mutable_params());
    at_ += count;
    Write();
  }

  void OnDone(const grpc::Status& status) override {
    session_->OnPushed(status, reply_);
    session_->Done();
    delete this;
  }

 private:
  void Write() {
    if (at_ >= params_.size()) {
      StartWriteLast(&message_, grpc::WriteOptions());
    } else {
      StartWrite(&message_);
    }
  }

  const std::shared_ptr<Session> session_;
  const FlatParams& params_;  // the session's result, kept until the call ends
  const size_t per_chunk_;
  grpc::ClientContext context_;
  pb::ResultChunk message_;
  pb::PushReply reply_;
  size_t at_ = 0;  // model values written
};

void Session::StartPull(const pb::PullRequest& request, double deadline_s) {
  new PullCall(shared_from_this(), request, deadline_s);
}

void Session::StartPush(const std::string& session) { new PushCall(shared_from_this(), session); }

}  // namespace

std::vector<std::string> RunGrpcClients(const std::vector<GrpcClientOptions>& clients,
                                        const std::vector<GrpcClientWork>& work, int workers) {
  if (clients.size() != work.size()) throw Error("RunGrpcClients: one work per client");
  for (const GrpcClientOptions& o : clients) {
    if (o.id < 0) throw Error("--id: a client id >= 0 is required");
  }
  Swarm swarm(workers, static_cast<int>(clients.size()));
  std::vector<std::shared_ptr<Session>> sessions;
  sessions.reserve(clients.size());
  for (size_t i = 0; i < clients.size(); ++i) {
    sessions.push_back(std::make_shared<Session>(clients[i], work[i], &swarm));
  }
  for (const auto& s : sessions) s->Start();
  {
    std::unique_lock<std::mutex> lock(swarm.mutex);
    swarm.finished_cv.wait(lock, [&] { return swarm.unfinished == 0; });
  }
  std::vector<std::string> errors;
  for (const auto& s : sessions) errors.push_back(s->error());
  // What gRPC still holds of a session (a callback being destroyed) lets go
  // of it within moments; the session's channel goes with it.
  for (const auto& s : sessions) {
    for (int i = 0; i < 1000 && s.use_count() > 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return errors;
}

void RunGrpcClient(const GrpcClientOptions& options,
                   const std::function<void(const ModelSpec& model, int64_t num_params)>& prepare,
                   const std::function<FitResult(const FitInstructions&)>& fit) {
  const std::vector<std::string> errors = RunGrpcClients({options}, {{prepare, fit}}, 1);
  if (!errors.front().empty()) throw Error(errors.front());
}

}  // namespace fedprof
