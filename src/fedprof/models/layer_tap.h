#ifndef FEDPROF_MODELS_LAYER_TAP_H_
#define FEDPROF_MODELS_LAYER_TAP_H_

#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

namespace fedprof {

// Where a TorchScript module's forward calls one of its submodules. The
// forward graph is opened (inlined) call by call, from the module down, so
// that every submodule call it reaches appears as a value of one graph: the
// call's argument and its result. An `if` on a bool attribute of a module
// (not `training`) is replaced by the branch that attribute selects, as
// MobileNet V2's `if self.use_res_connect:`; other ifs and loops stay
// closed. The module itself is not changed.
struct LayerSite {
  std::string path;  // dotted path of the submodule ("layer4.1.conv2")
  std::string type;  // its type's last name component ("Conv2d", "Linear")
  int calls = 0;     // how many times the forward calls it
  // A call inside an if or a loop of the forward (or below such a call):
  // its value exists only on some paths, so it cannot be tapped.
  bool in_control_flow = false;
  bool gives_model_output = false;  // its result is the module's output
};

// One value a tap returns: the result of the submodule at `path`, or (input
// = true) its first argument.
struct TapPoint {
  std::string path;
  bool input = false;
};

// The module's forward, opened as above, returning the module's output
// followed by the tapped values. It runs the module's own operations in
// their order, on the module's own parameters (the module object is its
// first argument), so the output is the forward's.
class LayerTap {
 public:
  // Every submodule call site the forward reaches, in forward order (a
  // container before the layers inside it), and the submodules it never
  // calls are absent. Sites with one call outside control flow can be tapped.
  static std::vector<LayerSite> Survey(const torch::jit::Module& module);

  // A forward that also returns `points`, each a site Survey reports with
  // calls == 1 and !in_control_flow (std::invalid_argument otherwise); a
  // point whose value is not a tensor returns None.
  LayerTap(const torch::jit::Module& module, const std::vector<TapPoint>& points);

  // {output, tapped values...} for input `x`; `module` must be the module
  // the tap was built from.
  std::vector<c10::IValue> Run(const torch::jit::Module& module, const at::Tensor& x);

 private:
  std::unique_ptr<torch::jit::GraphFunction> function_;
};

}  // namespace fedprof

#endif  // FEDPROF_MODELS_LAYER_TAP_H_
