// Clients that come and go in virtual time, in short Fashion-MNIST runs: who
// can be selected, who is lost mid-round, over-commitment, and numbers that
// depend on neither threads nor a resume.
#include "fedprof/transport/availability.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fedprof/core/files.h"
#include "fedprof/run/simulation.h"
#include "tests/csv_columns.h"
#include "tests/simulate_summary.h"

namespace fedprof {
namespace {

using testing_support::Columns;

const testing_support::Settings kAvailabilityRun = {{"data.train_limit", "2000"}, {"data.test_limit", "200"},
                                                    {"clients.count", "10"},      {"train.epochs", "1"},
                                                    {"report.progress", "false"}, {"threads", "2"}};

std::string RunDir(const std::string& name) { return testing::TempDir() + "/availability_" + name; }

nlohmann::json Simulate(const std::string& name, const testing_support::Settings& sets) {
  return testing_support::SimulateSummary("availability_" + name, kAvailabilityRun, sets);
}

TEST(AvailabilityRunTest, OnlyOnlineClientsAreSelectedAndALeaverIsLost) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  // Clients 0-4 online throughout; client 3 only for the first 0.5 virtual
  // seconds (a round takes longer); 5-9 never.
  const std::string trace = testing::TempDir() + "/availability_trace.csv";
  WriteFileAtomic(trace, "client,start,end\n0,0,1e9\n1,0,1e9\n2,0,1e9\n3,0,0.5\n4,0,1e9\n");
  Simulate("trace", {{"availability.kind", "trace"},
                     {"availability.trace", trace},
                     {"strategy.fraction", "0.5"},
                     {"rounds", "3"}});
  const auto metrics = Columns(RunDir("trace") + "/metrics.csv");
  EXPECT_EQ(metrics.at("online"), (std::vector<std::string>{"5", "4", "4"}));
  EXPECT_EQ(metrics.at("selected"), (std::vector<std::string>{"5", "4", "4"}));
  EXPECT_EQ(metrics.at("timed_out"), (std::vector<std::string>{"1", "0", "0"}));  // client 3
  EXPECT_EQ(metrics.at("returned"), (std::vector<std::string>{"4", "4", "4"}));
  const auto clients = Columns(RunDir("trace") + "/clients.csv");
  EXPECT_EQ(clients.at("times_selected"),
            (std::vector<std::string>{"3", "3", "3", "1", "3", "0", "0", "0", "0", "0"}));
}

TEST(AvailabilityRunTest, OverCommitmentKeepsTheFirstKToFinish) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  // K = 4 of 10, asked ceil(1.3 · 4) = 6: the 2 slowest are dropped.
  Simulate("overcommit", {{"availability.overcommit", "1.3"}, {"strategy.fraction", "0.4"}, {"rounds", "2"}});
  const auto metrics = Columns(RunDir("overcommit") + "/metrics.csv");
  EXPECT_EQ(metrics.at("selected"), (std::vector<std::string>{"6", "6"}));
  EXPECT_EQ(metrics.at("returned"), (std::vector<std::string>{"4", "4"}));
  EXPECT_EQ(metrics.at("timed_out"), (std::vector<std::string>{"2", "2"}));
  EXPECT_EQ(metrics.count("online"), 0u);  // everyone is always online
  // The round lasts as long as its 4th fastest client, not its slowest.
  Simulate("plain", {{"strategy.fraction", "0.6"}, {"rounds", "1"}});  // the same 6 clients, all kept
  const double kept = std::stod(Columns(RunDir("overcommit") + "/metrics.csv").at("round_time_s")[0]);
  const double all = std::stod(Columns(RunDir("plain") + "/metrics.csv").at("round_time_s")[0]);
  EXPECT_LT(kept, all);
}

TEST(AvailabilityRunTest, OnOffRunsAreThreadIndependentAndResumeExactly) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  // Periods of a few rounds: half the clients online, some leaving mid-round.
  const testing_support::Settings on_off = {{"availability.kind", "on_off"},
                                            {"availability.online_mean_s", "20"},
                                            {"availability.offline_mean_s", "20"},
                                            {"strategy.fraction", "0.3"},
                                            {"rounds", "6"}};
  testing_support::Settings one = on_off;
  one.push_back({"threads", "1"});
  const nlohmann::json two_threads = Simulate("two", on_off), one_thread = Simulate("one", one);
  EXPECT_EQ(one_thread.at("final_model_sha256"), two_threads.at("final_model_sha256"));
  const auto metrics = Columns(RunDir("two") + "/metrics.csv");
  int lost = 0, fewer = 0;
  for (size_t r = 0; r < 6; ++r) {
    lost += std::stoi(metrics.at("timed_out")[r]);
    fewer += std::stoi(metrics.at("online")[r]) < 10;
  }
  EXPECT_GT(fewer, 0);
  EXPECT_GT(lost + fewer, 0);
  // Stopped after 3 rounds and resumed: the same run.
  testing_support::Settings three = on_off;
  three.push_back({"rounds", "3"});
  Simulate("parts", three);
  ResumeSimulation(RunDir("parts"), {"rounds=6"});
  EXPECT_EQ(testing_support::Summary(RunDir("parts")).at("final_model_sha256"),
            two_threads.at("final_model_sha256"));
  EXPECT_EQ(Columns(RunDir("parts") + "/metrics.csv").at("online"), metrics.at("online"));
}

// A day compressed into 200 virtual seconds: the number online swings from
// round to round, and a run stopped and resumed is the same run.
TEST(AvailabilityRunTest, DiurnalRunsFollowTheDayAndResumeExactly) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const testing_support::Settings diurnal = {{"availability.kind", "diurnal"}, {"availability.day_s", "200"},
                                             {"availability.slot_s", "5"},      {"strategy.fraction", "0.3"},
                                             {"rounds", "6"}};
  const nlohmann::json whole = Simulate("diurnal", diurnal);
  const auto online = Columns(RunDir("diurnal") + "/metrics.csv").at("online");
  EXPECT_NE(*std::min_element(online.begin(), online.end()), *std::max_element(online.begin(), online.end()));
  testing_support::Settings three = diurnal;
  three.push_back({"rounds", "3"});
  Simulate("diurnal_parts", three);
  ResumeSimulation(RunDir("diurnal_parts"), {"rounds=6"});
  EXPECT_EQ(testing_support::Summary(RunDir("diurnal_parts")).at("final_model_sha256"),
            whole.at("final_model_sha256"));
  EXPECT_EQ(Columns(RunDir("diurnal_parts") + "/metrics.csv").at("online"), online);
}

TEST(AvailabilityRunTest, RefusedWhereItCannotWork) {
  if (!testing_support::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  auto error = [](const testing_support::Settings& sets) {
    try {
      Simulate("refused", sets);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({{"availability.kind", "trace"}}),
            "availability.trace: availability.kind = trace needs a file");
  const std::string bad = testing::TempDir() + "/availability_bad.csv";
  WriteFileAtomic(bad, "client,start,end\n0,3,2\n");
  EXPECT_NE(
      error({{"availability.kind", "trace"}, {"availability.trace", bad}}).find(":2: expected 0 <= start"),
      std::string::npos);
}

}  // namespace
}  // namespace fedprof
