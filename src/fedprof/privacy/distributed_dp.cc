#include "fedprof/privacy/distributed_dp.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

bool Bernoulli(Rng& rng, double p) { return Uniform01(rng) < p; }

// Bernoulli(exp(−γ)), γ >= 0 (Canonne, Kamath and Steinke, Alg. 1).
bool BernoulliExp(Rng& rng, double gamma) {
  while (gamma > 1) {
    if (!BernoulliExp(rng, 1)) return false;
    gamma -= 1;
  }
  int64_t k = 1;
  while (Bernoulli(rng, gamma / static_cast<double>(k))) ++k;
  return k % 2 == 1;
}

// The discrete Laplace of scale t (P(x) ∝ exp(−|x| / t)), t >= 1 (Alg. 2).
int64_t DiscreteLaplace(Rng& rng, int64_t t) {
  for (;;) {
    const int64_t u = static_cast<int64_t>(UniformIndex(rng, static_cast<uint64_t>(t)));
    if (!BernoulliExp(rng, static_cast<double>(u) / static_cast<double>(t))) continue;
    int64_t v = 0;
    while (BernoulliExp(rng, 1)) ++v;
    const int64_t x = u + t * v;
    const bool negative = Bernoulli(rng, 0.5);
    if (negative && x == 0) continue;
    return negative ? -x : x;
  }
}

// The normalised Walsh-Hadamard transform in place (its own inverse).
void Hadamard(std::vector<double>* x) {
  const size_t n = x->size();
  double* v = x->data();
  for (size_t half = 1; half < n; half *= 2) {
    for (size_t block = 0; block < n; block += 2 * half) {
      for (size_t i = block; i < block + half; ++i) {
        const double a = v[i], b = v[i + half];
        v[i] = a + b;
        v[i + half] = a - b;
      }
    }
  }
  const double scale = 1 / std::sqrt(static_cast<double>(n));
  for (size_t i = 0; i < n; ++i) v[i] *= scale;
}

void FlipSigns(uint64_t seed, std::vector<double>* x) {
  Rng rng = MakeRng(seed, Stream::kDpNoise, {0});
  uint64_t bits = 0;
  for (size_t i = 0; i < x->size(); ++i) {
    if (i % 64 == 0) bits = rng();
    if ((bits >> (i % 64)) & 1) (*x)[i] = -(*x)[i];
  }
}

void CheckPowerOfTwo(const std::vector<double>& x) {
  if (x.empty() || (x.size() & (x.size() - 1)) != 0) {
    throw Error("distributed DP: a rotation of " + std::to_string(x.size()) + " values, not a power of two");
  }
}

// τ of Thm. 1 for n clients each adding N_Z(0, (σ/γ)²).
double Tau(double scaled_sd, int64_t clients) {
  double tau = 0;
  const double a = 2 * M_PI * M_PI * scaled_sd * scaled_sd;
  for (int64_t k = 1; k < clients; ++k) {
    const double term = std::exp(-a * static_cast<double>(k) / static_cast<double>(k + 1));
    if (term == 0) break;  // the terms only shrink
    tau += term;
  }
  return 10 * tau;
}

// Eq. 17 from s = Δ₂ / (√n σ), τ and D.
double Eq17(double s, double tau, double dim, int order) {
  const double a = order;
  const double spread = s + std::sqrt(dim) * tau;
  return std::min(a * s * s / 2 + tau * dim, a / 2 * spread * spread);
}

}  // namespace

size_t DdgParams::padded() const {
  size_t n = 1;
  while (n < dim) n *= 2;
  return n;
}

