#include "fedprof/transport/grpc_server.h"

#include <grpcpp/grpcpp.h>

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
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) {
      throw Error("--listen " + options.listen + ": cannot listen there (in use, or not an address "
                  "of this machine)");
    }
    address_ = options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(port);
  }

  ~Impl() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    task_cv_.notify_all();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }

  // Room for a chunk plus a header with a profile and a sketch.
  size_t MessageLimit() const { return std::max<size_t>(4u << 20, options_.chunk_bytes + (2u << 20)); }

  const std::string& address() const { return address_; }
  int num_clients() const { return options_.num_clients; }

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

  void Fit(const std::vector<int>& ids, const FitInstructions& ins, const ResultSink& sink) {
    auto shared = std::make_shared<const FitInstructions>(ins);
    std::unique_lock<std::mutex> lock(mutex_);
    const auto start = Clock::now();
    for (size_t i = 0; i < ids.size(); ++i) {
      Task& t = tasks_[ids[i]];
      t.id = next_task_id_++;
      t.index = i;
      t.instructions = shared;
      t.opened = start;
    }
    task_cv_.notify_all();
    const auto deadline = start + Seconds(options_.round_timeout_s);
    size_t remaining = ids.size();
    while (remaining > 0) {
      while (!arrived_.empty()) {
        auto [index, result] = std::move(arrived_.front());
        arrived_.pop_front();
        lock.unlock();
        sink(index, std::move(result));
        lock.lock();
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
        arrived_.emplace_back(task.index, std::move(r));
      }
      if (arrived_.empty()) {
        arrive_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(200)));
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
      if (all_told) return;
      arrive_cv_.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
    }
  }

  std::vector<Registration> Registrations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Registration> out(clients_.size());
    for (size_t k = 0; k < clients_.size(); ++k) {
      const ClientState& c = clients_[k];
      out[k] = {c.registered, c.num_samples, c.speed_ghz, c.bandwidth_mhz,
                c.results > 0 ? c.total_round_s / c.results : 0.0};
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
        const int id = std::stoi(key);
        if (id < 0 || id >= options_.num_clients) throw Error("checkpoint: claim of client " + key);
        clients_[id].claimed = value.get<int64_t>();
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("checkpoint: clients' claims: ") + e.what());
    } catch (const std::logic_error& e) {
      throw Error(std::string("checkpoint: clients' claims: ") + e.what());
    }
  }

  // --- The clients' side (gRPC handlers) ---------------------------------

  grpc::Status Register(grpc::ServerContext* context, const pb::RegisterRequest* request,
                        pb::RegisterReply* reply) override {
    int id = -1;
    grpc::Status refused = Authenticate(*context, request->protocol_version(), request->client_id(), &id);
    if (!refused.ok()) return refused;
    const int64_t n = request->num_samples();
    if (n < 1 || n > options_.max_samples) {
      return Refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "client " + std::to_string(id) + " claims " + std::to_string(n) +
                        " samples, outside [1, " + std::to_string(options_.max_samples) +
                        "] (deploy.max_samples)");
    }
    if (!(request->speed_ghz() >= 0 && request->speed_ghz() < 1e6 &&
          request->bandwidth_mhz() >= 0 && request->bandwidth_mhz() < 1e9)) {
      return Refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "client " + std::to_string(id) + " states an impossible speed or bandwidth");
    }
    const std::string module_mismatch = ModuleMismatch(id, request->model_sha256());
    if (!module_mismatch.empty()) {
      return Refuse(grpc::StatusCode::FAILED_PRECONDITION, module_mismatch);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ClientState& c = clients_[id];
    if (c.claimed > 0 && c.claimed != n) {
      return Refuse(grpc::StatusCode::FAILED_PRECONDITION,
                    "client " + std::to_string(id) + " registered with " +
                        std::to_string(c.claimed) + " samples in this run; it may not claim " +
                        std::to_string(n) + " now");
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
    int id = -1;
    grpc::Status refused = Authenticate(*context, request->protocol_version(), request->client_id(), &id);
    if (!refused.ok()) return refused;
    reply->set_protocol_version(kProtocolVersion);
    std::lock_guard<std::mutex> lock(mutex_);
    reply->set_status(Touch(id, request->session()));
    return grpc::Status::OK;
  }

  grpc::Status PullTask(grpc::ServerContext* context, const pb::PullRequest* request,
                        grpc::ServerWriter<pb::TaskChunk>* writer) override {
    int id = -1;
    grpc::Status refused = Authenticate(*context, request->protocol_version(), request->client_id(), &id);
    if (!refused.ok()) return refused;
    const double wait_s = std::clamp(request->wait_s(), 0.0, 30.0);
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
    for (size_t at = 0; at < global.size(); at += per_chunk) {
      const size_t count = std::min(per_chunk, global.size() - at);
      PutFloats(global, at, count, part.mutable_params());
      if (!writer->Write(part, at + count == global.size() ? last : grpc::WriteOptions())) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status PushResult(grpc::ServerContext* context, grpc::ServerReader<pb::ResultChunk>* reader,
                          pb::PushReply* reply) override {
    reply->set_protocol_version(kProtocolVersion);
    pb::ResultChunk chunk;
    if (!reader->Read(&chunk) || !chunk.has_header()) {
      // Under TLS the certificate says who sent it: its round counts the refusal.
      const std::string why = "a result without a readable header (over the " +
                              std::to_string(MessageLimit()) + "-byte message limit, or malformed)";
      const int certified = options_.tls_dir.empty() ? -1 : CertifiedClientId(*context);
      if (certified >= 0 && certified < options_.num_clients) {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto it = tasks_.find(certified);
        if (it != tasks_.end() && it->second.open) {
          it->second.open = false;
          arrived_.emplace_back(it->second.index,
                                Failed(certified, "refused on arrival: " + why, false));
          arrive_cv_.notify_all();
        }
      }
      return Refuse(grpc::StatusCode::INVALID_ARGUMENT, why);
    }
    // A copy: reading the model chunks into `chunk` below replaces its
    // header (a oneof), which a reference would then dangle into.
    const pb::ResultHeader header = chunk.header();
    int id = -1;
    grpc::Status refused = Authenticate(*context, header.protocol_version(), header.client_id(), &id);
    if (!refused.ok()) return refused;
    Task task;
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
        LogWarning("client " + std::to_string(id) + " result ignored: " + why);
        reply->set_reason(why);
        return grpc::Status::OK;
      }
      task = it->second;
    }
    // Checks before anything of it is believed.
    const size_t expected = task.instructions->train.epochs > 0 ? task.instructions->global->size() : 0;
    FitResult result;
    std::string why;
    try {
      result = FromWire(header);
      result.params.reserve(expected);  // the server's own model size, not the client's claim
      if (header.num_params() != static_cast<int64_t>(expected)) {
        why = "announced " + std::to_string(header.num_params()) + " model values, expected " +
              std::to_string(expected);
      }
      while (why.empty() && reader->Read(&chunk)) {
        if (!chunk.has_params()) {
          why = "a second header in one result";
          break;
        }
        AppendFloats(chunk.params(), expected, &result.params);
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
    if (!why.empty()) {
      result = Failed(id, "refused on arrival: " + why, /*timed_out=*/false);
    } else {
      result.client_id = id;  // whatever it claimed, this is who it is
      result.cost = ResultCost();
      result.cost.time_s = elapsed;
      result.cost.profiling_time_s = std::clamp(header.profiling_s(), 0.0, elapsed);
    }
    std::lock_guard<std::mutex> lock(mutex_);
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
    arrived_.emplace_back(task.index, std::move(result));
    arrive_cv_.notify_all();
    reply->set_accepted(why.empty());
    reply->set_reason(why);
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

  // Why client `id`, whose model.file has SHA-256 `sha256` ("" = none),
  // cannot build the server's model, or "".
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

  grpc::Status Refuse(grpc::StatusCode code, const std::string& why) {
    LogWarning("client refused: " + why);
    return grpc::Status(code, why);
  }

  // The id of the calling client: its certificate's (mutual TLS), which
  // must equal the id it claims, or the claim itself without TLS.
  grpc::Status Authenticate(const grpc::ServerContext& context, uint32_t version, int claimed,
                            int* id) {
    const std::string mismatch = ProtocolMismatch(version, "the client");
    if (!mismatch.empty()) return Refuse(grpc::StatusCode::FAILED_PRECONDITION, mismatch);
    if (!options_.tls_dir.empty()) {
      const int certified = CertifiedClientId(context);
      if (certified < 0) {
        return Refuse(grpc::StatusCode::UNAUTHENTICATED,
                      "the peer's certificate names no client (CN client-<id>)");
      }
      if (certified != claimed) {
        return Refuse(grpc::StatusCode::PERMISSION_DENIED,
                      "certificate of client " + std::to_string(certified) +
                          " used to speak as client " + std::to_string(claimed));
      }
    }
    if (claimed < 0 || claimed >= options_.num_clients) {
      return Refuse(grpc::StatusCode::INVALID_ARGUMENT,
                    "client id " + std::to_string(claimed) + " is not one of 0.." +
                        std::to_string(options_.num_clients - 1) + " (clients.count)");
    }
    *id = claimed;
    return grpc::Status::OK;
  }

  const GrpcServerOptions options_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;

  mutable std::mutex mutex_;
  std::condition_variable task_cv_;    // a task opened, or the run finished
  std::condition_variable arrive_cv_;  // a result arrived, a client registered or heard DONE
  std::vector<ClientState> clients_;
  std::map<int, Task> tasks_;  // open tasks of the current Fit call, by client id
  std::deque<std::pair<size_t, FitResult>> arrived_;
  int64_t next_task_id_ = 1;
  bool done_ = false;
  bool stopping_ = false;
};

GrpcTransport::GrpcTransport(const GrpcServerOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}
GrpcTransport::~GrpcTransport() = default;
std::string GrpcTransport::address() const { return impl_->address(); }
int GrpcTransport::num_clients() const { return impl_->num_clients(); }
std::vector<ClientInfo> GrpcTransport::Available() { return impl_->Available(); }
void GrpcTransport::Fit(const std::vector<int>& client_ids, const FitInstructions& instructions,
                        const ResultSink& sink) {
  impl_->Fit(client_ids, instructions, sink);
}
void GrpcTransport::WaitForClients(int count, double timeout_s) {
  impl_->WaitForClients(count, timeout_s);
}
void GrpcTransport::Finish(double grace_s) { impl_->Finish(grace_s); }
std::vector<GrpcTransport::Registration> GrpcTransport::Registrations() const {
  return impl_->Registrations();
}
std::string GrpcTransport::SaveClaims() const { return impl_->SaveClaims(); }
void GrpcTransport::LoadClaims(const std::string& text) { impl_->LoadClaims(text); }

}  // namespace fedprof
