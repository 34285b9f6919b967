#include "fedprof/strategy/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <nlohmann/json.hpp>

#include "fedprof/aggregation/fedbuff.h"
#include "fedprof/config/run_options.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/selection/afl_selector.h"
#include "fedprof/selection/clustered_selector.h"
#include "fedprof/selection/fedprof_selector.h"
#include "fedprof/selection/oort_selector.h"
#include "fedprof/strategy/registry.h"
#include "fedprof/transport/secure_aggregation.h"

namespace fedprof {
namespace {

// The presets strategy.name offers, each a composition from the literature.
struct Preset {
  const char* name;
  const char* selector;
  const char* aggregator;
  bool always_partial;  // the mode is part of the method
  bool prox;            // local objective with fedprox.mu
  const char* algorithm = "";  // the client algorithm (algorithms/algorithm.h)
};
constexpr Preset kPresets[] = {
    // McMahan et al. 2017: uniform selection, data-size weighted averaging.
    {"fedavg", "uniform", "average", false, false},
    // Li et al. 2020, "On the convergence of FedAvg on non-IID data",
    // Scheme II: uniform selection, always partial averaging.
    {"fedavg-rp", "uniform", "average", true, false},
    // Li et al. 2020, "Federated Optimization in Heterogeneous Networks":
    // clients sampled by data size, proximal term μ/2 ||w − w_global||².
    {"fedprox", "size", "average", false, true},
    // Reddi et al. 2021: Adam on the server over the averaged update.
    {"fedadam", "uniform", "fedadam", false, false},
    // Goetz et al. 2019: loss-valued active selection.
    {"afl", "afl", "average", false, false},
    // Li et al. 2021, "FedBN: Federated Learning on Non-IID Features via
    // Local Batch Normalization": uniform selection; clients keep their
    // batch-norm layers. The server still averages them, but only its own
    // evaluation of the global model uses the average.
    {"fedbn", "uniform", "fedbn", false, false},
    // Wu et al., SAFA (IEEE TC 2021): the K clients that finish first.
    {"cfcfm", "cfcfm", "average", false, false},
    // Fraboni et al. 2021: one client per cluster of similar updates.
    {"clustered", "clustered", "average", false, false},
    // Lai et al., OSDI 2021: statistical utility, system penalty, exploration.
    {"oort", "oort", "average", false, false},
    // Nguyen et al., AISTATS 2022: buffered asynchronous aggregation.
    {"fedbuff", "uniform", "fedbuff", false, false},
    // The FedProf papers: selection by representation-profile score.
    {"fedprof", "fedprof", "average", false, false},
    // The client algorithms (docs/algorithms.md), over the participants.
    // Karimireddy et al., ICML 2020: control variates.
    {"scaffold", "uniform", "average", true, false, "scaffold"},
    // Wang et al., NeurIPS 2020: updates normalised by their steps.
    {"fednova", "uniform", "average", true, false, "fednova"},
    // Acar et al., ICLR 2021: dynamic regularisation.
    {"feddyn", "uniform", "average", true, false, "feddyn"},
    // Li, He and Song, CVPR 2021: model-contrastive local loss.
    {"moon", "uniform", "average", true, false, "moon"},
};

const Preset& FindPreset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return p;
  }
  std::string names;
  for (const Preset& p : kPresets) names += std::string(names.empty() ? "" : "|") + p.name;
  throw Error("strategy.name: unknown strategy '" + name + "'; expected " + names);
}

