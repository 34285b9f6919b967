#include "fedprof/fbftl/compression.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"
#include "transfer.pb.h"

namespace fedprof {
namespace {

std::vector<float> RoundTrip(const std::vector<float>& v, const Compression& c) {
  wire::Values w;
  EncodeValues(v, c, &w);
  return DecodeValues(w, static_cast<int64_t>(v.size()), "test");
}

TEST(CompressionTest, DenseIsExactAndThirtyTwoBitsPerValue) {
  const std::vector<float> v = {1.5f, -2.25f, 0.0f, 3e-8f, -1e9f};
  wire::Values w;
  EncodeValues(v, Compression{}, &w);
  EXPECT_EQ(DecodeValues(w, 5, "test"), v);
  EXPECT_EQ(WireValueBits(w), 32 * 5);
  EXPECT_EQ(PayloadBits(5, Compression{}), 32 * 5);
}

TEST(CompressionTest, TopKKeepsTheLargestMagnitudes) {
  const std::vector<float> v = {0.1f, -5.0f, 3.0f, 0.2f, -0.05f, 4.0f};
  const std::vector<float> expected = {0, -5.0f, 3.0f, 0, 0, 4.0f};
  EXPECT_EQ(RoundTrip(v, {0.5, 32}), expected);
  // At least one element survives any ratio.
  EXPECT_EQ(KeptCount(6, 1e-6), 1);
  EXPECT_EQ(RoundTrip(v, {1e-6, 32}), (std::vector<float>{0, -5.0f, 0, 0, 0, 0}));
}

TEST(CompressionTest, QuantisationErrorIsAtMostHalfAStep) {
  Rng rng = MakeRng(3, Stream::kNoise);
  std::vector<float> v(1000);
  for (float& f : v) f = static_cast<float>(StandardNormal(rng));
  const float low = *std::min_element(v.begin(), v.end());
  const float high = *std::max_element(v.begin(), v.end());
  for (int bits : {2, 8, 16}) {
    const double half_step = (high - low) / (std::ldexp(1.0, bits) - 1) / 2;
    const std::vector<float> got = RoundTrip(v, {1, bits});
    double worst = 0;
    for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - v[i]));
    EXPECT_LE(worst, half_step * 1.0001) << bits << " bits";
    EXPECT_GT(worst, half_step * 0.5) << bits << " bits";  // it does quantise
  }
  // q = 2 leaves four distinct values.
  std::vector<float> two = RoundTrip(v, {1, 2});
  std::sort(two.begin(), two.end());
  EXPECT_EQ(std::unique(two.begin(), two.end()) - two.begin(), 4);
}

TEST(CompressionTest, SymmetricQuantiserHasZeroAsALevel) {
  Rng rng = MakeRng(4, Stream::kNoise);
  std::vector<float> v(1000);
  for (float& f : v) f = static_cast<float>(StandardNormal(rng));
  float m = 0;
  for (float f : v) m = std::max(m, std::fabs(f));
  const Compression ternary{1, 2, Quantizer::kSymmetric};
  EXPECT_EQ(QuantizerLevels(ternary), 3);
  const std::vector<float> got = RoundTrip(v, ternary);
  int zeros = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    // Levels −M, 0, M: values within M/2 of 0 are sent as exactly 0.
    EXPECT_TRUE(got[i] == 0 || std::fabs(std::fabs(got[i]) - m) < 1e-6 * m) << got[i];
    EXPECT_LE(std::fabs(got[i] - v[i]), m / 2 * 1.0001);
    if (std::fabs(v[i]) < m / 2) {
      EXPECT_EQ(got[i], 0.0f);
      ++zeros;
    }
  }
  EXPECT_GT(zeros, 500);
  // q = 1: the sign, scaled by M.
  const std::vector<float> sign = RoundTrip({0.5f, -0.1f, 2.0f}, {1, 1, Quantizer::kSymmetric});
  EXPECT_EQ(sign, (std::vector<float>{2.0f, -2.0f, 2.0f}));
  // q = 8: 255 levels, step 2M / 254.
  const std::vector<float> fine = RoundTrip(v, {1, 8, Quantizer::kSymmetric});
  for (size_t i = 0; i < v.size(); ++i) EXPECT_LE(std::fabs(fine[i] - v[i]), m / 254 * 1.0001);
  // Same payload as min-max: q bits per value plus the range.
  EXPECT_EQ(PayloadBits(777, {0.1, 2, Quantizer::kSymmetric}), PayloadBits(777, {0.1, 2}));
}

