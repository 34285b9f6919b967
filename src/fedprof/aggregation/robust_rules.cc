#include "fedprof/aggregation/robust.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fedprof/core/error.h"

// The arithmetic of each robust rule and stage on models in canonical order
// (robust.h's pieces); robust.cc composes them into aggregators.
namespace fedprof {
namespace {

// The middle value, or the mean of the two middle ones; 0 for none.
double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

// The n × n squared Euclidean distances between the models (row-major),
// each summed in coordinate order.
std::vector<double> SquaredDistances(const std::vector<const ClientUpdate*>& updates) {
  const size_t n = updates.size();
  const size_t d = n > 0 ? updates[0]->params.size() : 0;
  std::vector<double> dist(n * n, 0.0);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      double s = 0;
      const FlatParams& x = updates[a]->params;
      const FlatParams& y = updates[b]->params;
      for (size_t i = 0; i < d; ++i) {
        const double diff = static_cast<double>(x[i]) - y[i];
        s += diff * diff;
      }
      dist[a * n + b] = dist[b * n + a] = s;
    }
  }
  return dist;
}

}  // namespace

FlatParams MeanOf(const std::vector<const ClientUpdate*>& updates, std::vector<size_t> positions) {
  std::sort(positions.begin(), positions.end());
  const size_t d = updates[0]->params.size();
  FlatParams mean(d);
  for (size_t i = 0; i < d; ++i) {
    double s = 0;
    for (size_t k : positions) s += updates[k]->params[i];
    mean[i] = static_cast<float>(s / static_cast<double>(positions.size()));
  }
  return mean;
}

int BulyanByzantine(int requested, size_t n) {
  const int most = n >= 3 ? static_cast<int>((n - 3) / 4) : 0;  // largest f with n >= 4f + 3
  return requested < 0 ? most : std::min(requested, most);
}

FlatParams Bulyan(const std::vector<const ClientUpdate*>& updates, int byzantine) {
  const size_t n = updates.size();
  if (n == 0) return {};
  const size_t f = static_cast<size_t>(std::max(0, byzantine));
  // Selection: Krum on what is left, n − 2f times (at least once).
  const size_t picks = n > 2 * f ? n - 2 * f : 1;
  std::vector<const ClientUpdate*> left = updates, chosen;
  while (chosen.size() < picks) {
    const size_t k = KrumSelection(left, EffectiveByzantine(static_cast<int>(f), left.size()), 1)[0];
    chosen.push_back(left[k]);
    left.erase(left.begin() + static_cast<std::ptrdiff_t>(k));
  }
  // Aggregation: per coordinate, the β closest to the median, averaged.
  const size_t beta = picks > 2 * f ? picks - 2 * f : 1;
  const size_t d = updates[0]->params.size();
  FlatParams out(d);
  std::vector<float> column(picks);
  std::vector<std::pair<double, float>> by_distance(picks);
  for (size_t i = 0; i < d; ++i) {
    for (size_t k = 0; k < picks; ++k) column[k] = chosen[k]->params[i];
    std::sort(column.begin(), column.end());
    const double median = picks % 2 == 1
                              ? column[picks / 2]
                              : (static_cast<double>(column[picks / 2 - 1]) + column[picks / 2]) / 2.0;
    for (size_t k = 0; k < picks; ++k) by_distance[k] = {std::fabs(column[k] - median), column[k]};
    // Ties by value: the result depends on the values alone.
    std::sort(by_distance.begin(), by_distance.end());
    double s = 0;
    for (size_t k = 0; k < beta; ++k) s += by_distance[k].second;
    out[i] = static_cast<float>(s / static_cast<double>(beta));
  }
  return out;
}

FlatParams CenteredClipping(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                            const CenteredClippingOptions& options, const std::vector<double>* start) {
  const size_t n = updates.size(), d = global.size();
  if (n == 0) return global;
  if (start && start->size() != d) {
    throw Error("centered_clipping: a start of " + std::to_string(start->size()) + " values for a model of " +
                std::to_string(d));
  }
  std::vector<std::vector<double>> deltas(n, std::vector<double>(d));
  for (size_t k = 0; k < n; ++k) {
    for (size_t i = 0; i < d; ++i) deltas[k][i] = static_cast<double>(updates[k]->params[i]) - global[i];
  }
  std::vector<double> v = start ? *start : std::vector<double>(d, 0.0), step(d);
  std::vector<double> distance(n);
  for (int it = 0; it < std::max(1, options.iterations); ++it) {
    for (size_t k = 0; k < n; ++k) {
      double s = 0;
      for (size_t i = 0; i < d; ++i) s += (deltas[k][i] - v[i]) * (deltas[k][i] - v[i]);
      distance[k] = std::sqrt(s);
    }
    double tau = options.radius;
    if (tau <= 0) tau = Median(distance);
    std::fill(step.begin(), step.end(), 0.0);
    for (size_t k = 0; k < n; ++k) {
      const double keep = distance[k] > tau ? tau / distance[k] : 1.0;
      for (size_t i = 0; i < d; ++i) step[i] += (deltas[k][i] - v[i]) * keep;
    }
    for (size_t i = 0; i < d; ++i) v[i] += step[i] / static_cast<double>(n);
  }
  FlatParams out(d);
  for (size_t i = 0; i < d; ++i) out[i] = static_cast<float>(global[i] + v[i]);
  return out;
}

