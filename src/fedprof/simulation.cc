#include "fedprof/simulation.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/log.h"
#include "fedprof/distributed/distributed_transport.h"
#include "fedprof/distributed/rank_group.h"
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

// The clients of a config as one process holds them: the data, the
// population, each client's device and the cost model (Eqs. 27-34) that
// gives each result its virtual time and energy, and the transport that
// trains them. Every rank of a distributed run builds the same.
struct LocalClients {
  TrainTest data;
  std::unique_ptr<Population> population;
  std::vector<ClientSpec> specs;
  std::unique_ptr<CostModel> cost_model;
  // What profiling adds to a round (Eq. 31; App. C.2 with secure matching);
  // null without profiling.
  std::unique_ptr<ProfilingLoad> profiling;
  std::vector<double> expected_time_s;  // a round of each client alone
  std::unique_ptr<InProcessTransport> transport;
};

// Builds them, the transport training `threads` clients at once.
std::shared_ptr<LocalClients> BuildClients(const Config& config, int threads) {
  auto local = std::make_shared<LocalClients>();
  const uint64_t seed = static_cast<uint64_t>(config.GetInt("seed"));
  local->data = LoadData(config);
  local->population = std::make_unique<Population>(local->data.train, config);
  const Population& population = *local->population;
  const int n = population.size();

  const ModelSpec spec = SpecFor(config, local->data.train);
  std::shared_ptr<Model> model = InitialModel(config, spec);
  const double model_bits = 32.0 * static_cast<double>(Flatten(*model).size());
  const CostOptions cost_options = CostOptionsFrom(config, local->data.train);
  local->specs = DrawClientSpecs(n, cost_options, seed);
  local->cost_model = std::make_unique<CostModel>(cost_options, model_bits);
  const int epochs = static_cast<int>(config.GetInt("train.epochs"));
  const std::unique_ptr<Strategy> strategy = MakeStrategy(config, {n, nullptr});
  CheckStrategyFitsModel(*strategy, *model, config);
  if (strategy->WantedReports().profile) {
    const int64_t units = ProfiledUnits(*model, local->data.train);  // q
    local->profiling = std::make_unique<ProfilingLoad>(
        config.GetString("fedprof.secure_matching") == "paillier"
            ? SecureProfiling(units, static_cast<int>(config.GetInt("fedprof.paillier_bits")),
                              config.GetDouble("cost.he_cycles_per_unit"))
            : PlainProfiling(units));
  }
  std::vector<ClientInfo> infos(n);
  for (int k = 0; k < n; ++k) {
    infos[k].id = k;
    infos[k].num_samples = population.num_samples(k);
    infos[k].expected_time_s =
        local->cost_model
            ->Cost(local->specs[k], infos[k].num_samples, epochs, local->profiling.get())
            .total_s();
    local->expected_time_s.push_back(infos[k].expected_time_s);
  }
  const LocalClients* self = local.get();  // owns the transport, so outlives it
  auto cost = [self](int id, const FitInstructions& ins) {
    const int64_t size = self->population->num_samples(id);
    const ProfilingLoad* profiling = ins.profile ? self->profiling.get() : nullptr;
    const ClientCost c = self->cost_model->Cost(self->specs[id], size, ins.train.epochs, profiling);
    ResultCost rc;
    rc.time_s = c.total_s();
    rc.energy_j = c.energy_j;
    if (profiling != nullptr) {
      const ClientCost bare = self->cost_model->Cost(self->specs[id], size, ins.train.epochs);
      rc.profiling_time_s = c.total_s() - bare.total_s();
      rc.profiling_energy_j = c.energy_j - bare.energy_j;
    }
    return rc;
  };
  local->transport = std::make_unique<InProcessTransport>(
      infos, [self](int id) { return self->population->MakeClient(id); }, !population.on_demand(),
      [spec] { return MakeModel(spec); }, threads, cost);
  return local;
}

// Clients a rank trains at once: `threads`, or with 0 in a distributed run
// its share of the machine's cores (LOCAL_WORLD_SIZE ranks share them).
int ThreadsPerRank(const Config& config, const DistEnv& env) {
  const int threads = static_cast<int>(config.GetInt("threads"));
  if (threads > 0 || !env.distributed()) return threads;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / env.local_world_size);
}

// What the ranks of a distributed run sent per round (messages as Gloo
// carried them, startup included), for the progress output.
std::string TrafficLine(const std::vector<int64_t>& sent, int64_t rounds) {
  const double scale = 1e-6 / static_cast<double>(std::max<int64_t>(1, rounds));
  double mean = 0, max = 0;
  for (size_t r = 1; r < sent.size(); ++r) {
    mean += static_cast<double>(sent[r]) * scale / static_cast<double>(sent.size() - 1);
    max = std::max(max, static_cast<double>(sent[r]) * scale);
  }
  char line[256];
  std::snprintf(line, sizeof(line),
                "distributed: %zu ranks, MB sent per round (over %lld rounds): rank 0 %.3f, "
                "each other rank %.3f on average, %.3f at most",
                sent.size(), static_cast<long long>(rounds), static_cast<double>(sent[0]) * scale,
                mean, max);
  return line;
}

