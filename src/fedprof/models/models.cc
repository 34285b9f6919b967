#include "fedprof/models/models.h"

#include <torch/torch.h>

#include <algorithm>

#include "fedprof/core/error.h"
#include "fedprof/core/params.h"
#include "fedprof/core/text.h"
#include "fedprof/models/scripted_model.h"
#include "fedprof/models/staged_model.h"

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
    h = MaxPool2(torch::relu(h));
    h = bn2_->forward(conv2_->forward(h));
    Capture("block2", profiled_layer_, h, rep);
    h = MaxPool2(torch::relu(h)).flatten(1);
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

// Conv (no bias: the batch norm that follows has one) + batch norm, then ReLU
// if `relu`.
class ConvBnImpl : public torch::nn::Module {
 public:
  ConvBnImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, bool relu,
             int64_t groups = 1)
      : relu_(relu) {
    conv_ = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel)
                                                          .stride(stride)
                                                          .padding(kernel / 2)
                                                          .groups(groups)
                                                          .bias(false)));
    bn_ = register_module("bn", torch::nn::BatchNorm2d(out));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = bn_->forward(conv_->forward(x));
    return relu_ ? torch::relu(h) : h;
  }

 private:
  bool relu_;
  torch::nn::Conv2d conv_{nullptr};
  torch::nn::BatchNorm2d bn_{nullptr};
};
TORCH_MODULE(ConvBn);

// Interleaves the channels of `groups` groups so that information flows
// between the two branches of consecutive ShuffleNet units.
torch::Tensor ChannelShuffle(const torch::Tensor& x, int64_t groups) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.view({n, groups, c / groups, h, w}).transpose(1, 2).reshape({n, c, h, w});
}

// One ShuffleNet V2 unit (Ma et al., "ShuffleNet V2: Practical Guidelines for
// Efficient CNN Architecture Design", ECCV 2018). Stride 1: the channels are
// split in half, one half passes through unchanged and the other through
// 1x1 conv, 3x3 depthwise conv, 1x1 conv. Stride 2: both branches see the
// whole input, downsample it and give half of the output channels each.
// Either way the two halves are concatenated and shuffled.
class ShuffleUnitImpl : public torch::nn::Module {
 public:
  ShuffleUnitImpl(int64_t in, int64_t out, int64_t stride) : stride_(stride) {
    const int64_t half = out / 2;
    if (stride > 1) {
      branch1_ = register_module(
          "branch1", torch::nn::Sequential(ConvBn(in, in, 3, stride, false, /*groups=*/in),
                                           ConvBn(in, half, 1, 1, true)));
    }
    const int64_t branch2_in = stride > 1 ? in : half;
    branch2_ = register_module(
        "branch2", torch::nn::Sequential(ConvBn(branch2_in, half, 1, 1, true),
                                         ConvBn(half, half, 3, stride, false, /*groups=*/half),
                                         ConvBn(half, half, 1, 1, true)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor out;
    if (stride_ == 1) {
      const auto halves = x.chunk(2, 1);
      out = torch::cat({halves[0], branch2_->forward(halves[1])}, 1);
    } else {
      out = torch::cat({branch1_->forward(x), branch2_->forward(x)}, 1);
    }
    return ChannelShuffle(out, 2);
  }

 private:
  int64_t stride_;
  torch::nn::Sequential branch1_{nullptr}, branch2_{nullptr};
};
TORCH_MODULE(ShuffleUnit);

// ShuffleNet V2 for small images: the ImageNet stem (3x3 stride-2 conv and a
// max pool) would shrink a 32x32 input to 8x8 before the first stage, so the
// stem conv has stride 1 and the pool is kept only for inputs over 32 px.
// Stages of 4, 8, 4 units, a 1x1 conv, global average pooling and the output
// layer; the global pool makes it independent of the input size.
class ShuffleNetV2 : public Model {
 public:
  ShuffleNetV2(const std::vector<int64_t>& in, int64_t outputs, double width) {
    // Output channels of stages 2-4 and conv5, Table 5 of the paper.
    std::vector<int64_t> channels;
    if (width == 0.5) {
      channels = {48, 96, 192, 1024};
    } else if (width == 1.0) {
      channels = {116, 232, 464, 1024};
    } else if (width == 1.5) {
      channels = {176, 352, 704, 1024};
    } else if (width == 2.0) {
      channels = {244, 488, 976, 2048};
    } else {
      throw Error("model.width: ShuffleNet v2 width must be one of 0.5, 1.0, 1.5, 2.0; got " +
                  FormatDouble(width));
    }
    pool_stem_ = std::max(in[1], in[2]) > 32;
    stem_ = register_module("stem", ConvBn(in[0], kStemChannels, 3, 1, true));
    const int64_t repeats[] = {4, 8, 4};
    int64_t c = kStemChannels;
    for (int s = 0; s < 3; ++s) {
      torch::nn::Sequential stage;
      for (int64_t i = 0; i < repeats[s]; ++i) {
        stage->push_back(ShuffleUnit(i == 0 ? c : channels[s], channels[s], i == 0 ? 2 : 1));
      }
      c = channels[s];
      stages_.push_back(register_module("stage" + std::to_string(s + 2), stage));
    }
    conv5_ = register_module("conv5", ConvBn(c, channels[3], 1, 1, true));
    fc_ = register_module("fc", torch::nn::Linear(channels[3], outputs));
    profiled_layer_ = "stem";  // 24 channels: the smallest profile
  }
  at::Tensor Forward(const at::Tensor& x, at::Tensor* rep) override {
    auto h = stem_->forward(x);
    Capture("stem", profiled_layer_, h, rep);
    if (pool_stem_) h = F::max_pool2d(h, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
    for (size_t s = 0; s < stages_.size(); ++s) {
      h = stages_[s]->forward(h);
      Capture("stage" + std::to_string(s + 2), profiled_layer_, h, rep);
    }
    h = conv5_->forward(h);
    Capture("conv5", profiled_layer_, h, rep);
    return fc_->forward(h.mean({2, 3}));
  }
  std::vector<std::string> ProfileableLayers() const override {
    return {"stem", "stage2", "stage3", "stage4", "conv5"};
  }

 private:
  static constexpr int64_t kStemChannels = 24;
  bool pool_stem_ = false;
  ConvBn stem_{nullptr}, conv5_{nullptr};
  std::vector<torch::nn::Sequential> stages_;
  torch::nn::Linear fc_{nullptr};
};

// ResNet basic block (He et al., "Deep Residual Learning for Image
// Recognition", CVPR 2016): two 3x3 conv-BN layers plus the input, through a
// 1x1 conv-BN projection where the shape changes.
class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3)
                                                            .stride(stride)
                                                            .padding(1)
                                                            .bias(false)));
    bn1_ = register_module("bn1", torch::nn::BatchNorm2d(out));
    conv2_ = register_module(
        "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    bn2_ = register_module("bn2", torch::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      shortcut_ = register_module("shortcut", ConvBn(in, out, 1, stride, false));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::relu(bn1_->forward(conv1_->forward(x)));
    h = bn2_->forward(conv2_->forward(h));
    return torch::relu(h + (shortcut_ ? shortcut_->forward(x) : x));
  }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  ConvBn shortcut_{nullptr};
};
TORCH_MODULE(BasicBlock);

