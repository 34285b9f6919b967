#include "fedprof/fbftl/stage_network.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>
#include <sstream>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"

namespace fedprof {
namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

constexpr const char* kArchitectureKey = "fedprof_architecture";

// Dense stage: linear layer, then ReLU unless it is the output layer.
torch::nn::Sequential DenseStage(int64_t in, int64_t out, bool relu, bool flatten) {
  torch::nn::Sequential s;
  if (flatten) s->push_back("flatten", torch::nn::Flatten());
  s->push_back("linear", torch::nn::Linear(in, out));
  if (relu) s->push_back("relu", torch::nn::ReLU());
  return s;
}

torch::nn::Sequential ConvStage(int64_t in, int64_t out, int64_t kernel, int64_t pad) {
  torch::nn::Sequential s;
  s->push_back("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).padding(pad)));
  s->push_back("relu", torch::nn::ReLU());
  s->push_back("pool", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
  return s;
}

// A built-in architecture: stages are torch::nn::Sequential children of one
// root module, so the whole network saves and loads as one archive.
class NativeNetwork : public StageNetwork {
 public:
  NativeNetwork(std::string architecture, std::vector<int64_t> input_shape, int64_t classes)
      : architecture_(std::move(architecture)), input_shape_(std::move(input_shape)),
        classes_(classes), root_(std::make_shared<torch::nn::Module>()) {
    if (input_shape_.size() != 3) {
      throw Error("model " + architecture_ + ": needs image input (channels x height x width)");
    }
    const int64_t c = input_shape_[0], h = input_shape_[1], w = input_shape_[2];
    if (architecture_ == "vgg_small") {
      if (h < 4 || w < 4) throw Error("model vgg_small: input smaller than 4x4");
      Add("conv1", ConvStage(c, 16, 3, 1));
      Add("conv2", ConvStage(16, 32, 3, 1));
      Add("fc1", DenseStage(32 * (h / 4) * (w / 4), 256, true, true));
      Add("fc2", DenseStage(256, 1024, true, false));
      Add("fc3", DenseStage(1024, 1024, true, false));
      Add("fc4", DenseStage(1024, 512, true, false));
      Add("fc5", DenseStage(512, classes, false, false));
    } else if (architecture_ == "lenet5") {
      const int64_t pad = h <= 28 ? 2 : 0;
      const int64_t oh = ((h + 2 * pad - 4) / 2 - 4) / 2, ow = ((w + 2 * pad - 4) / 2 - 4) / 2;
      if (oh < 1 || ow < 1) throw Error("model lenet5: input too small");
      Add("conv1", ConvStage(c, 6, 5, pad));
      Add("conv2", ConvStage(6, 16, 5, 0));
      Add("fc1", DenseStage(16 * oh * ow, 120, true, true));
      Add("fc2", DenseStage(120, 84, true, false));
      Add("fc3", DenseStage(84, classes, false, false));
    } else {
      throw Error("model: unknown transfer architecture '" + architecture_ +
                  "'; expected vgg_small or lenet5");
    }
    Reinitialize(0, num_stages());
  }

  at::Tensor Forward(const at::Tensor& x, size_t from, size_t to) override {
    at::Tensor h = x;
    for (size_t i = from; i < to; ++i) h = stages_[i]->forward(h);
    return h;
  }
  std::vector<at::Tensor> Parameters(size_t from, size_t to) override {
    std::vector<at::Tensor> out;
    for (size_t i = from; i < to; ++i) {
      for (const auto& p : stages_[i]->parameters()) out.push_back(p);
    }
    return out;
  }
  std::vector<at::Tensor> Buffers(size_t from, size_t to) override {
    std::vector<at::Tensor> out;
    for (size_t i = from; i < to; ++i) {
      for (const auto& b : stages_[i]->buffers()) {
        if (b.is_floating_point()) out.push_back(b);
      }
    }
    return out;
  }
  std::unique_ptr<StageNetwork> Clone() const override {
    auto copy = std::make_unique<NativeNetwork>(architecture_, input_shape_, classes_);
    torch::NoGradGuard no_grad;
    auto src = root_->named_parameters();
    for (auto& p : copy->root_->named_parameters()) p.value().copy_(src[p.key()]);
    auto src_buffers = root_->named_buffers();
    for (auto& b : copy->root_->named_buffers()) b.value().copy_(src_buffers[b.key()]);
    copy->root_->train(root_->is_training());
    return copy;
  }
  void SetTraining(bool on) override { root_->train(on); }
  void Save(const std::string& path) const override {
    torch::serialize::OutputArchive archive;
    root_->save(archive);
    archive.write(kArchitectureKey, c10::IValue(architecture_));
    archive.write("fedprof_input_shape", torch::tensor(input_shape_));
    archive.write("fedprof_classes", torch::tensor({classes_}));
    std::ostringstream bytes;
    archive.save_to(bytes);
    WriteFileAtomic(path, bytes.str());
  }
  void Load(torch::serialize::InputArchive& archive) { root_->load(archive); }

 private:
  void Add(const std::string& name, torch::nn::Sequential stage) {
    stages_.push_back(root_->register_module(name, stage));
    names_.push_back(name);
  }

  std::string architecture_;
  std::vector<int64_t> input_shape_;
  int64_t classes_;
  std::shared_ptr<torch::nn::Module> root_;
  std::vector<torch::nn::Sequential> stages_;
};

// A TorchScript module whose top-level children are the stages.
class ScriptNetwork : public StageNetwork {
 public:
  ScriptNetwork(torch::jit::Module module, const std::string& path) : module_(std::move(module)) {
    for (const auto& child : module_.named_children()) {
      names_.push_back(child.name);
      children_.push_back(child.value);
    }
    if (names_.empty()) {
      throw Error(path + ": the TorchScript module has no child modules to use as stages");
    }
  }

  at::Tensor Forward(const at::Tensor& x, size_t from, size_t to) override {
    at::Tensor h = x;
    for (size_t i = from; i < to; ++i) h = children_[i].forward({h}).toTensor();
    return h;
  }
  std::vector<at::Tensor> Parameters(size_t from, size_t to) override {
    std::vector<at::Tensor> out;
    for (size_t i = from; i < to; ++i) {
      for (const auto& p : children_[i].parameters()) out.push_back(p);
    }
    return out;
  }
  std::vector<at::Tensor> Buffers(size_t from, size_t to) override {
    std::vector<at::Tensor> out;
    for (size_t i = from; i < to; ++i) {
      for (const auto& b : children_[i].buffers()) {
        if (b.is_floating_point()) out.push_back(b);
      }
    }
    return out;
  }
  std::unique_ptr<StageNetwork> Clone() const override {
    return std::make_unique<ScriptNetwork>(module_.clone(), "clone");
  }
  void SetTraining(bool on) override { module_.train(on); }
  void Save(const std::string& path) const override {
    std::ostringstream bytes;
    module_.save(bytes);
    WriteFileAtomic(path, bytes.str());
  }

 private:
  torch::jit::Module module_;
  std::vector<torch::jit::Module> children_;
};

}  // namespace

size_t StageNetwork::StageIndex(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  std::string all;
  for (const auto& n : names_) all += (all.empty() ? "" : ", ") + n;
  throw Error("no stage named '" + name + "'; the stages are " + all);
}

void StageNetwork::Reinitialize(size_t from, size_t to) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : Parameters(from, to)) {
    if (p.dim() >= 2) {
      torch::nn::init::kaiming_uniform_(p, 0, torch::kFanIn, torch::kReLU);
    } else {
      p.zero_();
    }
  }
}

