#ifndef FEDPROF_DATA_PARTITION_H_
#define FEDPROF_DATA_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/core/rng.h"

namespace fedprof {

// The partitions of the partition.* options (RunOptions::Partition), as set;
// docs/partitions.md says what each does and cites where it comes from.
// partition.kind: iid, dominant, dirichlet, classes and shards split the
// data set into disjoint index sets (Partition); the sampled kinds draw each
// client's indices when asked for (SampledPartition). iid and dominant take
// client sizes from partition.sizes: Normal(size_mean, size_sd^2), rounded,
// at least 1 (size_mean 0: an equal split), or shares ~ Dir(beta). The
// dominant kinds take round(dominant_share * size) of client k's samples
// from its dominant class, k mod num_classes.

// Whether partition.kind skews the clients' labels, and so needs class
// labels (every kind but iid, sampled and given).
bool LabelSkew(const RunOptions::Partition& options);
// Whether partition.kind gives each client a dominant class (dominant,
// sampled_dominant).
bool DominantClasses(const RunOptions::Partition& options);
// Whether partition.kind draws client data on demand (sampled,
// sampled_dominant, sampled_dirichlet, sampled_classes).
bool SampledClients(const RunOptions::Partition& options);

// The labels client k of a classes partition holds (k mod num_classes,
// then classes - 1 others drawn uniformly, distinct, from `rng`), in the
// order drawn (Li et al. 2022's #C = k).
std::vector<int64_t> ClientClasses(int k, int64_t num_classes, int64_t classes, Rng& rng);

// Index sets drawn per client on demand, for populations far larger than
// the data set (10^5 - 10^6 clients): client k's size ~ Normal(size_mean,
// size_sd^2) (at least 1) and its indices are drawn with replacement from
// client k's own stream, so clients may share samples and nothing per
// client is stored. sampled_dominant: round(dominant_share * size) of them
// come from class k mod num_classes and the rest from the whole set;
// sampled_dirichlet: each is of a class drawn from client k's own label
// proportions ~ Dir(beta), then uniform within the class; sampled_classes:
// of one of client k's ClientClasses, each equally likely; sampled: all
// from the whole set (IID).
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
  RunOptions::Partition options_;
  uint64_t seed_;
  std::vector<std::vector<int64_t>> by_class_;  // sample indices of each class
  std::vector<int64_t> nonempty_;                // the classes with samples
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
// option. dirichlet, classes and shards are the algorithms of Li et al.,
// "Federated Learning on Non-IID Data Silos" (ICDE 2022) and McMahan et al.
// (AISTATS 2017): see Partition in partition.cc.
std::vector<std::vector<int64_t>> Partition(const std::vector<int64_t>& labels,
                                            int64_t num_samples,
                                            int64_t num_classes,
                                            int num_clients,
                                            const RunOptions::Partition& options,
                                            uint64_t seed);

// Partition statistics, as clients.csv, summary.json and fedprof partition
// report them. counts[k][c]: the samples of class c client k holds.
std::vector<std::vector<int64_t>> LabelCounts(const std::vector<std::vector<int64_t>>& parts,
                                              const std::vector<int64_t>& labels, int64_t num_classes);
// The mean over clients of the Jensen-Shannon divergence (base 2, in [0, 1])
// between a client's label distribution and the pooled distribution of all
// clients; clients holding nothing are skipped. 0 for an empty population.
double MeanJsDivergence(const std::vector<std::vector<int64_t>>& counts);

}  // namespace fedprof

#endif  // FEDPROF_DATA_PARTITION_H_
