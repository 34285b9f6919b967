// End-to-end tests of distributed simulation: `fedprof launch` starting
// ranks on loopback. Every wait is bounded; every process started is gone
// when a test ends.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "fedprof/core/files.h"
#include "fedprof/server/checkpoint.h"
#include "tests/checkpoints.h"
#include "tests/csv_columns.h"
#include "tests/processes.h"
#include "tests/run_cli.h"
#include "tests/simulate_summary.h"
#include "tests/test_dirs.h"

namespace fedprof {
namespace {

using Clock = std::chrono::steady_clock;
using testing_support::FreshDir;
using testing_support::HaveFashionMnist;
using testing_support::kSmallRun;
using testing_support::MetricsWithoutWall;
using testing_support::WaitForCheckpoint;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


// tests/cli_test.cc's small but real run: 1000 Fashion-MNIST images among
// 10 clients, 4 per round.
// The CLI with `args` as a process of its own process group (so that the
// launcher and its ranks can all be killed), output into `log`.
class CliProcess {
 public:
  CliProcess(const std::string& args, const std::string& log) : log_(log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const std::string cmd = std::string("exec ") + FEDPROF_CLI + " " + args + " >" + log + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);  // also here: no race with the child's own call
  }
  ~CliProcess() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

  // Waits up to `timeout_s` (scaled under sanitizers) for the exit code
  // (-1: killed by a signal); past it kills the whole process group and
  // returns -2.
  int Wait(double timeout_s) {
    const auto deadline = testing_support::DeadlineIn(timeout_s);
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -2;
  }
  std::string Output() const { return FileExists(log_) ? ReadFile(log_) : ""; }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

struct Result {
  int code = -1;
  std::string output;
};

Result RunCli(const std::string& args, const std::string& log, double timeout_s = 120) {
  CliProcess p(args, log);
  Result r;
  r.code = p.Wait(timeout_s);
  r.output = p.Output();
  return r;
}

std::string Launch(int ranks, const std::string& simulate_args) {
  return "launch --nproc " + std::to_string(ranks) + " -- simulate " + simulate_args;
}

// A /proc file (their size reads as 0, so not ReadFile); "" when gone.
std::string ReadProcFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Live processes whose command line contains `marker`, with their RANK.
struct Rank {
  pid_t pid;
  std::string rank;  // "" for a process without RANK (the launcher)
};
std::vector<Rank> ProcessesWith(const std::string& marker) {
  std::vector<Rank> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = ::readdir(proc)) {
    const std::string name = e->d_name;
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const pid_t pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    std::string cmdline = ReadProcFile("/proc/" + name + "/cmdline");
    const std::string environ = ReadProcFile("/proc/" + name + "/environ");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(marker) == std::string::npos) continue;
    Rank r{pid, ""};
    std::istringstream vars(environ);
    std::string var;
    while (std::getline(vars, var, '\0')) {
      if (var.rfind("RANK=", 0) == 0) r.rank = var.substr(5);
    }
    found.push_back(r);
  }
  ::closedir(proc);
  return found;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// One process (the test's own), then each of `ranks` ranks, with different
// thread counts: the same metrics, clients, scores and final model, bit for
// bit. One rank holds every client, as the one process does, whatever the
// strategy: FedAvg and FedProf check it; the others need only 2 and 3 (of
// which 3 splits the clients unevenly).
void ExpectIdenticalForAnyRanks(const std::string& name, const std::string& settings,
                                std::initializer_list<int> ranks_to_run = {2, 3}) {
  const std::string base = FreshDir("dist", name + "_ranks");
  const std::string run =
      std::string(kSmallRun) + " --set rounds=3 --set data.holdout_share=0.1 " + settings;
  const std::string plain = testing_support::Simulated(base, "plain", run + " --set threads=2");
  for (int ranks : ranks_to_run) {
    const std::string out = base + "/ranks" + std::to_string(ranks);
    const std::string threads = ranks == 2 ? "2" : "1";
    const Result r = RunCli(Launch(ranks, run + " --set threads=" + threads + " --out " + out),
                            out + ".log");
    ASSERT_EQ(r.code, 0) << ranks << " ranks:\n" << r.output;
    EXPECT_NE(r.output.find("outputs in " + out), std::string::npos) << r.output;
    EXPECT_EQ(MetricsWithoutWall(plain), MetricsWithoutWall(out)) << ranks << " ranks";
    EXPECT_EQ(ReadFile(plain + "/clients.csv"), ReadFile(out + "/clients.csv")) << ranks << " ranks";
    EXPECT_EQ(testing_support::Summary(plain).at("final_model_sha256"),
              testing_support::Summary(out).at("final_model_sha256")) << ranks << " ranks";
    EXPECT_EQ(FileExists(plain + "/scores.csv"), FileExists(out + "/scores.csv"));
    if (FileExists(plain + "/scores.csv")) {
      EXPECT_EQ(ReadFile(plain + "/scores.csv"), ReadFile(out + "/scores.csv")) << ranks << " ranks";
    }
    EXPECT_TRUE(ProcessesWith(out).empty());
  }
}

TEST(DistributedTest, FedAvgMetricsAreIdenticalForOneTwoAndThreeRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("fedavg", "--set strategy.name=fedavg", {1, 2, 3});
}

TEST(DistributedTest, FedProfMetricsAreIdenticalForOneTwoAndThreeRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("fedprof", "--set strategy.name=fedprof", {1, 2, 3});
}

// The label-skewed partitions, feature skew among them, come from the seed
// alone: each rank builds the clients it holds as the one process does.
TEST(DistributedTest, LabelSkewedPartitionsAreIdenticalForAnyRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("dirichlet",
                             "--set partition.kind=dirichlet --set partition.beta=0.3 "
                             "--set partition.min_size=20 --set quality.feature_skew=0.3", {2});
  ExpectIdenticalForAnyRanks("sampled_classes",
                             "--set partition.kind=sampled_classes --set partition.classes=2 "
                             "--set partition.size_mean=60 --set partition.size_sd=10", {3});
}

// The client algorithms' state stays on the rank of its client (c_i, ∇L_k),
// SCAFFOLD's c goes to every rank with θ and each Δc_i comes back with its
// model.
TEST(DistributedTest, ClientAlgorithmsAreIdenticalForAnyRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string unequal = " --set partition.kind=dirichlet --set partition.min_size=20";
  ExpectIdenticalForAnyRanks("scaffold", "--set strategy.name=scaffold" + unequal, {2, 3});
  ExpectIdenticalForAnyRanks("fednova", "--set strategy.name=fednova" + unequal, {2});
  ExpectIdenticalForAnyRanks("feddyn", "--set strategy.name=feddyn" + unequal, {3});
  // MOON's previous models beyond a budget of 1 MiB: rank 0 spills, the checkpoint holds them inline.
  ExpectIdenticalForAnyRanks("moon", "--set strategy.name=moon --set client_state.memory_mb=1" + unequal, {2});
}

// The strong attacks and the rules against them: colluding attackers held
// back at rank 0 until the round's honest results from every rank are in
// (the tailored ones asking rank 0's rule, after bucketing, with momentum;
// then its FLTrust with the fallback's validation), FLTrust's root update,
// and backdoored clients on whichever rank against FLAME's noise.
TEST(DistributedTest, StrongAttacksAndRulesAreIdenticalForAnyRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("centered_clipping_tailored",
                             "--set strategy.aggregator=centered_clipping --set attack.share=0.3 "
                             "--set attack.kind=tailored --set robust.pre_aggregation=bucketing "
                             "--set robust.cc_start=last --set robust.momentum=0.5");
  ExpectIdenticalForAnyRanks("fltrust_min_sum",
                             "--set strategy.aggregator=fltrust --set attack.share=0.3 "
                             "--set attack.kind=min_sum --set robust.fltrust_scale=median");
  ExpectIdenticalForAnyRanks("fltrust_fallback_tailored",
                             "--set strategy.aggregator=fltrust --set attack.share=0.3 "
                             "--set attack.kind=tailored --set robust.fltrust_scale=median "
                             "--set robust.fallback=root --set robust.root_size=50");
  ExpectIdenticalForAnyRanks("flame_backdoor",
                             "--set strategy.aggregator=flame --set attack.share=0.2 "
                             "--set attack.kind=backdoor --set attack.scale=1 --set robust.pre_aggregation=nnm");
}

// User-level DP: clients clip on whichever rank holds them; rank 0 adds the
// noise drawn from the run's seed.
TEST(DistributedTest, UserLevelDpIsIdenticalForAnyRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("dp", "--set dp.mode=central --set dp.clipping=adaptive --set dp.count_noise=1");
  // Distributed DP: each client's noise is keyed by its id, wherever it
  // trains (q = 0.8: a sample of fewer than 3 would lose its session).
  ExpectIdenticalForAnyRanks(
      "distributed_dp",
      "--set dp.mode=distributed --set secagg.protocol=secagg+ --set secagg.min_clients=2 "
      "--set strategy.fraction=0.8");
}

// Clients that come and go in virtual time, some lost mid-round, with
// over-commitment: decided at rank 0 before any task leaves it.
TEST(DistributedTest, AvailabilityIsIdenticalForAnyRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("availability",
                             "--set availability.kind=on_off --set availability.online_mean_s=20 "
                             "--set availability.offline_mean_s=20 --set availability.overcommit=1.3");
}

// FedBuff with FedProf's selection: each dispatch's tasks go to the ranks
// that hold the clients, and the events are ordered by virtual time alone.
TEST(DistributedTest, FedBuffIsIdenticalForAnyRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("fedbuff",
                             "--set strategy.name=fedprof --set strategy.aggregator=fedbuff "
                             "--set fedbuff.concurrency=6 --set fedbuff.buffer=2");
}

// Clients of about 40 samples, profiled in groups of 3 consecutive ids
// (fedprof.profile_group): a group's clients share a rank and their forward
// passes there, so the profiles, scores and models are those of one process.
// The 60 clients draw from 360 training samples, so the clean (~1,200
// samples) and blurred (~480) clients take their rows from the shared
// tables (Population::SharedTables), computed on every rank that needs them.
TEST(DistributedTest, FedProfWithSmallClientsProfiledInGroupsIsIdenticalForAnyRanks) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  ExpectIdenticalForAnyRanks("fedprof_groups",
                             "--set strategy.name=fedprof --set partition.kind=sampled "
                             "--set partition.size_mean=40 --set partition.size_sd=5 "
                             "--set clients.count=60 --set data.train_limit=400 "
                             "--set fedprof.profile_group=3");
}

