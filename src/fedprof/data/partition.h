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

// Index sets drawn per client on demand, for populations far larger than
// the data set (10^5 - 10^6 clients): client k's size ~ Normal(size_mean,
// size_sd^2) (at least 1) and its indices are drawn with replacement from
// client k's own stream, so clients may share samples and nothing per
// client is stored. With `dominant` true, round(dominant_share * size) of
// them come from class k mod num_classes and the rest from the whole set;
// otherwise all come from the whole set (IID).
class SampledPartition {
 public:
  // Throws fedprof::Error naming the option when the request cannot be met
  // (size_mean < 1, no labels for the dominant draw, an empty class).
  SampledPartition(const std::vector<int64_t>& labels, int64_t num_samples, int64_t num_classes,
                   bool dominant, const PartitionOptions& options, uint64_t seed);

  int64_t Size(int client) const;
  std::vector<int64_t> Indices(int client) const;

 private:
  int64_t num_samples_;
  bool dominant_;
  PartitionOptions options_;
  uint64_t seed_;
  std::vector<std::vector<int64_t>> by_class_;  // sample indices of each class
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
