#include "fedprof/privacy/gaussian_mechanism.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fedprof {
namespace {

double Norm(const std::vector<float>& v) {
  double sum = 0;
  for (float f : v) sum += static_cast<double>(f) * f;
  return std::sqrt(sum);
}

// Sample standard deviation around a known mean of zero.
double Sd(const std::vector<float>& v) {
  return Norm(v) / std::sqrt(static_cast<double>(v.size()));
}

TEST(GaussianMechanismTest, ClipsToTheBoundAndLeavesShorterVectorsAlone) {
  Rng rng = MakeRng(1, Stream::kPrivacy);
  std::vector<float> long_vector = {3, 4};  // norm 5
  AddClippedGaussianNoise(long_vector, 1.0, 0.0, rng);
  EXPECT_NEAR(Norm(long_vector), 1.0, 1e-6);
  EXPECT_NEAR(long_vector[0] / long_vector[1], 0.75, 1e-6);  // direction kept
  std::vector<float> short_vector = {0.3f, 0.4f};
  AddClippedGaussianNoise(short_vector, 1.0, 0.0, rng);
  EXPECT_EQ(short_vector, (std::vector<float>{0.3f, 0.4f}));
}

TEST(GaussianMechanismTest, NoiseHasSdSigmaTimesClip) {
  Rng rng = MakeRng(2, Stream::kPrivacy);
  std::vector<float> v(20000, 0.0f);
  AddClippedGaussianNoise(v, 2.0, 0.5, rng);
  EXPECT_NEAR(Sd(v), 1.0, 0.03);
  // Whatever the input, the clipped part contributes at most S to the norm.
  std::vector<float> big(20000, 100.0f);
  Rng same = MakeRng(2, Stream::kPrivacy);
  AddClippedGaussianNoise(big, 2.0, 0.5, same);
  std::vector<float> difference(v.size());
  for (size_t i = 0; i < v.size(); ++i) difference[i] = big[i] - v[i];
  EXPECT_LE(Norm(difference), 2.0 + 1e-3);
}

TEST(GaussianMechanismTest, UnclippedNoiseHasTheGivenSdAndIsSeeded) {
  Rng a = MakeRng(3, Stream::kPrivacy), b = MakeRng(3, Stream::kPrivacy);
  std::vector<float> x(20000, 0.0f), y(20000, 0.0f);
  AddGaussianNoise(x, 0.25, a);
  AddGaussianNoise(y, 0.25, b);
  EXPECT_NEAR(Sd(x), 0.25, 0.01);
  EXPECT_EQ(x, y);
}

}  // namespace
}  // namespace fedprof
