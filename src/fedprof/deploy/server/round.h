#ifndef FEDPROF_DEPLOY_SERVER_ROUND_H_
#define FEDPROF_DEPLOY_SERVER_ROUND_H_

// The server's current round (one Fit call of the round loop): its tasks,
// the batches that carry its relays' tasks, its secure aggregation session,
// and the queue of what arrived for the round loop to judge (results, sums,
// time-outs). The round loop's thread runs Fit; the gRPC handlers reach the
// open tasks through ResultIntake and RelayHub.

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "fedprof/deploy/server/client_registry.h"
#include "fedprof/deploy/server/secagg_sessions.h"
#include "fedprof/deploy/server/service_state.h"
#include "fedprof/deploy/server/task_streams.h"
#include "fedprof/secagg/crypto.h"

namespace fedprof::deploy {

class Round {
 public:
  Round(ServiceState* state, ClientRegistry* registry, TaskStreams* streams);

  // Opens a task for each client and hands every result (and relay sum) to
  // `sink`, returning once each has one: its result, its time-out, or its
  // client gone. The round loop's thread.
  void Fit(const std::vector<ClientInstructions>& tasks, const Transport::ResultSink& sink);
  // An asynchronous run's tasks (FedBuff): Launch opens a streamed task for
  // each client and returns once they are sent; each task's result is due
  // deploy.round_timeout_s after its opening, whatever else is open.
  // AwaitStreamed hands `sink` the next streamed task's result (index: its
  // client id) and answers its caller, waiting while one is open; false when
  // none is. Fit may run meanwhile (profile reports, evaluations): its
  // tasks and results are its own, and a client training a streamed task
  // gets none of them. The round loop's thread.
  void Launch(const std::vector<ClientInstructions>& tasks);
  bool AwaitStreamed(const Transport::ResultSink& sink);
  // How long a Fit call (a launched task) waits for results from now on.
  void SetTimeout(double s) { timeout_s_.store(s); }

  // Client `id`'s open task, or null. (mutex held)
  Task* OpenTask(int id);
  // Client `id`'s task of this round, open or closed, or null. (mutex held)
  const Task* AnyTask(int id) const;
  // Relay `r`'s batch not yet sent, marked sent, or null. (mutex held)
  Batch* TakeUnsentBatch(int r);
  // Batch `b` of the round, or null. (mutex held)
  Batch* FindBatch(int64_t b);
  // The round's secure aggregation session, or null. (mutex held)
  std::shared_ptr<SecAggRendezvous> session() const { return secagg_; }

  // Queues `a` for the round loop. (mutex held)
  void Arrive(Arrival a);
  // Closes client `id`'s task `task_id` with its result `a`; false when the
  // task is no longer open (its round ended, or the server stops). (mutex held)
  bool Close(int id, int64_t task_id, Arrival a);
  // Client `id`'s open task, if it has one, ends with a refusal its round
  // counts. (mutex not held)
  void CloseAsRefused(int id, const std::string& why);

  // The round loop's verdict on a result ends its call; "" accepts.
  void Answer(const std::shared_ptr<Verdict>& verdict, const std::string& why);
  // A call whose result waits for the round loop's verdict, cancelled by its
  // caller, is finished now with `finish`; the round loop still judges the
  // result.
  void CancelVerdict(const void* call, const std::function<void()>& finish);

  // The server stops: the results not yet judged, each to be answered, and
  // the session ended (its held replies are answered). (mutex held)
  std::deque<Arrival> Stop();

  // The run's id, bound into every secure aggregation session (drawn at
  // start, kept by checkpoints). (mutex held)
  const secagg::Bytes& run_id() const { return run_id_; }
  void set_run_id(secagg::Bytes id) { run_id_ = std::move(id); }

