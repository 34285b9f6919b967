// Client availability in virtual time: the trace parser and the on/off model.
#include "fedprof/sim/availability.h"

#include <gtest/gtest.h>

#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/rng.h"

namespace fedprof {
namespace {

std::string ErrorOf(const std::string& text, int clients = 4) {
  try {
    ParseAvailabilityTrace(text, "t.csv", clients);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(AvailabilityTraceTest, ParsesMergesAndAnswersByInterval) {
  const auto intervals = ParseAvailabilityTrace(
      "# a comment\n\nclient,start,end\r\n0,10,20\n0,15,30\n0,40,50\n2,0,5.5\n0,30,35\n", "t.csv", 4);
  ASSERT_EQ(intervals.size(), 4u);
  ASSERT_EQ(intervals[0].size(), 2u);  // [10, 20) + [15, 30) + [30, 35) merge; [40, 50) apart
  EXPECT_EQ(intervals[0][0].start, 10);
  EXPECT_EQ(intervals[0][0].end, 35);
  EXPECT_EQ(intervals[0][1].start, 40);
  EXPECT_TRUE(intervals[1].empty());
  TraceAvailability a(intervals);
  EXPECT_EQ(a.OnlineUntil(0, 9.99), -1);
  EXPECT_EQ(a.OnlineUntil(0, 10), 35);
  EXPECT_EQ(a.OnlineUntil(0, 34.9), 35);
  EXPECT_EQ(a.OnlineUntil(0, 35), -1);  // [start, end)
  EXPECT_EQ(a.OnlineUntil(0, 45), 50);
  EXPECT_EQ(a.OnlineUntil(1, 0), -1);  // never named: never online
  EXPECT_EQ(a.OnlineUntil(2, 0), 5.5);
  EXPECT_EQ(a.OnlineUntil(0, 12), 35);  // back in time is fine
}

TEST(AvailabilityTraceTest, RefusesWhatIsWrongInOneLineNamingIt) {
  EXPECT_EQ(ErrorOf(""), "availability.trace: t.csv: no header line 'client,start,end'");
  EXPECT_EQ(ErrorOf("id,from,to\n"),
            "availability.trace: t.csv:1: expected the header 'client,start,end', got 'id,from,to'");
  EXPECT_EQ(ErrorOf("client,start,end\n0,1\n"),
            "availability.trace: t.csv:2: expected 3 values (client,start,end), got 2");
  for (const char* client : {"-1", "4", "1.5", "x", "1e0", ""}) {
    EXPECT_NE(ErrorOf(std::string("client,start,end\n") + client + ",0,1\n")
                  .find("t.csv:2: client '" + std::string(client) + "' is not an id in [0, 4)"),
              std::string::npos)
        << client;
  }
  for (const char* times : {"5,5", "6,5", "-1,5", "0,nan", "0,inf", "0,2e15", "0x10,20", "1,2 "}) {
    EXPECT_NE(
        ErrorOf(std::string("client,start,end\n# c\n1,") + times + "\n").find("t.csv:3: expected 0 <= start"),
        std::string::npos)
        << times;
  }
  EXPECT_NE(
      ErrorOf("client,start,end\n" + std::string(300, '1') + "\n").find("t.csv:2: a line longer than 256"),
      std::string::npos);
}

// Mutated traces (bytes flipped, inserted, deleted, lines duplicated; the
// seed decides): each parses into sorted, disjoint, in-range intervals or
// is refused with one line naming the file, never anything else.
TEST(AvailabilityTraceTest, MutatedTracesParseWhollyOrAreRefusedInOneLine) {
  const std::string seed = "client,start,end\n# c\n0,0,3600\n0,1800,7200\n3,5,6.5\n\n2,1e3,2e3\r\n";
  Rng rng = MakeRng(11, Stream::kNoise);
  const std::string alphabet = "0123456789.,eE+-#\n\r x";
  int parsed = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text = seed;
    for (int edits = 1 + static_cast<int>(UniformIndex(rng, 4)); edits > 0; --edits) {
      const size_t at = UniformIndex(rng, text.size() + 1);
      const char c = alphabet[UniformIndex(rng, alphabet.size())];
      switch (UniformIndex(rng, 4)) {
        case 0: if (at < text.size()) text[at] = c; break;
        case 1: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        case 2: if (at < text.size()) text.erase(at, 1); break;
        default: text += text.substr(at); break;
      }
    }
    try {
      const auto intervals = ParseAvailabilityTrace(text, "t.csv", 4);
      ++parsed;
      for (const auto& list : intervals) {
        for (size_t j = 0; j < list.size(); ++j) {
          ASSERT_TRUE(list[j].start >= 0 && list[j].start < list[j].end && list[j].end <= 1e15) << text;
          ASSERT_TRUE(j == 0 || list[j - 1].end < list[j].start) << text;
        }
      }
    } catch (const Error& e) {
      ++refused;
      const std::string what = e.what();
      ASSERT_EQ(what.rfind("availability.trace: t.csv", 0), 0u) << what;
      ASSERT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  EXPECT_GT(parsed, 1000);
  EXPECT_GT(refused, 1000);
}

TEST(OnOffAvailabilityTest, TheOnlineShareIsTheMeansRatioAndTheSeedDecides) {
  // Online 1 h, offline 3 h on average: a quarter online at any time.
  OnOffAvailability a(4000, 3600, 10800, 7), b(4000, 3600, 10800, 7);
  for (double t : {0.0, 5000.0, 1e5}) {
    int online = 0;
    for (int k = 0; k < 4000; ++k) {
      const double until = a.OnlineUntil(k, t);
      EXPECT_EQ(until, b.OnlineUntil(k, t));
      if (until >= 0) {
        EXPECT_GT(until, t);
        ++online;
      }
    }
    EXPECT_NEAR(online / 4000.0, 0.25, 0.03) << t;
  }
  // Asked back in time, a client's answers are those of a fresh model.
  OnOffAvailability fresh(4000, 3600, 10800, 7);
  for (int k = 0; k < 50; ++k) EXPECT_EQ(a.OnlineUntil(k, 4000), fresh.OnlineUntil(k, 4000));
  OnOffAvailability other(4000, 3600, 10800, 8);
  int differ = 0;
  for (int k = 0; k < 100; ++k) differ += other.OnlineUntil(k, 0) != fresh.OnlineUntil(k, 0);
  EXPECT_GT(differ, 20);
  EXPECT_THROW(OnOffAvailability(1, 0, 1, 1), Error);
}

// One clock (no time zones): the share online follows the day, 0.9 at
// midnight and 0.1 at noon with share 0.5 and amplitude 0.8; spread over 24
// time zones the population's share is flat. A client's answer says when its
// run of online slots ends, whichever slot of the run was asked first.
TEST(DiurnalAvailabilityTest, TheShareFollowsTheDayAndRunsEndWhereTheSlotsSay) {
  const DiurnalShape one_clock{0.5, 0.8, 0, 600, 86400};
  DiurnalAvailability a(4000, one_clock, 7);
  auto share_at = [](DiurnalAvailability& m, double t) {
    int online = 0;
    for (int k = 0; k < 4000; ++k) online += m.OnlineUntil(k, t) > t;
    return online / 4000.0;
  };
  EXPECT_NEAR(share_at(a, 0), 0.9, 0.02);          // midnight
  EXPECT_NEAR(share_at(a, 43200), 0.1, 0.02);      // noon
  EXPECT_NEAR(share_at(a, 86400 + 21600), 0.5, 0.03);  // 6 am the next day
  DiurnalAvailability flat(4000, {0.5, 0.8, 24, 600, 86400}, 7);
  for (double t : {0.0, 21600.0, 43200.0}) EXPECT_NEAR(share_at(flat, t), 0.5, 0.03) << t;

  DiurnalAvailability fresh(4000, one_clock, 7);
  for (int k = 0; k < 200; ++k) {
    const double t = 600.0 * (k % 50) + 17;
    const double until = a.OnlineUntil(k, t);
    if (until < 0) continue;
    // Every slot up to `until` is online, the one at `until` is not.
    for (double s = t; s < until; s += 600) EXPECT_GT(fresh.OnlineUntil(k, s), s) << k;
    EXPECT_LT(fresh.OnlineUntil(k, until), 0) << k;
    EXPECT_EQ(DiurnalAvailability(4000, one_clock, 7).OnlineUntil(k, until - 1), until) << k;
  }
  DiurnalAvailability other(4000, one_clock, 8);
  int differ = 0;
  for (int k = 0; k < 200; ++k) differ += other.OnlineUntil(k, 43200) != fresh.OnlineUntil(k, 43200);
  EXPECT_GT(differ, 20);
  EXPECT_THROW(DiurnalAvailability(1, {1.5, 0.8, 0, 600, 86400}, 1), Error);
  EXPECT_THROW(DiurnalAvailability(1, {0.5, 0.8, 25, 600, 86400}, 1), Error);
}

}  // namespace
}  // namespace fedprof
