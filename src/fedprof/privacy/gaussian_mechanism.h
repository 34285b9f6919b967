#ifndef FEDPROF_PRIVACY_GAUSSIAN_MECHANISM_H_
#define FEDPROF_PRIVACY_GAUSSIAN_MECHANISM_H_

#include <vector>

#include "fedprof/core/rng.h"

namespace fedprof {

// The clipped Gaussian mechanism whose privacy privacy/rdp.h accounts: scales
// `values` to L2 norm at most `clip` (S), then adds N(0, σ² S²) to every
// element, σ = `noise_multiplier`. Draws one StandardNormal per element, in
// order, from `rng`.
void AddClippedGaussianNoise(std::vector<float>& values, double clip, double noise_multiplier,
                             Rng& rng);

// Unclipped Gaussian noise of standard deviation `sd` on every element, as
// the FbFTL paper adds it to features (Section V-B: sd = σ max|z − z'| / K
// over a client's K samples). No clipping bounds the sensitivity, so no (ε, δ)
// follows from it; rdp.h's accounting assumes AddClippedGaussianNoise.
void AddGaussianNoise(std::vector<float>& values, double sd, Rng& rng);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_GAUSSIAN_MECHANISM_H_