void CheckDdgParams(const DdgParams& p) {
  const auto bad = [](const std::string& what) { throw Error("distributed DP: " + what); };
  if (!(p.clip_norm > 0 && std::isfinite(p.clip_norm))) bad("clip norm: expected a finite value > 0");
  if (!(p.noise_sd >= 0 && std::isfinite(p.noise_sd))) bad("noise sd: expected a finite value >= 0");
  if (!(p.granularity > 0 && std::isfinite(p.granularity))) bad("granularity: expected a finite value > 0");
  if (p.bits < 8 || p.bits > 62) bad("bits: expected 8 to 62, not " + std::to_string(p.bits));
  if (!(p.rounding_beta >= 0 && p.rounding_beta < 1)) bad("rounding beta: expected a value in [0, 1)");
  if (p.dim == 0 || p.dim > (size_t{1} << 31)) bad("dimension: expected 1 to 2^31 values");
  // The rounded update and the noise must stay far inside the int64 range.
  if (!(p.clip_norm / p.granularity < 0x1p52 && p.noise_sd / p.granularity < 0x1p40)) {
    bad("granularity: too fine for the clip norm and noise");
  }
}

int64_t DdgMaxClients(int64_t expected_clients) {
  return expected_clients +
         static_cast<int64_t>(std::ceil(4 * std::sqrt(static_cast<double>(expected_clients))));
}

double DdgGranularity(double clip_norm, double noise_sd, int bits, int64_t clients, size_t padded) {
  const double n = static_cast<double>(clients);
  const double room = std::ldexp(1.0, 2 * bits - 2) - 4 * n;
  if (!(room > 0)) {
    throw Error("dp.bits: " + std::to_string(bits) + " bits cannot hold the sum of " +
                std::to_string(clients) + " clients");
  }
  const double spread = clip_norm * clip_norm * n * n / static_cast<double>(padded) + n * noise_sd * noise_sd;
  return 4 * std::sqrt(spread / room);
}

int64_t DiscreteGaussian(Rng& rng, double sigma) {
  if (!(sigma > 0 && sigma < 0x1p50)) throw Error("discrete Gaussian: expected 0 < sigma < 2^50");
  const int64_t t = static_cast<int64_t>(std::floor(sigma)) + 1;
  const double variance = sigma * sigma;
  const double centre = variance / static_cast<double>(t);
  for (;;) {
    const int64_t y = DiscreteLaplace(rng, t);
    const double gap = static_cast<double>(std::llabs(y)) - centre;
    if (BernoulliExp(rng, gap * gap / (2 * variance))) return y;
  }
}

void RotateForward(uint64_t seed, std::vector<double>* x) {
  CheckPowerOfTwo(*x);
  FlipSigns(seed, x);
  Hadamard(x);
}

void RotateBack(uint64_t seed, std::vector<double>* x) {
  CheckPowerOfTwo(*x);
  Hadamard(x);
  FlipSigns(seed, x);
}

double DdgSensitivity(const DdgParams& p) {
  const double c = p.clip_norm, g = p.granularity;
  const double root_d = std::sqrt(static_cast<double>(p.padded()));
  double bound = (c + g * root_d) * (c + g * root_d);
  if (p.rounding_beta > 0) {
    bound = std::min(bound, c * c + g * g * static_cast<double>(p.padded()) / 4 +
                                std::sqrt(2 * std::log(1 / p.rounding_beta)) * g * (c + g * root_d / 2));
  }
  return std::sqrt(bound);
}

std::vector<uint64_t> DdgEncode(const DdgParams& p, const FlatParams& start, const FlatParams& w, Rng& rng) {
  CheckDdgParams(p);
  if (start.size() != p.dim || w.size() != p.dim) {
    throw Error("distributed DP: a model of " + std::to_string(w.size()) + " values for an encoding of " +
                std::to_string(p.dim));
  }
  std::vector<double> x(p.padded(), 0.0);
  double sq = 0;
  for (size_t i = 0; i < p.dim; ++i) {
    x[i] = static_cast<double>(w[i]) - start[i];
    sq += x[i] * x[i];
  }
  if (!(std::sqrt(sq) <= p.clip_norm)) {
    throw Error("distributed DP: the update's norm " + std::to_string(std::sqrt(sq)) +
                " exceeds the clip norm " + std::to_string(p.clip_norm));
  }
  RotateForward(p.rotation_seed, &x);
  for (double& v : x) v /= p.granularity;
  // Conditional randomized rounding (Prop. 22): redrawn until the rounded
  // vector is within the bound Δ₂ / γ, which holds with probability 1 − β
  // or more; with β = 0 every draw is within it.
  const double bound = DdgSensitivity(p) / p.granularity;
  std::vector<int64_t> rounded(x.size());
  for (int attempt = 0;; ++attempt) {
    if (attempt == 1000) throw Error("distributed DP: no rounding within the norm bound in 1000 draws");
    double norm_sq = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double low = std::floor(x[i]);
      rounded[i] = static_cast<int64_t>(low) + (Bernoulli(rng, x[i] - low) ? 1 : 0);
      norm_sq += static_cast<double>(rounded[i]) * static_cast<double>(rounded[i]);
    }
    if (norm_sq <= bound * bound) break;
  }
  const uint64_t mask = (uint64_t{1} << p.bits) - 1;
  const double sd = p.noise_sd / p.granularity;
  std::vector<uint64_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t noised = rounded[i] + (sd > 0 ? DiscreteGaussian(rng, sd) : 0);
    out[i] = static_cast<uint64_t>(noised) & mask;
  }
  return out;
}

