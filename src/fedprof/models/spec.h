#ifndef FEDPROF_MODELS_SPEC_H_
#define FEDPROF_MODELS_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

namespace fedprof {

// Which model to build (models.h MakeModel). Plain data, so that it can
// travel to clients without torch.
struct ModelSpec {
  std::string name = "lenet5";       // lenet5 | cnn | mlp | shufflenet_v2 | resnet18
  std::vector<int64_t> input_shape;  // per sample: {c, h, w} or {features}
  int64_t outputs = 10;              // classes, or regression targets
  std::vector<int64_t> hidden = {64};
  std::string profile_layer;         // empty = the model's default
  double width = 1.0;                // ShuffleNet v2 width multiplier: 0.5, 1.0, 1.5 or 2.0
};

}  // namespace fedprof

#endif  // FEDPROF_MODELS_SPEC_H_
