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

namespace fedprof {

// Coordinate-wise median (Yin et al., "Byzantine-Robust Distributed
// Learning: Towards Optimal Statistical Rates", ICML 2018, Option I): per
// coordinate the middle value, the mean of the two middle ones for an even
// count.
std::unique_ptr<Aggregator> MakeCoordinateMedian(AggregationMode mode);

// Coordinate-wise β-trimmed mean (Yin et al. 2018, Option II): per
// coordinate, drop the ⌊β n⌋ largest and ⌊β n⌋ smallest values and average
// the rest. 0 <= β < 0.5 (β = 0 is the unweighted mean).
std::unique_ptr<Aggregator> MakeTrimmedMean(AggregationMode mode, double trim_share);

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
std::unique_ptr<Aggregator> MakeKrum(AggregationMode mode, const KrumOptions& options);

// Bulyan (El Mhamdi et al., "The Hidden Vulnerability of Distributed
// Learning in Byzantium", ICML 2018, Alg. 1): Krum picks θ = n − 2f models
// one at a time (each pick leaves the set), then per coordinate the
// β = θ − 2f values closest to the coordinate's median of those θ are
// averaged. The guarantee needs n >= 4f + 3; f as for Krum, its most being
// ⌊(n − 3)/4⌋.
std::unique_ptr<Aggregator> MakeBulyan(AggregationMode mode, int byzantine);

// Centered clipping (Karimireddy et al., "Learning from History for
// Byzantine Robust Optimization", ICML 2021, Eq. 2): from v_0 = 0, over the
// updates Δ_k = w_k − θ, `iterations` times
//   v ← v + (1/n) Σ_k (Δ_k − v) min(1, τ / ||Δ_k − v||),
// and ŵ = θ + v. τ = `radius`; 0 = the median of ||Δ_k − v|| at each
// iteration (no scale to tune; a choice of this project).
struct CenteredClippingOptions {
  double radius = 0;
  int iterations = 1;  // the paper's l = 1 suffices (Sec. 4)
};
std::unique_ptr<Aggregator> MakeCenteredClipping(AggregationMode mode,
                                                 const CenteredClippingOptions& options);

// FLTrust (Cao et al., "FLTrust: Byzantine-robust Federated Learning via
// Trust Bootstrapping", NDSS 2021, Eqs. 2-4 and Alg. 2): the server trains
// θ on its own small root data set to w_0, g_0 = w_0 − θ; each client's
// update g_k = w_k − θ gets trust TS_k = ReLU(cos(g_k, g_0)) and is
// rescaled to ||g_0||; ŵ = θ + Σ TS_k (||g_0|| / ||g_k||) g_k / Σ TS_k (θ
// itself when no update earns trust). `root_update` gives w_0 for θ of a
// version (the round it starts being that version + 1).
using RootUpdate = std::function<FlatParams(const FlatParams& global, int64_t version)>;
std::unique_ptr<Aggregator> MakeFlTrust(AggregationMode mode, RootUpdate root_update);

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
FlatParams CenteredClipping(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                            const CenteredClippingOptions& options);
// FLTrust's ŵ and each update's trust score TS_k (in the order of
// `updates`) against the root update w_0.
FlatParams FlTrust(const FlatParams& global, const FlatParams& root,
                   const std::vector<const ClientUpdate*>& updates, std::vector<double>* trust = nullptr);

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
