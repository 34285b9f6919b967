// FedProx (Li et al., "Federated Optimization in Heterogeneous Networks",
// MLSys 2020, Eq. 2): the local objective adds μ/2 ||w − w^t||², w^t the
// parameters training starts from. The server half is the aggregator's
// average: FedProx has none of its own.
#include <torch/torch.h>

#include <vector>

#include "fedprof/algorithms/kinds.h"
#include "fedprof/models/models.h"

namespace fedprof {
namespace {

class FedProxLocal final : public LocalAlgorithm {
 public:
  FedProxLocal(double mu, Model& model) : mu_(mu) {
    for (const auto& p : model.parameters()) anchor_.push_back(p.detach().clone());
  }

  at::Tensor LossTerm(Model& model, const LocalBatch& batch) override {
    (void)batch;
    torch::Tensor prox = torch::zeros({}, torch::kFloat);
    const auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) prox = prox + (params[i] - anchor_[i]).pow(2).sum();
    return 0.5 * mu_ * prox;
  }

 private:
  double mu_;
  std::vector<torch::Tensor> anchor_;  // w^t
};

}  // namespace

std::unique_ptr<LocalAlgorithm> MakeFedProxLocal(double mu, Model& model) {
  return std::make_unique<FedProxLocal>(mu, model);
}

}  // namespace fedprof