std::vector<LayerCount> StageNetwork::Describe(const std::vector<int64_t>& input_shape) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> shape = {1};
  shape.insert(shape.end(), input_shape.begin(), input_shape.end());
  at::Tensor h = torch::zeros(shape);
  std::vector<LayerCount> layers;
  for (size_t i = 0; i < num_stages(); ++i) {
    LayerCount l;
    l.name = names_[i];
    l.inputs = h.numel();
    bool conv = false;
    for (const auto& p : Parameters(i, i + 1)) {
      l.params += p.numel();
      conv = conv || p.dim() == 4;
    }
    // A conv stage runs its kernels at every input position (stride 1, same
    // padding, as the paper counts); a dense one once, even on image input.
    const double spatial = conv && h.dim() == 4 ? static_cast<double>(h.size(2) * h.size(3)) : 1.0;
    l.macs = spatial * static_cast<double>(l.params);
    layers.push_back(l);
    h = Forward(h, i, i + 1);
  }
  return layers;
}

std::unique_ptr<StageNetwork> MakeStageNetwork(const std::string& architecture,
                                               const std::vector<int64_t>& input_shape,
                                               int64_t classes) {
  return std::make_unique<NativeNetwork>(architecture, input_shape, classes);
}

std::unique_ptr<StageNetwork> LoadStageNetwork(const std::string& path) {
  if (!FileExists(path)) throw Error(path + ": no such model file");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    throw Error(path + ": not a saved model or TorchScript module (" +
                std::string(e.what_without_backtrace()).substr(0, 200) + ")");
  }
  c10::IValue architecture;
  if (!archive.try_read(kArchitectureKey, architecture)) {
    try {
      return std::make_unique<ScriptNetwork>(torch::jit::load(path), path);
    } catch (const c10::Error& e) {
      throw Error(path + ": cannot load the TorchScript module (" +
                  std::string(e.what_without_backtrace()).substr(0, 200) + ")");
    }
  }
  at::Tensor shape, classes;
  archive.read("fedprof_input_shape", shape);
  archive.read("fedprof_classes", classes);
  std::vector<int64_t> input_shape(shape.data_ptr<int64_t>(),
                                   shape.data_ptr<int64_t>() + shape.numel());
  auto net = std::make_unique<NativeNetwork>(architecture.toStringRef(), input_shape,
                                             classes.item<int64_t>());
  try {
    net->Load(archive);
  } catch (const c10::Error& e) {
    throw Error(path + ": parameters do not fit architecture " + architecture.toStringRef());
  }
  return net;
}

}  // namespace fedprof