 private:
  // What a Fit call sends: to clients directly, and to relays in batches.
  struct Dispatch {
    std::vector<std::pair<TaskStream*, Task>> to_clients;
    std::vector<std::pair<BatchStream*, Batch>> to_relays;
  };
  // The round's secure aggregation session over its training tasks.
  struct SessionOpening {
    std::map<int64_t, size_t> index_of;  // the task index of each client invited
    std::shared_ptr<const pb::SecAggSetup> setup;
    std::string why_none;  // why the training tasks have no session
  };
  using RelayModels = std::map<const FlatParams*, std::shared_ptr<const std::vector<pb::RelayTaskChunk>>>;

  // The tasks with their models encoded once per model (per relay batch
  // model: `for_relays`); `relay_of` each task's client's relay, or -1.
  std::vector<Task> Prepare(const std::vector<ClientInstructions>& tasks, const std::vector<int>& relay_of,
                            RelayModels* for_relays) const;
  SessionOpening OpenSession(const std::vector<ClientInstructions>& tasks);  // (mutex held)
  // Makes `opened` the round's tasks and batches; what can be sent now.
  // (mutex held)
  Dispatch Place(const std::vector<ClientInstructions>& tasks, const std::vector<int>& relay_of,
                 std::vector<Task> opened, const RelayModels& for_relays, const SessionOpening& session);
  // Adds `t` (of client `id`, through relay `r`) to the relay's batch of
  // its model. (mutex held)
  void Batched(int id, int r, const RelayModels& for_relays,
               std::map<std::pair<int, const FlatParams*>, int64_t>* batch_of, Task* t);
  // Judges what arrives until every task has its result and every awaited
  // sum is in.
  void Judge(const Transport::ResultSink& sink, size_t tasks, Clock::time_point deadline,
             std::unique_lock<std::mutex>& lock);
  // Closes the tasks whose clients left or whose results are overdue, and
  // waits (up to `deadline`, at most 200 ms) for `queue` to hold an arrival.
  // (lock held on entry and exit)
  void AwaitArrival(Clock::time_point deadline, const std::deque<Arrival>& queue,
                    std::unique_lock<std::mutex>& lock);
  // Hands each arrival to `sink` and answers its caller. (lock held on entry and exit)
  void JudgeArrivals(const Transport::ResultSink& sink, size_t* remaining,
                     std::unique_lock<std::mutex>& lock);
  // Open tasks whose clients left or stalled, or past their deadlines, end
  // as timed out; the stalled streams are returned to be cancelled. (mutex held)
  std::vector<std::shared_ptr<Sending>> CloseLeavers(Clock::time_point now);
  // A sum whose relay is gone, or past the deadline, will not come. (mutex held)
  void QueueLostSums(Clock::time_point now, Clock::time_point deadline);
  // Whether an accepted result's model still awaits its relay's sum. (mutex held)
  bool WaitingForSums() const;
  // Runs the round's secure aggregation session among the clients whose
  // results were accepted, and hands its sum to the round loop (`task`: the
  // round's, as SessionSum reads it).
  void Aggregate(SecAggRendezvous& session, const FitInstructions& task,
                 const std::map<int64_t, size_t>& index_of, const Transport::ResultSink& sink);

  ServiceState& state_;
  ClientRegistry& registry_;
  TaskStreams& streams_;
  std::atomic<double> timeout_s_;  // a relay's follows each batch
  double fit_timeout_s_ = 0;        // the current Fit call's (its thread alone)
  std::map<int, Task> tasks_;  // the Fit call's tasks and the open streamed ones, by client id
  std::map<int64_t, Batch> batches_;  // of the current Fit call
  std::shared_ptr<SecAggRendezvous> secagg_;  // the current Fit call's session
  std::deque<Arrival> arrived_;   // for the Fit call
  std::deque<Arrival> streamed_;  // of streamed tasks, for AwaitStreamed
  secagg::Bytes run_id_ = secagg::RandomBytes(secagg::kKeyBytes);
  int64_t next_task_id_ = 1;
  int64_t next_batch_id_ = 1;
};

}  // namespace fedprof::deploy

#endif  // FEDPROF_DEPLOY_SERVER_ROUND_H_