std::unique_ptr<Selector> MakeSelector(const std::string& name, const RunOptions& options,
                                       const StrategyContext& context) {
  if (name == "uniform") return MakeUniformSelector();
  if (name == "size") return MakeSizeWeightedSelector();
  if (name == "cfcfm") return MakeFirstComeSelector();
  if (name == "fedprof") {
    FedProfOptions o;
    o.alpha = options.fedprof.alpha;
    o.with_replacement = options.fedprof.sampling == "with_replacement";
    if (options.fedprof.secure_matching == "paillier") {
      o.secure_key_bits = static_cast<int>(options.fedprof.paillier_bits);
    }
    if (options.dp.mode != "off") o.poisson_cap = DpSampleRate(DpOptionsFrom(options));
    return std::make_unique<FedProfSelector>(o, context.num_clients, context.reference_profile,
                                             context.observer);
  }
  if (name == "afl") {
    AflOptions o;
    o.drop_share = options.afl.drop_share;
    o.temperature = options.afl.temperature;
    o.random_share = options.afl.random_share;
    return std::make_unique<AflSelector>(o, context.num_clients);
  }
  if (name == "oort") {
    const RunOptions::Oort& oo = options.oort;
    OortOptions o;
    o.exploration = oo.exploration;
    o.exploration_decay = oo.exploration_decay;
    o.exploration_min = oo.exploration_min;
    o.cut_off = oo.cut_off;
    o.penalty = oo.penalty;
    o.duration_percentile = oo.duration_percentile;
    o.pacer_window = static_cast<int>(oo.pacer_window);
    o.pacer_step = oo.pacer_step;
    o.clip_quantile = oo.clip_quantile;
    return std::make_unique<OortSelector>(o, context.num_clients);
  }
  if (name == "clustered") {
    ClusteredOptions o;
    o.sketch_dim = static_cast<int>(options.clustered.sketch_dim);
    return std::make_unique<ClusteredSelector>(o, context.num_clients);
  }
  if (const SelectorFactory factory = RegisteredSelector(name)) return factory(options, context);
  throw Error("strategy.selector: unknown selector '" + name + "'");
}

constexpr const char* kAggregators =
    "average|fedadam|fedbn|fedbuff|median|trimmed_mean|krum|multi_krum|bulyan|centered_clipping|fltrust|flame|zeno|root";

// Krum's options, checked against the clients a round asks for (K, as
// Server::ClientsPerRound): a round with fewer results (refusals, time-outs,
// a deployment's absences) lowers f itself (robust.h).
KrumOptions MakeKrumOptions(const std::string& name, const RunOptions& options) {
  KrumOptions o;
  const int64_t k = options.clients_per_round();
  if (options.robust.byzantine.has_value()) {
    o.byzantine = static_cast<int>(*options.robust.byzantine);
    if (k <= 2 * int64_t{o.byzantine} + 2) {
      throw Error("robust.byzantine: " + name + " with f = " + std::to_string(o.byzantine) +
                  " needs more than 2f + 2 = " + std::to_string(2 * o.byzantine + 2) +
                  " clients per round, and strategy.fraction x clients.count gives " +
                  std::to_string(k));
    }
  }
  o.select = name == "krum" ? 1 : static_cast<int>(options.robust.multi_krum_select);
  if (o.select > k) {
    throw Error("robust.multi_krum_select: " + std::to_string(o.select) + " models of " +
                std::to_string(k) + " clients per round (strategy.fraction x clients.count)");
  }
  return o;
}

