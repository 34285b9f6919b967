#include "fedprof/data/partition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {

bool DominantClasses(const RunOptions::Partition& options) {
  return options.kind == "dominant" || options.kind == "sampled_dominant";
}

bool SampledClients(const RunOptions::Partition& options) {
  return options.kind == "sampled" || options.kind == "sampled_dominant";
}

namespace {

std::vector<int64_t> ClientSizes(int64_t num_samples, int num_clients,
                                 const RunOptions::Partition& options, Rng& rng) {
  if (options.size_mean == 0) {
    const int64_t each = num_samples / num_clients;
    if (each == 0) {
      throw Error("partition: " + std::to_string(num_samples) +
                  " samples cannot be split equally among " +
                  std::to_string(num_clients) + " clients (each would get 0)");
    }
    return std::vector<int64_t>(num_clients, each);
  }
  std::vector<int64_t> sizes(num_clients);
  int64_t total = 0;
  for (int64_t& size : sizes) {
    const double drawn =
        std::round(options.size_mean + options.size_sd * StandardNormal(rng));
    // Clamping before the cast keeps absurd draws from overflowing int64.
    const double clamped =
        std::clamp(drawn, 1.0, static_cast<double>(num_samples) + 1.0);
    size = static_cast<int64_t>(clamped);
    total += size;
  }
  if (total > num_samples) {
    throw Error(
        "partition.size_mean: client sizes drawn from Normal(" +
        FormatDouble(options.size_mean) + ", " + FormatDouble(options.size_sd) + "^2) sum to " +
        std::to_string(total) + " samples over " + std::to_string(num_clients) +
        " clients, but the data set has " + std::to_string(num_samples) +
        "; lower partition.size_mean or partition.size_sd");
  }
  return sizes;
}

void Shuffle(std::vector<int64_t>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[UniformIndex(rng, i)]);
  }
}

std::vector<std::vector<int64_t>> PartitionIid(
    int64_t num_samples, const std::vector<int64_t>& sizes, Rng& rng) {
  const std::vector<int64_t> order = Permutation(rng, num_samples);
  std::vector<std::vector<int64_t>> parts(sizes.size());
  auto it = order.begin();
  for (size_t k = 0; k < sizes.size(); ++k) {
    parts[k].assign(it, it + sizes[k]);
    it += sizes[k];
  }
  return parts;
}

