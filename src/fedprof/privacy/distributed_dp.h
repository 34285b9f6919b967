#ifndef FEDPROF_PRIVACY_DISTRIBUTED_DP_H_
#define FEDPROF_PRIVACY_DISTRIBUTED_DP_H_

// Distributed user-level DP under secure aggregation: the distributed
// discrete Gaussian mechanism (Kairouz, Liu and Steinke, ICML 2021, "DDG",
// Alg. 1 and 2). Each client clips its update to c, rotates it (random
// signs, then the normalised Walsh-Hadamard transform, so that no single
// coordinate carries much of the norm), scales it by 1/γ, rounds it to
// integers at random (conditionally: redrawn until its norm is within the
// bound of Thm. 1), adds discrete Gaussian noise N_Z(0, σ²/γ²) to each
// coordinate and reduces it modulo 2^b. Secure aggregation sums the
// clients' vectors modulo 2^b (b whole bytes, so the session's words are
// exactly b bits); the server only ever holds that noised sum, which it
// maps back to [−2^(b−1), 2^(b−1)), scales by γ and rotates back. The noise
// of the n clients in the sum adds up to about N(0, nσ²), which the
// accountant (DdgRdp) charges with the paper's correction τ. Every client
// computes σ, γ and b itself (DdgEncodingFor) and refuses a server's other
// encoding (DdgMismatch).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fedprof/core/params.h"
#include "fedprof/core/rng.h"
#include "fedprof/privacy/rdp.h"

