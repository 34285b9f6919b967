#include "fedprof/run/simulation.h"

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
#include "fedprof/run/run.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/sim/cost_model.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"
#include "fedprof/transport/availability.h"
#include "fedprof/transport/in_process.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {
namespace {

// BPS, the bits of one of `train`'s samples: cost.bits_per_sample, or when
// that is 0 the papers' figure, which depends on the data: 8 bits per pixel
// value (28*28*1*8, 32*32*3*8) and 32 per tabular feature (11*8*4).
double BitsPerSample(const RunOptions::Cost& cost, const Dataset& train) {
  if (cost.bits_per_sample != 0) return cost.bits_per_sample;
  const double values = static_cast<double>(train.x[0].numel());
  return values * (train.is_image() ? 8 : 32);
}

// The clients of a run as one process holds them: the plan (data,
// population, model), each client's device and the cost model (Eqs. 27-34)
// that gives each result its virtual time and energy, and the transport that
// trains them. Every rank of a distributed run builds the same.
struct LocalClients {
  std::shared_ptr<RunPlan> plan;
  std::vector<ClientSpec> specs;
  std::unique_ptr<CostModel> cost_model;
  // What profiling adds to a round (Eq. 31; App. C.2 with secure matching);
  // null without profiling.
  std::unique_ptr<ProfilingLoad> profiling;
  // What a secure aggregation session adds to a training round; null
  // without secure aggregation.
  std::unique_ptr<SessionLoad> session;
  std::vector<double> expected_time_s;  // a round of each client alone
  std::unique_ptr<InProcessTransport> transport;
};

// Builds them, the transport training `threads` clients at once and
// spilling its clients' states beyond client_state.memory_mb to `state_dir`.
std::shared_ptr<LocalClients> BuildClients(std::shared_ptr<RunPlan> plan, int threads, const std::string& state_dir) {
  auto local = std::make_shared<LocalClients>();
  local->plan = std::move(plan);
  const RunPlan& p = *local->plan;
  const RunOptions& o = p.options();
  const uint64_t seed = static_cast<uint64_t>(o.seed);
  const Population& population = *p.population;
  const int n = population.size();

  const ModelSpec spec = p.spec;
  const double model_bits = 32.0 * static_cast<double>(p.num_values);
  local->specs = DrawClientSpecs(n, o.cost, seed);
  local->cost_model =
      std::make_unique<CostModel>(o.cost, BitsPerSample(o.cost, p.data.train), model_bits);
  const int epochs = static_cast<int>(o.train.epochs);
  if (p.strategy->WantedReports().profile) {
    const int64_t units = ProfiledUnits(*p.initial_model, p.data.train);  // q
    local->profiling = std::make_unique<ProfilingLoad>(
        o.fedprof.secure_matching == "paillier"
            ? SecureProfiling(units, static_cast<int>(o.fedprof.paillier_bits),
                              o.cost.he_cycles_per_unit)
            : PlainProfiling(units));
  }
  if (o.secagg.protocol != "none") {
    // Under distributed DP a client's input is its encoded update, which it
    // first computes.
    FitInstructions shape;
    if (o.dp.mode == "distributed") {
      shape.ddg = DdgParams();
      shape.ddg->dim = static_cast<size_t>(p.num_values);
      shape.ddg->bits = static_cast<int>(o.dp.bits);
    }
    const size_t words = SessionLength(shape, static_cast<size_t>(p.num_values));
    local->session = std::make_unique<SessionLoad>(
        SecureAggregationLoad(SecureAggregationFrom(o), o.clients_per_round(), words, SessionWordBits(shape)));
    if (shape.ddg) local->session->cycles += kDdgEncodeCyclesPerWord * static_cast<double>(words);
  }
  // SCAFFOLD's c and Δc_i, each the model's size, in a client's expected
  // round; a round's cost prices the values its task and result carry.
  AlgorithmLoad expected_algorithm;
  if (SendsAlgorithmVector(p.strategy->AlgorithmObjective())) {
    expected_algorithm.download_bits = expected_algorithm.upload_bits = model_bits;
  }
  std::vector<ClientInfo> infos(n);
  for (int k = 0; k < n; ++k) {
    infos[k].id = k;
    infos[k].num_samples = population.num_samples(k);
    infos[k].expected_time_s =
        local->cost_model
            ->Cost(local->specs[k], infos[k].num_samples, epochs, local->profiling.get(),
                   epochs > 0 ? local->session.get() : nullptr, epochs > 0 ? &expected_algorithm : nullptr)
            .total_s();
    local->expected_time_s.push_back(infos[k].expected_time_s);
  }
  const LocalClients* self = local.get();  // owns the transport, so outlives it
  auto cost = [self](int id, const FitInstructions& ins, const FitResult& result) {
    const int64_t size = self->plan->population->num_samples(id);
    const ProfilingLoad* profiling = ins.report.profile ? self->profiling.get() : nullptr;
    const SessionLoad* session = ins.train.epochs > 0 ? self->session.get() : nullptr;
    AlgorithmLoad algorithm;
    if (ins.algorithm_values) algorithm.download_bits = 32.0 * static_cast<double>(ins.algorithm_values->size());
    algorithm.upload_bits = 32.0 * static_cast<double>(result.algorithm_values.size());
    const ClientCost c =
        self->cost_model->Cost(self->specs[id], size, ins.train.epochs, profiling, session, &algorithm);
    ResultCost rc;
    rc.time_s = c.total_s();
    rc.energy_j = c.energy_j;
    if (profiling != nullptr) {
      const ClientCost bare =
          self->cost_model->Cost(self->specs[id], size, ins.train.epochs, nullptr, session, &algorithm);
      rc.profiling_time_s = c.total_s() - bare.total_s();
      rc.profiling_energy_j = c.energy_j - bare.energy_j;
    }
    return rc;
  };
  local->transport = std::make_unique<InProcessTransport>(
      infos, [self](int id) { return self->plan->population->MakeClient(id); },
      !population.on_demand(), [spec] { return MakeModel(spec); }, threads, cost);
  // A rank > 0 has no run directory: its clients' states stay in memory.
  if (!state_dir.empty()) {
    local->transport->set_state_store(static_cast<size_t>(o.client_state.memory_mb) << 20, state_dir);
  }
  local->transport->set_profile_group(static_cast<int>(o.fedprof.profile_group));
  local->transport->set_shared_inputs(population.SharedTables(), [self](int id, TableRows* rows) {
    return self->plan->population->SharedRowsOf(id, rows);
  });
  const int64_t counted = o.report.per_client_limit;
  local->transport->set_describe([self, counted] {
    const Population& clients = *self->plan->population;
    std::vector<ClientDescription> rows(static_cast<size_t>(clients.size()));
    for (int k = 0; k < clients.size(); ++k) {
      rows[k] = {clients.num_samples(k), DataKindName(clients.kind(k)),
                 self->specs[k].speed_ghz, self->specs[k].bandwidth_mhz,
                 self->expected_time_s[k], k < counted ? clients.LabelCounts(k) : std::vector<int64_t>{}};
    }
    return rows;
  });
  return local;
}

// Clients a rank trains at once: `threads`, or with 0 in a distributed run
// its share of the machine's cores (LOCAL_WORLD_SIZE ranks share them).
int ThreadsPerRank(const RunOptions& options, const DistEnv& env) {
  const int threads = static_cast<int>(options.threads);
  if (threads > 0 || !env.distributed()) return threads;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / env.local_world_size);
}

