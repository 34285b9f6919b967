#include "fedprof/transport/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "federation.grpc.pb.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/monitor/monitor.h"
#include "fedprof/transport/refusal_log.h"
#include "fedprof/transport/tls.h"
#include "fedprof/transport/wire.h"

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
      // A cancelled call is a client that went away, not a refusal.
      if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
        std::string method = info_->method() ? info_->method() : "?";
        method = method.substr(method.rfind('/') + 1);
        const std::string kind = CodeName(status.error_code());
        // gRPC's own refusals of a request that does not parse say nothing.
        const std::string& why = status.error_message();
        log_->Refuse(Caller(*info_->server_context(), tls_), method + " " + kind,
                     method + ": " +
                         (why.empty() ? "a request that is " + kind : Printable(why, 400)));
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
      case grpc::StatusCode::RESOURCE_EXHAUSTED: return "over its size limit";
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

class GrpcTransport::Impl final : public pb::Federation::Service {
 public:
  explicit Impl(const GrpcServerOptions& options) : options_(options), clients_(options.num_clients) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(options.listen, ServerCredentials(options.tls_dir), &port);
    builder.RegisterService(this);
    const int limit = static_cast<int>(MessageLimit());
    builder.SetMaxReceiveMessageSize(limit);
    builder.SetMaxSendMessageSize(limit);
    // Each waiting client holds a handler thread (PullTask long-polls). With
    // gRPC's default of 2 idle pollers, the threads those calls free are
    // ended and others started for the next round's calls; keep them.
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                                std::clamp(options.num_clients + 2, 2, 1024));
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(std::make_unique<RefusalInterceptorFactory>(&refusals_, tls()));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) {
      throw Error("--listen " + options.listen + ": cannot listen there (in use, or not an address "
                  "of this machine)");
    }
    address_ = options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(port);
    if (monitor_) monitor_->SetConnectedSource([this] { return static_cast<int>(Available().size()); });
  }

  ~Impl() override {
    if (monitor_) monitor_->SetConnectedSource({});
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    task_cv_.notify_all();
    verdict_cv_.notify_all();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }

  // The largest message of any call: a model chunk, or a result header.
  size_t MessageLimit() const { return std::max(options_.chunk_bytes, kHeaderAllowance) + 4096; }

  bool tls() const { return !options_.tls_dir.empty(); }
  const std::string& address() const { return address_; }
  int num_clients() const { return options_.num_clients; }
  const GrpcServerOptions& options() const { return options_; }

  // --- The round loop's side -------------------------------------------

  std::vector<ClientInfo> Available() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ClientInfo> out;
    const auto now = Clock::now();
    for (int id = 0; id < options_.num_clients; ++id) {
      const ClientState& c = clients_[id];
      if (!Alive(c, now)) continue;
      out.push_back({id, c.num_samples, c.last_round_s});
    }
    return out;
  }

  void Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) {
    // Each task holds its client's instructions; θ stays one shared copy.
    std::vector<std::shared_ptr<const FitInstructions>> instructions;
    instructions.reserve(tasks.size());
    for (const ClientInstructions& c : tasks) {
      instructions.push_back(std::make_shared<const FitInstructions>(c.instructions));
    }
    std::unique_lock<std::mutex> lock(mutex_);
    const auto start = Clock::now();
    for (size_t i = 0; i < tasks.size(); ++i) {
      Task& t = tasks_[tasks[i].client_id];
      t.id = next_task_id_++;
      t.index = i;
      t.instructions = std::move(instructions[i]);
      t.opened = start;
    }
    task_cv_.notify_all();
    const auto deadline = start + Seconds(options_.round_timeout_s);
    size_t remaining = tasks.size();
    while (remaining > 0) {
      while (!arrived_.empty()) {
        Arrival a = std::move(arrived_.front());
        arrived_.pop_front();
        lock.unlock();
        const std::string why = sink(a.index, std::move(a.result));
        lock.lock();
        // The client that pushed it is told the round loop's own verdict.
        if (a.verdict) {
          a.verdict->given = true;
          a.verdict->why = why;
          verdict_cv_.notify_all();
        }
        --remaining;
      }
      if (remaining == 0) break;
      const auto now = Clock::now();
      for (auto& [id, task] : tasks_) {
        if (!task.open) continue;
        std::string why;
        if (!Alive(clients_[id], now)) {
          why = "sent nothing for " + std::to_string(options_.heartbeat_timeout_s) +
                " s (deploy.heartbeat_timeout_s): left the round";
        } else if (now >= deadline) {
          why = "no result within " + std::to_string(options_.round_timeout_s) +
                " s (deploy.round_timeout_s)";
        }
        if (why.empty()) continue;
        task.open = false;
        FitResult r = Failed(id, why, /*timed_out=*/true);
        r.cost.time_s = Since(task.opened);
        arrived_.push_back({task.index, std::move(r), nullptr});
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
  }

  void WaitForClients(int count, double timeout_s) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto deadline = Clock::now() + Seconds(timeout_s);
    while (true) {
      const int alive = CountAlive(Clock::now());
      if (alive >= count) return;
      if (Clock::now() >= deadline) {
        throw Error("only " + std::to_string(alive) + " of the " + std::to_string(count) +
                    " clients needed (deploy.min_clients) were available within " +
                    std::to_string(timeout_s) + " s (deploy.start_timeout_s)");
      }
      lock.unlock();
      Tidy();
      lock.lock();
      arrive_cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(200)));
    }
  }

  void Finish(double grace_s) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_ = true;
    task_cv_.notify_all();
    const auto deadline = Clock::now() + Seconds(grace_s);
    while (Clock::now() < deadline) {
      bool all_told = true;
      const auto now = Clock::now();
      for (const ClientState& c : clients_) all_told = all_told && (!Alive(c, now) || c.told_done);
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

  std::string SaveClaims() const {
    std::lock_guard<std::mutex> lock(mutex_);
    nlohmann::json claims = nlohmann::json::object();
    for (size_t k = 0; k < clients_.size(); ++k) {
      if (clients_[k].claimed > 0) claims[std::to_string(k)] = clients_[k].claimed;
    }
    return claims.dump();
  }

  void LoadClaims(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (text.empty()) return;
    try {
      const nlohmann::json claims = nlohmann::json::parse(text);
      for (const auto& [key, value] : claims.items()) {
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

  grpc::Status Register(grpc::ServerContext* context, const pb::RegisterRequest* request,
                        pb::RegisterReply* reply) override {
    grpc::Status refused = CheckSize(*request, kMaxRegisterBytes, "a registration");
    if (!refused.ok()) return refused;
    int id = -1;
    refused = Authenticate(*context, request->protocol_version(), request->client_id(), &id);
    if (!refused.ok()) return refused;
    const int64_t n = request->num_samples();
    if (n < 1 || n > options_.max_samples) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "claims " + std::to_string(n) + " samples, outside [1, " +
                              std::to_string(options_.max_samples) + "] (deploy.max_samples)");
    }
    if (!(request->speed_ghz() >= 0 && request->speed_ghz() < 1e6 &&
          request->bandwidth_mhz() >= 0 && request->bandwidth_mhz() < 1e9)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "states an impossible speed or bandwidth (NaN, negative or too large)");
    }
    if (!request->model_sha256().empty() && !IsHex(request->model_sha256(), 64)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "model_sha256 '" + Printable(request->model_sha256(), 80) +
                              "' is not a SHA-256 (64 lowercase hexadecimal digits)");
    }
    const std::string module_mismatch = ModuleMismatch(id, request->model_sha256());
    if (!module_mismatch.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, module_mismatch);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ClientState& c = clients_[id];
    if (c.claimed > 0 && c.claimed != n) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "registered with " + std::to_string(c.claimed) +
                              " samples in this run; it may not claim " + std::to_string(n) + " now");
    }
    c.registered = true;
    c.claimed = n;
    c.num_samples = n;
    c.speed_ghz = request->speed_ghz();
    c.bandwidth_mhz = request->bandwidth_mhz();
    c.session = NewSession();
    c.last_seen = Clock::now();
    c.told_done = false;
    reply->set_protocol_version(kProtocolVersion);
    reply->set_session(c.session);
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
    arrive_cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext* context, const pb::HeartbeatRequest* request,
                         pb::HeartbeatReply* reply) override {
    grpc::Status refused = CheckSize(*request, kMaxSmallRequestBytes, "a heartbeat");
    if (!refused.ok()) return refused;
    int id = -1;
    refused = Authenticate(*context, request->protocol_version(), request->client_id(), &id);
    if (!refused.ok()) return refused;
    refused = CheckSession(request->session());
    if (!refused.ok()) return refused;
    reply->set_protocol_version(kProtocolVersion);
    std::lock_guard<std::mutex> lock(mutex_);
    reply->set_status(Touch(id, request->session()));
    return grpc::Status::OK;
  }

  grpc::Status PullTask(grpc::ServerContext* context, const pb::PullRequest* request,
                        grpc::ServerWriter<pb::TaskChunk>* writer) override {
    grpc::Status refused = CheckSize(*request, kMaxSmallRequestBytes, "a task request");
    if (!refused.ok()) return refused;
    int id = -1;
    refused = Authenticate(*context, request->protocol_version(), request->client_id(), &id);
    if (!refused.ok()) return refused;
    refused = CheckSession(request->session());
    if (!refused.ok()) return refused;
    if (!(request->wait_s() >= 0 && request->wait_s() <= 3600)) {  // NaN fails too
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "wait_s " + FormatDouble(request->wait_s()) + " is not in [0, 3600]");
    }
    const double wait_s = std::min(request->wait_s(), 30.0);
    std::unique_lock<std::mutex> lock(mutex_);
    const auto deadline = Clock::now() + Seconds(wait_s);
    pb::Status status = Touch(id, request->session());
    while (status == pb::WAIT && !stopping_ && !context->IsCancelled() &&
           Clock::now() < deadline) {
      const auto it = tasks_.find(id);
      if (it != tasks_.end() && it->second.open) {
        status = pb::TASK;
        break;
      }
      task_cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(200)));
      status = Touch(id, request->session());
    }
    // The last message leaves with the call's status.
    const auto last = grpc::WriteOptions().set_last_message();
    pb::TaskChunk chunk;
    chunk.set_status(status);
    if (status != pb::TASK) {
      lock.unlock();
      writer->Write(chunk, last);
      return grpc::Status::OK;
    }
    // A client that lost a task (its connection broke mid-stream) pulls it
    // again and is sent it again.
    const Task task = tasks_.at(id);
    lock.unlock();
    const FitInstructions& ins = *task.instructions;
    const FlatParams& global = *ins.global;
    if (!writer->Write(chunk)) return grpc::Status::OK;
    pb::TaskChunk header;
    ToWire(ins, task.id, static_cast<int64_t>(global.size()), header.mutable_header());
    if (!writer->Write(header, global.empty() ? last : grpc::WriteOptions())) {
      return grpc::Status::OK;
    }
    const size_t per_chunk = std::max<size_t>(1, options_.chunk_bytes / sizeof(float));
    pb::TaskChunk part;
    size_t sent = 0;  // model values
    for (size_t at = 0; at < global.size(); at += per_chunk) {
      const size_t count = std::min(per_chunk, global.size() - at);
      PutFloats(global, at, count, part.mutable_params());
      if (!writer->Write(part, at + count == global.size() ? last : grpc::WriteOptions())) break;
      sent = at + count;
    }
    if (monitor_) monitor_->AddBytes(0, static_cast<int64_t>(header.ByteSizeLong() + sent * sizeof(float)));
    return grpc::Status::OK;
  }

  // Every check the server can make happens before it answers: the header
  // and its numbers (wire.h), the sample count against the registered one,
  // the model's size, then the round loop's own checks (Server::Validate,
  // the strategy's), whose verdict is the reply. `accepted` means the result
  // counts in its round.
  grpc::Status PushResult(grpc::ServerContext* context, grpc::ServerReader<pb::ResultChunk>* reader,
                          pb::PushReply* reply) override {
    reply->set_protocol_version(kProtocolVersion);
    pb::ResultChunk chunk;
    if (!reader->Read(&chunk) || !chunk.has_header()) {
      const std::string why = "a result without a readable header (empty, over the " +
                              std::to_string(MessageLimit()) + "-byte message limit, or malformed)";
      // Under TLS the certificate says who sent it: its round counts the refusal.
      const int certified = tls() ? CertifiedClient(*context).id : -1;
      if (certified >= 0 && certified < options_.num_clients) CloseTaskAsRefused(certified, why);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
    }
    // A copy: reading the model chunks into `chunk` below replaces its
    // header (a oneof), which a reference would then dangle into.
    const pb::ResultHeader header = chunk.header();
    int id = -1;
    grpc::Status refused = Authenticate(*context, header.protocol_version(), header.client_id(), &id);
    if (!refused.ok()) return refused;
    refused = CheckSession(header.session());
    if (!refused.ok()) return refused;
    // The header's own checks come before anything is looked up for it, so a
    // malformed one is refused whatever task it names.
    FitResult result;
    try {
      result = FromWire(header);
    } catch (const Error& e) {
      return RefuseResult(id, e.what(), reply);
    }
    Task task;
    int64_t registered = 0;
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
      task = it->second;
      registered = clients_[id].num_samples;
    }
    // Checks before anything of it is believed.
    const size_t expected = task.instructions->train.epochs > 0 ? task.instructions->global->size() : 0;
    std::string why;
    try {
      if (header.num_samples() != registered) {
        // The weight no server can verify is fixed at registration.
        why = "claims " + std::to_string(header.num_samples()) + " samples; it registered " +
              std::to_string(registered) + ", its aggregation weight for the run";
      } else if (header.num_params() != static_cast<int64_t>(expected)) {
        why = "announced " + std::to_string(header.num_params()) + " model values, expected " +
              std::to_string(expected);
      }
      if (why.empty()) result.params.reserve(expected);  // the server's own model size
      while (why.empty() && reader->Read(&chunk)) {
        if (!chunk.has_params()) {
          why = "a second header in one result";
        } else if (chunk.params().size() > options_.chunk_bytes) {
          why = "a model chunk of " + std::to_string(chunk.params().size()) +
                " bytes, over the chunk size of " + std::to_string(options_.chunk_bytes) +
                " (deploy.chunk_kb)";
        } else {
          AppendFloats(chunk.params(), expected, &result.params);
        }
      }
      if (why.empty() && result.params.size() != expected) {
        why = "the result ended after " + std::to_string(result.params.size()) + " of " +
              std::to_string(expected) + " model values (cut off, or a chunk over the " +
              std::to_string(MessageLimit()) + "-byte message limit)";
      }
    } catch (const Error& e) {
      why = e.what();
    }
    const double elapsed = Since(task.opened);
    if (monitor_) {
      monitor_->AddBytes(static_cast<int64_t>(header.ByteSizeLong() + result.params.size() * sizeof(float)), 0);
    }
    if (!why.empty()) {
      result = Failed(id, "refused on arrival: " + why, /*timed_out=*/false);
    } else {
      result.client_id = id;  // whatever it claimed, this is who it is
      result.num_samples = registered;
      result.cost = ResultCost();
      result.cost.time_s = elapsed;
      result.cost.profiling_time_s = std::clamp(header.profiling_s(), 0.0, elapsed);
    }
    auto verdict = std::make_shared<Verdict>();
    std::unique_lock<std::mutex> lock(mutex_);
    const auto it = tasks_.find(id);
    if (it == tasks_.end() || !it->second.open || it->second.id != task.id) {
      reply->set_reason("the round ended while the result arrived");
      return grpc::Status::OK;
    }
    it->second.open = false;
    if (why.empty()) {
      ClientState& c = clients_[id];
      c.last_round_s = elapsed;
      c.total_round_s += elapsed;
      c.results += 1;
    }
    arrived_.push_back({task.index, std::move(result), verdict});
    arrive_cv_.notify_all();
    // The round loop judges every arrival before its Fit call returns.
    verdict_cv_.wait_for(lock, Seconds(options_.round_timeout_s + 60),
                         [&] { return verdict->given || stopping_; });
    reply->set_accepted(verdict->given && verdict->why.empty());
    reply->set_reason(verdict->given ? Printable(verdict->why, kMaxErrorLength)
                                     : "the round loop gave no verdict in time");
    return grpc::Status::OK;
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
  };
  struct Task {
    int64_t id = 0;
    size_t index = 0;  // in the Fit call's list
    std::shared_ptr<const FitInstructions> instructions;
    Clock::time_point opened;
    bool open = true;
  };
  // The round loop's word on a pushed result, which its PushReply carries.
  struct Verdict {
    bool given = false;
    std::string why;  // "" = accepted
  };
  struct Arrival {
    size_t index = 0;
    FitResult result;
    std::shared_ptr<Verdict> verdict;  // null when no client waits for it (a timeout)
  };

  // Housekeeping while the round loop waits: refusal counts whose window
  // passed are written without waiting for the next refusal, and every 10 s
  // the heap's free pages go back to the system. gRPC reads an oversized
  // request whole before it drops it (docs/deploy.md), and glibc would keep
  // those pages for the rest of the run.
  void Tidy() {
    refusals_.Flush();
    const auto now = Clock::now();
    if (now - last_trim_ < std::chrono::seconds(10)) return;
    last_trim_ = now;
    malloc_trim(0);
  }

  bool Alive(const ClientState& c, Clock::time_point now) const {
    return c.registered && now - c.last_seen <= Seconds(options_.heartbeat_timeout_s);
  }

  int CountAlive(Clock::time_point now) const {
    int n = 0;
    for (const ClientState& c : clients_) n += Alive(c, now) ? 1 : 0;
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
    arrived_.push_back({it->second.index, Failed(id, "refused on arrival: " + why, false), nullptr});
    arrive_cv_.notify_all();
  }

  // The id of the calling client: its certificate's (mutual TLS), which
  // must equal the id it claims, or the claim itself without TLS.
  grpc::Status Authenticate(const grpc::ServerContext& context, uint32_t version, int claimed,
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

  const GrpcServerOptions options_;
  RunMonitor* const monitor_ = RunMonitor::Active();  // --monitor's, or null
  RefusalLog refusals_;  // before server_: the interceptors use it until the server is gone
  std::unique_ptr<grpc::Server> server_;
  std::string address_;

  mutable std::mutex mutex_;
  std::condition_variable task_cv_;     // a task opened, or the run finished
  std::condition_variable arrive_cv_;   // a result arrived, a client registered or heard DONE
  std::condition_variable verdict_cv_;  // the round loop judged a pushed result
  std::vector<ClientState> clients_;
  std::map<int, Task> tasks_;  // open tasks of the current Fit call, by client id
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
  impl_->WaitForClients(count, timeout_s);
}
void GrpcTransport::Finish(double grace_s) { impl_->Finish(grace_s); }
std::vector<ClientDescription> GrpcTransport::Describe() { return impl_->Describe(); }
std::string GrpcTransport::SaveState() { return impl_->SaveClaims(); }
void GrpcTransport::LoadState(const std::string& text) { impl_->LoadClaims(text); }

}  // namespace fedprof
