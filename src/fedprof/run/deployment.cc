#include "fedprof/run/deployment.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <thread>

#include "fedprof/algorithms/algorithm.h"
#include "fedprof/client/client.h"
#include "fedprof/config/paths.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/log.h"
#include "fedprof/core/state_store.h"
#include "fedprof/core/text.h"
#include "fedprof/data/loaders.h"
#include "fedprof/deploy/client/client.h"
#include "fedprof/deploy/relay/relay.h"
#include "fedprof/deploy/server/grpc_transport.h"
#include "fedprof/deploy/shared/tls.h"
#include "fedprof/models/models.h"
#include "fedprof/privacy/client_ledger.h"
#include "fedprof/privacy/noise_source.h"
#include "fedprof/run/run.h"
#include "fedprof/server/server.h"
#include "fedprof/sim/population.h"
#include "fedprof/strategy/strategy.h"

namespace fedprof {
namespace {

// Mutual TLS, or plaintext on loopback when asked for in so many words.
void CheckSecurity(const std::string& flag, const std::string& address, const std::string& tls_dir,
                   bool insecure) {
  if (insecure == !tls_dir.empty()) {
    throw Error("--tls-dir DIR (mutual TLS; scripts/make-certs.sh writes DIR) or --insecure "
                "(plaintext, loopback only): give exactly one");
  }
  if (!insecure) return;
  if (!IsLoopbackAddress(address)) {
    throw Error(flag + " " + address + ": --insecure is for loopback addresses only; use --tls-dir");
  }
  LogWarning("--insecure: NO TLS. Anyone who can reach " + address +
             " can join as any client and read the model. For loopback experiments only.");
}

// A deployment's DP noise must be no one's to recompute from the config.
void CheckDeployedNoise(const RunOptions::Dp& dp, const std::string& who) {
  if (dp.mode == "off" || dp.noise != "seeded") return;
  throw Error("dp.noise = seeded: whoever knows the config's seed could recompute " + who +
              " and subtract it; a deployment takes dp.noise = secret (OpenSSL's generator) or keyed "
              "(a key of its own, fedprof keygen)");
}

// The number of clients the CA certified (secagg-roster), or, without TLS,
// 0: the fleet is then the config's clients.count.
int RosterSize(const std::string& tls_dir) {
  return tls_dir.empty() ? 0 : static_cast<int>(SecAggRoster(tls_dir).size());
}

// A server's config as a deployment reads it: the colluders are counted
// among the roster (secagg.fleet = 0), and its DP key is in its TLS
// directory (dp.key_dir empty).
Config DeployedConfig(Config config, const ServeOptions& serve) {
  const RunOptions& o = config.options();
  if (o.secagg.protocol != "none" && o.secagg.fleet == 0) {
    const int roster = RosterSize(serve.tls_dir);
    if (roster > 0) config.SetAssignment("secagg.fleet=" + std::to_string(roster));
  }
  if (o.dp.noise == "keyed" && o.dp.key_dir.empty() && !serve.tls_dir.empty()) {
    config.SetAssignment("dp.key_dir=" + serve.tls_dir);
  }
  return config;
}

// A foreign config's files lie under its roots: checked before any is read.
void CheckForeignConfig(const Config& config, const ServeOptions& serve) {
  if (!serve.foreign_config) return;
  WithholdFileText();
  std::vector<std::string> skip;
  // The server's own key directory, as DeployedConfig names it.
  if (config.options().dp.key_dir == serve.tls_dir) skip.push_back("dp.key_dir");
  const std::string outside = PathRefusal(config, serve.data_roots, "--data-root", skip);
  if (!outside.empty()) throw Error(outside);
}

void Serve(RunStart start, const std::string& out_dir, const ServeOptions& serve,
           RunObserver* observer) {
  CheckSecurity("--listen", serve.listen, serve.tls_dir, serve.insecure);
  CheckForeignConfig(start.config, serve);
  const RunOptions::Dp& dp = start.config.options().dp;
  CheckDeployedNoise(dp, "the server's noise and sample");
  // A keyed server's noise is the key's for (seed, round): a second run on
  // the key would repeat it.
  if (dp.mode != "off" && dp.noise == "keyed") {
    ClaimNoiseKey(ServerNoiseKeyPath(KeyDir(dp)), std::filesystem::absolute(out_dir).string(), start.resume);
  }
  // Every check is made before any client is waited for.
  const std::unique_ptr<RunPlan> plan = MakePlan(start.config, ClientsLive::kElsewhere, observer);
  const RunOptions::Deploy& d = plan->options().deploy;
  GrpcServerOptions o;
  o.listen = serve.listen;
  o.tls_dir = serve.tls_dir;
  o.num_clients = plan->num_clients();
  o.model = plan->spec;
  o.num_params = plan->num_values;
  o.features = plan->data.features;
  const std::string features_problem = FeatureScalingProblem(o.features);
  if (!features_problem.empty()) {
    throw Error(plan->options().data.train_file + ": its feature columns cannot be sent to the clients: " +
                features_problem);
  }
  o.heartbeat_s = d.heartbeat_s;
  o.heartbeat_timeout_s = d.heartbeat_timeout_s;
  o.round_timeout_s = d.round_timeout_s;
  o.chunk_bytes = static_cast<size_t>(d.chunk_kb) * 1024;
  o.max_samples = d.max_samples;
  o.min_clients = static_cast<int>(std::min<int64_t>(d.min_clients, o.num_clients));
  o.start_timeout_s = d.start_timeout_s;
  o.max_clients = static_cast<int>(std::min<int64_t>(d.max_clients, o.num_clients));
  o.relays_refused = plan->strategy->NeedsEveryModel();  // relays send sums, not models
  if (plan->options().secagg.protocol != "none") {
    o.secure_aggregation = SecureAggregationFrom(plan->options());
    o.secagg_phase_timeout_s = plan->options().secagg.phase_timeout_s;
    // A relay sums its clients' models in the clear.
    o.relays_refused = "its clients' models are aggregated securely (secagg.protocol), which a "
                       "relay's plaintext partial sums would undo";
  }
  o.access_file = serve.access_file;
  if (!o.access_file.empty()) {
    if (!FileExists(o.access_file)) throw Error("--access " + o.access_file + ": no such file");
    // A relay answers for its clients' certificates, which the list pins.
    o.relays_refused = "a federation's runs take no relays: its access list holds each node to the "
                       "certificate it was enrolled with, which a relay's clients do not show the server";
  }
  if (o.heartbeat_timeout_s <= o.heartbeat_s) {
    throw Error("deploy.heartbeat_timeout_s: " + std::to_string(o.heartbeat_timeout_s) +
                " must exceed deploy.heartbeat_s (" + std::to_string(o.heartbeat_s) + ")");
  }
  GrpcTransport transport(o, observer);
  RunRounds(*plan, out_dir, std::move(start.state), start.resume, transport, observer);
}

// train-images/labels IDX files or train.csv in `dir`.
Dataset LoadOwnData(const std::string& dir, const RunOptions::Data& options) {
  if (FileExists(dir + "/train.csv")) {
    CsvOptions csv;
    csv.targets = SplitList(options.targets);
    csv.classification = options.task == "classification";
    if (csv.targets.empty()) throw Error("data.targets: CSV data needs at least one target column");
    return LoadCsv(dir + "/train.csv", csv);
  }
  auto find = [&](const std::string& stem) {
    for (const std::string& p : {dir + "/" + stem, dir + "/" + stem + ".gz"}) {
      if (FileExists(p)) return p;
    }
    throw Error("--data-dir " + dir + ": no train.csv and no " + stem + "[.gz]");
  };
  const std::string images = find("train-images-idx3-ubyte");  // named first when both are missing
  return LoadIdx(images, find("train-labels-idx1-ubyte"));
}

}  // namespace

void RunServer(const Config& config, const std::string& out_dir, const ServeOptions& serve,
               RunObserver* observer, ExistingRun existing) {
  Serve(StartRun(DeployedConfig(config, serve), out_dir, existing), out_dir, serve, observer);
}

void ResumeServer(const std::string& out_dir, const std::vector<std::string>& overrides,
                  const ServeOptions& serve, RunObserver* observer) {
  Serve(ResumeRun(out_dir, overrides), out_dir, serve, observer);
}

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out;
  for (int64_t d : shape) out += (out.empty() ? "" : " x ") + std::to_string(d);
  return "[" + out + "]";
}

