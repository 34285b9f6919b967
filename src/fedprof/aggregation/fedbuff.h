#ifndef FEDPROF_AGGREGATION_FEDBUFF_H_
#define FEDPROF_AGGREGATION_FEDBUFF_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "fedprof/aggregation/aggregator.h"

namespace fedprof {

// Buffered asynchronous aggregation (FedBuff: Nguyen et al., "Federated
// Learning with Buffered Asynchronous Aggregation", AISTATS 2022, Alg. 1):
// up to `concurrency` clients train at once, each on the model version it
// received; every `buffer` results the server steps
//   θ ← θ + η_g Σ_k n_k s(τ_k) (w_k − θ_{v_k}) / W,
// τ_k = the server's version minus v_k (the staleness), s(τ) = (1 + τ)^−a
// (the paper's 1/√(1 + τ) at a = 0.5), W = Σ n_k over the buffer (partial
// aggregation) or |D| of the clients online (full, Eq. 8). The server's
// event loop is Server::Run's buffered form (docs/fedbuff.md).
struct FedBuffOptions {
  int concurrency = 10;
  int buffer = 10;
  // When a freed place gets a new client: at once (the paper: concurrency
  // stays at its bound), or at the next server step, on the new model (at
  // concurrency = buffer every step then takes fresh results alone).
  enum class Refill { kOnArrival, kOnStep } refill = Refill::kOnArrival;
  double server_lr = 1;             // η_g
  double staleness_exponent = 0.5;  // a
};

// s(τ) = (1 + τ)^−a.
double StalenessWeight(const FedBuffOptions& options, int64_t staleness);

// One result in the server's buffer: the client's model and the model it
// started from.
struct BufferedUpdate {
  int client_id = -1;
  int64_t num_samples = 0;                  // n_k, validated
  int64_t staleness = 0;                    // τ_k
  FlatParams params;                        // w_k
  std::shared_ptr<const FlatParams> start;  // θ_{v_k}
};

// The server's step from a full buffer into `next` (which may alias
// `global`); `total_samples` is |D| for full aggregation. The result does
// not depend on the buffer's order. When every update is fresh (τ = 0) and
// η_g = 1 the step is θ + (avg w − θ) = avg w, computed as the exact
// weighted average of the models (Eq. 8, aggregator.h's Average), as
// synchronous averaging computes it.
void FedBuffStep(const FedBuffOptions& options, AggregationMode mode, const FlatParams& global,
                 const std::vector<BufferedUpdate>& buffer, int64_t total_samples, FlatParams* next);

// The aggregator strategy.aggregator = fedbuff names: Buffered() tells the
// server to run asynchronously; a synchronous Aggregate is the step with
// every update fresh.
std::unique_ptr<Aggregator> MakeFedBuff(AggregationMode mode, const FedBuffOptions& options);

}  // namespace fedprof

#endif  // FEDPROF_AGGREGATION_FEDBUFF_H_