std::vector<std::vector<int64_t>> PartitionDominant(
    const std::vector<int64_t>& labels, int64_t num_classes,
    const std::vector<int64_t>& sizes, double share, Rng& rng) {
  std::vector<std::vector<int64_t>> pools(num_classes);
  for (size_t i = 0; i < labels.size(); ++i) {
    pools[labels[i]].push_back(static_cast<int64_t>(i));
  }
  for (auto& pool : pools) Shuffle(pool, rng);
  std::vector<size_t> taken(num_classes, 0);

  const size_t num_clients = sizes.size();
  std::vector<std::vector<int64_t>> parts(num_clients);
  std::vector<int64_t> dominant_count(num_clients);
  // All dominant shares first, so the other-class draws of early clients
  // cannot starve a later client's dominant class.
  for (size_t k = 0; k < num_clients; ++k) {
    const int64_t cls = static_cast<int64_t>(k) % num_classes;
    const auto want = static_cast<int64_t>(std::round(share * sizes[k]));
    dominant_count[k] = want;
    std::vector<int64_t>& pool = pools[cls];
    if (taken[cls] + want > pool.size()) {
      throw Error("partition.dominant_share: class " + std::to_string(cls) +
                  " has " + std::to_string(pool.size()) +
                  " samples, too few for its dominant clients (client " +
                  std::to_string(k) + " needs " + std::to_string(want) +
                  " more, " + std::to_string(pool.size() - taken[cls]) +
                  " left); lower partition.dominant_share or the client sizes "
                  "(partition.size_mean)");
    }
    parts[k].reserve(sizes[k]);
    parts[k].insert(parts[k].end(), pool.begin() + taken[cls],
                    pool.begin() + taken[cls] + want);
    taken[cls] += want;
  }
  std::vector<int64_t> rest(num_clients);
  int64_t max_rest = 0;
  for (size_t k = 0; k < num_clients; ++k) {
    rest[k] = sizes[k] - dominant_count[k];
    max_rest = std::max(max_rest, rest[k]);
    if (rest[k] > 0 && num_classes < 2) {
      throw Error("partition.dominant_share: " + FormatDouble(share) +
                  " leaves samples to draw from other classes, but the data "
                  "has a single class; set partition.dominant_share = 1");
    }
  }
  // Other-class samples are dealt one per client in turn. A client draws
  // class c with weight left[c] / demand[c], where demand[c] is what the
  // clients that may use c (those not dominant in c) still need: a class
  // with more supply than prospective takers drains faster, so no class is
  // left over for clients that cannot take it, and an equal split that uses
  // the whole data set still fills its last clients.
  std::vector<double> left(num_classes);
  std::vector<double> own_need(num_classes, 0.0);  // remaining need of c's dominant clients
  double need_total = 0;
  for (int64_t c = 0; c < num_classes; ++c) {
    left[c] = static_cast<double>(pools[c].size() - taken[c]);
  }
  for (size_t k = 0; k < num_clients; ++k) {
    own_need[static_cast<int64_t>(k) % num_classes] += static_cast<double>(rest[k]);
    need_total += static_cast<double>(rest[k]);
  }
  double slack = -need_total;
  for (int64_t c = 0; c < num_classes; ++c) slack += left[c];
  std::vector<double> weight(num_classes);
  for (int64_t j = 0; j < max_rest; ++j) {
    for (size_t k = 0; k < num_clients; ++k) {
      if (j >= rest[k]) continue;
      const int64_t dominant = static_cast<int64_t>(k) % num_classes;
      double weight_total = 0;
      for (int64_t c = 0; c < num_classes; ++c) {
        const double demand = need_total - own_need[c];
        weight[c] = (c == dominant || left[c] == 0) ? 0.0 : left[c] / demand;
        weight_total += weight[c];
      }
      if (weight_total <= 0) {
        throw Error("partition.dominant_share: the classes other than " +
                    std::to_string(dominant) + " ran out of samples while filling client " +
                    std::to_string(k) + "'s non-dominant share; lower the client sizes "
                    "(partition.size_mean) or raise partition.dominant_share");
      }
      // Samples that will stay unused: `slack`. A class whose remainder
      // exceeds what its possible takers still need by the whole slack must
      // be drawn now, or more than the slack would be stranded.
      int64_t cls = -1;
      for (int64_t c = 0; c < num_classes && cls < 0; ++c) {
        if (weight[c] > 0 && left[c] >= need_total - own_need[c] + slack) cls = c;
      }
      double pick = Uniform01(rng) * weight_total;
      for (int64_t c = 0; c < num_classes && cls < 0; ++c) {
        if (weight[c] == 0) continue;
        if (pick < weight[c]) cls = c;
        pick -= weight[c];
      }
      if (cls < 0) {  // rounding at the top of the range
        for (int64_t c = num_classes - 1; c >= 0 && cls < 0; --c) {
          if (weight[c] > 0) cls = c;
        }
      }
      parts[k].push_back(pools[cls][taken[cls]++]);
      left[cls] -= 1;
      own_need[dominant] -= 1;
      need_total -= 1;
    }
  }
  return parts;
}

}  // namespace

