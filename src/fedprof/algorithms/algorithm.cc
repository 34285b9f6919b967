#include "fedprof/algorithms/algorithm.h"

#include <torch/torch.h>

#include <cmath>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/algorithms/kinds.h"
#include "fedprof/algorithms/registry.h"
#include "fedprof/core/error.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"

namespace fedprof {

namespace {

AlgorithmKind KindOf(const std::string& algorithm, const char* where) {
  const AlgorithmName* a = FindAlgorithm(algorithm);
  if (a == nullptr) throw Error(std::string(where) + ": unknown client algorithm '" + Printable(algorithm) + "'");
  return a->kind;
}

}  // namespace

std::unique_ptr<ServerAlgorithm> MakeServerAlgorithm(const std::string& algorithm, const RunOptions& options) {
  switch (KindOf(algorithm, "strategy.algorithm")) {
    case AlgorithmKind::kScaffold:
      return MakeScaffoldServer(options.scaffold.server_lr);
    case AlgorithmKind::kFedNova:
      return MakeFedNovaServer();
    case AlgorithmKind::kFedDyn:
      return MakeFedDynServer(options.feddyn.alpha);
    case AlgorithmKind::kRegistered:
      return RegisteredClientAlgorithm(algorithm).server(options);
    case AlgorithmKind::kNone:
    case AlgorithmKind::kMoon:  // the average is MOON's server half
      return nullptr;
  }
  return nullptr;
}

std::vector<std::unique_ptr<LocalAlgorithm>> MakeLocalAlgorithms(const FitInstructions& ins, int client_id,
                                                                 Model& model, const FlatParams& kept) {
  std::vector<std::unique_ptr<LocalAlgorithm>> out;
  const LocalObjective& o = ins.objective;
  if (o.prox_mu > 0) out.push_back(MakeFedProxLocal(o.prox_mu, model));
  switch (KindOf(o.algorithm, "task")) {
    case AlgorithmKind::kScaffold:
      out.push_back(MakeScaffoldLocal(ins, model, kept));
      break;
    case AlgorithmKind::kFedNova:
      out.push_back(MakeFedNovaLocal(ins.train));
      break;
    case AlgorithmKind::kFedDyn:  // α = 0: neither half runs
      if (o.feddyn_alpha > 0) out.push_back(MakeFedDynLocal(ins, model, kept));
      break;
    case AlgorithmKind::kMoon:  // μ = 0: no term
      if (o.moon_mu > 0) out.push_back(MakeMoonLocal(ins, model, kept));
      break;
    case AlgorithmKind::kRegistered:
      out.push_back(RegisteredClientAlgorithm(o.algorithm).local(ins, client_id, model, kept));
      break;
    case AlgorithmKind::kNone:
      break;
  }
  return out;
}

std::vector<at::Tensor> ParameterTensors(Model& model, const FlatParams& values) {
  std::vector<at::Tensor> out;
  size_t offset = 0;
  for (const torch::Tensor& p : model.parameters()) {
    const auto n = static_cast<size_t>(p.numel());
    if (offset + n > values.size()) {
      throw Error("client algorithm: a vector of " + std::to_string(values.size()) +
                  " values for a model with more parameters");
    }
    out.push_back(torch::from_blob(const_cast<float*>(values.data() + offset), p.sizes(), torch::kFloat).clone());
    offset += n;
  }
  return out;
}

std::string CheckAlgorithmValues(const FlatParams& values, size_t num_params, const std::string& what) {
  if (values.size() != num_params) {
    return what + " of " + std::to_string(values.size()) + " values, the model has " + std::to_string(num_params);
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!(std::fabs(values[i]) < kMaxModelSumTerm)) {
      return what + ": value " + std::to_string(i) + " is not finite or out of range";
    }
  }
  return "";
}

}  // namespace fedprof
