#include "fedprof/report/plots.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fedprof {
namespace {

// A plot per round ends at the last round: gnuplot's autoscale would pad
// the axis to the next tic (rounds 1..7 drawn over 0..8, or 1..23 over 0..25).
TEST(PlotsTest, XAxisSpansTheRoundsExactly) {
  Series a{"fedavg", {1, 2, 3, 4, 5, 6, 7}, {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}};
  Series b{"fedprof", {2, 4, 6}, {0.2, 0.4, 0.6}};
  const std::string script = LinesScript({a, b}, "t", "round", "accuracy");
  EXPECT_NE(script.find("set xrange [1:7]\n"), std::string::npos) << script;
  // Uplink on a log axis: the same, over the positive values.
  Series bytes{"FbFTL", {0, 1e3, 2.5e6}, {0.1, 0.5, 0.9}};
  const std::string log = LinesScript({bytes}, "t", "uplink bytes", "accuracy", /*log_x=*/true);
  EXPECT_NE(log.find("set xrange [1000:2500000]\n"), std::string::npos) << log;
  // One point: nothing to span; gnuplot chooses.
  EXPECT_EQ(LinesScript({Series{"x", {3}, {1}}}, "t", "r", "a").find("xrange"), std::string::npos);
}

}  // namespace
}  // namespace fedprof
