#include "fedprof/deploy/server/grpc_transport.h"

#include <grpcpp/grpcpp.h>
#include <malloc.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "federation.grpc.pb.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/core/stop_request.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/server/admission.h"
#include "fedprof/deploy/server/client_registry.h"
#include "fedprof/deploy/server/relay_hub.h"
#include "fedprof/deploy/server/result_intake.h"
#include "fedprof/deploy/server/round.h"
#include "fedprof/deploy/server/service_state.h"
#include "fedprof/deploy/server/task_streams.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof::deploy {

namespace {

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

}  // namespace

void ServiceState::Tidy() {
  refusals.Flush();
  const auto now = Clock::now();
  if (now - last_trim_ < std::chrono::seconds(30)) return;
  last_trim_ = now;
  malloc_trim(0);
}

// The service runs on gRPC's callback API: a call is a reactor object, not a
// thread, so a client that waits for a task, sends a heartbeat or streams a
// result holds no thread of the server. Handlers never block: a PullTask
// with nothing to send is parked (at most one per client) until its client
// gets a task, the run finishes or its wait ends (TaskStreams' waker); a
// PushResult whose result is in waits for the round loop's verdict as an
// entry of the round's arrivals. The handlers here admit each call and hand
// it to the part that owns what it asks about: the registry (Register,
// Heartbeat), the task streams (PullTask), the result intake (PushResult),
// the round's secure aggregation session (SecAgg), the relay hub (Relay*).
class FederationService : public pb::Federation::CallbackService {
 public:
  FederationService(const GrpcServerOptions& options, RunObserver* observer)
      : state_(options, observer),
        // The clients' keys as issued with their certificates.
        registry_(&state_, options.secure_aggregation && !options.tls_dir.empty()
                               ? SecAggRoster(options.tls_dir)
                               : std::map<int64_t, std::string>()),
        streams_(&state_, &registry_),
        round_(&state_, &registry_, &streams_),
        results_(&state_, &registry_, &round_),
        relays_(&state_, &registry_, &streams_, &round_) {
    Listen();
    if (state_.monitor) {
      state_.monitor->SetConnectedSource([this] { return static_cast<int>(Available().size()); });
    }
  }

  ~FederationService() override {
    if (state_.monitor) state_.monitor->SetConnectedSource({});
    std::vector<TaskStream*> parked;
    std::vector<BatchStream*> relays_parked;
    std::deque<Arrival> unjudged;
    {
      std::lock_guard<std::mutex> lock(state_.mutex);
      state_.stopping = true;
      streams_.UnparkAll(&parked, &relays_parked);
      unjudged = round_.Stop();
    }
    streams_.StopWaker();
    for (TaskStream* pull : parked) pull->SendStatus(pb::WAIT);
    for (BatchStream* pull : relays_parked) pull->SendStatus(pb::WAIT);
    for (Arrival& a : unjudged) round_.Answer(a.verdict, "the server stopped before judging it");
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }

  const std::string& address() const { return address_; }
  const GrpcServerOptions& options() const { return state_.options; }
  Round& round() { return round_; }

  // --- The round loop's side -------------------------------------------

  std::vector<ClientInfo> Available() {
    std::lock_guard<std::mutex> lock(state_.mutex);
    return registry_.Available(Clock::now());
  }

