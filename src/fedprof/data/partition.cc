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

bool LabelSkew(const RunOptions::Partition& options) {
  return options.kind != "iid" && options.kind != "sampled" && options.kind != "given";
}

bool DominantClasses(const RunOptions::Partition& options) {
  return options.kind == "dominant" || options.kind == "sampled_dominant";
}

bool SampledClients(const RunOptions::Partition& options) {
  return options.kind.rfind("sampled", 0) == 0;
}

std::vector<int64_t> ClientClasses(int k, int64_t num_classes, int64_t classes, Rng& rng) {
  std::vector<int64_t> held{static_cast<int64_t>(k) % num_classes};
  while (static_cast<int64_t>(held.size()) < classes) {
    const auto c = static_cast<int64_t>(UniformIndex(rng, static_cast<uint64_t>(num_classes)));
    if (std::find(held.begin(), held.end(), c) == held.end()) held.push_back(c);
  }
  return held;
}

namespace {

// Redraws of a Dirichlet partition or of Dirichlet sizes before giving up.
constexpr int kMaxDraws = 1000;

// `values` cut into `pieces` consecutive runs whose lengths differ by at
// most one, the longer first (numpy's array_split).
std::vector<std::vector<int64_t>> SplitEvenly(const std::vector<int64_t>& values, size_t pieces) {
  std::vector<std::vector<int64_t>> out(pieces);
  const size_t base = values.size() / pieces, longer = values.size() % pieces;
  auto it = values.begin();
  for (size_t i = 0; i < pieces; ++i) {
    const size_t len = base + (i < longer ? 1 : 0);
    out[i].assign(it, it + static_cast<std::ptrdiff_t>(len));
    it += static_cast<std::ptrdiff_t>(len);
  }
  return out;
}

// Where shares `p` (summing to 1) cut `len` items: the first n - 1 of
// floor(cumsum(p) * len), as Li et al.'s code cuts them, then len.
std::vector<int64_t> CutPoints(const std::vector<double>& p, int64_t len) {
  std::vector<int64_t> cuts(p.size());
  double cumulative = 0;
  for (size_t j = 0; j + 1 < p.size(); ++j) {
    cumulative += p[j];
    cuts[j] = std::min(len, static_cast<int64_t>(cumulative * static_cast<double>(len)));
  }
  cuts.back() = len;
  return cuts;
}

// Client sizes of partition.sizes = dirichlet: shares of the data set ~
// Dir(beta), redrawn until every client holds min_size (Li et al. 2022's
// quantity skew).
std::vector<int64_t> DirichletSizes(int64_t num_samples, int num_clients,
                                    const RunOptions::Partition& options, Rng& rng) {
  int64_t smallest = 0;
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    const std::vector<int64_t> cuts =
        CutPoints(SymmetricDirichlet(rng, options.beta, static_cast<size_t>(num_clients)), num_samples);
    std::vector<int64_t> sizes(cuts.size());
    for (size_t k = 0; k < cuts.size(); ++k) sizes[k] = cuts[k] - (k == 0 ? 0 : cuts[k - 1]);
    smallest = *std::min_element(sizes.begin(), sizes.end());
    if (smallest >= std::max<int64_t>(options.min_size, 1)) return sizes;
  }
  throw Error("partition.min_size: no client sizes ~ Dir(beta = " + FormatDouble(options.beta) + ") of " +
              std::to_string(num_samples) + " samples over " + std::to_string(num_clients) +
              " clients gave every client " + std::to_string(std::max<int64_t>(options.min_size, 1)) +
              " samples in " + std::to_string(kMaxDraws) + " draws (the last smallest: " +
              std::to_string(smallest) + "); raise partition.beta or lower partition.min_size");
}