// Runs rounds start.state.round + 1 .. rounds: over clients in this
// process, or as rank 0 of a distributed run over the clients of every rank.
void Run(RunStart start, const std::string& out_dir, RunObserver* observer) {
  const auto begin = std::chrono::steady_clock::now();
  const RunOptions& o = start.config.options();
  const DistEnv env = ReadDistEnv();
  std::unique_ptr<RankGroup> group;
  if (env.distributed()) {
    const std::string algorithm = ResolveStrategy(o).algorithm;
    if (IsRegisteredAlgorithm(algorithm)) {
      throw Error("strategy.algorithm = " + algorithm + ": a registered client algorithm runs in the clients of "
                  "the process that registered it, not on the other ranks (run it without launch)");
    }
    group = std::make_unique<RankGroup>(env, o.dist.timeout_s);
    SendConfig(*group, start.config.ToToml(), start.resume);  // the workers build while this rank does
  }
  const std::shared_ptr<LocalClients> local =
      BuildClients(MakePlan(start.config, ClientsLive::kHere, observer), ThreadsPerRank(o, env),
                   out_dir + "/client_state");
  RunPlan& plan = *local->plan;
  Transport* transport = local->transport.get();
  std::unique_ptr<DistributedTransport> distributed;
  if (group) {
    distributed = std::make_unique<DistributedTransport>(*group, *local->transport,
                                                         o.report.progress);
    transport = distributed.get();
  }
  // Who is online is decided at rank 0, before tasks go to any rank.
  std::unique_ptr<AvailabilityTransport> available;
  if (o.availability.simulated()) {
    available = std::make_unique<AvailabilityTransport>(
        *transport, MakeAvailability(o.availability, o.seed, plan.num_clients()), o.availability.overcommit,
        o.clients_per_round());
    transport = available.get();
  }
  // Rank 0 runs the sessions: under launch the ranks' clients hand it their
  // inputs, as the session's client side (its server side sees only masked
  // inputs and the sum).
  std::unique_ptr<SecureAggregationTransport> secure;
  if (o.secagg.protocol != "none") {
    secure = std::make_unique<SecureAggregationTransport>(*transport, SecureAggregationFrom(o));
    transport = secure.get();
  }
  if (o.report.progress) {
    char line[160];
    std::snprintf(line, sizeof(line), "%d clients (%s partition) set up in %.1f s",
                  plan.population->size(), o.partition.kind.c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count());
    LogProgress(line);
  }
  RunRounds(plan, out_dir, std::move(start.state), start.resume, *transport, observer);
}

}  // namespace

