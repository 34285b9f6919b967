#ifndef FEDPROF_DATA_DATASET_H_
#define FEDPROF_DATA_DATASET_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
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
  // Tabular data from a file: its feature columns' names, in x's order.
  std::vector<std::string> feature_names;

  int64_t size() const { return x.defined() ? x.size(0) : 0; }
  bool is_regression() const { return num_classes == 0; }
  bool is_image() const { return x.defined() && x.dim() == 4; }
};

// Inputs that many data sets hold alike: row i of table t is one sample's
// input, the same bits in every data set that holds it (under a sampled
// partition clients draw their samples from one training set: a clean
// client holds rows of it, a blurred client rows of its blurred copy).
struct InputTables {
  std::vector<int64_t> sizes;  // rows of each table
  // Rows [start, start + len) of table `table`: inputs [len, ...].
  std::function<at::Tensor(int table, int64_t start, int64_t len)> inputs;
};

// A data set's inputs as rows of one of some InputTables, in its order.
struct TableRows {
  int table = -1;
  std::vector<int64_t> rows;
};

// Rows `indices` of `data` (a copy), keeping num_classes and name. An index
// outside [0, size()) throws fedprof::Error.
Dataset Subset(const Dataset& data, const std::vector<int64_t>& indices);

}  // namespace fedprof

#endif  // FEDPROF_DATA_DATASET_H_
