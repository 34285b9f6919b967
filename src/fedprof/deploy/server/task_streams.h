#ifndef FEDPROF_DEPLOY_SERVER_TASK_STREAMS_H_
#define FEDPROF_DEPLOY_SERVER_TASK_STREAMS_H_

// The server's task requests (PullTask) and relays' batch requests
// (RelayPull): those parked until there is something to send, the streams
// that send a task's (or batch's) model in chunks, and the waker thread that
// answers a parked request when its wait ends. A parked request keeps its
// client alive (ClientRegistry::SetWaiting). Every call is answered exactly
// once, by whoever takes it out of the structure that holds it.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <vector>

#include "fedprof/deploy/server/client_registry.h"
#include "fedprof/deploy/server/service_state.h"

namespace fedprof::deploy {

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
  void Cancel();
  void Done();

 private:
  std::recursive_mutex mutex_;  // OnDone may run inside TryCancel
  grpc::CallbackServerContext* context_;
  std::atomic<Clock::rep> progress_;
};

class TaskStreams;

// One PullTask call (Chunk = TaskChunk) or RelayPull call (RelayTaskChunk).
// It is answered once: with a status alone, or with the task (its status,
// its header, then the round's shared model chunks, one write at a time).
template <typename Chunk>
class ModelStream final : public grpc::ServerWriteReactor<Chunk> {
 public:
  static constexpr bool kRelay = std::is_same_v<Chunk, pb::RelayTaskChunk>;

  ModelStream(TaskStreams* streams, grpc::CallbackServerContext* context)
      : sending(std::make_shared<Sending>(context)), streams_(streams) {}

  // Whose it is (a client's id, a relay's), once parked or sending (mutex held).
  int owner = -1;
  const std::shared_ptr<Sending> sending;

  void SendStatus(pb::Status status);
  // `header` holds the task's (or batch's) header.
  void Send(Chunk header, std::shared_ptr<const std::vector<Chunk>> chunks);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The status, the header, then the chunks; the last leaves with the
  // call's status.
  void WriteNext();

  TaskStreams* const streams_;
  Chunk status_;
  Chunk header_;
  std::shared_ptr<const std::vector<Chunk>> chunks_;
  size_t next_ = 0;        // the next message to write
  size_t sent_bytes_ = 0;  // model bytes written
};
using TaskStream = ModelStream<pb::TaskChunk>;
using BatchStream = ModelStream<pb::RelayTaskChunk>;

// The global model as a task's (or a relay batch's) chunks, at most
// `chunk_bytes` each.
template <typename Chunk>
std::shared_ptr<const std::vector<Chunk>> EncodeModel(const FlatParams& global, size_t chunk_bytes);

class TaskStreams {
 public:
  // Starts the waker.
  TaskStreams(ServiceState* state, ClientRegistry* registry);
  ~TaskStreams();
  // Stops the waker (ServiceState::stopping is set): no parked request is
  // answered by it after this returns.
  void StopWaker();

  // Parks client `id`'s request `pull` until `until`; returns its earlier
  // parked one (at most one per client), for the caller to answer, or null.
  // (mutex held)
  TaskStream* Park(int id, TaskStream* pull, Clock::time_point until);
  BatchStream* ParkRelay(int r, BatchStream* pull, Clock::time_point until);
  bool Parked(int id) const { return parked_.count(id) > 0; }
  bool RelayParked(int r) const { return relay_parked_.count(r) > 0; }
  // Takes client `id`'s (relay `r`'s) parked request out, for the caller to
  // answer. (mutex held)
  TaskStream* Unpark(int id);
  BatchStream* UnparkRelay(int r);
  // Takes every parked request out: the run is done (the registry hears who
  // was told) or the server stops. (mutex held)
  void UnparkAll(std::vector<TaskStream*>* clients, std::vector<BatchStream*>* relays);

  // Sends `task` on `pull`: the one task stream of its client, whose earlier
  // one (its client lost it and asked again) is cancelled, so that a client
  // holds at most one task's buffers at a time. (mutex not held)
  void Send(TaskStream* pull, const Task& task);
  void Send(BatchStream* pull, const Batch& batch);

  // The stream sending client `id` its task, or null. (mutex held)
  std::shared_ptr<Sending> SendingTo(int id) const;
  // Every stream being sent but those to the clients in `except`. (mutex held)
  std::vector<std::shared_ptr<Sending>> AllSending(const std::set<int>& except = {}) const;

  // ModelStream's: its call is done, or its caller cancelled it.
  template <typename Chunk>
  void SendingDone(ModelStream<Chunk>* pull);
  void CancelPull(TaskStream* pull);
  void CancelPull(BatchStream* pull);

  ServiceState& state() { return state_; }

 private:
  template <typename Stream>
  struct ParkedRequest {
    Stream* pull = nullptr;
    Clock::time_point until;
  };

  // Clients' streams under their ids, relays' under -1 - r.
  template <typename Chunk>
  static int SendingKey(const ModelStream<Chunk>* pull) {
    return ModelStream<Chunk>::kRelay ? -1 - pull->owner : pull->owner;
  }
  template <typename Chunk>
  void SendOn(ModelStream<Chunk>* pull, Chunk header, std::shared_ptr<const std::vector<Chunk>> chunks);
  // The parked request of client `owner` (a relay's: -1 - r) waits until
  // `until`: the waker answers it then. (mutex held)
  void Expires(Clock::time_point until, int owner);
  // Answers parked requests whose wait has ended, until the server stops.
  void WakeExpired();
  // Takes out the parked requests whose wait ended by `now`. (mutex held)
  void TakeExpired(Clock::time_point now, std::vector<TaskStream*>* ended,
                   std::vector<BatchStream*>* relays_ended);

  ServiceState& state_;
  ClientRegistry& registry_;
  std::condition_variable waker_cv_;  // the server stops, or a wait ends sooner
  // When parked requests' waits end, by owner (SendingKey's numbering); an
  // entry whose request was answered sooner is skipped when its time comes.
  std::multimap<Clock::time_point, int> expiries_;
  std::map<int, ParkedRequest<TaskStream>> parked_;         // by client id
  std::map<int, ParkedRequest<BatchStream>> relay_parked_;  // by relay id
  std::map<int, std::shared_ptr<Sending>> sending_;         // streams being sent (SendingKey)
  std::thread waker_;                                       // WakeExpired; last: it uses the rest
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_TASK_STREAMS_H_
