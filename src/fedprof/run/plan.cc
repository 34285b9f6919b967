#include "fedprof/run/plan.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>

#include "fedprof/algorithms/algorithm.h"
#include "fedprof/client/attack.h"
#include "fedprof/client/backdoor.h"
#include "fedprof/client/client.h"
#include "fedprof/client/local_training.h"
#include "fedprof/config/options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/log.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/text.h"
#include "fedprof/profiling/profiler.h"
#include "fedprof/run/run_dir.h"
#include "fedprof/secagg/messages.h"
#include "fedprof/server/checkpoint.h"

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

}  // namespace

ModelSpec SpecFor(const RunOptions::Model& options, const Dataset& data) {
  ModelSpec spec;
  spec.name = options.name;
  spec.file = options.file;
  if (!spec.file.empty()) {
    spec.name = "torchscript";
    if (!FileExists(spec.file)) throw Error("model.file " + spec.file + ": no such file");
    spec.file_sha256 = FileSha256Hex(spec.file);
  }
  spec.input_shape = data.x.sizes().slice(1).vec();
  spec.outputs = data.is_regression() ? data.y.size(1) : data.num_classes;
  spec.hidden = ParseWidths(options.hidden);
  spec.profile_layer = options.profile_layer;
  spec.width = options.width;
  return spec;
}

std::shared_ptr<Model> InitialModel(int64_t seed, const ModelSpec& spec) {
  torch::manual_seed(Mix64(static_cast<uint64_t>(seed) ^ static_cast<uint64_t>(Stream::kModelInit)));
  return MakeModel(spec);
}

// Under DP a round's session invites however many the Poisson sample drew:
// a round whose sample is too small for a session loses its sum. Refused
// when that happens to more than 1 round in 100.
void CheckPoissonSessions(const RunOptions& o, const SecureAggregationOptions& options) {
  const int n = static_cast<int>(o.clients.count);
  const double q = DpSampleRate(DpOptionsFrom(o));
  const int fewest = FewestInvited(options, n);
  // P[Binomial(N, q) < fewest], summed in log space.
  double lost = 0;
  for (int k = 0; k < fewest && q < 1; ++k) {
    lost += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) +
                     k * std::log(q) + (n - k) * std::log1p(-q));
  }
  if (fewest > 0 && lost <= 0.01) return;
  const std::string option = "dp.mode = " + o.dp.mode + ", secagg.protocol = " + o.secagg.protocol + ": ";
  const std::string colluders = "secagg.corrupt = " + FormatDouble(o.secagg.corrupt) + " of a fleet of " +
                                std::to_string(options.tolerance.fleet) + " (secagg.fleet; at most " +
                                std::to_string(secagg::CorruptBound(n, options.tolerance)) + " colluders)";
  if (fewest == 0) {
    throw Error(option + "no session of up to " + std::to_string(n) + " clients can run with " + colluders +
                " and secagg.dropout = " + FormatDouble(o.secagg.dropout) + "; assume fewer colluders");
  }
  throw Error(option + "a session needs at least " + std::to_string(fewest) + " invited clients under " +
              colluders + ", but a Poisson sample at q = " + FormatDouble(q, "%.4g") + " of " +
              std::to_string(n) + " draws fewer in " + FormatDouble(100 * lost, "%.3g") +
              "% of rounds, each of which would lose its sum; raise strategy.fraction, or assume fewer "
              "colluders");
}

// Secure aggregation hands the server the round's sum alone: strategies
// that need each client's model, or a sketch of it, cannot run under it.
// Its parameters must also be possible for a full round of clients.
void CheckSecureAggregation(const RunOptions& o, const Strategy& strategy) {
  const RunOptions::SecAgg& secagg = o.secagg;
  if (secagg.protocol == "none") return;
  const std::string option = "secagg.protocol = " + secagg.protocol + ": ";
  if (strategy.SketchDim() > 0) {
    throw Error(option + "strategy " + strategy.name() +
                " samples clients by sketches of their individual updates, which secure "
                "aggregation hides from the server");
  }
  if (!strategy.NeedsEveryModel().empty()) {
    throw Error(option + "the server sees only the sum of the round's models, but " +
                strategy.NeedsEveryModel());
  }
  if (o.attack.share > 0 && MakeAttackPlan(o.attack, o.seed, 0).attack.colluding()) {
    throw Error(option + "attack.kind = " + o.attack.kind +
                ": the colluding attackers craft their models from the honest ones, which secure "
                "aggregation hides from them");
  }
  if (strategy.WantedReports().profile && o.fedprof.secure_matching == "none" && !secagg.clear_profiles) {
    throw Error(option + "strategy " + strategy.name() + " would have every client send its profile "
                "in the clear; set fedprof.secure_matching = paillier (profiles stay encrypted), or "
                "secagg.clear_profiles = true to accept that");
  }
  const int per_round = o.clients_per_round();
  const std::string round = std::to_string(per_round) +
                            " clients per round (strategy.fraction x clients.count)";
  if (per_round < 2) throw Error(option + "a sum of one model is that model: " + round);
  const SecureAggregationOptions options = SecureAggregationFrom(o);
  if (o.dp.mode != "off") {
    CheckPoissonSessions(o, options);
    return;
  }
  try {
    secagg::ParamsFor(options.protocol, per_round, options.tolerance, options.neighbors, options.threshold);
  } catch (const Error& e) {
    throw Error(option + round + ": " + e.what());
  }
}

