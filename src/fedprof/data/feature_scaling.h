#ifndef FEDPROF_DATA_FEATURE_SCALING_H_
#define FEDPROF_DATA_FEATURE_SCALING_H_

// Tabular features as every machine of a run sees them: a table's columns
// matched by name to the training file's, then standardised with the
// training file's column means and standard deviations. The server reads the
// training file and sends this to each deployed client (protocol/wire.h),
// whose own train.csv goes through the same transform as the server's test
// set (ScaleFeatures, sim/population.h).

#include <cstddef>
#include <string>
#include <vector>

namespace fedprof {

struct FeatureScaling {
  std::vector<std::string> names;  // the training file's feature columns, in order
  std::vector<float> mean, sd;     // per column; sd is the population SD, at least 1e-12

  bool empty() const { return names.empty(); }
  bool operator==(const FeatureScaling& o) const { return names == o.names && mean == o.mean && sd == o.sd; }
};

// The most feature columns a scaling has: what one Register reply carries.
inline constexpr size_t kMaxFeatures = 10000;

// "" or why `scaling`, as a server sent it, is not one: lengths that differ,
// over kMaxFeatures columns, a name empty, over 256 bytes, not UTF-8 text
// without control characters, or given twice, a mean not finite or an SD not
// finite and positive.
std::string FeatureScalingProblem(const FeatureScaling& scaling);

}  // namespace fedprof

#endif  // FEDPROF_DATA_FEATURE_SCALING_H_
