#include "fedprof/monitor/monitor.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/monitor/dashboard.h"
#include "fedprof/monitor/exposition.h"
#include "fedprof/monitor/http.h"

namespace fedprof {
namespace {

// Rounds and refusals the dashboard keeps; older ones fall off.
constexpr size_t kHistoryRounds = 5000;
constexpr size_t kLatestRefusals = 20;
constexpr size_t kConnectedSamples = 3600;  // an hour at one a second
// Distinct refusal reasons counted apart; the rest are "other".
constexpr size_t kMaxReasons = 32;

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// This process's resident memory now, in bytes (/proc/self/statm).
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

// min, lower quartile, median, upper quartile, max of the finite values.
std::vector<double> Quantiles(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  return {v.front(), at(0.25), at(0.5), at(0.75), v.back()};
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]" ||
         host.rfind("127.", 0) == 0;
}

void SplitHostPort(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    throw Error("--monitor: '" + listen + "' is not HOST:PORT (e.g. 127.0.0.1:9464)");
  }
  *host = listen.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  const std::string p = listen.substr(colon + 1);
  char* end = nullptr;
  const long v = std::strtol(p.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 65535) {
    throw Error("--monitor: port '" + p + "' is not a number from 0 to 65535");
  }
  *port = static_cast<int>(v);
}

// At most 64 printable ASCII characters of `s` (a peer's name as the
// transport gives it).
std::string Printable(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 64) break;
    const unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u >= 0x7f ? '?' : c);
  }
  return out;
}

}  // namespace

std::string ReasonLabel(const std::string& why) {
  std::string out;
  for (char c : why) {
    if ((c >= '0' && c <= '9') || c == ':' || c == '\'' || c == '"' || c == '(' || c == '=') break;
    if (out.size() >= 48) break;
    const unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u >= 0x7f ? ' ' : c);
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ',' || out.back() == '.')) {
    out.pop_back();
  }
  return out.empty() ? "other" : out;
}

void CheckMonitorOptions(const MonitorOptions& options) {
  std::string host;
  int port = 0;
  SplitHostPort(options.listen, &host, &port);
  if (!IsLoopback(host) && options.token_file.empty()) {
    throw Error("--monitor " + options.listen + ": serves beyond this machine; give "
                "--monitor-token-file FILE (a bearer token every request must bring)");
  }
}

std::unique_ptr<MonitorHttpServer> ServeMonitor(const MonitorOptions& options, HttpHandlers handlers) {
  CheckMonitorOptions(options);
  const std::string token =
      options.token_file.empty() ? "" : ReadBearerToken(options.token_file, "--monitor-token-file");
  handlers.authorized = [token](const std::string& authorization) { return BearerMatches(token, authorization); };
  std::string host;
  int port = 0;
  SplitHostPort(options.listen, &host, &port);
  return std::make_unique<MonitorHttpServer>(host, port, options.tls_dir, std::move(handlers));
}

struct RunMonitor::State {
  struct RoundPoint {
    RoundMetrics m;
    double duration_s = 0;
    int connected = 0;
    std::map<std::string, double> phases;
    std::vector<double> score_quantiles;
  };
  struct Refusal {
    double unix_time = 0;
    int64_t round = 0;
    std::string who, stage, reason;
  };

  // The current run.
  std::string run_id, config_digest, state = "starting", last_error;
  int64_t rounds = 0, round = 0;
  int num_clients = 0;
  std::vector<std::string> kinds;
  std::vector<int64_t> times_selected;
  std::deque<RoundPoint> history;
  std::map<std::string, double> round_phases;  // of the round under way
  std::chrono::steady_clock::time_point round_start = std::chrono::steady_clock::now();
  int64_t runs_started = 0, runs_finished = 0, runs_failed = 0;

  // Counters over the process's life (every run of a comparison).
  int connected = 0;
  bool connected_sampled = false;  // a transport publishes the count
  uint64_t rounds_total = 0, selected_total = 0, returned_total = 0, refused_total = 0,
           timed_out_total = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> refusals;  // (stage, reason)
  std::map<std::string, uint64_t> selections_by_kind;
  uint64_t bytes_received = 0, bytes_sent = 0;
  std::map<std::string, double> phase_seconds;
  std::map<std::string, double> secure_seconds;
  Histogram round_duration{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}};
  Histogram client_duration{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}};
  std::deque<Refusal> latest_refusals;
  std::deque<std::pair<double, int>> connected_series;  // (unix time, clients)
  double started_unix = UnixNow();

  void CountRefusal(const std::string& stage, const std::string& reason) {
    std::string label = reason;
    if (!refusals.count({stage, label})) {
      size_t of_stage = 0;
      for (const auto& [key, n] : refusals) of_stage += key.first == stage;
      if (of_stage >= kMaxReasons) label = "other";
    }
    ++refusals[{stage, label}];
  }
  void Remember(Refusal r) {
    latest_refusals.push_back(std::move(r));
    while (latest_refusals.size() > kLatestRefusals) latest_refusals.pop_front();
  }
};

