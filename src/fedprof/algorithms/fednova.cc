// FedNova (Wang et al., "Tackling the Objective Inconsistency Problem in
// Heterogeneous Federated Optimization", NeurIPS 2020). Client i's update
// after τ_i steps of SGD with momentum ρ is normalised by its effective
// number of steps ||a_i||_1 = [τ_i − ρ (1 − ρ^τ_i) / (1 − ρ)] / (1 − ρ)
// (τ_i without momentum; Sec. 5): d_i = (x − y_i) / ||a_i||_1, and the server
// steps x ← x − τ_eff Σ p_i d_i with τ_eff = Σ p_i ||a_i||_1 and p_i = n_i / n_S
// (Eq. 7). The client sends y_i and ||a_i||_1; the server divides. When every
// client of the round took the same steps, τ_eff Σ p_i d_i = x − Σ p_i y_i and
// the step is the aggregator's average as it is (FedAvg, bit for bit).
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/algorithms/kinds.h"

namespace fedprof {
namespace {

class FedNovaLocal final : public LocalAlgorithm {
 public:
  explicit FedNovaLocal(const TrainOptions& train) : rho_(train.momentum) {}

  FlatParams End(Model& model, int64_t steps, FitResult* result) override {
    (void)model;
    const auto tau = static_cast<double>(steps);
    result->algorithm_scalar =
        rho_ > 0 ? (tau - rho_ * (1 - std::pow(rho_, tau)) / (1 - rho_)) / (1 - rho_) : tau;
    return {};
  }

 private:
  double rho_;
};

// Steps a client may claim: far beyond any round's, so that a_i · n_i and
// the normalised updates stay in the exact sum's range.
constexpr double kMostSteps = 1e9;

class FedNovaServer final : public ServerAlgorithm {
 public:
  std::string Check(const FitResult& r, size_t num_params) const override {
    (void)num_params;
    if (!(r.algorithm_scalar > 0 && r.algorithm_scalar <= kMostSteps)) {
      return "FedNova's effective steps are not a number in (0, 1e9]";
    }
    return "";
  }

  void Observe(const FitResult& r, const FlatParams& global) override {
    if (normalised_.size() != global.size()) normalised_.Reset(global.size());
    const double a = r.algorithm_scalar;
    FlatParams d(global.size());
    for (size_t j = 0; j < d.size(); ++j) d[j] = static_cast<float>((static_cast<double>(global[j]) - r.params[j]) / a);
    normalised_.Add(d, r.num_samples);  // Σ n_i d_i, exact in any order
    steps_.push_back({r.client_id, r.num_samples, a});
  }

  void Finish(const FlatParams& global, int num_clients, FlatParams* next) override {
    (void)num_clients;
    std::vector<Steps> steps;
    steps.swap(steps_);
    const bool equal = std::all_of(steps.begin(), steps.end(), [&](const Steps& s) { return s.a == steps[0].a; });
    if (!steps.empty() && !equal) {
      std::sort(steps.begin(), steps.end(), [](const Steps& x, const Steps& y) { return x.client < y.client; });
      double weighted = 0, total = 0;
      for (const Steps& s : steps) {
        weighted += static_cast<double>(s.samples) * s.a;
        total += static_cast<double>(s.samples);
      }
      const double tau_eff = weighted / total;
      for (size_t j = 0; j < global.size(); ++j) {
        (*next)[j] = static_cast<float>(global[j] - tau_eff * normalised_.Centered(j, 0.0f) / total);
      }
    }
    normalised_.Reset(global.size());
  }

 private:
  struct Steps {
    int client = -1;
    int64_t samples = 0;
    double a = 0;  // ||a_i||_1
  };
  ModelSum normalised_;
  std::vector<Steps> steps_;
};

}  // namespace

std::unique_ptr<ServerAlgorithm> MakeFedNovaServer() { return std::make_unique<FedNovaServer>(); }

std::unique_ptr<LocalAlgorithm> MakeFedNovaLocal(const TrainOptions& train) {
  return std::make_unique<FedNovaLocal>(train);
}

}  // namespace fedprof
