#include "fedprof/transport/grpc_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "federation.grpc.pb.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"
#include "fedprof/transport/tls.h"
#include "fedprof/transport/wire.h"

namespace fedprof {

namespace pb = federation::v1;
using Clock = std::chrono::steady_clock;

namespace {

std::chrono::system_clock::time_point In(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

// What a status says, as this client may log it: the server's words are
// not trusted to be one line either.
std::string Said(const grpc::Status& s) { return Printable(s.error_message(), 400); }

// Refusals no retry can mend.
bool Permanent(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return true;
    default:
      return false;
  }
}

class Session {
 public:
  explicit Session(const GrpcClientOptions& options) : options_(options) {
    grpc::ChannelArguments args;
    const int limit = 8 << 20;  // the server's chunks and headers stay below it
    args.SetMaxReceiveMessageSize(limit);
    args.SetMaxSendMessageSize(limit);
    channel_ = grpc::CreateCustomChannel(options.server, ClientCredentials(options.tls_dir, options.id),
                                         args);
    stub_ = pb::Federation::NewStub(channel_);
    last_contact_ = Clock::now();
  }

  void Run(const std::function<void(const ModelSpec&, int64_t)>& prepare,
           const std::function<FitResult(const FitInstructions&)>& fit) {
    std::thread heartbeats([this] { HeartbeatLoop(); });
    try {
      Serve(prepare, fit);
    } catch (...) {
      Stop(heartbeats);
      throw;
    }
    Stop(heartbeats);
  }

 private:
  void Stop(std::thread& heartbeats) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    heartbeats.join();
  }

  void Serve(const std::function<void(const ModelSpec&, int64_t)>& prepare,
             const std::function<FitResult(const FitInstructions&)>& fit) {
    while (!done_) {
      if (session().empty()) {
        RegisterOnce(prepare);
        continue;
      }
      FitInstructions ins;
      int64_t task_id = 0;
      if (!PullOnce(&ins, &task_id)) continue;
      const auto start = Clock::now();
      FitResult result = fit(ins);
      const double compute_s = std::chrono::duration<double>(Clock::now() - start).count();
      if (options_.progress) {
        LogProgress("client " + std::to_string(options_.id) + ": round " +
                    std::to_string(ins.round) + (ins.train.epochs > 0 ? " trained" : " reported") +
                    " in " + std::to_string(compute_s) + " s" +
                    (result.ok ? "" : " (failed: " + result.error + ")"));
      }
      result.client_id = options_.id;
      Push(result, task_id, compute_s);
    }
  }

  // One registration attempt; waits with back-off after a failure.
  void RegisterOnce(const std::function<void(const ModelSpec&, int64_t)>& prepare) {
    pb::RegisterRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_client_id(options_.id);
    request.set_num_samples(options_.num_samples);
    request.set_speed_ghz(options_.speed_ghz);
    request.set_bandwidth_mhz(options_.bandwidth_mhz);
    request.set_model_sha256(options_.model_sha256);
    pb::RegisterReply reply;
    grpc::ClientContext context;
    context.set_deadline(In(10));
    const grpc::Status status = stub_->Register(&context, request, &reply);
    if (!status.ok()) {
      if (Permanent(status)) throw Error("server " + options_.server + " refused: " + Said(status));
      BackOff("cannot register with " + options_.server + ": " + Said(status));
      return;
    }
    const std::string mismatch = ProtocolMismatch(reply.protocol_version(), "the server");
    if (!mismatch.empty()) throw Error(mismatch);
    Contact();
    prepare(FromWire(reply.model()), reply.num_params());
    std::lock_guard<std::mutex> lock(mutex_);
    session_ = reply.session();
    heartbeat_s_ = std::clamp(reply.heartbeat_s(), 0.05, 3600.0);
    // An older server states no chunk size: 1 MiB, its default.
    chunk_bytes_ = reply.chunk_bytes() > 0
                       ? static_cast<size_t>(std::clamp<int64_t>(reply.chunk_bytes(), 1024, 3 << 20))
                       : size_t{1} << 20;
    stop_cv_.notify_all();  // the heartbeat thread picks up the new interval
  }

