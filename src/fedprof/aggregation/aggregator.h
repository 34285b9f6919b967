#ifndef FEDPROF_AGGREGATION_AGGREGATOR_H_
#define FEDPROF_AGGREGATION_AGGREGATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/core/params.h"

namespace fedprof {

enum class AggregationMode {
  // w = sum over all N clients of |D_k|/|D| w_k, where clients that did not
  // train this round contribute the current global model (000, Eq. 8).
  kFull,
  // w = sum over the selected clients of |D_k|/|D_S| w_k.
  kPartial,
};

// Builds the next global model from a round's valid results, folded into a
// ModelSum (Σ |D_k| w_k, exact) as they arrived: an aggregator is the
// finalising step of a reducer (accumulate, merge, finalise), so the models
// themselves need not be kept, and their order never matters.
class Aggregator {
 public:
  virtual ~Aggregator() = default;
  // total_samples = |D| over all clients that could have been selected.
  virtual void Aggregate(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                         FlatParams* next) = 0;

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
