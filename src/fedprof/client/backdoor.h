#ifndef FEDPROF_CLIENT_BACKDOOR_H_
#define FEDPROF_CLIENT_BACKDOOR_H_

#include <cstdint>
#include <string>

#include "fedprof/client/attack.h"
#include "fedprof/core/rng.h"
#include "fedprof/data/dataset.h"

namespace fedprof {

// The pixel-pattern backdoor (attack.kind = backdoor; docs/robustness.md).
// The trigger is a 4 × 4 checkerboard of white and black pixels, one pixel
// in from the bottom-right corner, in every channel: a pattern no clean
// MNIST or Fashion-MNIST image has there, on dark and light backgrounds alike.
constexpr int64_t kTriggerSize = 4;

// Stamps the trigger on every image of `images` ([n, c, h, w] float32,
// h and w at least kTriggerSize + 1), in place. Throws fedprof::Error otherwise.
void StampTrigger(at::Tensor& images);

// An attacker's training data: round(poison_share · n) of its images, drawn
// by `rng`, get the trigger and the label attack.target (Bagdasaryan et al.,
// AISTATS 2020, Sec. 4: backdoor and clean inputs trained on together).
void PoisonForBackdoor(Dataset* data, const Attack& attack, Rng& rng);

// The test images of every class but `target`, triggered and labelled
// `target`: a model's accuracy on it is the attack's success rate.
Dataset TriggeredTestSet(const Dataset& test, int64_t target);

// One line naming what makes the backdoor impossible on `data` (not
// images, too small for the trigger, attack.target not a class), or "".
std::string BackdoorUnfitFor(const Dataset& data, int64_t target);

}  // namespace fedprof

#endif  // FEDPROF_CLIENT_BACKDOOR_H_
