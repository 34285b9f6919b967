#ifndef FEDPROF_MODELS_MODELS_H_
#define FEDPROF_MODELS_MODELS_H_

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/models/spec.h"

namespace fedprof {

// A model the simulator trains. Besides the output it can hand back the
// representation of one named layer, the one FedProf profiles: for a dense
// layer its pre-activation output [n, units]; for a conv layer or block the
// channel-wise fused representation (sum over spatial positions) [n, channels].
class Model : public torch::nn::Module {
 public:
  // Logits for classification, predictions [n, targets] for regression. When
  // `representation` is non-null it receives the profiled layer's
  // representation for this batch.
  virtual at::Tensor Forward(const at::Tensor& x, at::Tensor* representation = nullptr) = 0;

  // Layers that can be profiled, in forward order.
  virtual std::vector<std::string> ProfileableLayers() const = 0;
  // The profiled layer; empty when the model has none, and then
  // why_not_profileable() says why in one line and Forward refuses
  // (fedprof::Error) to give a representation.
  const std::string& profiled_layer() const { return profiled_layer_; }
  const std::string& why_not_profileable() const { return why_not_profileable_; }
  // Throws fedprof::Error naming the valid layers if `layer` is not one.
  virtual void SetProfiledLayer(const std::string& layer);

 protected:
  std::string profiled_layer_;
  std::string why_not_profileable_;
};

// Builds the model `spec` describes: a built-in model with parameters
// initialised from the current torch seed (lenet5 is the staged LeNet-5 of
// models/staged_model.h, which FbFTL cuts too), or (spec.name "torchscript") the
// TorchScript module in spec.file with its saved parameters
// (models/scripted_model.h). Throws fedprof::Error on an unknown name, an
// input shape the model cannot take, an unknown profile layer, or a module
// file that cannot serve.
std::shared_ptr<Model> MakeModel(const ModelSpec& spec);

// Whether `model` has batch-norm layers (entries FedBN keeps local).
bool HasBatchNorm(const Model& model);

// Number of trainable parameters.
int64_t CountParameters(const torch::nn::Module& module);

// 2x2 max pooling with stride 2 (a trailing odd row or column dropped), as
// the built-in models pool. Without gradients (evaluation, profiling) it is
// the elementwise maximum of the four strided views: the same values bit for
// bit, several times faster on CPU than max_pool2d, which also computes the
// indices of the maxima. With gradients it is max_pool2d, whose backward
// gives a tied maximum's gradient to one input, not half to each.
at::Tensor MaxPool2(const at::Tensor& x);

}  // namespace fedprof

#endif  // FEDPROF_MODELS_MODELS_H_
