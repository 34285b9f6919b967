#include "fedprof/privacy/client_ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "fedprof/core/error.h"
#include "fedprof/core/files.h"
#include "fedprof/core/text.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

// 32 bytes from a tag, for run and session ids.
std::string Id(char tag) { return std::string(32, tag); }
// A task digest from a tag.
std::string Task(char tag) { return std::string(64, tag); }

Contribution Made(char run, int64_t round, char session, char task) {
  Contribution c;
  c.run = Id(run);
  c.round = round;
  c.session = Id(session);
  c.task = Task(task);
  return c;
}

// A distributed-DP release of 61,706 values at z = 1 for 90 clients in the
// sum, 80 of them honest at the fewest.
DdgRelease Release() {
  DdgRelease r;
  r.encoding.clip_norm = 1;
  r.encoding.bits = 32;
  r.encoding.rounding_beta = std::exp(-0.5);
  r.encoding.dim = 61706;
  r.encoding.noise_sd = 1.0 / std::sqrt(80.0);
  r.encoding.granularity = DdgGranularity(1, r.encoding.noise_sd, 32, 100, r.encoding.padded());
  r.clients = 90;
  r.honest = 80;
  return r;
}

void ExpectRefusal(const std::string& why, const std::string& says) {
  EXPECT_NE(why.find(says), std::string::npos) << why;
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

// A session, a round of a run and a task are each contributed to once, a
// run never goes back, and every rule holds across a restart of the client
// (the file); a damaged ledger is named, line and all.
TEST(ClientLedgerTest, EachSessionRoundAndTaskOnceAcrossARestart) {
  const std::string dir = testing_support::FreshDir("ClientLedgerTest", "rules");
  const std::string path = ClientLedgerPath(dir, 3);
  {
    ClientLedger ledger(path, 1e-5, 0);
    EXPECT_EQ(ledger.Take(Made('r', 4, 'a', '1')), "");
    EXPECT_EQ(ledger.Take(Made('r', 5, 'b', '2')), "");
    ExpectRefusal(ledger.Take(Made('r', 6, 'a', '3')), "was joined before: a server replaying a session");
    ExpectRefusal(ledger.Take(Made('r', 5, 'c', '3')),
                  "round 5 of run 7272727272727272... was contributed to before");
    ExpectRefusal(ledger.Take(Made('r', 2, 'c', '3')),
                  "contributed to round 5 of that run already (a run going back)");
    // Another run: its own rounds, but never a task contributed to before.
    ExpectRefusal(ledger.Take(Made('s', 1, 'c', '1')), "was contributed to before, in round 4");
    EXPECT_EQ(ledger.Take(Made('s', 1, 'c', '3')), "");
    EXPECT_EQ(ledger.spent().contributions, 3);
  }
  ClientLedger restarted(path, 1e-5, 0);
  EXPECT_EQ(restarted.spent().contributions, 3);
  ExpectRefusal(restarted.Take(Made('r', 5, 'd', '4')), "was contributed to before");
  ExpectRefusal(restarted.Take(Made('t', 9, 'b', '4')), "was joined before");
  EXPECT_EQ(restarted.Take(Made('r', 6, 'd', '4')), "");

  // A last line cut short by a crash: its contribution was never sent.
  const std::string whole = ReadFile(path);
  WriteFileAtomic(path, whole + "{\"run\": \"7272");
  EXPECT_EQ(ClientLedger(path, 1e-5, 0).spent().contributions, 4);
  // The next contribution starts a line of its own.
  EXPECT_EQ(ClientLedger(path, 1e-5, 0).Take(Made('r', 7, 'e', '5')), "");
  EXPECT_EQ(ClientLedger(path, 1e-5, 0).spent().contributions, 5);
  const std::string added = ReadFile(path).substr(whole.size());
  EXPECT_EQ(std::count(added.begin(), added.end(), '\n'), 1) << added;
  EXPECT_EQ(added.rfind("{\"budget\"", 0), 0u) << "the torn start is gone: " << added;
  WriteFileAtomic(path, whole + "{\"run\": \"oops\"}\n");  // a whole line, no contribution
  try {
    ClientLedger(path, 1e-5, 0).spent();
    ADD_FAILURE() << "read a damaged ledger";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("client-3.ledger line 5: not a line of this client's ledger"),
        std::string::npos)
        << e.what();
  }
}

