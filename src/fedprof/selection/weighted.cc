#include <algorithm>
#include <cmath>
#include <numeric>

#include "fedprof/selection/selector.h"

namespace fedprof {

std::vector<double> CappedInclusion(const std::vector<double>& weights, double expected, double cap) {
  std::vector<double> p(weights.size(), 0.0);
  std::vector<size_t> order;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] > 0) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weights[a] > weights[b]; });
  if (expected >= cap * static_cast<double>(order.size())) {
    for (size_t i : order) p[i] = cap;
    return p;
  }
  // With the j heaviest at the cap, the rest share what is left in
  // proportion to their weights; the first j for which the (j+1)-th
  // heaviest stays under the cap is the answer.
  double rest = 0;
  for (size_t i : order) rest += weights[i];
  for (size_t j = 0; j < order.size(); ++j) {
    const double c = (expected - cap * static_cast<double>(j)) / rest;
    if (weights[order[j]] * c <= cap) {
      for (size_t r = 0; r < order.size(); ++r)
        p[order[r]] = r < j ? cap : std::min(cap, weights[order[r]] * c);
      return p;
    }
    rest -= weights[order[j]];
  }
  for (size_t i : order) p[i] = cap;  // not reached: expected < cap · n
  return p;
}

std::vector<int> PoissonSample(const std::vector<double>& inclusion, Rng& rng) {
  std::vector<int> chosen;
  for (size_t i = 0; i < inclusion.size(); ++i) {
    if (Uniform01(rng) < inclusion[i]) chosen.push_back(static_cast<int>(i));
  }
  return chosen;
}

std::vector<int> SampleByWeight(const std::vector<double>& weights, int k, bool with_replacement,
                                Rng& rng) {
  const int n = static_cast<int>(weights.size());
  std::vector<double> w = weights;
  if (!(std::accumulate(w.begin(), w.end(), 0.0) > 0)) std::fill(w.begin(), w.end(), 1.0);
  std::vector<int> ids;
  if (with_replacement) {
    // k independent draws by binary search in the cumulative weights.
    std::vector<double> cumulative(n);
    std::partial_sum(w.begin(), w.end(), cumulative.begin());
    for (int d = 0; d < k; ++d) {
      const double pick = Uniform01(rng) * cumulative.back();
      int id = static_cast<int>(std::upper_bound(cumulative.begin(), cumulative.end(), pick) -
                                cumulative.begin());
      id = std::min(id, n - 1);
      while (w[id] <= 0) --id;  // rounding at the very top lands on a zero tail
      ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
  }
  // Successive weighted draws without replacement have the same distribution
  // as taking the k smallest keys E_i / w_i with E_i ~ Exp(1) (Efraimidis and
  // Spirakis 2006); this is O(n log n) instead of O(n k) for large N.
  std::vector<std::pair<double, int>> keys;
  keys.reserve(n);
  for (int i = 0; i < n; ++i) {
    const double e = -std::log1p(-Uniform01(rng));  // Exp(1); every client draws
    if (w[i] > 0) keys.emplace_back(e / w[i], i);
  }
  const int m = std::min<int>(k, static_cast<int>(keys.size()));
  std::partial_sort(keys.begin(), keys.begin() + m, keys.end());
  for (int i = 0; i < m; ++i) ids.push_back(keys[i].second);
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace fedprof

namespace fedprof {
namespace {

class SizeWeightedSelector : public Selector {
 public:
  std::vector<int> Select(const SelectionContext& context, Rng& rng) override {
    std::vector<double> sizes;
    for (const ClientInfo& c : *context.clients) sizes.push_back(static_cast<double>(c.num_samples));
    return IdsAt(context, SampleByWeight(sizes, context.num_to_select, /*with_replacement=*/false, rng));
  }
};

}  // namespace

std::unique_ptr<Selector> MakeSizeWeightedSelector() {
  return std::make_unique<SizeWeightedSelector>();
}

std::vector<int> SelectAfl(const std::vector<double>& values, int k, const AflOptions& options,
                           Rng& rng) {
  const int n = static_cast<int>(values.size());
  k = std::min(k, n);
  // Rank by valuation; ties by id keep the order deterministic.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[a] < values[b]; });
  const int dropped = std::min(n - k, static_cast<int>(std::floor(options.drop_share * n)));
  const int by_value = k - static_cast<int>(std::lround(options.random_share * k));
  // exp(α2 v) relative to the largest kept value, so large losses cannot overflow.
  double top = -INFINITY;
  for (int i = dropped; i < n; ++i) top = std::max(top, values[order[i]]);
  std::vector<double> weights(n, 0.0);
  for (int i = dropped; i < n; ++i) {
    weights[order[i]] = std::exp(options.temperature * (values[order[i]] - top));
  }
  std::vector<int> chosen = SampleByWeight(weights, by_value, /*with_replacement=*/false, rng);
  std::vector<double> rest(n, 1.0);
  for (int id : chosen) rest[id] = 0;
  for (int id : SampleByWeight(rest, k - static_cast<int>(chosen.size()), false, rng)) {
    chosen.push_back(id);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

}  // namespace fedprof
