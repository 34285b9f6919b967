#include "fedprof/deploy/server/refusal_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fedprof {
namespace {

// A RefusalLog on a clock the test moves, writing into a vector.
struct Recorder {
  std::vector<std::string> lines;
  RefusalLog::Clock::time_point now{};
  RefusalLog log{10, [this](const std::string& line) { lines.push_back(line); },
                 [this] { return now; }};
  void Advance(double s) {
    now += std::chrono::duration_cast<RefusalLog::Clock::duration>(std::chrono::duration<double>(s));
  }
};

TEST(RefusalLogTest, TwoThousandRefusalsInFourSecondsAreTwoLines) {
  Recorder r;
  for (int i = 0; i < 2000; ++i) {
    r.log.Refuse("client 3", "unreadable result stream", "PushResult: no readable header");
    r.Advance(0.002);
  }
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_EQ(r.lines[0], "client 3 refused: PushResult: no readable header");
  r.Advance(6.1);  // the window has passed
  r.log.Flush();
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[1], "client 3: 1999 more refusals (unreadable result stream) in the last 10 s");
  EXPECT_EQ(r.log.total(), 2000);
  // A new window starts with a line of its own.
  r.log.Refuse("client 3", "unreadable result stream", "again");
  EXPECT_EQ(r.lines.back(), "client 3 refused: again");
}

TEST(RefusalLogTest, PeersAndKindsAreCountedApart) {
  Recorder r;
  r.log.Refuse("client 1", "a", "first a");
  r.log.Refuse("client 2", "a", "first a of 2");
  r.log.Refuse("client 1", "b", "first b");
  r.log.Refuse("client 1", "a", "second a");
  EXPECT_EQ(r.lines.size(), 3u);
  r.log.Flush();  // the window has not passed
  EXPECT_EQ(r.lines.size(), 3u);
  r.log.Flush(/*everything=*/true);
  ASSERT_EQ(r.lines.size(), 4u);
  EXPECT_EQ(r.lines[3], "client 1: 1 more refusals (a) in the last 0 s");
}

TEST(RefusalLogTest, PendingCountsAreWrittenAtTheEnd) {
  std::vector<std::string> lines;
  {
    RefusalLog log(10, [&](const std::string& line) { lines.push_back(line); });
    log.Refuse("peer ipv4:127.0.0.1:1", "k", "x");
    log.Refuse("peer ipv4:127.0.0.1:1", "k", "x");
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].rfind("peer ipv4:127.0.0.1:1: 1 more refusals (k)", 0), 0u) << lines[1];
}

}  // namespace
}  // namespace fedprof