// Runs rounds state.round + 1 .. rounds: over clients in this process, or
// as rank 0 of a distributed run over the clients of every rank.
void Run(const Config& config, const std::string& out_dir, ServerState state, bool resume) {
  const auto start = std::chrono::steady_clock::now();
  const DistEnv env = ReadDistEnv();
  std::unique_ptr<RankGroup> group;
  if (env.distributed()) {
    group = std::make_unique<RankGroup>(env, config.GetDouble("dist.timeout_s"));
    SendConfig(*group, config.ToToml(), resume);  // the workers build while this rank does
  }
  const std::shared_ptr<LocalClients> local = BuildClients(config, ThreadsPerRank(config, env));
  const int n = local->population->size();
  const Dataset reference = ReferenceSet(config, local->data, local->population.get());

  Transport* transport = local->transport.get();
  std::unique_ptr<DistributedTransport> distributed;
  if (group) {
    distributed = std::make_unique<DistributedTransport>(*group, *local->transport);
    distributed->Start();
    distributed->LoadClientStates(state.client_states);
    transport = distributed.get();
  } else {
    local->transport->LoadClientStates(state.client_states);
  }

  ClientSide clients;
  clients.rows = [&] {
    std::vector<ClientRow> rows(n);
    for (int k = 0; k < n; ++k) {
      rows[k] = {local->population->num_samples(k), DataKindName(local->population->kind(k)),
                 local->specs[k].speed_ghz, local->specs[k].bandwidth_mhz,
                 local->expected_time_s[k]};
    }
    return rows;
  };
  clients.save_states = [&] {
    return distributed ? distributed->SaveClientStates() : local->transport->SaveClientStates();
  };
  clients.on_ready = [&] {
    if (!config.GetBool("report.progress")) return;
    char line[160];
    std::snprintf(line, sizeof(line), "%d clients (%s partition) set up in %.1f s", n,
                  config.GetString("partition.kind").c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    LogProgress(line);
  };
  const int64_t first_round = state.round + 1;
  RunRounds(config, ServerOptionsFrom(config), local->data, reference, out_dir, std::move(state),
            resume, *transport, clients);
  if (distributed) {
    if (config.GetBool("report.progress")) {
      LogProgress(TrafficLine(distributed->BytesSentByRank(),
                              config.GetInt("rounds") - first_round + 1));
    }
    distributed->Stop();
  }
}

}  // namespace

void RunSimulationWorker(double rendezvous_timeout_s) {
  const DistEnv env = ReadDistEnv();
  if (!env.distributed() || env.rank == 0) {
    throw Error("RANK: a simulation worker is a rank > 0 of a distributed run (WORLD_SIZE > 1)");
  }
  RankGroup group(env, rendezvous_timeout_s);
  RunWorker(group, [&env](const Config& config) {
    const std::shared_ptr<LocalClients> local = BuildClients(config, ThreadsPerRank(config, env));
    return std::shared_ptr<InProcessTransport>(local, local->transport.get());
  });
}

void RunSimulation(const Config& config, const std::string& out_dir) {
  const DistEnv env = ReadDistEnv();
  if (env.distributed() && env.rank > 0) {
    RunSimulationWorker(config.GetDouble("dist.timeout_s"));
    return;
  }
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
    const std::string name = spec.substr(0, colon);
    const auto plus = name.find('+');
    if (plus == std::string::npos) {  // a preset, as it comes
      c.Set("strategy.name", name, "--strategies");
      c.Set("strategy.selector", "", "--strategies");
      c.Set("strategy.aggregator", "", "--strategies");
    } else {  // selector+aggregator
      c.Set("strategy.name", "fedavg", "--strategies");
      c.Set("strategy.selector", name.substr(0, plus), "--strategies " + spec);
      c.Set("strategy.aggregator", name.substr(plus + 1), "--strategies " + spec);
    }
    if (colon != std::string::npos) c.Set("strategy.aggregation", spec.substr(colon + 1), "--strategies");
    const std::string label =
        ResolveStrategy(c).Label() + "-" + c.GetString("strategy.aggregation");
    if (std::find(labels.begin(), labels.end(), label) != labels.end()) {
      throw Error("--strategies: " + spec + " is " + label + " again; name each strategy once");
    }
    labels.push_back(label);
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
  const DistEnv env = ReadDistEnv();
  if (env.distributed() && env.rank > 0) {
    Config given;
    for (const std::string& assignment : overrides) given.SetAssignment(assignment);
    RunSimulationWorker(given.GetDouble("dist.timeout_s"));
    return;
  }
  // The config first: the checkpoint must be one of its runs.
  const Config config = ResumeConfig(out_dir, overrides);
  ServerState state = LoadCheckpoint(out_dir + "/checkpoint.bin", config.Fingerprint());
  WriteFileAtomic(out_dir + "/config.toml", config.ToToml());
  Run(config, out_dir, std::move(state), /*resume=*/true);
}

}  // namespace fedprof