// Tabular data goes through the server's feature scaling, as the server's
// test set did. A table of the client's own (`own_data`, --data-dir) is
// scaled at the first registration; the config's data, which the client has scaled as it
// loaded it (`loaded`), must have been scaled alike: else its copy of
// data.train_file is not the server's. A later registration must bring the
// same scaling.
void TakeFeatureScaling(Client& client, bool own_data, const FeatureScaling& loaded, const FeatureScaling& server,
                        std::optional<FeatureScaling>* taken) {
  if (*taken) {
    if (!(**taken == server)) throw Error("the server's feature scaling changed since this client registered");
    return;
  }
  const bool table = !client.data().feature_names.empty();
  if (own_data && table != !server.empty()) {
    throw Error(table ? "this client's data is a table (train.csv), the server's is not"
                      : "the server's data is a table, this client's (IDX images) is not");
  }
  if (own_data && table) {
    Dataset scaled = client.data();
    scaled.x = ScaleFeatures(scaled.x, scaled.feature_names, server, scaled.name);
    scaled.feature_names = server.names;
    client = Client(client.id(), std::move(scaled));
  } else if (!(loaded == server)) {
    throw Error("this client's data.train_file does not have the server's feature columns and statistics: "
                "give it the same file");
  }
  *taken = server;
}

