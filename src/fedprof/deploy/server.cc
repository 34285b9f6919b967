#include "fedprof/deploy/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>
#include <type_traits>

#include "federation.grpc.pb.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/monitor/monitor.h"
#include "fedprof/secagg/crypto.h"
#include "fedprof/deploy/secagg_sessions.h"
#include "fedprof/deploy/refusal_log.h"
#include "fedprof/deploy/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {

namespace pb = federation::v1;
using Clock = std::chrono::steady_clock;

namespace {

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string NewSession() {
  std::random_device device;  // the OS's generator
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) s += hex[device() % 16];
  return s;
}

// What each call may weigh. gRPC bounds every message of a port by one limit
// (the model chunks' size); these bound each call's own request on arrival.
constexpr size_t kMaxRegisterBytes = 1024;   // numbers and a 64-digit hash
constexpr size_t kMaxSmallRequestBytes = 256;  // Heartbeat, PullTask: numbers and a session
// What one connection may carry at once: a client needs a task request, a
// heartbeat and a result; more streams wait (HTTP/2 flow control).
constexpr int kMaxStreamsPerConnection = 8;
// A connection that has not finished its TLS handshake within this is
// closed, and so is one that has carried no call for kIdleConnectionMs (a
// client always has a task request waiting, or a heartbeat due, well within
// it).
constexpr int kHandshakeTimeoutMs = 10000;
constexpr int kIdleConnectionMs = 60000;
// The largest TLS frame the server writes: each connection keeps a buffer
// of it, and at 4 KiB rather than 16 a fleet of idle clients costs about
// 6 KB less each (docs/deploy-bench.md).
constexpr int kTlsFrameBytes = 4096;
// Room beside a model chunk for a result header (a profile of 2^16 units, a
// sketch of 2^16 values or a ciphertext).
constexpr size_t kHeaderAllowance = size_t{1} << 20;

// `digits` lowercase hexadecimal digits (a SHA-256 has 64, a session 32).
bool IsHex(const std::string& s, size_t digits) {
  return s.size() == digits && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Who is calling, for the log: the client its certificate names, or the
// peer's address (and why no certificate named a client).
std::string Caller(const grpc::ServerContextBase& context, bool tls) {
  if (tls) {
    const CertifiedPeer peer = CertifiedClient(context);
    if (peer.id >= 0) return "client " + std::to_string(peer.id);
    if (peer.relay >= 0) return "relay " + std::to_string(peer.relay);
    return "peer " + Printable(context.peer(), 64) + " (" + peer.problem + ")";
  }
  return "peer " + Printable(context.peer(), 64);
}

// Logs every refused call, by caller, through the server's RefusalLog: the
// statuses the handlers return, and gRPC's own for a request that does not
// parse (a unary request over the port's limit is dropped by gRPC before
// any of this runs: docs/deploy.md).
class RefusalInterceptor final : public grpc::experimental::Interceptor {
 public:
  RefusalInterceptor(grpc::experimental::ServerRpcInfo* info, RefusalLog* log, bool tls)
      : info_(info), log_(log), tls_(tls) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      // A call its client gave up on is a client that went away, not a
      // refusal: cancelled, or ended by gRPC as UNIMPLEMENTED (without a
      // word) because its request never arrived before the client cancelled
      // it or its deadline passed, whatever its method. A request that came
      // and does not parse ends the same way uncancelled: that is refused.
      const grpc::ServerContextBase& context = *info_->server_context();
      const bool abandoned =
          status.error_code() == grpc::StatusCode::CANCELLED ||
          (status.error_code() == grpc::StatusCode::UNIMPLEMENTED && status.error_message().empty() &&
           (context.IsCancelled() || context.deadline() < std::chrono::system_clock::now()));
      if (!status.ok() && !abandoned) {
        std::string method = info_->method() ? info_->method() : "?";
        method = method.substr(method.rfind('/') + 1);
        // gRPC's own refusals of a request that does not parse say nothing;
        // its UNIMPLEMENTED then means it could not read one, not that the
        // method is unknown (the service has every method it registers).
        const std::string& why = status.error_message();
        const bool unreadable = why.empty() && status.error_code() == grpc::StatusCode::UNIMPLEMENTED;
        const std::string kind = unreadable ? "unreadable" : CodeName(status.error_code());
        const std::string said =
            unreadable ? "no readable request (not a message, or cut off: its client may have "
                         "given up on it)"
                       : why.empty() ? "a request that is " + kind : Printable(why, 400);
        log_->Refuse(Caller(context, tls_), method + " " + kind, method + ": " + said);
      }
    }
    methods->Proceed();
  }

  static std::string CodeName(grpc::StatusCode code) {
    switch (code) {
      case grpc::StatusCode::INVALID_ARGUMENT: return "invalid argument";
      case grpc::StatusCode::FAILED_PRECONDITION: return "failed precondition";
      case grpc::StatusCode::PERMISSION_DENIED: return "permission denied";
      case grpc::StatusCode::UNAUTHENTICATED: return "unauthenticated";
      case grpc::StatusCode::RESOURCE_EXHAUSTED: return "over a limit";
      case grpc::StatusCode::INTERNAL: return "malformed";
      case grpc::StatusCode::UNIMPLEMENTED: return "unknown method";
      default: return "status " + std::to_string(static_cast<int>(code));
    }
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  RefusalLog* log_;
  bool tls_;
};

class RefusalInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  RefusalInterceptorFactory(RefusalLog* log, bool tls) : log_(log), tls_(tls) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RefusalInterceptor(info, log_, tls_);
  }

 private:
  RefusalLog* log_;
  bool tls_;
};

FitResult Failed(int id, const std::string& why, bool timed_out) {
  FitResult r;
  r.client_id = id;
  r.ok = false;
  r.timed_out = timed_out;
  r.error = why;
  return r;
}

}  // namespace

