#include "fedprof/aggregation/robust.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "fedprof/core/error.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/log.h"
#include "fedprof/core/text.h"

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
    ForGlobal(global);
    if (root_.empty()) {
      FlatParams root = stages_.root_update(global, version_);
      if (root.size() != global.size()) {
        throw Error(name_ + ": the root update has " + std::to_string(root.size()) + " values, the model " +
                    std::to_string(global.size()));
      }
      root_ = std::move(root);
    }
    return root_;
  }

  // L_V of a model for this round.
  double ValidationLoss(const FlatParams& model) const {
    const double loss = stages_.validation_loss(model, version_);
    if (!std::isfinite(loss)) {
      throw Error(name_ + ": the validation loss of a model is " + FormatDouble(loss));
    }
    return loss;
  }

  // The same for a model that is asked for again (a client's, θ, w_0: an
  // attacker's previews ask for them every time), evaluated once per global
  // model; the cache keeps each model's SHA-256, not the model.
  double CachedValidationLoss(const FlatParams& global, const FlatParams& model) const {
    ForGlobal(global);
    Sha256Stream hash;
    hash.Update(model.data(), model.size() * sizeof(float));
    const auto [at, added] = losses_.try_emplace(hash.Finish(), 0.0);
    if (added) at->second = ValidationLoss(model);
    return at->second;
  }

 private:
  bool KeepsStep() const { return stages_.momentum > 0 || NeedsLastStep(); }

  // Empties the caches when θ or its version is not the one they hold.
  void ForGlobal(const FlatParams& global) const {
    if (cached_version_ == version_ && cached_global_ == global) return;
    root_.clear();
    losses_.clear();
    cached_version_ = version_;
    cached_global_ = global;
  }

  // `fell_back` (may be null) says whether the fallback took the server's step.
  FlatParams Staged(const FlatParams& global, const std::vector<ClientUpdate>& updates, bool warn,
                    bool* fell_back = nullptr) const {
    FlatParams estimate = Estimated(global, updates, warn);
    if (!stages_.fallback) return estimate;
    const FlatParams& own = RootModel(global);
    // The estimate is new with every preview: evaluated, not cached.
    const bool own_better = CachedValidationLoss(global, own) < ValidationLoss(estimate);
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
  // The caches of w_0 and of validation losses, for θ = cached_global_ of
  // cached_version_ (empty and -1: none yet).
  mutable int64_t cached_version_ = -1;
  mutable FlatParams cached_global_, root_;
  mutable std::map<Sha256Digest, double> losses_;
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
                      bool warn) const override {
    const int b = ZenoByzantine(options_.byzantine, updates.size());
    if (warn && options_.byzantine > b) {
      LogWarning("zeno: " + std::to_string(updates.size()) + " results leave out at most b = " +
                 std::to_string(b) + ", not robust.byzantine = " + std::to_string(options_.byzantine) +
                 "; using b = " + std::to_string(b));
    }
    std::vector<double> losses;
    for (const ClientUpdate* u : updates) losses.push_back(CachedValidationLoss(global, u->params));
    const std::vector<double> scores =
        ZenoScores(global, updates, CachedValidationLoss(global, global), losses, options_.rho);
    return Zeno(updates, scores, updates.size() - static_cast<size_t>(b));
  }

 private:
  ZenoOptions options_;
};

}  // namespace

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
