#include "fedprof/privacy/update_clipping.h"

#include <cmath>
#include <string>

#include "fedprof/core/error.h"

namespace fedprof {

double UpdateNorm(const FlatParams& start, const FlatParams& w) {
  if (start.size() != w.size()) {
    throw Error("update norm: a model of " + std::to_string(w.size()) + " values against one of " +
                std::to_string(start.size()));
  }
  double sq = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double diff = static_cast<double>(w[i]) - start[i];  // exact: both are floats
    sq += diff * diff;
  }
  return std::sqrt(sq);
}

bool ClipUpdate(const FlatParams& start, double clip, FlatParams* w) {
  if (!(clip > 0)) throw Error("clip norm: expected a value > 0");
  const double norm = UpdateNorm(start, *w);
  if (norm <= clip) return true;
  if (!std::isfinite(norm)) return false;  // left as is: the server refuses it
  const FlatParams original = *w;
  // Rounding the scaled update to floats may land a hair above `clip`;
  // shrink a little more until it does not (one pass in practice).
  double scale = clip / norm;
  for (int attempt = 0; attempt < 64; ++attempt, scale *= 1 - 0x1p-20) {
    for (size_t i = 0; i < w->size(); ++i) {
      (*w)[i] = static_cast<float>(start[i] + scale * (static_cast<double>(original[i]) - start[i]));
    }
    if (UpdateNorm(start, *w) <= clip) return false;
  }
  *w = start;  // unreachable for finite inputs; the zero update is within any clip
  return false;
}

}  // namespace fedprof
