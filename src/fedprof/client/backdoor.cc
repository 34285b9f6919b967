#include "fedprof/client/backdoor.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "fedprof/core/error.h"

namespace fedprof {

std::string BackdoorUnfitFor(const Dataset& data, int64_t target) {
  if (!data.is_image()) return "attack.kind: backdoor needs image data, " + data.name + " is not";
  if (data.x.size(2) <= kTriggerSize || data.x.size(3) <= kTriggerSize) {
    return "attack.kind: backdoor needs images larger than its " + std::to_string(kTriggerSize) + " x " +
           std::to_string(kTriggerSize) + " trigger";
  }
  if (data.is_regression() || target >= data.num_classes) {
    return "attack.target: " + std::to_string(target) + " is not a class of " + data.name + " (" +
           std::to_string(data.num_classes) + " classes)";
  }
  return "";
}

void StampTrigger(at::Tensor& images) {
  if (images.dim() != 4 || images.scalar_type() != at::kFloat || images.size(2) <= kTriggerSize ||
      images.size(3) <= kTriggerSize) {
    throw Error("StampTrigger: expected float images [n, c, h, w] larger than the trigger");
  }
  // 1 where row + column is even, 0 elsewhere.
  std::vector<float> pattern(kTriggerSize * kTriggerSize);
  for (int64_t i = 0; i < kTriggerSize; ++i) {
    for (int64_t j = 0; j < kTriggerSize; ++j) pattern[i * kTriggerSize + j] = (i + j) % 2 == 0 ? 1.f : 0.f;
  }
  const at::Tensor trigger = at::from_blob(pattern.data(), {kTriggerSize, kTriggerSize}, at::kFloat);
  const int64_t h = images.size(2), w = images.size(3);
  images.slice(2, h - 1 - kTriggerSize, h - 1).slice(3, w - 1 - kTriggerSize, w - 1).copy_(trigger);
}

void PoisonForBackdoor(Dataset* data, const Attack& attack, Rng& rng) {
  const int64_t n = data->size();
  const auto count = std::min<int64_t>(n, std::llround(attack.poison_share * static_cast<double>(n)));
  if (count <= 0) return;
  const std::vector<int64_t> order = Permutation(rng, n);
  const at::Tensor rows = at::tensor(std::vector<int64_t>(order.begin(), order.begin() + count), at::kLong);
  at::Tensor images = data->x.index_select(0, rows);
  StampTrigger(images);
  data->x.index_copy_(0, rows, images);
  data->y.index_fill_(0, rows, attack.target);
}

Dataset TriggeredTestSet(const Dataset& test, int64_t target) {
  const at::Tensor keep = at::nonzero(test.y != target).flatten();
  Dataset triggered;
  triggered.x = test.x.index_select(0, keep).clone();
  StampTrigger(triggered.x);
  triggered.y = at::full({keep.size(0)}, target, at::kLong);
  triggered.num_classes = test.num_classes;
  triggered.name = test.name + " (triggered)";
  return triggered;
}

}  // namespace fedprof
