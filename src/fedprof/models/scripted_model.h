#ifndef FEDPROF_MODELS_SCRIPTED_MODEL_H_
#define FEDPROF_MODELS_SCRIPTED_MODEL_H_

#include <memory>

#include "fedprof/models/spec.h"
#include "fedprof/models/staged_model.h"

namespace fedprof {

// A TorchScript module exported from PyTorch (torch.jit.script(net).save(path))
// as a Model, built from spec.file (docs/models.md).
//
// Training and evaluation run the module's own forward. Its parameters and
// buffers are registered, sharing storage, under their dotted names in a tree
// of modules that mirrors the script module's, each named by the script
// module's qualified type name; so Flatten/Unflatten, the optimisers and
// FedBN's batch-norm entries (submodules whose type name contains
// "BatchNorm") work on it as on a built-in model, and train()/eval() reach
// the script module. A parameter saved with requires_grad = False stays
// frozen.
//
// Profiling runs the module's top-level children one after another and takes
// the output of the named layer (spec.profile_layer): a top-level child, or
// a dotted path into children that themselves run as the sequence of their
// own children ("classifier.0"). A [n, units] output is the representation
// as it is (name the Linear itself for its pre-activation), a [n, c, h, w]
// output is summed over its spatial positions. That this reproduces the
// module's forward is checked on a sample when the model is built; a module
// that fails it cannot be profiled, but trains and evaluates. The default
// layer is the first dense (Linear) layer so reached, as fc1 is for the
// built-in models.
//
// Its stages (models/staged_model.h) are its top-level children, when they
// reproduce the module's forward; otherwise it has none and says why. Save
// writes the module as TorchScript.
//
// Throws fedprof::Error with one line naming the file or option: a missing
// or unreadable file, content whose SHA-256 is not spec.file_sha256 (when
// given), a module that fails on samples of spec.input_shape or gives an
// output other than [n, spec.outputs], or a profile layer that is not one
// (saying why: no such layer, or a forward that is not the sequence of the
// children).
std::shared_ptr<StagedModel> LoadScriptedModel(const ModelSpec& spec);

}  // namespace fedprof

#endif  // FEDPROF_MODELS_SCRIPTED_MODEL_H_