// Where a deployed client keeps its client algorithm's state: a file a
// client, algorithm and server run (`run`, the hex of its id), which no
// other run reads.
struct KeptState {
  std::string dir, run;
  bool wrote = false;  // this process has written the file

  // The file for `ins`, or "" when the client keeps its state in memory
  // (no directory, no run id) or has none (no training, an algorithm
  // without client state). The algorithm is one of the table's names.
  std::string File(int id, const FitInstructions& ins) const {
    if (dir.empty() || run.empty() || ins.train.epochs == 0 || !KeepsAlgorithmState(ins.objective)) return "";
    return dir + "/client-" + std::to_string(id) + "." + ins.objective.algorithm + "." + run.substr(0, 16) + ".state";
  }
  std::string Name(int id, const FitInstructions& ins) const {
    return "client " + std::to_string(id) + " " + ins.objective.algorithm + " run " + run;
  }
};

// The state client `id` kept in `file`, or none (the algorithm's reset):
// before its first round, or with a line saying why when the file is
// corrupt, or missing after this process wrote it.
FlatParams ReadKeptState(const KeptState& kept, const std::string& file, int id, const FitInstructions& ins) {
  FlatParams state;
  const std::string why = ReadStateFile(file, kept.Name(id, ins), &state);
  if (why.empty()) return state;
  if (kept.wrote || FileExists(file)) {
    LogWarning("client " + std::to_string(id) + ": " + why + "; " + FindAlgorithm(ins.objective.algorithm)->reset);
  }
  return {};
}

