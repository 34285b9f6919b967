#include "fedprof/data/feature_scaling.h"

#include <cmath>
#include <set>
#include <string>

#include "fedprof/core/text.h"

namespace fedprof {

std::string FeatureScalingProblem(const FeatureScaling& scaling) {
  const size_t n = scaling.names.size();
  if (scaling.mean.size() != n || scaling.sd.size() != n) {
    return std::to_string(n) + " names, " + std::to_string(scaling.mean.size()) + " means and " +
           std::to_string(scaling.sd.size()) + " standard deviations";
  }
  if (n > kMaxFeatures) return std::to_string(n) + " columns, over " + std::to_string(kMaxFeatures);
  std::set<std::string> seen;
  for (size_t k = 0; k < n; ++k) {
    const std::string& name = scaling.names[k];
    if (name.empty() || name.size() > 256 || !TextProblem(name).empty() || name.find('\t') != std::string::npos) {
      return "column " + std::to_string(k + 1) + "'s name is not 1 to 256 bytes of UTF-8 text";
    }
    if (!seen.insert(name).second) return "column " + std::to_string(k + 1) + "'s name is given twice";
    if (!std::isfinite(scaling.mean[k]) || !std::isfinite(scaling.sd[k]) || !(scaling.sd[k] > 0)) {
      return "column " + std::to_string(k + 1) + " has mean " + std::to_string(scaling.mean[k]) + " and SD " +
             std::to_string(scaling.sd[k]);
    }
  }
  return "";
}

}  // namespace fedprof
