#ifndef FEDPROF_DATA_PARTITION_H_
#define FEDPROF_DATA_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/core/rng.h"

namespace fedprof {

// The partitions of the partition.* options (RunOptions::Partition), as set.
// partition.kind: iid and dominant split the data set into disjoint index
// sets (Partition); sampled and sampled_dominant draw each client's
// indices when asked for (SampledPartition). Client sizes ~ Normal(size_mean,
// size_sd^2), rounded, at least 1. The dominant kinds take round(dominant_share
// * size) of client k's samples from its dominant class, k mod num_classes.

// Whether partition.kind gives each client a dominant class (dominant,
// sampled_dominant).
bool DominantClasses(const RunOptions::Partition& options);
// Whether partition.kind draws client data on demand (sampled,
// sampled_dominant).
bool SampledClients(const RunOptions::Partition& options);

// Index sets drawn per client on demand, for populations far larger than
// the data set (10^5 - 10^6 clients): client k's size ~ Normal(size_mean,
// size_sd^2) (at least 1) and its indices are drawn with replacement from
// client k's own stream, so clients may share samples and nothing per
// client is stored. With DominantClasses(options), round(dominant_share *
// size) of them come from class k mod num_classes and the rest from the
// whole set; otherwise all come from the whole set (IID).
class SampledPartition {
 public:
  // Throws fedprof::Error naming the option when the request cannot be met
  // (size_mean < 1, no labels for the dominant draw, an empty class).
  SampledPartition(const std::vector<int64_t>& labels, int64_t num_samples, int64_t num_classes,
                   const RunOptions::Partition& options, uint64_t seed);

  int64_t Size(int client) const;
  std::vector<int64_t> Indices(int client) const;

 private:
  int64_t num_samples_;
  bool dominant_;
  RunOptions::Partition options_;
  uint64_t seed_;
  std::vector<std::vector<int64_t>> by_class_;  // sample indices of each class
};

// Disjoint index sets, one per client, over a data set with `labels`
// (class labels; for regression pass an empty vector and kind iid).
// size_mean == 0 gives every client floor(num_samples / num_clients), which
// uses (nearly) the whole set. The dominant kind deals the samples not from
// a client's dominant class one per client in turn, each drawn from the
// pooled remainder of the other classes (uniform when classes are
// balanced); every class is a seeded shuffled pool drawn without
// replacement. Seeded: the same (labels, options, seed) gives the same
// partition. Throws fedprof::Error when the request cannot be met (more
// samples asked than exist, a dominant class that runs out), naming the
// option.
std::vector<std::vector<int64_t>> Partition(const std::vector<int64_t>& labels,
                                            int64_t num_samples,
                                            int64_t num_classes,
                                            int num_clients,
                                            const RunOptions::Partition& options,
                                            uint64_t seed);

}  // namespace fedprof

#endif  // FEDPROF_DATA_PARTITION_H_
