#include "fedprof/protocol/sketch.h"

#include "fedprof/core/rng.h"

namespace fedprof {

std::vector<float> UpdateSketch(const FlatParams& w, const FlatParams& global, int dim) {
  std::vector<double> s(dim, 0.0);
  for (size_t i = 0; i < w.size(); ++i) {
    const uint64_t h = Mix64(i);
    const double x = static_cast<double>(w[i]) - global[i];
    s[(h >> 1) % static_cast<uint64_t>(dim)] += (h & 1) ? x : -x;
  }
  return std::vector<float>(s.begin(), s.end());
}

}  // namespace fedprof