  // Returns false when fewer than `count` are alive after `timeout_s`.
  bool WaitForClients(int count, double timeout_s) {
    std::unique_lock<std::mutex> lock(state_.mutex);
    const auto deadline = Clock::now() + Seconds(timeout_s);
    while (true) {
      if (registry_.CountAlive(Clock::now()) >= count) return true;
      if (Clock::now() >= deadline || StopAtRoundEndRequested()) return false;
      lock.unlock();
      state_.Tidy();
      lock.lock();
      // A registration wakes it (arrive_cv); the wake each second is for the
      // refusal log, as each wake scans every client.
      state_.arrive_cv.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::seconds(1)));
    }
  }

  // Until a client registers, or `timeout_s`.
  void WaitForArrival(double timeout_s) {
    std::unique_lock<std::mutex> lock(state_.mutex);
    state_.arrive_cv.wait_for(lock, Seconds(timeout_s));
  }

  void Finish(double grace_s) {
    std::vector<TaskStream*> told;
    std::vector<BatchStream*> relays_told;
    std::unique_lock<std::mutex> lock(state_.mutex);
    state_.done = true;
    // Parked requests hear it now; the others on their next call.
    streams_.UnparkAll(&told, &relays_told);
    for (TaskStream* pull : told) registry_.ToldDone(pull->owner);
    for (BatchStream* pull : relays_told) registry_.TellRelayDone(pull->owner);
    lock.unlock();
    for (TaskStream* pull : told) pull->SendStatus(pb::DONE);
    for (BatchStream* pull : relays_told) pull->SendStatus(pb::DONE);
    lock.lock();
    const auto deadline = Clock::now() + Seconds(grace_s);
    while (Clock::now() < deadline && !registry_.AllToldDone(Clock::now())) {
      state_.arrive_cv.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    }
    lock.unlock();
    state_.refusals.Flush(/*everything=*/true);
  }

  std::vector<ClientDescription> Describe() const {
    std::lock_guard<std::mutex> lock(state_.mutex);
    return registry_.Describe();
  }

  // The clients' claims by id, and the run's id under "run" (hex), so that a
  // resumed server's secure aggregation sessions stay bound to its run.
  std::string SaveClaims() const {
    std::lock_guard<std::mutex> lock(state_.mutex);
    nlohmann::json claims = nlohmann::json::object();
    registry_.SaveClaims(&claims);
    claims["run"] = HexEncode(round_.run_id());
    return claims.dump();
  }

  void LoadClaims(const std::string& text) {
    std::lock_guard<std::mutex> lock(state_.mutex);
    if (text.empty()) return;
    try {
      const nlohmann::json claims = nlohmann::json::parse(text);
      for (const auto& [key, value] : claims.items()) {
        if (key != "run") {
          registry_.LoadClaim(key, value);
          continue;
        }
        const std::string hex = value.get<std::string>();
        if (!IsHex(hex, 64)) throw Error("checkpoint: the run id is not 64 hex digits");
        round_.set_run_id(HexDecode(hex));
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("checkpoint: clients' claims: ") + e.what());
    }
  }

  // --- The clients' side (gRPC handlers) ---------------------------------
  // A handler's refusal is a status with the reason; RefusalInterceptor logs
  // it by caller. Reasons quote what the client sent only through Printable.

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context, const pb::RegisterRequest* request,
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
      std::lock_guard<std::mutex> lock(state_.mutex);
      reply->set_status(registry_.Touch(id, request->session()));
    }
    call->Finish(refused);
    return call;
  }

  grpc::ServerWriteReactor<pb::TaskChunk>* PullTask(grpc::CallbackServerContext* context,
                                                    const pb::PullRequest* request) override {
    auto* pull = new TaskStream(&streams_, context);
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
    std::unique_lock<std::mutex> lock(state_.mutex);
    const pb::Status status = registry_.Touch(id, request->session());
    if (status == pb::WAIT && !state_.stopping) {
      // A client that lost a task (its connection broke mid-stream) pulls it
      // again and is sent it again.
      if (const Task* open = round_.OpenTask(id)) {
        const Task task = *open;
        pull->owner = id;
        lock.unlock();
        streams_.Send(pull, task);
        return pull;
      }
      if (wait_s > 0) {
        // One parked request per client: an earlier one is answered now.
        TaskStream* earlier = streams_.Park(id, pull, Clock::now() + Seconds(wait_s));
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
    return results_.Start(context, reply);
  }

  // A client's message of the round's secure aggregation session: the
  // session answers it, now or once its round closes.
  grpc::ServerUnaryReactor* SecAgg(grpc::CallbackServerContext* context, const pb::SecAggRequest* request,
                                   pb::SecAggReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    reply->set_protocol_version(kProtocolVersion);
    int id = -1;
    grpc::Status refused = Authenticate(*context, state_.tls(), state_.options.num_clients,
                                        request->protocol_version(), request->client_id(), &id, &state_.access);
    if (refused.ok()) refused = CheckSession(request->session());
    if (!refused.ok()) {
      call->Finish(refused);
      return call;
    }
    std::shared_ptr<SecAggRendezvous> session;
    std::string kind;  // why there is none, for the refusal log
    {
      std::lock_guard<std::mutex> lock(state_.mutex);
      if (registry_.Touch(id, request->session()) == pb::UNKNOWN_SESSION) {
        reply->set_reason("unknown session: register again");
        kind = "SecAgg unknown session";
      } else {
        session = round_.session();
        if (!session) {
          reply->set_reason("no secure aggregation session is open");
          kind = "SecAgg for no open session";
        }
      }
    }
    if (!session) {
      // Answered with the reason (the client's protocol reads it), and logged.
      state_.refusals.Refuse("client " + std::to_string(id), kind, "SecAgg: " + reply->reason());
      call->Finish(grpc::Status::OK);
      return call;
    }
    session->Take(id, *request, HeldReply{reply, [call] { call->Finish(grpc::Status::OK); }});
    return call;
  }

  // --- The relays' side (gRPC handlers): RelayHub ------------------------

  grpc::ServerUnaryReactor* RelaySync(grpc::CallbackServerContext* context,
                                      const pb::RelaySyncRequest* request,
                                      pb::RelaySyncReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    call->Finish(relays_.Sync(*context, *request, reply));
    return call;
  }

  grpc::ServerWriteReactor<pb::RelayTaskChunk>* RelayPull(grpc::CallbackServerContext* context,
                                                          const pb::RelayPullRequest* request) override {
    return relays_.Pull(context, *request);
  }

  grpc::ServerUnaryReactor* RelayResult(grpc::CallbackServerContext* context,
                                        const pb::RelayResultRequest* request,
                                        pb::PushReply* reply) override {
    grpc::ServerUnaryReactor* call = context->DefaultReactor();
    reply->set_protocol_version(kProtocolVersion);
    bool judged = false;
    const grpc::Status status = relays_.TakeResult(*context, *request, reply, call, &judged);
    if (!judged) call->Finish(status);
    return call;
  }

  grpc::ServerReadReactor<pb::RelaySumChunk>* RelaySum(grpc::CallbackServerContext* context,
                                                      pb::PushReply* reply) override {
    return relays_.StartSum(context, reply);
  }

 private:
  // Binds the listening port with its limits and the refusal log.
  void Listen() {
    const GrpcServerOptions& o = state_.options;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(o.listen, ServerCredentials(o.tls_dir, o.cert_name), &port);
    builder.RegisterService(this);
    const int limit = static_cast<int>(state_.MessageLimit());
    builder.SetMaxReceiveMessageSize(limit);
    builder.SetMaxSendMessageSize(limit);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxStreamsPerConnection);
    builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, kHandshakeTimeoutMs);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, kIdleConnectionMs);
    builder.AddChannelArgument(GRPC_ARG_TSI_MAX_FRAME_SIZE, kTlsFrameBytes);
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(std::make_unique<RefusalInterceptorFactory>(&state_.refusals, state_.tls()));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0) {
      throw Error("--listen " + o.listen +
                  ": cannot listen there (in use, or not an address of this machine)");
    }
    address_ = o.listen.substr(0, o.listen.rfind(':')) + ":" + std::to_string(port);
  }

  grpc::Status Registration(const grpc::CallbackServerContext& context, const pb::RegisterRequest& request,
                            pb::RegisterReply* reply) {
    grpc::Status refused = CheckSize(request, kMaxRegisterBytes, "a registration");
    int id = -1;
    if (refused.ok()) {
      refused = Authenticate(context, state_.tls(), state_.options.num_clients, request.protocol_version(),
                             request.client_id(), &id, &state_.access);
    }
    if (refused.ok()) refused = registry_.CheckRegistration(id, request);
    if (!refused.ok()) return refused;
    std::lock_guard<std::mutex> lock(state_.mutex);
    std::string session;
    refused = registry_.Register(id, request, Clock::now(), &session);
    if (!refused.ok()) return refused;
    registry_.FillRegisterReply(session, round_.run_id(), reply);
    state_.arrive_cv.notify_all();
    return grpc::Status::OK;
  }

  // What a heartbeat or task request passes first, in order: its size, who
  // it is (*id), its session.
  grpc::Status Admit(const grpc::ServerContextBase& context, const google::protobuf::Message& request,
                     const std::string& what, uint32_t version, int claimed, const std::string& session,
                     int* id) {
    grpc::Status refused = CheckSize(request, kMaxSmallRequestBytes, what);
    if (refused.ok())
      refused = Authenticate(context, state_.tls(), state_.options.num_clients, version, claimed, id, &state_.access);
    if (refused.ok()) refused = CheckSession(session);
    return refused;
  }

  // The parts, each holding what it owns; the state's refusal log outlives
  // the gRPC server, whose interceptors use it until it is gone.
  ServiceState state_;
  ClientRegistry registry_;
  TaskStreams streams_;
  Round round_;
  ResultIntake results_;
  RelayHub relays_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace fedprof::deploy

