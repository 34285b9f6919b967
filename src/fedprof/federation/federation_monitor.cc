#include "fedprof/federation/federation_monitor.h"

#include <map>
#include <utility>
#include <vector>

#include "fedprof/monitor/dashboard.h"
#include "fedprof/monitor/exposition.h"
#include "fedprof/monitor/http.h"

namespace fedprof::federation {
namespace {

using nlohmann::json;

bool Over(const std::string& state) { return state == "finished" || state == "stopped" || state == "failed"; }

// The federation's page: its runs and nodes in two tables, polled as the
// run's dashboard polls (DashboardPollScript).
const std::string& FederationPage() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>FedProf federation</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#222}
header{background:#1f2937;color:#fff;padding:10px 18px;display:flex;gap:28px;flex-wrap:wrap;align-items:baseline}
header h1{font-size:18px;margin:0}
.kv{font-size:14px}.kv b{font-size:18px}
section{background:#fff;border-radius:6px;padding:10px 14px;margin:14px;box-shadow:0 1px 2px #0002}
section h2{font-size:14px;margin:0 0 6px}
table{border-collapse:collapse;font-size:13px;width:100%}
td,th{border-bottom:1px solid #ddd;padding:3px 6px;text-align:left}
#error{color:#fca5a5}
</style></head><body>
<header><h1>FedProf federation</h1>
<span class="kv">runs <b id="runs_total">-</b></span>
<span class="kv">running <b id="runs_running">-</b></span>
<span class="kv">nodes connected <b id="nodes_connected">-</b> / <span id="nodes_total">-</span></span>
<span class="kv" id="error"></span></header>
<section><h2>Runs</h2><table><thead><tr><th>run</th><th>name</th><th>state</th><th>strategy</th><th>round</th>
<th>accuracy</th><th>submitted by</th><th>nodes</th><th>detail</th></tr></thead><tbody id="runs"></tbody></table></section>
<section><h2>Nodes</h2><table><thead><tr><th>node</th><th>state</th><th>connected</th><th>last seen</th>
<th>version</th><th>certificate expires</th><th>runs served</th><th>serving</th></tr></thead><tbody id="nodes"></tbody></table></section>
<script>
"use strict";
function rows(id, items, prefix, cells) {
  document.getElementById(id).replaceChildren(...items.map(item => {
    const tr = document.createElement("tr");
    tr.id = prefix + item[prefix === "run-" ? "run" : "id"];
    cells(item).forEach((v, i) => {
      const td = document.createElement("td"); td.textContent = v; td.id = tr.id + "-" + i; tr.appendChild(td); });
    return tr;
  }));
}
function render(d) {
  set("runs_total", d.runs.length);
  set("runs_running", d.runs.filter(r => r.state === "running").length);
  set("nodes_connected", d.nodes.filter(n => n.connected).length);
  set("nodes_total", d.nodes.length);
  set("error", "");
  rows("runs", d.runs, "run-", r => [r.run, r.name, r.state, r.strategy, r.rounds_done + "/" + r.rounds,
    r.accuracy === null ? "-" : Number(r.accuracy).toFixed(4), r.submitted_by, r.nodes.join(", "), r.detail]);
  rows("nodes", d.nodes, "node-", n => [n.id, n.state, n.connected ? "yes" : "no", n.last_seen || "never",
    n.version, n.cert_expires, n.runs_served, n.serving.join(", ") || "-"]);
}
)HTML" + DashboardPollScript() + R"HTML(</script></body></html>
)HTML";
  return page;
}

}  // namespace

FederationMonitor::FederationMonitor(const MonitorOptions& options, FederationView view) : view_(std::move(view)) {
  HttpHandlers handlers;
  handlers.metrics = [this] { return MetricsText(); };
  handlers.status = [this] { return Status().dump(-1, ' ', false, json::error_handler_t::replace); };
  handlers.dashboard_data = handlers.status;
  handlers.page = [] { return FederationPage(); };
  http_ = ServeMonitor(options, std::move(handlers));
}

FederationMonitor::~FederationMonitor() = default;

std::string FederationMonitor::url() const { return http_->url(); }

json FederationMonitor::Status() const {
  return {{"federation", true}, {"runs", view_.runs()}, {"nodes", view_.nodes()}};
}

std::string FederationMonitor::MetricsText() const {
  const json runs = view_.runs(), nodes = view_.nodes();
  Exposition e;
  std::map<std::string, int> by_state;
  for (const char* state : {"queued", "starting", "running", "stopping", "finished", "stopped", "failed"}) {
    by_state[state] = 0;
  }
  for (const json& r : runs) ++by_state[r.at("state").get<std::string>()];
  e.Family("fedprof_federation_runs", "gauge", "The federation's runs, by state");
  for (const auto& [state, n] : by_state) e.Sample("fedprof_federation_runs", {{"state", state}}, n);

  // Each run that is not over, and the latest kMonitoredRunsOver that are.
  std::vector<const json*> shown;
  size_t over = 0;
  for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
    if (!Over(it->at("state").get<std::string>()) || over++ < kMonitoredRunsOver) shown.insert(shown.begin(), &*it);
  }
  auto labels = [](const json& r) {
    return Exposition::Labels{{"run", r.at("run").dump()}, {"name", r.at("name").get<std::string>()}};
  };
  e.Family("fedprof_federation_run_info", "gauge", "A run's state and strategy (value 1)");
  for (const json* r : shown) {
    Exposition::Labels l = labels(*r);
    l.push_back({"state", r->at("state").get<std::string>()});
    l.push_back({"strategy", r->at("strategy").get<std::string>()});
    e.Sample("fedprof_federation_run_info", l, 1);
  }
  e.Family("fedprof_federation_run_rounds_done", "gauge", "Rounds a run has finished");
  for (const json* r : shown) e.Sample("fedprof_federation_run_rounds_done", labels(*r), r->at("rounds_done").get<double>());
  e.Family("fedprof_federation_run_rounds", "gauge", "Rounds a run's config asks for");
  for (const json* r : shown) e.Sample("fedprof_federation_run_rounds", labels(*r), r->at("rounds").get<double>());
  e.Family("fedprof_federation_run_accuracy", "gauge", "A run's accuracy at its last finished round");
  for (const json* r : shown) {
    if (r->at("accuracy").is_number()) e.Sample("fedprof_federation_run_accuracy", labels(*r), r->at("accuracy").get<double>());
  }
  e.Family("fedprof_federation_run_nodes", "gauge", "Nodes that have served a run");
  for (const json* r : shown) {
    e.Sample("fedprof_federation_run_nodes", labels(*r), static_cast<double>(r->at("nodes").size()));
  }
  e.Family("fedprof_federation_run_refusals", "gauge", "Nodes whose policy refused a run");
  for (const json* r : shown) {
    e.Sample("fedprof_federation_run_refusals", labels(*r), static_cast<double>(r->at("refusals").size()));
  }

