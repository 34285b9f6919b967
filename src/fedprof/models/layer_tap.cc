#include "fedprof/models/layer_tap.h"

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <map>
#include <stdexcept>

namespace fedprof {
namespace {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

struct OpenedSite {
  LayerSite site;
  Value* input = nullptr;   // first argument of the (first) call
  Value* output = nullptr;  // its result
  // Copies of the two taken where the call happens: later operations may
  // change them in place (ResNet's `out += identity`, ReLU(inplace=True)).
  Value* tapped_input = nullptr;
  Value* tapped_output = nullptr;
};

// The forward graph with its calls opened, and the sites it reached.
struct Opened {
  std::shared_ptr<Graph> graph;
  std::vector<OpenedSite> sites;  // in forward order
  std::map<std::string, size_t> index;
};

std::string LastComponent(const std::string& name) { return name.substr(name.rfind('.') + 1); }

// The dotted path of the submodule `receiver` is, when it is reached from
// the module (`self`) through attribute reads only.
bool ReceiverPath(Value* receiver, Value* self, std::string* path) {
  std::vector<std::string> names;
  Value* v = receiver;
  while (v != self) {
    Node* n = v->node();
    if (n->kind() != c10::prim::GetAttr) return false;
    names.push_back(n->s(c10::attr::name));
    v = n->input(0);
  }
  path->clear();
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    *path += (path->empty() ? "" : ".") + *it;
  }
  return true;
}

bool IsForwardCall(Node* n) {
  return n->kind() == c10::prim::CallMethod && n->s(c10::attr::name) == "forward";
}

std::string TypeOf(Node* call) {
  const auto cls = call->input(0)->type()->cast<c10::ClassType>();
  return cls && cls->name() ? LastComponent(cls->name()->qualifiedName()) : "Module";
}

OpenedSite& SiteFor(Opened& o, const std::string& path, Node* call) {
  auto [it, added] = o.index.emplace(path, o.sites.size());
  if (added) {
    OpenedSite s;
    s.site.path = path;
    s.site.type = TypeOf(call);
    o.sites.push_back(s);
  }
  return o.sites[it->second];
}

// Records the submodule calls inside `block` (an if or a loop body), which
// stay closed: their values exist on some paths only.
void RecordNested(Opened& o, Block* block, Value* self) {
  for (Node* n : block->nodes()) {
    for (Block* b : n->blocks()) RecordNested(o, b, self);
    std::string path;
    if (IsForwardCall(n) && ReceiverPath(n->input(0), self, &path) && !path.empty()) {
      OpenedSite& s = SiteFor(o, path, n);
      ++s.site.calls;
      s.site.in_control_flow = true;
    }
  }
}

bool IsTensor(Value* v) { return v != nullptr && v->type()->isSubtypeOf(*c10::TensorType::get()); }

// A copy of `v` inserted before `where`.
Value* CopyBefore(Graph& g, Value* v, Node* where) {
  torch::jit::WithInsertPoint guard(where);
  return g.insert(c10::aten::clone, {v});
}

// The value of `condition` when it reads a bool attribute of the module or
// of a submodule (MobileNet's `if self.use_res_connect:`), which the
// forward's `if` then always takes the same way; false if it reads
// anything else. `training` is left out: train() and eval() change it.
bool AttributeCondition(const torch::jit::Module& module, Value* condition, Value* self,
                        bool* value) {
  Node* read = condition->node();
  if (read->kind() != c10::prim::GetAttr) return false;
  const std::string name = read->s(c10::attr::name);
  std::string path;
  if (name == "training" || !ReceiverPath(read->input(0), self, &path)) return false;
  torch::jit::Module owner = module;
  std::string rest = path;
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const std::string part = rest.substr(0, dot);
    if (!owner.hasattr(part)) return false;
    const c10::IValue child = owner.attr(part);
    if (!child.isModule()) return false;
    owner = child.toModule();
    rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
  }
  if (!owner.hasattr(name)) return false;
  const c10::IValue v = owner.attr(name);
  if (!v.isBool()) return false;
  *value = v.toBool();
  return true;
}

// Replaces the `if` node `n` by the nodes of the branch it takes.
void TakeBranch(Node* n, bool condition) {
  Block* taken = n->blocks()[condition ? 0 : 1];
  while (taken->nodes().begin() != taken->nodes().end()) taken->nodes().front()->moveBefore(n);
  for (size_t i = 0; i < n->outputs().size(); ++i) {
    n->outputs()[i]->replaceAllUsesWith(taken->outputs()[i]);
  }
  n->destroy();
}

