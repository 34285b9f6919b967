#ifndef FEDPROF_SELECTION_SELECTOR_H_
#define FEDPROF_SELECTION_SELECTOR_H_

#include <memory>
#include <vector>

#include "fedprof/core/rng.h"
#include "fedprof/sim/transport.h"

namespace fedprof {

// What a selector may look at when it picks the round's clients.
struct SelectionContext {
  int64_t round = 0;
  int num_to_select = 0;                  // K
  const std::vector<ClientInfo>* clients; // all N clients
  // Each client's expected round time by the cost model (simulation), or
  // null when unknown.
  const std::vector<double>* expected_time_s = nullptr;
};

// Picks the clients that train in a round. Returns distinct ids in
// increasing order unless a selector documents otherwise.
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
// client is invited and the first K to finish are merged; with the cost
// model's deterministic times those are the K fastest clients (ties by id).
// Throws fedprof::Error when no expected times are known.
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

// Client ids drawn with probability proportional to `weights` (>= 0), in
// increasing order. Without replacement: k successive weighted draws, each
// removing the drawn client, so k distinct clients (fewer only when fewer
// have positive weight). With replacement: k independent draws, as Python's
// random.choices does; a client drawn twice appears once. If every weight is
// 0 the draw is uniform.
std::vector<int> SampleByWeight(const std::vector<double>& weights, int k, bool with_replacement,
                                Rng& rng);

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_SELECTOR_H_