FlatParams FlTrust(const FlatParams& global, const FlatParams& root,
                   const std::vector<const ClientUpdate*>& updates, std::vector<double>* trust,
                   FlTrustScale scale) {
  const size_t d = global.size();
  std::vector<double> g0(d);
  double norm0 = 0;
  for (size_t i = 0; i < d; ++i) {
    g0[i] = static_cast<double>(root[i]) - global[i];
    norm0 += g0[i] * g0[i];
  }
  norm0 = std::sqrt(norm0);
  std::vector<double> dots, norms;
  for (const ClientUpdate* u : updates) {
    double dot = 0, norm = 0;
    for (size_t i = 0; i < d; ++i) {
      const double g = static_cast<double>(u->params[i]) - global[i];
      dot += g * g0[i];
      norm += g * g;
    }
    dots.push_back(dot);
    norms.push_back(std::sqrt(norm));
  }
  const double target = scale == FlTrustScale::kRoot ? norm0 : Median(norms);
  std::vector<double> sum(d, 0.0);
  double total_trust = 0;
  if (trust) trust->clear();
  for (size_t k = 0; k < updates.size(); ++k) {
    const ClientUpdate* u = updates[k];
    const double norm = norms[k];
    const double ts = norm > 0 && norm0 > 0 ? std::max(0.0, dots[k] / (norm * norm0)) : 0.0;  // Eq. 2
    if (trust) trust->push_back(ts);
    if (ts <= 0) continue;
    total_trust += ts;
    const double rescale = ts * target / norm;  // Eq. 3, weighted by TS_k (Eq. 4)
    for (size_t i = 0; i < d; ++i) sum[i] += rescale * (static_cast<double>(u->params[i]) - global[i]);
  }
  FlatParams out(d);
  for (size_t i = 0; i < d; ++i) {
    out[i] = static_cast<float>(global[i] + (total_trust > 0 ? sum[i] / total_trust : 0.0));
  }
  return out;
}

FlatParams Flame(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                 double noise_factor, Rng* noise, std::vector<char>* admitted) {
  const size_t n = updates.size(), d = global.size();
  if (n == 0) return global;
  std::vector<std::vector<double>> deltas(n, std::vector<double>(d));
  std::vector<double> norms(n);
  for (size_t k = 0; k < n; ++k) {
    double s = 0;
    for (size_t i = 0; i < d; ++i) {
      deltas[k][i] = static_cast<double>(updates[k]->params[i]) - global[i];
      s += deltas[k][i] * deltas[k][i];
    }
    norms[k] = std::sqrt(s);
  }
  // Cosine distances; a zero update is at distance 1 from every other.
  std::vector<double> distances(n * n, 0.0);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      double dot = 0;
      for (size_t i = 0; i < d; ++i) dot += deltas[a][i] * deltas[b][i];
      const double cosine = norms[a] > 0 && norms[b] > 0 ? dot / (norms[a] * norms[b]) : 0.0;
      distances[a * n + b] = distances[b * n + a] = 1.0 - cosine;
    }
  }
  const std::vector<char> kept = FirstComponentOfSize(distances, n, n / 2 + 1);
  if (admitted) *admitted = kept;
  const double bound = Median(norms);  // S_t, over all n
  std::vector<double> sum(d, 0.0);
  size_t count = 0;
  for (size_t k = 0; k < n; ++k) {
    if (!kept[k]) continue;
    ++count;
    const double keep = norms[k] > bound ? bound / norms[k] : 1.0;
    for (size_t i = 0; i < d; ++i) sum[i] += deltas[k][i] * keep;
  }
  const double sigma = noise_factor * bound;
  FlatParams out(d);
  for (size_t i = 0; i < d; ++i) {
    const double z = noise && sigma > 0 ? sigma * StandardNormal(*noise) : 0.0;
    out[i] = static_cast<float>(global[i] + sum[i] / static_cast<double>(count) + z);
  }
  return out;
}