  // Asks for a task; true with the instructions when one came.
  bool PullOnce(FitInstructions* ins, int64_t* task_id) {
    pb::PullRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_client_id(options_.id);
    // Read once: the heartbeat thread may forget the session meanwhile, and
    // a request without one is refused for good.
    const std::string current = session();
    if (current.empty()) return false;
    request.set_session(current);
    // A long wait only over a connection that is up: on one still being
    // made (after losing the server) the request would wait out its whole
    // deadline, and with it the heartbeats, should the connection stall.
    const bool connected = channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
    const double wait_s = connected ? options_.pull_wait_s : 0;
    request.set_wait_s(wait_s);
    grpc::ClientContext context;
    context.set_deadline(In(wait_s + (connected ? 60 : 10)));
    std::unique_ptr<grpc::ClientReader<pb::TaskChunk>> reader = stub_->PullTask(&context, request);
    pb::TaskChunk chunk;
    pb::Status status = pb::WAIT;
    bool got = false;
    try {
      waiting_.store(connected);  // a request waiting at the server says this client is there
      const bool answered = reader->Read(&chunk);
      waiting_.store(false);
      if (answered && chunk.has_status()) {
        status = chunk.status();
        if (status == pb::TASK && reader->Read(&chunk) && chunk.has_header()) {
          *ins = fedprof::FromWire(chunk.header());
          *task_id = chunk.header().task_id();
          const size_t expected = static_cast<size_t>(chunk.header().num_params());
          auto global = std::make_shared<FlatParams>();
          // What a server announces is not believed before it arrives.
          global->reserve(std::min<size_t>(expected, size_t{1} << 24));
          while (reader->Read(&chunk) && chunk.has_params()) AppendFloats(chunk.params(), expected, global.get());
          got = global->size() == expected;
          ins->global = std::move(global);
        }
      }
    } catch (const Error& e) {
      // A server speaking another protocol, or a malformed task.
      context.TryCancel();
      reader->Finish();
      throw Error("task from " + options_.server + ": " + e.what());
    }
    const grpc::Status finished = reader->Finish();
    if (!finished.ok()) {
      if (Permanent(finished)) {
        throw Error("server " + options_.server + " refused: " + Said(finished));
      }
      BackOff("lost " + options_.server + ": " + Said(finished));
      return false;
    }
    Contact();
    if (status == pb::DONE) done_ = true;
    if (status == pb::UNKNOWN_SESSION) Forget();
    return status == pb::TASK && got;
  }

  void Push(const FitResult& result, int64_t task_id, double compute_s) {
    // The task stays open on the server until its round ends: a push that
    // cannot get through is tried again until then.
    while (!done_) {
      const std::string current = session();  // read once, as in PullOnce
      if (current.empty()) return;  // the server forgot us: the task is lost
      grpc::ClientContext context;
      context.set_deadline(In(120));
      pb::PushReply reply;
      std::unique_ptr<grpc::ClientWriter<pb::ResultChunk>> writer = stub_->PushResult(&context, &reply);
      pb::ResultChunk head;
      pb::ResultHeader* h = head.mutable_header();
      ToWire(result, h);
      h->set_session(current);
      h->set_task_id(task_id);
      h->set_compute_s(compute_s);
      h->set_profiling_s(result.cost.profiling_time_s);
      // The last message closes the stream in the same operation; a stream
      // broken before it is closed here (closing it twice aborts in gRPC).
      const FlatParams& params = result.params;
      const auto last = grpc::WriteOptions().set_last_message();
      bool closed = params.empty();
      bool ok = writer->Write(head, closed ? last : grpc::WriteOptions());
      const size_t per_chunk = chunk_bytes() / sizeof(float);
      pb::ResultChunk part;
      for (size_t at = 0; ok && at < params.size(); at += per_chunk) {
        const size_t count = std::min(per_chunk, params.size() - at);
        PutFloats(params, at, count, part.mutable_params());
        closed = at + count == params.size();
        ok = writer->Write(part, closed ? last : grpc::WriteOptions());
      }
      if (!closed) writer->WritesDone();
      const grpc::Status status = writer->Finish();
      if (status.ok()) {
        Contact();
        if (!reply.accepted()) {
          LogWarning("client " + std::to_string(options_.id) + ": result not accepted: " +
                     Printable(reply.reason(), 400));
          if (reply.reason().rfind("unknown session", 0) == 0) Forget();
        }
        return;
      }
      if (Permanent(status)) throw Error("server " + options_.server + " refused: " + Said(status));
      BackOff("cannot deliver a result to " + options_.server + ": " + Said(status));
    }
  }

