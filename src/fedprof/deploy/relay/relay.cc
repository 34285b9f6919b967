#include "fedprof/deploy/relay/relay.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "federation.grpc.pb.h"
#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/run_observer.h"
#include "fedprof/core/text.h"
#include "fedprof/deploy/server/grpc_transport.h"
#include "fedprof/deploy/shared/backoff.h"
#include "fedprof/deploy/shared/calls.h"
#include "fedprof/deploy/shared/model_chunks.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/protocol/wire.h"

namespace fedprof {

namespace pb = federation::v1;

namespace {

class Relay {
 public:
  Relay(const GrpcRelayOptions& options, RelayCheck check, RunObserver* observer)
      : options_(options),
        check_(std::move(check)),
        name_("relay " + std::to_string(options.id)),
        observer_(observer),
        backoff_(options.give_up_s) {
    grpc::ChannelArguments args = CallerChannelArguments();
    ExpectPeer(options.tls_dir, "server", &args);
    channel_ = grpc::CreateCustomChannel(
        options.server, ClientCredentials(options.tls_dir, "relay-" + std::to_string(options.id)), args);
    stub_ = pb::Federation::NewStub(channel_);
  }

  void Run() {
    // Nothing to serve before the server has said what its clients train.
    while (!Sync()) BackOff("cannot reach " + options_.server);
    std::thread syncs([this] { SyncEvery(); });
    try {
      Serve();
    } catch (...) {
      Stop(syncs);
      throw;
    }
    Stop(syncs);
    // The clients hear that the run is done, as from the server.
    clients_->Close();
  }

 private:
  void Stop(std::thread& syncs) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    syncs.join();
  }

  // Tells the server who this relay's clients are; false when the server
  // could not be reached. The first answer sets up the clients' side.
  bool Sync() {
    std::lock_guard<std::mutex> one_at_a_time(sync_mutex_);  // from both threads
    pb::RelaySyncRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_relay_id(options_.id);
    request.set_session(session());
    if (clients_) {
      const std::vector<ClientDescription> described = clients_->Describe();
      for (const ClientInfo& c : clients_->Available()) {
        pb::RelayedClient* rc = request.add_clients();
        rc->set_client_id(c.id);
        rc->set_num_samples(c.num_samples);
        rc->set_speed_ghz(described.at(c.id).speed_ghz);
        rc->set_bandwidth_mhz(described.at(c.id).bandwidth_mhz);
      }
    }
    pb::RelaySyncReply reply;
    grpc::ClientContext context;
    context.set_deadline(In(10));
    const grpc::Status status = stub_->RelaySync(&context, request, &reply);
    if (!status.ok()) {
      if (Permanent(status)) throw RefusedBy(status);
      return false;
    }
    const std::string mismatch = ProtocolMismatch(reply.protocol_version(), "the server");
    if (!mismatch.empty()) throw Error(mismatch);
    backoff_.Contact();
    if (reply.status() == pb::UNKNOWN_SESSION) {  // the server restarted: sync afresh
      std::lock_guard<std::mutex> lock(mutex_);
      session_.clear();
      return true;
    }
    if (reply.status() == pb::DONE) done_ = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      session_ = reply.session();
    }
    if (!clients_) OpenClientSide(reply);
    for (int i = 0; i < reply.refused_ids_size() && i < reply.refused_reasons_size(); ++i) {
      const int id = reply.refused_ids(i);
      const std::string why = Printable(reply.refused_reasons(i), 400);
      if (refused_[id] == why) continue;  // said once, not every heartbeat
      refused_[id] = why;
      LogWarning(name_ + ": the server does not take client " + std::to_string(id) + " through it: " + why);
    }
    return true;
  }

  // The server's setup, checked as any client checks what a server sends,
  // becomes the relay's own server for its clients.
  void OpenClientSide(const pb::RelaySyncReply& reply) {
    const pb::RegisterReply& setup = reply.setup();
    if (reply.num_clients() < 1 || setup.num_params() < 1 ||
        static_cast<uint64_t>(setup.num_params()) > kMaxModelValues) {
      throw Error(name_ + ": the server states " + std::to_string(reply.num_clients()) + " clients and " +
                  std::to_string(setup.num_params()) + " model values");
    }
    GrpcServerOptions o;
    o.listen = options_.listen;
    o.tls_dir = options_.tls_dir;
    o.cert_name = "relay-" + std::to_string(options_.id);
    o.num_clients = reply.num_clients();
    o.model = FromWire(setup.model());
    o.num_params = setup.num_params();
    o.features = FromWire(setup.features());
    heartbeat_s_ = std::clamp(setup.heartbeat_s(), 0.05, 3600.0);
    o.heartbeat_s = heartbeat_s_;
    o.heartbeat_timeout_s = std::clamp(reply.heartbeat_timeout_s(), 2 * heartbeat_s_, 36000.0);
    o.chunk_bytes = static_cast<size_t>(std::clamp<int64_t>(setup.chunk_bytes(), 1024, 3 << 20));
    o.max_samples = std::clamp<int64_t>(reply.max_samples(), 1, kMaxModelSumWeight);
    num_params_ = static_cast<size_t>(setup.num_params());
    chunk_bytes_ = o.chunk_bytes;
    clients_ = std::make_unique<GrpcTransport>(o, observer_);
    LogProgress("fedprof " + name_ + ": listening on " + clients_->address() + " for clients" +
                (options_.tls_dir.empty() ? " (INSECURE)" : " (mutual TLS)") + ", relaying to " +
                options_.server);
  }

