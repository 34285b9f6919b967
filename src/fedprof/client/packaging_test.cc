// Client::Fit's last step: the model sent, an attack's, and the sketch.
#include "fedprof/client/packaging.h"

#include <gtest/gtest.h>

#include "fedprof/privacy/update_clipping.h"
#include "fedprof/protocol/sketch.h"

namespace fedprof {
namespace {

const FlatParams kStart = {1, 1, 1, 1};
const FlatParams kTrained = {2, 0, 1, 3};  // update (1, -1, 0, 2)

TEST(PackagingTest, AnHonestClientSendsWhatItTrained) {
  FitResult r;
  PackageUpdate(ReportRequest(), Attack(), 0, kStart, kTrained, &r);
  EXPECT_EQ(r.params, kTrained);
  EXPECT_TRUE(r.sketch.empty()) << "not asked for";
}

TEST(PackagingTest, TheSketchIsOfWhatTrainingChanged) {
  ReportRequest asked;
  asked.sketch_dim = 3;
  FitResult r;
  PackageUpdate(asked, Attack(), 0, kStart, kTrained, &r);
  EXPECT_EQ(r.params, kTrained);
  EXPECT_EQ(r.sketch, UpdateSketch(kTrained, kStart, 3));
  EXPECT_NE(r.sketch, UpdateSketch(kTrained, FlatParams(4, 0.0f), 3)) << "from the start";
}

TEST(PackagingTest, AnAttackerSendsAndSketchesTheAttacksModel) {
  Attack flip;
  flip.kind = AttackKind::kSignFlip;
  flip.scale = 2;
  ReportRequest asked;
  asked.sketch_dim = 3;
  FitResult r;
  PackageUpdate(asked, flip, 0, kStart, kTrained, &r);
  const FlatParams poisoned = {-1, 3, 1, -3};  // start − 2 · update
  EXPECT_EQ(r.params, poisoned);
  EXPECT_EQ(r.sketch, UpdateSketch(poisoned, kStart, 3));
}

// User-level DP: the update that leaves the client is clipped, and the
// client says whether it needed to be.
TEST(PackagingTest, UnderDpTheUpdateIsClipped) {
  FitResult clipped;
  PackageUpdate(ReportRequest(), Attack(), 1.0, kStart, kTrained, &clipped);  // norm √6 > 1
  EXPECT_FALSE(clipped.within_clip);
  EXPECT_LE(UpdateNorm(kStart, clipped.params), 1.0);
  EXPECT_GT(UpdateNorm(kStart, clipped.params), 0.999);
  FitResult kept;
  PackageUpdate(ReportRequest(), Attack(), 3.0, kStart, kTrained, &kept);
  EXPECT_TRUE(kept.within_clip);
  EXPECT_EQ(kept.params, kTrained);
}

}  // namespace
}  // namespace fedprof
