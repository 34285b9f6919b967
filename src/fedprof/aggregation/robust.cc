#include "fedprof/aggregation/robust.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"

namespace fedprof {
namespace {

void CheckUpdates(const FlatParams& global, const std::vector<ClientUpdate>& updates) {
  for (const ClientUpdate& u : updates) {
    if (u.params.size() != global.size()) {
      throw Error("aggregation: client " + std::to_string(u.client_id) + "'s model has " +
                  std::to_string(u.params.size()) + " values, the global model " +
                  std::to_string(global.size()));
    }
  }
}

// θ' from the robust estimate ŵ (robust.h): ŵ itself (partial), or a step
// from θ towards it of the share of |D| the round's results claim (full).
void StepTowards(AggregationMode mode, const FlatParams& global, const FlatParams& estimate,
                 int64_t round_samples, int64_t total_samples, FlatParams* next) {
  if (mode == AggregationMode::kPartial) {
    *next = estimate;
    return;
  }
  if (total_samples <= 0) {
    if (next != &global) *next = global;
    return;
  }
  // Claims in a deployment could exceed |D|; the step never passes ŵ.
  const double share =
      std::min(1.0, static_cast<double>(round_samples) / static_cast<double>(total_samples));
  const size_t n = global.size();
  next->resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double step = share * (static_cast<double>(estimate[i]) - global[i]);
    (*next)[i] = static_cast<float>(global[i] + step);
  }
}

// The skeleton every robust rule shares: canonical order, the estimate,
// then the step of the aggregation mode.
class RobustAggregator : public Aggregator {
 public:
  RobustAggregator(std::string name, AggregationMode mode) : name_(std::move(name)), mode_(mode) {}

  bool NeedsUpdates() const override { return true; }

  void Aggregate(const FlatParams&, const ModelSum&, int64_t, FlatParams*) override {
    throw Error("aggregation: " + name_ + " needs each client's model, not their sum");
  }

  void AggregateUpdates(const FlatParams& global, const std::vector<ClientUpdate>& updates,
                        int64_t total_samples, FlatParams* next) override {
    CheckUpdates(global, updates);
    if (updates.empty()) {
      if (next != &global) *next = global;
      return;
    }
    int64_t round_samples = 0;
    for (const ClientUpdate& u : updates) round_samples += u.num_samples;
    const FlatParams estimate = Estimate(CanonicalOrder(updates));
    StepTowards(mode_, global, estimate, round_samples, total_samples, next);
  }

 protected:
  // ŵ from at least one model, in canonical order.
  virtual FlatParams Estimate(const std::vector<const ClientUpdate*>& updates) const = 0;

 private:
  std::string name_;
  AggregationMode mode_;
};

class MedianAggregator : public RobustAggregator {
 public:
  explicit MedianAggregator(AggregationMode mode) : RobustAggregator("median", mode) {}

 protected:
  FlatParams Estimate(const std::vector<const ClientUpdate*>& updates) const override {
    return CoordinateMedian(updates);
  }
};

class TrimmedMeanAggregator : public RobustAggregator {
 public:
  TrimmedMeanAggregator(AggregationMode mode, double trim_share)
      : RobustAggregator("trimmed_mean", mode), trim_share_(trim_share) {}

 protected:
  FlatParams Estimate(const std::vector<const ClientUpdate*>& updates) const override {
    return TrimmedMean(updates, trim_share_);
  }

 private:
  double trim_share_;
};

class KrumAggregator : public RobustAggregator {
 public:
  KrumAggregator(AggregationMode mode, const KrumOptions& options)
      : RobustAggregator(options.select == 1 ? "krum" : "multi_krum", mode), options_(options) {}

 protected:
  FlatParams Estimate(const std::vector<const ClientUpdate*>& updates) const override {
    const size_t n = updates.size();
    const int f = EffectiveByzantine(options_.byzantine, n);
    if (options_.byzantine > f) {
      LogWarning("krum: " + std::to_string(n) + " results support at most f = " +
                 std::to_string(f) + " (n > 2f + 2), not robust.byzantine = " +
                 std::to_string(options_.byzantine) + "; using f = " + std::to_string(f));
    }
    const size_t m = options_.select == 0 ? n - static_cast<size_t>(f)
                                          : std::min(n, static_cast<size_t>(options_.select));
    std::vector<size_t> chosen = KrumSelection(updates, f, m);
    if (chosen.size() == 1) return updates[chosen[0]]->params;
    // Summed in canonical order, whatever the scores' ranking.
    std::sort(chosen.begin(), chosen.end());
    const size_t d = updates[0]->params.size();
    FlatParams mean(d);
    for (size_t i = 0; i < d; ++i) {
      double s = 0;
      for (size_t k : chosen) s += updates[k]->params[i];
      mean[i] = static_cast<float>(s / static_cast<double>(chosen.size()));
    }
    return mean;
  }

 private:
  KrumOptions options_;
};

}  // namespace

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
  const size_t d = updates[0]->params.size();
  // Squared distances, each summed in coordinate order.
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

std::unique_ptr<Aggregator> MakeCoordinateMedian(AggregationMode mode) {
  return std::make_unique<MedianAggregator>(mode);
}

std::unique_ptr<Aggregator> MakeTrimmedMean(AggregationMode mode, double trim_share) {
  if (!(trim_share >= 0 && trim_share < 0.5)) {
    throw Error("robust.trim_share: " + std::to_string(trim_share) + " is not in [0, 0.5)");
  }
  return std::make_unique<TrimmedMeanAggregator>(mode, trim_share);
}

std::unique_ptr<Aggregator> MakeKrum(AggregationMode mode, const KrumOptions& options) {
  if (options.select < 0) {
    throw Error("robust.multi_krum_select: expected 0 (n − f) or more, got " +
                std::to_string(options.select));
  }
  return std::make_unique<KrumAggregator>(mode, options);
}

std::string ApplyUpdateNormBound(const UpdateNormBound& bound, const FlatParams& global,
                                 int64_t num_samples, FlatParams* params) {
  if (bound.max_ratio <= 0) return "";
  const size_t d = global.size();
  if (params->size() != d) return "model of another size than the global one";
  double delta2 = 0, global2 = 0;
  for (size_t i = 0; i < d; ++i) {
    const double diff = static_cast<double>((*params)[i]) - global[i];
    delta2 += diff * diff;
    global2 += static_cast<double>(global[i]) * global[i];
  }
  const double scale = global2 > 0 ? std::sqrt(global2) : 1.0;
  const double ratio = std::sqrt(delta2) / scale;
  if (ratio <= bound.max_ratio) return "";
  char what[160];
  std::snprintf(what, sizeof(what),
                "update norm %.4g x ||global|| exceeds robust.max_update_norm = %g", ratio,
                bound.max_ratio);
  if (bound.action == NormAction::kRefuse) return what;
  const double shrink = bound.max_ratio / ratio;
  const double n = static_cast<double>(num_samples);
  for (size_t i = 0; i < d; ++i) {
    const double step = shrink * (static_cast<double>((*params)[i]) - global[i]);
    const float w = static_cast<float>(global[i] + step);
    // Between θ and w_k, but n·θ_i itself may be beyond what a sum takes.
    if (!(std::fabs(n * w) < kMaxModelSumTerm)) {
      return std::string(what) + "; the clipped model is beyond aggregation's range";
    }
    (*params)[i] = w;
  }
  return "";
}

}  // namespace fedprof
