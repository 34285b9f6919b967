#include "fedprof/privacy/distributed_dp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "fedprof/core/error.h"

namespace fedprof {
namespace {

DdgParams SmallEncoding(size_t dim, double noise_sd, int bits) {
  DdgParams p;
  p.clip_norm = 1;
  p.noise_sd = noise_sd;
  p.bits = bits;
  p.rounding_beta = std::exp(-0.5);
  p.dim = dim;
  p.rotation_seed = 42;
  p.granularity = DdgGranularity(p.clip_norm, noise_sd, bits, 10, p.padded());
  return p;
}

// Releases of `p` whose sums held each of `clients`, all of them honest.
std::vector<DdgRelease> Releases(const DdgParams& p, const std::vector<int64_t>& clients) {
  std::vector<DdgRelease> out;
  for (int64_t n : clients) out.push_back({p, n, n});
  return out;
}

// An update of norm `norm` in a random direction, from `start`.
FlatParams UpdateOfNorm(const FlatParams& start, double norm, Rng& rng) {
  std::vector<double> dir(start.size());
  double sq = 0;
  for (double& v : dir) {
    v = StandardNormal(rng);
    sq += v * v;
  }
  FlatParams w(start.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<float>(start[i] + 0.999 * norm * dir[i] / std::sqrt(sq));
  }
  return w;
}

TEST(DiscreteGaussianTest, MatchesItsDistribution) {
  // σ = 0.7: the sample frequencies of −4..4 against the normalised
  // exp(−x²/2σ²), each within 4 binomial standard deviations.
  SeededBits rng(Rng(7));
  const double sigma = 0.7;
  const int n = 200000;
  std::map<int64_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[DiscreteGaussian(rng, sigma)];
  double z = 0;
  for (int x = -30; x <= 30; ++x) z += std::exp(-x * x / (2 * sigma * sigma));
  for (int x = -4; x <= 4; ++x) {
    const double p = std::exp(-x * x / (2 * sigma * sigma)) / z;
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(counts[x], n * p, 4 * sd + 1) << "x = " << x;
  }
}

TEST(DiscreteGaussianTest, MeanAndVarianceAtLargeScales) {
  // For σ >= 3 the discrete Gaussian's variance is σ² to within 1e-30
  // (its variance differs from σ² by a term of order exp(−2π²σ²)).
  for (double sigma : {3.0, 40.0, 5e6}) {
    SeededBits rng(Rng(static_cast<uint64_t>(sigma)));
    const int n = 100000;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      const double x = static_cast<double>(DiscreteGaussian(rng, sigma));
      sum += x;
      sq += x * x;
    }
    const double mean = sum / n;
    EXPECT_NEAR(mean, 0, 4 * sigma / std::sqrt(n)) << sigma;
    // The sample variance's sd is σ²√(2/n): 0.45% at n = 100,000.
    EXPECT_NEAR(sq / n / (sigma * sigma), 1, 0.02) << sigma;
  }
  SeededBits rng(Rng(1));
  EXPECT_THROW(DiscreteGaussian(rng, 0), Error);
}

TEST(DistributedDpTest, RotationIsOrthonormalAndFlattens) {
  std::vector<double> x(64, 0.0);
  x[5] = 2;
  RotateForward(9, &x);
  for (double v : x) EXPECT_NEAR(std::fabs(v), 2 / 8.0, 1e-15);  // 2/√64 everywhere
  RotateBack(9, &x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], i == 5 ? 2 : 0, 1e-15);
  std::vector<double> odd(48);
  EXPECT_THROW(RotateForward(9, &odd), Error);
}

TEST(DistributedDpTest, SensitivityAndGranularityByHand) {
  DdgParams p;
  p.clip_norm = 2;
  p.granularity = 0.01;
  p.dim = 100;  // D = 128
  p.rounding_beta = 0;
  EXPECT_NEAR(DdgSensitivity(p), 2 + 0.01 * std::sqrt(128.0), 1e-12);
  p.rounding_beta = std::exp(-0.5);  // √(2 ln(1/β)) = 1
  const double conditional = 4 + 1e-4 * 128 / 4 + 0.01 * (2 + 0.01 * std::sqrt(128.0) / 2);
  EXPECT_NEAR(DdgSensitivity(p), std::sqrt(conditional), 1e-12);
  // 2^(b−1) γ = 4 √(c² n²/D + n(γ²/4 + σ²)): b = 16, n = 10, c = 1, D = 64, σ = 0.1.
  const double g = DdgGranularity(1, 0.1, 16, 10, 64);
  EXPECT_NEAR(32768 * g, 4 * std::sqrt(100.0 / 64 + 10 * (g * g / 4 + 0.01)), 1e-9);
  EXPECT_THROW(DdgGranularity(1, 0.1, 8, 10000, 64), Error);
}

