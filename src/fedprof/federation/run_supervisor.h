#ifndef FEDPROF_FEDERATION_RUN_SUPERVISOR_H_
#define FEDPROF_FEDERATION_RUN_SUPERVISOR_H_

// The runs of a federation, each a `fedprof server` process of its own
// (the one-run form, unchanged): started when submitted and fewer than
// max_runs run, on a port of its own, its output in STATE/runs/<n>/out and
// its log in STATE/runs/<n>/log.txt. A process per run keeps each run's
// data, results, secure-aggregation sessions and log apart, and a run that
// fails takes nothing else with it. Stopping a run asks its server to stop
// at the end of the round in progress (SIGTERM), which tells its clients
// that the run is over; a run still going after the grace is killed. The
// runs' processes die with the federation (PR_SET_PDEATHSIG); when it
// starts again it resumes each run that was running from its checkpoint.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fedprof/federation/store.h"

namespace fedprof::federation {

struct RunHost {
  std::string fedprof;     // the binary each run's server is (this one)
  std::string state_dir;
  std::string host;        // the runs' servers listen on host:port
  int first_port = 0;      // --run-ports A-B (0: any free port)
  int last_port = 0;
  std::string tls_dir;     // the federation's; each run's server presents its certificate
  bool insecure = false;   // loopback experiments only
  int max_runs = 4;        // at once; the rest wait, queued
  double stop_grace_s = 60;
  std::vector<std::string> data_roots;  // --data-root: where a run's config may name files
};

// A run's folder, STATE/runs/<n>.
std::string RunDir(const std::string& state_dir, int64_t run);

class RunSupervisor {
 public:
  // `changed` is called (from the supervisor's thread) whenever the runs
  // open to nodes change.
  RunSupervisor(Store* store, RunHost host, std::function<void()> changed);
  ~RunSupervisor();
  RunSupervisor(const RunSupervisor&) = delete;
  RunSupervisor& operator=(const RunSupervisor&) = delete;

  // Queues run `record` (its config already checked), with its TorchScript
  // module's bytes, if any; returns its id.
  int64_t Submit(RunRecord record, const std::string& model_bytes);

  // Asks run `id` to stop; "" when asked, else why not (unknown, over).
  std::string Stop(int64_t id, const std::string& by);

  // Rounds its server has finished, and the last round's accuracy (NaN
  // before the first).
  std::pair<int64_t, double> Progress(int64_t id) const;

 private:
  struct Child {
    int pid = -1;
    int port = 0;
    double term_sent_at = -1;  // seconds on the supervisor's clock
    size_t log_from = 0;       // where this start's lines begin in the run's log
  };

  void Loop();
  void Resume();                 // once, at start: the runs the last federation left, queued again
  void StartQueued();            // mutex held
  void Start(RunRecord& run);    // mutex held
  void Reap();                   // mutex held
  void ReadAddresses();          // mutex held
  void EnforceStops();           // mutex held
  // A port of --run-ports no run of ours holds, `preferred` if it is one
  // (mutex held); 0: let the server pick; -1: none free.
  int FreePort(int preferred) const;
  double Now() const;

  Store* const store_;
  const RunHost host_;
  const std::function<void()> changed_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::map<int64_t, Child> children_;
  std::map<int64_t, int> last_port_;  // each resumed run's port before the restart
  bool changed_since_ = false;        // the runs open to nodes changed: tell, once unlocked
  bool stopping_ = false;
  std::thread thread_;  // forks every run's server, so that PDEATHSIG follows the federation
};

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_RUN_SUPERVISOR_H_
