#include "fedprof/models/scripted_model.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fedprof/core/hash.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/models/layer_tap.h"

namespace fedprof {
namespace {

// Messages must stay one line: LibTorch's are often several. The script
// interpreter's ("The following operation failed in the TorchScript
// interpreter.", a traceback, then "RuntimeError: <what>") say what went
// wrong on their last line; the others on their first.
std::string Reason(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::string line;
  if (text.rfind("The following operation failed", 0) == 0) {
    line = text.substr(text.rfind('\n') + 1);
    const std::string prefix = "RuntimeError: ";
    if (line.rfind(prefix, 0) == 0) line = line.substr(prefix.size());
  } else {
    line = text.substr(0, text.find('\n'));
  }
  if (line.size() > 240) line = line.substr(0, 240) + "...";
  return line;
}

std::string ShapeText(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// The script module's qualified type name, e.g.
// "__torch__.torch.nn.modules.batchnorm.BatchNorm2d" (mangled names carry
// an extra "___torch_mangle_N" component).
std::string TypeName(const torch::jit::Module& m) {
  const auto& name = m.type()->name();
  return name ? name->qualifiedName() : "Module";
}

at::Tensor Call(torch::jit::Module& m, const at::Tensor& x) { return m.forward({x}).toTensor(); }

// A fixed sample batch of `n` inputs of `shape`: values spread over [-1, 1]
// without drawing from any generator.
at::Tensor Sample(const std::vector<int64_t>& shape, int64_t n) {
  std::vector<int64_t> full = {n};
  full.insert(full.end(), shape.begin(), shape.end());
  int64_t numel = 1;
  for (int64_t d : full) numel *= d;
  return torch::sin(torch::arange(numel, torch::kFloat) * 0.37).reshape(full);
}

// Whether `a` reproduces `b`: the same kernels run in both, so any
// difference beyond rounding means another computation.
bool SameOutput(const at::Tensor& a, const at::Tensor& b, double* difference) {
  if (!a.sizes().equals(b.sizes())) {
    *difference = INFINITY;
    return false;
  }
  *difference = (a - b).abs().max().item<double>();
  const double scale = std::max(1.0, b.abs().max().item<double>());
  return *difference <= 1e-4 * scale;
}

// A module of the mirror tree: holds a script submodule's tensors under
// their names, and carries its type name, which params.cc reads to find
// batch-norm entries.
class MirrorModule : public torch::nn::Module {
 public:
  explicit MirrorModule(const std::string& type_name) : torch::nn::Module(type_name) {}
};

// Registers `src`'s own parameters and buffers on `dst` (the same tensors,
// so storage is shared) and mirrors its children below it.
void Mirror(const torch::jit::Module& src, torch::nn::Module& dst) {
  for (const auto& p : src.named_parameters(/*recurse=*/false)) {
    dst.register_parameter(p.name, p.value, p.value.requires_grad());
  }
  for (const auto& b : src.named_buffers(/*recurse=*/false)) dst.register_buffer(b.name, b.value);
  for (const auto& c : src.named_children()) {
    auto holder = std::make_shared<MirrorModule>(TypeName(c.value));
    Mirror(c.value, *holder);
    dst.register_module(c.name, holder);
  }
}

// model.profile_layer names the output of a layer ("layer4.1.conv2") or,
// with this suffix, its input ("fc:input").
constexpr const char* kInputSuffix = ":input";

bool Profileable(const std::vector<int64_t>& shape) { return shape.size() == 2 || shape.size() == 4; }

class ScriptedModel : public StagedModel {
 public:
  ScriptedModel(torch::jit::Module module, const ModelSpec& spec)
      : module_(std::move(module)), spec_(spec), where_("model.file " + spec.file) {
    Mirror(module_, *this);
    Inspect(spec);
    train(true);
  }

  at::Tensor Forward(const at::Tensor& x, at::Tensor* representation) override {
    if (representation == nullptr) return Call(module_, x);
    if (!tap_) throw Error(why_not_profileable_);
    const std::vector<c10::IValue> values = tap_->Run(module_, x);
    if (!values[1].isTensor()) {
      throw Error(where_ + ": layer '" + profiled_layer_ + "' gives no tensor for inputs of shape " +
                  ShapeText(x.sizes()));
    }
    const at::Tensor rep = values[1].toTensor();
    if (!Profileable(rep.sizes().vec())) {
      throw Error(where_ + ": layer '" + profiled_layer_ + "' gives a representation of shape " +
                  ShapeText(rep.sizes()) + " for inputs of shape " + ShapeText(x.sizes()) +
                  "; only [n, units] and [n, channels, h, w] can be profiled");
    }
    *representation = rep.dim() == 4 ? rep.sum({2, 3}) : rep;
    return values[0].toTensor();
  }

  std::vector<std::string> ProfileableLayers() const override { return candidates_; }

  void SetProfiledLayer(const std::string& layer) override {
    const std::string why = WhyNotALayer(layer);
    if (!why.empty()) throw Error(why);
    const bool input = EndsWithInputSuffix(layer);
    const std::string path = input ? layer.substr(0, layer.size() - strlen(kInputSuffix)) : layer;
    tap_ = std::make_unique<LayerTap>(module_, std::vector<TapPoint>{{path, input}});
    profiled_layer_ = layer;
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

  at::Tensor ForwardStages(const at::Tensor& x, size_t from, size_t to) override {
    at::Tensor h = x;
    for (size_t i = from; i < to; ++i) h = Call(stages_[i], h);
    return h;
  }
  std::vector<at::Tensor> StageParameters(size_t from, size_t to) override {
    std::vector<at::Tensor> out;
    for (size_t i = from; i < to; ++i) {
      for (const auto& p : stages_[i].parameters()) out.push_back(p);
    }
    return out;
  }
  std::vector<at::Tensor> StageBuffers(size_t from, size_t to) override {
    std::vector<at::Tensor> out;
    for (size_t i = from; i < to; ++i) {
      for (const auto& b : stages_[i].buffers()) {
        if (b.is_floating_point()) out.push_back(b);
      }
    }
    return out;
  }
  std::shared_ptr<StagedModel> Clone() const override {
    auto copy = std::make_shared<ScriptedModel>(module_.clone(), spec_);
    if (!profiled_layer_.empty()) copy->SetProfiledLayer(profiled_layer_);
    copy->train(is_training());
    return copy;
  }
  void Save(const std::string& path) const override {
    std::ostringstream bytes;
    module_.save(bytes);
    WriteFileAtomic(path, bytes.str());
  }

 private:
  // What the forward computes at one layer, measured on the sample batch.
  struct Layer {
    LayerSite site;
    bool tensor_output = false;
    std::vector<int64_t> output_shape, input_shape;  // empty: not a tensor
  };

  static bool EndsWithInputSuffix(const std::string& layer) {
    const size_t n = strlen(kInputSuffix);
    return layer.size() > n && layer.compare(layer.size() - n, n, kInputSuffix) == 0;
  }

  // Checks the module on a sample batch, finds its stages and the layers
  // that can be profiled; then applies spec.profile_layer or the default.
  void Inspect(const ModelSpec& spec) {
    torch::NoGradGuard no_grad;
    module_.train(false);
    const at::Tensor x = Sample(spec.input_shape, 2);
    at::Tensor out;
    try {
      out = Call(module_, x);
    } catch (const std::exception& e) {
      throw Error(where_ + ": the module fails on samples of shape " + ShapeText(x.sizes()) + ": " +
                  Reason(e));
    }
    if (out.dim() != 2 || out.size(0) != 2 || out.size(1) != spec.outputs) {
      throw Error(where_ + ": the module gives an output of shape " + ShapeText(out.sizes()) +
                  " for samples of shape " + ShapeText(x.sizes()) + "; the data needs [2, " +
                  std::to_string(spec.outputs) +
                  "] (one score per class, or one value per target)");
    }
    std::string why;
    if (ChildrenChain(x, out, &why)) {
      for (const auto& child : module_.named_children()) {
        stage_names_.push_back(child.name);
        stages_.push_back(child.value);
      }
    } else {
      why_not_staged_ = where_ + " cannot be cut into stages: its forward " + why;
    }
    try {
      MeasureLayers(x);
    } catch (const std::exception& e) {
      why_not_profileable_ =
          where_ + " cannot be profiled: its forward's layers cannot be reached (" + Reason(e) + ")";
      layers_.clear();
      candidates_.clear();
    }
    if (why_not_profileable_.empty() && candidates_.empty()) {
      why_not_profileable_ = where_ +
                             " cannot be profiled: none of its layers gives an output of "
                             "[n, units] or [n, channels, h, w] before the last one";
    }
    if (!spec.profile_layer.empty()) {
      SetProfiledLayer(spec.profile_layer);
      return;
    }
    if (!why_not_profileable_.empty()) return;
    const std::string layer = DefaultLayer();
    if (!layer.empty()) {
      SetProfiledLayer(layer);
      return;
    }
    why_not_profileable_ = "model.profile_layer: " + where_ +
                           " has no dense (Linear) layer to profile by default; name one of " +
                           Join(candidates_);
  }

  // The first Linear layer whose output is not the model's (its
  // pre-activation, as fc1 of the built-in models); else the input of the
  // last Linear layer, the penultimate representation of a network whose
  // only dense layer is its classifier (ResNet, MobileNet, EfficientNet).
  std::string DefaultLayer() const {
    for (const Layer& l : layers_) {
      if (l.site.type == "Linear" && IsCandidate(l.site.path)) return l.site.path;
    }
    for (auto l = layers_.rbegin(); l != layers_.rend(); ++l) {
      const std::string input = l->site.path + kInputSuffix;
      if (l->site.type == "Linear" && IsCandidate(input)) return input;
    }
    return "";
  }

  bool IsCandidate(const std::string& name) const {
    return std::find(candidates_.begin(), candidates_.end(), name) != candidates_.end();
  }

  // Opens the forward's layers (models/layer_tap.h) and runs them once on
  // `x`, taking the shape of every layer's input and output.
  void MeasureLayers(const at::Tensor& x) {
    std::vector<TapPoint> points;
    for (const LayerSite& site : LayerTap::Survey(module_)) {
      Layer l;
      l.site = site;
      layers_.push_back(l);
      if (site.calls == 1 && !site.in_control_flow) {
        points.push_back({site.path, false});
        points.push_back({site.path, true});
      }
    }
    LayerTap all(module_, points);
    const std::vector<c10::IValue> values = all.Run(module_, x);
    size_t next = 1;
    std::vector<std::string> inputs;
    for (Layer& l : layers_) {
      if (l.site.calls != 1 || l.site.in_control_flow) continue;
      const c10::IValue& output = values[next++];
      const c10::IValue& input = values[next++];
      if (output.isTensor()) l.output_shape = output.toTensor().sizes().vec();
      if (input.isTensor()) l.input_shape = input.toTensor().sizes().vec();
      if (!l.site.gives_model_output && Profileable(l.output_shape)) {
        candidates_.push_back(l.site.path);
      }
      // A layer's input is the previous layer's output, except where the
      // forward computes between them: before a classifier (pooling,
      // flattening) it is the representation papers profile.
      if (l.site.type == "Linear" && Profileable(l.input_shape)) {
        inputs.push_back(l.site.path + kInputSuffix);
      }
    }
    candidates_.insert(candidates_.end(), inputs.begin(), inputs.end());
  }

  // Whether the top-level children, run in order on `x`, reproduce `out`
  // (the module's own output); if not, `why` ("is not the sequence of ...").
  bool ChildrenChain(const at::Tensor& x, const at::Tensor& out, std::string* why) {
    if (module_.named_children().size() == 0) {
      *why = "has no child modules to run in sequence";
      return false;
    }
    at::Tensor h = x;
    for (const auto& child : module_.named_children()) {
      torch::jit::Module c = child.value;
      try {
        h = Call(c, h);
      } catch (const std::exception& e) {
        *why = "is not the sequence of its top-level children: running them in order fails at '" +
               child.name + "' (" + Reason(e) + ")";
        return false;
      }
    }
    double difference = 0;
    if (!SameOutput(h, out, &difference)) {
      *why =
          "is not the sequence of its top-level children: running them in order gives " +
          (std::isinf(difference)
               ? "an output of shape " + ShapeText(h.sizes()) + ", not " + ShapeText(out.sizes())
               : "outputs that differ from its forward's by up to " + std::to_string(difference));
      return false;
    }
    return true;
  }

  static std::string Join(const std::vector<std::string>& names) {
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : "|") + n;
    return all;
  }

  // Why `layer` is not a profileable layer, in one line; "" if it is one.
  std::string WhyNotALayer(const std::string& layer) const {
    if (IsCandidate(layer)) return "";
    const std::string head = "model.profile_layer: '" + layer + "' ";
    if (!why_not_profileable_.empty() && candidates_.empty()) {
      return "model.profile_layer: '" + layer + "': " + why_not_profileable_;
    }
    const bool input = EndsWithInputSuffix(layer);
    const std::string path = input ? layer.substr(0, layer.size() - strlen(kInputSuffix)) : layer;
    const std::string expected = "; expected " + Join(candidates_);
    const auto found = std::find_if(layers_.begin(), layers_.end(),
                                    [&](const Layer& l) { return l.site.path == path; });
    if (found == layers_.end()) {
      for (const auto& m : module_.named_modules()) {
        if (!path.empty() && m.name == path) {
          return head + "is a layer of " + where_ + " that its forward never calls" + expected;
        }
      }
      return head + "is not a layer of " + where_ + " that can be profiled" + expected;
    }
    const LayerSite& site = found->site;
    if (input && site.type != "Linear") {
      return head + "cannot be profiled: '" + kInputSuffix +
             "' names the input of a Linear layer, and '" + path + "' is a " + site.type;
    }
    if (site.in_control_flow) {
      return head + "cannot be profiled: '" + path + "' runs inside an if or a loop of the " +
             "forward of " + where_ + ", so its value exists on some paths only";
    }
    if (site.calls > 1) {
      return head + "cannot be profiled: the forward of " + where_ + " calls '" + path + "' " +
             std::to_string(site.calls) + " times, so it has no single representation";
    }
    const std::vector<int64_t>& shape = input ? found->input_shape : found->output_shape;
    if (shape.empty()) return head + "cannot be profiled: its " + std::string(input ? "input" : "output") + " is not a tensor";
    if (!input && site.gives_model_output) {
      return head + "is not a layer of " + where_ +
             " that can be profiled: its output is the model's (name its input, '" + path +
             kInputSuffix + "', or a layer before it)";
    }
    return head + "cannot be profiled: its " + (input ? "input" : "output") + " has shape " +
           ShapeText(shape) + " on samples of shape " + ShapeText(Sample(spec_.input_shape, 2).sizes()) +
           "; only [n, units] and [n, channels, h, w] can be profiled";
  }

  torch::jit::Module module_;
  ModelSpec spec_;                          // what it was built from, for Clone
  std::vector<torch::jit::Module> stages_;  // the top-level children, when they chain
  std::string where_;                       // "model.file PATH", for messages
  std::vector<Layer> layers_;               // the forward's layer calls, in forward order
  std::vector<std::string> candidates_;     // profileable: outputs, then inputs
  std::unique_ptr<LayerTap> tap_;           // the forward with the profiled layer's value
};

}  // namespace

std::shared_ptr<StagedModel> LoadScriptedModel(const ModelSpec& spec) {
  const std::string where = "model.file " + spec.file;
  if (!FileExists(spec.file)) throw Error(where + ": no such file");
  const std::string bytes = ReadFile(spec.file);
  if (!spec.file_sha256.empty()) {
    const std::string sha = Sha256Hex(bytes);
    if (sha != spec.file_sha256) {
      throw Error(where + ": content has SHA-256 " + sha + ", not the expected " +
                  spec.file_sha256 +
                  " (the file changed, or it is not the module the run was started with)");
    }
  }
  torch::jit::Module module;
  try {
    std::istringstream in(bytes);
    module = torch::jit::load(in);
  } catch (const std::exception& e) {
    throw Error(where + ": not a TorchScript module (" + Reason(e) +
                "); export one with torch.jit.script(net).save(path)");
  }
  return std::make_shared<ScriptedModel>(std::move(module), spec);
}

}  // namespace fedprof
