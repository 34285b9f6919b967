#include "fedprof/models/staged_model.h"

#include <torch/torch.h>

#include <sstream>
#include <utility>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/models/scripted_model.h"

namespace fedprof {
namespace {

namespace F = torch::nn::functional;

constexpr const char* kArchitectureKey = "fedprof_architecture";

// One stage of a built-in network: a conv layer with ReLU and 2x2 max-pool,
// or a dense layer (flattening image input first) with ReLU unless it is the
// output layer.
struct Stage {
  std::string name;
  torch::nn::Conv2d conv{nullptr};
  torch::nn::Linear linear{nullptr};
  bool relu = true;

  std::shared_ptr<torch::nn::Module> layer() const {
    if (conv) return conv.ptr();
    return linear.ptr();
  }
};

// A built-in architecture. Each stage's layer is registered under the stage's
// name ("conv1.weight"), so parameters flatten in stage order.
class BuiltinStagedModel : public StagedModel {
 public:
  BuiltinStagedModel(std::string architecture, std::vector<int64_t> input_shape, int64_t outputs)
      : architecture_(std::move(architecture)),
        input_shape_(std::move(input_shape)),
        outputs_(outputs) {
    if (input_shape_.size() != 3) {
      throw Error("model " + architecture_ + ": needs image input (channels x height x width)");
    }
    const int64_t c = input_shape_[0], h = input_shape_[1], w = input_shape_[2];
    if (architecture_ == "lenet5") {
      const int64_t pad = h <= 28 ? 2 : 0;
      AddConv("conv1", c, 6, 5, pad);
      AddConv("conv2", 6, 16, 5, 0);
      const int64_t oh = ((h + 2 * pad - 4) / 2 - 4) / 2, ow = ((w + 2 * pad - 4) / 2 - 4) / 2;
      if (oh < 1 || ow < 1) throw Error("model lenet5: input too small");
      AddDense("fc1", 16 * oh * ow, 120, true);
      AddDense("fc2", 120, 84, true);
      AddDense("fc3", 84, outputs, false);
    } else if (architecture_ == "vgg_small") {
      if (h < 4 || w < 4) throw Error("model vgg_small: input smaller than 4x4");
      AddConv("conv1", c, 16, 3, 1);
      AddConv("conv2", 16, 32, 3, 1);
      AddDense("fc1", 32 * (h / 4) * (w / 4), 256, true);
      AddDense("fc2", 256, 1024, true);
      AddDense("fc3", 1024, 1024, true);
      AddDense("fc4", 1024, 512, true);
      AddDense("fc5", 512, outputs, false);
    } else {
      throw Error("model: unknown staged architecture '" + architecture_ +
                  "'; expected lenet5 or vgg_small");
    }
    profiled_layer_ = "fc1";
  }

  // The profiled representation is the stage's layer output before its
  // activation: [n, units] for a dense layer, the channel-wise sum over
  // spatial positions [n, channels] for a conv layer.
  at::Tensor Forward(const at::Tensor& x, at::Tensor* representation) override {
    at::Tensor h = x;
    for (Stage& s : stages_) {
      at::Tensor* pre =
          representation != nullptr && s.name == profiled_layer_ ? representation : nullptr;
      h = RunStage(s, h, pre);
      if (pre != nullptr && pre->dim() == 4) *pre = pre->sum({2, 3});
    }
    return h;
  }
  std::vector<std::string> ProfileableLayers() const override {
    return std::vector<std::string>(stage_names_.begin(), stage_names_.end() - 1);
  }

  at::Tensor ForwardStages(const at::Tensor& x, size_t from, size_t to) override {
    at::Tensor h = x;
    for (size_t i = from; i < to; ++i) h = RunStage(stages_[i], h, nullptr);
    return h;
  }
  std::vector<at::Tensor> StageParameters(size_t from, size_t to) override {
    std::vector<at::Tensor> out;
    for (size_t i = from; i < to; ++i) {
      for (const auto& p : stages_[i].layer()->parameters()) out.push_back(p);
    }
    return out;
  }
  std::vector<at::Tensor> StageBuffers(size_t, size_t) override { return {}; }

  std::shared_ptr<StagedModel> Clone() const override {
    auto copy = std::make_shared<BuiltinStagedModel>(architecture_, input_shape_, outputs_);
    torch::NoGradGuard no_grad;
    auto src = named_parameters();
    for (auto& p : copy->named_parameters()) p.value().copy_(src[p.key()]);
    copy->train(is_training());
    copy->profiled_layer_ = profiled_layer_;
    return copy;
  }