std::vector<std::vector<int64_t>> Partition(const std::vector<int64_t>& labels,
                                            int64_t num_samples,
                                            int64_t num_classes,
                                            int num_clients,
                                            const RunOptions::Partition& options,
                                            uint64_t seed) {
  if (num_clients < 1) {
    throw Error("partition: num_clients is " + std::to_string(num_clients) +
                ", expected at least 1");
  }
  if (num_samples < 0) {
    throw Error("partition: num_samples is " + std::to_string(num_samples) +
                ", expected at least 0");
  }
  if (!labels.empty() && static_cast<int64_t>(labels.size()) != num_samples) {
    throw Error("partition: " + std::to_string(labels.size()) + " labels for " +
                std::to_string(num_samples) + " samples");
  }
  if (!std::isfinite(options.size_mean) || options.size_mean < 0) {
    throw Error("partition.size_mean: " + FormatDouble(options.size_mean) +
                ", expected a finite value >= 0 (0 = equal split)");
  }
  if (!std::isfinite(options.size_sd) || options.size_sd < 0) {
    throw Error("partition.size_sd: " + FormatDouble(options.size_sd) +
                ", expected a finite value >= 0");
  }
  const bool dominant = DominantClasses(options);
  if (dominant) {
    if (labels.empty()) {
      throw Error(
          "partition.kind: the dominant partition needs class labels "
          "(regression data supports only iid)");
    }
    if (num_classes < 1) {
      throw Error("partition: num_classes is " + std::to_string(num_classes) +
                  ", expected at least 1 for the dominant partition");
    }
    if (!(options.dominant_share >= 0 && options.dominant_share <= 1)) {
      throw Error("partition.dominant_share: " + FormatDouble(options.dominant_share) +
                  ", expected a value in [0, 1]");
    }
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] < 0 || labels[i] >= num_classes) {
        throw Error("partition: label " + std::to_string(labels[i]) +
                    " of sample " + std::to_string(i) + " is outside [0, " +
                    std::to_string(num_classes) + ")");
      }
    }
  }

  Rng rng = MakeRng(seed, Stream::kPartition);
  const std::vector<int64_t> sizes =
      ClientSizes(num_samples, num_clients, options, rng);
  if (!dominant) return PartitionIid(num_samples, sizes, rng);
  return PartitionDominant(labels, num_classes, sizes, options.dominant_share,
                           rng);
}

namespace {

int64_t SampledSize(const RunOptions::Partition& options, int64_t num_samples, Rng& rng) {
  const double drawn = std::round(options.size_mean + options.size_sd * StandardNormal(rng));
  return static_cast<int64_t>(std::clamp(drawn, 1.0, static_cast<double>(num_samples)));
}

}  // namespace

SampledPartition::SampledPartition(const std::vector<int64_t>& labels, int64_t num_samples,
                                   int64_t num_classes, const RunOptions::Partition& options,
                                   uint64_t seed)
    : num_samples_(num_samples),
      dominant_(DominantClasses(options)),
      options_(options),
      seed_(seed) {
  if (num_samples < 1) throw Error("partition: the data set is empty");
  if (!std::isfinite(options.size_mean) || options.size_mean < 1) {
    throw Error("partition.size_mean: " + FormatDouble(options.size_mean) +
                ", the sampled partitions need a mean client size >= 1");
  }
  if (!std::isfinite(options.size_sd) || options.size_sd < 0) {
    throw Error("partition.size_sd: " + FormatDouble(options.size_sd) +
                ", expected a finite value >= 0");
  }
  if (!dominant_) return;
  if (labels.empty() || num_classes < 1) {
    throw Error("partition.kind: sampled_dominant needs class labels (use sampled)");
  }
  by_class_.resize(num_classes);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      throw Error("partition: label " + std::to_string(labels[i]) + " of sample " +
                  std::to_string(i) + " is outside [0, " + std::to_string(num_classes) + ")");
    }
    by_class_[labels[i]].push_back(static_cast<int64_t>(i));
  }
  for (int64_t c = 0; c < num_classes; ++c) {
    if (by_class_[c].empty()) {
      throw Error("partition.kind: sampled_dominant: class " + std::to_string(c) +
                  " has no samples to be a client's dominant class");
    }
  }
}

int64_t SampledPartition::Size(int client) const {
  Rng rng = MakeRng(seed_, Stream::kPartition, {static_cast<uint64_t>(client)});
  return SampledSize(options_, num_samples_, rng);
}

std::vector<int64_t> SampledPartition::Indices(int client) const {
  Rng rng = MakeRng(seed_, Stream::kPartition, {static_cast<uint64_t>(client)});
  const int64_t size = SampledSize(options_, num_samples_, rng);
  std::vector<int64_t> indices;
  indices.reserve(size);
  int64_t from_dominant = 0;
  if (dominant_) {
    const auto& pool = by_class_[static_cast<size_t>(client) % by_class_.size()];
    from_dominant = static_cast<int64_t>(std::round(options_.dominant_share * size));
    for (int64_t i = 0; i < from_dominant; ++i) indices.push_back(pool[UniformIndex(rng, pool.size())]);
  }
  for (int64_t i = from_dominant; i < size; ++i) {
    indices.push_back(static_cast<int64_t>(UniformIndex(rng, static_cast<uint64_t>(num_samples_))));
  }
  return indices;
}

}  // namespace fedprof