// Buffered asynchronous aggregation takes any selector; what it cannot
// run with, in one line.
void CheckBuffered(const RunOptions& o, const Strategy& strategy, ClientsLive where) {
  if (strategy.Buffered() == nullptr) return;
  const std::string option = "strategy.aggregator = fedbuff: ";
  Attack attack;
  attack.kind = ParseAttackKind(o.attack.kind);
  if (where == ClientsLive::kElsewhere && o.attack.share > 0 && attack.colluding()) {
    throw Error(option + "attack.kind = " + o.attack.kind + " crafts the attackers' models from a round's "
                "honest ones, but a deployment's asynchronous results arrive one by one");
  }
  if (o.secagg.protocol != "none") {
    throw Error(option + "secure aggregation (secagg.protocol) masks a round's models together, but "
                "asynchronous results arrive one by one");
  }
  if (o.availability.overcommit > 1) {
    throw Error(option + "availability.overcommit drops the last results of a round, but an "
                "asynchronous run has no rounds to wait for; use fedbuff.concurrency");
  }
  if (o.fedprof.secure_matching != "none") {
    throw Error(option + "fedprof.secure_matching encrypts the reference of the round's model, but "
                "asynchronous clients train on different model versions");
  }
}

// User-level DP: what would break the accounting's assumptions (every
// client sampled independently at q = K/N each round, once), in one line.
// The selector and aggregator were checked by MakeStrategy.
void CheckDp(const RunOptions& o) {
  if (o.dp.mode == "off") return;
  const std::string option = "dp.mode = " + o.dp.mode + ": ";
  if (o.availability.simulated()) {
    throw Error(option +
                "availability decides who can be sampled, but the privacy accounting samples "
                "every client at q = K/N each round; use availability.kind = always");
  }
  if (o.dp.mode == "distributed" && o.secagg.protocol == "none") {
    throw Error(option +
                "the clients' noise adds up only inside secure aggregation; set secagg.protocol "
                "= secagg+ (or secagg)");
  }
  if (o.eval.federated_every > 0) {
    throw Error(option +
                "federated evaluation (eval.federated_every) sends the server each client's "
                "results on its own data without noise, outside the guarantee");
  }
  if (o.dp.bits % 8 != 0) {
    throw Error("dp.bits = " + std::to_string(o.dp.bits) +
                ": whole bytes (8, 16, ..., 56): a sum modulo 2^b in wider words would keep in its high bits "
                "how many clients' values wrapped");
  }
  if (o.dp.clipping == "adaptive" && o.secagg.protocol != "none") {
    throw Error(option +
                "dp.clipping = adaptive needs to know whether each update needed clipping, which "
                "under secure aggregation no client sends; use dp.clipping = fixed");
  }
  if (o.dp.mode == "distributed" && ResolveStrategy(o).selector == "fedprof" && !o.dp.clear_profiles) {
    throw Error(option +
                "FedProf has each client send the server its profile or its divergence, a figure "
                "of its own in the clear, outside the guarantee; set dp.clear_profiles = true to accept that "
                "(on the clients too)");
  }
}