std::vector<int64_t> ClientSizes(int64_t num_samples, int num_clients,
                                 const RunOptions::Partition& options, Rng& rng) {
  if (options.sizes == "dirichlet") return DirichletSizes(num_samples, num_clients, options, rng);
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

std::vector<std::vector<int64_t>> ClassPools(const std::vector<int64_t>& labels, int64_t num_classes) {
  std::vector<std::vector<int64_t>> pools(static_cast<size_t>(num_classes));
  for (size_t i = 0; i < labels.size(); ++i) pools[labels[i]].push_back(static_cast<int64_t>(i));
  return pools;
}

// Li et al. 2022, Sec. IV-B and their partition code: per class, shares over
// the clients ~ Dir(beta), none to a client already holding N / n samples,
// the class's shuffled samples cut at floor(cumsum(shares) * size); the
// whole partition redrawn until every client holds min_size samples.
std::vector<std::vector<int64_t>> PartitionDirichlet(const std::vector<int64_t>& labels, int64_t num_classes,
                                                     int num_clients, const RunOptions::Partition& options,
                                                     Rng& rng) {
  const std::vector<std::vector<int64_t>> pools = ClassPools(labels, num_classes);
  const double cap = static_cast<double>(labels.size()) / num_clients;
  size_t smallest = 0;
  for (int draw = 0; draw < kMaxDraws; ++draw) {
    std::vector<std::vector<int64_t>> parts(static_cast<size_t>(num_clients));
    for (std::vector<int64_t> pool : pools) {
      Shuffle(pool, rng);
      std::vector<double> p = SymmetricDirichlet(rng, options.beta, parts.size());
      double total = 0;
      for (size_t j = 0; j < p.size(); ++j) {
        if (static_cast<double>(parts[j].size()) >= cap) p[j] = 0;
        total += p[j];
      }
      // Clients short of N / n exist while samples are left to deal.
      if (total <= 0) throw Error("partition: every client is full with samples left (internal)");
      for (double& v : p) v /= total;
      const std::vector<int64_t> cuts = CutPoints(p, static_cast<int64_t>(pool.size()));
      int64_t from = 0;
      for (size_t j = 0; j < parts.size(); ++j) {
        parts[j].insert(parts[j].end(), pool.begin() + from, pool.begin() + cuts[j]);
        from = cuts[j];
      }
    }
    smallest = parts[0].size();
    for (const auto& part : parts) smallest = std::min(smallest, part.size());
    if (static_cast<int64_t>(smallest) >= options.min_size) {
      for (auto& part : parts) Shuffle(part, rng);
      return parts;
    }
  }
  throw Error("partition.min_size: no partition of " + std::to_string(labels.size()) + " samples over " +
              std::to_string(num_clients) + " clients with class shares ~ Dir(beta = " +
              FormatDouble(options.beta) + ") gave every client " + std::to_string(options.min_size) +
              " samples in " + std::to_string(kMaxDraws) + " draws (the last smallest: " +
              std::to_string(smallest) + "); raise partition.beta, lower partition.min_size or use fewer "
              "clients");
}

// Li et al. 2022's #C = k: client i holds ClientClasses(i) (first label
// i mod K); each class's shuffled samples are split evenly among the clients
// holding it, in client order. A class no client holds is left out.
std::vector<std::vector<int64_t>> PartitionClasses(const std::vector<int64_t>& labels, int64_t num_classes,
                                                   int num_clients, int64_t classes, Rng& rng) {
  if (classes > num_classes) {
    throw Error("partition.classes: " + std::to_string(classes) + " labels a client, but the data has " +
                std::to_string(num_classes) + " classes");
  }
  std::vector<std::vector<int>> holders(static_cast<size_t>(num_classes));
  for (int k = 0; k < num_clients; ++k) {
    for (int64_t c : ClientClasses(k, num_classes, classes, rng)) holders[c].push_back(k);
  }
  std::vector<std::vector<int64_t>> parts(static_cast<size_t>(num_clients));
  std::vector<std::vector<int64_t>> pools = ClassPools(labels, num_classes);
  for (int64_t c = 0; c < num_classes; ++c) {
    if (holders[c].empty()) continue;
    Shuffle(pools[c], rng);
    const std::vector<std::vector<int64_t>> split = SplitEvenly(pools[c], holders[c].size());
    for (size_t j = 0; j < split.size(); ++j) {
      std::vector<int64_t>& part = parts[holders[c][j]];
      part.insert(part.end(), split[j].begin(), split[j].end());
    }
  }
  for (int k = 0; k < num_clients; ++k) {
    if (parts[k].empty()) {
      throw Error("partition.classes: client " + std::to_string(k) + " holds no sample: its " +
                  std::to_string(classes) + " labels have too few samples for the " +
                  std::to_string(num_clients) + " clients; use fewer clients or more labels a client");
    }
  }
  return parts;
}

// McMahan et al. 2017, Sec. 3: the samples sorted by label (in a seeded
// order within a label), cut into shards * n shards of (nearly) equal size,
// `shards` of them, drawn without replacement, to each client.
std::vector<std::vector<int64_t>> PartitionShards(const std::vector<int64_t>& labels, int num_clients,
                                                  int64_t shards, Rng& rng) {
  const int64_t total = shards * num_clients;
  if (total > static_cast<int64_t>(labels.size())) {
    throw Error("partition.shards: " + std::to_string(shards) + " shards for each of " +
                std::to_string(num_clients) + " clients need " + std::to_string(total) +
                " samples, the data set has " + std::to_string(labels.size()));
  }
  std::vector<int64_t> order = Permutation(rng, static_cast<int64_t>(labels.size()));
  std::stable_sort(order.begin(), order.end(),
                   [&labels](int64_t a, int64_t b) { return labels[a] < labels[b]; });
  const std::vector<std::vector<int64_t>> pieces = SplitEvenly(order, static_cast<size_t>(total));
  const std::vector<int64_t> deal = Permutation(rng, total);
  std::vector<std::vector<int64_t>> parts(static_cast<size_t>(num_clients));
  for (int64_t s = 0; s < total; ++s) {
    std::vector<int64_t>& part = parts[s / shards];
    part.insert(part.end(), pieces[deal[s]].begin(), pieces[deal[s]].end());
  }
  return parts;
}

void CheckLabels(const std::vector<int64_t>& labels, int64_t num_classes) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      throw Error("partition: label " + std::to_string(labels[i]) + " of sample " + std::to_string(i) +
                  " is outside [0, " + std::to_string(num_classes) + ")");
    }
  }
}

