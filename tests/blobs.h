#ifndef FEDPROF_TESTS_BLOBS_H_
#define FEDPROF_TESTS_BLOBS_H_

// The unit tests' small learning problem: two Gaussian blobs, the MLP that
// learns them, and how far apart two of its parameter vectors are.

#include <torch/torch.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "fedprof/core/params.h"
#include "fedprof/data/dataset.h"
#include "fedprof/models/models.h"

namespace fedprof::testing_support {

// `n` samples in 4 dimensions, class c ∈ {0, 1} centred at c · separation
// in every coordinate, drawn from torch's global generator: the caller
// seeds it, so a sequence of draws gives each caller the data it had.
inline Dataset DrawBlobs(int64_t n, double separation = 2.0) {
  Dataset d;
  d.y = torch::randint(0, 2, {n}, torch::kLong);
  d.x = torch::randn({n, 4}) + d.y.unsqueeze(1).to(torch::kFloat) * separation;
  d.num_classes = 2;
  return d;
}

// 4 inputs, one hidden layer of 8, 2 classes.
inline const ModelSpec kBlobMlp{"mlp", {4}, 2, {8}, ""};

// The Euclidean distance between two parameter vectors of one layout.
inline double ParamDistance(const FlatParams& a, const FlatParams& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
  return std::sqrt(s);
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_BLOBS_H_
