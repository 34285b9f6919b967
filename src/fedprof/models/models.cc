#include "fedprof/models/models.h"

#include <torch/torch.h>

#include <algorithm>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

namespace F = torch::nn::functional;

// Channel-wise fused representation of a conv output [n, c, h, w]: the sum of
// each channel over its spatial positions.
torch::Tensor FuseChannels(const torch::Tensor& t) { return t.sum({2, 3}); }

void Capture(const std::string& layer, const std::string& wanted, const torch::Tensor& value,
             at::Tensor* representation) {
  if (representation != nullptr && layer == wanted) {
    *representation = value.dim() == 4 ? FuseChannels(value) : value;
  }
}

// LeNet-5 (LeCun et al. 1998) as used in the FedProf experiments: two 5x5
// conv layers with max pooling, then dense 120-84-outputs. conv1 pads by 2 so
// 28x28 inputs reach 5x5 after the second pool, as 32x32 inputs do unpadded.
class LeNet5 : public Model {
 public:
  LeNet5(const std::vector<int64_t>& in, int64_t outputs) {
    const int64_t pad = in[1] <= 28 ? 2 : 0;
    conv1_ = register_module("conv1", torch::nn::Conv2d(
                                          torch::nn::Conv2dOptions(in[0], 6, 5).padding(pad)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(6, 16, 5));
    const int64_t h = ((in[1] + 2 * pad - 4) / 2 - 4) / 2;
    const int64_t w = ((in[2] + 2 * pad - 4) / 2 - 4) / 2;
    if (h < 1 || w < 1) throw Error("model lenet5: input too small");
    fc1_ = register_module("fc1", torch::nn::Linear(16 * h * w, 120));
    fc2_ = register_module("fc2", torch::nn::Linear(120, 84));
    fc3_ = register_module("fc3", torch::nn::Linear(84, outputs));
    profiled_layer_ = "fc1";
  }
  at::Tensor Forward(const at::Tensor& x, at::Tensor* rep) override {
    auto h = conv1_->forward(x);
    Capture("conv1", profiled_layer_, h, rep);
    h = F::max_pool2d(torch::relu(h), F::MaxPool2dFuncOptions(2));
    h = conv2_->forward(h);
    Capture("conv2", profiled_layer_, h, rep);
    h = F::max_pool2d(torch::relu(h), F::MaxPool2dFuncOptions(2)).flatten(1);
    h = fc1_->forward(h);
    Capture("fc1", profiled_layer_, h, rep);
    h = fc2_->forward(torch::relu(h));
    Capture("fc2", profiled_layer_, h, rep);
    return fc3_->forward(torch::relu(h));
  }
  std::vector<std::string> ProfileableLayers() const override {
    return {"conv1", "conv2", "fc1", "fc2"};
  }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr}, fc3_{nullptr};
};

// A small CNN with batch norm: two conv-BN-ReLU-pool blocks, a dense layer of
// 128 and the output layer.
class SmallCnn : public Model {
 public:
  SmallCnn(const std::vector<int64_t>& in, int64_t outputs) {
    conv1_ = register_module("conv1", torch::nn::Conv2d(
                                          torch::nn::Conv2dOptions(in[0], 32, 3).padding(1)));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(32));
    conv2_ = register_module("conv2", torch::nn::Conv2d(
                                          torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    bn2_ = register_module("bn2", torch::nn::BatchNorm2d(64));
    const int64_t h = in[1] / 4, w = in[2] / 4;
    if (h < 1 || w < 1) throw Error("model cnn: input too small");
    fc1_ = register_module("fc1", torch::nn::Linear(64 * h * w, 128));
    fc2_ = register_module("fc2", torch::nn::Linear(128, outputs));
    profiled_layer_ = "fc1";
  }
  at::Tensor Forward(const at::Tensor& x, at::Tensor* rep) override {
    auto h = bn1_->forward(conv1_->forward(x));
    Capture("block1", profiled_layer_, h, rep);
    h = F::max_pool2d(torch::relu(h), F::MaxPool2dFuncOptions(2));
    h = bn2_->forward(conv2_->forward(h));
    Capture("block2", profiled_layer_, h, rep);
    h = F::max_pool2d(torch::relu(h), F::MaxPool2dFuncOptions(2)).flatten(1);
    h = fc1_->forward(h);
    Capture("fc1", profiled_layer_, h, rep);
    return fc2_->forward(torch::relu(h));
  }
  std::vector<std::string> ProfileableLayers() const override {
    return {"block1", "block2", "fc1"};
  }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

// Multi-layer perceptron for tabular data: dense layers of the given widths
// with ReLU, then the output layer.
class Mlp : public Model {
 public:
  Mlp(int64_t in, const std::vector<int64_t>& hidden, int64_t outputs) {
    int64_t width = in;
    for (size_t i = 0; i < hidden.size(); ++i) {
      layers_.push_back(register_module("fc" + std::to_string(i + 1),
                                        torch::nn::Linear(width, hidden[i])));
      width = hidden[i];
    }
    layers_.push_back(register_module("fc" + std::to_string(hidden.size() + 1),
                                      torch::nn::Linear(width, outputs)));
    profiled_layer_ = "fc1";
  }
  at::Tensor Forward(const at::Tensor& x, at::Tensor* rep) override {
    auto h = x.flatten(1);
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (i > 0) h = torch::relu(h);
      h = layers_[i]->forward(h);
      if (i + 1 < layers_.size()) Capture("fc" + std::to_string(i + 1), profiled_layer_, h, rep);
    }
    return h;
  }
  std::vector<std::string> ProfileableLayers() const override {
    std::vector<std::string> names;
    for (size_t i = 0; i + 1 < layers_.size(); ++i) names.push_back("fc" + std::to_string(i + 1));
    return names;
  }

 private:
  std::vector<torch::nn::Linear> layers_;
};

}  // namespace

void Model::SetProfiledLayer(const std::string& layer) {
  const auto layers = ProfileableLayers();
  if (std::find(layers.begin(), layers.end(), layer) == layers.end()) {
    std::string valid;
    for (const auto& l : layers) valid += (valid.empty() ? "" : "|") + l;
    throw Error("model.profile_layer: '" + layer + "' is not a layer of this model; expected " +
                valid);
  }
  profiled_layer_ = layer;
}

std::shared_ptr<Model> MakeModel(const ModelSpec& spec) {
  std::shared_ptr<Model> model;
  const auto& in = spec.input_shape;
  if (spec.name == "lenet5" || spec.name == "cnn") {
    if (in.size() != 3) {
      throw Error("model " + spec.name + ": needs image input [c, h, w]; the data has " +
                  std::to_string(in.size()) + " dimension(s) per sample");
    }
    if (spec.name == "lenet5") {
      model = std::make_shared<LeNet5>(in, spec.outputs);
    } else {
      model = std::make_shared<SmallCnn>(in, spec.outputs);
    }
  } else if (spec.name == "mlp") {
    int64_t features = 1;
    for (int64_t d : in) features *= d;
    if (spec.hidden.empty()) throw Error("model.hidden: the MLP needs at least one hidden layer");
    model = std::make_shared<Mlp>(features, spec.hidden, spec.outputs);
  } else {
    throw Error("model.name: unknown model '" + spec.name + "'; expected lenet5|cnn|mlp");
  }
  if (!spec.profile_layer.empty()) model->SetProfiledLayer(spec.profile_layer);
  return model;
}

int64_t CountParameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace fedprof