int ZenoByzantine(int requested, size_t n) {
  if (n == 0) return 0;
  const int most = static_cast<int>(n) - 1;
  return requested < 0 ? static_cast<int>(n / 2) : std::min(requested, most);
}

std::vector<double> ZenoScores(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                               double global_loss, const std::vector<double>& losses, double rho) {
  std::vector<double> scores;
  for (size_t k = 0; k < updates.size(); ++k) {
    double norm2 = 0;
    for (size_t i = 0; i < global.size(); ++i) {
      const double g = static_cast<double>(updates[k]->params[i]) - global[i];
      norm2 += g * g;
    }
    scores.push_back(global_loss - losses[k] - rho * norm2);  // Def. 1
  }
  return scores;
}

FlatParams Zeno(const std::vector<const ClientUpdate*>& updates, const std::vector<double>& scores,
                size_t keep) {
  const size_t n = updates.size();
  if (n == 0) return {};
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  order.resize(std::clamp<size_t>(keep, 1, n));
  return MeanOf(updates, order);
}

std::vector<char> FirstComponentOfSize(const std::vector<double>& distances, size_t n, size_t size) {
  std::vector<char> member(n, 0);
  if (n == 0) return member;
  if (size <= 1) {
    member[0] = 1;
    return member;
  }
  struct Edge {
    double distance;
    size_t a, b;
  };
  std::vector<Edge> edges;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) edges.push_back({distances[a * n + b], a, b});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) {
    if (x.distance != y.distance) return x.distance < y.distance;
    return x.a != y.a ? x.a < y.a : x.b < y.b;
  });
  std::vector<size_t> parent(n), count(n, 1);
  std::iota(parent.begin(), parent.end(), size_t{0});
  const auto root = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (const Edge& e : edges) {
    size_t a = root(e.a), b = root(e.b);
    if (a == b) continue;
    if (a > b) std::swap(a, b);
    parent[b] = a;
    count[a] += count[b];
    if (count[a] >= size) {
      for (size_t k = 0; k < n; ++k) member[k] = root(k) == a;
      return member;
    }
  }
  std::fill(member.begin(), member.end(), 1);  // fewer than `size` points
  return member;
}

