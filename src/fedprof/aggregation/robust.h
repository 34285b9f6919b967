#ifndef FEDPROF_AGGREGATION_ROBUST_H_
#define FEDPROF_AGGREGATION_ROBUST_H_

// Aggregation that tolerates model poisoning by authenticated clients: rules
// that bound what a minority of arbitrary (Byzantine) models can do to the
// next global model, and a bound on each update's norm. The rules need the
// individual models (Aggregator::NeedsUpdates), so they cannot run on a sum
// such as secure aggregation reveals. docs/robustness.md says what each one
// defends against and where it fails.
//
// Every rule is unweighted: a client's sample count is its own claim, and
// weighting by it would let one client claim the whole federation. The
// estimate ŵ replaces the weighted average avg_S in both modes:
//   partial: θ' = ŵ;
//   full:    θ' = θ + min(1, n_S/|D|) (ŵ − θ), n_S = Σ n_k over the round's
//            accepted results (as FedAvg's θ + (n_S/|D|)(avg_S − θ)).
// Results depend only on the set of updates: they are put in a canonical
// order (client id, then sample count, then values) and every sum runs in a
// fixed order, so neither arrival order nor thread count changes a bit.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/core/rng.h"

namespace fedprof {

// What every robust rule can be composed with (robust.pre_aggregation,
// robust.momentum, robust.cc_start), around its estimate ŵ:
//   1. pre-aggregation of the round's n updates, in canonical order:
//      bucketing (Karimireddy, He and Jaggi, "Byzantine-Robust Learning on
//      Heterogeneous Datasets via Bucketing", ICLR 2022, Alg. 1): a random
//      permutation (from the seed and the model version) cut into ⌈n/s⌉
//      buckets of s, each replaced by its mean; nearest-neighbour mixing
//      (Allouah et al., "Fixing by Mixing", AISTATS 2023, Alg. 1): each
//      model replaced by the mean of its n − f nearest models (itself
//      included), f = `mixing_byzantine` (-1 = ⌊(n − 1)/2⌋);
//   2. the rule's ŵ from what stage 1 gives;
//   3. the fallback to the server's own step (`fallback`): ŵ is replaced by
//      the server's root update w_0 when w_0 has the lower loss on the
//      server's validation data (ties keep ŵ);
//   4. the aggregation mode's step Δ = θ' − θ (StepTowards), then server
//      momentum: m ← β m + (1 − β) Δ, θ' = θ + m (β = `momentum`; m is the
//      step of the last round that had results, 0 at first).
enum class PreAggregation { kNone, kBucketing, kMixing };
// Tags of Stream::kRobust: each use draws from its own generator, keyed by
// the model version.
constexpr uint64_t kBucketingTag = 0;
constexpr uint64_t kFlameNoiseTag = 1;
constexpr uint64_t kValidationBatchTag = 2;  // the validation batch (run/plan.cc)
// What the server's own data gives the rules and stages that use it: its
// root update w_0 for θ of a version (FLTrust, the fallback; the round that
// starts from version v is round v + 1), and its validation loss L_V of a
// model for the round that starts from a version (Zeno, the fallback).
using RootUpdate = std::function<FlatParams(const FlatParams& global, int64_t version)>;
using ValidationLoss = std::function<double(const FlatParams& model, int64_t version)>;
struct RobustStages {
  PreAggregation pre = PreAggregation::kNone;
  int bucket_size = 2;        // s
  int mixing_byzantine = -1;  // f of mixing
  bool fallback = false;      // stage 3; needs root_update and validation_loss
  double momentum = 0;        // β in [0, 1)
  uint64_t seed = 0;          // bucketing's permutation, FLAME's noise
  RootUpdate root_update;
  ValidationLoss validation_loss;
  bool active() const { return pre != PreAggregation::kNone || fallback || momentum > 0; }
};

// Coordinate-wise median (Yin et al., "Byzantine-Robust Distributed
// Learning: Towards Optimal Statistical Rates", ICML 2018, Option I): per
// coordinate the middle value, the mean of the two middle ones for an even
// count.
std::unique_ptr<Aggregator> MakeCoordinateMedian(AggregationMode mode, const RobustStages& stages = {});

// Coordinate-wise β-trimmed mean (Yin et al. 2018, Option II): per
// coordinate, drop the ⌊β n⌋ largest and ⌊β n⌋ smallest values and average
// the rest. 0 <= β < 0.5 (β = 0 is the unweighted mean).
std::unique_ptr<Aggregator> MakeTrimmedMean(AggregationMode mode, double trim_share,
                                            const RobustStages& stages = {});

// Krum and Multi-Krum (Blanchard et al., "Machine Learning with Adversaries:
// Byzantine Tolerant Gradient Descent", NeurIPS 2017, Sec. 4). Each model's
// score is the sum of its squared distances to its n − f − 2 nearest other
// models; Krum takes the lowest-scoring model, Multi-Krum the mean of the m
// lowest. The guarantee needs n > 2f + 2.
struct KrumOptions {
  // f, the Byzantine models tolerated per round; -1 = the most a round of n
  // results allows, ⌊(n − 3)/2⌋. A round with too few results for a given
  // f (refusals, time-outs) runs with that most instead, and says so.
  int byzantine = -1;
  // m: 1 = Krum; 0 = n − f (every model the bound does not rule out).
  int select = 1;
};
std::unique_ptr<Aggregator> MakeKrum(AggregationMode mode, const KrumOptions& options,
                                     const RobustStages& stages = {});

// Bulyan (El Mhamdi et al., "The Hidden Vulnerability of Distributed
// Learning in Byzantium", ICML 2018, Alg. 1): Krum picks θ = n − 2f models
// one at a time (each pick leaves the set), then per coordinate the
// β = θ − 2f values closest to the coordinate's median of those θ are
// averaged. The guarantee needs n >= 4f + 3; f as for Krum, its most being
// ⌊(n − 3)/4⌋.
std::unique_ptr<Aggregator> MakeBulyan(AggregationMode mode, int byzantine,
                                       const RobustStages& stages = {});

// Centered clipping (Karimireddy et al., "Learning from History for
// Byzantine Robust Optimization", ICML 2021, Eq. 2): from v_0, over the
// updates Δ_k = w_k − θ, `iterations` times
//   v ← v + (1/n) Σ_k (Δ_k − v) min(1, τ / ||Δ_k − v||),
// and ŵ = θ + v. τ = `radius`; 0 = the median of ||Δ_k − v|| at each
// iteration (no scale to tune; a choice of this project). v_0 = 0, or with
// `from_last` the global model's last step (the paper's Alg. 2 starts from
// the last aggregate; with robust.momentum that step is the momentum).
struct CenteredClippingOptions {
  double radius = 0;
  int iterations = 1;  // the paper's l = 1 suffices (Sec. 4)
  bool from_last = false;
};
std::unique_ptr<Aggregator> MakeCenteredClipping(AggregationMode mode,
                                                 const CenteredClippingOptions& options,
                                                 const RobustStages& stages = {});

// FLTrust (Cao et al., "FLTrust: Byzantine-robust Federated Learning via
// Trust Bootstrapping", NDSS 2021, Eqs. 2-4 and Alg. 2): the server trains
// θ on its own small root data set to w_0, g_0 = w_0 − θ; each client's
// update g_k = w_k − θ gets trust TS_k = ReLU(cos(g_k, g_0)) and is
// rescaled to a norm c; ŵ = θ + Σ TS_k (c / ||g_k||) g_k / Σ TS_k (θ itself
// when no update earns trust). c = ||g_0|| (the paper's Eq. 3), or with
// kMedian the median of the round's ||g_k||: the clients' own scale, which
// fewer than half of them cannot raise or lower past an honest one's, where
// ||g_0|| is one step on the server's data. `root_update` gives w_0 for θ
// of a version (the round it starts being that version + 1).
enum class FlTrustScale { kRoot, kMedian };
std::unique_ptr<Aggregator> MakeFlTrust(AggregationMode mode, RootUpdate root_update,
                                        FlTrustScale scale = FlTrustScale::kRoot,
                                        const RobustStages& stages = {});

// The server alone: ŵ = w_0, its own root update (`stages.root_update`),
// whatever the clients send. Not a defence but the reference point of every
// rule that uses the server's data (FLTrust, Zeno, the fallback): what its
// root set gives without the federation.
std::unique_ptr<Aggregator> MakeRootOnly(AggregationMode mode, const RobustStages& stages);

// FLAME (Nguyen et al., "FLAME: Taming Backdoors in Federated Learning",
// USENIX Security 2022, Alg. 1), on the updates Δ_k = w_k − θ:
//   1. clustering: HDBSCAN on the cosine distances 1 − cos(Δ_i, Δ_j) with a
//      minimum cluster size of ⌊n/2⌋ + 1 and min_samples = 1 (single
//      linkage), one cluster allowed; with a minimum over half of n that
//      cluster is the first single-linkage component to reach ⌊n/2⌋ + 1
//      models (edges joined in increasing distance), and the rest are
//      outliers, left out;
//   2. clipping: S = the median of ||Δ_k|| over all n; each admitted Δ_k
//      scaled by min(1, S / ||Δ_k||);
//   3. ŵ = θ + their mean + N(0, (λS)²) per coordinate, λ = `noise_factor`
//      (the paper's 0.001 for image classification), drawn from the seed
//      and the model version.
struct FlameOptions {
  double noise_factor = 0.001;
};
std::unique_ptr<Aggregator> MakeFlame(AggregationMode mode, const FlameOptions& options,
                                      const RobustStages& stages = {});

// Zeno (Xie, Koyejo and Gupta, "Zeno: Distributed Stochastic Gradient
// Descent with Suspicion-based Fault-tolerance", ICML 2019, Def. 1 and
// Alg. 1), on model updates: each model w_k = θ + Δ_k gets the stochastic
// descendant score
//   Score_k = L_V(θ) − L_V(w_k) − ρ ||Δ_k||²
// (the paper's f_r(x) − f_r(x − γu) − ρ||u||² with the step γu = −Δ_k), L_V
// the server's loss on a validation batch drawn from its reference set D_V
// for the round; ŵ = θ + the mean of the n − b highest-scoring Δ_k. b =
// `byzantine` (-1 = ⌊n/2⌋). It keeps out up to b attackers whose models
// score below the honest ones kept, whatever their distances: it needs no
// agreement among honest models, only that an update which lowers the
// server's loss is worth keeping. D_V judges, it does not train.
struct ZenoOptions {
  int byzantine = -1;  // b
  double rho = 0;      // ρ, per squared unit of ||Δ_k||
};
// L_V is `stages.validation_loss`.
std::unique_ptr<Aggregator> MakeZeno(AggregationMode mode, const ZenoOptions& options,
                                     const RobustStages& stages);

// The pieces, for tests and reuse. `updates` in the canonical order
// (CanonicalOrder); every model of the size of the first.
std::vector<const ClientUpdate*> CanonicalOrder(const std::vector<ClientUpdate>& updates);
FlatParams CoordinateMedian(const std::vector<const ClientUpdate*>& updates);
FlatParams TrimmedMean(const std::vector<const ClientUpdate*>& updates, double trim_share);
// The f a round of n results runs with: the requested one (-1 = the most),
// lowered to ⌊(n − 3)/2⌋ when n <= 2f + 2 (0 below 3 results).
int EffectiveByzantine(int requested, size_t n);
// Krum's score of each model for f Byzantine ones (f as EffectiveByzantine
// gives it), in the order of `updates`.
std::vector<double> KrumScores(const std::vector<const ClientUpdate*>& updates, int byzantine);
// Positions (in `updates`) of the m lowest-scoring models, lowest first; a
// tie goes to the earlier position, i.e. the lower client id.
std::vector<size_t> KrumSelection(const std::vector<const ClientUpdate*>& updates, int byzantine,
                                  size_t select);

// The most f that Bulyan's n >= 4f + 3 allows for n models, or `requested`
// when lower (-1 = the most).
int BulyanByzantine(int requested, size_t n);
FlatParams Bulyan(const std::vector<const ClientUpdate*>& updates, int byzantine);
// `start` = v_0 (null: 0).
FlatParams CenteredClipping(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                            const CenteredClippingOptions& options,
                            const std::vector<double>* start = nullptr);
// FLTrust's ŵ and each update's trust score TS_k (in the order of
// `updates`) against the root update w_0.
FlatParams FlTrust(const FlatParams& global, const FlatParams& root,
                   const std::vector<const ClientUpdate*>& updates, std::vector<double>* trust = nullptr,
                   FlTrustScale scale = FlTrustScale::kRoot);
// FLAME's ŵ; `admitted` (in the order of `updates`) says which models the
// clustering kept; `noise` the Gaussian draws (null: none, for tests).
FlatParams Flame(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                 double noise_factor, Rng* noise, std::vector<char>* admitted = nullptr);
// The mean of the models at `positions` of `updates`, summed in canonical
// order whatever order a ranking gave the positions (Multi-Krum, Zeno).
FlatParams MeanOf(const std::vector<const ClientUpdate*>& updates, std::vector<size_t> positions);
// Zeno's b for n models: `requested` (-1 = ⌊n/2⌋), at most n − 1.
int ZenoByzantine(int requested, size_t n);
// Zeno's scores (in the order of `updates`) from L_V(θ) and each L_V(w_k).
std::vector<double> ZenoScores(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                               double global_loss, const std::vector<double>& losses, double rho);
// Zeno's ŵ from the scores: the mean of the `keep` highest-scoring models
// (ties to the earlier position), summed in canonical order.
FlatParams Zeno(const std::vector<const ClientUpdate*>& updates, const std::vector<double>& scores,
                size_t keep);
// Which of n points single linkage joins first into a component of at
// least `size` (FLAME's cluster), from their symmetric distances
// (row-major n × n); ties join the lower indices first.
std::vector<char> FirstComponentOfSize(const std::vector<double>& distances, size_t n, size_t size);

// The pre-aggregation stages (RobustStages), on updates in canonical order.
// Bucket j has client id j and the bucket's summed sample counts; a mixed
// model keeps its client's id and count.
std::vector<ClientUpdate> Bucketing(const std::vector<const ClientUpdate*>& updates, int bucket_size,
                                    Rng& rng);
std::vector<ClientUpdate> NearestNeighbourMixing(const std::vector<const ClientUpdate*>& updates,
                                                 int byzantine);
// The f mixing uses for n models: `requested`, or ⌊(n − 1)/2⌋ when -1 or
// more than that.
int MixingByzantine(int requested, size_t n);

// A bound on each result's update relative to the global model θ, applied
// by the server before a result is observed or aggregated, with any
// aggregator: ||w_k − θ|| <= max_ratio ||θ|| (||θ|| read as 1 when θ = 0).
// It stops boosted (scaled) updates; it cannot see small crafted ones.
enum class NormAction {
  kClip,    // w_k ← θ + (bound / ||w_k − θ||)(w_k − θ): direction kept
  kRefuse,  // the result is refused like any invalid one
};
struct UpdateNormBound {
  double max_ratio = 0;  // 0 = no bound
  NormAction action = NormAction::kClip;
};
// Applies `bound` to a result's model `params` against `global`: "" when it
// is within the bound or was clipped onto it (then `params` is changed),
// else why it is refused (naming the ratio and robust.max_update_norm).
// `num_samples` is the result's weight, for the range ModelSum needs.
std::string ApplyUpdateNormBound(const UpdateNormBound& bound, const FlatParams& global,
                                 int64_t num_samples, FlatParams* params);

}  // namespace fedprof

#endif  // FEDPROF_AGGREGATION_ROBUST_H_
