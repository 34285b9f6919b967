#include "fedprof/simulation.h"

#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "fedprof/core/rng.h"
#include "fedprof/models/models.h"
#include "fedprof/models/replicas.h"
#include "fedprof/profiling/profile.h"
#include "fedprof/report/comparison.h"
#include "fedprof/report/plots.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/cost_model.h"
#include "fedprof/sim/in_process_transport.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"

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

CostOptions CostOptionsFrom(const Config& c, const Dataset& train) {
  CostOptions o;
  o.speed_mean_ghz = c.GetDouble("cost.speed_mean");
  o.speed_sd_ghz = c.GetDouble("cost.speed_sd");
  o.bandwidth_mean_mhz = c.GetDouble("cost.bandwidth_mean");
  o.bandwidth_sd_mhz = c.GetDouble("cost.bandwidth_sd");
  o.snr_db = c.GetDouble("cost.snr_db");
  o.cycles_per_bit = c.GetDouble("cost.cycles_per_bit");
  o.p_trans_w = c.GetDouble("cost.p_trans");
  o.p_f_w = c.GetDouble("cost.p_f");
  o.bits_per_sample = c.GetDouble("cost.bits_per_sample");
  if (o.bits_per_sample == 0) {
    // The papers' BPS: 8 bits per pixel value (28*28*1*8, 32*32*3*8) and
    // 32 per tabular feature (11*8*4).
    const double values = static_cast<double>(train.x[0].numel());
    o.bits_per_sample = values * (train.is_image() ? 8 : 32);
  }
  return o;
}