  void HeartbeatLoop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      stop_cv_.wait_for(lock, std::chrono::duration<double>(heartbeat_s_));
      // While a task request waits at the server, the server counts this
      // client as there and the request's answer carries what a heartbeat's
      // would (done, unknown session): an idle fleet sends one request per
      // pull_wait_s instead of one per heartbeat_s.
      if (stop_ || session_.empty() || waiting_.load()) continue;
      pb::HeartbeatRequest request;
      request.set_protocol_version(kProtocolVersion);
      request.set_client_id(options_.id);
      request.set_session(session_);
      lock.unlock();
      pb::HeartbeatReply reply;
      grpc::ClientContext context;
      context.set_deadline(In(5));
      const grpc::Status status = stub_->Heartbeat(&context, request, &reply);
      if (status.ok()) {
        Contact();
        if (reply.status() == pb::DONE) done_ = true;
        if (reply.status() == pb::UNKNOWN_SESSION) Forget();
      }
      lock.lock();
    }
  }

  void BackOff(const std::string& why) {
    const double silent = std::chrono::duration<double>(Clock::now() - last_contact()).count();
    if (silent > options_.give_up_s) {
      throw Error(why + "; no answer for " + std::to_string(static_cast<int>(silent)) +
                  " s, giving up (--give-up-after)");
    }
    double wait_s = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (backoff_s_ == 0) LogWarning(why + "; retrying");
      // The longest pause follows the heartbeat cadence the server asked for.
      backoff_s_ = std::clamp(backoff_s_ * 2, 0.25, std::clamp(5 * heartbeat_s_, 1.0, 10.0));
      wait_s = backoff_s_;
    }
    std::uniform_real_distribution<double> jitter(0.5, 1.0);  // so clients do not retry in step
    const auto until = std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(
                           std::chrono::duration<double>(wait_s * jitter(rng_)));
    // Wait on the channel, not asleep: a synchronous client's connection
    // (its TLS handshake) advances only while one of its threads waits in
    // gRPC, else only at gRPC's backup poll every 5 s, so that reaching a
    // restarted server took 15 to 20 s.
    grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
    while (std::chrono::system_clock::now() < until && channel_->WaitForStateChange(state, until)) {
      state = channel_->GetState(/*try_to_connect=*/true);
    }
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
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Federation::Stub> stub_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::atomic<bool> done_{false};
  std::atomic<bool> waiting_{false};  // a PullTask waits for its first answer

  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::string session_;  // empty: not registered
  double heartbeat_s_ = 2;
  size_t chunk_bytes_ = size_t{1} << 20;  // of a result's model chunks, as the server asks
  Clock::time_point last_contact_;
  double backoff_s_ = 0;
};

}  // namespace

void RunGrpcClient(const GrpcClientOptions& options,
                   const std::function<void(const ModelSpec& model, int64_t num_params)>& prepare,
                   const std::function<FitResult(const FitInstructions&)>& fit) {
  if (options.id < 0) throw Error("--id: a client id >= 0 is required");
  Session session(options);
  session.Run(prepare, fit);
}

}  // namespace fedprof
