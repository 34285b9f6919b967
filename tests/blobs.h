#ifndef FEDPROF_TESTS_BLOBS_H_
#define FEDPROF_TESTS_BLOBS_H_

// The unit tests' small classification data: two Gaussian blobs.

#include <torch/torch.h>

#include <cstdint>

#include "fedprof/data/dataset.h"

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

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_BLOBS_H_