  void SyncEvery() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_ && !done_) {
      stop_cv_.wait_for(lock, std::chrono::duration<double>(heartbeat_s_));
      if (stop_) return;
      lock.unlock();
      try {
        Sync();
      } catch (const Error& e) {  // the main loop meets the same refusal
        LogWarning(name_ + ": " + e.what());
      }
      lock.lock();
    }
  }

  // Takes batches of tasks from the server and serves them, until done.
  void Serve() {
    while (!done_) {
      if (session().empty() && !Sync()) {
        BackOff("cannot reach " + options_.server);
        continue;
      }
      pb::RelayBatchHeader header;
      if (std::shared_ptr<FlatParams> global = Pull(&header)) ServeBatch(header, std::move(global));
    }
  }

  // Asks for a batch; its model when one came whole, else null.
  std::shared_ptr<FlatParams> Pull(pb::RelayBatchHeader* header) {
    const std::string current = session();
    if (current.empty()) return nullptr;
    pb::RelayPullRequest request;
    request.set_protocol_version(kProtocolVersion);
    request.set_relay_id(options_.id);
    request.set_session(current);
    const bool connected = channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
    const double wait_s = connected ? 25 : 0;
    request.set_wait_s(wait_s);
    grpc::ClientContext context;
    context.set_deadline(In(wait_s + (connected ? 60 : 10)));
    std::unique_ptr<grpc::ClientReader<pb::RelayTaskChunk>> reader = stub_->RelayPull(&context, request);
    pb::RelayTaskChunk chunk;
    pb::Status status = pb::WAIT;
    std::shared_ptr<FlatParams> global;
    try {
      if (reader->Read(&chunk) && chunk.has_status()) {
        status = chunk.status();
        if (status == pb::TASK && reader->Read(&chunk) && chunk.has_header()) {
          *header = chunk.header();
          const int64_t n = header->num_params();
          if (n != static_cast<int64_t>(num_params_)) {
            throw Error("a batch for a model of " + std::to_string(n) + " values, not " +
                        std::to_string(num_params_));
          }
          ModelChunks model(num_params_);
          while (reader->Read(&chunk) && chunk.has_params()) model.Add(chunk.params());
          if (model.whole()) global = model.Take();
        }
      }
    } catch (const Error& e) {
      context.TryCancel();
      reader->Finish();
      throw Error("batch from " + options_.server + ": " + e.what());
    }
    const grpc::Status finished = reader->Finish();
    if (!finished.ok()) {
      if (Permanent(finished)) throw RefusedBy(finished);
      BackOff("lost " + options_.server + ": " + Said(finished));
      return nullptr;
    }
    backoff_.Contact();
    if (status == pb::DONE) done_ = true;
    if (status == pb::UNKNOWN_SESSION) {
      std::lock_guard<std::mutex> lock(mutex_);
      session_.clear();
    }
    return status == pb::TASK ? global : nullptr;
  }

  // Hands a batch's tasks to its clients, passes each result on for the
  // server's verdict, and sends up the sum of the accepted models.
  void ServeBatch(const pb::RelayBatchHeader& header, std::shared_ptr<const FlatParams> global) {
    if (header.tasks_size() == 0) return;
    std::map<int, int64_t> task_ids;
    std::vector<ClientInstructions> tasks;
    try {
      tasks = FromWire(header, clients_->num_clients(), global, &task_ids);
    } catch (const Error& e) {
      throw Error("batch from " + options_.server + ": " + e.what());
    }
    // The clients' round ends before the server's, so that the sum gets there in time.
    clients_->SetRoundTimeout(std::max(1.0, 0.9 * header.deadline_s()));
    ModelSum sum;
    sum.Reset(num_params_);
    std::vector<int> summed;
    clients_->Fit(tasks, [&](size_t index, FitResult&& r) -> std::string {
      const int id = tasks[index].client_id;
      const bool trained = tasks[index].instructions.train.epochs > 0;
      std::string why = r.ok ? check_(r, num_params_, trained) : "";
      pb::RelayResultRequest request;
      request.set_protocol_version(kProtocolVersion);
      request.set_relay_id(options_.id);
      request.set_session(session());
      request.set_batch_id(header.batch_id());
      pb::ResultHeader* h = request.mutable_result();
      ToWire(r, h);
      h->set_client_id(id);
      h->set_task_id(task_ids.at(id));
      h->set_num_params(0);  // the model stays here, for the sum
      h->set_profiling_s(r.cost.profiling_time_s);
      if (!why.empty()) {
        h->set_ok(false);
        h->set_error((name_ + " refused it: " + why).substr(0, kMaxErrorLength));
      }
      pb::PushReply reply;
      grpc::ClientContext context;
      context.set_deadline(In(30));
      const grpc::Status status = stub_->RelayResult(&context, request, &reply);
      if (why.empty() && !status.ok()) why = "the server did not take it: " + Said(status);
      if (why.empty() && !reply.accepted()) why = Printable(reply.reason(), 400);
      if (observer_) observer_->AddResult(id, why.empty(), r.timed_out, why, r.cost.time_s);
      if (!why.empty()) return why;
      if (r.ok && trained) {
        sum.Add(r.params, r.num_samples);
        summed.push_back(id);
      }
      return "";
    });
    if (!summed.empty()) SendSum(header.batch_id(), summed, sum);
    LogProgress(name_ + ": round " + std::to_string(tasks.front().instructions.round) + ": " +
                std::to_string(tasks.size()) + " tasks, the sum of " + std::to_string(summed.size()) +
                " accepted models sent up");
  }

  void SendSum(int64_t batch, const std::vector<int>& ids, const ModelSum& sum) {
    const std::string bytes = sum.Serialize();
    pb::RelaySumChunk head;
    pb::RelaySumHeader* h = head.mutable_header();
    h->set_protocol_version(kProtocolVersion);
    h->set_relay_id(options_.id);
    h->set_session(session());
    h->set_batch_id(batch);
    *h->mutable_client_ids() = {ids.begin(), ids.end()};
    h->set_bytes(static_cast<int64_t>(bytes.size()));
    pb::PushReply reply;
    grpc::ClientContext context;
    context.set_deadline(In(120));
    std::unique_ptr<grpc::ClientWriter<pb::RelaySumChunk>> writer = stub_->RelaySum(&context, &reply);
    bool ok = writer->Write(head);
    pb::RelaySumChunk part;
    for (size_t at = 0; ok && at < bytes.size(); at += chunk_bytes_) {
      part.set_sum(bytes.substr(at, chunk_bytes_));
      ok = writer->Write(part);
    }
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    if (!status.ok() || !reply.accepted()) {
      LogWarning(name_ + ": the sum of batch " + std::to_string(batch) + " (" + std::to_string(ids.size()) +
                 " models) was not taken: " + (status.ok() ? Printable(reply.reason(), 400) : Said(status)));
    }
  }

  // Waits before trying again, longer after each failure, on the channel so
  // that its connection advances; throws once the server has been silent
  // for give_up_s.
  void BackOff(const std::string& why) {
    double heartbeat_s = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      heartbeat_s = heartbeat_s_;
    }
    const Backoff::Step step = backoff_.Failed(heartbeat_s);
    if (step.give_up) throw Error(GivingUp(why, step.silent_s));
    if (step.first) LogWarning(name_ + ": " + why + "; retrying");
    const auto until = In(step.wait_s);
    grpc_connectivity_state state = channel_->GetState(/*try_to_connect=*/true);
    while (std::chrono::system_clock::now() < until && channel_->WaitForStateChange(state, until)) {
      state = channel_->GetState(/*try_to_connect=*/true);
    }
  }

  std::string session() {
    std::lock_guard<std::mutex> lock(mutex_);
    return session_;
  }
  // The server's refusal of this relay, which no retry can mend.
  Error RefusedBy(const grpc::Status& status) const {
    return Error("server " + options_.server + " refused " + name_ + ": " + Said(status));
  }

  const GrpcRelayOptions options_;
  const RelayCheck check_;
  const std::string name_;
  RunObserver* const observer_;  // --monitor's, or null
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Federation::Stub> stub_;
  std::unique_ptr<GrpcTransport> clients_;  // the relay's server for its clients
  size_t num_params_ = 0;
  size_t chunk_bytes_ = size_t{1} << 20;
  std::atomic<bool> done_{false};
  std::mutex sync_mutex_;
  std::map<int, std::string> refused_;  // the last refusal said of each client (under sync_mutex_)

  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::string session_;
  double heartbeat_s_ = 2;
  Backoff backoff_;
};

}  // namespace

void RunGrpcRelay(const GrpcRelayOptions& options, const RelayCheck& check, RunObserver* observer) {
  if (options.id < 0) throw Error("--id: a relay id >= 0 is required");
  Relay relay(options, check, observer);
  relay.Run();
}

}  // namespace fedprof
