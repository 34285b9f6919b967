// SCAFFOLD (Karimireddy et al., "SCAFFOLD: Stochastic Controlled Averaging
// for Federated Learning", ICML 2020, Algorithm 1). Client i keeps a control
// variate c_i (0 at first), the server c (0 at first) and sends it with θ.
// Each local step is corrected by c − c_i (Eq. 3); as in Li et al.'s
// NIID-Bench code, the correction is applied after the optimiser's step,
// y ← y − η_l (c − c_i), so that momentum does not carry it. After K steps,
// option II (Eq. 4): c_i⁺ = c_i − c + (x − y_i) / (K η_l); the client sends
// y_i and Δc_i = c_i⁺ − c_i and keeps c_i⁺. The server's model step is the
// aggregator's, x ← x + η_g (x̄ − x) (η_g = scaffold.server_lr; 1 keeps
// x̄ as it is), and c ← c + (1/N) Σ_S Δc_i. With scaffold.correct = false no
// step is corrected and the model is FedAvg's, bit for bit.
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/algorithms/kinds.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"

namespace fedprof {
namespace {

class ScaffoldLocal final : public LocalAlgorithm {
 public:
  ScaffoldLocal(const FitInstructions& ins, Model& model, const FlatParams& kept)
      : correct_(ins.objective.scaffold_correct), lr_(ins.train.lr), start_(Flatten(model)) {
    const size_t n = start_.size();
    c_ = ins.algorithm_values && ins.algorithm_values->size() == n ? *ins.algorithm_values : FlatParams(n, 0.0f);
    // A state of another size is no state of this model: the documented reset, c_i = 0.
    c_i_ = kept.size() == n ? kept : FlatParams(n, 0.0f);
    if (correct_) {
      FlatParams difference(n);
      for (size_t j = 0; j < n; ++j) difference[j] = c_[j] - c_i_[j];
      correction_ = ParameterTensors(model, difference);
    }
  }

  void AfterStep(Model& model) override {
    if (!correct_) return;
    torch::NoGradGuard no_grad;
    const auto params = model.parameters();
    for (size_t k = 0; k < params.size(); ++k) params[k].sub_(correction_[k], lr_);
  }

  FlatParams End(Model& model, int64_t steps, FitResult* result) override {
    const FlatParams y = Flatten(model);
    const double scale = 1.0 / (static_cast<double>(std::max<int64_t>(steps, 1)) * lr_);
    FlatParams next(y.size());
    result->algorithm_values.resize(y.size());
    for (size_t j = 0; j < y.size(); ++j) {
      next[j] = static_cast<float>(static_cast<double>(c_i_[j]) - c_[j] +
                                   (static_cast<double>(start_[j]) - y[j]) * scale);
      result->algorithm_values[j] = next[j] - c_i_[j];
    }
    return next;
  }

 private:
  bool correct_;
  double lr_;
  FlatParams start_;  // x
  FlatParams c_, c_i_;
  std::vector<torch::Tensor> correction_;  // c − c_i per parameter
};

class ScaffoldServer final : public ServerAlgorithm {
 public:
  explicit ScaffoldServer(double server_lr) : server_lr_(server_lr) {}

  std::shared_ptr<const FlatParams> Broadcast() const override { return c_; }

  std::string Check(const FitResult& r, size_t num_params) const override {
    return CheckAlgorithmValues(r.algorithm_values, num_params, "SCAFFOLD's control-variate update");
  }

  void Observe(const FitResult& r, const FlatParams& global) override {
    if (delta_sum_.size() != global.size()) delta_sum_.Reset(global.size());
    delta_sum_.Add(r.algorithm_values, 1);  // exact: the order of arrival never matters
  }

  void Finish(const FlatParams& global, int num_clients, FlatParams* next) override {
    if (server_lr_ != 1.0) {
      for (size_t j = 0; j < global.size(); ++j) {
        (*next)[j] = static_cast<float>(global[j] + server_lr_ * (static_cast<double>((*next)[j]) - global[j]));
      }
    }
    if (delta_sum_.count() == 0) return;
    auto c = std::make_shared<FlatParams>(c_ ? *c_ : FlatParams(global.size(), 0.0f));
    for (size_t j = 0; j < c->size(); ++j) {
      (*c)[j] = static_cast<float>((*c)[j] + delta_sum_.Centered(j, 0.0f) / num_clients);
    }
    c_ = std::move(c);
    delta_sum_.Reset(global.size());
  }

  std::string SaveState() const override { return c_ ? EncodeFloats(*c_) : ""; }
  void LoadState(const std::string& state) override {
    c_ = state.empty() ? nullptr : std::make_shared<const FlatParams>(DecodeFloats(state));
  }

 private:
  double server_lr_;
  std::shared_ptr<const FlatParams> c_;  // null until the first round ends: c = 0
  ModelSum delta_sum_;                   // Σ Δc_i of the round
};

}  // namespace

std::unique_ptr<ServerAlgorithm> MakeScaffoldServer(double server_lr) {
  return std::make_unique<ScaffoldServer>(server_lr);
}

std::unique_ptr<LocalAlgorithm> MakeScaffoldLocal(const FitInstructions& ins, Model& model, const FlatParams& kept) {
  return std::make_unique<ScaffoldLocal>(ins, model, kept);
}

}  // namespace fedprof