// The size options that a kind ignores are refused, not dropped.
void CheckSizeOptions(const RunOptions::Partition& options) {
  const std::string& kind = options.kind;
  const bool sized_by_kind = kind == "dirichlet" || kind == "classes" || kind == "shards";
  if (sized_by_kind && (options.size_mean != 0 || options.sizes == "dirichlet")) {
    throw Error("partition.kind: " + kind + " decides the client sizes itself; leave partition.size_mean 0 "
                "and partition.sizes = normal");
  }
  if (options.sizes == "dirichlet" && kind != "iid" && kind != "dominant") {
    throw Error("partition.sizes: dirichlet sizes share out the data set, for partition.kind iid or "
                "dominant, not " + kind);
  }
  if (options.sizes == "dirichlet" && options.size_mean != 0) {
    throw Error("partition.size_mean: partition.sizes = dirichlet draws the sizes itself; leave "
                "size_mean 0");
  }
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
  CheckSizeOptions(options);
  if (LabelSkew(options)) {
    if (labels.empty()) {
      throw Error("partition.kind: the " + options.kind +
                  " partition needs class labels (regression data supports only iid)");
    }
    if (num_classes < 1) {
      throw Error("partition: num_classes is " + std::to_string(num_classes) +
                  ", expected at least 1 for the " + options.kind + " partition");
    }
    if (!(options.dominant_share >= 0 && options.dominant_share <= 1)) {
      throw Error("partition.dominant_share: " + FormatDouble(options.dominant_share) +
                  ", expected a value in [0, 1]");
    }
    CheckLabels(labels, num_classes);
  }

  Rng rng = MakeRng(seed, Stream::kPartition);
  if (options.kind == "dirichlet") return PartitionDirichlet(labels, num_classes, num_clients, options, rng);
  if (options.kind == "classes") return PartitionClasses(labels, num_classes, num_clients, options.classes, rng);
  if (options.kind == "shards") return PartitionShards(labels, num_clients, options.shards, rng);
  const std::vector<int64_t> sizes =
      ClientSizes(num_samples, num_clients, options, rng);
  if (!DominantClasses(options)) return PartitionIid(num_samples, sizes, rng);
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
    : num_samples_(num_samples), options_(options), seed_(seed) {
  if (num_samples < 1) throw Error("partition: the data set is empty");
  if (!std::isfinite(options.size_mean) || options.size_mean < 1) {
    throw Error("partition.size_mean: " + FormatDouble(options.size_mean) +
                ", the sampled partitions need a mean client size >= 1");
  }
  if (!std::isfinite(options.size_sd) || options.size_sd < 0) {
    throw Error("partition.size_sd: " + FormatDouble(options.size_sd) +
                ", expected a finite value >= 0");
  }
  if (options.sizes == "dirichlet") {
    throw Error("partition.sizes: the sampled partitions draw sizes from partition.size_mean and "
                "size_sd (sizes = normal), not dirichlet");
  }
  if (!LabelSkew(options)) return;
  if (labels.empty() || num_classes < 1) {
    throw Error("partition.kind: " + options.kind + " needs class labels (use sampled)");
  }
  if (options.kind == "sampled_classes" && options.classes > num_classes) {
    throw Error("partition.classes: " + std::to_string(options.classes) +
                " labels a client, but the data has " + std::to_string(num_classes) + " classes");
  }
  CheckLabels(labels, num_classes);
  by_class_ = ClassPools(labels, num_classes);
  for (int64_t c = 0; c < num_classes; ++c) {
    if (!by_class_[c].empty()) nonempty_.push_back(c);
  }
  // A client of any class may be asked for; a Dirichlet draw skips the
  // empty classes instead.
  for (int64_t c = 0; c < num_classes && options.kind != "sampled_dirichlet"; ++c) {
    if (by_class_[c].empty()) {
      throw Error("partition.kind: " + options.kind + ": class " + std::to_string(c) +
                  " has no samples for the clients that hold it");
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
  const auto from_class = [&](size_t c) {
    const std::vector<int64_t>& pool = by_class_[c];
    indices.push_back(pool[UniformIndex(rng, pool.size())]);
  };
  const std::string& kind = options_.kind;
  int64_t from_whole_set = size;
  if (kind == "sampled_dominant") {
    const size_t dominant = static_cast<size_t>(client) % by_class_.size();
    const auto from_dominant = static_cast<int64_t>(std::round(options_.dominant_share * size));
    for (int64_t i = 0; i < from_dominant; ++i) from_class(dominant);
    from_whole_set = size - from_dominant;
  } else if (kind == "sampled_dirichlet") {
    // The client's own label proportions over the classes that have
    // samples, from its stream after its size.
    const std::vector<double> p = SymmetricDirichlet(rng, options_.beta, nonempty_.size());
    for (int64_t i = 0; i < size; ++i) {
      double pick = Uniform01(rng);
      size_t j = 0;
      for (; j + 1 < p.size() && pick >= p[j]; ++j) pick -= p[j];
      from_class(static_cast<size_t>(nonempty_[j]));
    }
    from_whole_set = 0;
  } else if (kind == "sampled_classes") {
    const std::vector<int64_t> held =
        ClientClasses(client, static_cast<int64_t>(by_class_.size()), options_.classes, rng);
    for (int64_t i = 0; i < size; ++i) from_class(static_cast<size_t>(held[UniformIndex(rng, held.size())]));
    from_whole_set = 0;
  }
  for (int64_t i = size - from_whole_set; i < size; ++i) {
    indices.push_back(static_cast<int64_t>(UniformIndex(rng, static_cast<uint64_t>(num_samples_))));
  }
  return indices;
}

std::vector<std::vector<int64_t>> LabelCounts(const std::vector<std::vector<int64_t>>& parts,
                                              const std::vector<int64_t>& labels, int64_t num_classes) {
  std::vector<std::vector<int64_t>> counts(parts.size(), std::vector<int64_t>(static_cast<size_t>(num_classes)));
  for (size_t k = 0; k < parts.size(); ++k) {
    for (int64_t i : parts[k]) counts[k][static_cast<size_t>(labels[i])] += 1;
  }
  return counts;
}

double MeanJsDivergence(const std::vector<std::vector<int64_t>>& counts) {
  if (counts.empty()) return 0;
  std::vector<double> pooled(counts[0].size(), 0.0);
  double total = 0;
  for (const auto& row : counts) {
    for (size_t c = 0; c < row.size() && c < pooled.size(); ++c) {
      pooled[c] += static_cast<double>(row[c]);
      total += static_cast<double>(row[c]);
    }
  }
  if (total <= 0) return 0;
  for (double& v : pooled) v /= total;
  // KL(a || m) in bits, terms with a = 0 contributing 0.
  const auto kl = [](double a, double m) { return a > 0 ? a * std::log2(a / m) : 0.0; };
  double sum = 0;
  int64_t clients = 0;
  for (const auto& row : counts) {
    double held = 0;
    for (int64_t v : row) held += static_cast<double>(v);
    if (held <= 0) continue;
    double js = 0;
    for (size_t c = 0; c < pooled.size(); ++c) {
      const double q = c < row.size() ? static_cast<double>(row[c]) / held : 0.0;
      const double m = 0.5 * (q + pooled[c]);
      js += 0.5 * kl(q, m) + 0.5 * kl(pooled[c], m);
    }
    sum += js;
    ++clients;
  }
  return clients > 0 ? sum / static_cast<double>(clients) : 0.0;
}

}  // namespace fedprof