// Opens the forward of `module`; the sites named in `taps` get copies of
// the tapped values.
Opened Open(const torch::jit::Module& module, const std::vector<TapPoint>& taps = {}) {
  Opened o;
  o.graph = module.get_method("forward").graph()->copy();
  Value* self = o.graph->inputs()[0];
  Node* n = o.graph->block()->nodes().front();
  while (n != o.graph->return_node()) {
    bool condition = false;
    if (n->kind() == c10::prim::If && AttributeCondition(module, n->input(0), self, &condition)) {
      Node* previous = n->prev();
      TakeBranch(n, condition);
      n = previous->next();
      continue;
    }
    for (Block* b : n->blocks()) RecordNested(o, b, self);
    torch::jit::GraphFunction* callee = nullptr;
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction) {
      callee = torch::jit::tryToGraphFunction(n);
    }
    if (callee == nullptr) {
      n = n->next();
      continue;
    }
    std::string path;
    const bool is_site =
        IsForwardCall(n) && ReceiverPath(n->input(0), self, &path) && !path.empty();
    OpenedSite* site = is_site ? &SiteFor(o, path, n) : nullptr;
    Value* argument = is_site && n->inputs().size() > 1 ? n->input(1) : nullptr;
    const std::vector<Value*> before(n->outputs().begin(), n->outputs().end());
    Node* previous = n->prev();
    Node* following = n->next();
    bool tap_input = false, tap_output = false;
    for (const TapPoint& p : taps) {
      if (site != nullptr && p.path == path) (p.input ? tap_input : tap_output) = true;
    }
    const bool first_call = site != nullptr && site->site.calls == 0;
    if (first_call && tap_input && IsTensor(argument)) {
      site->tapped_input = CopyBefore(*o.graph, argument, n);
      previous = n->prev();
    }
    // A function call's first input is the function itself, not an argument.
    if (n->kind() == c10::prim::CallFunction) n->removeInput(0);
    // The callee's own graph, not its optimized one: that would come back
    // with every call below it already inlined, and their sites lost.
    const std::vector<Value*> after = torch::jit::inlineCallTo(n, callee, callee->graph().get());
    // Values recorded earlier may be this call's results (a container's
    // result is its last layer's).
    for (OpenedSite& s : o.sites) {
      for (size_t i = 0; i < before.size(); ++i) {
        if (s.output == before[i]) s.output = after[i];
        if (s.input == before[i]) s.input = after[i];
      }
    }
    if (site != nullptr && ++site->site.calls == 1) {
      site->input = argument;
      site->output = after.size() == 1 ? after[0] : nullptr;
      if (tap_output && IsTensor(site->output)) {
        site->tapped_output = CopyBefore(*o.graph, site->output, following);
      }
    }
    n = previous->next();  // the first opened node, so calls inside it open too
  }
  return o;
}

}  // namespace

std::vector<LayerSite> LayerTap::Survey(const torch::jit::Module& module) {
  Opened o = Open(module);
  std::vector<LayerSite> sites;
  std::vector<std::string> closed;  // sites inside control flow
  for (const OpenedSite& s : o.sites) {
    LayerSite site = s.site;
    site.gives_model_output =
        s.output != nullptr && o.graph->outputs().size() == 1 && s.output == o.graph->outputs()[0];
    if (site.in_control_flow) closed.push_back(site.path + ".");
    sites.push_back(site);
  }
  // The layers inside a closed call run, but only where the call does.
  for (const auto& m : module.named_modules()) {
    if (o.index.count(m.name)) continue;
    for (const std::string& prefix : closed) {
      if (m.name.rfind(prefix, 0) == 0) {
        LayerSite site;
        site.path = m.name;
        const auto& name = m.value.type()->name();
        site.type = name ? LastComponent(name->qualifiedName()) : "Module";
        site.calls = 1;
        site.in_control_flow = true;
        sites.push_back(site);
        break;
      }
    }
  }
  return sites;
}

LayerTap::LayerTap(const torch::jit::Module& module, const std::vector<TapPoint>& points) {
  Opened o = Open(module, points);
  if (o.graph->outputs().size() != 1) {
    throw std::invalid_argument("the forward returns more than one value");
  }
  std::vector<Value*> outputs = {o.graph->outputs()[0]};
  for (const TapPoint& p : points) {
    const auto found = o.index.find(p.path);
    if (found == o.index.end()) throw std::invalid_argument("'" + p.path + "' is never called");
    const OpenedSite& s = o.sites[found->second];
    if (s.site.calls != 1 || s.site.in_control_flow) {
      throw std::invalid_argument("'" + p.path + "' has no single value to tap");
    }
    Value* v = p.input ? s.tapped_input : s.tapped_output;
    outputs.push_back(v != nullptr ? v : o.graph->insertConstant(c10::IValue()));
  }
  Graph& g = *o.graph;
  g.setInsertPoint(g.return_node());  // after the constants inserted above
  Node* tuple = g.insertNode(g.createTuple(outputs));
  g.eraseOutput(0);
  g.registerOutput(tuple->output());
  function_ = std::make_unique<torch::jit::GraphFunction>("fedprof_layer_tap", o.graph, nullptr);
}

std::vector<c10::IValue> LayerTap::Run(const torch::jit::Module& module, const at::Tensor& x) {
  torch::jit::Stack stack = {module._ivalue(), x};
  function_->run(stack);
  return stack.back().toTupleRef().elements().vec();
}

}  // namespace fedprof
