#ifndef FEDPROF_DATA_QUALITY_H_
#define FEDPROF_DATA_QUALITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/config/run_options.h"
#include "fedprof/core/rng.h"
#include "fedprof/data/dataset.h"

namespace fedprof {

// The data-quality scenarios of the FedProf papers (spec section 6).
enum class DataKind {
  kClean,
  kIrrelevant,    // images from another source, labels random
  kBlurred,       // Gaussian blur
  kSaltPepper,    // salt-and-pepper pixel noise
  kGaussianNoise, // additive Gaussian noise (images or tabular features)
  kPolluted,      // tabular features replaced by invalid values
};

const char* DataKindName(DataKind kind);

// Which clients get which kind (the quality.* options' fractions of clients;
// the rest are clean): round(fraction * num_clients) clients per
// kind, in enum order over a seeded permutation of the clients (a kind whose
// rounded count no longer fits gets the clients left). Fractions outside
// [0, 1] or summing above 1 are an error naming them.
std::vector<DataKind> AssignDataKinds(int num_clients,
                                      const RunOptions::Quality& options,
                                      uint64_t seed);

// In-place effects, each seeded through `rng`.
// Separable Gaussian blur per channel, kernel radius ceil(3 sigma), edges
// clamped. images: [n, c, h, w].
void ApplyGaussianBlur(at::Tensor& images, double sigma);
// Each pixel independently, with probability `density`, becomes 0 or 1
// (equal odds); all channels of a hit pixel get the same value.
void ApplySaltPepper(at::Tensor& images, double density, Rng& rng);
// x += sigma * N(0, 1), then images are clamped to [0, 1]; tabular features
// are not clamped.
void ApplyGaussianNoise(at::Tensor& x, double sigma, Rng& rng);
// Each cell, with probability `share`, is replaced by an invalid value:
// +-(10 + 10 u) times its column's standard deviation plus the column mean
// (far outside the data's range). Statistics come from the clean data; a
// constant column uses a standard deviation of 1. features: [n, f].
void ApplyPollution(at::Tensor& features, double share, Rng& rng);

// Irrelevant data with the size and shape of `client`: images drawn at random
// from `source` (another data set of the same image shape) when given, else
// synthetic uniform-noise images; labels uniform over client.num_classes.
// For regression (num_classes 0) the targets are the client's own, permuted.
Dataset MakeIrrelevant(const Dataset& client, const Dataset* source, Rng& rng);

// The rows of `source` MakeIrrelevant gives a client of `n` samples: its
// first draws from `rng`.
std::vector<int64_t> IrrelevantPicks(int64_t n, int64_t source_size, Rng& rng);

}  // namespace fedprof

#endif  // FEDPROF_DATA_QUALITY_H_
