#include "fedprof/data/dataset.h"

#include <torch/torch.h>

#include <string>
#include <vector>

#include "fedprof/core/error.h"

namespace fedprof {

Dataset Subset(const Dataset& data, const std::vector<int64_t>& indices) {
  const int64_t n = data.size();
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= n) {
      throw Error(data.name + ": subset index " + std::to_string(indices[i]) +
                  " at position " + std::to_string(i) + " is outside [0, " +
                  std::to_string(n) + ")");
    }
  }
  const auto index =
      torch::tensor(at::ArrayRef<int64_t>(indices), torch::kInt64);
  Dataset out;
  out.num_classes = data.num_classes;
  out.name = data.name;
  out.feature_names = data.feature_names;
  if (data.x.defined()) out.x = data.x.index_select(0, index);
  if (data.y.defined()) out.y = data.y.index_select(0, index);
  return out;
}

}  // namespace fedprof
