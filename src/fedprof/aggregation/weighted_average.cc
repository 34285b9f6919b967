#include "fedprof/aggregation/aggregator.h"

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

void CheckSizes(const FlatParams& global, const ModelSum& sum) {
  if (sum.count() > 0 && sum.size() != global.size()) {
    throw Error("aggregation: sum of " + std::to_string(sum.size()) + " values for a model of " +
                std::to_string(global.size()));
  }
}

}  // namespace

void AverageFull(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                 FlatParams* next) {
  // sum_k p_k w_k with w_k = global for the rest equals
  // global + sum_{k in S} p_k (w_k - global), which touches only S.
  CheckSizes(global, sum);
  if (sum.count() == 0 || total_samples <= 0) {
    if (next != &global) *next = global;
    return;
  }
  const size_t n = global.size();
  const double total = static_cast<double>(total_samples);
  next->resize(n);
  for (size_t i = 0; i < n; ++i) {
    (*next)[i] = static_cast<float>(global[i] + sum.Centered(i, global[i]) / total);
  }
}

void AveragePartial(const FlatParams& global, const ModelSum& sum, FlatParams* next) {
  CheckSizes(global, sum);
  if (sum.count() == 0 || sum.weight() == 0) {
    if (next != &global) *next = global;
    return;
  }
  const size_t n = global.size();
  const double weight = static_cast<double>(sum.weight());
  next->resize(n);
  for (size_t i = 0; i < n; ++i) (*next)[i] = static_cast<float>(sum.Centered(i, 0.0f) / weight);
}

void Average(AggregationMode mode, const FlatParams& global, const ModelSum& sum,
             int64_t total_samples, FlatParams* next) {
  if (mode == AggregationMode::kFull) {
    AverageFull(global, sum, total_samples, next);
  } else {
    AveragePartial(global, sum, next);
  }
}

namespace {

class WeightedAverage : public Aggregator {
 public:
  explicit WeightedAverage(AggregationMode mode) : mode_(mode) {}
  void Aggregate(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                 FlatParams* next) override {
    Average(mode_, global, sum, total_samples, next);
  }

 private:
  AggregationMode mode_;
};

}  // namespace

FlatParams Aggregator::EstimateOf(const FlatParams& global, const std::vector<ClientUpdate>& updates,
                                  bool* own_step) const {
  if (own_step) *own_step = false;
  ModelSum sum;
  sum.Reset(global.size());
  for (const ClientUpdate& u : updates) sum.Add(u.params, u.num_samples);
  FlatParams estimate;
  AveragePartial(global, sum, &estimate);
  return estimate;
}

std::unique_ptr<Aggregator> MakeWeightedAverage(AggregationMode mode) {
  return std::make_unique<WeightedAverage>(mode);
}

}  // namespace fedprof
