#include "fedprof/run/recorder.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/text.h"
#include "fedprof/data/partition.h"
#include "fedprof/report/plots.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {
namespace {

std::string ScoresHeader(size_t num_clients) {
  std::string header = "round";
  for (size_t k = 0; k < num_clients; ++k) header += ",c" + std::to_string(k);
  return header + "\n";
}

std::string ScoresRow(int64_t round, const std::vector<double>& scores) {
  std::string row = std::to_string(round);
  for (double v : scores) row += "," + FormatDouble(v, "%.6g");
  return row + "\n";
}

// `header` and the rows of rounds <= `round` of an existing per-round CSV
// (scores.csv, evaluation.csv: the round in the first column).
std::string RowsUpTo(const std::string& path, int64_t round, const std::string& header) {
  if (!FileExists(path)) return header;
  std::istringstream in(ReadFile(path));
  std::string line, out = header;
  std::getline(in, line);
  while (std::getline(in, line)) {
    char* end = nullptr;
    const long long r = std::strtoll(line.c_str(), &end, 10);
    if (end != line.c_str() && *end == ',' && r <= round) out += line + "\n";
  }
  return out;
}

// This process's peak resident memory so far, in MiB.
double PeakRssMb() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

nlohmann::json Summary(const RunOptions& options, const ServerState& state,
                       const std::vector<ClientDescription>& clients, int64_t num_params) {
  nlohmann::json s;
  const StrategySpec strategy = ResolveStrategy(options);
  s["strategy"] = options.strategy.name;
  s["selector"] = strategy.selector;
  s["aggregator"] = strategy.aggregator;
  s["proximal_mu"] = strategy.proximal_mu;
  s["aggregation"] = options.strategy.aggregation;
  s["seed"] = options.seed;
  s["rounds"] = state.round;
  s["clients"] = clients.size();
  const std::string& file = options.model.file;
  s["model"] = file.empty() ? options.model.name : file;
  if (!state.model_sha256.empty()) s["model_sha256"] = state.model_sha256;
  s["model_parameters"] = num_params;
  // The final global model's bytes, hashed: two runs agree on it only if
  // they trained bit for bit the same model.
  s["final_model_sha256"] = Sha256Hex(std::string(
      reinterpret_cast<const char*>(state.global.data()), state.global.size() * sizeof(float)));
  const RoundMetrics* best = nullptr;
  const RoundMetrics* last = nullptr;
  for (const auto& m : state.history) {
    if (!m.evaluated) continue;
    last = &m;
    if (!std::isnan(m.accuracy) && (best == nullptr || m.accuracy > best->accuracy)) best = &m;
  }
  s["best_accuracy"] = best ? best->accuracy : 0.0;
  s["best_round"] = best ? best->round : 0;
  s["final_accuracy"] = last ? last->accuracy : 0.0;
  s["final_loss"] = last ? last->loss : 0.0;
  // Regression: the RMSE beside R² (the best round's R² is also its least RMSE).
  if (options.data.task == "regression") {
    s["best_rmse"] = best ? best->rmse : 0.0;
    s["final_rmse"] = last ? last->rmse : 0.0;
  }
  // Federated evaluation, when the run has one.
  const RoundMetrics* last_federated = nullptr;
  double best_federated = -1e300;
  for (const auto& m : state.history) {
    if (!m.fed_evaluated) continue;
    last_federated = &m;
    best_federated = std::max(best_federated, m.fed_accuracy);
  }
  // The backdoor's success rate, when the run has one (the final and the
  // highest of any evaluated round: a backdoor may be planted and then fade).
  const RoundMetrics* last_backdoor = nullptr;
  double highest_backdoor = 0;
  for (const auto& m : state.history) {
    if (!m.backdoor_evaluated) continue;
    last_backdoor = &m;
    highest_backdoor = std::max(highest_backdoor, m.backdoor_success);
  }
  if (last_backdoor) {
    s["final_backdoor_success"] = last_backdoor->backdoor_success;
    s["highest_backdoor_success"] = highest_backdoor;
  }
  if (last_federated) {
    s["best_federated_accuracy"] = best_federated;
    s["final_federated_accuracy"] = last_federated->fed_accuracy;
    s["final_federated_loss"] = last_federated->fed_loss;
  }
  // User-level DP: the ledger after the last round.
  if (options.dp.mode != "off") {
    const auto number = [](double v) { return std::isinf(v) ? nlohmann::json("inf") : nlohmann::json(v); };
    const RoundMetrics none;
    const RoundMetrics& final_round = state.history.empty() ? none : state.history.back();
    s["dp_mode"] = options.dp.mode;
    s["dp_noise_multiplier"] = options.dp.noise_multiplier;
    s["dp_epsilon"] = number(final_round.dp_epsilon);
    s["dp_epsilon_server"] = number(final_round.dp_epsilon_server);
    s["dp_delta"] = DpDelta(DpOptionsFrom(options));
  }
  s["virtual_time_s"] = state.virtual_time_s;
  // Profiling overhead per round (the papers' Table 4).
  double profiling_s = 0, profiling_wh = 0;
  for (const auto& m : state.history) {
    profiling_s += m.profiling_time_s;
    profiling_wh += m.profiling_energy_wh;
  }
  const double rounds = std::max<double>(1.0, static_cast<double>(state.history.size()));
  s["profiling_time_per_round_s"] = profiling_s / rounds;
  s["profiling_energy_per_round_wh"] = profiling_wh / rounds;
  s["energy_wh"] = state.energy_j / 3600.0;
  s["wall_s"] = state.history.empty() ? 0.0 : state.history.back().wall_s;
  s["peak_rss_mb"] = PeakRssMb();
  const double target = options.report.target;
  s["target"] = target;
  const int64_t hit = FirstRoundReaching(state.history, target);
  if (hit > 0) {
    const RoundMetrics& m = state.history[hit - 1];
    s["rounds_to_target"] = hit;
    s["virtual_time_to_target_s"] = m.virtual_time_s;
    s["energy_to_target_wh"] = m.energy_wh;
  } else {
    s["rounds_to_target"] = nullptr;
    s["virtual_time_to_target_s"] = nullptr;
    s["energy_to_target_wh"] = nullptr;
  }
  // How often clients of each data kind were selected (the papers' Fig. 7).
  std::map<std::string, std::pair<int64_t, int64_t>> by_kind;  // clients, selections
  for (size_t k = 0; k < clients.size(); ++k) {
    auto& e = by_kind[clients[k].kind];
    e.first += 1;
    e.second += k < state.times_selected.size() ? state.times_selected[k] : 0;
  }
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, e] : by_kind) {
    kinds[kind] = {{"clients", e.first},
                   {"selections", e.second},
                   {"selections_per_client", static_cast<double>(e.second) / e.first}};
  }
  s["selection_by_kind"] = kinds;
  return s;
}

}  // namespace

