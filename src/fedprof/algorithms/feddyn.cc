// FedDyn (Acar et al., "Federated Learning Based on Dynamic
// Regularization", ICLR 2021, Algorithm 1). Client k keeps ∇L_k(θ_k^{t−1})
// (0 at first) and minimises L_k(θ) − ⟨∇L_k(θ_k^{t−1}), θ⟩ + α/2 ||θ − θ^{t−1}||²,
// then keeps ∇L_k(θ_k^t) = ∇L_k(θ_k^{t−1}) − α (θ_k^t − θ^{t−1}). The server
// keeps h (0 at first): h ← h − α (1/m) Σ_{P_t} (θ_k^t − θ^{t−1}), m = N, and
// θ^t = mean_{P_t} θ_k^t − h / α. The mean is the aggregator's average (by
// sample counts, as every FedProf strategy weighs), so Σ_{P_t} (θ_k − θ) is
// |P_t| (mean − θ). With α = 0 neither half runs: FedAvg, bit for bit.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "fedprof/algorithms/kinds.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"

namespace fedprof {
namespace {

class FedDynLocal final : public LocalAlgorithm {
 public:
  FedDynLocal(const FitInstructions& ins, Model& model, const FlatParams& kept)
      : alpha_(ins.objective.feddyn_alpha), start_(Flatten(model)) {
    // A state of another size is no state of this model: the documented reset, 0.
    gradient_ = kept.size() == start_.size() ? kept : FlatParams(start_.size(), 0.0f);
    anchor_ = ParameterTensors(model, start_);
    linear_ = ParameterTensors(model, gradient_);
  }

  at::Tensor LossTerm(Model& model, const LocalBatch& batch) override {
    (void)batch;
    torch::Tensor linear = torch::zeros({}, torch::kFloat);
    torch::Tensor quadratic = torch::zeros({}, torch::kFloat);
    const auto params = model.parameters();
    for (size_t k = 0; k < params.size(); ++k) {
      linear = linear + (params[k] * linear_[k]).sum();
      quadratic = quadratic + (params[k] - anchor_[k]).pow(2).sum();
    }
    return 0.5 * alpha_ * quadratic - linear;
  }

  FlatParams End(Model& model, int64_t steps, FitResult* result) override {
    (void)steps, (void)result;
    const FlatParams trained = Flatten(model);
    FlatParams next(trained.size());
    for (size_t j = 0; j < next.size(); ++j) {
      next[j] = static_cast<float>(gradient_[j] - alpha_ * (static_cast<double>(trained[j]) - start_[j]));
    }
    return next;
  }

 private:
  double alpha_;
  FlatParams start_;     // θ^{t−1}
  FlatParams gradient_;  // ∇L_k(θ_k^{t−1})
  std::vector<torch::Tensor> anchor_, linear_;
};

class FedDynServer final : public ServerAlgorithm {
 public:
  explicit FedDynServer(double alpha) : alpha_(alpha) {}

  std::string Check(const FitResult& r, size_t num_params) const override {
    (void)r, (void)num_params;
    return "";
  }
  void Observe(const FitResult& r, const FlatParams& global) override {
    (void)r, (void)global;
    ++results_;
  }

  void Finish(const FlatParams& global, int num_clients, FlatParams* next) override {
    const int64_t participants = results_;
    results_ = 0;
    if (alpha_ == 0 || participants == 0) return;
    if (h_.size() != global.size()) h_.assign(global.size(), 0.0f);
    const double share = static_cast<double>(participants) / num_clients;
    for (size_t j = 0; j < global.size(); ++j) {
      const double mean = (*next)[j];
      h_[j] = static_cast<float>(h_[j] - alpha_ * share * (mean - global[j]));
      (*next)[j] = static_cast<float>(mean - h_[j] / alpha_);
    }
  }

  std::string SaveState() const override { return EncodeFloats(h_); }
  void LoadState(const std::string& state) override { h_ = state.empty() ? FlatParams() : DecodeFloats(state); }

 private:
  double alpha_;
  FlatParams h_;
  int64_t results_ = 0;
};

}  // namespace

std::unique_ptr<ServerAlgorithm> MakeFedDynServer(double alpha) { return std::make_unique<FedDynServer>(alpha); }

std::unique_ptr<LocalAlgorithm> MakeFedDynLocal(const FitInstructions& ins, Model& model, const FlatParams& kept) {
  return std::make_unique<FedDynLocal>(ins, model, kept);
}

}  // namespace fedprof
