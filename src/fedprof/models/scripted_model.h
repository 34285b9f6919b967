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
// Profiling takes the named layer's value (spec.profile_layer) from the
// module's own forward (models/layer_tap.h): the output of any submodule
// by its dotted path ("layer4.1.conv2", "features.18", "classifier.0"), or
// with ":input" the input of a Linear layer ("fc:input"). A [n, units] value is the
// representation as it is (name the Linear itself for its pre-activation),
// a [n, c, h, w] value is summed over its spatial positions. A layer the
// forward never calls, calls more than once or inside an if or a loop, one
// whose output is the model's, or a value of another rank cannot be
// profiled. The default layer is the first Linear layer whose output is not
// the model's, as fc1 is for the built-in models; a module whose only
// Linear layer is its classifier is profiled at that layer's input, the
// penultimate representation ("fc:input" for a ResNet).
//
// Its stages (models/staged_model.h) are its top-level children, when they
// reproduce the module's forward; otherwise it has none and says why. Save
// writes the module as TorchScript.
//
// Throws fedprof::Error with one line naming the file or option: a missing
// or unreadable file, content whose SHA-256 is not spec.file_sha256 (when
// given), a module that fails on samples of spec.input_shape or gives an
// output other than [n, spec.outputs], or a profile layer that cannot be
// profiled (saying why; an unknown name lists those that can).
std::shared_ptr<StagedModel> LoadScriptedModel(const ModelSpec& spec);

}  // namespace fedprof

#endif  // FEDPROF_MODELS_SCRIPTED_MODEL_H_