// The stages every robust rule composes with (robust.h), refused in one
// line with an aggregator that sums the models as they arrive.
RobustStages MakeRobustStages(const std::string& name, const RunOptions& options,
                              const StrategyContext& context) {
  const RunOptions::Robust& r = options.robust;
  RobustStages stages;
  if (r.fallback != "none" && r.fallback != "root") {
    throw Error("robust.fallback: '" + r.fallback + "' is not one of none|root");
  }
  stages.fallback = r.fallback == "root";
  stages.root_update = context.root_update;
  stages.validation_loss = context.validation_loss;
  if (stages.fallback && (!stages.root_update || !stages.validation_loss)) {
    throw Error("robust.fallback: root needs the server's root and validation data, which this run has not "
                "set up");
  }
  if (r.pre_aggregation == "bucketing") {
    stages.pre = PreAggregation::kBucketing;
  } else if (r.pre_aggregation == "nnm") {
    stages.pre = PreAggregation::kMixing;
  } else if (r.pre_aggregation != "none") {
    throw Error("robust.pre_aggregation: '" + r.pre_aggregation + "' is not one of none|bucketing|nnm");
  }
  stages.bucket_size = static_cast<int>(r.bucket_size);
  stages.mixing_byzantine = r.byzantine.has_value() ? static_cast<int>(*r.byzantine) : -1;
  stages.momentum = r.momentum;
  stages.seed = static_cast<uint64_t>(options.seed);
  static constexpr const char* kRobust[] = {"median", "trimmed_mean",      "krum",    "multi_krum",
                                             "bulyan", "centered_clipping", "fltrust", "flame", "zeno", "root"};
  if (stages.active() && std::find(std::begin(kRobust), std::end(kRobust), name) == std::end(kRobust)) {
    std::string robust;
    for (const char* rule : kRobust) robust += (robust.empty() ? "" : ", ") + std::string(rule);
    throw Error(std::string(stages.pre != PreAggregation::kNone ? "robust.pre_aggregation"
                            : stages.fallback                   ? "robust.fallback"
                                                                : "robust.momentum") +
                ": composes with a robust aggregator (" + robust + "), not strategy.aggregator = " + name);
  }
  // The server alone reads no client's model: mixing them or falling back
  // from its own step to itself would change nothing while seeming to.
  if (name == "root" && (stages.pre != PreAggregation::kNone || stages.fallback)) {
    throw Error(std::string(stages.fallback ? "robust.fallback" : "robust.pre_aggregation") +
                ": strategy.aggregator = root is the server's own step and reads no client's model; "
                "leave it at none");
  }
  return stages;
}