// The service runs on gRPC's callback API: a call is a reactor object, not a
// thread, so a client that waits for a task, sends a heartbeat or streams a
// result holds no thread of the server. Handlers never block: a PullTask
// with nothing to send is parked (at most one per client) until its client
// gets a task, the run finishes or its wait ends (the waker thread); a
// PushResult whose result is in waits for the round loop's verdict as an
// entry of the arrivals queue. Every call is finished exactly once, by
// whoever takes it out of the structure that holds it, under mutex_.
class GrpcTransport::Impl final : public pb::Federation::CallbackService {
 public:
  explicit Impl(const GrpcServerOptions& options)
      : options_(options),
        sum_bytes_(SumBytes(options.num_params)),
        // The clients' keys as issued with their certificates.
        secagg_roster_(options.secure_aggregation && !options.tls_dir.empty()
                           ? SecAggRoster(options.tls_dir)
                           : std::map<int64_t, std::string>()),
        clients_(options.num_clients) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(options.listen, ServerCredentials(options.tls_dir, options.cert_name), &port);
    builder.RegisterService(this);
    const int limit = static_cast<int>(MessageLimit());
    builder.SetMaxReceiveMessageSize(limit);
    builder.SetMaxSendMessageSize(limit);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
    builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kHandshakeTimeoutMs);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kIdleConnectionMs);
    builder.AddChannelArgument(GRPC_ARG_TSI_MAX_FRAME_SIZE, kTlsFrameBytes);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(std::make_unique<RefusalInterceptorFactory>(&refusals_, tls()));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) {
      throw Error("--listen " + options.listen + ": cannot listen there (in use, or not an address "
                  "of this machine)");
    }
    address_ = options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(port);
    waker_ = std::thread([this] { WakeExpiredPulls(); });
    if (monitor_) monitor_->SetConnectedSource([this] { return static_cast<int>(Available().size()); });
  }

  ~Impl() override {
    if (monitor_) monitor_->SetConnectedSource({});
    std::vector<TaskStream*> parked;
    std::vector<BatchStream*> relays_parked;
    std::deque<Arrival> unjudged;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      while (!parked_.empty()) parked.push_back(Unpark(parked_.begin()->first));
      while (!relay_parked_.empty()) relays_parked.push_back(UnparkRelay(relay_parked_.begin()->first));
      unjudged.swap(arrived_);
      secagg_.reset();  // its held replies are answered
    }
    waker_cv_.notify_all();
    waker_.join();
    for (TaskStream* pull : parked) pull->SendStatus(pb::WAIT);
    for (BatchStream* pull : relays_parked) pull->SendStatus(pb::WAIT);
    for (Arrival& a : unjudged) Answer(a.verdict, "the server stopped before judging it");
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }

  // The largest message of any call: a model chunk, or a result header.
  size_t MessageLimit() const { return std::max(options_.chunk_bytes, kHeaderAllowance) + 4096; }

  bool tls() const { return !options_.tls_dir.empty(); }
  const std::string& address() const { return address_; }
  int num_clients() const { return options_.num_clients; }
  void SetRoundTimeout(double s) { round_timeout_s_.store(s); }
  const GrpcServerOptions& options() const { return options_; }

  // --- The round loop's side -------------------------------------------

  std::vector<ClientInfo> Available() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ClientInfo> out;
    const auto now = Clock::now();
    for (int id = 0; id < options_.num_clients; ++id) {
      const ClientState& c = clients_[id];
      if (!Alive(id, now)) continue;
      out.push_back({id, c.num_samples, c.last_round_s});
    }
    return out;
  }

  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) {
    // Each task holds its client's instructions; θ stays one shared copy,
    // encoded into its chunks once for every stream that sends it (and once
    // for every relay's batch).
    std::map<const FlatParams*, std::shared_ptr<const std::vector<pb::TaskChunk>>> encoded;
    std::map<const FlatParams*, std::shared_ptr<const std::vector<pb::RelayTaskChunk>>> for_relays;
    std::vector<int> relay_of(tasks.size(), -1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t i = 0; i < tasks.size(); ++i) relay_of[i] = clients_[tasks[i].client_id].relay;
    }
    std::vector<Task> opened(tasks.size());
    const auto start = Clock::now();
    for (size_t i = 0; i < tasks.size(); ++i) {
      Task& t = opened[i];
      t.index = i;
      t.instructions = std::make_shared<const FitInstructions>(tasks[i].instructions);
      t.opened = start;
      const FlatParams* global = t.instructions->global.get();
      if (relay_of[i] < 0) {
        auto& chunks = encoded[global];
        if (!chunks) chunks = EncodeModel<pb::TaskChunk>(*global);
        t.chunks = chunks;
      } else if (!for_relays[global]) {
        for_relays[global] = EncodeModel<pb::RelayTaskChunk>(*global);
      }
    }
    const double round_timeout_s = round_timeout_s_.load();
    const auto deadline = start + Seconds(round_timeout_s);
    std::vector<std::pair<TaskStream*, Task>> to_send;
    std::vector<std::pair<BatchStream*, Batch>> batches_to_send;
    std::unique_lock<std::mutex> lock(mutex_);
    // The round's secure aggregation session, of its training tasks.
    std::map<int64_t, size_t> secagg_index;  // by client
    std::shared_ptr<const pb::SecAggSetup> setup;
    std::string no_session;  // why the round's training tasks have none
    if (options_.secure_aggregation) {
      std::map<int64_t, int64_t> task_of;
      for (size_t i = 0; i < tasks.size(); ++i) {
        if (tasks[i].instructions.train.epochs == 0) continue;
        task_of[tasks[i].client_id] = next_task_id_ + static_cast<int64_t>(i);
        secagg_index[tasks[i].client_id] = i;
      }
      std::map<int64_t, secagg::Bytes> verify_keys;
      for (const auto& entry : task_of) {
        const std::string& key = clients_[entry.first].verify_key;
        verify_keys[entry.first] = secagg::Bytes(key.begin(), key.end());
      }
      try {
        if (task_of.empty()) throw Error("none");
        secagg::SessionConfig config =
            SessionConfigFor(*options_.secure_aggregation, run_id_, tasks.front().instructions.round,
                             static_cast<size_t>(options_.num_params) + 1, std::move(verify_keys));
        setup = std::make_shared<const pb::SecAggSetup>(
            SetupToWire(config, round_timeout_s + options_.secagg_phase_timeout_s));
        secagg_ = std::make_shared<SecAggRendezvous>(std::move(config), std::move(task_of),
                                                     options_.secagg_phase_timeout_s, &refusals_);
      } catch (const Error& e) {
        no_session = e.what();
      }
    }
    // A relay's clients' tasks go to it as one batch per model.
    std::map<std::pair<int, const FlatParams*>, int64_t> batch_of;
    for (size_t i = 0; i < tasks.size(); ++i) {
      const int id = tasks[i].client_id;
      Task& t = tasks_[id];
      t = std::move(opened[i]);
      t.id = next_task_id_ + static_cast<int64_t>(i);
      if (secagg_index.count(id) != 0) {
        if (!setup) {
          // Its model would reach the server as it is.
          t.open = false;
          Arrival a;
          a.index = t.index;
          a.result = Failed(id, "no secure aggregation session for this round's " +
                                    std::to_string(secagg_index.size()) + " training tasks: " + no_session,
                            /*timed_out=*/false);
          arrived_.push_back(std::move(a));
          continue;
        }
        t.secagg = setup;
      }
      if (relay_of[i] >= 0) {
        const FlatParams* global = t.instructions->global.get();
        int64_t& b = batch_of[{relay_of[i], global}];
        if (b == 0) {
          b = next_batch_id_++;
          Batch& batch = batches_[b];
          batch.relay = relay_of[i];
          batch.chunks = for_relays[global];
          pb::RelayBatchHeader* h = batch.header.mutable_header();
          h->set_batch_id(b);
          h->set_deadline_s(round_timeout_s);
          h->set_num_params(static_cast<int64_t>(global->size()));
        }
        t.batch = b;
        pb::RelayTask* rt = batches_[b].header.mutable_header()->add_tasks();
        rt->set_client_id(id);
        ToWire(*t.instructions, t.id, static_cast<int64_t>(t.instructions->global->size()),
               rt->mutable_header());
      } else if (parked_.count(id) > 0) {
        to_send.emplace_back(Unpark(id), t);
      }
    }
    next_task_id_ += static_cast<int64_t>(tasks.size());
    for (auto& [b, batch] : batches_) {
      if (relay_parked_.count(batch.relay) == 0) continue;
      batch.sent = true;
      batches_to_send.emplace_back(UnparkRelay(batch.relay), batch);
    }
    lock.unlock();
    for (auto& [pull, task] : to_send) StartSending(pull, task);
    for (auto& [pull, batch] : batches_to_send) StartSending(pull, batch);
    lock.lock();
    size_t remaining = tasks.size();
    while (remaining > 0 || WaitingForSums()) {
      while (!arrived_.empty()) {
        Arrival a = std::move(arrived_.front());
        arrived_.pop_front();
        lock.unlock();
        std::string why;
        const int client = a.result.client_id;
        try {
          why = a.is_sum ? sink.Sum(a.indices, a.sum.get(), a.lost) : sink(a.index, std::move(a.result));
        } catch (...) {
          Answer(a.verdict, "the server failed while judging it");
          throw;
        }
        lock.lock();
        if (a.is_sum) {
          batches_.at(a.batch).sum_in = true;
        } else {
          --remaining;
          // The relay adds the model of an accepted result to its sum; the
          // session takes a directly sent one's (before the client hears
          // the verdict that lets it join).
          if (a.summed && why.empty() && a.batch != 0) batches_.at(a.batch).awaiting.push_back(a.index);
          if (a.summed && why.empty() && a.batch == 0 && secagg_) secagg_->Admit(client);
        }
        lock.unlock();
        // The client (or relay) that sent it is told the round loop's own verdict.
        Answer(a.verdict, why);
        lock.lock();
      }
      if (remaining == 0 && !WaitingForSums()) break;
      const auto now = Clock::now();
      std::vector<std::shared_ptr<Sending>> stalled;
      for (auto& [id, task] : tasks_) {
        if (!task.open) continue;
        std::string why;
        const auto sending = sending_.find(id);
        if (!Alive(id, now)) {
          why = "sent nothing for " + std::to_string(options_.heartbeat_timeout_s) +
                " s (deploy.heartbeat_timeout_s): left the round";
        } else if (sending != sending_.end() &&
                   sending->second->StalledSince(now - Seconds(options_.heartbeat_timeout_s))) {
          // A client that takes none of its task is as gone as a silent one
          // (a chunk, deploy.chunk_kb, must cross its link within the timeout).
          why = "took none of its task for " + std::to_string(options_.heartbeat_timeout_s) +
                " s (deploy.heartbeat_timeout_s): left the round";
          stalled.push_back(sending->second);
        } else if (now >= deadline) {
          why = "no result within " + std::to_string(round_timeout_s) + " s (deploy.round_timeout_s)";
        }
        if (why.empty()) continue;
        task.open = false;
        FitResult r = Failed(id, why, /*timed_out=*/true);
        r.cost.time_s = Since(task.opened);
        Arrival a;
        a.index = task.index;
        a.result = std::move(r);
        arrived_.push_back(std::move(a));
      }
      if (!stalled.empty()) {
        lock.unlock();
        for (const auto& stream : stalled) stream->Cancel();
        lock.lock();
      }
      // A sum whose relay is gone, or past the deadline, will not come.
      for (auto& [b, batch] : batches_) {
        if (batch.awaiting.empty() || batch.sum_in || batch.sum_queued) continue;
        if (RelayAlive(batch.relay, now) && now < deadline) continue;
        batch.sum_queued = true;
        Arrival a;
        a.is_sum = true;
        a.batch = b;
        a.indices = batch.awaiting;
        arrived_.push_back(std::move(a));
      }
      if (arrived_.empty()) {
        lock.unlock();
        Tidy();
        lock.lock();
        if (arrived_.empty()) {
          arrive_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(200)));
        }
      }
    }
    tasks_.clear();
    batches_.clear();
    // A task still being sent (its client reads slowly, or not at all) ends
    // with its round: it holds no round and no buffer beyond it.
    std::vector<std::shared_ptr<Sending>> unfinished;
    for (auto& [id, sending] : sending_) unfinished.push_back(sending);
    const std::shared_ptr<SecAggRendezvous> session = secagg_;
    lock.unlock();
    for (const auto& sending : unfinished) sending->Cancel();
    if (session) Aggregate(*session, tasks.front().instructions.round, secagg_index, sink);
  }

  // Runs the round's secure aggregation session among the clients whose
  // results were accepted, and hands its sum to the round loop.
  void Aggregate(SecAggRendezvous& session, int64_t round, const std::map<int64_t, size_t>& index_of,
                 const ResultSink& sink) {
    const SecAggOutcome out = session.Run([this](int64_t id) {
      std::lock_guard<std::mutex> lock(mutex_);
      return Alive(static_cast<int>(id), Clock::now());
    });
    {
      std::lock_guard<std::mutex> lock(mutex_);
      secagg_.reset();
    }
    if (out.clients.empty()) return;
    HandOverSession(out, index_of, sink);
    if (monitor_) monitor_->AddBytes(out.cost.server_bytes_received, 0);
    if (options_.secure_aggregation->progress) {
      LogProgress(DescribeSession(round, options_.secure_aggregation->protocol, out.cost));
    }
  }

  // Whether an accepted result's model still awaits its relay's sum (mutex_ held).
  bool WaitingForSums() const {
    for (const auto& [b, batch] : batches_) {
      if (!batch.awaiting.empty() && !batch.sum_in) return true;
    }
    return false;
  }

  // Returns false when fewer than `count` are alive after `timeout_s`.
  bool WaitForClients(int count, double timeout_s) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto deadline = Clock::now() + Seconds(timeout_s);
    while (true) {
      if (CountAlive(Clock::now()) >= count) return true;
      if (Clock::now() >= deadline) return false;
      lock.unlock();
      Tidy();
      lock.lock();
      // A registration wakes it (arrive_cv_); the wake each second is for
      // the refusal log, as each wake scans every client.
      arrive_cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::seconds(1)));
    }
  }

  void Finish(double grace_s) {
    std::vector<TaskStream*> told;
    std::vector<BatchStream*> relays_told;
    std::unique_lock<std::mutex> lock(mutex_);
    done_ = true;
    // Parked pulls hear it now; the others on their next call.
    while (!parked_.empty()) {
      const int id = parked_.begin()->first;
      told.push_back(Unpark(id));
      clients_[id].told_done = true;
    }
    while (!relay_parked_.empty()) {
      const int r = relay_parked_.begin()->first;
      relays_told.push_back(UnparkRelay(r));
      TellRelayDone(r);
    }
    lock.unlock();
    for (TaskStream* pull : told) pull->SendStatus(pb::DONE);
    for (BatchStream* pull : relays_told) pull->SendStatus(pb::DONE);
    lock.lock();
    const auto deadline = Clock::now() + Seconds(grace_s);
    while (Clock::now() < deadline) {
      bool all_told = true;
      const auto now = Clock::now();
      for (int id = 0; id < options_.num_clients; ++id) {
        all_told = all_told && (!Alive(id, now) || clients_[id].told_done);
      }
      if (all_told) break;
      arrive_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
    }
    lock.unlock();
    refusals_.Flush(/*everything=*/true);
  }

  std::vector<ClientDescription> Describe() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ClientDescription> out(clients_.size());
    for (size_t k = 0; k < clients_.size(); ++k) {
      const ClientState& c = clients_[k];
      out[k].size = c.num_samples;
      out[k].speed_ghz = c.speed_ghz;
      out[k].bandwidth_mhz = c.bandwidth_mhz;
      out[k].round_s = c.results > 0 ? c.total_round_s / c.results : 0.0;
    }
    return out;
  }

  // The clients' claims by id, and the run's id under "run" (hex), so that a
  // resumed server's secure aggregation sessions stay bound to its run.
  std::string SaveClaims() const {
    std::lock_guard<std::mutex> lock(mutex_);
    nlohmann::json claims = nlohmann::json::object();
    for (size_t k = 0; k < clients_.size(); ++k) {
      if (clients_[k].claimed > 0) claims[std::to_string(k)] = clients_[k].claimed;
    }
    claims["run"] = HexEncode(run_id_);
    return claims.dump();
  }

  void LoadClaims(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (text.empty()) return;
    try {
      const nlohmann::json claims = nlohmann::json::parse(text);
      for (const auto& [key, value] : claims.items()) {
        if (key == "run") {
          const std::string hex = value.get<std::string>();
          if (!IsHex(hex, 64)) throw Error("checkpoint: the run id is not 64 hex digits");
          run_id_ = HexDecode(hex);
          continue;
        }
        const int id = ParseClientId(key, options_.num_clients);
        if (id < 0) throw Error("checkpoint: claim of client '" + Printable(key) + "'");
        const int64_t n = value.get<int64_t>();
        if (n < 1 || n > options_.max_samples) throw Error("checkpoint: claim of client " + key);
        clients_[id].claimed = n;
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("checkpoint: clients' claims: ") + e.what());
    }
  }

  // --- The clients' side (gRPC handlers) ---------------------------------
  // A handler's refusal is a status with the reason; RefusalInterceptor logs
  // it by caller. Reasons quote what the client sent only through Printable.

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const pb::RegisterRequest* request,
                                     pb::RegisterReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    call->Finish(Registration(*context, *request, reply));
    return call;
  }

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const pb::HeartbeatRequest* request,
                                      pb::HeartbeatReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    int id = -1;
    const grpc::Status refused = Admit(*context, *request, "a heartbeat", request->protocol_version(),
                                       request->client_id(), request->session(), &id);
    if (refused.ok()) {
      reply->set_protocol_version(kProtocolVersion);
      std::lock_guard<std::mutex> lock(mutex_);
      reply->set_status(Touch(id, request->session()));
    }
    call->Finish(refused);
    return call;
  }

  grpc::ServerWriteReactor<pb::TaskChunk>* PullTask(grpc::CallbackServerContext* context,
                                                    const pb::PullRequest* request) override {
    auto* pull = new TaskStream(this, context);
    int id = -1;
    grpc::Status refused = Admit(*context, *request, "a task request", request->protocol_version(),
                                 request->client_id(), request->session(), &id);
    if (refused.ok() && !(request->wait_s() >= 0 && request->wait_s() <= 3600)) {  // NaN fails too
      refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "wait_s " + FormatDouble(request->wait_s()) + " is not in [0, 3600]");
    }
    if (!refused.ok()) {
      pull->Finish(refused);
      return pull;
    }
    const double wait_s = std::min(request->wait_s(), 30.0);
    std::unique_lock<std::mutex> lock(mutex_);
    const pb::Status status = Touch(id, request->session());
    if (status == pb::WAIT && !stopping_) {
      // A client that lost a task (its connection broke mid-stream) pulls it
      // again and is sent it again.
      const auto it = tasks_.find(id);
      if (it != tasks_.end() && it->second.open) {
        const Task task = it->second;
        pull->owner = id;
        lock.unlock();
        StartSending(pull, task);
        return pull;
      }
      if (wait_s > 0) {
        // One parked pull per client: an earlier one is answered now.
        TaskStream* earlier = parked_.count(id) > 0 ? Unpark(id) : nullptr;
        parked_[id] = {pull, Clock::now() + Seconds(wait_s)};
        Expires(parked_[id].until, id);
        pull->owner = id;
        lock.unlock();
        if (earlier) earlier->SendStatus(pb::WAIT);
        return pull;
      }
    }
    lock.unlock();
    pull->SendStatus(status);
    return pull;
  }

  grpc::ServerReadReactor<pb::ResultChunk>* PushResult(grpc::CallbackServerContext* context,
                                                       pb::PushReply* reply) override {
    reply->set_protocol_version(kProtocolVersion);
    return new ResultStream(this, context, reply);
  }

  // A client's message of the round's secure aggregation session: the
  // session answers it, now or once its round closes.
  grpc::ServerUnaryReactor* SecAgg(grpc::CallbackServerContext* context,
                                   const pb::SecAggRequest* request, pb::SecAggReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    reply->set_protocol_version(kProtocolVersion);
    int id = -1;
    grpc::Status refused = Authenticate(*context, request->protocol_version(), request->client_id(), &id);
    if (refused.ok()) refused = CheckSession(request->session());
    if (!refused.ok()) {
      call->Finish(refused);
      return call;
    }
    std::shared_ptr<SecAggRendezvous> session;
    std::string kind;  // why there is none, for the refusal log
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (Touch(id, request->session()) == pb::UNKNOWN_SESSION) {
        reply->set_reason("unknown session: register again");
        kind = "SecAgg unknown session";
      } else if (!secagg_) {
        reply->set_reason("no secure aggregation session is open");
        kind = "SecAgg for no open session";
      } else {
        session = secagg_;
      }
    }
    if (!session) {
      // Answered with the reason (the client's protocol reads it), and logged.
      refusals_.Refuse("client " + std::to_string(id), kind, "SecAgg: " + reply->reason());
      call->Finish(grpc::Status::OK);
      return call;
    }
    session->Take(id, *request, HeldReply{reply, [call] { call->Finish(grpc::Status::OK); }});
    return call;
  }

  // --- The relays' side (gRPC handlers) ----------------------------------
  // A relay is trusted with its clients' identities (it checks their
  // certificates) and with their models (it sums them); everything it sends
  // is checked as a client's would be: sizes, numbers, sessions, which of
  // its clients have open tasks, and that its sums are of what it names.

  grpc::ServerUnaryReactor* RelaySync(grpc::CallbackServerContext* context,
                                      const pb::RelaySyncRequest* request,
                                      pb::RelaySyncReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    call->Finish(SyncRelay(*context, *request, reply));
    return call;
  }

  grpc::ServerWriteReactor<pb::RelayTaskChunk>* RelayPull(grpc::CallbackServerContext* context,
                                                          const pb::RelayPullRequest* request) override {
    auto* pull = new BatchStream(this, context);
    int r = -1;
    grpc::Status refused = CheckSize(*request, kMaxSmallRequestBytes, "a relay's batch request");
    if (refused.ok()) refused = AuthenticateRelay(*context, request->protocol_version(), request->relay_id(), &r);
    if (refused.ok()) refused = CheckSession(request->session());
    if (refused.ok() && !(request->wait_s() >= 0 && request->wait_s() <= 3600)) {  // NaN fails too
      refused = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                             "wait_s " + FormatDouble(request->wait_s()) + " is not in [0, 3600]");
    }
    if (!refused.ok()) {
      pull->Finish(refused);
      return pull;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    pb::Status status = TouchRelay(r, request->session());
    if (status == pb::DONE) TellRelayDone(r);
    if (status == pb::WAIT && !stopping_) {
      pull->owner = r;
      // A batch goes to its relay once: one whose stream broke is lost, as
      // its relay would be.
      for (auto& [b, batch] : batches_) {
        if (batch.relay != r || batch.sent) continue;
        batch.sent = true;
        const Batch copy = batch;  // the round may end (and drop it) while it is sent
        lock.unlock();
        StartSending(pull, copy);
        return pull;
      }
      if (request->wait_s() > 0) {
        BatchStream* earlier = relay_parked_.count(r) > 0 ? UnparkRelay(r) : nullptr;
        relay_parked_[r] = {pull, Clock::now() + Seconds(std::min(request->wait_s(), 30.0))};
        Expires(relay_parked_[r].until, -1 - r);
        lock.unlock();
        if (earlier) earlier->SendStatus(pb::WAIT);
        return pull;
      }
    }
    lock.unlock();
    pull->SendStatus(status);
    return pull;
  }

  grpc::ServerUnaryReactor* RelayResult(grpc::CallbackServerContext* context,
                                        const pb::RelayResultRequest* request,
                                        pb::PushReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    reply->set_protocol_version(kProtocolVersion);
    bool judged = false;
    const grpc::Status status = TakeRelayResult(*context, *request, reply, call, &judged);
    if (!judged) call->Finish(status);
    return call;
  }

  grpc::ServerReadReactor<pb::RelaySumChunk>* RelaySum(grpc::CallbackServerContext* context,
                                                      pb::PushReply* reply) override {
    reply->set_protocol_version(kProtocolVersion);
    return new SumStream(this, context, reply);
  }

 private:
  struct ClientState {
    bool registered = false;
    int64_t claimed = 0;  // samples claimed in this run (kept across restarts)
    int64_t num_samples = 0;
    double speed_ghz = 0;
    double bandwidth_mhz = 0;
    std::string session;
    Clock::time_point last_seen;
    double last_round_s = -1;
    double total_round_s = 0;
    int64_t results = 0;
    bool told_done = false;
    int relay = -1;  // the relay it is served through, or -1: directly
    std::string verify_key;  // for secure aggregation, as registered
  };
  struct Task {
    int64_t id = 0;
    size_t index = 0;  // in the Fit call's list
    std::shared_ptr<const FitInstructions> instructions;
    // The global model's chunks, shared by every task of the round.
    std::shared_ptr<const std::vector<pb::TaskChunk>> chunks;
    Clock::time_point opened;
    bool open = true;
    int64_t batch = 0;  // its relay's batch, or 0: sent directly
    // The round's secure aggregation session, which its model joins.
    std::shared_ptr<const pb::SecAggSetup> secagg;
  };

  // A stream being sent, as others may cancel it: its context, until the
  // stream is done.
  class Sending {
   public:
    explicit Sending(grpc::CallbackServerContext* context)
        : context_(context), progress_(Clock::now().time_since_epoch().count()) {}
    // A write went through (or the stream started).
    void Progress() { progress_.store(Clock::now().time_since_epoch().count()); }
    // Whether the stream has written nothing since `since`.
    bool StalledSince(Clock::time_point since) const {
      return Clock::time_point(Clock::duration(progress_.load())) < since;
    }
    void Cancel() {
      std::lock_guard<std::recursive_mutex> lock(mutex_);  // OnDone may run inside TryCancel
      if (context_) context_->TryCancel();
    }
    void Done() {
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      context_ = nullptr;
    }

   private:
    std::recursive_mutex mutex_;
    grpc::CallbackServerContext* context_;
    std::atomic<Clock::rep> progress_;
  };

  // One PullTask call (Chunk = TaskChunk) or RelayPull call (RelayTaskChunk).
  // It is answered once: with a status alone, or with the task (its status,
  // its header, then the round's shared model chunks, one write at a time).
  template <typename Chunk>
  class ModelStream final : public grpc::ServerWriteReactor<Chunk> {
   public:
    static constexpr bool kRelay = std::is_same_v<Chunk, pb::RelayTaskChunk>;

    ModelStream(Impl* server, grpc::CallbackServerContext* context)
        : sending(std::make_shared<Sending>(context)), server_(server) {}

    // Whose it is (a client's id, a relay's), once parked or sending (under mutex_).
    int owner = -1;
    const std::shared_ptr<Sending> sending;

    void SendStatus(pb::Status status) {
      status_.set_status(status);
      this->StartWriteAndFinish(&status_, grpc::WriteOptions(), grpc::Status::OK);
    }

    // `header` holds the task's (or batch's) header.
    void Send(Chunk header, std::shared_ptr<const std::vector<Chunk>> chunks) {
      sending->Progress();
      status_.set_status(pb::TASK);
      header_ = std::move(header);
      chunks_ = std::move(chunks);
      next_ = 0;
      WriteNext();
    }

    void OnWriteDone(bool ok) override {
      if (!ok) {  // the client went away
        this->Finish(grpc::Status::OK);
        return;
      }
      sending->Progress();
      if (next_ > 2) sent_bytes_ += (*chunks_)[next_ - 3].params().size();
      WriteNext();
    }

    void OnCancel() override {
      if constexpr (kRelay) {
        server_->CancelRelayPull(this);
      } else {
        server_->CancelPull(this);
      }
    }
    void OnDone() override {
      server_->SendingDone(this);
      delete this;
    }

   private:
    // The status, the header, then the chunks; the last leaves with the
    // call's status.
    void WriteNext() {
      const size_t total = 2 + chunks_->size();
      const size_t at = next_++;
      const Chunk* message = at == 0 ? &status_ : at == 1 ? &header_ : &(*chunks_)[at - 2];
      if (at + 1 < total) {
        this->StartWrite(message);
        return;
      }
      if (at >= 2) sent_bytes_ += message->params().size();
      if (server_->monitor_) {
        server_->monitor_->AddBytes(0, static_cast<int64_t>(header_.ByteSizeLong() + sent_bytes_));
      }
      this->StartWriteAndFinish(message, grpc::WriteOptions(), grpc::Status::OK);
    }

    Impl* const server_;
    Chunk status_;
    Chunk header_;
    std::shared_ptr<const std::vector<Chunk>> chunks_;
    size_t next_ = 0;         // the next message to write
    size_t sent_bytes_ = 0;   // model bytes written
  };
  using TaskStream = ModelStream<pb::TaskChunk>;
  using BatchStream = ModelStream<pb::RelayTaskChunk>;

  // The round loop's word on a result goes to the call that brought it
  // (a client's PushResult, a relay's RelayResult or RelaySum); `call` is
  // null once answered (or when nobody waits: a timeout).
  struct Verdict {
    const void* call = nullptr;  // identifies the call, for its cancellation
    pb::PushReply* reply = nullptr;
    std::function<void()> finish;  // ends the call (once its reply is written)
  };

  // What a PushResult has learnt of its result so far.
  struct PushState {
    int id = -1;
    Task task;
    int64_t registered = 0;
    size_t expected = 0;  // model values
    FitResult result;
    std::string why;  // why it is refused on arrival; "" = so far so good
  };

  // One PushResult call: its header, checked before anything of it is
  // believed, then the model chunks, one read at a time, each checked.
  class ResultStream final : public grpc::ServerReadReactor<pb::ResultChunk> {
   public:
    ResultStream(Impl* server, grpc::CallbackServerContext* context, pb::PushReply* reply)
        : server_(server), context_(context), reply_(reply) {
      StartRead(&chunk_);
    }

    void OnReadDone(bool ok) override {
      if (!have_header_) {
        have_header_ = true;
        if (!ok || !chunk_.has_header()) {
          Finish(server_->RefuseHeaderless(*context_));
          return;
        }
        // A copy: reading the model chunks into `chunk_` replaces its
        // header (a oneof).
        header_ = chunk_.header();
        bool read_on = false;
        const grpc::Status status = server_->BeginResult(*context_, header_, reply_, &state_, &read_on);
        if (!read_on) {
          Finish(status);
          return;
        }
      } else if (ok) {
        server_->AddChunk(chunk_, &state_);
      }
      if (ok && state_.why.empty()) {
        StartRead(&chunk_);
        return;
      }
      // Every chunk is in, or one was refused: the round loop judges it.
      if (!server_->DeliverResult(header_, std::move(state_),
                                  {this, reply_, [this] { Finish(grpc::Status::OK); }})) {
        Finish(grpc::Status::OK);
      }
    }

    void OnCancel() override { server_->CancelPush(this); }
    void OnDone() override { delete this; }

   private:
    Impl* const server_;
    grpc::CallbackServerContext* const context_;
    pb::PushReply* const reply_;
    pb::ResultChunk chunk_;
    pb::ResultHeader header_;
    bool have_header_ = false;
    PushState state_;
  };

  // What a RelaySum has learnt of its sum so far.
  struct SumState {
    int relay = -1;
    int64_t batch = 0;
    std::vector<size_t> indices;
    size_t expected = 0;  // bytes
    std::string bytes;
  };

  // One RelaySum call: its header, checked, then the sum's bytes, at most
  // the size a sum of this model has.
  class SumStream final : public grpc::ServerReadReactor<pb::RelaySumChunk> {
   public:
    SumStream(Impl* server, grpc::CallbackServerContext* context, pb::PushReply* reply)
        : server_(server), context_(context), reply_(reply) {
      StartRead(&chunk_);
    }

    void OnReadDone(bool ok) override {
      if (!have_header_) {
        have_header_ = true;
        const grpc::Status status =
            ok && chunk_.has_header()
                ? server_->BeginSum(*context_, chunk_.header(), &state_)
                : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a partial sum without a header");
        if (!status.ok()) {
          Finish(status);
          return;
        }
      } else if (ok) {
        if (!chunk_.has_sum() || state_.bytes.size() + chunk_.sum().size() > state_.expected) {
          Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              "a partial sum beyond the " + std::to_string(state_.expected) +
                                  " bytes it announced"));
          return;
        }
        state_.bytes += chunk_.sum();
      }
      if (ok) {
        StartRead(&chunk_);
        return;
      }
      server_->DeliverSum(std::move(state_), {this, reply_, [this] { Finish(grpc::Status::OK); }});
    }

    void OnCancel() override {
      server_->CancelVerdict(this, [this] { Finish(grpc::Status::CANCELLED); });
    }
    void OnDone() override { delete this; }

   private:
    Impl* const server_;
    grpc::CallbackServerContext* const context_;
    pb::PushReply* const reply_;
    pb::RelaySumChunk chunk_;
    bool have_header_ = false;
    SumState state_;
  };

  // What the round loop judges next: a result, or a relay's partial sum
  // (is_sum) of the results at `indices` (a null sum: it will not come).
  struct Arrival {
    size_t index = 0;
    FitResult result;
    std::shared_ptr<Verdict> verdict;  // null when no client waits for it (a timeout)
    int64_t batch = 0;    // the relay batch it belongs to, or 0
    bool summed = false;  // a relay's result, its model in the batch's sum
    bool is_sum = false;
    std::vector<size_t> indices;
    std::shared_ptr<const ModelSum> sum;
    std::string lost;  // why a null sum will not come, when it was refused
  };
  // A relay as the server knows it.
  struct RelayState {
    std::string session;
    Clock::time_point last_seen;
    std::set<int> clients;  // as of its last sync
  };
  // The tasks of one Fit call that go to one relay, with the model once.
  struct Batch {
    int relay = -1;
    pb::RelayTaskChunk header;
    std::shared_ptr<const std::vector<pb::RelayTaskChunk>> chunks;
    bool sent = false;
    std::vector<size_t> awaiting;  // indices of accepted results whose models its sum holds
    bool sum_queued = false;       // its sum (or its loss) awaits judging: no other is taken
    bool sum_in = false;           // judged
  };
  template <typename Stream>
  struct Parked {
    Stream* pull = nullptr;
    Clock::time_point until;
  };

  grpc::Status Registration(const grpc::CallbackServerContext& context,
                            const pb::RegisterRequest& request, pb::RegisterReply* reply) {
    grpc::Status refused = CheckSize(request, kMaxRegisterBytes, "a registration");
    if (!refused.ok()) return refused;
    int id = -1;
    refused = Authenticate(context, request.protocol_version(), request.client_id(), &id);
    if (!refused.ok()) return refused;
    const int64_t n = request.num_samples();
    const std::string impossible =
        ClaimProblem(n, request.speed_ghz(), request.bandwidth_mhz(), options_.max_samples);
    if (!impossible.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, impossible);
    if (!request.model_sha256().empty() && !IsHex(request.model_sha256(), 64)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "model_sha256 '" + Printable(request.model_sha256(), 80) +
                              "' is not a SHA-256 (64 lowercase hexadecimal digits)");
    }
    const std::string module_mismatch = ModuleMismatch(id, request.model_sha256());
    if (!module_mismatch.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, module_mismatch);
    }
    const std::string& verify_key = request.secagg_verify_key();
    if (!verify_key.empty() && verify_key.size() != secagg::kKeyBytes) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a secure aggregation verification key of " + std::to_string(verify_key.size()) +
                              " bytes; an Ed25519 key has " + std::to_string(secagg::kKeyBytes));
    }
    if (options_.secure_aggregation && verify_key.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "this run aggregates securely (secagg.protocol) and the client sent no "
                          "verification key for it");
    }
    if (options_.secure_aggregation && tls()) {
      const auto listed = secagg_roster_.find(id);
      if (listed == secagg_roster_.end() || listed->second != verify_key) {
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                            "its secure aggregation verification key is not the one secagg-roster "
                            "names for client " + std::to_string(id));
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ClientState& c = clients_[id];
    if (c.claimed > 0 && c.claimed != n) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "registered with " + std::to_string(c.claimed) +
                              " samples in this run; it may not claim " + std::to_string(n) + " now");
    }
    const auto now = Clock::now();
    if (options_.max_clients > 0 && !Alive(id, now) && CountAlive(now) >= options_.max_clients) {
      // Retryable: the client backs off with jitter (grpc_client.cc).
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "the server holds its most connected clients, " +
                              std::to_string(options_.max_clients) +
                              " (deploy.max_clients); retry in " +
                              FormatDouble(options_.heartbeat_timeout_s) + " s");
    }
    c.registered = true;
    c.relay = -1;  // directly now, whatever relay served it before
    c.claimed = n;
    c.num_samples = n;
    c.speed_ghz = request.speed_ghz();
    c.bandwidth_mhz = request.bandwidth_mhz();
    c.verify_key = verify_key;
    c.session = NewSession();
    c.last_seen = now;
    c.told_done = false;
    FillRegisterReply(c.session, reply);
    arrive_cv_.notify_all();
    return grpc::Status::OK;
  }

  // What a registration is answered with: the session, and the model and
  // settings the client is to use.
  void FillRegisterReply(const std::string& session, pb::RegisterReply* reply) const {
    reply->set_protocol_version(kProtocolVersion);
    reply->set_session(session);
    reply->set_heartbeat_s(options_.heartbeat_s);
    reply->set_num_params(options_.num_params);
    reply->set_chunk_bytes(static_cast<int64_t>(options_.chunk_bytes));
    pb::ModelSpec* m = reply->mutable_model();
    m->set_name(options_.model.name);
    *m->mutable_input_shape() = {options_.model.input_shape.begin(), options_.model.input_shape.end()};
    m->set_outputs(options_.model.outputs);
    *m->mutable_hidden() = {options_.model.hidden.begin(), options_.model.hidden.end()};
    m->set_profile_layer(options_.model.profile_layer);
    m->set_width(options_.model.width);
    m->set_file_sha256(options_.model.file_sha256);
  }

  // The global model as a task's (or a relay batch's) chunks, at most
  // chunk_bytes each.
  template <typename Chunk>
  std::shared_ptr<const std::vector<Chunk>> EncodeModel(const FlatParams& global) const {
    auto chunks = std::make_shared<std::vector<Chunk>>();
    const size_t per_chunk = std::max<size_t>(1, options_.chunk_bytes / sizeof(float));
    for (size_t at = 0; at < global.size(); at += per_chunk) {
      chunks->emplace_back();
      PutFloats(global, at, std::min(per_chunk, global.size() - at), chunks->back().mutable_params());
    }
    return chunks;
  }

  // Sends `task` on `pull`: the one task stream of its client, whose
  // earlier one (its client lost it and asked again) is cancelled, so that
  // a client holds at most one task's buffers at a time.
  void StartSending(TaskStream* pull, const Task& task) {
    pb::TaskChunk header;
    const FitInstructions& ins = *task.instructions;
    ToWire(ins, task.id, static_cast<int64_t>(ins.global->size()), header.mutable_header());
    if (task.secagg) *header.mutable_header()->mutable_secagg() = *task.secagg;
    SendOn(pull, std::move(header), task.chunks);
  }

  // The same for a relay's batch.
  void StartSending(BatchStream* pull, const Batch& batch) {
    SendOn(pull, batch.header, batch.chunks);
  }

  template <typename Chunk>
  void SendOn(ModelStream<Chunk>* pull, Chunk header,
              std::shared_ptr<const std::vector<Chunk>> chunks) {
    std::shared_ptr<Sending> earlier;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& slot = sending_[SendingKey(pull)];
      if (slot) earlier = slot;
      slot = pull->sending;
    }
    if (earlier) earlier->Cancel();
    pull->Send(std::move(header), std::move(chunks));
  }

  template <typename Chunk>
  void SendingDone(ModelStream<Chunk>* pull) {
    pull->sending->Done();
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = sending_.find(SendingKey(pull));
    if (it != sending_.end() && it->second == pull->sending) sending_.erase(it);
  }

  // Clients' streams under their ids, relays' under -1 - r.
  template <typename Chunk>
  static int SendingKey(const ModelStream<Chunk>* pull) {
    return ModelStream<Chunk>::kRelay ? -1 - pull->owner : pull->owner;
  }

  // A relay's sync: who it serves now. Each client it names is checked as a
  // registration would be; those it may not serve are named in the reply.
  grpc::Status SyncRelay(const grpc::CallbackServerContext& context,
                         const pb::RelaySyncRequest& request, pb::RelaySyncReply* reply) {
    const size_t limit = 1024 + 40 * static_cast<size_t>(options_.num_clients);
    grpc::Status refused = CheckSize(request, limit, "a relay's sync");
    int r = -1;
    if (refused.ok()) refused = AuthenticateRelay(context, request.protocol_version(), request.relay_id(), &r);
    if (refused.ok() && !request.session().empty()) refused = CheckSession(request.session());
    if (!refused.ok()) return refused;
    if (!options_.relays_refused.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "this run takes no relays: " + options_.relays_refused);
    }
    try {
      CheckRelayedIds(request, options_.num_clients);
    } catch (const Error& e) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
    }
    reply->set_protocol_version(kProtocolVersion);
    std::lock_guard<std::mutex> lock(mutex_);
    RelayState& relay = relays_[r];
    if (!request.session().empty() && request.session() != relay.session) {
      reply->set_status(pb::UNKNOWN_SESSION);  // the server restarted: sync afresh
      return grpc::Status::OK;
    }
    const auto now = Clock::now();
    if (request.session().empty()) {  // a relay (re)starting: what it served before is gone
      relay.session = NewSession();
      relay.clients.clear();
    }
    relay.last_seen = now;
    int alive = options_.max_clients > 0 ? CountAlive(now) : 0;
    std::set<int> serving;
    for (const pb::RelayedClient& c : request.clients()) {
      const bool was_alive = Alive(c.client_id(), now);
      const std::string why = TakeRelayed(r, c, was_alive, alive, now);
      if (why.empty()) {
        serving.insert(c.client_id());
        alive += was_alive ? 0 : 1;
      } else {
        reply->add_refused_ids(c.client_id());
        reply->add_refused_reasons(why);
      }
    }
    relay.clients = std::move(serving);
    reply->set_session(relay.session);
    reply->set_status(done_ ? pb::DONE : pb::WAIT);
    if (done_) TellRelayDone(r);
    FillRegisterReply("", reply->mutable_setup());
    reply->set_num_clients(options_.num_clients);
    reply->set_max_samples(options_.max_samples);
    reply->set_heartbeat_timeout_s(options_.heartbeat_timeout_s);
    arrive_cv_.notify_all();
    return grpc::Status::OK;
  }

  // Why relay `r` may not serve client `c` now, or "" once it does (mutex_
  // held): the checks of a registration, and a client is served one way at
  // a time.
  std::string TakeRelayed(int r, const pb::RelayedClient& c, bool was_alive, int alive,
                          Clock::time_point now) {
    const int id = c.client_id();
    ClientState& state = clients_[id];
    const int64_t n = c.num_samples();
    const std::string impossible = ClaimProblem(n, c.speed_ghz(), c.bandwidth_mhz(), options_.max_samples);
    if (!impossible.empty()) return impossible;
    if (state.claimed > 0 && state.claimed != n) {
      return "registered with " + std::to_string(state.claimed) + " samples in this run; it may not claim " +
             std::to_string(n) + " now";
    }
    if (was_alive && state.relay != r) {
      return state.relay < 0 ? "registered with the server directly"
                             : "served by relay " + std::to_string(state.relay);
    }
    if (!was_alive && options_.max_clients > 0 && alive >= options_.max_clients) {
      return "the server holds its most connected clients, " + std::to_string(options_.max_clients) +
             " (deploy.max_clients)";
    }
    if (!was_alive) state.told_done = false;
    state.registered = true;
    state.relay = r;
    state.claimed = n;
    state.num_samples = n;
    state.speed_ghz = c.speed_ghz();
    state.bandwidth_mhz = c.bandwidth_mhz();
    state.session.clear();  // it speaks to the server only through its relay
    state.last_seen = now;
    return "";
  }

  // Relay `r` heard from under `session`; what it should do next (mutex_ held).
  pb::Status TouchRelay(int r, const std::string& session) {
    RelayState& relay = relays_[r];
    if (relay.session.empty() || session != relay.session) return pb::UNKNOWN_SESSION;
    relay.last_seen = Clock::now();
    return done_ ? pb::DONE : pb::WAIT;
  }

  // A relay's result: the same checks as a client's PushResult (wire.h, the
  // open task, the registered sample count), and no model (its model goes
  // into the relay's sum once the result is accepted). Sets *judged when the
  // result went to the round loop, whose verdict ends `call`.
  grpc::Status TakeRelayResult(const grpc::CallbackServerContext& context,
                               const pb::RelayResultRequest& request, pb::PushReply* reply,
                               grpc::ServerUnaryReactor* call, bool* judged) {
    *judged = false;
    grpc::Status refused = CheckSize(request, kHeaderAllowance, "a relayed result");
    int r = -1;
    if (refused.ok()) refused = AuthenticateRelay(context, request.protocol_version(), request.relay_id(), &r);
    if (refused.ok()) refused = CheckSession(request.session());
    if (!refused.ok()) return refused;
    const pb::ResultHeader& header = request.result();
    const int id = header.client_id();
    if (id < 0 || id >= options_.num_clients) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a result of client " + std::to_string(id) + ", not one of 0.." +
                              std::to_string(options_.num_clients - 1));
    }
    FitResult result;
    std::string why;
    try {
      result = FromWire(header);
    } catch (const Error& e) {
      why = e.what();
    }
    Task task;
    int64_t registered = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (TouchRelay(r, request.session()) == pb::UNKNOWN_SESSION) {
        reply->set_reason("unknown session: sync again");
        return grpc::Status::OK;
      }
      const auto it = tasks_.find(id);
      if (clients_[id].relay != r || it == tasks_.end() || !it->second.open ||
          it->second.batch != request.batch_id() || it->second.id != header.task_id()) {
        const std::string stale = "task " + std::to_string(header.task_id()) + " of client " +
                                  std::to_string(id) + " is not open in batch " +
                                  std::to_string(request.batch_id()) + " of this relay";
        refusals_.Refuse("relay " + std::to_string(r), "stale results", "RelayResult: " + stale);
        reply->set_reason(stale);
        return grpc::Status::OK;
      }
      task = it->second;
      registered = clients_[id].num_samples;
    }
    if (why.empty() && header.num_samples() != registered) {
      why = "claims " + std::to_string(header.num_samples()) + " samples; it registered " +
            std::to_string(registered) + ", its aggregation weight for the run";
    }
    if (why.empty() && header.num_params() != 0) {
      why = "a relayed result brings " + std::to_string(header.num_params()) +
            " model values; its model belongs in its relay's sum";
    }
    const double elapsed = Since(task.opened);
    if (!why.empty()) {
      refusals_.Refuse("relay " + std::to_string(r), "malformed results",
                       "RelayResult of client " + std::to_string(id) + ": " + Printable(why, 400));
      result = Failed(id, "refused on arrival: " + why, /*timed_out=*/false);
    } else if (result.ok) {
      const double profiling_s = header.profiling_s();
      result.client_id = id;  // whatever it claimed, this is who it is
      result.num_samples = registered;
      result.cost = ResultCost();
      result.cost.time_s = elapsed;
      result.cost.profiling_time_s = std::clamp(profiling_s, 0.0, elapsed);
      result.summed = task.instructions->train.epochs > 0;
    } else {
      result = Failed(id, result.error.empty() ? "failed at its relay" : result.error, result.timed_out);
      result.cost.time_s = elapsed;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = tasks_.find(id);
    if (stopping_ || it == tasks_.end() || !it->second.open || it->second.id != task.id) {
      reply->set_reason("the round ended while the result arrived");
      return grpc::Status::OK;
    }
    it->second.open = false;
    if (result.ok) {
      ClientState& c = clients_[id];
      c.last_round_s = elapsed;
      c.total_round_s += elapsed;
      c.results += 1;
    }
    Arrival a;
    a.index = task.index;
    a.batch = task.batch;
    a.summed = result.summed;
    a.result = std::move(result);
    a.verdict = std::make_shared<Verdict>(Verdict{call, reply, [call] { call->Finish(grpc::Status::OK); }});
    arrived_.push_back(std::move(a));
    arrive_cv_.notify_all();
    *judged = true;
    return grpc::Status::OK;
  }

  // A relay's sum header: its batch, the clients it names (each with a task
  // in the batch, once) and its size, which must be that of a sum of this
  // model.
  grpc::Status BeginSum(const grpc::CallbackServerContext& context, const pb::RelaySumHeader& header,
                        SumState* state) {
    int r = -1;
    grpc::Status refused = CheckSize(header, 64 + 8 * static_cast<size_t>(options_.num_clients), "a sum header");
    if (refused.ok()) refused = AuthenticateRelay(context, header.protocol_version(), header.relay_id(), &r);
    if (refused.ok()) refused = CheckSession(header.session());
    if (!refused.ok()) return refused;
    std::lock_guard<std::mutex> lock(mutex_);
    if (TouchRelay(r, header.session()) == pb::UNKNOWN_SESSION) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "unknown session: sync again");
    }
    const auto b = batches_.find(header.batch_id());
    if (b == batches_.end() || b->second.relay != r || b->second.sum_in || b->second.sum_queued) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "batch " + std::to_string(header.batch_id()) + " awaits no sum of this relay");
    }
    std::set<int> named;
    for (int id : header.client_ids()) {
      const auto t = tasks_.find(id);
      if (!named.insert(id).second || t == tasks_.end() || t->second.batch != header.batch_id()) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "the sum names client " + std::to_string(id) +
                                ", twice or without a task in its batch");
      }
      state->indices.push_back(t->second.index);
    }
    state->relay = r;
    state->batch = header.batch_id();
    state->expected = sum_bytes_;
    if (header.bytes() != static_cast<int64_t>(sum_bytes_)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a sum of " + std::to_string(header.bytes()) + " bytes; one of this model has " +
                              std::to_string(sum_bytes_));
    }
    state->bytes.reserve(sum_bytes_);
    return grpc::Status::OK;
  }

  // A relay's sum, read whole: the round loop judges it (ModelSum::Parse
  // first checks it is a sum that its count of models could make).
  void DeliverSum(SumState state, Verdict verdict) {
    Arrival a;
    a.is_sum = true;
    a.batch = state.batch;
    a.indices = std::move(state.indices);
    const std::string origin = "relay " + std::to_string(state.relay) + "'s sum";
    std::string why;
    if (state.bytes.size() != state.expected) {
      why = "the sum ended after " + std::to_string(state.bytes.size()) + " of its " +
            std::to_string(state.expected) + " bytes";
    } else {
      try {
        a.sum = std::make_shared<const ModelSum>(ModelSum::Parse(state.bytes, origin));
      } catch (const Error& e) {
        why = e.what();
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const auto b = batches_.find(state.batch);
    if (stopping_ || b == batches_.end() || b->second.sum_in || b->second.sum_queued) {
      verdict.reply->set_reason("the round ended while the sum arrived");
      verdict.finish();
      return;
    }
    if (!why.empty()) {
      // Refused whole: its results' models are lost to the round.
      refusals_.Refuse("relay " + std::to_string(state.relay), "malformed sums", "RelaySum: " + Printable(why, 400));
      verdict.reply->set_reason(Printable(why, kMaxErrorLength));
      verdict.finish();
      b->second.sum_queued = true;
      a.indices = b->second.awaiting;
      a.sum.reset();
      a.lost = "its relay's sum was refused: " + Printable(why, 400);
      arrived_.push_back(std::move(a));
      arrive_cv_.notify_all();
      return;
    }
    b->second.sum_queued = true;  // it came: no other will be taken
    a.verdict = std::make_shared<Verdict>(std::move(verdict));
    arrived_.push_back(std::move(a));
    arrive_cv_.notify_all();
  }

  // Takes client `id`'s parked pull out; mutex_ held, the caller answers it.
  TaskStream* Unpark(int id) {
    const auto it = parked_.find(id);
    TaskStream* pull = it->second.pull;
    parked_.erase(it);
    clients_[id].last_seen = Clock::now();
    return pull;
  }

  // Takes relay `r`'s parked batch request out; mutex_ held, the caller answers it.
  BatchStream* UnparkRelay(int r) {
    const auto it = relay_parked_.find(r);
    BatchStream* pull = it->second.pull;
    relay_parked_.erase(it);
    relays_[r].last_seen = Clock::now();
    return pull;
  }

  // Relay `r` has heard that the run is done, and so, through it, have its
  // clients. mutex_ held.
  void TellRelayDone(int r) {
    for (int id : relays_[r].clients) clients_[id].told_done = true;
    arrive_cv_.notify_all();
  }

  // The parked pull of client `owner` (a relay's: -1 - r) waits until
  // `until` (mutex_ held): the waker answers it then.
  void Expires(Clock::time_point until, int owner) {
    const bool sooner = expiries_.empty() || until < expiries_.begin()->first;
    expiries_.emplace(until, owner);
    if (sooner) waker_cv_.notify_all();
  }

  // Answers parked pulls whose wait has ended, until the server stops. It
  // sleeps until the earliest wait ends (and sweeps at most every 100 ms),
  // taking the ended waits in time order, so that an idle fleet costs no
  // scan of every parked pull.
  void WakeExpiredPulls() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto last_sweep = Clock::now();
    while (!stopping_) {
      const auto next = expiries_.empty() ? Clock::now() + std::chrono::seconds(1)
                                          : expiries_.begin()->first;
      waker_cv_.wait_until(lock, std::max(next, last_sweep + std::chrono::milliseconds(100)));
      if (stopping_) break;
      const auto now = Clock::now();
      last_sweep = now;
      const pb::Status status = done_ ? pb::DONE : pb::WAIT;
      std::vector<TaskStream*> ended;
      std::vector<BatchStream*> relays_ended;
      while (!expiries_.empty() && expiries_.begin()->first <= now) {
        const auto [until, owner] = *expiries_.begin();
        expiries_.erase(expiries_.begin());
        // Skip a wait answered before its end (its pull is no longer parked,
        // or another parked since).
        if (owner >= 0) {
          const auto it = parked_.find(owner);
          if (it != parked_.end() && it->second.until == until) ended.push_back(Unpark(owner));
        } else {
          const int r = -1 - owner;
          const auto it = relay_parked_.find(r);
          if (it == relay_parked_.end() || it->second.until != until) continue;
          relays_ended.push_back(UnparkRelay(r));
          if (done_) TellRelayDone(r);
        }
      }
      if (ended.empty() && relays_ended.empty()) continue;
      lock.unlock();
      for (TaskStream* pull : ended) pull->SendStatus(status);
      for (BatchStream* pull : relays_ended) pull->SendStatus(status);
      lock.lock();
    }
  }

  // A parked pull whose client went away is answered (gRPC needs every
  // call finished); one already taken out is answered by whoever took it.
  void CancelPull(TaskStream* pull) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = parked_.find(pull->owner);
      if (it == parked_.end() || it->second.pull != pull) return;
      Unpark(pull->owner);
    }
    pull->Finish(grpc::Status::CANCELLED);
  }

  void CancelRelayPull(BatchStream* pull) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = relay_parked_.find(pull->owner);
      if (it == relay_parked_.end() || it->second.pull != pull) return;
      UnparkRelay(pull->owner);
    }
    pull->Finish(grpc::Status::CANCELLED);
  }

  // A result whose first message is not a header.
  grpc::Status RefuseHeaderless(const grpc::CallbackServerContext& context) {
    const std::string why = "a result without a readable header (empty, over the " +
                            std::to_string(MessageLimit()) + "-byte message limit, or malformed)";
    // Under TLS the certificate says who sent it: its round counts the refusal.
    const int certified = tls() ? CertifiedClient(context).id : -1;
    if (certified >= 0 && certified < options_.num_clients) CloseTaskAsRefused(certified, why);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
  }

  // Every check the server can make happens before it answers: the header
  // and its numbers (wire.h), the sample count against the registered one,
  // the model's size, then the round loop's own checks (Server::Validate,
  // the strategy's), whose verdict is the reply. `accepted` means the result
  // counts in its round. Sets *read_on when the model chunks are to be read;
  // otherwise the call ends with the returned status (and `reply`).
  grpc::Status BeginResult(const grpc::CallbackServerContext& context, const pb::ResultHeader& header,
                           pb::PushReply* reply, PushState* state, bool* read_on) {
    *read_on = false;
    int id = -1;
    grpc::Status refused = Authenticate(context, header.protocol_version(), header.client_id(), &id);
    if (!refused.ok()) return refused;
    refused = CheckSession(header.session());
    if (!refused.ok()) return refused;
    // The header's own checks come before anything is looked up for it, so a
    // malformed one is refused whatever task it names.
    try {
      state->result = FromWire(header);
    } catch (const Error& e) {
      return RefuseResult(id, e.what(), reply);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (Touch(id, header.session()) == pb::UNKNOWN_SESSION) {
        reply->set_reason("unknown session: register again");
        return grpc::Status::OK;
      }
      const auto it = tasks_.find(id);
      if (it == tasks_.end() || !it->second.open || it->second.id != header.task_id()) {
        // A stale result (another model version's task, or one past its
        // round's deadline): that round already counted the client as timed
        // out, so it is only logged, never aggregated.
        const std::string why =
            "task " + std::to_string(header.task_id()) + " is not open: its round has ended";
        refusals_.Refuse("client " + std::to_string(id), "stale results",
                         "PushResult: result ignored: " + why);
        reply->set_reason(why);
        return grpc::Status::OK;
      }
      state->task = it->second;
      state->registered = clients_[id].num_samples;
    }
    state->id = id;
    // A model under secure aggregation comes only masked, in its session; a
    // failed result (the client's error says why) brings none.
    state->expected = state->result.ok && state->task.instructions->train.epochs > 0 && !state->task.secagg
                          ? state->task.instructions->global->size()
                          : 0;
    if (header.num_samples() != state->registered) {
      // The weight no server can verify is fixed at registration.
      state->why = "claims " + std::to_string(header.num_samples()) + " samples; it registered " +
                   std::to_string(state->registered) + ", its aggregation weight for the run";
    } else if (header.num_params() != static_cast<int64_t>(state->expected)) {
      state->why = "announced " + std::to_string(header.num_params()) + " model values, expected " +
                   std::to_string(state->expected);
    } else {
      state->result.params.reserve(state->expected);  // the server's own model size
    }
    *read_on = true;
    return grpc::Status::OK;
  }

  // One model chunk of a result, checked.
  void AddChunk(const pb::ResultChunk& chunk, PushState* state) const {
    if (!chunk.has_params()) {
      state->why = "a second header in one result";
    } else if (chunk.params().size() > options_.chunk_bytes) {
      state->why = "a model chunk of " + std::to_string(chunk.params().size()) +
                   " bytes, over the chunk size of " + std::to_string(options_.chunk_bytes) +
                   " (deploy.chunk_kb)";
    } else {
      try {
        AppendFloats(chunk.params(), state->expected, &state->result.params);
      } catch (const Error& e) {
        state->why = e.what();
      }
    }
  }

  // Hands a read result to the round loop, whose verdict answers `verdict`.
  // False when the call is to end now (its reply says why).
  bool DeliverResult(const pb::ResultHeader& header, PushState state, Verdict verdict) {
    const int id = state.id;
    if (state.why.empty() && state.result.params.size() != state.expected) {
      state.why = "the result ended after " + std::to_string(state.result.params.size()) + " of " +
                  std::to_string(state.expected) + " model values (cut off, or a chunk over the " +
                  std::to_string(MessageLimit()) + "-byte message limit)";
    }
    const double elapsed = Since(state.task.opened);
    if (monitor_) {
      monitor_->AddBytes(
          static_cast<int64_t>(header.ByteSizeLong() + state.result.params.size() * sizeof(float)), 0);
    }
    FitResult result;
    if (!state.why.empty()) {
      result = Failed(id, "refused on arrival: " + state.why, /*timed_out=*/false);
    } else {
      result = std::move(state.result);
      result.client_id = id;  // whatever it claimed, this is who it is
      result.num_samples = state.registered;
      result.cost = ResultCost();
      result.cost.time_s = elapsed;
      result.cost.profiling_time_s = std::clamp(header.profiling_s(), 0.0, elapsed);
      result.summed = result.ok && state.task.secagg != nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = tasks_.find(id);
    if (stopping_ || it == tasks_.end() || !it->second.open || it->second.id != state.task.id) {
      verdict.reply->set_reason("the round ended while the result arrived");
      return false;
    }
    it->second.open = false;
    if (state.why.empty()) {
      ClientState& c = clients_[id];
      c.last_round_s = elapsed;
      c.total_round_s += elapsed;
      c.results += 1;
    }
    Arrival a;
    a.index = state.task.index;
    a.summed = result.summed;
    a.result = std::move(result);
    a.verdict = std::make_shared<Verdict>(std::move(verdict));
    arrived_.push_back(std::move(a));
    arrive_cv_.notify_all();
    return true;
  }

  // The round loop's verdict on a pushed result ends its call; "" accepts.
  void Answer(const std::shared_ptr<Verdict>& verdict, const std::string& why) {
    if (!verdict) return;
    const void* call = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::swap(call, verdict->call);
    }
    if (!call) return;  // its client went away
    verdict->reply->set_accepted(why.empty());
    verdict->reply->set_reason(Printable(why, kMaxErrorLength));
    verdict->finish();
  }

  // A push whose client went away while its result waited for a verdict is
  // finished now; the round loop still judges the result.
  void CancelPush(grpc::ServerReadReactor<pb::ResultChunk>* call) {
    CancelVerdict(call, [call] { call->Finish(grpc::Status::CANCELLED); });
  }

  // A call whose result waits for the round loop's verdict, cancelled by
  // its caller, is finished now with `finish`; the round loop still judges
  // the result.
  void CancelVerdict(const void* call, const std::function<void()>& finish) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bool waiting = false;
      for (Arrival& a : arrived_) {
        if (a.verdict && a.verdict->call == call) {
          a.verdict->call = nullptr;
          waiting = true;
        }
      }
      if (!waiting) return;
    }
    finish();
  }

  // Housekeeping while the round loop waits: refusal counts whose window
  // passed are written without waiting for the next refusal, and every 30 s
  // the heap's free pages go back to the system. gRPC reads an oversized
  // request whole before it drops it (docs/deploy.md), and glibc would keep
  // those pages for the rest of the run.
  void Tidy() {
    refusals_.Flush();
    const auto now = Clock::now();
    if (now - last_trim_ < std::chrono::seconds(30)) return;
    last_trim_ = now;
    malloc_trim(0);
  }

  // Client `id` is there while it is heard from, or while a task request
  // of its waits at the server (parked).
  bool Alive(int id, Clock::time_point now) const {
    const ClientState& c = clients_[id];
    if (c.relay >= 0) {  // while its relay is there and says it is
      const auto it = relays_.find(c.relay);
      return c.registered && RelayAlive(c.relay, now) && it->second.clients.count(id) > 0;
    }
    return c.registered && (now - c.last_seen <= Seconds(options_.heartbeat_timeout_s) ||
                            parked_.count(id) > 0);
  }

  bool RelayAlive(int r, Clock::time_point now) const {
    const auto it = relays_.find(r);
    return it != relays_.end() && (now - it->second.last_seen <= Seconds(options_.heartbeat_timeout_s) ||
                                   relay_parked_.count(r) > 0);
  }

  int CountAlive(Clock::time_point now) const {
    int n = 0;
    for (int id = 0; id < options_.num_clients; ++id) n += Alive(id, now) ? 1 : 0;
    return n;
  }

  // Marks client `id` as heard from under `session`; what it should do next.
  pb::Status Touch(int id, const std::string& session) {
    ClientState& c = clients_[id];
    if (!c.registered || session != c.session) return pb::UNKNOWN_SESSION;
    c.last_seen = Clock::now();
    if (done_) {
      c.told_done = true;
      arrive_cv_.notify_all();
      return pb::DONE;
    }
    return pb::WAIT;
  }

  // Why client `id`, whose model.file has SHA-256 `sha256` ("" = none, else
  // 64 hex digits), cannot build the server's model, or "".
  std::string ModuleMismatch(int id, const std::string& sha256) const {
    const std::string client = "client " + std::to_string(id);
    const std::string& ours = options_.model.file_sha256;
    if (ours.empty()) {
      return sha256.empty() ? "" : client + " names a model.file (SHA-256 " + sha256 +
                                       "), but the server trains the built-in model " +
                                       options_.model.name + "; drop model.file from its config";
    }
    if (sha256 == ours) return "";
    return client + (sha256.empty() ? " has no model.file" : "'s model.file has SHA-256 " + sha256) +
           ", but the server trains the TorchScript module with SHA-256 " + ours +
           "; give the client the same file (--set model.file=PATH)";
  }

  // A request over its call's own bound is refused before any field of it is
  // looked at.
  static grpc::Status CheckSize(const google::protobuf::Message& request, size_t limit,
                                const std::string& what) {
    const size_t size = request.ByteSizeLong();
    if (size <= limit) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        what + " of " + std::to_string(size) + " bytes, over its limit of " +
                            std::to_string(limit));
  }

  // What a heartbeat or task request passes first, in order: its size, who
  // it is (*id), its session.
  grpc::Status Admit(const grpc::ServerContextBase& context, const google::protobuf::Message& request,
                     const std::string& what, uint32_t version, int claimed,
                     const std::string& session, int* id) {
    grpc::Status refused = CheckSize(request, kMaxSmallRequestBytes, what);
    if (refused.ok()) refused = Authenticate(context, version, claimed, id);
    if (refused.ok()) refused = CheckSession(session);
    return refused;
  }

  // The id of the calling relay: its certificate's (mutual TLS), which must
  // equal the id it claims, or the claim itself without TLS.
  grpc::Status AuthenticateRelay(const grpc::ServerContextBase& context, uint32_t version, int claimed,
                                 int* relay) {
    const std::string mismatch = ProtocolMismatch(version, "the relay");
    if (!mismatch.empty()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, mismatch);
    if (tls()) {
      const CertifiedPeer peer = CertifiedClient(context);
      if (peer.relay < 0) {
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                            "only a relay's certificate may make a relay's calls" +
                                (peer.problem.empty() ? "" : " (" + peer.problem + ")"));
      }
      if (peer.relay != claimed) {
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                            "certificate of relay " + std::to_string(peer.relay) +
                                " used to speak as relay " + std::to_string(claimed));
      }
    }
    if (claimed < 0 || claimed >= 1000000000) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "relay id " + std::to_string(claimed));
    }
    *relay = claimed;
    return grpc::Status::OK;
  }

  // Sessions are the server's own (NewSession): anything else is malformed.
  static grpc::Status CheckSession(const std::string& session) {
    if (IsHex(session, 32)) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "session '" + Printable(session, 40) + "' is not one this server issues");
  }

  // A result refused before its task was looked up: logged, and its task
  // (if open) counts it as refused.
  grpc::Status RefuseResult(int id, const std::string& why, pb::PushReply* reply) {
    refusals_.Refuse("client " + std::to_string(id), "malformed results",
                     "PushResult: " + Printable(why, 400));
    CloseTaskAsRefused(id, why);
    reply->set_reason(Printable(why, kMaxErrorLength));
    return grpc::Status::OK;
  }

  // Client `id`'s open task, if it has one, ends with a refusal its round
  // counts.
  void CloseTaskAsRefused(int id, const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = tasks_.find(id);
    if (it == tasks_.end() || !it->second.open) return;
    it->second.open = false;
    Arrival a;
    a.index = it->second.index;
    a.result = Failed(id, "refused on arrival: " + why, false);
    arrived_.push_back(std::move(a));
    arrive_cv_.notify_all();
  }

  // The id of the calling client: its certificate's (mutual TLS), which
  // must equal the id it claims, or the claim itself without TLS.
  grpc::Status Authenticate(const grpc::ServerContextBase& context, uint32_t version, int claimed,
                            int* id) {
    const std::string mismatch = ProtocolMismatch(version, "the client");
    if (!mismatch.empty()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, mismatch);
    if (tls()) {
      const CertifiedPeer peer = CertifiedClient(context);
      if (peer.id < 0) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, peer.problem);
      if (peer.id != claimed) {
        return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                            "certificate of client " + std::to_string(peer.id) +
                                " used to speak as client " + std::to_string(claimed));
      }
    }
    if (claimed < 0 || claimed >= options_.num_clients) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "client id " + std::to_string(claimed) + " is not one of 0.." +
                              std::to_string(options_.num_clients - 1) + " (clients.count)");
    }
    *id = claimed;
    return grpc::Status::OK;
  }

  // The size of a partial sum of this model (ModelSum::Serialize).
  static size_t SumBytes(int64_t num_params) {
    ModelSum sum;
    sum.Reset(static_cast<size_t>(std::max<int64_t>(0, num_params)));
    return sum.Serialize().size();
  }

  const GrpcServerOptions options_;
  const size_t sum_bytes_;
  const std::map<int64_t, std::string> secagg_roster_;
  std::atomic<double> round_timeout_s_{options_.round_timeout_s};  // a relay's follows each batch
  RunMonitor* const monitor_ = RunMonitor::Active();  // --monitor's, or null
  RefusalLog refusals_;  // before server_: the interceptors use it until the server is gone
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::thread waker_;  // WakeExpiredPulls

  mutable std::mutex mutex_;
  std::condition_variable arrive_cv_;  // a result arrived, a client registered or heard DONE
  std::condition_variable waker_cv_;   // the server stops, or a wait ends sooner
  // When parked pulls' waits end, by owner (SendingKey's numbering); an
  // entry whose pull was answered sooner is skipped when its time comes.
  std::multimap<Clock::time_point, int> expiries_;
  std::vector<ClientState> clients_;
  std::map<int, Task> tasks_;      // open tasks of the current Fit call, by client id
  std::map<int, Parked<TaskStream>> parked_;  // waiting task requests, by client id
  std::map<int, std::shared_ptr<Sending>> sending_;  // streams being sent (SendingKey)
  std::map<int, RelayState> relays_;                 // by relay id
  std::map<int, Parked<BatchStream>> relay_parked_;  // waiting batch requests, by relay id
  std::map<int64_t, Batch> batches_;                 // of the current Fit call
  std::shared_ptr<SecAggRendezvous> secagg_;         // the current Fit call's session
  // The run's id, bound into every secure aggregation session (drawn at
  // start, kept by checkpoints).
  secagg::Bytes run_id_ = secagg::RandomBytes(secagg::kKeyBytes);
  int64_t next_batch_id_ = 1;
  std::deque<Arrival> arrived_;
  int64_t next_task_id_ = 1;
  Clock::time_point last_trim_;  // the round loop's thread alone
  bool done_ = false;
  bool stopping_ = false;
};

