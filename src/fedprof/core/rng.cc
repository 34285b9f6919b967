#include "fedprof/core/rng.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace fedprof {

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

uint64_t KeyHash(uint64_t seed, Stream stream, std::initializer_list<uint64_t> tags) {
  uint64_t h = Mix64(seed ^ Mix64(static_cast<uint64_t>(stream)));
  for (uint64_t t : tags) h = Mix64(h ^ Mix64(t + 0x632be59bd9b4e019ULL));
  return h;
}

}  // namespace

Rng MakeRng(uint64_t seed, Stream stream, std::initializer_list<uint64_t> tags) {
  const uint64_t h = KeyHash(seed, stream, tags);
  std::seed_seq seq{static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
  return Rng(seq);
}

double HashUniform01(uint64_t seed, Stream stream, std::initializer_list<uint64_t> tags) {
  return static_cast<double>(Mix64(KeyHash(seed, stream, tags)) >> 11) * 0x1.0p-53;
}

double StandardNormal(Rng& rng) {
  const uint64_t a = rng();
  const uint64_t b = rng();
  return StandardNormalFrom(a, b);
}

double StandardNormalFrom(uint64_t a, uint64_t b) {
  double u1 = static_cast<double>(a >> 11) * 0x1.0p-53;  // as Uniform01
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

namespace {

// Rejection sampling keeps the draw unbiased and portable.
template <class Next>
uint64_t UniformBelow(Next next, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do {
    r = next();
  } while (r >= limit);
  return r % n;
}

}  // namespace

uint64_t UniformIndex(Rng& rng, uint64_t n) {
  return UniformBelow([&rng] { return rng(); }, n);
}

uint64_t UniformIndex(RandomBits& bits, uint64_t n) {
  return UniformBelow([&bits] { return bits.Next(); }, n);
}

double LogGamma(Rng& rng, double shape) {
  if (shape < 1) {
    const double u = 1.0 - Uniform01(rng);  // (0, 1]: log u is finite
    return LogGamma(rng, shape + 1) + std::log(u) / shape;
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    const double x = StandardNormal(rng);
    const double t = 1.0 + c * x;
    if (t <= 0) continue;
    const double v = t * t * t;
    const double u = 1.0 - Uniform01(rng);
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return std::log(d * v);
  }
}

std::vector<double> SymmetricDirichlet(Rng& rng, double alpha, size_t n) {
  std::vector<double> p(n);
  double top = -INFINITY;
  for (double& v : p) {
    v = LogGamma(rng, alpha);
    top = std::max(top, v);
  }
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - top));
  for (double& v : p) v /= sum;
  return p;
}

std::vector<int64_t> Permutation(Rng& rng, int64_t n) {
  std::vector<int64_t> p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(p[i], p[UniformIndex(rng, static_cast<uint64_t>(i) + 1)]);
  }
  return p;
}

}  // namespace fedprof
