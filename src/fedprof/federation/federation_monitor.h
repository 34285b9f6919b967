#ifndef FEDPROF_FEDERATION_FEDERATION_MONITOR_H_
#define FEDPROF_FEDERATION_FEDERATION_MONITOR_H_

// A federation watched as a whole (fedprof federation serve --monitor
// HOST:PORT): /metrics (Prometheus text) with its runs by state, each
// run's progress labelled by its number, and its nodes; /status and
// /dashboard.json (the runs and nodes as `--format json` lists them); / a
// page listing them, live. Each run's own server can be watched as well
// (--monitor in its config's command line is not passed down: one port for
// the federation). The same token and TLS options as a run's monitor.

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "fedprof/monitor/monitor.h"

namespace fedprof {
class MonitorHttpServer;
}

namespace fedprof::federation {

struct FederationView {
  std::function<nlohmann::json()> runs;   // RunJson's, oldest first
  std::function<nlohmann::json()> nodes;  // NodeJson's
};

class FederationMonitor {
 public:
  // Binds and serves; fedprof::Error (one line) when it cannot.
  FederationMonitor(const MonitorOptions& options, FederationView view);
  ~FederationMonitor();
  std::string url() const;

  // {"federation": true, "runs": [...], "nodes": [...]}.
  nlohmann::json Status() const;
  std::string MetricsText() const;

 private:
  FederationView view_;
  std::string token_;
  std::unique_ptr<MonitorHttpServer> http_;
};

// Runs whose samples /metrics keeps once they are over, the latest ones:
// a federation's runs are not a bounded label set, its recent ones are.
inline constexpr size_t kMonitoredRunsOver = 50;

}  // namespace fedprof::federation

#endif  // FEDPROF_FEDERATION_FEDERATION_MONITOR_H_