namespace fedprof {

class GrpcTransport::Impl final : public deploy::FederationService {
 public:
  using FederationService::FederationService;
};

GrpcTransport::GrpcTransport(const GrpcServerOptions& options, RunObserver* observer)
    : impl_(std::make_unique<Impl>(options, observer)) {}
GrpcTransport::~GrpcTransport() = default;
std::string GrpcTransport::address() const { return impl_->address(); }
int GrpcTransport::num_clients() const { return impl_->options().num_clients; }
std::vector<ClientInfo> GrpcTransport::Available() { return impl_->Available(); }
void GrpcTransport::SetRoundTimeout(double seconds) { impl_->round().SetTimeout(seconds); }
void GrpcTransport::Fit(const std::vector<ClientInstructions>& tasks, const ResultSink& sink) {
  impl_->round().Fit(tasks, sink);
}

void GrpcTransport::LaunchTasks(const std::vector<ClientInstructions>& tasks) {
  impl_->round().Launch(tasks);
}

bool GrpcTransport::AwaitResult(const ResultSink& sink) {
  return impl_->round().AwaitStreamed(sink);
}
void GrpcTransport::Open() {
  const GrpcServerOptions& o = impl_->options();
  const int wanted = o.min_clients == 0 ? o.num_clients : std::min(o.min_clients, o.num_clients);
  LogProgress("fedprof server: listening on " + address() +
              (o.tls_dir.empty() ? " (INSECURE)" : " (mutual TLS)") + "; waiting for " +
              std::to_string(wanted) + " of " + std::to_string(o.num_clients) + " clients");
  WaitForClients(wanted, o.start_timeout_s);
}
// Long enough for a client that is still counted alive (a slow machine's
// heartbeat late, a result in training) to call once more and hear it.
void GrpcTransport::Close() {
  const GrpcServerOptions& o = impl_->options();
  Finish(o.heartbeat_timeout_s + 2 * o.heartbeat_s + 1);
}
void GrpcTransport::WaitForClients(int count, double timeout_s) {
  if (impl_->WaitForClients(count, timeout_s)) return;
  if (StopAtRoundEndRequested()) throw Error("asked to stop (SIGTERM) while it waited for its clients");
  // Which are missing, the first few by id: a deployment's operator knows
  // them by name.
  const std::vector<ClientInfo> available = impl_->Available();
  std::vector<bool> here(static_cast<size_t>(num_clients()), false);
  for (const ClientInfo& c : available) here.at(static_cast<size_t>(c.id)) = true;
  std::string missing;
  int named = 0, unnamed = 0;
  for (int id = 0; id < num_clients(); ++id) {
    if (here[static_cast<size_t>(id)]) continue;
    if (named++ < 10) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(id);
    } else {
      ++unnamed;
    }
  }
  if (unnamed > 0) missing += " and " + std::to_string(unnamed) + " more";
  throw Error("only " + std::to_string(available.size()) + " of the " + std::to_string(count) +
              " clients needed (deploy.min_clients) were available within " + FormatDouble(timeout_s) +
              " s (deploy.start_timeout_s); not registered: client" + (named > 1 ? "s " : " ") + missing);
}
std::vector<ClientInfo> GrpcTransport::AvailableOrWait(const std::function<bool(int)>& wanted) {
  const auto any_wanted = [&wanted](const std::vector<ClientInfo>& clients) {
    return std::any_of(clients.begin(), clients.end(), [&](const ClientInfo& c) { return !wanted || wanted(c.id); });
  };
  // Enough when one is wanted, or when every client is here (asked already:
  // no one else can come, and the round's attempts decide).
  const auto enough = [&](const std::vector<ClientInfo>& clients) {
    return any_wanted(clients) || static_cast<int>(clients.size()) >= impl_->options().num_clients;
  };
  std::vector<ClientInfo> available = impl_->Available();
  if (enough(available)) return available;
  const double timeout_s = impl_->options().start_timeout_s;
  // A client asked already this round and gone (killed while it sent its
  // result) is no one to ask again: the round waits for one of those who
  // left, as when every client has.
  const std::string who = available.empty() ? "every client has left" : "every client not asked yet this round is away";
  LogWarning(who + "; waiting up to " + FormatDouble(timeout_s) + " s (deploy.start_timeout_s) for one to come back");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0 || !impl_->WaitForClients(1, left) || StopAtRoundEndRequested()) {
      if (StopAtRoundEndRequested()) throw Error("asked to stop (SIGTERM) while it waited for its clients");
      throw Error(who + " and none came back within " + FormatDouble(timeout_s) + " s (deploy.start_timeout_s)");
    }
    available = impl_->Available();
    if (enough(available)) return available;
    impl_->WaitForArrival(std::min(left, 1.0));
  }
}
void GrpcTransport::Finish(double grace_s) { impl_->Finish(grace_s); }
std::vector<ClientDescription> GrpcTransport::Describe() { return impl_->Describe(); }
std::string GrpcTransport::SaveState() { return impl_->SaveClaims(); }
void GrpcTransport::LoadState(const std::string& text) { impl_->LoadClaims(text); }

}  // namespace fedprof