std::unique_ptr<Aggregator> MakeAggregator(const std::string& name, AggregationMode mode,
                                           const RunOptions& options, const StrategyContext& context) {
  const RobustStages stages = MakeRobustStages(name, options, context);
  if (name == "average" || name == "fedbn") return MakeWeightedAverage(mode);
  if (name == "fedadam") {
    FedAdamOptions o;
    o.server_lr = options.fedadam.server_lr;
    o.beta1 = options.fedadam.beta1;
    o.beta2 = options.fedadam.beta2;
    o.tau = options.fedadam.tau;
    return MakeFedAdam(mode, o);
  }
  if (name == "fedbuff") {
    const int64_t k = options.clients_per_round();
    FedBuffOptions o;
    o.concurrency = static_cast<int>(options.fedbuff.concurrency > 0 ? options.fedbuff.concurrency : k);
    o.buffer = static_cast<int>(options.fedbuff.buffer > 0 ? options.fedbuff.buffer : o.concurrency);
    o.server_lr = options.fedbuff.server_lr;
    o.staleness_exponent = options.fedbuff.staleness_exponent;
    o.refill = options.fedbuff.refill == "step" ? FedBuffOptions::Refill::kOnStep
                                                : FedBuffOptions::Refill::kOnArrival;
    return MakeFedBuff(mode, o);
  }
  if (name == "median") return MakeCoordinateMedian(mode, stages);
  if (name == "trimmed_mean") return MakeTrimmedMean(mode, options.robust.trim_share, stages);
  if (name == "krum" || name == "multi_krum") return MakeKrum(mode, MakeKrumOptions(name, options), stages);
  if (name == "bulyan") {
    return MakeBulyan(
        mode, options.robust.byzantine.has_value() ? static_cast<int>(*options.robust.byzantine) : -1,
        stages);
  }
  if (name == "centered_clipping") {
    CenteredClippingOptions o;
    o.radius = options.robust.cc_radius;
    o.iterations = static_cast<int>(options.robust.cc_iterations);
    if (options.robust.cc_start != "zero" && options.robust.cc_start != "last") {
      throw Error("robust.cc_start: '" + options.robust.cc_start + "' is not one of zero|last");
    }
    o.from_last = options.robust.cc_start == "last";
    return MakeCenteredClipping(mode, o, stages);
  }
  if (name == "fltrust") {
    if (!context.root_update) {
      throw Error(
          "strategy.aggregator: fltrust needs the server's root data set, which this run has not set up");
    }
    const std::string& scale = options.robust.fltrust_scale;
    if (scale != "root" && scale != "median") {
      throw Error("robust.fltrust_scale: '" + scale + "' is not one of root|median");
    }
    return MakeFlTrust(mode, context.root_update,
                       scale == "median" ? FlTrustScale::kMedian : FlTrustScale::kRoot, stages);
  }
  if (name == "flame") {
    FlameOptions o;
    o.noise_factor = options.robust.flame_noise;
    return MakeFlame(mode, o, stages);
  }
  if (name == "root") {
    if (!context.root_update) {
      throw Error("strategy.aggregator: root needs the server's root data set, which this run has not set up");
    }
    return MakeRootOnly(mode, stages);
  }
  if (name == "zeno") {
    if (!context.validation_loss) {
      throw Error("strategy.aggregator: zeno needs the server's validation data, which this run has not "
                  "set up");
    }
    ZenoOptions o;
    o.byzantine = options.robust.byzantine.has_value() ? static_cast<int>(*options.robust.byzantine) : -1;
    const int64_t k = options.clients_per_round();
    if (o.byzantine >= k) {
      throw Error("robust.byzantine: zeno with b = " + std::to_string(o.byzantine) + " would leave out all " +
                  std::to_string(k) + " clients of a round (strategy.fraction x clients.count); b < " +
                  std::to_string(k));
    }
    o.rho = options.robust.zeno_rho;
    return MakeZeno(mode, o, stages);
  }
  if (const AggregatorFactory factory = RegisteredAggregator(name)) return factory(mode, options);
  throw Error("strategy.aggregator: unknown aggregator '" + name + "'; expected " + kAggregators);
}

UpdateNormBound MakeUpdateNormBound(const RunOptions& options) {
  UpdateNormBound bound;
  bound.max_ratio = options.robust.max_update_norm;
  const std::string& action = options.robust.norm_action;
  if (action == "clip") {
    bound.action = NormAction::kClip;
  } else if (action == "refuse") {
    bound.action = NormAction::kRefuse;
  } else {
    throw Error("robust.norm_action: '" + action + "' is not one of clip|refuse");
  }
  return bound;
}

}  // namespace

Strategy::Strategy(std::string name, std::unique_ptr<Selector> selector,
                   std::unique_ptr<Aggregator> aggregator)
    : name_(std::move(name)), selector_(std::move(selector)), aggregator_(std::move(aggregator)) {
  if (!selector_ || !aggregator_)
    throw Error("strategy " + name_ + ": needs a selector and an aggregator");
  dp_ = dynamic_cast<DpFedAvg*>(aggregator_.get());
}

std::string Strategy::BoundUpdate(const FlatParams& global, FitResult* result) const {
  if (dp_) {
    const double norm = UpdateNorm(global, result->params);
    if (!(norm <= dp_->ClipNorm())) {
      return "update norm " + FormatDouble(norm) + " exceeds the round's clip norm " +
             FormatDouble(dp_->ClipNorm()) + ", which the client must apply (dp.mode = central)";
    }
  }
  return ApplyUpdateNormBound(norm_bound_, global, result->num_samples, &result->params);
}

std::string Strategy::SaveState() const {
  if (algorithm_) {
    nlohmann::json j = {{"algorithm", algorithm_->SaveState()}, {"strategy", PartsState()}};
    return j.dump();
  }
  return PartsState();
}