// What client `client` computes for the server's tasks; `model` is its own
// copy of the server's model, built at registration. `loaded`: the feature
// scaling the client gave the config's data as it loaded it.
GrpcClientWork WorkOf(Client& client, std::shared_ptr<Model>& model, const RunOptions& run,
                      const ClientOptions& options, const FeatureScaling& loaded) {
  GrpcClientWork work;
  // The server sends a TorchScript module's hash, never the module: this
  // client builds it from its own copy (model.file), which must hash alike.
  const std::string module_file = run.model.file;
  auto taken = std::make_shared<std::optional<FeatureScaling>>();
  auto kept = std::make_shared<KeptState>();
  kept->dir = options.state_dir.empty() ? options.tls_dir : options.state_dir;
  work.prepare = [&client, &model, module_file, fit_none = options.fit_none, own_data = !options.data_dir.empty(),
                  loaded, taken, kept](const ServerSetup& setup) {
    TakeFeatureScaling(client, own_data, loaded, setup.features, taken.get());
    // A server that states no run of 32 bytes gets state kept in memory only.
    kept->run = setup.run_id.size() == 32 ? HexEncode(setup.run_id) : "";
    if (!kept->dir.empty()) MakeDirs(kept->dir);
    ModelSpec spec = setup.model;
    const int64_t num_params = setup.num_params;
    const std::string what = spec.name == "torchscript" ? "its TorchScript module" : spec.name;
    if (spec.name == "torchscript") {
      if (module_file.empty()) {
        throw Error("the server trains a TorchScript module (SHA-256 " + spec.file_sha256 +
                    "); give this client the same file with --set model.file=PATH");
      }
      spec.file = module_file;
    }
    const std::vector<int64_t> shape = client.data().x.sizes().slice(1).vec();
    if (shape != spec.input_shape) {
      throw Error("the server trains " + what + " on samples of shape " + ShapeText(spec.input_shape) +
                  ", this client's data has " + ShapeText(shape));
    }
    if (!client.data().is_regression() &&
        client.data().y.max().item<int64_t>() >= spec.outputs) {
      throw Error("this client's labels exceed the server's " + std::to_string(spec.outputs) +
                  " classes");
    }
    if (fit_none) return;  // no model is trained
    model = MakeModel(spec);
    if (static_cast<int64_t>(Flatten(*model).size()) != num_params) {
      throw Error("the server's model has " + std::to_string(num_params) +
                  " values, the one built here " + std::to_string(Flatten(*model).size()));
    }
  };
  work.fit = [&client, &model, fit_none = options.fit_none, admit = options.admit_training,
              kept](const FitInstructions& ins) {
    // A failure states the weight the client registered, as every result does.
    auto failure = [&client](const std::string& why) {
      FitResult failed;
      failed.ok = false;
      failed.error = why;
      failed.num_samples = client.num_samples();
      return failed;
    };
    const std::string refused = admit && ins.train.epochs > 0 ? admit(client.id()) : "";
    if (!refused.empty()) return failure(refused);
    if (fit_none) {  // the model it brought, as if trained
      FitResult r;
      r.ok = true;
      r.num_samples = client.num_samples();
      if (ins.train.epochs > 0) r.params = *ins.global;
      return r;
    }
    try {
      const std::string state_file = kept->File(client.id(), ins);
      if (!state_file.empty()) client.set_algorithm_state(ReadKeptState(*kept, state_file, client.id(), ins));
      FitResult r = client.Fit(ins, *model);
      if (!state_file.empty() && r.ok && !client.algorithm_state().empty()) {
        WriteStateFile(state_file, kept->Name(client.id(), ins), client.algorithm_state(), /*durable=*/true);
        kept->wrote = true;
      }
      return r;
    } catch (const std::exception& e) {  // reported to the server, which skips the result
      return failure(e.what());
    }
  };
  return work;
}

}  // namespace

void RunRelay(const RelayOptions& options, RunObserver* observer) {
  CheckSecurity("--server", options.server, options.tls_dir, options.insecure);
  if (options.insecure && !IsLoopbackAddress(options.listen)) {
    throw Error("--listen " + options.listen + ": --insecure is for loopback addresses only; use --tls-dir");
  }
  GrpcRelayOptions o;
  o.server = options.server;
  o.listen = options.listen;
  o.tls_dir = options.tls_dir;
  o.id = options.id;
  o.give_up_s = options.give_up_s;
  // A relay checks each model as the server would before it sums it.
  RunGrpcRelay(
      o,
      [](const FitResult& r, size_t num_params, bool trained) {
        return Server::Validate(r, num_params, trained);
      },
      observer);
}

