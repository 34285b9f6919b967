#include "fedprof/privacy/update_clipping.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"

namespace fedprof {
namespace {

TEST(DpClipTest, AnUpdateBeyondTheNormIsScaledOntoItDirectionKept) {
  const FlatParams start = {1, 1, 1, 1};
  FlatParams w = {2, 0, 1, 3};  // update (1, -1, 0, 2), norm √6
  EXPECT_FALSE(ClipUpdate(start, 1.0, &w));
  EXPECT_LE(UpdateNorm(start, w), 1.0);
  EXPECT_GT(UpdateNorm(start, w), 1.0 - 1e-6);
  const double s = 1 / std::sqrt(6.0);
  EXPECT_NEAR(w[0] - 1, s, 1e-6);
  EXPECT_NEAR(w[1] - 1, -s, 1e-6);
  EXPECT_EQ(w[2], 1.0f);
  EXPECT_NEAR(w[3] - 1, 2 * s, 1e-6);

  FlatParams within = {2, 0, 1, 3};
  EXPECT_TRUE(ClipUpdate(start, 3.0, &within));
  EXPECT_EQ(within, (FlatParams{2, 0, 1, 3})) << "an update within the norm is not touched";
  EXPECT_THROW(ClipUpdate(start, 0.0, &within), Error);
}

// Float rounding of the scaled update never leaves it above the norm: the
// server's check (the same UpdateNorm) passes for every clipped update.
TEST(DpClipTest, ClippedUpdatesPassTheServersCheckExactly) {
  Rng rng = MakeRng(7, Stream::kNoise);
  for (int trial = 0; trial < 200; ++trial) {
    FlatParams start(1000), w(1000);
    for (size_t i = 0; i < w.size(); ++i) {
      start[i] = static_cast<float>(StandardNormal(rng) * 10);
      w[i] = static_cast<float>(start[i] + StandardNormal(rng));
    }
    const double clip = 0.01 + 5 * Uniform01(rng);
    ClipUpdate(start, clip, &w);
    ASSERT_LE(UpdateNorm(start, w), clip) << "trial " << trial;
  }
}

TEST(DpClipTest, ANonFiniteUpdateIsLeftForTheServerToRefuse) {
  const FlatParams start = {0, 0};
  FlatParams w = {NAN, 1};
  EXPECT_FALSE(ClipUpdate(start, 1.0, &w));
  EXPECT_TRUE(std::isnan(w[0]));
}

}  // namespace
}  // namespace fedprof
