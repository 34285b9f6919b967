#ifndef FEDPROF_MODELS_STAGED_MODEL_H_
#define FEDPROF_MODELS_STAGED_MODEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/models/models.h"

namespace fedprof {

// A model that runs as a chain of named stages, each one trainable layer with
// the activation and pooling after it: the form transfer learning cuts. The
// stages before the cut layer m_c form the extractor f¹, the cut layer and
// those after it the head f² (FbFTL, Section III).
//
// Built-in staged models (MakeStagedModel) profile a stage's layer before its
// activation, like every built-in model; a TorchScript model
// (models/scripted_model.h) has its top-level children as stages when they
// run in sequence. Not thread-safe: one model per thread.
class StagedModel : public Model {
 public:
  // Empty for a model whose forward is not the chain of its stages; then
  // why_not_staged() says why in one line.
  const std::vector<std::string>& stage_names() const { return stage_names_; }
  const std::string& why_not_staged() const { return why_not_staged_; }
  size_t num_stages() const { return stage_names_.size(); }
  // Index of the stage called `name`; throws fedprof::Error listing the
  // stages when there is none.
  size_t StageIndex(const std::string& name) const;

  // Runs stages [from, to) on x; Forward(x) equals ForwardStages(x, 0,
  // num_stages()).
  virtual at::Tensor ForwardStages(const at::Tensor& x, size_t from, size_t to) = 0;
  // Trainable tensors of stages [from, to), in registration order. They are
  // the model's own: changing them changes the model.
  virtual std::vector<at::Tensor> StageParameters(size_t from, size_t to) = 0;
  // Floating-point buffers (batch-norm statistics) of stages [from, to).
  virtual std::vector<at::Tensor> StageBuffers(size_t from, size_t to) = 0;

  // An independent copy: same parameters, buffers and training mode. May draw
  // from the torch generator; callers that need a known state seed it after.
  virtual std::shared_ptr<StagedModel> Clone() const = 0;
  // Writes the model to `path` (atomically) in a form LoadStagedModel reads
  // back.
  virtual void Save(const std::string& path) const = 0;

  // Draws fresh parameters for stages [from, to) from the current torch
  // seed: He initialisation for ReLU networks (weights uniform in
  // ±√(6 / fan_in), biases zero). PyTorch's default (a = √5) leaves a deep
  // ReLU stack without batch norm, like vgg_small, barely trainable.
  void Reinitialize(size_t from, size_t to);

 protected:
  std::vector<std::string> stage_names_;
  std::string why_not_staged_;
};

// A built-in staged architecture with PyTorch's default initialisation drawn
// from the current torch seed (Reinitialize(0, num_stages()) for a network
// trained from scratch). The profiled layer is fc1.
// "lenet5": LeNet-5 (LeCun et al. 1998) as in the FedProf experiments: conv1
// (6 5x5 filters, padded by 2 for inputs up to 28 px so that they reach 5x5
// after the second pool as 32x32 inputs do unpadded), conv2 (16 5x5), each
// with ReLU and 2x2 max-pool, then dense fc1 120, fc2 84, fc3 outputs.
// "vgg_small": VGG's shape at MNIST scale: conv1 (16 3x3 filters, ReLU, 2x2
// max-pool), conv2 (32, same), fc1 -> 256 (the feature layer), and a dense
// head fc2 1024, fc3 1024, fc4 512, fc5 outputs, like VGG-16's dense head in
// FbFTL's Table III (a wide head on a narrow feature vector).
// Throws fedprof::Error for an unknown name or an input shape the
// architecture cannot take.
std::shared_ptr<StagedModel> MakeStagedModel(const std::string& architecture,
                                             const std::vector<int64_t>& input_shape,
                                             int64_t outputs);

// Reads a model written by StagedModel::Save, or a TorchScript module
// exported from PyTorch (torch.jit.script(model).save(path)) whose top-level
// children run one after another, as an nn.Sequential's do; each child is a
// stage. `input_shape` (per sample) and `outputs` are what the module is
// checked against (LoadScriptedModel); a saved built-in model carries its
// own. Throws fedprof::Error naming the file when it is missing, neither
// form, or a module that cannot be cut into stages.
std::shared_ptr<StagedModel> LoadStagedModel(const std::string& path,
                                             const std::vector<int64_t>& input_shape,
                                             int64_t outputs);

}  // namespace fedprof

#endif  // FEDPROF_MODELS_STAGED_MODEL_H_