std::string ClientsCsv(const std::vector<ClientDescription>& rows, const std::vector<int64_t>& times_selected) {
  size_t classes = 0;  // label columns: as many as any client has counts
  for (const ClientDescription& row : rows) classes = std::max(classes, row.label_counts.size());
  std::ostringstream out;
  out << "id,size,data_kind,speed_ghz,bandwidth_mhz,round_s,times_selected";
  for (size_t c = 0; c < classes; ++c) out << ",label_" << c;
  out << '\n';
  for (size_t k = 0; k < rows.size(); ++k) {
    out << k << ',' << rows[k].size << ',' << rows[k].kind << ','
        << FormatDouble(rows[k].speed_ghz, "%.6g") << ','
        << FormatDouble(rows[k].bandwidth_mhz, "%.6g") << ','
        << FormatDouble(rows[k].round_s, "%.6g") << ','
        << (k < times_selected.size() ? times_selected[k] : 0);
    // A client beyond those counted has empty cells.
    for (size_t c = 0; c < classes; ++c) {
      out << ',';
      if (c < rows[k].label_counts.size()) out << rows[k].label_counts[c];
    }
    out << '\n';
  }
  return out.str();
}

PartitionFigures PartitionFiguresOf(const std::vector<ClientDescription>& clients) {
  PartitionFigures f;
  std::vector<std::vector<int64_t>> counts;
  for (const ClientDescription& c : clients) {
    if (c.label_counts.empty()) continue;
    counts.push_back(c.label_counts);
    int64_t held = 0;
    for (int64_t v : c.label_counts) held += v > 0;
    f.mean_classes += static_cast<double>(held);
  }
  f.clients = static_cast<int64_t>(counts.size());
  if (f.clients == 0) return f;
  f.js = MeanJsDivergence(counts);
  f.mean_classes /= static_cast<double>(f.clients);
  return f;
}