void Strategy::LoadState(const std::string& state) {
  if (!algorithm_) {
    LoadPartsState(state);
    return;
  }
  std::string parts;
  try {
    const nlohmann::json j = nlohmann::json::parse(state);
    algorithm_->LoadState(j.at("algorithm").get<std::string>());
    parts = j.at("strategy").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: client algorithm state: ") + e.what());
  }
  LoadPartsState(parts);
}

std::string Strategy::PartsState() const {
  if (!selector_->KeepsState()) return aggregator_->SaveState();
  // One JSON object; its keys are sorted, so the text does not depend on
  // who added what first.
  nlohmann::json j = nlohmann::json::parse(selector_->SaveState());
  j["aggregator"] = aggregator_->SaveState();
  return j.dump();
}

void Strategy::LoadPartsState(const std::string& state) {
  if (!selector_->KeepsState()) {
    aggregator_->LoadState(state);
    return;
  }
  std::string aggregator_state;
  try {
    aggregator_state = nlohmann::json::parse(state).at("aggregator").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("checkpoint: strategy state: ") + e.what());
  }
  selector_->LoadState(state);
  aggregator_->LoadState(aggregator_state);
}

Strategy::Evaluation Strategy::AggregateEvaluate(
    int64_t round, const std::vector<ClientEvaluation>& evaluations) const {
  Evaluation e;
  e.clients = static_cast<int>(evaluations.size());
  if (aggregator_->AggregateEvaluations(round, evaluations, &e.accuracy, &e.loss)) return e;
  int64_t samples = 0, correct = 0;
  ExactSum loss;
  for (const ClientEvaluation& c : evaluations) {
    samples += c.samples;
    correct += c.correct;
    loss.Add(c.loss * static_cast<double>(c.samples));
  }
  if (samples > 0) {
    e.accuracy = static_cast<double>(correct) / static_cast<double>(samples);
    e.loss = loss.value() / static_cast<double>(samples);
  }
  return e;
}

AggregationMode ParseAggregationMode(const std::string& name) {
  if (name == "full") return AggregationMode::kFull;
  if (name == "partial") return AggregationMode::kPartial;
  throw Error("strategy.aggregation: '" + name + "' is not one of full|partial");
}

std::string StrategySpec::Label() const {
  if (!overridden) return preset;
  return selector + "+" + aggregator + (proximal_mu > 0 ? "+prox" : "") +
         (algorithm.empty() ? "" : "+" + algorithm);
}

StrategySpec ResolveStrategy(const RunOptions& options) {
  const Preset& preset = FindPreset(options.strategy.name);
  StrategySpec spec;
  spec.preset = preset.name;
  spec.selector = preset.selector;
  spec.aggregator = preset.aggregator;
  spec.mode = preset.always_partial
                  ? AggregationMode::kPartial
                  : ParseAggregationMode(options.strategy.aggregation);
  spec.proximal_mu = preset.prox ? options.fedprox.mu : 0.0;
  spec.algorithm = preset.algorithm;
  const StrategySpec as_preset = spec;
  if (!options.strategy.selector.empty())
    spec.selector = options.strategy.selector;
  if (!options.strategy.aggregator.empty()) {
    spec.aggregator = options.strategy.aggregator;
  }
  if (options.train.proximal_mu.has_value())
    spec.proximal_mu = *options.train.proximal_mu;
  if (!options.strategy.algorithm.empty()) {
    spec.algorithm = options.strategy.algorithm == "none" ? "" : options.strategy.algorithm;
  }
  // A client algorithm's step is over the round's participants.
  if (!spec.algorithm.empty()) spec.mode = AggregationMode::kPartial;
  spec.overridden = spec.selector != as_preset.selector ||
                    spec.aggregator != as_preset.aggregator ||
                    spec.proximal_mu != as_preset.proximal_mu || spec.algorithm != as_preset.algorithm;
  return spec;
}

