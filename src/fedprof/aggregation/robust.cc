#include "fedprof/aggregation/robust.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"

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

// The mean of the models at `positions` of `updates`, summed in canonical
// order whatever order a ranking gave the positions.
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

// The skeleton every robust rule shares: canonical order, pre-aggregation,
// the estimate, the aggregation mode's step, then momentum (RobustStages).
class RobustAggregator : public Aggregator {
 public:
  RobustAggregator(std::string name, AggregationMode mode, const RobustStages& stages)
      : name_(std::move(name)), mode_(mode), stages_(stages) {
    if (stages_.fallback && (!stages_.root_update || !stages_.validation_loss)) {
      throw Error(name_ + ": robust.fallback needs the server's root update and validation loss");
    }
  }

  bool NeedsUpdates() const override { return true; }

  void Aggregate(const FlatParams&, const ModelSum&, int64_t, FlatParams*) override {
    throw Error("aggregation: " + name_ + " needs each client's model, not their sum");
  }

  void OnGlobalModel(int64_t version) override { version_ = version; }

  void AggregateUpdates(const FlatParams& global, const std::vector<ClientUpdate>& updates,
                        int64_t total_samples, FlatParams* next) override {
    CheckUpdates(global, updates);
    fell_back_ = false;
    if (updates.empty()) {
      if (next != &global) *next = global;
      return;
    }
    int64_t round_samples = 0;
    for (const ClientUpdate& u : updates) round_samples += u.num_samples;
    const FlatParams estimate = Staged(global, updates, /*warn=*/true, &fell_back_);
    if (!KeepsStep()) {
      StepTowards(mode_, global, estimate, round_samples, total_samples, next);
      return;
    }
    FlatParams stepped;
    StepTowards(mode_, global, estimate, round_samples, total_samples, &stepped);
    const size_t d = global.size();
    if (last_step_.size() != d) last_step_.assign(d, 0.0f);
    const double beta = stages_.momentum;
    next->resize(d);  // element by element: `next` may be `global`
    for (size_t i = 0; i < d; ++i) {
      const double m = beta * last_step_[i] + (1 - beta) * (static_cast<double>(stepped[i]) - global[i]);
      last_step_[i] = static_cast<float>(m);
      (*next)[i] = static_cast<float>(global[i] + m);
    }
  }

  FlatParams EstimateOf(const FlatParams& global, const std::vector<ClientUpdate>& updates,
                        bool* own_step = nullptr) const override {
    CheckUpdates(global, updates);
    if (own_step) *own_step = false;
    if (updates.empty()) return global;
    return Staged(global, updates, /*warn=*/false, own_step);
  }

  bool FellBack() const override { return fell_back_; }

  std::string SaveState() const override {
    return KeepsStep() ? nlohmann::json({{"step", EncodeFloats(last_step_)}}).dump() : "";
  }

