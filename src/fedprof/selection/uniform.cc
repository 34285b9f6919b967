#include <algorithm>

#include "fedprof/core/error.h"
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

namespace fedprof {
namespace {

class FirstComeSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& /*rng*/) override {
    if (context.expected_time_s == nullptr) {
      throw Error("strategy.name: cfcfm needs the clients' expected round times (simulation's "
                  "cost model)");
    }
    const std::vector<double>& t = *context.expected_time_s;
    std::vector<int> ids(t.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    const int k = std::min<int>(context.num_to_select, static_cast<int>(ids.size()));
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) {
      return t[a] < t[b] || (t[a] == t[b] && a < b);
    });
    ids.resize(k);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
};

}  // namespace

std::unique_ptr<Selector> MakeFirstComeSelector() { return std::make_unique<FirstComeSelector>(); }

}  // namespace fedprof
