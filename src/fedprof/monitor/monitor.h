#ifndef FEDPROF_MONITOR_MONITOR_H_
#define FEDPROF_MONITOR_MONITOR_H_

// Watching a run while it runs (`--monitor HOST:PORT`): an HTTP server
// (Boost.Beast) serving /metrics (Prometheus text), /status (JSON),
// /healthz and / (a live dashboard). It is the run's observer
// (core/run_observer.h), handed to the round loop and the transports by the
// command that starts it; they only publish into it: each call takes a
// short lock, updates counters and returns; the HTTP thread copies what was
// published under the same lock and render and send outside it, so no HTTP
// peer, however slow, holds up a round. Nothing published names a key, a
// certificate or a client's data.

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

#include "fedprof/core/run_observer.h"
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

class MonitorHttpServer;
struct HttpHandlers;

// The HTTP(S) server of a monitor's `options` (checked as above), serving
// `handlers` to requests that bring the token of options.token_file, if
// one is given (handlers.authorized is set here).
std::unique_ptr<MonitorHttpServer> ServeMonitor(const MonitorOptions& options, HttpHandlers handlers);

class RunMonitor final : public RunObserver {
 public:
  // Binds and starts serving; throws fedprof::Error when the address cannot
  // be bound, the token or TLS files cannot be read.
  explicit RunMonitor(const MonitorOptions& options);
  ~RunMonitor() override;
  RunMonitor(const RunMonitor&) = delete;
  RunMonitor& operator=(const RunMonitor&) = delete;

  // http(s)://HOST:PORT/ actually bound.
  std::string url() const;

  // --- RunObserver: published by the round loop and the transports. The
  // connected-client count's source is sampled once a second by the
  // monitor's own thread.
  void BeginRun(const RunStartInfo& info) override;
  void EndRun(const std::string& error) override;
  void AddPhase(const std::string& phase, double seconds) override;
  void AddResult(int client_id, bool used, bool timed_out, const std::string& why,
                 double client_seconds) override;
  void EndRound(const RoundMetrics& metrics, const std::vector<int64_t>& times_selected,
                const std::vector<double>& scores) override;
  void AddSecureTime(const std::string& what, double seconds) override;
  void SetConnectedSource(std::function<int()> source) override;
  void AddBytes(int64_t received, int64_t sent) override;
  void AddTransportRefusal(const std::string& who, const std::string& kind) override;

  // --- Read by the HTTP side (and tests).
  std::string MetricsText() const;
  std::string StatusJson() const;

 private:
  struct State;
  void SampleConnected();
  std::string Render(const State& s, bool metrics) const;

  MonitorOptions options_;
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

// The label a refusal's reason is counted under: its words up to the first
// number, quote or colon, at most 48 characters (so that a label has few
// values, whatever a peer sends).
std::string ReasonLabel(const std::string& why);

}  // namespace fedprof

#endif  // FEDPROF_MONITOR_MONITOR_H_
