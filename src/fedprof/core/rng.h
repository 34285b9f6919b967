#ifndef FEDPROF_CORE_RNG_H_
#define FEDPROF_CORE_RNG_H_

#include <cstdint>
#include <initializer_list>
#include <random>
#include <utility>
#include <vector>

namespace fedprof {

// Every random decision draws from a stream derived from the run seed and a
// tag path (purpose, round, client, ...). Streams never depend on the order in
// which other streams were used, so results do not depend on thread count, and
// a resumed run needs no generator state beyond the seed and the round.
using Rng = std::mt19937_64;

// Purposes of the derived streams; values are part of the reproducibility
// contract (changing one changes every run's numbers).
enum class Stream : uint64_t {
  kPartition = 1,
  kDataKinds = 2,
  kNoise = 3,
  kClientSpecs = 4,
  kModelInit = 5,
  kSelection = 6,
  kLocalTraining = 7,
  kReferenceSplit = 8,
  kPrivacy = 9,
  kAttackers = 10,            // which simulated clients attack (client/attack.h)
  kFederatedEvaluation = 11,  // which clients evaluate the global model
  kSecAggDropouts = 12,       // which clients of a session drop out (simulated)
  kAvailability = 13,         // when simulated clients are online (sim/availability.h)
  kDpNoise = 14,              // the server's DP noise of a round (aggregation/dp_fedavg.h)
  kRobust = 15,               // bucketing's permutation, FLAME's noise (aggregation/robust.h)
};

// SplitMix64 finaliser: a bijective 64-bit mixer.
uint64_t Mix64(uint64_t x);

// A generator seeded from (seed, stream, tags...).
Rng MakeRng(uint64_t seed, Stream stream, std::initializer_list<uint64_t> tags = {});

// One uniform real in [0, 1) keyed by (seed, stream, tags...), the key's own
// hash: for a draw that needs one number, without seeding a generator (which
// costs about a microsecond; the availability model draws one per period).
double HashUniform01(uint64_t seed, Stream stream, std::initializer_list<uint64_t> tags);

// Uniform real in [0, 1) from 53 random bits (identical across platforms,
// unlike std::uniform_real_distribution). Inline: noise draws one per pixel.
inline double Uniform01(Rng& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Standard normal by Box-Muller on Uniform01 (portable, unlike
// std::normal_distribution).
double StandardNormal(Rng& rng);
// The same from two 64-bit words of any source of random bits, a and b in
// the order StandardNormal draws them.
double StandardNormalFrom(uint64_t a, uint64_t b);

// The logarithm of a Gamma(shape, 1) draw (Marsaglia and Tsang, ACM TOMS
// 2000; shape < 1 by Gamma(a) = Gamma(a + 1) U^(1/a)), in logs so that a
// tiny shape cannot underflow to 0. shape > 0.
double LogGamma(Rng& rng, double shape);

// A draw of Dir(alpha, ..., alpha) over n categories (normalised Gamma
// draws; the largest sets the scale, so every entry is finite and they sum
// to 1 even for alpha near 0). alpha > 0, n >= 1.
std::vector<double> SymmetricDirichlet(Rng& rng, double alpha, size_t n);

// Uniform integer in [0, n) by rejection (portable).
uint64_t UniformIndex(Rng& rng, uint64_t n);

// Fisher-Yates permutation of 0..n-1.
std::vector<int64_t> Permutation(Rng& rng, int64_t n);

// A source of uniform 64-bit words for what must be reproducible in one run
// and secret in another (DP noise): a seeded stream (SeededBits), or a
// keystream no one else can compute (privacy/noise_source.h).
class RandomBits {
 public:
  virtual ~RandomBits() = default;
  virtual uint64_t Next() = 0;
};

// The words of a seeded stream, in its order.
class SeededBits final : public RandomBits {
 public:
  explicit SeededBits(Rng rng) : rng_(std::move(rng)) {}
  uint64_t Next() override { return rng_(); }

 private:
  Rng rng_;
};

// Uniform01 and UniformIndex over any source, the same arithmetic: a
// SeededBits of a generator draws what the generator itself would.
inline double Uniform01(RandomBits& bits) { return static_cast<double>(bits.Next() >> 11) * 0x1.0p-53; }
uint64_t UniformIndex(RandomBits& bits, uint64_t n);

}  // namespace fedprof

#endif  // FEDPROF_CORE_RNG_H_