  void Save(const std::string& path) const override {
    torch::serialize::OutputArchive archive;
    save(archive);
    archive.write(kArchitectureKey, c10::IValue(architecture_));
    archive.write("fedprof_input_shape", torch::tensor(input_shape_));
    archive.write("fedprof_classes", torch::tensor({outputs_}));
    std::ostringstream bytes;
    archive.save_to(bytes);
    WriteFileAtomic(path, bytes.str());
  }

  // Reads the parameters Save wrote; also those of files that nest each
  // stage's layer one level deeper ("conv1.conv.weight", "fc1.linear.weight").
  void LoadParameters(torch::serialize::InputArchive& archive) {
    try {
      load(archive);
      return;
    } catch (const c10::Error&) {
    }
    torch::nn::Module nested;
    for (const Stage& s : stages_) {
      auto holder = std::make_shared<torch::nn::Module>();
      holder->register_module(s.conv ? "conv" : "linear", s.layer());
      nested.register_module(s.name, holder);
    }
    nested.load(archive);
  }

 private:
  static at::Tensor RunStage(Stage& s, const at::Tensor& x, at::Tensor* pre) {
    at::Tensor h = s.conv ? s.conv->forward(x) : s.linear->forward(x.dim() > 2 ? x.flatten(1) : x);
    if (pre != nullptr) *pre = h;
    // In place when nothing else holds h and no gradient is recorded
    // (evaluation, profiling): the same kernel and values, one
    // activation-sized tensor fewer.
    if (s.relu) h = pre == nullptr && !at::GradMode::is_enabled() ? h.relu_() : torch::relu(h);
    if (s.conv) h = MaxPool2(h);
    return h;
  }

  void AddConv(const std::string& name, int64_t in, int64_t out, int64_t kernel, int64_t pad) {
    Stage s;
    s.name = name;
    s.conv = register_module(
        name, torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).padding(pad)));
    Add(std::move(s));
  }
  void AddDense(const std::string& name, int64_t in, int64_t out, bool relu) {
    Stage s;
    s.name = name;
    s.linear = register_module(name, torch::nn::Linear(in, out));
    s.relu = relu;
    Add(std::move(s));
  }
  void Add(Stage s) {
    stage_names_.push_back(s.name);
    stages_.push_back(std::move(s));
  }

  std::string architecture_;
  std::vector<int64_t> input_shape_;
  int64_t outputs_;
  std::vector<Stage> stages_;
};

}  // namespace

size_t StagedModel::StageIndex(const std::string& name) const {
  if (stage_names_.empty()) throw Error(why_not_staged_);
  for (size_t i = 0; i < stage_names_.size(); ++i) {
    if (stage_names_[i] == name) return i;
  }
  std::string all;
  for (const auto& n : stage_names_) all += (all.empty() ? "" : ", ") + n;
  throw Error("no stage named '" + name + "'; the stages are " + all);
}

void StagedModel::Reinitialize(size_t from, size_t to) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : StageParameters(from, to)) {
    if (p.dim() >= 2) {
      torch::nn::init::kaiming_uniform_(p, 0, torch::kFanIn, torch::kReLU);
    } else {
      p.zero_();
    }
  }
}

std::shared_ptr<StagedModel> MakeStagedModel(const std::string& architecture,
                                             const std::vector<int64_t>& input_shape,
                                             int64_t outputs) {
  return std::make_shared<BuiltinStagedModel>(architecture, input_shape, outputs);
}

std::shared_ptr<StagedModel> LoadStagedModel(const std::string& path,
                                             const std::vector<int64_t>& input_shape,
                                             int64_t outputs) {
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
    ModelSpec spec;
    spec.name = "torchscript";
    spec.file = path;
    spec.input_shape = input_shape;
    spec.outputs = outputs;
    auto model = LoadScriptedModel(spec);
    if (model->num_stages() == 0) throw Error(model->why_not_staged());
    return model;
  }
  at::Tensor shape, classes;
  archive.read("fedprof_input_shape", shape);
  archive.read("fedprof_classes", classes);
  std::vector<int64_t> saved_shape(shape.data_ptr<int64_t>(),
                                   shape.data_ptr<int64_t>() + shape.numel());
  auto model = std::make_shared<BuiltinStagedModel>(architecture.toStringRef(), saved_shape,
                                                    classes.item<int64_t>());
  try {
    model->LoadParameters(archive);
  } catch (const c10::Error& e) {
    throw Error(path + ": parameters do not fit architecture " + architecture.toStringRef());
  }
  return model;
}

}  // namespace fedprof