TEST(CompressionTest, WireSizeIsTheClosedFormRoundedUpToBytes) {
  std::vector<float> v(777);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i));
  for (const Compression c : {Compression{0.1, 8}, Compression{0.01, 2}, Compression{1, 2},
                              Compression{0.3, 32}, Compression{1, 2, Quantizer::kSymmetric}}) {
    wire::Values w;
    EncodeValues(v, c, &w);
    const int64_t exact = PayloadBits(777, c);
    EXPECT_GE(WireValueBits(w), exact);
    EXPECT_LT(WireValueBits(w), exact + 8);
  }
  // 78 kept of 777: 10-bit indices and 8-bit codes, plus the float range.
  EXPECT_EQ(PayloadBits(777, {0.1, 8}), 78 * (10 + 8) + 64);
}

TEST(CompressionTest, ErrorFeedbackSendsWhatItDroppedLater) {
  ErrorFeedback feedback;
  const std::vector<float> g = {1.0f, 0.5f, 0.25f, 0.125f};
  std::vector<double> sent_total(4, 0.0);
  const int rounds = 64;
  for (int t = 0; t < rounds; ++t) {
    wire::Values w;
    feedback.Encode(g, {0.25, 32}, &w);  // one element per round
    const std::vector<float> sent = DecodeValues(w, 4, "test");
    for (size_t i = 0; i < 4; ++i) sent_total[i] += sent[i];
  }
  // Eq. 21: everything computed is either sent or still in memory.
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(sent_total[i] + feedback.memory()[i], rounds * g[i], 1e-5);
    EXPECT_GT(sent_total[i], 0) << "element " << i << " was never sent";
  }
}

TEST(CompressionTest, MalformedMessagesAreRefusedWithTheReason) {
  wire::Values w;
  EncodeValues({1, 2, 3, 4}, {0.5, 8}, &w);
  auto message = [](const wire::Values& bad, int64_t max) {
    try {
      DecodeValues(bad, max, "upload");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(w, 3).find("more than the 3 expected"), std::string::npos);
  wire::Values truncated = w;
  truncated.mutable_packed()->pop_back();
  EXPECT_NE(message(truncated, 4).find("packed payload"), std::string::npos);
  wire::Values too_many = w;
  too_many.set_kept(9);
  EXPECT_NE(message(too_many, 4).find("keeps 9 of 4"), std::string::npos);
  wire::Values dense;
  EncodeValues({1, 2}, Compression{}, &dense);
  dense.set_length(3);
  EXPECT_NE(message(dense, 4).find("dense payload of 8 bytes"), std::string::npos);
  wire::Values ternary;
  EncodeValues({1, -1, 0, 0.1f}, {1, 2, Quantizer::kSymmetric}, &ternary);
  wire::Values too_many_levels = ternary;
  too_many_levels.set_levels(5);
  EXPECT_NE(message(too_many_levels, 4).find("5 levels do not fit 2-bit codes"), std::string::npos);
  wire::Values code_beyond = ternary;
  (*code_beyond.mutable_packed())[0] = static_cast<char>(0xff);  // code 3 of 3 levels
  EXPECT_NE(message(code_beyond, 4).find("code 3 beyond the 3 levels"), std::string::npos);
}

TEST(CompressionTest, PacketLossFollowsEquationsEighteenAndNineteen) {
  EXPECT_NEAR(PacketLossRate(0.1, 3), 1 - 0.9 * 0.9 * 0.9, 1e-12);
  EXPECT_NEAR(PacketLossRate(0.2, 1), 0.2, 1e-12);
  EXPECT_NEAR(ExpectedTransmissions(0.5, 2), 1.75, 1e-12);
  EXPECT_EQ(ExpectedTransmissions(0.3, 0), 1.0);
}

}  // namespace
}  // namespace fedprof
