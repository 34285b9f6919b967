#ifndef FEDPROF_DEPLOY_CLIENT_SWARM_H_
#define FEDPROF_DEPLOY_CLIENT_SWARM_H_

// What the deployment clients of one process share (client.h's
// RunGrpcClients): the threads they compute on, the thread their timers
// fire on, and the count of those still running.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fedprof {

// Runs posted functions, in the order posted, on a fixed set of threads:
// where clients compute. Those still queued when it is destroyed run first.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);  // at least 1
  ~WorkerPool();
  void Post(std::function<void()> fn);

 private:
  void Loop();

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
};

// Calls each function at its time, from one thread: heartbeats and the ends
// of back-offs. The functions only start calls; they never block. Those
// still due when it is destroyed are dropped.
class TimerThread {
 public:
  using Clock = std::chrono::steady_clock;

  TimerThread();
  ~TimerThread();
  void At(Clock::time_point when, std::function<void()> fn);
  void After(double seconds, std::function<void()> fn);

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::multimap<Clock::time_point, std::function<void()>> due_;
  bool stop_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

// The clients of one process, and how the process learns that every client
// has ended with nothing of it left in flight.
class ClientSwarm {
 public:
  using Roster = std::map<int64_t, std::string>;

  // `label` names the clients in progress lines ("clients 0-4").
  ClientSwarm(int workers, int clients, std::string label = "");

  // More than one client: each says why it ended as it ends, and their
  // tasks are told a line a round (Computed), not a line a task.
  bool many() const { return many_; }

  // A task of round `round` computed by one of the clients: a training
  // task (`trained`) or a report, `ok` or failed, in `seconds`. The tally
  // of a round is printed in one line once a later round's task is
  // computed, or when the clients have all ended; what comes for a round
  // already printed is left out.
  void Computed(int64_t round, bool trained, bool ok, double seconds);
  WorkerPool& work() { return work_; }
  TimerThread& timers() { return timers_; }

  // A client has ended and nothing of it is in flight; once per client.
  void Finished();
  // Returns once every client has finished.
  void AwaitAll();

  // Every client's secure aggregation key as issued (tls.h's SecAggRoster),
  // read once for all the clients of the process, when first needed.
  std::shared_ptr<const Roster> RosterOf(const std::string& tls_dir);

 private:
  const bool many_;
  WorkerPool work_;
  TimerThread timers_;
  std::mutex mutex_;
  std::condition_variable finished_cv_;
  int unfinished_;
  std::map<std::string, std::shared_ptr<const Roster>> rosters_;

  struct Tally {
    int trained = 0, reported = 0, failed = 0;
    double slowest_s = 0;
  };
  void PrintRoundsBefore(int64_t round);  // with mutex_ held
  const std::string label_;
  std::map<int64_t, Tally> tallies_;  // rounds not printed yet
  int64_t printed_ = 0;               // the last round printed
};

}  // namespace fedprof

#endif  // FEDPROF_DEPLOY_CLIENT_SWARM_H_