RunMonitor::RunMonitor(const MonitorOptions& options)
    : options_(options), state_(std::make_unique<State>()) {
  HttpHandlers handlers;
  handlers.metrics = [this] { return MetricsText(); };
  handlers.status = [this] { return StatusJson(); };
  handlers.dashboard_data = [this] {
    std::unique_ptr<State> copy;
    {
      std::lock_guard<std::mutex> lock(mu_);
      copy = std::make_unique<State>(*state_);
    }
    return Render(*copy, /*metrics=*/false);
  };
  http_ = ServeMonitor(options, std::move(handlers));
  sampler_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stopping_) {
      lock.unlock();
      SampleConnected();
      lock.lock();
      // Wakes once a second; the destructor's notify ends the wait early.
      stop_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
    }
  });
  LogProgress("monitor: " + url() + " (/metrics, /status, /healthz)");
}

RunMonitor::~RunMonitor() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (sampler_.joinable()) sampler_.join();
  http_.reset();
}

std::string RunMonitor::url() const { return http_->url(); }

void RunMonitor::SampleConnected() {
  int connected = -1;
  {
    std::lock_guard<std::mutex> lock(source_mu_);
    if (connected_source_) connected = connected_source_();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (connected >= 0) {
    state_->connected = connected;
    state_->connected_sampled = true;
  }
  state_->connected_series.emplace_back(UnixNow(), state_->connected);
  while (state_->connected_series.size() > kConnectedSamples) state_->connected_series.pop_front();
}

void RunMonitor::SetConnectedSource(std::function<int()> source) {
  std::lock_guard<std::mutex> lock(source_mu_);
  connected_source_ = std::move(source);
}

void RunMonitor::BeginRun(const RunStartInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  State& s = *state_;
  s.run_id = info.run_id;
  s.config_digest = info.config_digest;
  s.rounds = info.rounds;
  s.round = info.first_round - 1;
  s.num_clients = info.num_clients;
  s.kinds = info.client_kinds;
  s.times_selected.assign(static_cast<size_t>(info.num_clients), 0);
  s.history.clear();
  s.round_phases.clear();
  s.state = "running";
  s.last_error.clear();
  s.round_start = std::chrono::steady_clock::now();
  if (!s.connected_sampled) s.connected = info.num_clients;  // simulated clients are all there
  ++s.runs_started;
}

void RunMonitor::EndRun(const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  State& s = *state_;
  s.state = error.empty() ? "finished" : "failed";
  s.last_error = error;
  ++(error.empty() ? s.runs_finished : s.runs_failed);
}

void RunMonitor::AddPhase(const std::string& phase, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  state_->round_phases[phase] += seconds;
  state_->phase_seconds[phase] += seconds;
}

void RunMonitor::AddResult(int client_id, bool used, bool timed_out, const std::string& why,
                           double client_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  State& s = *state_;
  if (used) {
    ++s.returned_total;
    if (std::isfinite(client_seconds) && client_seconds >= 0) s.client_duration.Observe(client_seconds);
    return;
  }
  const std::string reason = ReasonLabel(why);
  if (timed_out) {
    ++s.timed_out_total;
  } else {
    ++s.refused_total;
    s.CountRefusal("round", reason);
  }
  s.Remember({UnixNow(), s.round + 1, "client " + std::to_string(client_id),
              timed_out ? "timed out" : "round", reason});
}

void RunMonitor::EndRound(const RoundMetrics& m, const std::vector<int64_t>& times_selected,
                          const std::vector<double>& scores) {
  const std::vector<double> quantiles = Quantiles(scores);
  std::lock_guard<std::mutex> lock(mu_);
  State& s = *state_;
  const auto now = std::chrono::steady_clock::now();
  State::RoundPoint p;
  p.m = m;
  p.duration_s = std::chrono::duration<double>(now - s.round_start).count();
  p.connected = s.connected;
  p.phases = std::move(s.round_phases);
  p.score_quantiles = quantiles;
  s.round_phases.clear();
  s.round_start = now;
  s.round = m.round;
  ++s.rounds_total;
  s.selected_total += static_cast<uint64_t>(std::max(0, m.selected));
  s.round_duration.Observe(p.duration_s);
  for (size_t k = 0; k < times_selected.size() && k < s.times_selected.size(); ++k) {
    const int64_t added = times_selected[k] - s.times_selected[k];
    if (added > 0 && k < s.kinds.size()) s.selections_by_kind[s.kinds[k]] += static_cast<uint64_t>(added);
    s.times_selected[k] = times_selected[k];
  }
  s.history.push_back(std::move(p));
  while (s.history.size() > kHistoryRounds) s.history.pop_front();
}

void RunMonitor::AddSecureTime(const std::string& what, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  state_->secure_seconds[what] += seconds;
}

void RunMonitor::AddBytes(int64_t received, int64_t sent) {
  std::lock_guard<std::mutex> lock(mu_);
  state_->bytes_received += static_cast<uint64_t>(std::max<int64_t>(0, received));
  state_->bytes_sent += static_cast<uint64_t>(std::max<int64_t>(0, sent));
}

void RunMonitor::AddTransportRefusal(const std::string& who, const std::string& kind) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string reason = ReasonLabel(kind);
  state_->CountRefusal("transport", reason);
  state_->Remember({UnixNow(), state_->round + 1, Printable(who), "transport", reason});
}

