#include "fedprof/aggregation/fedbuff.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "fedprof/core/error.h"

namespace fedprof {

double StalenessWeight(const FedBuffOptions& options, int64_t staleness) {
  if (staleness < 0) throw Error("fedbuff: negative staleness " + std::to_string(staleness));
  if (options.staleness_exponent == 0) return 1;
  return std::pow(1.0 + static_cast<double>(staleness), -options.staleness_exponent);
}

void FedBuffStep(const FedBuffOptions& options, AggregationMode mode, const FlatParams& global,
                 const std::vector<BufferedUpdate>& buffer, int64_t total_samples, FlatParams* next) {
  const size_t n = global.size();
  bool fresh = true;
  int64_t weight = 0;
  for (const BufferedUpdate& u : buffer) {
    if (u.params.size() != n || !u.start || u.start->size() != n) {
      throw Error("fedbuff: client " + std::to_string(u.client_id) + "'s update does not fit a model of " +
                  std::to_string(n) + " values");
    }
    fresh = fresh && u.staleness == 0;
    weight += u.num_samples;
  }
  if (buffer.empty() || weight <= 0) {
    if (next != &global) *next = global;
    return;
  }
  if (fresh && options.server_lr == 1) {
    ModelSum sum;
    sum.Reset(n);
    for (const BufferedUpdate& u : buffer) sum.Add(u.params, u.num_samples);
    Average(mode, global, sum, total_samples, next);
    return;
  }
  // A fixed order (client, staleness) makes the double sums independent of
  // the order results arrived in.
  std::vector<const BufferedUpdate*> order;
  for (const BufferedUpdate& u : buffer) order.push_back(&u);
  std::sort(order.begin(), order.end(), [](const BufferedUpdate* a, const BufferedUpdate* b) {
    return a->client_id != b->client_id ? a->client_id < b->client_id : a->staleness < b->staleness;
  });
  const double total = mode == AggregationMode::kFull ? static_cast<double>(std::max(total_samples, weight))
                                                      : static_cast<double>(weight);
  std::vector<double> coefficient;  // η_g n_k s(τ_k) / W
  for (const BufferedUpdate* u : order) {
    coefficient.push_back(options.server_lr * static_cast<double>(u->num_samples) *
                          StalenessWeight(options, u->staleness) / total);
  }
  // One update at a time, each value's sum in the same order.
  std::vector<double> step(n, 0.0);
  for (size_t k = 0; k < order.size(); ++k) {
    const float* w = order[k]->params.data();
    const float* start = order[k]->start->data();
    for (size_t i = 0; i < n; ++i) step[i] += coefficient[k] * (static_cast<double>(w[i]) - start[i]);
  }
  FlatParams out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(global[i] + step[i]);
  *next = std::move(out);
}

namespace {

class FedBuff final : public Aggregator {
 public:
  FedBuff(AggregationMode mode, const FedBuffOptions& options) : mode_(mode), options_(options) {}

  void Aggregate(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                 FlatParams* next) override {
    // Every update fresh: θ + η_g (avg w − θ).
    FlatParams average;
    Average(mode_, global, sum, total_samples, &average);
    if (options_.server_lr == 1) {
      *next = std::move(average);
      return;
    }
    FlatParams out(global.size());
    for (size_t i = 0; i < global.size(); ++i) {
      out[i] =
          static_cast<float>(global[i] + options_.server_lr * (static_cast<double>(average[i]) - global[i]));
    }
    *next = std::move(out);
  }

  const FedBuffOptions* Buffered() const override { return &options_; }
  void AggregateBuffer(const FlatParams& global, const std::vector<BufferedUpdate>& buffer,
                       int64_t total_samples, FlatParams* next) override {
    FedBuffStep(options_, mode_, global, buffer, total_samples, next);
  }

 private:
  AggregationMode mode_;
  FedBuffOptions options_;
};

}  // namespace

std::unique_ptr<Aggregator> MakeFedBuff(AggregationMode mode, const FedBuffOptions& options) {
  if (options.concurrency < 1 || options.buffer < 1) {
    throw Error("fedbuff: concurrency and buffer must be at least 1");
  }
  return std::make_unique<FedBuff>(mode, options);
}

}  // namespace fedprof
