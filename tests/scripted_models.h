#ifndef FEDPROF_TESTS_SCRIPTED_MODELS_H_
#define FEDPROF_TESTS_SCRIPTED_MODELS_H_

// What the tests of exported model files (tests/torchscript_export.h) share
// on the C++ side: the model spec, the images the export script saved, and
// the error a call throws.

#include <torch/torch.h>

#include <cstring>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/data/dataset.h"
#include "fedprof/models/spec.h"

namespace fedprof::testing_support {

// The spec of an exported model file for 1x28x28 images of 10 classes,
// profiled at `layer` (empty: its default).
inline ModelSpec ScriptedSpec(const std::string& file, const std::string& layer = "") {
  ModelSpec spec;
  spec.name = "torchscript";
  spec.file = file;
  spec.input_shape = {1, 28, 28};
  spec.outputs = 10;
  spec.profile_layer = layer;
  return spec;
}

// `n` 1x28x28 images a script saved as raw float32 (all labelled 0).
inline Dataset RawImages(const std::string& file, int64_t n) {
  const std::string bytes = ReadFile(file);
  Dataset d;
  d.x = torch::empty({n, 1, 28, 28});
  if (bytes.size() != static_cast<size_t>(d.x.numel()) * sizeof(float)) {
    throw Error(file + ": not " + std::to_string(n) + " images of 1x28x28 float32");
  }
  std::memcpy(d.x.data_ptr<float>(), bytes.data(), bytes.size());
  d.y = torch::zeros({n}, torch::kLong);
  d.num_classes = 10;
  return d;
}

// The message of the fedprof::Error that `fn` throws ("" if none).
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_SCRIPTED_MODELS_H_