GrpcTransport::GrpcTransport(const GrpcServerOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}
GrpcTransport::~GrpcTransport() = default;
std::string GrpcTransport::address() const { return impl_->address(); }
int GrpcTransport::num_clients() const { return impl_->num_clients(); }
std::vector<ClientInfo> GrpcTransport::Available() { return impl_->Available(); }
void GrpcTransport::SetRoundTimeout(double seconds) { impl_->SetRoundTimeout(seconds); }
void GrpcTransport::Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) {
  impl_->Fit(tasks, sink);
}
void GrpcTransport::Open() {
  const GrpcServerOptions& o = impl_->options();
  const int wanted = o.min_clients == 0 ? o.num_clients : std::min(o.min_clients, o.num_clients);
  LogProgress("fedprof server: listening on " + address() +
              (o.tls_dir.empty() ? " (INSECURE)" : " (mutual TLS)") + "; waiting for " +
              std::to_string(wanted) + " of " + std::to_string(o.num_clients) + " clients");
  WaitForClients(wanted, o.start_timeout_s);
}
void GrpcTransport::Close() { Finish(2 * impl_->options().heartbeat_s + 1); }
void GrpcTransport::WaitForClients(int count, double timeout_s) {
  if (impl_->WaitForClients(count, timeout_s)) return;
  throw Error("only " + std::to_string(impl_->Available().size()) + " of the " + std::to_string(count) +
              " clients needed (deploy.min_clients) were available within " + std::to_string(timeout_s) +
              " s (deploy.start_timeout_s)");
}
std::vector<ClientInfo> GrpcTransport::AvailableOrWait() {
  std::vector<ClientInfo> available = impl_->Available();
  if (!available.empty()) return available;
  const double timeout_s = impl_->options().start_timeout_s;
  LogWarning("every client has left; waiting up to " + FormatDouble(timeout_s) +
             " s (deploy.start_timeout_s) for one to come back");
  if (!impl_->WaitForClients(1, timeout_s)) {
    throw Error("every client has left and none came back within " + FormatDouble(timeout_s) +
                " s (deploy.start_timeout_s)");
  }
  return impl_->Available();
}
void GrpcTransport::Finish(double grace_s) { impl_->Finish(grace_s); }
std::vector<ClientDescription> GrpcTransport::Describe() { return impl_->Describe(); }
std::string GrpcTransport::SaveState() { return impl_->SaveClaims(); }
void GrpcTransport::LoadState(const std::string& text) { impl_->LoadClaims(text); }

}  // namespace fedprof
