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