// The encoding every party computes for itself: each client's noise zC/√h
// for the h honest clients the sum holds at the fewest (the colluders'
// noise is the server's to subtract), γ for all the invited; and what a
// client refuses of a server's: another clip norm, word width or rounding
// bound, less noise, or a step that is not the one its noise gives (a
// coarse step rounds the noise away: at 20 σ a client's discrete Gaussian
// is zero in nearly every draw).
TEST(DistributedDpTest, EachClientComputesTheEncodingAndRefusesAnother) {
  DdgSettings own;
  own.noise_multiplier = 1.5;
  own.clip_norm = 0.5;
  own.bits = 32;
  own.rounding_beta = std::exp(-0.5);
  const DdgParams p = DdgEncodingFor(own, 1000, 20, 9, 77);
  EXPECT_DOUBLE_EQ(p.noise_sd, 1.5 * 0.5 / 3);
  EXPECT_EQ(p.granularity, DdgGranularity(0.5, p.noise_sd, 32, 20, 1024));
  EXPECT_EQ(p.rotation_seed, 77u);
  EXPECT_EQ(DdgMismatch(p, own, 20, 9), "");
  DdgParams more = p;  // more noise than asked: its step follows
  more.noise_sd *= 2;
  more.granularity = DdgGranularity(0.5, more.noise_sd, 32, 20, 1024);
  EXPECT_EQ(DdgMismatch(more, own, 20, 9), "");
  // The session's sum may hold fewer honest clients: each must add more.
  EXPECT_NE(DdgMismatch(p, own, 20, 4).find("is below the"), std::string::npos);
  DdgParams coarse = p;
  coarse.granularity = 20 * p.noise_sd;
  const std::string why = DdgMismatch(coarse, own, 20, 9);
  EXPECT_NE(why.find("its quantization step"), std::string::npos) << why;
  SeededBits bits(Rng(3));
  int nonzero = 0;
  for (int i = 0; i < 100000; ++i) nonzero += DiscreteGaussian(bits, 1 / 20.0) != 0;
  EXPECT_EQ(nonzero, 0) << "a step of 20 sd leaves no noise";
  DdgParams narrow = p;
  narrow.bits = 24;
  EXPECT_NE(DdgMismatch(narrow, own, 20, 9).find("its word width (dp.bits) 24"), std::string::npos);
  DdgParams clip = p;
  clip.clip_norm = 5;
  EXPECT_NE(DdgMismatch(clip, own, 20, 9).find("clip norm"), std::string::npos);
  DdgParams beta = p;
  beta.rounding_beta = 0;
  EXPECT_NE(DdgMismatch(beta, own, 20, 9).find("rounding bound"), std::string::npos);
  // A word width that is not whole bytes is no encoding at all.
  narrow.bits = 25;
  EXPECT_THROW(CheckDdgParams(narrow), Error);
}

TEST(DistributedDpTest, QuantizedSumRoundTrips) {
  // Ten clients without noise: the decoded sum is the sum of the updates,
  // off by at most the rounding (each coordinate within one step per client
  // before the rotation back, so the error's norm is below 10 γ √D).
  const size_t d = 300;  // D = 512
  const DdgParams p = SmallEncoding(d, 0, 16);
  Rng data(3);
  FlatParams start(d);
  for (float& v : start) v = static_cast<float>(StandardNormal(data));
  std::vector<uint64_t> sum(p.padded(), 0);
  std::vector<double> truth(d, 0.0);
  for (int k = 0; k < 10; ++k) {
    const FlatParams w = UpdateOfNorm(start, 1.0, data);
    SeededBits client(DdgClientRng(5, 1, k));
    const std::vector<uint64_t> encoded = DdgEncode(p, start, w, client);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += encoded[i];  // modulo 2^64, so 2^b too
    for (size_t i = 0; i < d; ++i) truth[i] += static_cast<double>(w[i]) - start[i];
  }
  const std::vector<double> decoded = DdgDecode(p, sum);
  ASSERT_EQ(decoded.size(), d);
  double err = 0, norm = 0;
  for (size_t i = 0; i < d; ++i) {
    err += (decoded[i] - truth[i]) * (decoded[i] - truth[i]);
    norm += truth[i] * truth[i];
  }
  EXPECT_LT(std::sqrt(err), 10 * p.granularity * std::sqrt(512.0));
  EXPECT_LT(std::sqrt(err), 0.05 * std::sqrt(norm));
  // An update beyond the clip norm is the client's mistake: refused.
  FlatParams far = start;
  far[0] += 2;
  SeededBits client(Rng(1));
  EXPECT_THROW(DdgEncode(p, start, far, client), Error);
}

TEST(DistributedDpTest, TheNoiseOfTheSumIsTheClientsTogether) {
  // Twenty clients with zero updates: the decoded sum is their noise alone,
  // each coordinate of variance 20 σ² (the rotation keeps the variance).
  const size_t d = 1000;
  const double sigma = 0.05;
  DdgParams p = SmallEncoding(d, sigma, 32);
  p.granularity = DdgGranularity(1, sigma, 32, 20, p.padded());
  const FlatParams start(d, 0.5f);
  std::vector<uint64_t> sum(p.padded(), 0);
  for (int k = 0; k < 20; ++k) {
    SeededBits client(DdgClientRng(8, 2, k));
    const std::vector<uint64_t> encoded = DdgEncode(p, start, start, client);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += encoded[i];
  }
  const std::vector<double> noise = DdgDecode(p, sum);
  double sq = 0;
  for (double v : noise) sq += v * v;
  // The sample variance of 1000 coordinates: sd 4.5% of the variance.
  EXPECT_NEAR(sq / d / (20 * sigma * sigma), 1, 0.15);
}