std::string RunMonitor::MetricsText() const {
  std::unique_ptr<State> copy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    copy = std::make_unique<State>(*state_);
  }
  return Render(*copy, /*metrics=*/true);
}

std::string RunMonitor::StatusJson() const {
  nlohmann::json j;
  std::lock_guard<std::mutex> lock(mu_);
  const State& s = *state_;
  j["run_id"] = s.run_id;
  j["config_digest"] = s.config_digest;
  j["mode"] = options_.mode;
  j["state"] = s.state;
  j["round"] = s.round;
  j["rounds"] = s.rounds;
  j["clients"] = {{"total", s.num_clients}, {"connected", s.connected}};
  if (!s.history.empty()) {
    const RoundMetrics& m = s.history.back().m;
    j["clients"]["selected"] = m.selected;
    j["clients"]["returned"] = m.returned;
    j["clients"]["refused"] = m.refused;
    j["clients"]["timed_out"] = m.timed_out;
  }
  const State::RoundPoint* evaluated = nullptr;
  for (auto it = s.history.rbegin(); it != s.history.rend(); ++it) {
    if (it->m.evaluated) {
      evaluated = &*it;
      break;
    }
  }
  if (evaluated) {
    j["accuracy"] = evaluated->m.accuracy;
    j["loss"] = evaluated->m.loss;
    j["evaluated_round"] = evaluated->m.round;
  } else {
    j["accuracy"] = nullptr;
    j["loss"] = nullptr;
  }
  j["runs"] = {{"started", s.runs_started}, {"finished", s.runs_finished}, {"failed", s.runs_failed}};
  j["last_error"] = s.last_error;
  j["uptime_s"] = UnixNow() - s.started_unix;
  return j.dump() + "\n";
}