void RunSimulationWorker(double rendezvous_timeout_s) {
  const DistEnv env = ReadDistEnv();
  if (!env.distributed() || env.rank == 0) {
    throw Error("RANK: a simulation worker is a rank > 0 of a distributed run (WORLD_SIZE > 1)");
  }
  RankGroup group(env, rendezvous_timeout_s);
  RunWorker(group, [&env](const Config& config) {
    const std::shared_ptr<LocalClients> local =
        BuildClients(MakePlan(config, ClientsLive::kHere), ThreadsPerRank(config.options(), env), "");
    return std::shared_ptr<InProcessTransport>(local, local->transport.get());
  });
}

void RunSimulation(const Config& config, const std::string& out_dir, RunObserver* observer,
                   ExistingRun existing) {
  const DistEnv env = ReadDistEnv();
  if (env.distributed() && env.rank > 0) {
    RunSimulationWorker(config.options().dist.timeout_s);
    return;
  }
  Run(StartRun(config, out_dir, existing), out_dir, observer);
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
  std::shared_ptr<Model> model = MakeModel(SpecFor(config.options().model, data));
  try {
    Unflatten(state.global, *model);
  } catch (const Error& e) {
    throw Error(checkpoint + ": does not fit this data's model: " + e.what());
  }
  *version = state.round;
  return model;
}

void ResumeSimulation(const std::string& out_dir, const std::vector<std::string>& overrides,
                      RunObserver* observer) {
  const DistEnv env = ReadDistEnv();
  if (env.distributed() && env.rank > 0) {
    Config given;
    for (const std::string& assignment : overrides) given.SetAssignment(assignment);
    RunSimulationWorker(given.options().dist.timeout_s);
    return;
  }
  Run(ResumeRun(out_dir, overrides), out_dir, observer);
}

}  // namespace fedprof
