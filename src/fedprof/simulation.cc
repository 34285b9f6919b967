#include "fedprof/simulation.h"

#include <torch/torch.h>

#include <cstdio>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/models/models.h"
#include "fedprof/report/comparison.h"
#include "fedprof/run/run.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/sim/cost_model.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/in_process.h"

namespace fedprof {
namespace {

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

// Builds the simulated population and runs rounds state.round + 1 .. rounds.
void Run(const Config& config, const std::string& out_dir, ServerState state, bool resume) {
  const uint64_t seed = static_cast<uint64_t>(config.GetInt("seed"));
  const TrainTest data = LoadData(config);
  const Population population(data.train, config);
  const int n = population.size();
  const Dataset reference = ReferenceSet(config, data, &population);

  // The cost model (Eqs. 27-34) gives each result its virtual time and
  // energy; a client's time alone is what CFCFM races clients by.
  const ModelSpec spec = SpecFor(config, data.train);
  std::shared_ptr<Model> model = InitialModel(config, spec);
  const double model_bits = 32.0 * static_cast<double>(Flatten(*model).size());
  const CostOptions cost_options = CostOptionsFrom(config, data.train);
  const std::vector<ClientSpec> specs = DrawClientSpecs(n, cost_options, seed);
  const CostModel cost_model(cost_options, model_bits);
  const int epochs = static_cast<int>(config.GetInt("train.epochs"));
  // RPsize = 8q bytes (Eq. 31), q = units of the profiled layer.
  const bool profiles = MakeStrategy(config, {n, nullptr})->WantedReports().profile;
  const double profile_bits =
      profiles ? 64.0 * static_cast<double>(ProfiledUnits(*model, data.train)) : 0;
  std::vector<ClientInfo> infos(n);
  for (int k = 0; k < n; ++k) {
    infos[k].id = k;
    infos[k].num_samples = population.num_samples(k);
    infos[k].expected_time_s = cost_model.Cost(specs[k], infos[k].num_samples, epochs, profile_bits).total_s();
  }
  auto cost = [&](int id, const FitInstructions& ins) {
    const int64_t size = population.num_samples(id);
    const ClientCost c = cost_model.Cost(specs[id], size, ins.train.epochs, ins.profile ? profile_bits : 0);
    ResultCost rc;
    rc.time_s = c.total_s();
    rc.energy_j = c.energy_j;
    if (ins.profile && profile_bits > 0) {
      const ClientCost bare = cost_model.Cost(specs[id], size, ins.train.epochs);
      rc.profiling_time_s = c.total_s() - bare.total_s();
      rc.profiling_energy_j = c.energy_j - bare.energy_j;
    }
    return rc;
  };
  InProcessTransport transport(
      infos, [&](int id) { return population.MakeClient(id); }, !population.on_demand(),
      [spec] { return MakeModel(spec); }, static_cast<int>(config.GetInt("threads")), cost);
  transport.LoadClientStates(state.client_states);

  ClientSide clients;
  clients.rows = [&] {
    std::vector<ClientRow> rows(n);
    for (int k = 0; k < n; ++k) {
      rows[k] = {population.num_samples(k), DataKindName(population.kind(k)), specs[k].speed_ghz,
                 specs[k].bandwidth_mhz, infos[k].expected_time_s};
    }
    return rows;
  };
  clients.save_states = [&] { return transport.SaveClientStates(); };
  RunRounds(config, ServerOptionsFrom(config), data, reference, out_dir, std::move(state), resume,
            transport, clients);
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
  const ServerState state = LoadCheckpoint(checkpoint, config.Fingerprint());
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
  // The config first: the checkpoint must be one of its runs.
  const Config config = ResumeConfig(out_dir, overrides);
  ServerState state = LoadCheckpoint(out_dir + "/checkpoint.bin", config.Fingerprint());
  WriteFileAtomic(out_dir + "/config.toml", config.ToToml());
  Run(config, out_dir, std::move(state), /*resume=*/true);
}

}  // namespace fedprof
