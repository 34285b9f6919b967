#include "fedprof/algorithms/algorithm.h"

#include <torch/torch.h>

#include <cmath>

#include "fedprof/aggregation/model_sum.h"
#include "fedprof/algorithms/kinds.h"
#include "fedprof/core/error.h"
#include "fedprof/models/models.h"

namespace fedprof {

std::unique_ptr<ServerAlgorithm> MakeServerAlgorithm(const std::string& algorithm, const RunOptions& options) {
  if (algorithm.empty() || algorithm == "none") return nullptr;
  if (algorithm == "scaffold") return MakeScaffoldServer(options.scaffold.server_lr);
  if (algorithm == "fednova") return MakeFedNovaServer();
  if (algorithm == "feddyn") return MakeFedDynServer(options.feddyn.alpha);
  throw Error("strategy.algorithm: unknown client algorithm '" + algorithm + "'");
}

std::vector<std::unique_ptr<LocalAlgorithm>> MakeLocalAlgorithms(const FitInstructions& ins, Model& model,
                                                                 const FlatParams& kept) {
  std::vector<std::unique_ptr<LocalAlgorithm>> out;
  const LocalObjective& o = ins.objective;
  if (o.prox_mu > 0) out.push_back(MakeFedProxLocal(o.prox_mu, model));
  if (o.algorithm == "scaffold") out.push_back(MakeScaffoldLocal(ins, model, kept));
  if (o.algorithm == "fednova") out.push_back(MakeFedNovaLocal(ins.train));
  if (o.algorithm == "feddyn" && o.feddyn_alpha > 0) out.push_back(MakeFedDynLocal(ins, model, kept));
  if (!o.algorithm.empty() && o.algorithm != "none" && o.algorithm != "scaffold" && o.algorithm != "fednova" &&
      o.algorithm != "feddyn") {
    throw Error("task: unknown client algorithm '" + o.algorithm + "'");
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