  int connected = 0, disconnected = 0, revoked = 0;
  for (const json& n : nodes) {
    if (n.at("state") == "revoked") {
      ++revoked;
    } else if (n.at("connected").get<bool>()) {
      ++connected;
    } else {
      ++disconnected;
    }
  }
  e.Family("fedprof_federation_nodes", "gauge", "The federation's enrolled nodes: connected, not, or revoked");
  e.Sample("fedprof_federation_nodes", {{"state", "connected"}}, connected);
  e.Sample("fedprof_federation_nodes", {{"state", "disconnected"}}, disconnected);
  e.Sample("fedprof_federation_nodes", {{"state", "revoked"}}, revoked);
  e.Family("fedprof_federation_node_connected", "gauge", "Whether a node is connected (1) or not (0)");
  for (const json& n : nodes) {
    e.Sample("fedprof_federation_node_connected", {{"node", n.at("id").dump()}, {"state", n.at("state").get<std::string>()}},
             n.at("connected").get<bool>() ? 1 : 0);
  }
  e.Family("fedprof_federation_node_runs_served_total", "counter", "Runs a node has served");
  for (const json& n : nodes) {
    e.Sample("fedprof_federation_node_runs_served_total", {{"node", n.at("id").dump()}}, n.at("runs_served").get<double>());
  }
  return e.text();
}

}  // namespace fedprof::federation
