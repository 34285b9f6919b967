#include "fedprof/run/run.h"

#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fedprof/core/hash.h"
#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/text.h"
#include "fedprof/models/replicas.h"
#include "fedprof/monitor/monitor.h"
#include "fedprof/profiling/profiler.h"
#include "fedprof/report/plots.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/transport.h"

namespace fedprof {
namespace {

std::vector<int64_t> ParseWidths(const std::string& s) {
  std::vector<int64_t> out;
  for (const std::string& item : Split(s, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0) {
      throw Error("model.hidden: '" + s + "' is not a comma-separated list of positive widths");
    }
    out.push_back(v);
  }
  return out;
}

std::string ClientsCsv(const std::vector<ClientRow>& rows, const std::vector<int64_t>& times_selected) {
  std::ostringstream out;
  out << "id,size,data_kind,speed_ghz,bandwidth_mhz,round_s,times_selected\n";
  for (size_t k = 0; k < rows.size(); ++k) {
    out << k << ',' << rows[k].size << ',' << rows[k].kind << ','
        << FormatDouble(rows[k].speed_ghz, "%.6g") << ','
        << FormatDouble(rows[k].bandwidth_mhz, "%.6g") << ','
        << FormatDouble(rows[k].round_s, "%.6g") << ','
        << (k < times_selected.size() ? times_selected[k] : 0) << '\n';
  }
  return out.str();
}

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

nlohmann::json Summary(const Config& config, const ServerState& state,
                       const std::vector<ClientRow>& clients, int64_t num_params) {
  nlohmann::json s;
  const StrategySpec strategy = ResolveStrategy(config);
  s["strategy"] = config.GetString("strategy.name");
  s["selector"] = strategy.selector;
  s["aggregator"] = strategy.aggregator;
  s["proximal_mu"] = strategy.proximal_mu;
  s["aggregation"] = config.GetString("strategy.aggregation");
  s["seed"] = config.GetInt("seed");
  s["rounds"] = state.round;
  s["clients"] = clients.size();
  const std::string& file = config.GetString("model.file");
  s["model"] = file.empty() ? config.GetString("model.name") : file;
  if (!state.model_sha256.empty()) s["model_sha256"] = state.model_sha256;
  s["model_parameters"] = num_params;
  // The final global model's bytes, hashed: two runs agree on it only if
  // they trained bit for bit the same model.
  s["final_model_sha256"] = Sha256Hex(std::string(
      reinterpret_cast<const char*>(state.global.data()), state.global.size() * sizeof(float)));
  double best = -1e300;
  int64_t best_round = 0;
  const RoundMetrics* last = nullptr;
  for (const auto& m : state.history) {
    if (!m.evaluated) continue;
    last = &m;
    if (m.accuracy > best) {
      best = m.accuracy;
      best_round = m.round;
    }
  }
  s["best_accuracy"] = last ? best : 0.0;
  s["best_round"] = best_round;
  s["final_accuracy"] = last ? last->accuracy : 0.0;
  s["final_loss"] = last ? last->loss : 0.0;
  // Federated evaluation, when the run has one.
  const RoundMetrics* last_federated = nullptr;
  double best_federated = -1e300;
  for (const auto& m : state.history) {
    if (!m.fed_evaluated) continue;
    last_federated = &m;
    best_federated = std::max(best_federated, m.fed_accuracy);
  }
  if (last_federated) {
    s["best_federated_accuracy"] = best_federated;
    s["final_federated_accuracy"] = last_federated->fed_accuracy;
    s["final_federated_loss"] = last_federated->fed_loss;
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
  const double target = config.GetDouble("report.target");
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

// What the monitor shows of a run starting after round `round`.
MonitorRunInfo MonitorInfo(const Config& config, const std::string& out_dir, int64_t round,
                           const std::vector<ClientRow>& rows) {
  MonitorRunInfo info;
  info.run_id = out_dir;
  info.config_digest = config.Fingerprint();
  info.rounds = config.GetInt("rounds");
  info.first_round = round + 1;
  info.num_clients = static_cast<int>(rows.size());
  // Data kinds are known in simulation only.
  for (const ClientRow& row : rows) {
    if (row.kind != "unknown") {
      for (const ClientRow& r : rows) info.client_kinds.push_back(r.kind);
      break;
    }
  }
  return info;
}

}  // namespace

ModelSpec SpecFor(const Config& config, const Dataset& data) {
  ModelSpec spec;
  spec.name = config.GetString("model.name");
  spec.file = config.GetString("model.file");
  if (!spec.file.empty()) {
    spec.name = "torchscript";
    if (!FileExists(spec.file)) throw Error("model.file " + spec.file + ": no such file");
    spec.file_sha256 = FileSha256Hex(spec.file);
  }
  spec.input_shape = data.x.sizes().slice(1).vec();
  spec.outputs = data.is_regression() ? data.y.size(1) : data.num_classes;
  spec.hidden = ParseWidths(config.GetString("model.hidden"));
  spec.profile_layer = config.GetString("model.profile_layer");
  spec.width = config.GetDouble("model.width");
  return spec;
}

std::shared_ptr<Model> InitialModel(const Config& config, const ModelSpec& spec) {
  const uint64_t seed = static_cast<uint64_t>(config.GetInt("seed"));
  torch::manual_seed(Mix64(seed ^ static_cast<uint64_t>(Stream::kModelInit)));
  return MakeModel(spec);
}

void CheckStrategyFitsModel(const Strategy& strategy, const Model& model, const Config& config) {
  const std::string& file = config.GetString("model.file");
  const std::string model_name = file.empty() ? "model " + config.GetString("model.name")
                                              : "model.file " + file;
  if (strategy.KeepsLocalBatchNorm() && !HasBatchNorm(model)) {
    throw Error("strategy " + strategy.name() + " keeps each client's batch-norm layers local "
                "(strategy.aggregator = fedbn), but " + model_name + " has none; use a model with "
                "batch norm (cnn, shufflenet_v2, resnet18, or a model.file with BatchNorm layers)");
  }
  if (strategy.WantedReports().profile && model.profiled_layer().empty()) {
    throw Error("strategy " + strategy.name() + " selects clients by their profiles "
                "(strategy.selector = fedprof): " + model.why_not_profileable());
  }
}

int64_t ProfiledUnits(Model& model, const Dataset& data) {
  torch::NoGradGuard no_grad;
  model.eval();
  torch::Tensor rep;
  model.Forward(data.x.narrow(0, 0, 1), &rep);
  return rep.size(1);
}

Dataset ReferenceSet(const Config& config, const TrainTest& data, const Population* population) {
  const std::string& reference = config.GetString("fedprof.reference");
  if (reference == "test") return data.test;
  if (reference == "client") {
    if (population == nullptr) {
      throw Error("fedprof.reference: 'client' needs the clients' data in this process; a "
                  "deployment takes 'holdout' or 'test'");
    }
    const int64_t id = config.GetInt("fedprof.reference_client");
    if (id >= population->size()) {
      throw Error("fedprof.reference_client: " + std::to_string(id) +
                  " is not a client; expected < " + std::to_string(population->size()));
    }
    return population->MakeClient(static_cast<int>(id)).data();
  }
  return data.holdout;
}

ServerOptions ServerOptionsFrom(const Config& config) {
  ServerOptions so;
  so.rounds = config.GetInt("rounds");
  so.fraction = config.GetDouble("strategy.fraction");
  so.train.epochs = static_cast<int>(config.GetInt("train.epochs"));
  so.train.batch_size = config.GetInt("train.batch_size");
  so.train.lr = config.GetDouble("train.lr");
  so.train.momentum = config.GetDouble("train.momentum");
  so.train.weight_decay = config.GetDouble("train.weight_decay");
  so.lr_decay = config.GetDouble("train.lr_decay");
  so.seed = static_cast<uint64_t>(config.GetInt("seed"));
  so.eval_every = config.GetInt("eval.every");
  so.eval_batch_size = config.GetInt("eval.batch_size");
  so.federated_eval_every = config.GetInt("eval.federated_every");
  so.federated_eval_fraction = config.GetDouble("eval.federated_fraction");
  so.progress = config.GetBool("report.progress");
  so.min_results = 0;
  return so;
}

void RunRounds(const Config& config, const ServerOptions& options, const TrainTest& data,
               const Dataset& reference, const std::string& out_dir, ServerState state,
               bool resume, Transport& transport, const ClientSide& clients) {
  const std::string checkpoint_path = out_dir + "/checkpoint.bin";
  const std::string fingerprint = config.Fingerprint();
  const ModelSpec spec = SpecFor(config, data.train.size() > 0 ? data.train : data.test);
  std::shared_ptr<Model> global_model = InitialModel(config, spec);
  const int64_t num_params = CountParameters(*global_model);
  FlatParams initial = Flatten(*global_model);
  if (resume && state.global.size() != initial.size()) {
    throw Error(checkpoint_path + ": model has " + std::to_string(state.global.size()) +
                " values, the configured model " + std::to_string(initial.size()));
  }
  if (resume && state.model_sha256 != spec.file_sha256) {
    throw Error("model.file " + spec.file + ": content has SHA-256 " + spec.file_sha256 +
                ", the run in " + out_dir + " was started with " + state.model_sha256 +
                "; restore that file to resume");
  }
  state.model_sha256 = spec.file_sha256;
  if (!resume) state.global = std::move(initial);

  // Server-side inference (evaluation, reference profiles) on all threads.
  ModelReplicas server_models([spec] { return MakeModel(spec); },
                              static_cast<int>(config.GetInt("threads")));
  StrategyContext strategy_context;
  strategy_context.num_clients = transport.num_clients();
  strategy_context.reference_profile = [&](const FlatParams& global, int64_t version) {
    server_models.Load(global);
    return ComputeProfile(server_models, reference, version);
  };
  std::unique_ptr<Strategy> strategy = MakeStrategy(config, strategy_context);
  CheckStrategyFitsModel(*strategy, *global_model, config);
  if (strategy->WantedReports().profile && reference.size() == 0) {
    throw Error("fedprof.reference: 'holdout' needs data.holdout_share > 0 (or use test|client)");
  }

  Server server(options, transport, *strategy, server_models, data.test);

  const bool regression = data.test.is_regression();
  const std::string metrics_path = out_dir + "/metrics.csv";
  // A resumed run rewrites metrics.csv from the checkpoint, dropping any row
  // written after the last checkpoint.
  const bool federated = options.federated_eval_every > 0;
  WriteFileAtomic(metrics_path, MetricsCsv(state.history, regression, federated));
  // evaluation.csv: each client's federated evaluations, kept like scores.csv.
  const std::string evaluation_path = out_dir + "/evaluation.csv";
  std::string evaluation = EvaluationHeader();
  if (resume) evaluation = RowsUpTo(evaluation_path, state.round, evaluation);
  // scores.csv: the scores behind each round's selection, one column per
  // client (for populations up to report.per_client_limit); a resumed run
  // keeps the rows up to its checkpoint.
  const size_t num_clients = static_cast<size_t>(transport.num_clients());
  const bool per_client_outputs =
      static_cast<int64_t>(num_clients) <= config.GetInt("report.per_client_limit");
  const std::string scores_path = out_dir + "/scores.csv";
  std::string scores = ScoresHeader(per_client_outputs ? num_clients : 0);
  if (resume) scores = RowsUpTo(scores_path, state.round, scores);
  const double wall_offset = state.history.empty() ? 0.0 : state.history.back().wall_s;
  if (clients.on_ready) clients.on_ready();
  RunMonitor* monitor = RunMonitor::Active();
  if (monitor) monitor->BeginRun(MonitorInfo(config, out_dir, state.round, clients.rows()));
  try {
    server.Run(
        state,
        [&](ServerState& s) {
          const auto outputs_start = std::chrono::steady_clock::now();
          if (clients.save_states) s.client_states = clients.save_states();
          WriteFileAtomic(metrics_path, MetricsCsv(s.history, regression, federated));
          if (federated) {
            evaluation += EvaluationRows(s.round, server.LastEvaluations());
            WriteFileAtomic(evaluation_path, evaluation);
          }
          const std::vector<double> round_scores = strategy->LastScores();
          if (per_client_outputs && !round_scores.empty()) {
            scores += ScoresRow(s.round, round_scores);
            WriteFileAtomic(scores_path, scores);
          }
          SaveCheckpoint(checkpoint_path, s, fingerprint);
          if (monitor) {
            monitor->AddPhase("outputs", std::chrono::duration<double>(
                                             std::chrono::steady_clock::now() - outputs_start).count());
            monitor->EndRound(s.history.back(), s.times_selected, round_scores);
          }
        },
        wall_offset);
  } catch (const std::exception& e) {
    if (monitor) monitor->EndRun(e.what());
    throw;
  }

  if (state.times_selected.empty()) state.times_selected.assign(num_clients, 0);
  const std::vector<ClientRow> rows = clients.rows();
  WriteFileAtomic(out_dir + "/clients.csv", ClientsCsv(rows, state.times_selected));
  WriteFileAtomic(out_dir + "/summary.json", Summary(config, state, rows, num_params).dump(2) + "\n");
  if (per_client_outputs) PlotRun(out_dir);
  if (monitor) monitor->EndRun();
  if (federated && !regression) {
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
              out_dir + "/accuracy.png");
  }
}

Config ResumeConfig(const std::string& out_dir, const std::vector<std::string>& overrides) {
  Config config;
  config.MergeTomlFile(out_dir + "/config.toml");
  for (const std::string& assignment : overrides) {
    const std::string key = assignment.substr(0, assignment.find('='));
    if (!MayChangeOnResume(key)) {
      throw Error("--set " + key + ": cannot change on --resume (only rounds, threads, "
                  "report.progress, dist.timeout_s and deploy.*); start a new run instead");
    }
    config.SetAssignment(assignment);
  }
  return config;
}

}  // namespace fedprof