namespace fedprof {

// One round's encoding, the same for the server and every client of it.
struct DdgParams {
  double clip_norm = 0;        // c: the L2 bound of a client's update
  double noise_sd = 0;         // σ: each client's noise, in model units
  double granularity = 0;      // γ: one integer step, in model units
  int bits = 32;               // b: values are kept modulo 2^b (8..62)
  double rounding_beta = 0;    // β of conditional rounding (Prop. 22), in [0, 1)
  size_t dim = 0;              // d: the model's values
  uint64_t rotation_seed = 0;  // the round's public random signs
  // D: d rounded up to a power of two, the length of the encoded vector.
  size_t padded() const;
};

// Throws fedprof::Error naming the field a client or server should not
// accept (non-finite or out-of-range values).
void CheckDdgParams(const DdgParams& p);

// γ from Eq. 61 of the paper (ρ = 1, k = 4 standard deviations), solved for
// γ: 2^(b−1) γ = 4 √(c² n² / D + n (γ²/4 + σ²)) with n = `clients`. Throws
// fedprof::Error when 2^b is too small for n clients at all.
double DdgGranularity(double clip_norm, double noise_sd, int bits, int64_t clients, size_t padded);

// What every party of a round computes its encoding from, each from its own
// configuration: the server's tasks carry an encoding, and each client
// recomputes it and refuses one that is not its own (DdgMismatch).
struct DdgSettings {
  double noise_multiplier = 0;  // z: the noise of the honest clients' sum over C
  double clip_norm = 0;         // C
  int bits = 32;                // b
  double rounding_beta = 0;     // β
};

// The encoding of a round whose session invites `invited` clients, of which
// the sum holds at least `fewest_honest` honest ones (secure aggregation's
// fewest survivors, less the colluders it allows): each client adds
// σ = zC/√h, so that the honest clients' noise alone makes the central
// mechanism's zC (the colluders' own noise is the server's to subtract); γ
// lets the sum of all `invited` fit in b bits (DdgGranularity); the
// round's public rotation. A `fewest_honest` below 1 (no session of that
// many can run) is taken as 1.
DdgParams DdgEncodingFor(const DdgSettings& settings, size_t dim, int64_t invited, int64_t fewest_honest,
                         uint64_t rotation_seed);

// Why a client with `own` settings refuses `task`'s encoding for a session
// of `invited` clients with at least `fewest_honest` honest ones in the sum,
// or "": another clip norm, word width or rounding bound, less noise than
// its own z asks, or a quantization step that is not the one its noise and
// the session's size give (a coarse step would round the noise away). The
// encoding's size is the model's (DdgEncode refuses another).
std::string DdgMismatch(const DdgParams& task, const DdgSettings& own, int64_t invited, int64_t fewest_honest);

// A sample of the discrete Gaussian N_Z(0, σ²) (σ > 0), by rejection from
// the discrete Laplace (Canonne, Kamath and Steinke, NeurIPS 2020, Alg. 3,
// with its Bernoulli(exp(−γ)) trials of Alg. 1 drawn from `bits` in double
// precision).
int64_t DiscreteGaussian(RandomBits& bits, double sigma);

// The rotation: x ← H D_s x / √D (random signs s from the seed, H the
// Walsh-Hadamard matrix), and its inverse. x.size() must be a power of two.
void RotateForward(uint64_t seed, std::vector<double>* x);
void RotateBack(uint64_t seed, std::vector<double>* x);

// Δ₂ of Thm. 1 in model units: the L2 bound of one client's rounded,
// rescaled vector, √min{(c + γ√D)², c² + γ²D/4 + √(2 ln(1/β)) γ (c + γ√D/2)}
// (the second term only when β > 0).
double DdgSensitivity(const DdgParams& p);

// One client's vector: the update w − start (whose norm must be within c:
// the client clips first; throws fedprof::Error otherwise), rotated,
// scaled, rounded at random, noised, modulo 2^b (D values). The rounding
// and the noise come from `bits`, the client's own (privacy/noise_source.h).
std::vector<uint64_t> DdgEncode(const DdgParams& p, const FlatParams& start, const FlatParams& w,
                                RandomBits& bits);

// The noised sum of the updates, in model units (d values), from the sum
// modulo 2^b of the clients' vectors (only its low b bits are read).
std::vector<double> DdgDecode(const DdgParams& p, const std::vector<uint64_t>& sum);

// The round's streams of the run's seed: a client's rounding and noise under
// dp.noise = seeded (simulate, launch and compare only: whoever knows the
// config can recompute it; a deployed client draws from its key or
// OpenSSL's generator, privacy/noise_source.h), and the public rotation's
// seed.
Rng DdgClientRng(uint64_t seed, int64_t round, int64_t client);
uint64_t DdgRotationSeed(uint64_t seed, int64_t round);

// RDP of order α of one release of the sum of `clients` clients' vectors
// (Prop. 14, Eq. 17 with Thm. 1): with s = Δ₂ / (√n σ) and
// τ = 10 Σ_{k=1}^{n−1} exp(−2π² (σ/γ)² k / (k + 1)),
// min{α s² / 2 + τ D, (α / 2)(s + √D τ)²}. No clients: 0 (nothing released).
double DdgRdp(const DdgParams& p, int64_t clients, int order);

// One release of a distributed-DP sum: its encoding, the clients whose noise
// it holds, and how many of them are honest at the fewest (the noise a
// server colluding with the others cannot subtract).
struct DdgRelease {
  DdgParams encoding;
  int64_t clients = 0;
  int64_t honest = 0;
};

// The orders 2..256 every ledger is kept at, and one release's RDP at each:
// with the noise of all its clients (against observers of the models) or
// of its honest ones alone (against the server: infinite when a sum holds
// none).
const std::vector<double>& DdgOrders();
std::vector<double> DdgRdpCurve(const DdgRelease& release, bool honest_only);

// ε at δ against observers of the released models: each release's client
// drawn with probability q (Poisson sampling; the general bound of Zhu and
// Wang, ICML 2019, Thm. 5), composed over the releases. The amplification
// holds against whoever does not know the sample.
EpsilonAtOrder DdgEpsilon(const std::vector<DdgRelease>& releases, double sample_rate, double delta);

// ε at δ of a client in each of `releases`, without amplification (whoever
// runs the sampling knows it): with the noise of the honest clients alone
// (against the server and its colluders), or of all of them.
EpsilonAtOrder DdgEpsilonUnsampled(const std::vector<DdgRelease>& releases, bool honest_only, double delta);

}  // namespace fedprof

#endif  // FEDPROF_PRIVACY_DISTRIBUTED_DP_H_
