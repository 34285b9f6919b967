#ifndef FEDPROF_DATA_DATASET_H_
#define FEDPROF_DATA_DATASET_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fedprof {

// A data set held as two pre-stacked tensors, so batches are index_select
// calls rather than per-sample copies.
struct Dataset {
  // float32. Images: [n, channels, height, width] scaled to [0, 1].
  // Tabular: [n, features].
  at::Tensor x;
  // Classification: int64 [n] with labels in [0, num_classes).
  // Regression: float32 [n, targets].
  at::Tensor y;
  // 0 means regression.
  int64_t num_classes = 0;
  // Where the data came from, for messages ("fashion-mnist", a file path).
  std::string name;

  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  bool is_regression() const { return num_classes == 0; }
  bool is_image() const { return x.defined() && x.dim() == 4; }
};

// Rows `indices` of `data` (a copy), keeping num_classes and name. An index
// outside [0, size()) throws fedprof::Error.
Dataset Subset(const Dataset& data, const std::vector<int64_t>& indices);

}  // namespace fedprof

#endif  // FEDPROF_DATA_DATASET_H_