std::vector<double> DdgDecode(const DdgParams& p, const std::vector<uint64_t>& sum) {
  CheckDdgParams(p);
  if (sum.size() != p.padded()) {
    throw Error("distributed DP: a sum of " + std::to_string(sum.size()) + " values, the encoding has " +
                std::to_string(p.padded()));
  }
  const uint64_t mask = (uint64_t{1} << p.bits) - 1;
  const uint64_t half = uint64_t{1} << (p.bits - 1);
  std::vector<double> y(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) {
    const uint64_t v = sum[i] & mask;
    const int64_t centred =
        v >= half ? static_cast<int64_t>(v) - (int64_t{1} << p.bits) : static_cast<int64_t>(v);
    y[i] = static_cast<double>(centred) * p.granularity;
  }
  RotateBack(p.rotation_seed, &y);
  y.resize(p.dim);
  return y;
}

Rng DdgClientRng(uint64_t seed, int64_t round, int64_t client) {
  return MakeRng(seed, Stream::kDpNoise, {static_cast<uint64_t>(round), 1, static_cast<uint64_t>(client)});
}

uint64_t DdgRotationSeed(uint64_t seed, int64_t round) {
  Rng rng = MakeRng(seed, Stream::kDpNoise, {static_cast<uint64_t>(round), 0});
  return rng();
}

double DdgRdp(const DdgParams& p, int64_t clients, int order) {
  if (order < 2) throw Error("RDP order: expected an integer >= 2");
  if (clients <= 0) return 0;
  if (p.noise_sd == 0) return std::numeric_limits<double>::infinity();
  const double s = DdgSensitivity(p) / (std::sqrt(static_cast<double>(clients)) * p.noise_sd);
  return Eq17(s, Tau(p.noise_sd / p.granularity, clients), static_cast<double>(p.padded()), order);
}

EpsilonAtOrder DdgEpsilon(const DdgParams& p, double sample_rate,
                          const std::vector<int64_t>& clients_per_round, double delta) {
  std::map<int64_t, int64_t> rounds_of;  // clients in a sum → rounds
  for (int64_t n : clients_per_round) {
    if (n > 0) ++rounds_of[n];
  }
  std::vector<double> orders, rdp;
  for (int a = 2; a <= 256; ++a) orders.push_back(a);
  rdp.assign(orders.size(), 0.0);
  const double dim = static_cast<double>(p.padded());
  for (const auto& [n, rounds] : rounds_of) {
    if (p.noise_sd == 0) {
      rdp.assign(orders.size(), std::numeric_limits<double>::infinity());
      break;
    }
    const double s = DdgSensitivity(p) / (std::sqrt(static_cast<double>(n)) * p.noise_sd);
    const double tau = Tau(p.noise_sd / p.granularity, n);
    const auto one = [&](int order) { return Eq17(s, tau, dim, order); };
    for (size_t i = 0; i < orders.size(); ++i) {
      rdp[i] +=
          static_cast<double>(rounds) * PoissonSubsampledRdp(sample_rate, static_cast<int>(orders[i]), one);
    }
  }
  return EpsilonFromRdp(orders, rdp, delta);
}

}  // namespace fedprof
