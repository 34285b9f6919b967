#ifndef FEDPROF_SELECTION_CLUSTERED_SELECTOR_H_
#define FEDPROF_SELECTION_CLUSTERED_SELECTOR_H_

#include <functional>
#include <string>
#include <vector>

#include "fedprof/selection/selector.h"

namespace fedprof {

struct ClusteredOptions {
  int sketch_dim = 1024;  // size of the count sketch of each client's update
};

// Clustered sampling by model similarity (Fraboni et al., ICML 2021,
// Algorithm 2): clients are grouped into K clusters by the similarity of
// their latest model updates (average-linkage hierarchical clustering on
// cosine distance), and one client is drawn from each cluster with
// probability proportional to its data size. Updates are compared through
// count sketches that the clients compute (protocol/sketch.h) of their
// trained model minus the one they started from, so the server keeps
// sketch_dim floats per client and never a model. A client that has never
// trained has no update and is at distance 1 from every client. Clustering
// compares every pair of available clients: O(N²) time and memory, so the
// population is limited to kMaxClusteredClients.
constexpr int kMaxClusteredClients = 5000;
class ClusteredSelector : public Selector {
 public:
  // Throws fedprof::Error when num_clients exceeds kMaxClusteredClients.
  ClusteredSelector(const ClusteredOptions& options, int num_clients);

  std::vector<int> Select(const SelectionContext& context, Rng& rng) override;
  int SketchDim() const override { return options_.sketch_dim; }
  std::string CheckResult(const FitResult& result) const override;
  void Observe(const FitResult& result) override;
  bool KeepsState() const override { return true; }
  std::string SaveState() const override;
  void LoadState(const std::string& state) override;

 private:
  ClusteredOptions options_;
  std::vector<std::vector<float>> sketches_;  // per client; empty until it trains
};

// Average-linkage agglomerative clustering of n items with pairwise
// distances `distance(i, j)` into `k` clusters; returns each item's cluster
// (0..k-1, numbered by smallest member). Ties merge the lowest indices first.
std::vector<int> AverageLinkage(int n, int k, const std::function<double(int, int)>& distance);

}  // namespace fedprof

#endif  // FEDPROF_SELECTION_CLUSTERED_SELECTOR_H_
