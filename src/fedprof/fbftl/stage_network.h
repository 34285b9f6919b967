#ifndef FEDPROF_FBFTL_STAGE_NETWORK_H_
#define FEDPROF_FBFTL_STAGE_NETWORK_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fedprof/fbftl/payload.h"

namespace fedprof {

// A network as a chain of named stages, each one trainable layer with the
// activation and pooling after it: the form transfer learning cuts. The
// stages before the cut layer m_c form the extractor f¹ (frozen, copied from
// the source model), the cut layer and those after it the head f².
class StageNetwork {
 public:
  virtual ~StageNetwork() = default;

  const std::vector<std::string>& stage_names() const { return names_; }
  size_t num_stages() const { return names_.size(); }
  // Index of the stage called `name`; throws fedprof::Error listing the
  // stages when there is none.
  size_t StageIndex(const std::string& name) const;

  // Runs stages [from, to) on x.
  virtual at::Tensor Forward(const at::Tensor& x, size_t from, size_t to) = 0;
  at::Tensor Forward(const at::Tensor& x) { return Forward(x, 0, num_stages()); }

  // Trainable tensors of stages [from, to), in a fixed order.
  virtual std::vector<at::Tensor> Parameters(size_t from, size_t to) = 0;
  // Floating-point buffers (batch-norm statistics) of stages [from, to).
  virtual std::vector<at::Tensor> Buffers(size_t from, size_t to) = 0;
  virtual std::unique_ptr<StageNetwork> Clone() const = 0;
  virtual void SetTraining(bool on) = 0;
  // Writes the network to `path` in a form LoadStageNetwork reads back.
  virtual void Save(const std::string& path) const = 0;

  // Draws fresh parameters for stages [from, to) from the current torch
  // seed: He initialisation for ReLU networks (weights uniform in
  // ±√(6 / fan_in), biases zero). PyTorch's default (a = √5) leaves a deep
  // ReLU stack without batch norm, like vgg_small, barely trainable.
  void Reinitialize(size_t from, size_t to);

  // The stages as the FbFTL paper counts layers (Section III-D) for one
  // sample of `input_shape`: N⁻ (values entering), T (parameters) and X
  // (multiplications: T for a dense layer, input height × width × T for a
  // conv layer).
  std::vector<LayerCount> Describe(const std::vector<int64_t>& input_shape);

 protected:
  std::vector<std::string> names_;
};

// A built-in architecture, initialised by Reinitialize.
// "vgg_small": VGG's shape at MNIST scale: conv1 (16 3x3 filters, ReLU, 2x2
// max-pool), conv2 (32, same), fc1 -> 256 (the feature layer), and a dense
// head fc2 1024, fc3 1024, fc4 512, fc5 classes, like VGG-16's dense head in
// FbFTL's Table III (a wide head on a narrow feature vector). "lenet5":
// conv1, conv2, fc1 120, fc2 84, fc3. Throws fedprof::Error for an unknown
// name or an input too small.
std::unique_ptr<StageNetwork> MakeStageNetwork(const std::string& architecture,
                                               const std::vector<int64_t>& input_shape,
                                               int64_t classes);

// Reads a network saved by StageNetwork::Save, or a TorchScript module
// exported from PyTorch (torch.jit.script(model).save(path)) whose top-level
// children run one after another, as an nn.Sequential's do; each child is a
// stage. Throws fedprof::Error naming the file when it is neither.
std::unique_ptr<StageNetwork> LoadStageNetwork(const std::string& path);

}  // namespace fedprof

#endif  // FEDPROF_FBFTL_STAGE_NETWORK_H_