// ResNet-18 in its usual CIFAR form: a 3x3 stride-1 stem and no max pool, so
// 32x32 inputs reach the last stage at 4x4; four stages of two basic blocks,
// global average pooling and the output layer.
class ResNet18 : public Model {
 public:
  ResNet18(const std::vector<int64_t>& in, int64_t outputs) {
    stem_ = register_module("stem", ConvBn(in[0], 64, 3, 1, true));
    int64_t c = 64;
    for (int s = 0; s < 4; ++s) {
      const int64_t out = 64 << s;
      layers_.push_back(register_module(
          "layer" + std::to_string(s + 1),
          torch::nn::Sequential(BasicBlock(c, out, s == 0 ? 1 : 2), BasicBlock(out, out, 1))));
      c = out;
    }
    fc_ = register_module("fc", torch::nn::Linear(c, outputs));
    profiled_layer_ = "layer4";
  }
  at::Tensor Forward(const at::Tensor& x, at::Tensor* rep) override {
    auto h = stem_->forward(x);
    Capture("stem", profiled_layer_, h, rep);
    for (size_t s = 0; s < layers_.size(); ++s) {
      h = layers_[s]->forward(h);
      Capture("layer" + std::to_string(s + 1), profiled_layer_, h, rep);
    }
    return fc_->forward(h.mean({2, 3}));
  }
  std::vector<std::string> ProfileableLayers() const override {
    return {"stem", "layer1", "layer2", "layer3", "layer4"};
  }

 private:
  ConvBn stem_{nullptr};
  std::vector<torch::nn::Sequential> layers_;
  torch::nn::Linear fc_{nullptr};
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
  if (spec.name == "torchscript") {
    if (spec.file.empty()) throw Error("model.file: a TorchScript model needs its file");
    return LoadScriptedModel(spec);
  }
  std::shared_ptr<Model> model;
  const auto& in = spec.input_shape;
  if (spec.name == "lenet5" || spec.name == "cnn" || spec.name == "shufflenet_v2" ||
      spec.name == "resnet18") {
    if (in.size() != 3) {
      throw Error("model " + spec.name + ": needs image input [c, h, w]; the data has " +
                  std::to_string(in.size()) + " dimension(s) per sample");
    }
    if (spec.name == "lenet5") {
      model = MakeStagedModel("lenet5", in, spec.outputs);
    } else if (spec.name == "cnn") {
      model = std::make_shared<SmallCnn>(in, spec.outputs);
    } else if (spec.name == "shufflenet_v2") {
      model = std::make_shared<ShuffleNetV2>(in, spec.outputs, spec.width);
    } else {
      model = std::make_shared<ResNet18>(in, spec.outputs);
    }
  } else if (spec.name == "mlp") {
    int64_t features = 1;
    for (int64_t d : in) features *= d;
    if (spec.hidden.empty()) throw Error("model.hidden: the MLP needs at least one hidden layer");
    model = std::make_shared<Mlp>(features, spec.hidden, spec.outputs);
  } else {
    throw Error("model.name: unknown model '" + spec.name +
                "'; expected lenet5|cnn|mlp|shufflenet_v2|resnet18");
  }
  if (!spec.profile_layer.empty()) model->SetProfiledLayer(spec.profile_layer);
  return model;
}

bool HasBatchNorm(const Model& model) {
  for (const auto& e : LayoutOf(model).entries) {
    if (e.is_batch_norm) return true;
  }
  return false;
}

int64_t CountParameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

at::Tensor MaxPool2(const at::Tensor& x) {
  if (at::GradMode::is_enabled() || x.dim() != 4) {
    return F::max_pool2d(x, F::MaxPool2dFuncOptions(2));
  }
  const int64_t h = x.size(2) / 2 * 2, w = x.size(3) / 2 * 2;
  const at::Tensor rows = torch::maximum(x.slice(2, 0, h, 2), x.slice(2, 1, h, 2));
  return torch::maximum(rows.slice(3, 0, w, 2), rows.slice(3, 1, w, 2)).contiguous();
}

}  // namespace fedprof