// Secure aggregation under launch: the ranks' clients hand rank 0 their
// results and rank 0 runs each round's SecAgg+ session. The model is bit for
// bit that of one process without secure aggregation; the metrics are one
// process's with it (the sessions' traffic and work add to the round times).
TEST(DistributedTest, SecureAggregationUnderLaunchGivesThePlainModel) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string base = FreshDir("dist", "secagg_ranks");
  const std::string run = std::string(kSmallRun) + " --set rounds=2 --set threads=1";
  const std::string plain = base + "/plain", one = base + "/one";
  const Result p = RunCli("simulate " + run + " --out " + plain, base + "/plain.log");
  ASSERT_EQ(p.code, 0) << p.output;
  const Result o =
      RunCli("simulate " + run + " --set secagg.protocol=secagg+ --set secagg.min_clients=4 --out " + one,
             base + "/one.log");
  ASSERT_EQ(o.code, 0) << o.output;
  const std::string out = base + "/secure";
  const Result r = RunCli(
      Launch(2, run +
                    " --set secagg.protocol=secagg+ --set secagg.min_clients=4 --set report.progress=true "
                    "--out " +
                    out),
      out + ".log");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("round 2: secagg+ of 4 clients"), std::string::npos) << r.output;
  EXPECT_EQ(MetricsWithoutWall(one), MetricsWithoutWall(out));
  EXPECT_EQ(testing_support::Summary(plain).at("final_model_sha256"),
            testing_support::Summary(out).at("final_model_sha256"));
  const auto plain_times = testing_support::Columns(plain + "/metrics.csv").at("round_time_s");
  const auto secure_times = testing_support::Columns(out + "/metrics.csv").at("round_time_s");
  EXPECT_GT(std::stod(secure_times.at(0)), std::stod(plain_times.at(0)));
  EXPECT_TRUE(ProcessesWith(out).empty());
}