std::vector<ClientUpdate> Bucketing(const std::vector<const ClientUpdate*>& updates, int bucket_size,
                                    Rng& rng) {
  const size_t n = updates.size();
  const size_t s = static_cast<size_t>(std::max(1, bucket_size));
  const std::vector<int64_t> order = Permutation(rng, static_cast<int64_t>(n));
  std::vector<ClientUpdate> buckets;
  for (size_t first = 0; first < n; first += s) {
    const size_t last = std::min(n, first + s);
    ClientUpdate bucket;
    bucket.client_id = static_cast<int>(buckets.size());
    const size_t d = updates[static_cast<size_t>(order[first])]->params.size();
    std::vector<double> sum(d, 0.0);
    for (size_t k = first; k < last; ++k) {
      const ClientUpdate* u = updates[static_cast<size_t>(order[k])];
      bucket.num_samples += u->num_samples;
      for (size_t i = 0; i < d; ++i) sum[i] += u->params[i];
    }
    bucket.params.resize(d);
    const double size = static_cast<double>(last - first);
    for (size_t i = 0; i < d; ++i) bucket.params[i] = static_cast<float>(sum[i] / size);
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

int MixingByzantine(int requested, size_t n) {
  const int most = n >= 1 ? static_cast<int>((n - 1) / 2) : 0;
  return requested < 0 ? most : std::min(requested, most);
}

std::vector<ClientUpdate> NearestNeighbourMixing(const std::vector<const ClientUpdate*>& updates,
                                                 int byzantine) {
  const size_t n = updates.size();
  std::vector<ClientUpdate> mixed;
  if (n == 0) return mixed;
  const size_t d = updates[0]->params.size();
  const size_t keep = n - static_cast<size_t>(std::clamp(byzantine, 0, static_cast<int>(n) - 1));
  const std::vector<double> dist = SquaredDistances(updates);
  std::vector<size_t> by_distance(n);
  for (size_t a = 0; a < n; ++a) {
    std::iota(by_distance.begin(), by_distance.end(), size_t{0});
    // Itself first (distance 0), then nearest; ties to the lower position.
    std::stable_sort(by_distance.begin(), by_distance.end(), [&](size_t x, size_t y) {
      if (x == a || y == a) return x == a && y != a;
      return dist[a * n + x] < dist[a * n + y];
    });
    std::vector<size_t> chosen(by_distance.begin(), by_distance.begin() + static_cast<std::ptrdiff_t>(keep));
    std::sort(chosen.begin(), chosen.end());  // summed in canonical order
    ClientUpdate u;
    u.client_id = updates[a]->client_id;
    u.num_samples = updates[a]->num_samples;
    u.params.resize(d);
    for (size_t i = 0; i < d; ++i) {
      double s = 0;
      for (size_t k : chosen) s += updates[k]->params[i];
      u.params[i] = static_cast<float>(s / static_cast<double>(keep));
    }
    mixed.push_back(std::move(u));
  }
  return mixed;
}

std::vector<const ClientUpdate*> CanonicalOrder(const std::vector<ClientUpdate>& updates) {
  std::vector<const ClientUpdate*> order;
  order.reserve(updates.size());
  for (const ClientUpdate& u : updates) order.push_back(&u);
  // Client ids are unique within a round; the rest only makes the order
  // total whatever the caller passes.
  std::sort(order.begin(), order.end(), [](const ClientUpdate* a, const ClientUpdate* b) {
    if (a->client_id != b->client_id) return a->client_id < b->client_id;
    if (a->num_samples != b->num_samples) return a->num_samples < b->num_samples;
    return a->params < b->params;
  });
  return order;
}

FlatParams CoordinateMedian(const std::vector<const ClientUpdate*>& updates) {
  const size_t n = updates.size();
  if (n == 0) return {};
  const size_t d = updates[0]->params.size();
  FlatParams out(d);
  std::vector<float> column(n);
  for (size_t i = 0; i < d; ++i) {
    for (size_t k = 0; k < n; ++k) column[k] = updates[k]->params[i];
    std::sort(column.begin(), column.end());
    out[i] = n % 2 == 1 ? column[n / 2]
                        : static_cast<float>(
                              (static_cast<double>(column[n / 2 - 1]) + column[n / 2]) / 2.0);
  }
  return out;
}

FlatParams TrimmedMean(const std::vector<const ClientUpdate*>& updates, double trim_share) {
  const size_t n = updates.size();
  if (n == 0) return {};
  if (!(trim_share >= 0 && trim_share < 0.5)) {
    throw Error("robust.trim_share: " + std::to_string(trim_share) + " is not in [0, 0.5)");
  }
  // ⌊βn⌋ from each end (the tolerance absorbs βn = 2.9999999999999996 for
  // β = 0.3, n = 10), and at least one value left.
  size_t cut = static_cast<size_t>(std::floor(trim_share * static_cast<double>(n) + 1e-9));
  cut = std::min(cut, (n - 1) / 2);
  const size_t d = updates[0]->params.size();
  FlatParams out(d);
  std::vector<float> column(n);
  const double kept = static_cast<double>(n - 2 * cut);
  for (size_t i = 0; i < d; ++i) {
    for (size_t k = 0; k < n; ++k) column[k] = updates[k]->params[i];
    std::sort(column.begin(), column.end());
    double s = 0;
    for (size_t k = cut; k < n - cut; ++k) s += column[k];
    out[i] = static_cast<float>(s / kept);
  }
  return out;
}

int EffectiveByzantine(int requested, size_t n) {
  const int most = n >= 3 ? static_cast<int>((n - 3) / 2) : 0;  // largest f with n > 2f + 2
  return requested < 0 ? most : std::min(requested, most);
}

std::vector<double> KrumScores(const std::vector<const ClientUpdate*>& updates, int byzantine) {
  const size_t n = updates.size();
  if (n == 0) return {};
  const std::vector<double> dist = SquaredDistances(updates);
  // n − f − 2 neighbours (Blanchard et al. 2017, Sec. 4); none with n < 3.
  const long neighbours = std::max(0L, static_cast<long>(n) - byzantine - 2);
  std::vector<double> scores(n, 0.0);
  std::vector<double> row;
  for (size_t a = 0; a < n; ++a) {
    row.clear();
    for (size_t b = 0; b < n; ++b) {
      if (b != a) row.push_back(dist[a * n + b]);
    }
    std::sort(row.begin(), row.end());
    double s = 0;
    for (long k = 0; k < neighbours && k < static_cast<long>(row.size()); ++k) s += row[k];
    scores[a] = s;
  }
  return scores;
}

std::vector<size_t> KrumSelection(const std::vector<const ClientUpdate*>& updates, int byzantine,
                                  size_t select) {
  const std::vector<double> scores = KrumScores(updates, byzantine);
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  order.resize(std::min(std::max<size_t>(select, 1), order.size()));
  return order;
}

}  // namespace fedprof