  void LoadState(const std::string& state) override {
    if (state.empty() || !KeepsStep()) return;
    try {
      last_step_ = DecodeFloats(nlohmann::json::parse(state).at("step").get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      throw Error(name_ + " state: " + e.what());
    }
  }

 protected:
  // ŵ from at least one model, in canonical order, for the global model θ;
  // `warn` is false when an attacker previews it (EstimateOf).
  virtual FlatParams Estimate(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                              bool warn) const = 0;
  // Whether the rule itself needs the global model's last step.
  virtual bool NeedsLastStep() const { return false; }
  // The last round's step θ_t − θ_{t−1} (momentum m with robust.momentum);
  // empty before the first round that had results.
  const std::vector<float>& last_step() const { return last_step_; }
  int64_t version() const { return version_; }
  uint64_t seed() const { return stages_.seed; }

  // The server's root update w_0 for θ, computed once per global model: an
  // attacker's previews and the fallback reuse it.
  const FlatParams& RootModel(const FlatParams& global) const {
    if (root_version_ != version_ || root_global_ != global) {
      root_ = stages_.root_update(global, version_);
      if (root_.size() != global.size()) {
        throw Error(name_ + ": the root update has " + std::to_string(root_.size()) + " values, the model " +
                    std::to_string(global.size()));
      }
      root_version_ = version_;
      root_global_ = global;
    }
    return root_;
  }

  // L_V of a model for this round, each distinct model evaluated once per
  // global model: an attacker's previews ask again for the same honest
  // models, θ and w_0.
  double ValidationLossOf(const FlatParams& global, const FlatParams& model) const {
    if (losses_version_ != version_ || losses_global_ != global) {
      losses_.clear();
      losses_version_ = version_;
      losses_global_ = global;
    }
    for (const auto& [params, loss] : losses_) {
      if (params == model) return loss;
    }
    const double loss = stages_.validation_loss(model, version_);
    if (!std::isfinite(loss)) {
      throw Error(name_ + ": the validation loss of a model is " + FormatDouble(loss));
    }
    losses_.emplace_back(model, loss);
    return loss;
  }

 private:
  bool KeepsStep() const { return stages_.momentum > 0 || NeedsLastStep(); }

  // `fell_back` (may be null) says whether the fallback took the server's step.
  FlatParams Staged(const FlatParams& global, const std::vector<ClientUpdate>& updates, bool warn,
                    bool* fell_back = nullptr) const {
    FlatParams estimate = Estimated(global, updates, warn);
    if (!stages_.fallback) return estimate;
    const FlatParams& own = RootModel(global);
    const bool own_better = ValidationLossOf(global, own) < ValidationLossOf(global, estimate);
    if (fell_back) *fell_back = own_better;
    return own_better ? own : estimate;
  }

  // Stages 1 and 2: pre-aggregation, then the rule's estimate.
  FlatParams Estimated(const FlatParams& global, const std::vector<ClientUpdate>& updates, bool warn) const {
    const std::vector<const ClientUpdate*> order = CanonicalOrder(updates);
    if (stages_.pre == PreAggregation::kNone) return Estimate(global, order, warn);
    std::vector<ClientUpdate> staged;
    if (stages_.pre == PreAggregation::kBucketing) {
      Rng rng = MakeRng(stages_.seed, Stream::kRobust, {kBucketingTag, static_cast<uint64_t>(version_)});
      staged = Bucketing(order, stages_.bucket_size, rng);
    } else {
      staged = NearestNeighbourMixing(order, MixingByzantine(stages_.mixing_byzantine, order.size()));
    }
    std::vector<const ClientUpdate*> pointers;
    for (const ClientUpdate& u : staged) pointers.push_back(&u);
    return Estimate(global, pointers, warn);
  }

  std::string name_;
  AggregationMode mode_;
  RobustStages stages_;
  int64_t version_ = 0;
  std::vector<float> last_step_;
  bool fell_back_ = false;  // in the last AggregateUpdates
  mutable int64_t root_version_ = -1, losses_version_ = -1;
  mutable FlatParams root_global_, root_, losses_global_;
  mutable std::vector<std::pair<FlatParams, double>> losses_;
};

class MedianAggregator : public RobustAggregator {
 public:
  MedianAggregator(AggregationMode mode, const RobustStages& stages)
      : RobustAggregator("median", mode, stages) {}

 protected:
  FlatParams Estimate(const FlatParams&, const std::vector<const ClientUpdate*>& updates,
                      bool) const override {
    return CoordinateMedian(updates);
  }
};

class TrimmedMeanAggregator : public RobustAggregator {
 public:
  TrimmedMeanAggregator(AggregationMode mode, double trim_share, const RobustStages& stages)
      : RobustAggregator("trimmed_mean", mode, stages), trim_share_(trim_share) {}

 protected:
  FlatParams Estimate(const FlatParams&, const std::vector<const ClientUpdate*>& updates,
                      bool) const override {
    return TrimmedMean(updates, trim_share_);
  }

