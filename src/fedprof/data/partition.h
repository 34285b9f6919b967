#ifndef FEDPROF_DATA_PARTITION_H_
#define FEDPROF_DATA_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/core/rng.h"

namespace fedprof {

enum class PartitionKind { kIid, kDominant };

struct PartitionOptions {
  PartitionKind kind = PartitionKind::kIid;
  // kDominant: share of each client's samples taken from its dominant class
  // (client k's dominant class is k mod num_classes): round(share * size)
  // samples; the rest are dealt one per client in turn, each drawn from the
  // pooled remainder of the other classes (uniform when classes are
  // balanced). Every class is a seeded shuffled pool drawn without
  // replacement; running out is an error.
  double dominant_share = 0.6;
  // Client sizes ~ Normal(size_mean, size_sd^2), rounded, at least 1.
  // size_mean == 0 gives every client floor(num_samples / num_clients), which
  // uses (nearly) the whole set.
  double size_mean = 0;
  double size_sd = 0;
};

// Disjoint index sets, one per client, over a data set with `labels`
// (class labels; for regression pass an empty vector and kIid). Seeded:
// the same (labels, options, seed) gives the same partition. Throws
// fedprof::Error when the request cannot be met (more samples asked than
// exist, a dominant class that runs out), naming the option.
std::vector<std::vector<int64_t>> Partition(const std::vector<int64_t>& labels,
                                            int64_t num_samples,
                                            int64_t num_classes,
                                            int num_clients,
                                            const PartitionOptions& options,
                                            uint64_t seed);

}  // namespace fedprof

#endif  // FEDPROF_DATA_PARTITION_H_
