#include "fedprof/models/scripted_model.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fedprof/core/hash.h"
#include "fedprof/core/error.h"
#include "fedprof/core/files.h"

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

// The last component: "Linear", "Conv2d", "BatchNorm2d", or the user's class.
std::string ShortTypeName(const torch::jit::Module& m) {
  const std::string full = TypeName(m);
  return full.substr(full.rfind('.') + 1);
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
    if (profiled_layer_.empty()) throw Error(why_not_profileable_);
    return RunLevel(module_, 0, x, representation);
  }

  std::vector<std::string> ProfileableLayers() const override {
    std::vector<std::string> names;
    for (const Candidate& c : candidates_) names.push_back(c.name);
    return names;
  }

  void SetProfiledLayer(const std::string& layer) override {
    const auto found = std::find_if(candidates_.begin(), candidates_.end(),
                                    [&](const Candidate& c) { return c.name == layer; });
    if (found == candidates_.end()) throw Error(WhyNotALayer(layer));
    profiled_layer_ = layer;
    path_.clear();
    std::stringstream ss(layer);
    std::string part;
    while (std::getline(ss, part, '.')) path_.push_back(part);
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
  struct Candidate {
    std::string name;  // dotted path from the root
    bool dense = false;
  };

  // Runs the children of `m` (at depth `depth` of the profiled path) in
  // order, descending into the one on the path and capturing the last.
  at::Tensor RunLevel(torch::jit::Module m, size_t depth, const at::Tensor& x, at::Tensor* rep) {
    at::Tensor h = x;
    for (const auto& child : m.named_children()) {
      torch::jit::Module c = child.value;
      if (child.name != path_[depth]) {
        h = Call(c, h);
      } else if (depth + 1 < path_.size()) {
        h = RunLevel(c, depth + 1, h, rep);
      } else {
        h = Call(c, h);
        *rep = h.dim() == 4 ? h.sum({2, 3}) : h;
      }
    }
    return h;
  }

  // Checks the module on a sample batch and finds the layers that can be
  // profiled; then applies spec.profile_layer or the default.
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
    if (!Collect(module_, "", x, out, /*is_output=*/true, &why)) {
      why_not_profileable_ = where_ + " cannot be profiled: its forward " + why +
                             " (FedProf needs a module whose top-level children run in sequence; "
                             "docs/models.md)";
      why_not_staged_ = where_ + " cannot be cut into stages: its forward " + why;
    } else {
      for (const auto& child : module_.named_children()) {
        stage_names_.push_back(child.name);
        stages_.push_back(child.value);
      }
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
    for (const Candidate& c : candidates_) {
      if (c.dense) {
        SetProfiledLayer(c.name);
        return;
      }
    }
    if (why_not_profileable_.empty()) {
      std::string valid;
      for (const Candidate& c : candidates_) valid += (valid.empty() ? "" : "|") + c.name;
      why_not_profileable_ = "model.profile_layer: " + where_ +
                             " has no dense (Linear) layer to profile by default; name one of " +
                             valid;
    }
  }

  // Runs the children of `m` in order on `x` and, when they reproduce `out`
  // (m's own output), records those with a profileable output as candidates
  // and descends into them. `is_output`: m's output is the model's. On
  // failure returns false with `why` ("is not the sequence of ...").
  bool Collect(torch::jit::Module m, const std::string& prefix, const at::Tensor& x,
               const at::Tensor& out, bool is_output, std::string* why) {
    std::vector<std::pair<std::string, torch::jit::Module>> children;
    for (const auto& c : m.named_children()) children.emplace_back(c.name, c.value);
    const std::string what = prefix.empty()
                                 ? "top-level children"
                                 : "children of '" + prefix.substr(0, prefix.size() - 1) + "'";
    if (children.empty()) {
      *why = "has no child modules to run in sequence";
      return false;
    }
    std::vector<at::Tensor> inputs, outputs;
    at::Tensor h = x;
    for (auto& [name, child] : children) {
      inputs.push_back(h);
      try {
        h = Call(child, h);
      } catch (const std::exception& e) {
        *why = "is not the sequence of its " + what + ": running them in order fails at '" +
               prefix + name + "' (" + Reason(e) + ")";
        return false;
      }
      outputs.push_back(h);
    }
    double difference = 0;
    if (!SameOutput(h, out, &difference)) {
      *why =
          "is not the sequence of its " + what + ": running them in order gives " +
          (std::isinf(difference)
               ? "an output of shape " + ShapeText(h.sizes()) + ", not " + ShapeText(out.sizes())
               : "outputs that differ from its forward's by up to " + std::to_string(difference));
      return false;
    }
    for (size_t i = 0; i < children.size(); ++i) {
      const std::string name = prefix + children[i].first;
      const bool last = is_output && i + 1 == children.size();
      const at::Tensor& y = outputs[i];
      if (!last && (y.dim() == 2 || y.dim() == 4)) {
        candidates_.push_back({name, ShortTypeName(children[i].second) == "Linear"});
      }
      if (children[i].second.named_children().size() > 0) {
        std::string nested_why;
        if (!Collect(children[i].second, name + ".", inputs[i], y, last, &nested_why)) {
          nested_why_[name] = nested_why;
        }
      }
    }
    return true;
  }

  // Why `layer` is not a profileable layer, in one line.
  std::string WhyNotALayer(const std::string& layer) const {
    const std::string head = "model.profile_layer: '" + layer + "' ";
    if (!why_not_profileable_.empty() && candidates_.empty()) {
      return "model.profile_layer: '" + layer + "': " + why_not_profileable_;
    }
    // A path into a child that does not run as its children's sequence.
    for (const auto& [container, why] : nested_why_) {
      if (layer.rfind(container + ".", 0) == 0) {
        return head + "cannot be profiled in " + where_ + ": '" + container + "' " + why;
      }
    }
    std::string valid;
    for (const Candidate& c : candidates_) valid += (valid.empty() ? "" : "|") + c.name;
    return head + "is not a layer of " + where_ + " that can be profiled; expected " + valid;
  }

  torch::jit::Module module_;
  ModelSpec spec_;                                 // what it was built from, for Clone
  std::vector<torch::jit::Module> stages_;         // the top-level children, when they chain
  std::string where_;                              // "model.file PATH", for messages
  std::vector<Candidate> candidates_;              // in forward order, depth first
  std::map<std::string, std::string> nested_why_;  // children that are not a sequence, and why
  std::vector<std::string> path_;                  // the profiled layer's dotted path
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
