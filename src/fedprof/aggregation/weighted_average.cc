#include "fedprof/aggregation/aggregator.h"

namespace fedprof {

void AverageFull(const FlatParams& global, const std::vector<const FitResult*>& results,
                 int64_t total_samples, FlatParams* next) {
  // sum_k p_k w_k with w_k = global for the rest equals
  // global + sum_{k in S} p_k (w_k - global), which touches only S.
  const size_t n = global.size();
  std::vector<double> acc(global.begin(), global.end());
  for (const FitResult* r : results) {
    const double p = static_cast<double>(r->num_samples) / static_cast<double>(total_samples);
    const float* w = r->params.data();
    for (size_t i = 0; i < n; ++i) acc[i] += p * (static_cast<double>(w[i]) - global[i]);
  }
  next->resize(n);
  for (size_t i = 0; i < n; ++i) (*next)[i] = static_cast<float>(acc[i]);
}

void AveragePartial(const FlatParams& global, const std::vector<const FitResult*>& results,
                    FlatParams* next) {
  int64_t selected_samples = 0;
  for (const FitResult* r : results) selected_samples += r->num_samples;
  if (results.empty() || selected_samples == 0) {
    if (next != &global) *next = global;
    return;
  }
  const size_t n = global.size();
  std::vector<double> acc(n, 0.0);
  for (const FitResult* r : results) {
    const double p = static_cast<double>(r->num_samples) / static_cast<double>(selected_samples);
    const float* w = r->params.data();
    for (size_t i = 0; i < n; ++i) acc[i] += p * w[i];
  }
  next->resize(n);
  for (size_t i = 0; i < n; ++i) (*next)[i] = static_cast<float>(acc[i]);
}

namespace {

class WeightedAverage : public Aggregator {
 public:
  explicit WeightedAverage(AggregationMode mode) : mode_(mode) {}
  void Aggregate(const FlatParams& global, const std::vector<const FitResult*>& results,
                 int64_t total_samples, FlatParams* next) override {
    if (mode_ == AggregationMode::kFull) {
      AverageFull(global, results, total_samples, next);
    } else {
      AveragePartial(global, results, next);
    }
  }

 private:
  AggregationMode mode_;
};

}  // namespace

std::unique_ptr<Aggregator> MakeWeightedAverage(AggregationMode mode) {
  return std::make_unique<WeightedAverage>(mode);
}

}  // namespace fedprof