// A rank killed mid-run: rank 0 names it in one line, the launcher stops
// the others and exits non-zero, well within dist.timeout_s; nothing is left.
TEST(DistributedTest, KilledRankEndsTheRunWithOneLineAndNoProcessLeft) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = FreshDir("dist", "killed_rank");
  const std::string out = dir + "/out";
  CliProcess launch(Launch(3, std::string(kSmallRun) +
                                  " --set rounds=500 --set threads=1 --set dist.timeout_s=60 --out " +
                                  out),
                    dir + "/log");
  ASSERT_GE(WaitForCheckpoint(out, 1, 60), 1) << launch.Output();
  pid_t victim = -1;
  for (const Rank& r : ProcessesWith(out)) {
    if (r.rank == "2") victim = r.pid;
  }
  ASSERT_GT(victim, 0) << "rank 2 not found";
  const auto killed = Clock::now();
  ::kill(victim, SIGKILL);
  const int code = launch.Wait(60);
  const double seconds = SecondsSince(killed);
  const std::string output = launch.Output();
  EXPECT_EQ(code, 1) << output;
  EXPECT_LT(seconds, 60) << "not within dist.timeout_s";
  EXPECT_LT(DecodeCheckpoint(ReadFile(out + "/checkpoint.bin"), "checkpoint").state.round, 500);
  // Rank 0's line names the lost rank; the launcher's says how it ended.
  int rank0_lines = 0;
  for (const std::string& line : Lines(output)) {
    if (line.rfind("fedprof: error: rank 0: ", 0) == 0) {
      ++rank0_lines;
      EXPECT_NE(line.find("rank 2 was lost"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(rank0_lines, 1) << output;
  EXPECT_NE(output.find("fedprof: error: launch: rank 2 was killed by signal 9"), std::string::npos)
      << output;
  EXPECT_TRUE(ProcessesWith(out).empty());
}

// A rank that stops answering (SIGSTOP) ends the run after dist.timeout_s.
TEST(DistributedTest, SilentRankEndsTheRunAfterTheTimeout) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = FreshDir("dist", "silent_rank");
  const std::string out = dir + "/out";
  CliProcess launch(Launch(2, std::string(kSmallRun) +
                                  " --set rounds=500 --set threads=1 --set dist.timeout_s=3 --out " +
                                  out),
                    dir + "/log");
  ASSERT_GE(WaitForCheckpoint(out, 1, 60), 1) << launch.Output();
  pid_t victim = -1;
  for (const Rank& r : ProcessesWith(out)) {
    if (r.rank == "1") victim = r.pid;
  }
  ASSERT_GT(victim, 0) << "rank 1 not found";
  ::kill(victim, SIGSTOP);
  const int code = launch.Wait(60);
  const std::string output = launch.Output();
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find("fedprof: error: rank 0: "), std::string::npos) << output;
  EXPECT_NE(output.find("for 3 s (dist.timeout_s)"), std::string::npos) << output;
  EXPECT_TRUE(ProcessesWith(out).empty());
}

// FedBN keeps each client's batch norm on the client's rank: a 2-rank run
// stopped after round 2 and resumed equals an uninterrupted run (one
// process: the same for any number of ranks), client states included.
TEST(DistributedTest, StoppedRunResumesToTheSameMetrics) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = FreshDir("dist", "resume");
  const std::string run = std::string(kSmallRun) + " --set strategy.name=fedbn --set model.name=cnn" +
                          " --set threads=1 --set rounds=4";
  const std::string whole = dir + "/whole", parts = dir + "/parts";
  // Without a budget one process's checkpoint holds its states inline, as
  // a distributed run's always does, so the two compare as text.
  Result r = RunCli("simulate " + run + " --set client_state.memory_mb=0 --out " + whole, whole + ".log");
  ASSERT_EQ(r.code, 0) << r.output;

  // Stop the launcher (SIGTERM) once round 2 is checkpointed.
  {
    CliProcess launch(Launch(2, run + " --out " + parts), parts + ".log");
    WaitForCheckpoint(parts, 2, 60);
    ::kill(launch.pid(), SIGTERM);
    EXPECT_EQ(launch.Wait(30), 1) << launch.Output();
    EXPECT_NE(launch.Output().find("launch: stopped by"), std::string::npos) << launch.Output();
  }
  EXPECT_TRUE(ProcessesWith(parts).empty());
  const ServerState stopped = DecodeCheckpoint(ReadFile(parts + "/checkpoint.bin"), "checkpoint").state;
  ASSERT_GE(stopped.round, 2);
  ASSERT_LT(stopped.round, 4) << "the run ended before it could be stopped";
  EXPECT_NE(stopped.transport_state, "{}");
  r = RunCli("launch --nproc 2 -- simulate --resume " + parts, parts + "-resume.log");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(MetricsWithoutWall(whole), MetricsWithoutWall(parts));
  EXPECT_EQ(ReadFile(whole + "/clients.csv"), ReadFile(parts + "/clients.csv"));
  EXPECT_EQ(DecodeCheckpoint(ReadFile(whole + "/checkpoint.bin"), "checkpoint").state.transport_state,
            DecodeCheckpoint(ReadFile(parts + "/checkpoint.bin"), "checkpoint").state.transport_state);
}

TEST(DistributedTest, MalformedEnvironmentIsOneLineNamingTheVariable) {
  const std::string dir = FreshDir("dist", "env");
  const std::string cmd = std::string("env WORLD_SIZE=2 RANK=5 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 ") +
                          FEDPROF_CLI + " simulate --out " + dir + "/x > " + dir + "/bad.log 2>&1";
  ASSERT_NE(std::system(cmd.c_str()), 0);
  const std::string output = ReadFile(dir + "/bad.log");
  EXPECT_EQ(Lines(output).size(), 1u) << output;
  EXPECT_NE(output.find("RANK: '5' is not a rank in 0..1"), std::string::npos) << output;
  const Result launch = RunCli("launch --nproc 2 -- compare", dir + "/compare.log");
  EXPECT_EQ(launch.code, 1);
  EXPECT_NE(launch.output.find("launch: runs 'simulate'"), std::string::npos) << launch.output;
}

}  // namespace
}  // namespace fedprof