void WritePartitionFigures(const std::vector<ClientDescription>& clients, nlohmann::json* summary,
                           const std::string& labels_png) {
  const PartitionFigures f = PartitionFiguresOf(clients);
  if (f.clients == 0) {
    (*summary)["partition_js"] = nullptr;  // a deployment does not know its clients' labels
    return;
  }
  (*summary)["partition_js"] = f.js;
  (*summary)["partition_classes_per_client"] = f.mean_classes;
  (*summary)["partition_clients_counted"] = f.clients;
  std::vector<std::vector<int64_t>> first;
  for (const ClientDescription& c : clients) {
    if (first.size() == 100) break;
    if (!c.label_counts.empty()) first.push_back(c.label_counts);
  }
  PlotLabels(first, labels_png);
}

RunRecorder::RunRecorder(const Config& config, const std::string& out_dir, int num_clients, bool regression,
                         const ServerState& state, bool resume)
    : config_(config),
      out_dir_(out_dir),
      fingerprint_(config.Fingerprint()),
      columns_{regression,
               config.options().eval.federated_every > 0,
               config.options().attack.backdoor(),
               config.options().availability.kind != "always",
               ResolveStrategy(config.options()).aggregator == "fedbuff",
               config.options().dp.mode != "off",
               config.options().robust.fallback == "root"},
      per_client_outputs_(num_clients <= config.options().report.per_client_limit) {
  // A resumed run rewrites metrics.csv from the checkpoint, dropping any row
  // written after the last checkpoint.
  WriteFileAtomic(out_dir_ + "/metrics.csv", MetricsCsv(state.history, columns_));
  // evaluation.csv: each client's federated evaluations, kept like scores.csv.
  evaluation_ = EvaluationHeader();
  if (resume) evaluation_ = RowsUpTo(out_dir_ + "/evaluation.csv", state.round, evaluation_);
  // scores.csv: the scores behind each round's selection, one column per
  // client (for populations up to report.per_client_limit); a resumed run
  // keeps the rows up to its checkpoint.
  scores_ = ScoresHeader(per_client_outputs_ ? static_cast<size_t>(num_clients) : 0);
  if (resume) scores_ = RowsUpTo(out_dir_ + "/scores.csv", state.round, scores_);
}

void RunRecorder::OnRound(const ServerState& state,
                          const std::vector<ClientEvaluation>& evaluations,
                          const std::vector<double>& scores) {
  WriteFileAtomic(out_dir_ + "/metrics.csv", MetricsCsv(state.history, columns_));
  if (columns_.federated) {
    evaluation_ += EvaluationRows(state.round, evaluations);
    WriteFileAtomic(out_dir_ + "/evaluation.csv", evaluation_);
  }
  if (per_client_outputs_ && !scores.empty()) {
    scores_ += ScoresRow(state.round, scores);
    WriteFileAtomic(out_dir_ + "/scores.csv", scores_);
  }
  SaveCheckpoint(out_dir_ + "/checkpoint.bin", state, fingerprint_);
}

void RunRecorder::OnEnd(const ServerState& state, const std::vector<ClientDescription>& clients,
                        int64_t num_params) {
  std::vector<int64_t> times_selected = state.times_selected;
  if (times_selected.empty()) times_selected.assign(clients.size(), 0);
  WriteFileAtomic(out_dir_ + "/clients.csv", ClientsCsv(clients, times_selected));
  nlohmann::json summary = Summary(config_.options(), state, clients, num_params);
  WritePartitionFigures(clients, &summary, out_dir_ + "/labels.png");
  WriteFileAtomic(out_dir_ + "/summary.json", summary.dump(2) + "\n");
  if (per_client_outputs_) PlotRun(out_dir_);
  if (columns_.federated && !columns_.regression) {
    // accuracy.png: the central test set's accuracy beside the clients' own.
    Series central{"central (test set)", {}, {}}, clients_own{"federated (clients' data)", {}, {}};
    for (const RoundMetrics& m : state.history) {
      if (m.evaluated) {
        central.x.push_back(static_cast<double>(m.round));
        central.y.push_back(m.accuracy);
      }
      if (m.fed_evaluated) {
        clients_own.x.push_back(static_cast<double>(m.round));
        clients_own.y.push_back(m.fed_accuracy);
      }
    }
    PlotLines({central, clients_own}, "Accuracy of the global model", "round", "accuracy",
              out_dir_ + "/accuracy.png");
  }
}

}  // namespace fedprof
