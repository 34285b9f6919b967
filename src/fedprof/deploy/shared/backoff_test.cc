#include "fedprof/deploy/shared/backoff.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fedprof {
namespace {

Backoff::Clock::time_point SecondsAfter(Backoff::Clock::time_point t, double s) {
  return t + std::chrono::duration_cast<Backoff::Clock::duration>(std::chrono::duration<double>(s));
}

TEST(BackoffTest, WaitsDoubleFromAQuarterSecondUpToFiveHeartbeats) {
  Backoff backoff(/*give_up_s=*/300, /*seed=*/7);
  const auto t0 = Backoff::Clock::now();
  backoff.Contact(t0);
  // Spans 0.25, 0.5, 1, 2, 4 s, then 5 heartbeat intervals of 1 s; each wait
  // drawn from the upper half of its span.
  const std::vector<double> spans = {0.25, 0.5, 1, 2, 4, 5, 5};
  for (size_t i = 0; i < spans.size(); ++i) {
    const Backoff::Step step = backoff.Failed(/*heartbeat_s=*/1, t0);
    EXPECT_FALSE(step.give_up);
    EXPECT_EQ(step.first, i == 0) << i;
    EXPECT_GE(step.wait_s, spans[i] / 2) << i;
    EXPECT_LE(step.wait_s, spans[i]) << i;
  }
}

TEST(BackoffTest, TheLongestWaitIsOneToTenSeconds) {
  for (const auto& [heartbeat_s, longest] : std::vector<std::pair<double, double>>{{0.05, 1}, {100, 10}}) {
    Backoff backoff(300, 11);
    const auto t0 = Backoff::Clock::now();
    backoff.Contact(t0);
    Backoff::Step step;
    for (int i = 0; i < 10; ++i) step = backoff.Failed(heartbeat_s, t0);
    EXPECT_GE(step.wait_s, longest / 2) << heartbeat_s;
    EXPECT_LE(step.wait_s, longest) << heartbeat_s;
  }
}

TEST(BackoffTest, AnAnswerStartsTheWaitsAfresh) {
  Backoff backoff(300, 3);
  const auto t0 = Backoff::Clock::now();
  for (int i = 0; i < 5; ++i) backoff.Failed(2, t0);
  backoff.Contact(t0);
  const Backoff::Step step = backoff.Failed(2, t0);
  EXPECT_TRUE(step.first);
  EXPECT_LE(step.wait_s, 0.25);
}

TEST(BackoffTest, GivesUpOnceTheServerIsSilentForGiveUpSeconds) {
  Backoff backoff(/*give_up_s=*/5, 1);
  const auto t0 = Backoff::Clock::now();
  backoff.Contact(t0);
  EXPECT_FALSE(backoff.Failed(2, SecondsAfter(t0, 4.9)).give_up);
  const Backoff::Step step = backoff.Failed(2, SecondsAfter(t0, 6.5));
  EXPECT_TRUE(step.give_up);
  EXPECT_DOUBLE_EQ(step.silent_s, 6.5);
  EXPECT_EQ(GivingUp("lost server:1", step.silent_s),
            "lost server:1; no answer for 6 s, giving up (--give-up-after)");
  // An answer, however late, keeps it going.
  backoff.Contact(SecondsAfter(t0, 7));
  EXPECT_FALSE(backoff.Failed(2, SecondsAfter(t0, 8)).give_up);
}

TEST(BackoffTest, CallersThatFailTogetherDoNotRetryInStep) {
  Backoff a(300, 1), b(300, 2);
  const auto t0 = Backoff::Clock::now();
  int same = 0;
  for (int i = 0; i < 5; ++i) same += a.Failed(2, t0).wait_s == b.Failed(2, t0).wait_s;
  EXPECT_EQ(same, 0);
}

}  // namespace
}  // namespace fedprof
