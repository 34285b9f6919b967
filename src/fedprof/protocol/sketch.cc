#include "fedprof/protocol/sketch.h"

#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"

namespace fedprof {

std::vector<float> UpdateSketch(const FlatParams& w, const FlatParams& global, int dim) {
  if (dim < 1 || w.size() != global.size()) {
    throw Error("update sketch: " + std::to_string(dim) + " buckets for a model of " +
                std::to_string(w.size()) + " values against a global model of " +
                std::to_string(global.size()));
  }
  std::vector<double> s(dim, 0.0);
  for (size_t i = 0; i < w.size(); ++i) {
    const uint64_t h = Mix64(i);
    const double x = static_cast<double>(w[i]) - global[i];
    s[(h >> 1) % static_cast<uint64_t>(dim)] += (h & 1) ? x : -x;
  }
  return std::vector<float>(s.begin(), s.end());
}

}  // namespace fedprof