// What a client spent: each distributed-DP contribution charged without
// amplification, against the server with the honest clients' noise alone
// (so more than against observers), composed; an update without noise is
// infinite. A budget refuses the contribution that would pass it, and any
// without noise, and the refused ones cost nothing.
TEST(ClientLedgerTest, ItsEpsilonGrowsByEachContributionAndStopsAtItsBudget) {
  ClientLedger open("", 1e-5, 0);
  Contribution first = Made('r', 1, 'a', '1');
  first.release = Release();
  ASSERT_EQ(open.Take(first), "");
  const ClientLedger::Spent one = open.spent();
  EXPECT_GT(one.against_server, one.against_observers);
  EXPECT_GT(one.against_observers, 0);
  EXPECT_NEAR(one.against_server, DdgEpsilonUnsampled({Release()}, true, 1e-5).epsilon, 1e-12);
  Contribution second = Made('r', 2, 'b', '2');
  second.release = Release();
  ASSERT_EQ(open.Take(second), "");
  EXPECT_GT(open.spent().against_server, one.against_server);
  EXPECT_LT(open.spent().against_server,
            2 * one.against_server);  // RDP composes below the sum of the epsilons

  // A budget between two contributions' spending and three's.
  const double three = DdgEpsilonUnsampled({Release(), Release(), Release()}, true, 1e-5).epsilon;
  const double budget = (open.spent().against_server + three) / 2;
  ClientLedger kept("", 1e-5, budget);
  ASSERT_EQ(kept.Take(first), "");
  ASSERT_EQ(kept.Take(second), "");
  Contribution third = Made('r', 3, 'c', '3');
  third.release = Release();
  const std::string past = kept.Take(third);
  ExpectRefusal(past, "past its privacy budget (dp.client_budget)");
  EXPECT_EQ(past.find_first_of("0123456789"), std::string::npos)
      << "a refusal tells the server nothing of what is spent or left: " << past;
  EXPECT_EQ(kept.spent().contributions, 2);
  ExpectRefusal(kept.Take(Made('r', 4, 'd', '4')), "an update without noise has no bound");
  EXPECT_NE(kept.Describe().find("2 contributions: epsilon "), std::string::npos) << kept.Describe();
  EXPECT_NE(kept.Describe().find("against the server (of its budget "), std::string::npos) << kept.Describe();

  ClientLedger plain("", 1e-5, 0);
  ASSERT_EQ(plain.Take(Made('r', 1, 'a', '1')), "");
  EXPECT_TRUE(std::isinf(plain.spent().against_server));
}

// Reports (tasks without training) are counted apart from contributions,
// refused past the limit of a run and the limit over every run, on disk
// across a restart, and do not change what was spent; a refusal names no
// count.
TEST(ClientLedgerTest, ReportsAreCountedAndRefusedPastTheirLimits) {
  const std::string dir = testing_support::FreshDir("ClientLedgerTest", "reports");
  const std::string path = ClientLedgerPath(dir, 2);
  const ReportLimits limits{3, 5};
  const auto report = [](char run, int64_t round) { return ReportAnswer{Id(run), round, "profile"}; };
  {
    ClientLedger ledger(path, 1e-5, 0, limits);
    for (int64_t round = 0; round < 3; ++round) EXPECT_EQ(ledger.TakeReport(report('a', round)), "");
    const std::string per_run = ledger.TakeReport(report('a', 3));
    ExpectRefusal(per_run, "the most reports it answers in one run");
    EXPECT_EQ(per_run.find_first_of("0123456789"), std::string::npos) << per_run;
    EXPECT_EQ(ledger.TakeReport(report('b', 0)), "");
    EXPECT_EQ(ledger.Take(Made('b', 1, 'a', '1')), "") << "contributions have rules of their own";
    EXPECT_EQ(ledger.spent().reports, 4);
    EXPECT_EQ(ledger.spent().contributions, 1);
  }
  ClientLedger restarted(path, 1e-5, 0, limits);
  EXPECT_EQ(restarted.spent().reports, 4);
  EXPECT_EQ(restarted.TakeReport(report('c', 0)), "");
  ExpectRefusal(restarted.TakeReport(report('d', 0)),
                "the most reports it answers over every run (secagg.client_reports)");
  EXPECT_NE(restarted.Describe().find("; 5 reports"), std::string::npos) << restarted.Describe();
  EXPECT_NE(FormatClientLedgerStatus(ClientLedgerStatus(path)).find("5 reports answered outside any sum"),
            std::string::npos);
  EXPECT_EQ(ClientLedgerStatus(path).at("rounds_by_run").size(), 1u) << "a report is no round contributed to";
}

}  // namespace
}  // namespace fedprof