void CheckStrategyFitsModel(const Strategy& strategy, const Model& model,
                            const RunOptions::Model& options) {
  const std::string model_name =
      options.file.empty() ? "model " + options.name : "model.file " + options.file;
  if (strategy.KeepsLocalBatchNorm() && !HasBatchNorm(model)) {
    throw Error("strategy " + strategy.name() + " keeps each client's batch-norm layers local "
                "(strategy.aggregator = fedbn), but " + model_name + " has none; use a model with "
                "batch norm (cnn, shufflenet_v2, resnet18, or a model.file with BatchNorm layers)");
  }
  if (strategy.WantedReports().profile && model.profiled_layer().empty()) {
    throw Error("strategy " + strategy.name() + " selects clients by their profiles "
                "(strategy.selector = fedprof): " + model.why_not_profileable());
  }
  const LocalObjective& algorithm = strategy.AlgorithmObjective();
  if (algorithm.algorithm == "moon" && algorithm.moon_mu > 0 && model.profiled_layer().empty()) {
    throw Error("strategy.algorithm = moon contrasts the representations of a layer (model.profile_layer): " +
                model.why_not_profileable());
  }
}

int64_t ProfiledUnits(Model& model, const Dataset& data) {
  torch::NoGradGuard no_grad;
  model.eval();
  torch::Tensor rep;
  model.Forward(data.x.narrow(0, 0, 1), &rep);
  return rep.size(1);
}

Dataset ReferenceSet(const RunOptions::FedProf& options, const TrainTest& data,
                     const Population* population) {
  if (options.reference == "test") return data.test;
  if (options.reference == "client") {
    if (population == nullptr) {
      throw Error("fedprof.reference: 'client' needs the clients' data in this process; a "
                  "deployment takes 'holdout' or 'test'");
    }
    const int64_t id = options.reference_client;
    if (id >= population->size()) {
      throw Error("fedprof.reference_client: " + std::to_string(id) +
                  " is not a client; expected < " + std::to_string(population->size()));
    }
    return population->MakeClient(static_cast<int>(id)).data();
  }
  return data.holdout;
}

ServerOptions ServerOptionsFrom(const RunOptions& options, ClientsLive where) {
  ServerOptions so;
  so.rounds = options.rounds;
  so.fraction = options.strategy.fraction;
  so.train.epochs = static_cast<int>(options.train.epochs);
  so.train.batch_size = options.train.batch_size;
  so.train.lr = options.train.lr;
  so.train.momentum = options.train.momentum;
  so.train.weight_decay = options.train.weight_decay;
  so.lr_decay = options.train.lr_decay;
  so.seed = static_cast<uint64_t>(options.seed);
  so.eval_every = options.eval.every;
  so.eval_batch_size = options.eval.batch_size;
  so.federated_eval_every = options.eval.federated_every;
  so.federated_eval_fraction = options.eval.federated_fraction;
  so.progress = options.report.progress;
  so.overcommit = options.availability.overcommit;
  so.min_results = 0;
  // Under user-level DP a round is one Poisson sample, however few it drew
  // (none, even): sampling again to reach a quorum would be a second sample.
  if (where == ClientsLive::kElsewhere && options.dp.mode == "off") {
    so.min_results = static_cast<int>(options.deploy.min_results);
    so.round_attempts = static_cast<int>(options.deploy.round_attempts);
  }
  if (options.dp.mode != "off") {
    so.sample_source.kind = ParseNoiseKind(options.dp.noise);
    if (so.sample_source.kind == NoiseKind::kKeyed) {
      so.sample_source.key = ReadNoiseKey(ServerNoiseKeyPath(KeyDir(options.dp)));
    }
  }
  return so;
}

std::unique_ptr<RunPlan> MakePlan(const Config& config, ClientsLive where, RunObserver* observer) {
  const RunOptions& o = config.options();
  return MakePlan(config, where, LoadData(o.data, static_cast<uint64_t>(o.seed)), observer);
}