 private:
  double trim_share_;
};

class KrumAggregator : public RobustAggregator {
 public:
  KrumAggregator(AggregationMode mode, const KrumOptions& options, const RobustStages& stages)
      : RobustAggregator(options.select == 1 ? "krum" : "multi_krum", mode, stages), options_(options) {}

 protected:
  FlatParams Estimate(const FlatParams&, const std::vector<const ClientUpdate*>& updates,
                      bool warn) const override {
    const size_t n = updates.size();
    const int f = EffectiveByzantine(options_.byzantine, n);
    if (warn && options_.byzantine > f) {
      LogWarning("krum: " + std::to_string(n) + " results support at most f = " +
                 std::to_string(f) + " (n > 2f + 2), not robust.byzantine = " +
                 std::to_string(options_.byzantine) + "; using f = " + std::to_string(f));
    }
    const size_t m = options_.select == 0 ? n - static_cast<size_t>(f)
                                          : std::min(n, static_cast<size_t>(options_.select));
    const std::vector<size_t> chosen = KrumSelection(updates, f, m);
    if (chosen.size() == 1) return updates[chosen[0]]->params;
    return MeanOf(updates, chosen);
  }

 private:
  KrumOptions options_;
};

class BulyanAggregator : public RobustAggregator {
 public:
  BulyanAggregator(AggregationMode mode, int byzantine, const RobustStages& stages)
      : RobustAggregator("bulyan", mode, stages), byzantine_(byzantine) {}

 protected:
  FlatParams Estimate(const FlatParams&, const std::vector<const ClientUpdate*>& updates,
                      bool warn) const override {
    const int f = BulyanByzantine(byzantine_, updates.size());
    if (warn && byzantine_ > f) {
      LogWarning("bulyan: " + std::to_string(updates.size()) + " results support at most f = " +
                 std::to_string(f) + " (n >= 4f + 3), not robust.byzantine = " + std::to_string(byzantine_) +
                 "; using f = " + std::to_string(f));
    }
    return Bulyan(updates, f);
  }

 private:
  int byzantine_;
};

class CenteredClippingAggregator : public RobustAggregator {
 public:
  CenteredClippingAggregator(AggregationMode mode, const CenteredClippingOptions& options,
                             const RobustStages& stages)
      : RobustAggregator("centered_clipping", mode, stages), options_(options) {}

 protected:
  FlatParams Estimate(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                      bool) const override {
    if (!options_.from_last || last_step().size() != global.size()) {
      return CenteredClipping(global, updates, options_);
    }
    const std::vector<double> start(last_step().begin(), last_step().end());
    return CenteredClipping(global, updates, options_, &start);
  }
  bool NeedsLastStep() const override { return options_.from_last; }

 private:
  CenteredClippingOptions options_;
};

class FlTrustAggregator : public RobustAggregator {
 public:
  FlTrustAggregator(AggregationMode mode, FlTrustScale scale, const RobustStages& stages)
      : RobustAggregator("fltrust", mode, stages), scale_(scale) {}

 protected:
  FlatParams Estimate(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                      bool) const override {
    return FlTrust(global, RootModel(global), updates, nullptr, scale_);
  }

 private:
  FlTrustScale scale_;
};

class RootOnlyAggregator : public RobustAggregator {
 public:
  RootOnlyAggregator(AggregationMode mode, const RobustStages& stages)
      : RobustAggregator("root", mode, stages) {}

 protected:
  FlatParams Estimate(const FlatParams& global, const std::vector<const ClientUpdate*>&, bool) const override {
    return RootModel(global);
  }
};

class FlameAggregator : public RobustAggregator {
 public:
  FlameAggregator(AggregationMode mode, const FlameOptions& options, const RobustStages& stages)
      : RobustAggregator("flame", mode, stages), options_(options) {}

 protected:
  FlatParams Estimate(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                      bool) const override {
    Rng noise = MakeRng(seed(), Stream::kRobust, {kFlameNoiseTag, static_cast<uint64_t>(version())});
    return Flame(global, updates, options_.noise_factor, &noise);
  }

