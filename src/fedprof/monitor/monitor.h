#ifndef FEDPROF_MONITOR_MONITOR_H_
#define FEDPROF_MONITOR_MONITOR_H_

// Watching a run while it runs (`--monitor HOST:PORT`): an HTTP server
// (cpp-httplib) serving /metrics (Prometheus text), /status (JSON),
// /healthz and / (a live dashboard). The round loop and the transports only
// publish into it: each call takes a short lock, updates counters and
// returns; the HTTP threads copy what was published under the same lock and
// render and send outside it, so no HTTP peer, however slow, holds up a
// round. Nothing published names a key, a certificate or a client's data.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fedprof/report/metrics.h"

namespace fedprof {

struct MonitorOptions {
  std::string listen;      // HOST:PORT; port 0 picks a free one
  std::string token_file;  // a bearer token every request must bring; empty: none
  // Directory with server.crt and server.key: HTTPS. Empty: plain HTTP.
  std::string tls_dir;
  std::string mode;        // simulate, compare, server, launch
};

// Refuses (fedprof::Error, one line) a --monitor address that is not
// HOST:PORT, or that is not loopback without a token file.
void CheckMonitorOptions(const MonitorOptions& options);

// What a run tells the monitor when it starts.
struct MonitorRunInfo {
  std::string run_id;         // its output directory
  std::string config_digest;  // Config::Fingerprint()
  int64_t rounds = 0;         // planned
  int64_t first_round = 1;    // > 1 when resumed
  int num_clients = 0;
  std::vector<std::string> client_kinds;  // data kind by client id (simulation), or empty
};

class MonitorHttpServer;

class RunMonitor {
 public:
  // Binds and starts serving; throws fedprof::Error when the address cannot
  // be bound, the token or TLS files cannot be read. Becomes Active().
  explicit RunMonitor(const MonitorOptions& options);
  ~RunMonitor();
  RunMonitor(const RunMonitor&) = delete;
  RunMonitor& operator=(const RunMonitor&) = delete;

  // The monitor of this process, or null when it runs without --monitor.
  static RunMonitor* Active();

  // http(s)://HOST:PORT/ actually bound.
  std::string url() const;

  // --- Published by the round loop.
  void BeginRun(const MonitorRunInfo& info);
  // Ends the current run: finished when `error` is empty, else failed.
  void EndRun(const std::string& error = "");
  // Time spent in one phase of the current round (select, train,
  // aggregate, evaluate, outputs).
  void AddPhase(const std::string& phase, double seconds);
  // One client's result: returned, refused (with why) or timed out; its
  // round time as its cost reports it.
  void AddResult(int client_id, bool used, bool timed_out, const std::string& why,
                 double client_seconds);
  // A completed round: its metrics, the times each client has been
  // selected so far and the scores behind its selection (may be empty).
  void EndRound(const RoundMetrics& metrics, const std::vector<int64_t>& times_selected,
                const std::vector<double>& scores);
  // Time spent on secure matching (Paillier) or secure aggregation.
  void AddSecureTime(const std::string& what, double seconds);

  // --- Published by the transports.
  // A source of the connected-client count, sampled once a second by the
  // monitor's own thread; an empty function removes it (call before the
  // source is destroyed).
  void SetConnectedSource(std::function<int()> source);
  void AddBytes(int64_t received, int64_t sent);
  // A request the transport refused (`kind`: a short fixed phrase).
  void AddTransportRefusal(const std::string& who, const std::string& kind);

  // --- Read by the HTTP side (and tests).
  std::string MetricsText() const;
  std::string StatusJson() const;

 private:
  struct State;
  void SampleConnected();
  std::string Render(const State& s, bool metrics) const;

  MonitorOptions options_;
  std::string token_;
  mutable std::mutex mu_;
  std::unique_ptr<State> state_;
  std::mutex source_mu_;  // held while the source is called, set or cleared
  std::function<int()> connected_source_;
  std::unique_ptr<MonitorHttpServer> http_;
  std::thread sampler_;  // samples the connected-client count
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
};

// Adds the wall time of the round loop's phases to the active monitor's
// round-time breakdown (nothing without a monitor): the time from
// construction (or the last Next) goes to the phase named then.
class PhaseTimer {
 public:
  explicit PhaseTimer(const char* phase);
  ~PhaseTimer() { Stop(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;
  void Next(const char* phase);
  void Stop();

 private:
  RunMonitor* monitor_;
  const char* phase_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

// Adds the wall time of its scope to the active monitor's secure-protocol
// time under `protocol` (nothing without a monitor).
class SecureTimer {
 public:
  explicit SecureTimer(const char* protocol)
      : monitor_(RunMonitor::Active()), protocol_(protocol), start_(std::chrono::steady_clock::now()) {}
  ~SecureTimer() {
    if (monitor_) {
      monitor_->AddSecureTime(protocol_, std::chrono::duration<double>(
                                             std::chrono::steady_clock::now() - start_).count());
    }
  }
  SecureTimer(const SecureTimer&) = delete;
  SecureTimer& operator=(const SecureTimer&) = delete;

 private:
  RunMonitor* monitor_;
  const char* protocol_;
  std::chrono::steady_clock::time_point start_;
};

// The label a refusal's reason is counted under: its words up to the first
// number, quote or colon, at most 48 characters (so that a label has few
// values, whatever a peer sends).
std::string ReasonLabel(const std::string& why);

}  // namespace fedprof

#endif  // FEDPROF_MONITOR_MONITOR_H_