namespace {

// FLTrust's root update (Cao et al. 2021, Alg. 2 line 9): θ trained on the
// first robust.root_size samples of D_V (`reference`, filled in once the
// plan has it) as a client trains, with the round's learning rate and its
// own batch order (client id -1). Unless robust.root_epochs says otherwise,
// the server takes as many SGD steps as a client of mean size
// (`client_samples`): its update then has a client's scale, which the
// rescaling of every update to ‖g_0‖ (Eq. 3) needs.
RootUpdate RootUpdateOn(const RunOptions& o, const ModelSpec& spec, const Dataset* reference,
                        double client_samples) {
  std::shared_ptr<Model> model = MakeModel(spec);
  TrainOptions train;
  train.batch_size = o.train.batch_size;
  train.momentum = o.train.momentum;
  train.weight_decay = o.train.weight_decay;
  const double batch = static_cast<double>(train.batch_size);
  const int64_t client_batches =
      o.train.epochs * std::max<int64_t>(1, static_cast<int64_t>(std::ceil(client_samples / batch)));
  const std::optional<int64_t> epochs = o.robust.root_epochs;
  const double lr = o.train.lr, decay = o.train.lr_decay;
  const int64_t root_size = o.robust.root_size;
  const auto seed = static_cast<uint64_t>(o.seed);
  return [model, train, epochs, client_batches, batch, lr, decay, root_size, seed, reference](
             const FlatParams& global, int64_t version) {
    if (reference->size() == 0) {
      throw Error("fltrust: the server's root data set is empty (fedprof.reference)");
    }
    const int64_t n = root_size > 0 ? std::min(root_size, reference->size()) : reference->size();
    Dataset root = *reference;
    root.x = reference->x.narrow(0, 0, n);
    root.y = reference->y.narrow(0, 0, n);
    TrainOptions round_train = train;
    const auto root_batches = static_cast<int64_t>(std::ceil(static_cast<double>(n) / batch));
    round_train.epochs = static_cast<int>(epochs.value_or((client_batches + root_batches - 1) / root_batches));
    round_train.lr = lr * std::pow(decay, static_cast<double>(version));  // round version + 1
    Unflatten(global, *model);
    TrainLocally(round_train, BatchOrderKey{seed, version + 1, -1}, root, *model);
    return Flatten(*model);
  };
}

// The server's validation loss L_V (aggregation/robust.h: Zeno, the
// fallback): the mean loss of a model on the round's validation batch,
// evaluated on the server's models. The validation data is D_V
// (`reference`) after its first `skip` samples (the root set, when the run
// trains on one); a batch is robust.validation_size of them drawn from the
// seed and the version (all for 0), drawn once a round.
ValidationLoss ValidationLossOn(const RunOptions& o, const Dataset* reference, int64_t skip,
                                ModelReplicas* server_models) {
  struct Batch {
    int64_t version = -1;
    Dataset data;
  };
  auto batch = std::make_shared<Batch>();
  const int64_t size = o.robust.validation_size, eval_batch = o.eval.batch_size;
  const auto seed = static_cast<uint64_t>(o.seed);
  return [batch, size, skip, seed, reference, server_models, eval_batch](const FlatParams& model,
                                                                         int64_t version) {
    const int64_t available = reference->size() - skip;  // > 0: MakePlan checks
    if (batch->version != version) {
      std::vector<int64_t> rows(static_cast<size_t>(available));
      std::iota(rows.begin(), rows.end(), skip);
      if (size > 0 && size < available) {
        Rng rng = MakeRng(seed, Stream::kRobust, {kValidationBatchTag, static_cast<uint64_t>(version)});
        const std::vector<int64_t> order = Permutation(rng, available);
        for (int64_t k = 0; k < size; ++k) rows[static_cast<size_t>(k)] = skip + order[static_cast<size_t>(k)];
        rows.resize(static_cast<size_t>(size));
      }
      batch->data = Subset(*reference, rows);
      batch->version = version;
    }
    server_models->Load(model);
    return Evaluate(*server_models, batch->data, eval_batch).loss;
  };
}

}  // namespace

