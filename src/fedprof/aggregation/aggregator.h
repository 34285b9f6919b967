#ifndef FEDPROF_AGGREGATION_AGGREGATOR_H_
#define FEDPROF_AGGREGATION_AGGREGATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/error.h"
#include "fedprof/core/params.h"
#include "fedprof/report/metrics.h"

namespace fedprof {

struct BufferedUpdate;  // fedbuff.h
struct FedBuffOptions;

enum class AggregationMode {
  // w = sum over all N clients of |D_k|/|D| w_k, where clients that did not
  // train this round contribute the current global model (000, Eq. 8).
  kFull,
  // w = sum over the selected clients of |D_k|/|D_S| w_k.
  kPartial,
};

// One client's accepted model of a round, kept for aggregators that need
// the individual models.
struct ClientUpdate {
  int client_id = -1;
  int64_t num_samples = 0;  // as claimed, validated
  FlatParams params;        // w_k
};

// Builds the next global model from a round's valid results, folded into a
// ModelSum (Σ |D_k| w_k, exact) as they arrived: an aggregator is the
// finalising step of a reducer (accumulate, merge, finalise), so the models
// themselves need not be kept, and their order never matters. Robust rules
// (aggregation/robust.h) are no reducers: they say so with NeedsUpdates,
// and the server keeps the round's models for them. A sum that hides the
// models (secure aggregation) cannot serve them.
class Aggregator {
 public:
  virtual ~Aggregator() = default;
  // total_samples = |D| over all clients that could have been selected.
  virtual void Aggregate(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                         FlatParams* next) = 0;

  // Whether this aggregator needs each client's model (AggregateUpdates)
  // rather than their sum.
  virtual bool NeedsUpdates() const { return false; }
  // The next global model from the round's accepted models, in any order
  // (the result must not depend on it). Only for NeedsUpdates aggregators;
  // the others throw fedprof::Error.
  virtual void AggregateUpdates(const FlatParams& global, const std::vector<ClientUpdate>& updates,
                                int64_t total_samples, FlatParams* next) {
    (void)global, (void)updates, (void)total_samples, (void)next;
    throw Error("aggregation: this aggregator works on the sum of the models, not on each one");
  }

  // The estimate ŵ this aggregator makes of these models for θ, before the
  // aggregation mode's step and any momentum, leaving its state as it is:
  // what an attacker who knows the rule optimises against (attack.kind =
  // tailored). By default their sample-weighted mean. `own_step` (may be
  // null) says whether ŵ is the server's own update, which replaced the
  // clients' estimate (robust.fallback): an attacker that causes it has been
  // found out.
  virtual FlatParams EstimateOf(const FlatParams& global, const std::vector<ClientUpdate>& updates,
                                bool* own_step = nullptr) const;

  // Whether the last AggregateUpdates took the server's own step instead of
  // the clients' estimate (robust.fallback, robust.h).
  virtual bool FellBack() const { return false; }

  // Buffered asynchronous aggregation (fedbuff.h): its options, or null
  // for an aggregator of synchronous rounds.
  virtual const FedBuffOptions* Buffered() const { return nullptr; }
  // The server's step from a full buffer; only for Buffered aggregators.
  virtual void AggregateBuffer(const FlatParams& global, const std::vector<BufferedUpdate>& buffer,
                               int64_t total_samples, FlatParams* next) {
    (void)global, (void)buffer, (void)total_samples, (void)next;
    throw Error("aggregation: this aggregator runs synchronous rounds, not a buffer of results");
  }

  // The version of the global model the next round starts from (0 = the
  // initial model, then the round that produced it), before each round.
  virtual void OnGlobalModel(int64_t version) { (void)version; }

  // The round's federated evaluation from the clients' evaluations (in
  // client order): false leaves it to the strategy (each weighted by its
  // sample count); true with *accuracy and *loss set gives the aggregator's.
  virtual bool AggregateEvaluations(int64_t round, const std::vector<ClientEvaluation>& evaluations,
                                    double* accuracy, double* loss) {
    (void)round, (void)evaluations, (void)accuracy, (void)loss;
    return false;
  }

  // Opaque state for checkpoints (server optimiser moments); "" if none.
  virtual std::string SaveState() const { return ""; }
  virtual void LoadState(const std::string& state) { (void)state; }
};

std::unique_ptr<Aggregator> MakeWeightedAverage(AggregationMode mode);

// FedAdam (Reddi et al., "Adaptive Federated Optimization", ICLR 2021): the
// averaged update Δ = avg(w_k) − w is a pseudo-gradient for Adam on the
// server: m ← β1 m + (1 − β1) Δ, v ← β2 v + (1 − β2) Δ², w ← w + η m / (√v + τ)
// (no bias correction, as in the paper's Algorithm 2).
struct FedAdamOptions {
  double server_lr = 0.01;  // η
  double beta1 = 0.9;
  double beta2 = 0.99;
  double tau = 1e-3;        // adaptivity
};
std::unique_ptr<Aggregator> MakeFedAdam(AggregationMode mode, const FedAdamOptions& options);

// The averaging rules, for reuse by other aggregators. `next` may alias
// `global`. With an empty sum both return the global model unchanged.
// Full: w_i + (Σ n_k w_k,i − n_S w_i) / |D|. Partial: Σ n_k w_k,i / n_S.
void AverageFull(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                 FlatParams* next);
void AveragePartial(const FlatParams& global, const ModelSum& sum, FlatParams* next);
void Average(AggregationMode mode, const FlatParams& global, const ModelSum& sum,
             int64_t total_samples, FlatParams* next);

}  // namespace fedprof

#endif  // FEDPROF_AGGREGATION_AGGREGATOR_H_
