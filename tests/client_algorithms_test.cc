// The client algorithms (algorithms/) in whole runs: each equals FedAvg bit
// for bit at its neutral setting and changes the model otherwise; threads
// and a killed run change no number; what does not compose is refused in
// one line.
#include <dirent.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fedprof/core/files.h"
#include "fedprof/server/checkpoint.h"
#include "tests/checkpoints.h"
#include "tests/csv_columns.h"
#include "tests/run_cli.h"
#include "tests/simulate_summary.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using testing_support::ClearedPath;
using testing_support::CliResult;
using testing_support::CountLines;
using testing_support::FreshDir;
using testing_support::HaveFashionMnist;
using testing_support::KillOnceCheckpointed;
using testing_support::kSmallRun;
using testing_support::MetricsWithoutWall;
using testing_support::RunCli;
using testing_support::Simulated;
using testing_support::Summary;

// Unequal clients (Dir(0.5)), so that steps differ between clients.
const std::string kRun = std::string(kSmallRun) +
                         " --set rounds=3 --set partition.kind=dirichlet --set partition.min_size=20";

// Entries of `dir` besides . and .. (0 when it does not exist).
int CountFiles(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) n += std::string(e->d_name) != "." && std::string(e->d_name) != "..";
    closedir(d);
  }
  return n;
}

std::string FinalModel(const std::string& dir, const std::string& name, const std::string& settings) {
  return Summary(Simulated(dir, name, kRun + " " + settings)).at("final_model_sha256");
}

TEST(ClientAlgorithmRunTest, EachAtItsNeutralSettingIsFedAvgBitForBit) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = FreshDir("algorithms", "neutral");
  const std::string fedavg = FinalModel(dir, "fedavg", "--set strategy.aggregation=partial");
  EXPECT_EQ(FinalModel(dir, "scaffold_off", "--set strategy.name=scaffold --set scaffold.correct=false"), fedavg);
  EXPECT_EQ(FinalModel(dir, "feddyn_0", "--set strategy.name=feddyn --set feddyn.alpha=0"), fedavg);
  EXPECT_EQ(FinalModel(dir, "moon_0", "--set strategy.name=moon --set moon.mu=0"), fedavg);
  // The same model and clients, and SCAFFOLD's c and Δc_i on the wire beside
  // each model: the cost model prices them as it prices the model.
  const auto virtual_time = [&](const std::string& name) {
    return std::stod(Columns(dir + "/" + name + "/metrics.csv").at("virtual_time_s").back());
  };
  EXPECT_GT(virtual_time("scaffold_off"), virtual_time("fedavg"));
  EXPECT_EQ(virtual_time("feddyn_0"), virtual_time("fedavg")) << "FedDyn sends nothing beside the model";
  EXPECT_NE(FinalModel(dir, "scaffold", "--set strategy.name=scaffold"), fedavg);
  EXPECT_NE(FinalModel(dir, "feddyn", "--set strategy.name=feddyn"), fedavg);
  EXPECT_NE(FinalModel(dir, "moon", "--set strategy.name=moon"), fedavg);
  EXPECT_NE(FinalModel(dir, "fednova", "--set strategy.name=fednova"), fedavg) << "unequal steps";
  // FedNova with equal steps and no momentum: an equal split of the data.
  const std::string equal = " --set partition.kind=iid --set train.momentum=0";
  EXPECT_EQ(FinalModel(dir, "fednova_equal", "--set strategy.name=fednova" + equal),
            FinalModel(dir, "fedavg_equal", "--set strategy.aggregation=partial" + equal));
  // With FedProf's selection: the selector composes with the algorithm.
  EXPECT_EQ(FinalModel(dir, "fedprof_scaffold_off",
                       "--set strategy.name=fedprof --set strategy.algorithm=scaffold --set scaffold.correct=false "
                       "--set data.holdout_share=0.1"),
            FinalModel(dir, "fedprof_partial",
                       "--set strategy.name=fedprof --set strategy.aggregation=partial --set data.holdout_share=0.1"));
}

TEST(ClientAlgorithmRunTest, ThreadsAndAKilledRunChangeNoNumber) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  for (const std::string algorithm : {"scaffold", "fednova", "feddyn", "moon"}) {
    const std::string dir = ClearedPath("algorithms", "resume_" + algorithm);
    const std::string run = "simulate " + kRun + " --set rounds=6 --set strategy.name=" + algorithm;
    ASSERT_EQ(RunCli(run + " --set threads=1 --out " + dir + "/one").code, 0);
    ASSERT_EQ(RunCli(run + " --set threads=2 --out " + dir + "/two").code, 0);
    EXPECT_EQ(MetricsWithoutWall(dir + "/one"), MetricsWithoutWall(dir + "/two")) << algorithm;
    // The clients' c_i (or ∇L_k) and the server's c (or h) live in the
    // checkpoint; MOON's previous models, beyond a budget of 1 MiB, in files it names.
    const std::string budget = algorithm == "moon" ? " --set client_state.memory_mb=1" : "";
    KillOnceCheckpointed(run + budget + " --set threads=2 --out " + dir + "/killed", dir + "/killed", 2);
    if (HasFatalFailure()) return;
    const CliResult resumed = RunCli("simulate --resume " + dir + "/killed");
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    EXPECT_EQ(MetricsWithoutWall(dir + "/one"), MetricsWithoutWall(dir + "/killed")) << algorithm;
    EXPECT_EQ(Summary(dir + "/one").at("final_model_sha256"), Summary(dir + "/killed").at("final_model_sha256"));
    if (!budget.empty()) {
      EXPECT_GT(CountFiles(dir + "/killed/client_state/algorithm"), 0) << "nothing spilled";
    }
  }
}

TEST(ClientAlgorithmRunTest, WhatDoesNotComposeIsRefusedInOneLine) {
  const std::string dir = ClearedPath("algorithms", "refused");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--set strategy.name=scaffold --set strategy.aggregator=median",
       "strategy.algorithm = scaffold: its server step assumes the average"},
      {"--set strategy.name=fednova --set dp.mode=central", "strategy.algorithm = fednova: user-level DP"},
      {"--set strategy.name=scaffold --set secagg.protocol=secagg", "hides each client's control-variate update Δc_i"},
      {"--set strategy.algorithm=feddyn --set strategy.name=fedbuff", "strategy.aggregator = fedbuff"},
      {"--set strategy.algorithm=moon2", "strategy.algorithm"},
  };
  for (const auto& [settings, expected] : cases) {
    const CliResult r = RunCli("simulate " + kRun + " " + settings + " --out " + dir + "/x");
    EXPECT_EQ(r.code, 1) << settings;
    EXPECT_EQ(CountLines(r.output), 1) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace fedprof
