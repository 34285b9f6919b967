#include <algorithm>
#include <cmath>
#include <numeric>

#include "fedprof/selection/selector.h"

namespace fedprof {

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