std::pair<int, int> ParseIdRange(const std::string& text) {
  const size_t dash = text.find('-');
  const int first = ParseClientId(text.substr(0, dash), 1000000000);
  const int last = dash == std::string::npos ? first : ParseClientId(text.substr(dash + 1), 1000000000);
  if (first < 0 || last < first) {
    throw Error("--ids '" + Printable(text, 40) + "': not a client id or a range A-B of them (A <= B)");
  }
  return {first, last};
}

void RunClient(const Config& config, const ClientOptions& options) {
  const RunOptions& run = config.options();
  CheckSecurity("--server", options.server, options.tls_dir, options.insecure);
  const int first = options.id;
  const int last = options.last_id < 0 ? options.id : options.last_id;
  if (first < 0 || last < first || last >= run.clients.count) {
    throw Error("--id/--ids " + std::to_string(first) + (last > first ? "-" + std::to_string(last) : "") +
                ": not among the config's clients 0.." + std::to_string(run.clients.count - 1) +
                " (clients.count)");
  }
  if (!options.data_dir.empty() && last > first) {
    throw Error("--data-dir holds one client's data: give --id, not a range of --ids");
  }
  // The client's own demands on secure aggregation and DP: its config's,
  // never the server's, checked before any data is loaded.
  SecAggPolicy policy;
  policy.required = run.secagg.protocol != "none";
  policy.clear_profiles = run.secagg.clear_profiles;
  const SecureAggregationOptions own = SecureAggregationFrom(run);
  policy.tolerance = own.tolerance;
  // The colluders among every client the CA certified, however few a
  // session invites.
  if (!options.tls_dir.empty() && (policy.required || FileExists(options.tls_dir + "/secagg-roster"))) {
    policy.tolerance = ClientTolerance(run, RosterSize(options.tls_dir));
  }
  if (policy.required) policy.reads = StrategyReads(run);
  policy.neighbors = own.neighbors;
  policy.threshold = own.threshold;
  const bool distributed = run.dp.mode == "distributed";
  const std::string key_dir = run.dp.key_dir.empty() ? options.tls_dir : run.dp.key_dir;
  if (distributed) {
    CheckDeployedNoise(run.dp, "this client's noise");
    policy.distributed_dp = true;
    policy.dp.noise_multiplier = run.dp.noise_multiplier;
    policy.dp.clip_norm = run.dp.clip_norm;
    policy.dp.bits = static_cast<int>(run.dp.bits);
    policy.dp.rounding_beta = run.dp.rounding_beta;
    policy.dp_clear_profiles = run.dp.clear_profiles;
    policy.noise.kind = ParseNoiseKind(run.dp.noise);
    if (policy.noise.kind == NoiseKind::kKeyed && options.tls_dir.empty()) {
      throw Error("dp.noise = keyed: this client's ledger, which keeps its key from noising one task twice, "
                  "lives beside its keys (--tls-dir); without one it would be forgotten at the next start");
    }
    if (run.dp.client_unbounded) {
      if (run.dp.client_budget > 0) {
        throw Error("dp.client_unbounded = true and dp.client_budget = " + FormatDouble(run.dp.client_budget) +
                    ": a budget, or none, not both");
      }
      LogWarning("dp.client_unbounded = true: this client refuses a round or a task twice, but nothing "
                 "bounds what reruns under new run ids could average out of its noise");
    }
  }
  if ((run.dp.client_budget > 0 || run.dp.client_unbounded) && !distributed) {
    throw Error(std::string(run.dp.client_unbounded ? "dp.client_unbounded" : "dp.client_budget") +
                ": a client keeps a budget only under dp.mode = distributed (any other update reaches the "
                "server without noise of its own)");
  }
  if (run.dp.client_budget > 0 && options.tls_dir.empty()) {
    throw Error(
        "dp.client_budget: the ledger that keeps it lives beside the client's keys (--tls-dir); "
        "without one it would be forgotten at the next start");
  }
  const double budget = DeployedClientBudget(run.dp);
  // The δ of its ledger's epsilons: the run's (only distributed DP spends a
  // finite epsilon; any other δ would do for the rest).
  const double delta = !distributed       ? 1e-5
                       : run.dp.delta > 0 ? run.dp.delta
                                          : 1.0 / static_cast<double>(run.clients.count);
  at::set_num_threads(1);  // as a simulated client trains: the same numbers
  // Only these clients' data stays in memory.
  std::vector<Client> clients;
  FeatureScaling loaded;  // of the config's data as loaded here; none for own data
  if (!options.data_dir.empty()) {
    clients.emplace_back(first, LoadOwnData(options.data_dir, run.data));
  } else {
    TrainTest data = LoadData(run.data, static_cast<uint64_t>(run.seed));
    loaded = std::move(data.features);
    const Population population(data.train, run);
    for (int id = first; id <= last; ++id) clients.push_back(population.MakeClient(id));
  }
  for (const Client& client : clients) {
    if (client.num_samples() == 0) throw Error("client " + std::to_string(client.id()) + " holds no data");
  }
  const std::string module_sha256 = run.model.file.empty() ? "" : FileSha256Hex(run.model.file);
  std::vector<std::shared_ptr<Model>> models(clients.size());
  std::vector<GrpcClientOptions> grpc(clients.size());
  std::vector<GrpcClientWork> work;
  for (size_t i = 0; i < clients.size(); ++i) {
    GrpcClientOptions& o = grpc[i];
    o.server = options.server;
    o.relay = options.relay;
    o.tls_dir = options.tls_dir;
    o.id = clients[i].id();
    // Under distributed DP a client states no sample count: every update
    // weighs 1, and the count would be a figure of its own in the clear.
    o.num_samples = distributed ? 1 : clients[i].num_samples();
    o.speed_ghz = options.speed_ghz;
    o.bandwidth_mhz = options.bandwidth_mhz;
    o.model_sha256 = module_sha256;
    o.give_up_s = options.give_up_s;
    o.withdrawn = options.withdrawn;
    o.progress = run.report.progress;  // of several clients, one line a round for them all
    o.secagg = policy;
    if (policy.noise.kind == NoiseKind::kKeyed)
      o.secagg.noise.key = ReadNoiseKey(ClientNoiseKeyPath(key_dir, o.id));
    // Under TLS its ledger is kept beside the client's keys, so a restarted
    // client still refuses what it contributed to, and knows what it spent.
    if (!options.tls_dir.empty()) o.ledger = ClientLedgerPath(options.tls_dir, o.id);
    o.ledger_delta = delta;
    o.budget = budget;
    o.reports = {run.rounds + 1, run.secagg.client_reports};
    work.push_back(WorkOf(clients[i], models[i], run, options, loaded));
  }
  // Clients that train share the cores (run.threads, 0 = one a core); the
  // many clients of a load test mostly wait, on no thread at all.
  const int workers = run.threads > 0 ? static_cast<int>(run.threads)
                                      : static_cast<int>(std::thread::hardware_concurrency());
  const std::vector<std::string> errors = RunGrpcClients(grpc, work, workers);
  if (clients.size() == 1) {
    if (!errors.front().empty()) throw Error(errors.front());
    return;
  }
  const auto failed = std::count_if(errors.begin(), errors.end(),
                                    [](const std::string& e) { return !e.empty(); });
  if (failed > 0) {
    throw Error(std::to_string(failed) + " of the " + std::to_string(clients.size()) +
                " clients ended with an error (each logged above)");
  }
}

}  // namespace fedprof