TEST(DistributedDpAccountingTest, GeneralSubsamplingBoundAgainstTheGaussian) {
  // At α = 2 the general bound of Zhu and Wang is the sampled Gaussian's
  // exact value; above it, never below it (it holds for any mechanism).
  const double z = 1.3, q = 0.05;
  const auto gaussian = [&](int order) { return order / (2 * z * z); };
  EXPECT_NEAR(PoissonSubsampledRdp(q, 2, gaussian), SampledGaussianRdp(q, z, 1, 2), 1e-12);
  for (int order : {3, 8, 32, 128}) {
    const double general = PoissonSubsampledRdp(q, order, gaussian);
    EXPECT_GE(general, SampledGaussianRdp(q, z, 1, order) * (1 - 1e-12)) << order;
    EXPECT_LE(general, gaussian(order)) << order;
  }
  EXPECT_EQ(PoissonSubsampledRdp(0, 5, gaussian), 0);
  EXPECT_NEAR(PoissonSubsampledRdp(1, 5, gaussian), gaussian(5), 1e-15);
}

TEST(DistributedDpAccountingTest, Eq17ByHand) {
  DdgParams p;
  p.clip_norm = 1;
  p.dim = 4;  // D = 4
  p.rounding_beta = 0;
  // σ/γ = 0.5 and three clients: τ = 10 (e^{−a/2} + e^{−2a/3}), a = 2π²(σ/γ)².
  p.granularity = 0.2;
  p.noise_sd = 0.1;
  const double a = 2 * M_PI * M_PI * 0.25;
  const double tau = 10 * (std::exp(-a / 2) + std::exp(-a * 2 / 3));
  const double s = (1 + 0.2 * 2) / (std::sqrt(3.0) * 0.1);
  const double expected = std::min(5 * s * s / 2 + tau * 4, 2.5 * (s + 2 * tau) * (s + 2 * tau));
  EXPECT_NEAR(DdgRdp(p, 3, 5), expected, 1e-9 * expected);
  EXPECT_EQ(DdgRdp(p, 0, 5), 0);
  p.noise_sd = 0;
  EXPECT_TRUE(std::isinf(DdgRdp(p, 3, 5)));
}

TEST(DistributedDpAccountingTest, AtFineGranularityItIsTheGaussiansLedger) {
  // With σ/γ in the millions τ vanishes and Δ₂ → c: one unsampled release
  // is the Gaussian mechanism's with z = √n σ / Δ₂.
  const DdgParams p = SmallEncoding(1000, 0.3, 40);
  const double z = std::sqrt(10.0) * 0.3 / DdgSensitivity(p);
  EXPECT_NEAR(DdgSensitivity(p), 1, 1e-6);
  const std::vector<DdgRelease> rounds = Releases(p, std::vector<int64_t>(20, 10));
  EXPECT_NEAR(DdgEpsilon(rounds, 1.0, 1e-5).epsilon, SampledGaussianEpsilon(1.0, z, 20, 1e-5).epsilon, 1e-9);
  EXPECT_NEAR(DdgEpsilonUnsampled(rounds, false, 1e-5).epsilon,
              SampledGaussianEpsilon(1.0, z, 20, 1e-5).epsilon, 1e-9);
  // Sampled: no better than the tight sampled Gaussian, and a round with
  // fewer clients in its sum costs more.
  const double sampled = DdgEpsilon(rounds, 0.1, 1e-5).epsilon;
  EXPECT_GE(sampled, SampledGaussianEpsilon(0.1, z, 20, 1e-5).epsilon);
  std::vector<DdgRelease> thinner = rounds;
  thinner[3].clients = thinner[3].honest = 4;
  EXPECT_GT(DdgEpsilon(thinner, 0.1, 1e-5).epsilon, sampled);
  EXPECT_EQ(DdgEpsilon(Releases(p, {0, 0}), 0.1, 1e-5).epsilon, 0);
  // Against the server only the honest clients' noise counts: with 4 of
  // the 10 colluding, a release is the Gaussian's at z √(6/10).
  std::vector<DdgRelease> colluded = rounds;
  for (DdgRelease& r : colluded) r.honest = 6;
  EXPECT_NEAR(DdgEpsilonUnsampled(colluded, true, 1e-5).epsilon,
              SampledGaussianEpsilon(1.0, z * std::sqrt(0.6), 20, 1e-5).epsilon, 1e-9);
  EXPECT_EQ(DdgEpsilonUnsampled(colluded, false, 1e-5).epsilon,
            DdgEpsilonUnsampled(rounds, false, 1e-5).epsilon);
  // A sum of colluders alone: nothing the server does not know.
  for (DdgRelease& r : colluded) r.honest = 0;
  EXPECT_TRUE(std::isinf(DdgEpsilonUnsampled(colluded, true, 1e-5).epsilon));
}

}  // namespace
}  // namespace fedprof