std::string RunMonitor::Render(const State& s, bool metrics) const {
  if (!metrics) {
    // The dashboard's data: the series of the current run.
    nlohmann::json j = nlohmann::json::parse(StatusJson());
    nlohmann::json rounds = nlohmann::json::array();
    for (const State::RoundPoint& p : s.history) {
      nlohmann::json r;
      r["round"] = p.m.round;
      r["accuracy"] = p.m.evaluated ? nlohmann::json(p.m.accuracy) : nlohmann::json(nullptr);
      r["loss"] = p.m.evaluated ? nlohmann::json(p.m.loss) : nlohmann::json(nullptr);
      if (p.m.fed_evaluated) {
        r["fed_accuracy"] = p.m.fed_accuracy;
        r["fed_loss"] = p.m.fed_loss;
      }
      r["train_loss"] = p.m.train_loss;
      r["selected"] = p.m.selected;
      r["returned"] = p.m.returned;
      r["refused"] = p.m.refused;
      r["timed_out"] = p.m.timed_out;
      r["duration_s"] = p.duration_s;
      r["phases"] = p.phases;
      r["scores"] = p.score_quantiles;
      rounds.push_back(std::move(r));
    }
    j["history"] = std::move(rounds);
    nlohmann::json connected = nlohmann::json::array();
    for (const auto& [t, n] : s.connected_series) connected.push_back({t, n});
    j["connected_series"] = std::move(connected);
    // Selections per client, grouped by data kind (kind "unknown" in a deployment).
    nlohmann::json by_kind = nlohmann::json::object();
    for (size_t k = 0; k < s.times_selected.size(); ++k) {
      const std::string kind = k < s.kinds.size() ? s.kinds[k] : "unknown";
      by_kind[kind].push_back({k, s.times_selected[k]});
    }
    j["selections"] = std::move(by_kind);
    nlohmann::json refusals = nlohmann::json::array();
    for (auto it = s.latest_refusals.rbegin(); it != s.latest_refusals.rend(); ++it) {
      refusals.push_back({{"time", it->unix_time}, {"round", it->round}, {"who", it->who},
                          {"stage", it->stage}, {"reason", it->reason}});
    }
    j["latest_refusals"] = std::move(refusals);
    return j.dump() + "\n";
  }

  Exposition e;
  e.Family("fedprof_info", "gauge", "The run being watched (value 1)");
  e.Sample("fedprof_info", {{"run_id", s.run_id}, {"mode", options_.mode},
                            {"config_digest", s.config_digest}, {"state", s.state}}, 1);
  e.Gauge("fedprof_round", "Rounds completed in the current run", s.round);
  e.Gauge("fedprof_rounds_planned", "Rounds the current run is configured for",
          static_cast<double>(s.rounds));
  e.Counter("fedprof_rounds_total", "Rounds completed by this process (every run)",
            static_cast<double>(s.rounds_total));
  const State::RoundPoint* central = nullptr;
  const State::RoundPoint* federated = nullptr;
  for (auto it = s.history.rbegin(); it != s.history.rend() && !(central && federated); ++it) {
    if (!central && it->m.evaluated) central = &*it;
    if (!federated && it->m.fed_evaluated) federated = &*it;
  }
  e.Family("fedprof_accuracy", "gauge",
           "Accuracy (R^2 for regression) of the global model at its last evaluation");
  e.Family("fedprof_loss", "gauge", "Loss of the global model at its last evaluation");
  if (central) {
    e.Sample("fedprof_accuracy", {{"evaluation", "central"}}, central->m.accuracy);
    e.Sample("fedprof_loss", {{"evaluation", "central"}}, central->m.loss);
  }
  if (federated) {
    e.Sample("fedprof_accuracy", {{"evaluation", "federated"}}, federated->m.fed_accuracy);
    e.Sample("fedprof_loss", {{"evaluation", "federated"}}, federated->m.fed_loss);
  }
  e.Gauge("fedprof_train_loss", "Mean local training loss of the last round's usable results",
          s.history.empty() ? 0.0 : s.history.back().m.train_loss);
  e.Gauge("fedprof_clients", "Client ids in the current run", s.num_clients);
  e.Gauge("fedprof_clients_connected",
          "Clients that can be selected now (registered and alive in a deployment)", s.connected);
  e.Counter("fedprof_clients_selected_total", "Clients asked to train",
            static_cast<double>(s.selected_total));
  e.Family("fedprof_client_results_total", "counter",
           "Results of clients asked to train, by outcome");
  e.Sample("fedprof_client_results_total", {{"outcome", "returned"}},
           static_cast<double>(s.returned_total));
  e.Sample("fedprof_client_results_total", {{"outcome", "refused"}},
           static_cast<double>(s.refused_total));
  e.Sample("fedprof_client_results_total", {{"outcome", "timed_out"}},
           static_cast<double>(s.timed_out_total));
  e.Family("fedprof_refusals_total", "counter",
           "Refusals by stage (round: a result the round loop refused; transport: a request the "
           "transport refused) and reason");
  for (const auto& [key, n] : s.refusals) {
    e.Sample("fedprof_refusals_total", {{"stage", key.first}, {"reason", key.second}},
             static_cast<double>(n));
  }
  if (!s.kinds.empty()) {
    e.Family("fedprof_selections_total", "counter",
             "Selections of simulated clients by their data kind");
    for (const auto& [kind, n] : s.selections_by_kind) {
      e.Sample("fedprof_selections_total", {{"data_kind", kind}}, static_cast<double>(n));
    }
  }
  e.Counter("fedprof_received_bytes_total", "Model and result bytes received from clients",
            static_cast<double>(s.bytes_received));
  e.Counter("fedprof_sent_bytes_total", "Model bytes sent to clients",
            static_cast<double>(s.bytes_sent));
  e.Histogram("fedprof_round_duration_seconds", "Wall time of each completed round",
              s.round_duration);
  e.Histogram("fedprof_client_round_duration_seconds",
              "A usable result's round time as its cost reports it (virtual in simulation, "
              "measured in a deployment)",
              s.client_duration);
  e.Family("fedprof_round_phase_seconds_total", "counter",
           "Wall time of the rounds by phase (select, train, aggregate, evaluate, outputs)");
  for (const auto& [phase, seconds] : s.phase_seconds) {
    e.Sample("fedprof_round_phase_seconds_total", {{"phase", phase}}, seconds);
  }
  if (!s.secure_seconds.empty()) {
    e.Family("fedprof_secure_seconds_total", "counter",
             "Server time spent on secure matching (Paillier decryption of the clients' scores)");
    for (const auto& [what, seconds] : s.secure_seconds) {
      e.Sample("fedprof_secure_seconds_total", {{"protocol", what}}, seconds);
    }
  }
  e.Gauge("process_resident_memory_bytes", "Resident memory of this process", ResidentBytes());
  e.Gauge("process_start_time_seconds", "Start of the monitor, seconds since the Unix epoch",
          s.started_unix);
  return e.text();
}

}  // namespace fedprof