 private:
  FlameOptions options_;
};

class ZenoAggregator : public RobustAggregator {
 public:
  ZenoAggregator(AggregationMode mode, const ZenoOptions& options, const RobustStages& stages)
      : RobustAggregator("zeno", mode, stages), options_(options) {}

 protected:
  FlatParams Estimate(const FlatParams& global, const std::vector<const ClientUpdate*>& updates,
                      bool) const override {
    std::vector<double> losses;
    for (const ClientUpdate* u : updates) losses.push_back(ValidationLossOf(global, u->params));
    const std::vector<double> scores =
        ZenoScores(global, updates, ValidationLossOf(global, global), losses, options_.rho);
    const size_t b = static_cast<size_t>(ZenoByzantine(options_.byzantine, updates.size()));
    return Zeno(updates, scores, updates.size() - b);
  }

 private:
  ZenoOptions options_;
};

}  // namespace

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

std::unique_ptr<Aggregator> MakeCoordinateMedian(AggregationMode mode, const RobustStages& stages) {
  return std::make_unique<MedianAggregator>(mode, stages);
}

std::unique_ptr<Aggregator> MakeTrimmedMean(AggregationMode mode, double trim_share,
                                            const RobustStages& stages) {
  if (!(trim_share >= 0 && trim_share < 0.5)) {
    throw Error("robust.trim_share: " + std::to_string(trim_share) + " is not in [0, 0.5)");
  }
  return std::make_unique<TrimmedMeanAggregator>(mode, trim_share, stages);
}

std::unique_ptr<Aggregator> MakeKrum(AggregationMode mode, const KrumOptions& options,
                                     const RobustStages& stages) {
  if (options.select < 0) {
    throw Error("robust.multi_krum_select: expected 0 (n − f) or more, got " +
                std::to_string(options.select));
  }
  return std::make_unique<KrumAggregator>(mode, options, stages);
}

std::unique_ptr<Aggregator> MakeBulyan(AggregationMode mode, int byzantine, const RobustStages& stages) {
  return std::make_unique<BulyanAggregator>(mode, byzantine, stages);
}

std::unique_ptr<Aggregator> MakeCenteredClipping(AggregationMode mode, const CenteredClippingOptions& options,
                                                 const RobustStages& stages) {
  if (!(options.radius >= 0) || options.iterations < 1) {
    throw Error("robust.cc_radius / robust.cc_iterations: expected a radius >= 0 and at least 1 iteration");
  }
  return std::make_unique<CenteredClippingAggregator>(mode, options, stages);
}

std::unique_ptr<Aggregator> MakeFlTrust(AggregationMode mode, RootUpdate root_update, FlTrustScale scale,
                                        const RobustStages& stages) {
  if (!root_update) throw Error("fltrust: needs the server's root data set");
  RobustStages with_root = stages;
  with_root.root_update = std::move(root_update);
  return std::make_unique<FlTrustAggregator>(mode, scale, with_root);
}

std::unique_ptr<Aggregator> MakeRootOnly(AggregationMode mode, const RobustStages& stages) {
  if (!stages.root_update) throw Error("root: needs the server's root data set");
  return std::make_unique<RootOnlyAggregator>(mode, stages);
}

std::unique_ptr<Aggregator> MakeFlame(AggregationMode mode, const FlameOptions& options,
                                      const RobustStages& stages) {
  if (!(options.noise_factor >= 0)) {
    throw Error("robust.flame_noise: expected a noise factor >= 0, got " + std::to_string(options.noise_factor));
  }
  return std::make_unique<FlameAggregator>(mode, options, stages);
}

std::unique_ptr<Aggregator> MakeZeno(AggregationMode mode, const ZenoOptions& options,
                                     const RobustStages& stages) {
  if (!stages.validation_loss) throw Error("zeno: needs the server's validation data");
  if (!(options.rho >= 0)) {
    throw Error("robust.zeno_rho: expected rho >= 0, got " + std::to_string(options.rho));
  }
  return std::make_unique<ZenoAggregator>(mode, options, stages);
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
