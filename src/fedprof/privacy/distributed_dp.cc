#include "fedprof/privacy/distributed_dp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "fedprof/core/error.h"
#include "fedprof/core/text.h"

namespace fedprof {
namespace {

bool Bernoulli(RandomBits& rng, double p) { return Uniform01(rng) < p; }

// Bernoulli(exp(−γ)), γ >= 0 (Canonne, Kamath and Steinke, Alg. 1).
bool BernoulliExp(RandomBits& rng, double gamma) {
  while (gamma > 1) {
    if (!BernoulliExp(rng, 1)) return false;
    gamma -= 1;
  }
  int64_t k = 1;
  while (Bernoulli(rng, gamma / static_cast<double>(k))) ++k;
  return k % 2 == 1;
}

// The discrete Laplace of scale t (P(x) ∝ exp(−|x| / t)), t >= 1 (Alg. 2).
int64_t DiscreteLaplace(RandomBits& rng, int64_t t) {
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
  // Whole bytes: a session sums words of whole bytes, and a sum modulo
  // 2^b in wider words would keep in its high bits how many values wrapped.
  if (p.bits < 8 || p.bits > 56 || p.bits % 8 != 0) {
    bad("bits: expected 8, 16, 24, 32, 40, 48 or 56, not " + std::to_string(p.bits));
  }
  if (!(p.rounding_beta >= 0 && p.rounding_beta < 1)) bad("rounding beta: expected a value in [0, 1)");
  if (p.dim == 0 || p.dim > (size_t{1} << 31)) bad("dimension: expected 1 to 2^31 values");
  // The rounded update and the noise must stay far inside the int64 range.
  if (!(p.clip_norm / p.granularity < 0x1p52 && p.noise_sd / p.granularity < 0x1p40)) {
    bad("granularity: too fine for the clip norm and noise");
  }
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

DdgParams DdgEncodingFor(const DdgSettings& s, size_t dim, int64_t invited, int64_t fewest_honest,
                         uint64_t rotation_seed) {
  DdgParams p;
  p.clip_norm = s.clip_norm;
  p.noise_sd =
      s.noise_multiplier * s.clip_norm / std::sqrt(static_cast<double>(std::max<int64_t>(1, fewest_honest)));
  p.bits = s.bits;
  p.rounding_beta = s.rounding_beta;
  p.dim = dim;
  p.granularity = DdgGranularity(p.clip_norm, p.noise_sd, p.bits, std::max<int64_t>(1, invited), p.padded());
  p.rotation_seed = rotation_seed;
  return p;
}

std::string DdgMismatch(const DdgParams& task, const DdgSettings& own, int64_t invited, int64_t fewest_honest) {
  const auto differs = [](const std::string& what, double theirs, double mine) {
    return "its " + what + " " + FormatDouble(theirs, "%.17g") + " is not this client's " +
           FormatDouble(mine, "%.17g");
  };
  if (task.clip_norm != own.clip_norm)
    return differs("clip norm (dp.clip_norm)", task.clip_norm, own.clip_norm);
  if (task.bits != own.bits) return differs("word width (dp.bits)", task.bits, own.bits);
  if (task.rounding_beta != own.rounding_beta) {
    return differs("rounding bound (dp.rounding_beta)", task.rounding_beta, own.rounding_beta);
  }
  const DdgParams mine = DdgEncodingFor(own, task.dim, invited, fewest_honest, task.rotation_seed);
  if (!(task.noise_sd >= mine.noise_sd)) {
    return "its noise sd " + FormatDouble(task.noise_sd, "%.6g") + " is below the " +
           FormatDouble(mine.noise_sd, "%.6g") +
           " this client's dp.noise_multiplier asks of a sum of at least " +
           std::to_string(std::max<int64_t>(1, fewest_honest)) + " honest clients";
  }
  double step = 0;
  try {
    step =
        DdgGranularity(own.clip_norm, task.noise_sd, own.bits, std::max<int64_t>(1, invited), mine.padded());
  } catch (const Error& e) {
    return e.what();
  }
  if (task.granularity != step) return differs("quantization step", task.granularity, step);
  return "";
}

int64_t DiscreteGaussian(RandomBits& rng, double sigma) {
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

std::vector<uint64_t> DdgEncode(const DdgParams& p, const FlatParams& start, const FlatParams& w,
                                RandomBits& rng) {
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

const std::vector<double>& DdgOrders() {
  static const std::vector<double> orders = [] {
    std::vector<double> o;
    for (int a = 2; a <= 256; ++a) o.push_back(a);
    return o;
  }();
  return orders;
}

std::vector<double> DdgRdpCurve(const DdgRelease& release, bool honest_only) {
  const std::vector<double>& orders = DdgOrders();
  const int64_t n = honest_only ? release.honest : release.clients;
  const std::vector<double> unbounded(orders.size(), std::numeric_limits<double>::infinity());
  if (release.clients <= 0) return std::vector<double>(orders.size(), 0.0);  // nothing released
  const DdgParams& p = release.encoding;
  if (n <= 0 || p.noise_sd == 0) return unbounded;  // no noise the adversary does not know
  std::vector<double> rdp(orders.size());
  const double s = DdgSensitivity(p) / (std::sqrt(static_cast<double>(n)) * p.noise_sd);
  const double tau = Tau(p.noise_sd / p.granularity, n);
  for (size_t i = 0; i < orders.size(); ++i) {
    rdp[i] = Eq17(s, tau, static_cast<double>(p.padded()), static_cast<int>(orders[i]));
  }
  return rdp;
}

namespace {

// Releases alike for the accountant (the same clip norm, rounding bound,
// noise, step, size and counts) grouped: one curve each, however many
// rounds share it.
using ReleaseKey = std::tuple<double, double, double, double, size_t, int64_t, int64_t>;
std::map<ReleaseKey, std::pair<DdgRelease, int64_t>> Grouped(const std::vector<DdgRelease>& releases) {
  std::map<ReleaseKey, std::pair<DdgRelease, int64_t>> groups;
  for (const DdgRelease& r : releases) {
    if (r.clients <= 0) continue;  // nothing released
    const DdgParams& p = r.encoding;
    auto& g =
        groups[{p.clip_norm, p.rounding_beta, p.noise_sd, p.granularity, p.padded(), r.clients, r.honest}];
    g.first = r;
    ++g.second;
  }
  return groups;
}

}  // namespace

EpsilonAtOrder DdgEpsilon(const std::vector<DdgRelease>& releases, double sample_rate, double delta) {
  const std::vector<double>& orders = DdgOrders();
  std::vector<double> rdp(orders.size(), 0.0);
  for (const auto& [key, group] : Grouped(releases)) {
    (void)key;
    const std::vector<double> one = DdgRdpCurve(group.first, /*honest_only=*/false);
    for (size_t i = 0; i < orders.size(); ++i) {
      const auto curve = [&](int order) { return one[static_cast<size_t>(order - 2)]; };
      rdp[i] += static_cast<double>(group.second) *
                PoissonSubsampledRdp(sample_rate, static_cast<int>(orders[i]), curve);
    }
  }
  return EpsilonFromRdp(orders, rdp, delta);
}

EpsilonAtOrder DdgEpsilonUnsampled(const std::vector<DdgRelease>& releases, bool honest_only, double delta) {
  const std::vector<double>& orders = DdgOrders();
  std::vector<double> rdp(orders.size(), 0.0);
  for (const auto& [key, group] : Grouped(releases)) {
    (void)key;
    const std::vector<double> one = DdgRdpCurve(group.first, honest_only);
    for (size_t i = 0; i < orders.size(); ++i) rdp[i] += static_cast<double>(group.second) * one[i];
  }
  return EpsilonFromRdp(orders, rdp, delta);
}

}  // namespace fedprof