namespace {

// User-level DP (dp.mode = central or distributed): uniform selection becomes Poisson
// sampling at q = K/N, which the accountant's amplification assumes, and
// the aggregator is wrapped by DP-FedAvg. What cannot run under it is
// refused in one line.
std::unique_ptr<Strategy> MakeDpStrategy(const RunOptions& options, const StrategySpec& spec,
                                         const StrategyContext& context) {
  const std::string option = "dp.mode = " + options.dp.mode + ": ";
  if (spec.selector != "uniform" && spec.selector != "fedprof") {
    throw Error(option + "strategy.selector = " + spec.selector +
                " picks clients by what they report, "
                "but the privacy accounting needs Poisson sampling at a known rate (uniform, or fedprof's "
                "capped by dp.max_inclusion)");
  }
  if (spec.selector == "fedprof" && options.fedprof.secure_matching != "paillier" &&
      !options.dp.clear_profiles) {
    throw Error(
        option +
        "FedProf would have every client send its profile in the clear; use "
        "fedprof.secure_matching = paillier (the server learns each divergence, outside the guarantee), "
        "or dp.clear_profiles = true to accept that");
  }
  if (spec.aggregator != "average" && spec.aggregator != "fedadam") {
    throw Error(option + "strategy.aggregator = " + spec.aggregator +
                " weighs or keeps individual "
                "models; DP-FedAvg noises the sum of clipped updates, with average or fedadam on top");
  }
  DpFedAvgOptions o = DpOptionsFrom(options);
  if (o.noise.kind == NoiseKind::kKeyed) o.noise.key = ReadNoiseKey(ServerNoiseKeyPath(KeyDir(options.dp)));
  auto dp = std::make_unique<DpFedAvg>(
      MakeAggregator(spec.aggregator, AggregationMode::kPartial, options, context), o);
  std::unique_ptr<Selector> selector = spec.selector == "uniform"
                                           ? MakePoissonSelector(DpSampleRate(o))
                                           : MakeSelector(spec.selector, options, context);
  return std::make_unique<Strategy>(spec.Label() + "+dp", std::move(selector), std::move(dp));
}

}  // namespace

ClientReads StrategyReads(const RunOptions& options) {
  // The selector alone says it; one without its Paillier key (which it would
  // make at once) reads the same.
  RunOptions probe = options;
  probe.fedprof.secure_matching = "none";
  StrategyContext context;
  context.num_clients = static_cast<int>(options.clients.count);
  const std::unique_ptr<Selector> selector = MakeSelector(ResolveStrategy(options).selector, probe, context);
  ClientReads reads;
  reads.profile = selector->WantedReports().profile;
  reads.loss = selector->WantedReports().loss;
  reads.train_loss = selector->NeedsTrainingLoss();
  reads.sketch_dim = selector->SketchDim();
  reads.evaluate = options.eval.federated_every > 0;
  return reads;
}

DpFedAvgOptions DpOptionsFrom(const RunOptions& options) {
  DpFedAvgOptions o;
  o.noise_multiplier = options.dp.noise_multiplier;
  o.clip_norm = options.dp.clip_norm;
  o.adaptive = options.dp.clipping == "adaptive";
  o.target_quantile = options.dp.target_quantile;
  o.clip_lr = options.dp.clip_lr;
  o.count_noise = options.dp.count_noise;
  o.num_clients = options.clients.count;
  o.expected_clients = options.clients_per_round();
  // FedProf samples by score, each client at most at dp.max_inclusion
  // (2K/N by default): the rate the ledger charges.
  if (ResolveStrategy(options).selector == "fedprof") {
    const double cap = options.dp.max_inclusion > 0 ? options.dp.max_inclusion
                                                    : 2.0 * static_cast<double>(o.expected_clients) /
                                                          static_cast<double>(o.num_clients);
    o.sample_rate = std::min(1.0, cap);
  }
  o.delta = options.dp.delta;
  o.target_epsilon = options.dp.target_epsilon;
  o.seed = static_cast<uint64_t>(options.seed);
  o.noise.kind = ParseNoiseKind(options.dp.noise);
  o.distributed = options.dp.mode == "distributed";
  o.bits = static_cast<int>(options.dp.bits);
  o.rounding_beta = options.dp.rounding_beta;
  if (o.distributed) {
    const SecureAggregationOptions secure = SecureAggregationFrom(options);
    const auto invited = [](int64_t selected) {
      return static_cast<int>(std::min<int64_t>(selected, INT32_MAX));
    };
    o.fewest_in_sum = [secure, invited](int64_t selected) -> int64_t {
      return FewestInSum(secure, invited(selected));
    };
    o.fewest_honest_in_sum = [secure, invited](int64_t selected) -> int64_t {
      return FewestHonestInSum(secure, invited(selected));
    };
  }
  return o;
}