std::unique_ptr<RunPlan> MakePlan(const Config& config, ClientsLive where, TrainTest data,
                                  RunObserver* observer) {
  auto owned = std::make_unique<RunPlan>();
  RunPlan& plan = *owned;
  plan.config = config;
  const RunOptions& o = plan.config.options();
  plan.data = std::move(data);
  if (where == ClientsLive::kHere) plan.population = std::make_unique<Population>(plan.data.train, o);
  plan.spec = SpecFor(o.model, plan.data.train.size() > 0 ? plan.data.train : plan.data.test);
  plan.initial_model = InitialModel(o.seed, plan.spec);
  plan.num_params = CountParameters(*plan.initial_model);
  plan.num_values = static_cast<int64_t>(Flatten(*plan.initial_model).size());

  const ModelSpec spec = plan.spec;
  plan.server_models = std::make_unique<ModelReplicas>([spec] { return MakeModel(spec); },
                                                       static_cast<int>(o.threads));
  StrategyContext context;
  context.num_clients = plan.num_clients();
  context.observer = observer;
  ModelReplicas* server_models = plan.server_models.get();  // owned by the plan, as is `reference`
  const Dataset* reference = &plan.reference;
  context.reference_profile = [server_models, reference](const FlatParams& global, int64_t version) {
    server_models->Load(global);
    return ComputeProfile(*server_models, *reference, version);
  };
  const std::string aggregator = ResolveStrategy(o).aggregator;
  const bool fallback = o.robust.fallback == "root";
  const bool root = aggregator == "fltrust" || aggregator == "root" || fallback;
  const bool validation = aggregator == "zeno" || fallback;
  if (validation) {
    // Choosing models by the test set would report an accuracy it chose.
    if (o.fedprof.reference == "test") {
      throw Error("fedprof.reference: test would have zeno and robust.fallback choose models by the test set "
                  "whose accuracy the run reports; use holdout");
    }
    // The validation data follows the root set in D_V (disjoint: the
    // server's own update is not judged on the data it trained on; MakePlan
    // checks that some is left).
    context.validation_loss = ValidationLossOn(o, reference, root ? o.robust.root_size : 0, server_models);
  }
  if (root) {
    const double client_samples =
        o.partition.size_mean > 0
            ? o.partition.size_mean
            : static_cast<double>(plan.data.train.size()) / static_cast<double>(plan.num_clients());
    context.root_update = RootUpdateOn(o, spec, reference, client_samples);
  }
  plan.strategy = MakeStrategy(o, context);
  plan.strategy->SetServerAlgorithm(MakeServerAlgorithm(plan.strategy->AlgorithmObjective().algorithm, o));
  CheckStrategyFitsModel(*plan.strategy, *plan.initial_model, o.model);
  CheckBuffered(o, *plan.strategy, where);
  CheckSecureAggregation(o, *plan.strategy);
  CheckDp(o);
  if (plan.strategy->WantedReports().profile || root || validation) {
    plan.reference = ReferenceSet(o.fedprof, plan.data, plan.population.get());
    if (plan.reference.size() == 0) {
      throw Error("fedprof.reference: 'holdout' needs data.holdout_share > 0 (or use test|client)");
    }
    if (root && validation && (o.robust.root_size == 0 || o.robust.root_size >= plan.reference.size())) {
      throw Error("robust.root_size: the root set would take all " + std::to_string(plan.reference.size()) +
                  " samples of D_V (fedprof.reference; 0 = all), which leaves none for validating "
                  "(robust.fallback)");
    }
  }
  if (o.attack.backdoor()) {
    const std::string unfit = BackdoorUnfitFor(plan.data.test, o.attack.target);
    if (!unfit.empty()) throw Error(unfit);
    plan.triggered_test = TriggeredTestSet(plan.data.test, o.attack.target);
  }
  const std::string& algorithm = plan.strategy->AlgorithmObjective().algorithm;
  if (where == ClientsLive::kElsewhere && IsRegisteredAlgorithm(algorithm)) {
    throw Error("strategy.algorithm = " + algorithm + ": a registered client algorithm runs in the clients of "
                "the process that registered it; a deployment's clients have only the built-in ones");
  }
  if (where == ClientsLive::kElsewhere && o.availability.simulated()) {
    throw Error("availability.kind, availability.overcommit: simulation only; a deployment's clients come "
                "and go as they do");
  }
  // A deployment's clients hold the training data: its server keeps only the
  // test set and the reference set (FedProf's D_V), not the rest of it.
  if (where == ClientsLive::kElsewhere) plan.data.train = Dataset();
  plan.rounds = ServerOptionsFrom(o, where);
  plan.rounds.train_loss_reported =
      o.dp.mode != "distributed" && (o.secagg.protocol == "none" || plan.strategy->NeedsTrainingLoss());
  return owned;
}

Config ResumeConfig(const std::string& out_dir, const std::vector<std::string>& overrides) {
  Config config;
  config.MergeTomlFile(out_dir + "/config.toml");
  for (const std::string& assignment : overrides) {
    const std::string key = assignment.substr(0, assignment.find('='));
    if (!MayChangeOnResume(key)) {
      throw Error("--set " + key + ": cannot change on --resume (only " + ResumableOptionsList() +
                  "); start a new run instead");
    }
    config.SetAssignment(assignment);
  }
  return config;
}

RunStart StartRun(const Config& config, const std::string& out_dir, ExistingRun existing) {
  ClaimRunDir(out_dir, existing);
  MakeDirs(out_dir);
  WriteFileAtomic(out_dir + "/config.toml", config.ToToml());
  return {config, ServerState(), /*resume=*/false};
}

RunStart ResumeRun(const std::string& out_dir, const std::vector<std::string>& overrides) {
  // The config first: the checkpoint must be one of its runs.
  RunStart start;
  start.config = ResumeConfig(out_dir, overrides);
  start.state = LoadCheckpoint(out_dir + "/checkpoint.bin", start.config.Fingerprint());
  start.resume = true;
  WriteFileAtomic(out_dir + "/config.toml", start.config.ToToml());
  return start;
}

}  // namespace fedprof
