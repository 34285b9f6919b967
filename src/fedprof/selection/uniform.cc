#include <algorithm>

#include "fedprof/selection/selector.h"

namespace fedprof {
namespace {

class UniformSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    const int n = static_cast<int>(context.clients->size());
    const int k = std::min(context.num_to_select, n);
    // Partial Fisher-Yates: the first k entries are a uniform k-subset.
    std::vector<int> ids(n);
    for (int i = 0; i < n; ++i) ids[i] = i;
    for (int i = 0; i < k; ++i) {
      const int j = i + static_cast<int>(UniformIndex(rng, static_cast<uint64_t>(n - i)));
      std::swap(ids[i], ids[j]);
    }
    ids.resize(k);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
};

}  // namespace

std::unique_ptr<Selector> MakeUniformSelector() { return std::make_unique<UniformSelector>(); }

}  // namespace fedprof
