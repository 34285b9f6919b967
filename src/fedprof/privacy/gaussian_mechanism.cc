#include "fedprof/privacy/gaussian_mechanism.h"

#include <cmath>

namespace fedprof {

void AddClippedGaussianNoise(std::vector<float>& values, double clip, double noise_multiplier,
                             Rng& rng) {
  double norm = 0;
  for (float f : values) norm += static_cast<double>(f) * f;
  norm = std::sqrt(norm);
  const double scale = norm > clip ? clip / norm : 1.0;
  for (float& f : values) {
    f = static_cast<float>(f * scale + noise_multiplier * clip * StandardNormal(rng));
  }
}

void AddGaussianNoise(std::vector<float>& values, double sd, Rng& rng) {
  for (float& f : values) f += static_cast<float>(sd * StandardNormal(rng));
}

}  // namespace fedprof
