#ifndef FEDPROF_CORE_RUN_OBSERVER_H_
#define FEDPROF_CORE_RUN_OBSERVER_H_

// Whoever watches a run while it runs (--monitor's RunMonitor,
// monitor/monitor.h). The round loop reports its runs, rounds, phases and
// results to it, the selectors their secure-protocol time, the transports
// bytes, refusals and connected clients. Whoever assembles a run hands the
// observer down (run/, tools/fedprof/); null: nobody watches. Calls may
// come from any thread and return at once (a short lock, no I/O), so that
// an observer never holds up a round.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fedprof {

struct RoundMetrics;  // report/metrics.h

// What a run tells its observer when it starts.
struct RunStartInfo {
  std::string run_id;         // its output directory
  std::string config_digest;  // Config::Fingerprint()
  int64_t rounds = 0;         // planned
  int64_t first_round = 1;    // > 1 when resumed
  int num_clients = 0;
  std::vector<std::string> client_kinds;  // data kind by client id (simulation), or empty
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;

  // --- From the round loop.
  virtual void BeginRun(const RunStartInfo& info) = 0;
  // Ends the current run: finished when `error` is empty, else failed.
  virtual void EndRun(const std::string& error) = 0;
  // Time spent in one phase of the current round (select, train,
  // aggregate, evaluate, outputs).
  virtual void AddPhase(const std::string& phase, double seconds) = 0;
  // One client's result: returned, refused (with why) or timed out; its
  // round time as its cost reports it.
  virtual void AddResult(int client_id, bool used, bool timed_out, const std::string& why,
                         double client_seconds) = 0;
  // A completed round: its metrics, the times each client has been
  // selected so far and the scores behind its selection (may be empty).
  virtual void EndRound(const RoundMetrics& metrics, const std::vector<int64_t>& times_selected,
                        const std::vector<double>& scores) = 0;
  // Time spent on secure matching (Paillier) or secure aggregation.
  virtual void AddSecureTime(const std::string& what, double seconds) = 0;

  // --- From the transports.
  // A source of the connected-client count, sampled by the observer when
  // it likes; an empty function removes it (call before the source is
  // destroyed).
  virtual void SetConnectedSource(std::function<int()> source) = 0;
  virtual void AddBytes(int64_t received, int64_t sent) = 0;
  // A request the transport refused (`kind`: a short fixed phrase).
  virtual void AddTransportRefusal(const std::string& who, const std::string& kind) = 0;
};

// Adds the wall time of the round loop's phases to `observer`'s round-time
// breakdown (nothing when null): the time from construction (or the last
// Next) goes to the phase named then.
class PhaseTimer {
 public:
  PhaseTimer(RunObserver* observer, const char* phase) : observer_(observer) { Next(phase); }
  ~PhaseTimer() { Stop(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

  void Next(const char* phase) {
    Stop();
    if (observer_ == nullptr) return;
    phase_ = phase;
    start_ = std::chrono::steady_clock::now();
  }
  void Stop() {
    if (observer_ == nullptr || phase_ == nullptr) return;
    observer_->AddPhase(phase_, Seconds(start_));
    phase_ = nullptr;
  }

 private:
  static double Seconds(std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  }

  RunObserver* const observer_;
  const char* phase_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

// Adds the wall time of its scope to `observer`'s secure-protocol time
// under `protocol` (nothing when null).
class SecureTimer {
 public:
  SecureTimer(RunObserver* observer, const char* protocol)
      : observer_(observer), protocol_(protocol), start_(std::chrono::steady_clock::now()) {}
  ~SecureTimer() {
    if (observer_ == nullptr) return;
    observer_->AddSecureTime(protocol_, std::chrono::duration<double>(
                                            std::chrono::steady_clock::now() - start_).count());
  }
  SecureTimer(const SecureTimer&) = delete;
  SecureTimer& operator=(const SecureTimer&) = delete;

 private:
  RunObserver* const observer_;
  const char* protocol_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fedprof

#endif  // FEDPROF_CORE_RUN_OBSERVER_H_
