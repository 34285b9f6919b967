// MOON (Li, He and Song, "Model-Contrastive Federated Learning", CVPR 2021,
// Eqs. 1-3). On each batch, z is the representation under the model being
// trained, z_glob under the global model w^t and z_prev under the client's
// previous local model w_i^{t−1}; the loss adds
//   μ ℓ_con,  ℓ_con = −log( e^{sim(z, z_glob)/τ} / (e^{sim(z, z_glob)/τ} + e^{sim(z, z_prev)/τ}) ),
// sim the cosine similarity, computed as the cross-entropy of the logits
// [sim(z, z_glob), sim(z, z_prev)] / τ against the first (as the paper's
// code does). The representation is the model's profiled layer
// (model.profile_layer), the layer FedProf profiles. The client keeps its
// trained model as the next round's w_i^{t−1}; before its first round it
// has none and the term is absent (the paper's code, whose model pool is
// empty in round 0, has only the positive logit, a loss of 0). The server
// half is the average. With μ = 0 no term is added: FedAvg, bit for bit.
#include <torch/torch.h>

#include <memory>

#include "fedprof/algorithms/kinds.h"
#include "fedprof/models/models.h"

namespace fedprof {
namespace {

namespace F = torch::nn::functional;

class MoonLocal final : public LocalAlgorithm {
 public:
  MoonLocal(const FitInstructions& ins, Model& model, const FlatParams& kept)
      : mu_(ins.objective.moon_mu), tau_(ins.objective.moon_tau), global_(Flatten(model)) {
    // A state of another size is no model of this one: the documented reset, no w_i^{t−1}.
    if (kept.size() == global_.size()) previous_ = kept;
  }

  bool NeedsRepresentation() const override { return true; }

  // The reference models' representations come from the model being
  // trained with their values swapped in, in eval mode and without
  // gradients, before the batch's own pass puts it into the graph.
  void BeforeForward(Model& model, const at::Tensor& x) override {
    z_glob_ = at::Tensor();
    z_prev_ = at::Tensor();
    if (previous_.empty()) return;
    torch::NoGradGuard no_grad;
    const FlatParams current = Flatten(model);
    model.eval();
    Unflatten(global_, model);
    model.Forward(x, &z_glob_);
    Unflatten(previous_, model);
    model.Forward(x, &z_prev_);
    Unflatten(current, model);
    model.train();
  }

  at::Tensor LossTerm(Model& model, const LocalBatch& batch) override {
    (void)model;
    if (!z_glob_.defined()) return {};
    const auto similarity = F::CosineSimilarityFuncOptions().dim(1);
    const torch::Tensor logits = torch::stack({F::cosine_similarity(batch.representation, z_glob_, similarity),
                                               F::cosine_similarity(batch.representation, z_prev_, similarity)},
                                              1) /
                                 tau_;
    const torch::Tensor positive = torch::zeros({logits.size(0)}, torch::kLong);
    return mu_ * F::cross_entropy(logits, positive);
  }

  FlatParams End(Model& model, int64_t steps, FitResult* result) override {
    (void)steps, (void)result;
    return Flatten(model);  // w_i^t, the next round's w_i^{t−1}
  }

 private:
  double mu_, tau_;
  FlatParams global_;    // w^t
  FlatParams previous_;  // w_i^{t−1}, or empty
  at::Tensor z_glob_, z_prev_;
};

}  // namespace

std::unique_ptr<LocalAlgorithm> MakeMoonLocal(const FitInstructions& ins, Model& model, const FlatParams& kept) {
  return std::make_unique<MoonLocal>(ins, model, kept);
}

}  // namespace fedprof
