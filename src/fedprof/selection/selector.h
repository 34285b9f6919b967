#ifndef FEDPROF_SELECTION_SELECTOR_H_
#define FEDPROF_SELECTION_SELECTOR_H_

#include <memory>
#include <vector>

#include "fedprof/core/rng.h"
#include "fedprof/transport/transport.h"

namespace fedprof {

// What a selector may look at when it picks the round's clients.
struct SelectionContext {
  int64_t round = 0;
  int num_to_select = 0;                   // K
  const std::vector<ClientInfo>* clients;  // the available clients, increasing id
};

// Picks the clients that train in a round among the available ones. Returns
// distinct client ids in increasing order.
class Selector {
 public:
  virtual ~Selector() = default;
  virtual std::vector<int> Select(const SelectionContext& context, Rng& rng) = 0;
};

// K distinct clients uniformly at random (FedAvg, FedAvg-RP).
std::unique_ptr<Selector> MakeUniformSelector();

// K distinct clients with probability proportional to their data size
// (FedProx's device sampling).
std::unique_ptr<Selector> MakeSizeWeightedSelector();

// First come, first merged (CFCFM, Wu et al., SAFA, IEEE TC 2021): every
// client is invited and the first K to finish are merged; with known round
// times (ClientInfo::expected_time_s: the cost model's in simulation, the
// last measured one in a deployment) those are the K fastest clients, ties
// by id. A client whose time is unknown counts as fastest, so it gets
// measured.
std::unique_ptr<Selector> MakeFirstComeSelector();

// Active Federated Learning's selection (Goetz et al. 2019, Alg. 1) from the
// clients' valuations: the lowest `drop_share` (α1) of valuations are
// excluded, (1 − random_share) K clients are drawn without replacement with
// probability ∝ exp(temperature · v_k) (α2) from the rest, and random_share
// (α3) K more uniformly from all not yet chosen.
struct AflOptions {
  double drop_share = 0.75;   // α1
  double temperature = 0.01;  // α2
  double random_share = 0.1;  // α3
};
std::vector<int> SelectAfl(const std::vector<double>& values, int k, const AflOptions& options,
                           Rng& rng);

// Indices into `weights` drawn with probability proportional to the
// weights (>= 0), in increasing order. Without replacement: k successive weighted draws, each
// removing the drawn client, so k distinct clients (fewer only when fewer
// have positive weight). With replacement: k independent draws, as Python's
// random.choices does; a client drawn twice appears once. If every weight is
// 0 the draw is uniform.
std::vector<int> SampleByWeight(const std::vector<double>& weights, int k, bool with_replacement,
                                Rng& rng);

// The ids of context.clients at `indices`.
std::vector<int> IdsAt(const SelectionContext& context, const std::vector<int>& indices);

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_SELECTOR_H_
