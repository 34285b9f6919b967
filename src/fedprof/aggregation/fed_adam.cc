#include <cmath>
#include <nlohmann/json.hpp>

#include "fedprof/aggregation/aggregator.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

class FedAdam : public Aggregator {
 public:
  FedAdam(AggregationMode mode, const FedAdamOptions& options) : mode_(mode), options_(options) {}

  void Aggregate(const FlatParams& global, const ModelSum& sum, int64_t total_samples,
                 FlatParams* next) override {
    Average(mode_, global, sum, total_samples, &average_);
    const FlatParams& average = average_;
    const size_t n = global.size();
    if (m_.size() != n) {
      m_.assign(n, 0.0f);
      v_.assign(n, 0.0f);
    }
    next->resize(n);
    const double b1 = options_.beta1, b2 = options_.beta2;
    for (size_t i = 0; i < n; ++i) {
      const double delta = static_cast<double>(average[i]) - global[i];
      const double m = b1 * m_[i] + (1 - b1) * delta;
      const double v = b2 * v_[i] + (1 - b2) * delta * delta;
      m_[i] = static_cast<float>(m);
      v_[i] = static_cast<float>(v);
      (*next)[i] = static_cast<float>(global[i] + options_.server_lr * m / (std::sqrt(v) + options_.tau));
    }
  }

  std::string SaveState() const override {
    return nlohmann::json({{"m", EncodeFloats(m_)}, {"v", EncodeFloats(v_)}}).dump();
  }

  void LoadState(const std::string& state) override {
    if (state.empty()) return;
    try {
      const nlohmann::json j = nlohmann::json::parse(state);
      m_ = DecodeFloats(j.at("m"));
      v_ = DecodeFloats(j.at("v"));
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("FedAdam state: ") + e.what());
    }
  }

 private:
  AggregationMode mode_;
  FedAdamOptions options_;
  std::vector<float> m_, v_;  // first and second moments
  FlatParams average_;        // reused across rounds
};

}  // namespace

std::unique_ptr<Aggregator> MakeFedAdam(AggregationMode mode, const FedAdamOptions& options) {
  return std::make_unique<FedAdam>(mode, options);
}

}  // namespace fedprof