std::string KeyDir(const RunOptions::Dp& dp) {
  if (dp.key_dir.empty()) {
    throw Error(
        "dp.noise = keyed: dp.key_dir names no directory of keys (fedprof keygen makes them; a "
        "deployment reads them from its --tls-dir)");
  }
  return dp.key_dir;
}

namespace {

// What a client algorithm does not compose with, refused in one line, from
// what its server half reads (algorithms/algorithm.h): DP clips and noises
// the models only, secure aggregation gives the sum only, and a step over
// the average needs the average.
void CheckAlgorithmComposes(const RunOptions& options, const StrategySpec& spec) {
  const AlgorithmName* a = FindAlgorithm(spec.algorithm);
  if (spec.algorithm.empty() || a == nullptr || a->reads == ServerReads::kNothing) return;
  const std::string option = "strategy.algorithm = " + spec.algorithm + ": ";
  if (a->assumes_average && spec.aggregator != "average" && spec.aggregator != "fedbn") {
    throw Error(option + "its server step assumes the average of the clients' models; strategy.aggregator = " +
                spec.aggregator + " does not compose with it (use average, or fedbn)");
  }
  if (spec.aggregator == "fedbuff") {
    throw Error(option + "strategy.aggregator = fedbuff steps as results come, its server half a round at a time");
  }
  if (options.dp.mode != "off") {
    throw Error(option + "user-level DP (dp.mode = " + options.dp.mode +
                ") clips and noises the models, not what the algorithm sends beside them");
  }
  if (options.secagg.protocol != "none" && a->reads == ServerReads::kEach) {
    std::string sums;
    for (const AlgorithmName& b : kAlgorithmNames) {
      if (b.reads == ServerReads::kSum) sums += std::string(sums.empty() ? "" : ", ") + b.name;
    }
    throw Error(option + "secure aggregation (secagg.protocol = " + options.secagg.protocol + ") hides each " +
                "client's " + a->each_read + ", which its server half needs; only " + sums +
                ", which needs the sum alone, composes with it");
  }
}

}  // namespace

std::unique_ptr<Strategy> MakeStrategy(const RunOptions& options, const StrategyContext& context) {
  const StrategySpec spec = ResolveStrategy(options);
  CheckAlgorithmComposes(options, spec);
  auto strategy =
      options.dp.mode != "off"
          ? MakeDpStrategy(options, spec, context)
          : std::make_unique<Strategy>(spec.Label(), MakeSelector(spec.selector, options, context),
                                       MakeAggregator(spec.aggregator, spec.mode, options, context));
  strategy->SetProximalMu(spec.proximal_mu);
  strategy->SetKeepsLocalBatchNorm(spec.aggregator == "fedbn");
  LocalObjective algorithm;
  SetAlgorithmOptions(options, spec.algorithm, &algorithm);
  strategy->SetAlgorithmObjective(algorithm);
  strategy->SetUpdateNormBound(MakeUpdateNormBound(options));
  return strategy;
}

}  // namespace fedprof
