#ifndef FEDPROF_MODELS_SPEC_H_
#define FEDPROF_MODELS_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fedprof {

// Which model to build (models.h MakeModel). Plain data, so that it can
// travel to clients without torch.
struct ModelSpec {
  // lenet5 | cnn | mlp | shufflenet_v2 | resnet18, or torchscript (`file`).
  std::string name = "lenet5";
  std::vector<int64_t> input_shape;  // per sample: {c, h, w} or {features}
  int64_t outputs = 10;              // classes, or regression targets
  std::vector<int64_t> hidden = {64};
  std::string profile_layer;         // empty = the model's default
  double width = 1.0;                // ShuffleNet v2 width multiplier: 0.5, 1.0, 1.5 or 2.0
  // torchscript: the module's file on this machine, and the SHA-256 (hex)
  // its content must have (empty = not checked). Only the hash travels to
  // deployment clients, which hold their own copy of the file.
  std::string file{};
  std::string file_sha256{};
};

}  // namespace fedprof

#endif  // FEDPROF_MODELS_SPEC_H_