std::string ClientsCsv(const std::vector<Client>& clients, const std::vector<ClientSpec>& specs,
                       const std::vector<int64_t>& times_selected) {
  std::ostringstream out;
  out << "id,size,data_kind,speed_ghz,bandwidth_mhz,times_selected\n";
  for (size_t k = 0; k < clients.size(); ++k) {
    out << k << ',' << clients[k].num_samples() << ',' << DataKindName(clients[k].kind()) << ','
        << FormatDouble(specs[k].speed_ghz, "%.6g") << ','
        << FormatDouble(specs[k].bandwidth_mhz, "%.6g") << ',' << times_selected[k] << '\n';
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

// The header and the rows of rounds <= `round` of an existing scores.csv.
std::string ScoresUpTo(const std::string& path, int64_t round, const std::string& header) {
  if (!FileExists(path)) return header;
  std::istringstream in(ReadFile(path));
  std::string line, out = header;
  std::getline(in, line);
  while (std::getline(in, line)) {
    if (std::stoll(line.substr(0, line.find(','))) <= round) out += line + "\n";
  }
  return out;
}

nlohmann::json Summary(const Config& config, const ServerState& state,
                       const std::vector<Client>& clients, int64_t num_params) {
  nlohmann::json s;
  s["strategy"] = config.GetString("strategy.name");
  s["aggregation"] = config.GetString("strategy.aggregation");
  s["seed"] = config.GetInt("seed");
  s["rounds"] = state.round;
  s["clients"] = clients.size();
  s["model"] = config.GetString("model.name");
  s["model_parameters"] = num_params;
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
    auto& e = by_kind[DataKindName(clients[k].kind())];
    e.first += 1;
    e.second += state.times_selected[k];
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

ModelSpec SpecFor(const Config& config, const Dataset& data) {
  ModelSpec spec;
  spec.name = config.GetString("model.name");
  spec.input_shape = data.x.sizes().slice(1).vec();
  spec.outputs = data.is_regression() ? data.y.size(1) : data.num_classes;
  spec.hidden = ParseWidths(config.GetString("model.hidden"));
  spec.profile_layer = config.GetString("model.profile_layer");
  spec.width = config.GetDouble("model.width");
  return spec;
}

// Builds the population and runs rounds state.round + 1 .. rounds.
void Run(const Config& config, const std::string& out_dir, ServerState state, bool resume) {
  const std::string checkpoint_path = out_dir + "/checkpoint.bin";
  const uint64_t seed = static_cast<uint64_t>(config.GetInt("seed"));
  const TrainTest data = LoadData(config);
  std::vector<Client> clients = BuildClients(data.train, config);

  const ModelSpec spec = SpecFor(config, data.train);
  torch::manual_seed(Mix64(seed ^ static_cast<uint64_t>(Stream::kModelInit)));
  std::shared_ptr<Model> global_model = MakeModel(spec);
  const int64_t num_params = CountParameters(*global_model);
  FlatParams initial = Flatten(*global_model);
  if (resume && state.global.size() != initial.size()) {
    throw Error(checkpoint_path + ": model has " + std::to_string(state.global.size()) +
                " values, the configured model " + std::to_string(initial.size()));
  }
  if (!resume) state.global = std::move(initial);
  if (!state.times_selected.empty() && state.times_selected.size() != clients.size()) {
    throw Error(checkpoint_path + ": holds " + std::to_string(state.times_selected.size()) +
                " clients, the config " + std::to_string(clients.size()));
  }

  // FedProf's reference set D_V (Alg. 2 line 6).
  const std::string& reference = config.GetString("fedprof.reference");
  const Dataset* reference_set = &data.holdout;
  if (reference == "test") {
    reference_set = &data.test;
  } else if (reference == "client") {
    const int64_t id = config.GetInt("fedprof.reference_client");
    if (id >= static_cast<int64_t>(clients.size())) {
      throw Error("fedprof.reference_client: " + std::to_string(id) + " is not a client; expected < " +
                  std::to_string(clients.size()));
    }
    reference_set = &clients[id].data();
  }
  // Server-side inference (evaluation, reference profiles) on all threads.
  ModelReplicas server_models([spec] { return MakeModel(spec); },
                              static_cast<int>(config.GetInt("threads")));
  StrategyContext strategy_context;
  strategy_context.num_clients = static_cast<int>(clients.size());
  strategy_context.reference_profile = [&](const FlatParams& global, int64_t version) {
    server_models.Load(global);
    return ComputeProfile(server_models, *reference_set, version);
  };
  std::unique_ptr<Strategy> strategy = MakeStrategy(config, strategy_context);
  if (strategy->WantedReports().profile && reference_set->size() == 0) {
    throw Error("fedprof.reference: 'holdout' needs data.holdout_share > 0 (or use test|client)");
  }

  const CostOptions cost_options = CostOptionsFrom(config, data.train);
  const std::vector<ClientSpec> specs =
      DrawClientSpecs(static_cast<int>(clients.size()), cost_options, seed);
  const CostModel cost_model(cost_options, 32.0 * static_cast<double>(state.global.size()));
  const int epochs = static_cast<int>(config.GetInt("train.epochs"));
  // RPsize = 8q bytes (Eq. 31), q = units of the profiled layer.
  double profile_bits = 0;
  if (strategy->WantedReports().profile) {
    torch::NoGradGuard no_grad;
    torch::Tensor rep;
    global_model->Forward(data.train.x.narrow(0, 0, 1), &rep);
    profile_bits = 64.0 * static_cast<double>(rep.size(1));
  }
  std::vector<int64_t> sizes;
  for (const auto& c : clients) sizes.push_back(c.num_samples());
  RoundCostFn round_cost = [&](const std::vector<int>& selected) {
    RoundCost rc;
    double time_without_profiling = 0;
    for (int id : selected) {
      const ClientCost c = cost_model.Cost(specs[id], sizes[id], epochs, profile_bits);
      rc.time_s = std::max(rc.time_s, c.total_s());  // Eq. 27: the slowest client
      rc.energy_j += c.energy_j;
      if (profile_bits > 0) {
        const ClientCost bare = cost_model.Cost(specs[id], sizes[id], epochs);
        time_without_profiling = std::max(time_without_profiling, bare.total_s());
        rc.profiling_energy_j += c.energy_j - bare.energy_j;
      }
    }
    if (profile_bits > 0) rc.profiling_time_s = rc.time_s - time_without_profiling;
    return rc;
  };

  // The transport owns the clients that train; `clients` (sharing their
  // tensors) still describes them for the outputs.
  std::vector<Client> clients_for_transport = clients;
  InProcessTransport transport(
      std::move(clients_for_transport), [spec] { return MakeModel(spec); },
      static_cast<int>(config.GetInt("threads")));
  transport.LoadClientStates(state.client_states);

  ServerOptions so;
  so.rounds = config.GetInt("rounds");
  so.fraction = config.GetDouble("strategy.fraction");
  so.train.epochs = epochs;
  so.train.batch_size = config.GetInt("train.batch_size");
  so.train.lr = config.GetDouble("train.lr");
  so.train.momentum = config.GetDouble("train.momentum");
  so.train.weight_decay = config.GetDouble("train.weight_decay");
  so.lr_decay = config.GetDouble("train.lr_decay");
  so.seed = seed;
  so.eval_every = config.GetInt("eval.every");
  so.eval_batch_size = config.GetInt("eval.batch_size");
  so.progress = config.GetBool("report.progress");
  Server server(so, transport, *strategy, server_models, data.test, round_cost);

  const bool regression = data.train.is_regression();
  const std::string metrics_path = out_dir + "/metrics.csv";
  // A resumed run rewrites metrics.csv from the checkpoint, dropping any row
  // written after the last checkpoint.
  WriteFileAtomic(metrics_path, MetricsCsv(state.history, regression));
  // scores.csv: the scores behind each round's selection, one column per
  // client; a resumed run keeps the rows up to its checkpoint.
  const std::string scores_path = out_dir + "/scores.csv";
  std::string scores = ScoresHeader(clients.size());
  if (resume) scores = ScoresUpTo(scores_path, state.round, scores);
  const double wall_offset = state.history.empty() ? 0.0 : state.history.back().wall_s;
  server.Run(
      state,
      [&](ServerState& s) {
        s.client_states = transport.SaveClientStates();
        WriteFileAtomic(metrics_path, MetricsCsv(s.history, regression));
        const std::vector<double> round_scores = strategy->LastScores();
        if (!round_scores.empty()) {
          scores += ScoresRow(s.round, round_scores);
          WriteFileAtomic(scores_path, scores);
        }
        SaveCheckpoint(checkpoint_path, s);
      },
      wall_offset);

  if (state.times_selected.empty()) state.times_selected.assign(clients.size(), 0);
  WriteFileAtomic(out_dir + "/clients.csv", ClientsCsv(clients, specs, state.times_selected));
  WriteFileAtomic(out_dir + "/summary.json",
                  Summary(config, state, clients, num_params).dump(2) + "\n");
  PlotRun(out_dir);
}
}  // namespace

void RunSimulation(const Config& config, const std::string& out_dir) {
  MakeDirs(out_dir);
  WriteFileAtomic(out_dir + "/config.toml", config.ToToml());
  Run(config, out_dir, ServerState(), /*resume=*/false);
}

std::vector<PlannedRun> PlanComparison(const Config& base, const std::vector<std::string>& strategies,
                                       int seeds, const std::string& out_dir) {
  if (strategies.empty()) throw Error("--strategies: name at least one strategy");
  if (seeds < 1) throw Error("--seeds: expected at least 1, got " + std::to_string(seeds));
  // Validate every strategy before the first (long) run starts.
  std::vector<Config> configs;
  std::vector<std::string> labels;
  for (const std::string& spec : strategies) {
    Config c = base;
    const auto colon = spec.find(':');
    c.Set("strategy.name", spec.substr(0, colon), "--strategies");
    if (colon != std::string::npos) c.Set("strategy.aggregation", spec.substr(colon + 1), "--strategies");
    labels.push_back(c.GetString("strategy.name") + "-" + c.GetString("strategy.aggregation"));
    configs.push_back(std::move(c));
  }
  std::vector<PlannedRun> runs;
  const int64_t first_seed = base.GetInt("seed");
  for (int i = 0; i < seeds; ++i) {
    for (size_t j = 0; j < configs.size(); ++j) {
      PlannedRun run{{labels[j], first_seed + i,
                      out_dir + "/" + labels[j] + "/seed-" + std::to_string(first_seed + i)},
                     configs[j]};
      run.config.Set("seed", std::to_string(first_seed + i), "--seeds");
      MakeDirs(run.record.dir);
      WriteFileAtomic(run.record.dir + "/config.toml", run.config.ToToml());
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

std::string RunComparison(const Config& base, const std::vector<std::string>& strategies,
                          int seeds, const std::string& out_dir) {
  std::vector<RunRecord> records;
  for (const PlannedRun& run : PlanComparison(base, strategies, seeds, out_dir)) {
    std::printf("== %s, seed %lld -> %s\n", run.record.label.c_str(),
                static_cast<long long>(run.record.seed), run.record.dir.c_str());
    std::fflush(stdout);
    RunSimulation(run.config, run.record.dir);
    records.push_back(run.record);
  }
  return WriteComparison(records, base.GetDouble("report.target"), out_dir);
}

std::shared_ptr<Model> LoadRunModel(const std::string& run, const Dataset& data,
                                    int64_t* version) {
  const bool is_file = run.size() >= 4 && run.compare(run.size() - 4, 4, ".bin") == 0;
  const auto slash = run.rfind('/');
  const std::string dir = !is_file ? run : slash == std::string::npos ? "." : run.substr(0, slash);
  const std::string checkpoint = is_file ? run : run + "/checkpoint.bin";
  Config config;
  config.MergeTomlFile(dir + "/config.toml");
  const ServerState state = LoadCheckpoint(checkpoint);
  std::shared_ptr<Model> model = MakeModel(SpecFor(config, data));
  try {
    Unflatten(state.global, *model);
  } catch (const Error& e) {
    throw Error(checkpoint + ": does not fit this data's model: " + e.what());
  }
  *version = state.round;
  return model;
}

void ResumeSimulation(const std::string& out_dir, const std::vector<std::string>& overrides) {
  Config config;
  config.MergeTomlFile(out_dir + "/config.toml");
  for (const std::string& assignment : overrides) {
    const std::string key = assignment.substr(0, assignment.find('='));
    if (key != "rounds" && key != "threads" && key != "report.progress") {
      throw Error("--set " + key + ": cannot change on --resume (only rounds, threads, "
                  "report.progress); start a new run instead");
    }
    config.SetAssignment(assignment);
  }
  ServerState state = LoadCheckpoint(out_dir + "/checkpoint.bin");
  WriteFileAtomic(out_dir + "/config.toml", config.ToToml());
  Run(config, out_dir, std::move(state), /*resume=*/true);
}

}  // namespace fedprof
