// End-to-end tests of the fedprof command line on real data: FedProf and
// the strategies, FedBuff and DP runs, and models from PyTorch files.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "fedprof/aggregation/dp_fedavg.h"
#include "fedprof/config/config.h"
#include "fedprof/config/options.h"
#include "fedprof/core/files.h"
#include "fedprof/core/hash.h"
#include "fedprof/core/rng.h"
#include "fedprof/core/text.h"
#include "fedprof/models/models.h"
#include "fedprof/privacy/distributed_dp.h"
#include "fedprof/privacy/rdp.h"
#include "fedprof/run/run.h"
#include "fedprof/server/checkpoint.h"
#include "fedprof/strategy/strategy.h"
#include "tests/checkpoints.h"
#include "tests/csv_columns.h"
#include "tests/processes.h"
#include "tests/run_cli.h"
#include "tests/simulate_summary.h"
#include "tests/test_dirs.h"
#include "tests/torchscript_export.h"

namespace fedprof {
namespace {

using testing_support::ClearedPath;
using testing_support::CliResult;
using testing_support::Columns;
using testing_support::ConfigOf;
using testing_support::FirstColumns;
using testing_support::CountLines;
using testing_support::HaveFashionMnist;
using testing_support::kFedProfRun;
using testing_support::kSmallRun;
using testing_support::KillOnceCheckpointed;
using testing_support::MetricsWithoutWall;
using testing_support::RunCli;
using testing_support::Summary;
using testing_support::WithoutLastColumn;

// Mean score per data kind in round `round` of a run's scores.csv.
std::map<std::string, double> MeanScoreByKind(const std::string& dir, int round) {
  std::vector<std::string> kinds;
  {
    std::istringstream in(ReadFile(dir + "/clients.csv"));
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::stringstream ss(line);
      std::string id, size, kind;
      std::getline(ss, id, ',');
      std::getline(ss, size, ',');
      std::getline(ss, kind, ',');
      kinds.push_back(kind);
    }
  }
  std::istringstream in(ReadFile(dir + "/scores.csv"));
  std::string line;
  std::getline(in, line);
  std::map<std::string, double> sum, count;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string cell;
    std::getline(ss, cell, ',');
    if (std::stoi(cell) != round) continue;
    for (size_t k = 0; std::getline(ss, cell, ','); ++k) {
      sum[kinds.at(k)] += std::stod(cell);
      count[kinds.at(k)] += 1;
    }
  }
  for (auto& [kind, s] : sum) s /= count[kind];
  return sum;
}

TEST(FedProfCliTest, LowQualityClientsScoreLowerThanCleanOnes) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string out = ClearedPath("cli", "fedprof_scores");
  const CliResult r = RunCli(std::string("simulate ") + kFedProfRun + " --set rounds=3 --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  for (int round : {1, 3}) {
    const auto score = MeanScoreByKind(out, round);
    EXPECT_LT(score.at("irrelevant"), 0.2 * score.at("clean")) << "round " << round;
    EXPECT_LT(score.at("blurred"), score.at("clean")) << "round " << round;
    EXPECT_LT(score.at("salt_pepper"), score.at("clean")) << "round " << round;
  }
  const auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_GT(summary.at("profiling_time_per_round_s").get<double>(), 0);
  EXPECT_GT(summary.at("profiling_energy_per_round_wh").get<double>(), 0);
}

// Every strategy that keeps state between rounds (profiles, valuations,
// server moments, clients' batch norm) resumes exactly.
TEST(FedProfCliTest, ExtendedRunEqualsUninterruptedRun) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  for (const std::string strategy : {"fedprof", "afl", "fedadam", "fedbn", "clustered", "oort"}) {
    // FedBN needs batch-norm layers; LeNet-5 keeps the others quick, and
    // an identity needs few images (50 a client). The runs to compare run
    // in this process; the CLI resumes.
    const std::string run = std::string(kFedProfRun) + " --set data.train_limit=1000" +
                            " --set strategy.name=" + strategy +
                            (strategy == "fedbn" ? " --set model.name=cnn" : "");
    const std::string whole = ClearedPath("cli", strategy + "_whole");
    const std::string parts = ClearedPath("cli", strategy + "_parts");
    RunSimulation(ConfigOf(run + " --set rounds=3"), whole);
    RunSimulation(ConfigOf(run + " --set rounds=1"), parts);
    const CliResult resumed = RunCli("simulate --resume " + parts + " --set rounds=3");
    ASSERT_EQ(resumed.code, 0) << resumed.output;
    EXPECT_EQ(MetricsWithoutWall(whole), MetricsWithoutWall(parts)) << strategy;
    if (strategy == "fedprof" || strategy == "afl" || strategy == "oort") {
      EXPECT_EQ(ReadFile(whole + "/scores.csv"), ReadFile(parts + "/scores.csv")) << strategy;
    }
  }
}

// FedBuff with FedProf's selection, half the clients online: the numbers
// depend neither on the threads nor on a kill and resume between steps.
TEST(FedBuffCliTest, ThreadsAndAKilledRunChangeNoNumber) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string run = std::string("simulate ") + kFedProfRun +
                          " --set strategy.aggregator=fedbuff --set fedbuff.concurrency=8 "
                          "--set fedbuff.buffer=3 --set availability.kind=on_off "
                          "--set availability.online_mean_s=200 --set availability.offline_mean_s=200 "
                          "--set rounds=10";
  const std::string one = ClearedPath("cli", "fedbuff_1"), two = ClearedPath("cli", "fedbuff_2");
  const std::string killed = ClearedPath("cli", "fedbuff_killed");
  ASSERT_EQ(RunCli(run + " --set threads=1 --out " + one).code, 0);
  ASSERT_EQ(RunCli(run + " --set threads=2 --out " + two).code, 0);
  EXPECT_EQ(MetricsWithoutWall(one), MetricsWithoutWall(two));
  EXPECT_EQ(ReadFile(one + "/scores.csv"), ReadFile(two + "/scores.csv"));
  EXPECT_EQ(ReadFile(one + "/clients.csv"), ReadFile(two + "/clients.csv"));

  KillOnceCheckpointed(run + " --set threads=2 --out " + killed, killed, 3);
  if (HasFatalFailure()) return;
  const ServerState at_kill = DecodeCheckpoint(ReadFile(killed + "/checkpoint.bin"), "ckpt").state;
  ASSERT_LT(at_kill.round, 10);
  EXPECT_FALSE(at_kill.training.empty()) << "killed with clients in training";
  const CliResult resumed = RunCli("simulate --resume " + killed);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(MetricsWithoutWall(one), MetricsWithoutWall(killed));
  EXPECT_EQ(ReadFile(one + "/scores.csv"), ReadFile(killed + "/scores.csv"));

  // One row per server step, with its staleness and the online count.
  const auto m = Columns(one + "/metrics.csv");
  ASSERT_EQ(m.at("round").size(), 10u);
  double stale = 0, last_time = 0;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(m.at("returned")[i], "3");
    stale += std::stod(m.at("staleness")[i]);
    EXPECT_GT(std::stod(m.at("virtual_time_s")[i]), last_time);
    last_time = std::stod(m.at("virtual_time_s")[i]);
    EXPECT_LT(std::stoi(m.at("online")[i]), 20);
  }
  EXPECT_GT(stale, 0) << "8 clients training for steps of 3: some results are stale";
}

// With as many clients training as a step takes, all equally fast, no result
// is ever stale: FedBuff is synchronous FedAvg, bit for bit.
TEST(FedBuffCliTest, EveryoneInStepIsSynchronousFedAvg) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string run = std::string("simulate ") + kSmallRun +
                          " --set rounds=3 --set cost.speed_sd=0 --set cost.bandwidth_sd=0 "
                          "--set cost.cycles_per_bit=0";
  const std::string sync = ClearedPath("cli", "fedbuff_sync"), buffered = ClearedPath("cli", "fedbuff_k");
  ASSERT_EQ(RunCli(run + " --set strategy.name=fedavg --out " + sync).code, 0);
  const CliResult r = RunCli(run + " --set strategy.name=fedbuff --out " + buffered);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(Summary(sync).at("final_model_sha256"), Summary(buffered).at("final_model_sha256"));
  auto a = Columns(sync + "/metrics.csv"), b = Columns(buffered + "/metrics.csv");
  EXPECT_EQ(b.at("staleness"), std::vector<std::string>(3, "0"));
  for (const char* column : {"selected", "returned", "accuracy", "loss", "train_loss", "virtual_time_s"}) {
    EXPECT_EQ(a.at(column), b.at(column)) << column;
  }
  // Under refill = step the same holds whatever the clients' speeds: the
  // places refill together at each step, on its model.
  const std::string mixed = std::string("simulate ") + kSmallRun + " --set rounds=3";
  const std::string sync_mixed = ClearedPath("cli", "fedbuff_sync_mixed");
  const std::string stepped = ClearedPath("cli", "fedbuff_stepped");
  ASSERT_EQ(RunCli(mixed + " --set strategy.name=fedavg --out " + sync_mixed).code, 0);
  ASSERT_EQ(RunCli(mixed + " --set strategy.name=fedbuff --set fedbuff.refill=step --out " + stepped).code, 0);
  EXPECT_EQ(Summary(sync_mixed).at("final_model_sha256"), Summary(stepped).at("final_model_sha256"));
  a = Columns(sync_mixed + "/metrics.csv");
  b = Columns(stepped + "/metrics.csv");
  for (const char* column : {"selected", "accuracy", "round_time_s", "virtual_time_s", "energy_wh"}) {
    EXPECT_EQ(a.at(column), b.at(column)) << column;
  }
  // What it cannot run with is refused in one line.
  for (const std::string bad : {"--set secagg.protocol=secagg", "--set availability.overcommit=1.3"}) {
    const CliResult refused = RunCli(run + " --set strategy.name=fedbuff " + bad + " --out " +
                                     ClearedPath("cli", "fedbuff_refused"));
    EXPECT_EQ(refused.code, 1) << bad;
    EXPECT_EQ(CountLines(refused.output), 1) << refused.output;
    EXPECT_NE(refused.output.find("fedbuff"), std::string::npos) << refused.output;
  }
}

// Runs the simulation of `sets` (--set words) with 1 and with 2 threads, in
// the test's process, and once more as `fedprof simulate`, killed after its
// second checkpoint and resumed: the three give the same metrics and final
// model. Returns the 1-thread run's folder (cli/NAME_1).
std::string ExpectSameWithAnyThreadsAndAcrossAKill(const std::string& sets, const std::string& name) {
  const std::string one = ClearedPath("cli", name + "_1"), two = ClearedPath("cli", name + "_2");
  const std::string killed = ClearedPath("cli", name + "_killed");
  RunSimulation(ConfigOf(sets + " --set threads=1"), one);
  RunSimulation(ConfigOf(sets + " --set threads=2"), two);
  EXPECT_EQ(MetricsWithoutWall(one), MetricsWithoutWall(two));
  EXPECT_EQ(Summary(one).at("final_model_sha256"), Summary(two).at("final_model_sha256"));
  KillOnceCheckpointed("simulate " + sets + " --out " + killed, killed, 2);
  if (::testing::Test::HasFatalFailure()) return one;
  EXPECT_EQ(RunCli("simulate --resume " + killed).code, 0);
  EXPECT_EQ(MetricsWithoutWall(one), MetricsWithoutWall(killed));
  EXPECT_EQ(Summary(one).at("final_model_sha256"), Summary(killed).at("final_model_sha256"));
  return one;
}

// User-level DP (dp.mode = central) with adaptive clipping: the numbers
// depend neither on the threads nor on a kill and resume (the clip norm and
// the ledger are in the checkpoint); ε grows each round as the accountant
// says, and dp.target_epsilon stops the run before the round that would
// pass it.
TEST(DpCliTest, ThreadsAndAKilledRunChangeNoNumberAndTheLedgerStopsTheRun) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string sets = std::string(kSmallRun) +
                           " --set dp.mode=central --set dp.noise_multiplier=0.7 --set dp.clipping=adaptive "
                           "--set dp.clip_norm=0.5 --set dp.count_noise=1 --set rounds=6";
  const std::string run = "simulate " + sets;
  const std::string one = ExpectSameWithAnyThreadsAndAcrossAKill(sets, "dp");
  if (HasFatalFailure()) return;

  // Poisson sampling at q = 4/10, ε at δ = 1/10 after each round, the clip
  // norm adapting from 0.5.
  const auto m = Columns(one + "/metrics.csv");
  ASSERT_EQ(m.at("dp_epsilon").size(), 6u);
  std::set<std::string> selected(m.at("selected").begin(), m.at("selected").end());
  EXPECT_GT(selected.size(), 1u) << "a Poisson sample's size varies";
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(std::stod(m.at("dp_epsilon")[i]), SampledGaussianEpsilon(0.4, 0.7, i + 1, 0.1).epsilon, 1e-7);
  }
  EXPECT_EQ(m.at("dp_clip_norm")[0], "0.5");
  EXPECT_NE(m.at("dp_clip_norm")[5], "0.5");
  for (const std::string& share : m.at("dp_unclipped")) {
    EXPECT_GE(std::stod(share), 0.0);
    EXPECT_LE(std::stod(share), 1.0);
  }
  EXPECT_NEAR(Summary(one).at("dp_epsilon").get<double>(), std::stod(m.at("dp_epsilon")[5]), 1e-7);

  const double target = (std::stod(m.at("dp_epsilon")[2]) + std::stod(m.at("dp_epsilon")[3])) / 2;
  const std::string stopped = ClearedPath("cli", "dp_stopped");
  const CliResult r =
      RunCli(run + " --set dp.target_epsilon=" + FormatDouble(target, "%.9g") + " --out " + stopped);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(Summary(stopped).at("rounds"), 3);
  const auto s = Columns(stopped + "/metrics.csv");
  EXPECT_EQ(s.at("accuracy"),
            std::vector<std::string>(m.at("accuracy").begin(), m.at("accuracy").begin() + 3));

  // What DP cannot run with is refused in one line.
  for (const std::string bad :
       {"--set strategy.name=fedprof", "--set strategy.aggregator=median", "--set strategy.name=fedbuff",
        "--set availability.kind=on_off", "--set secagg.protocol=secagg", "--set eval.federated_every=1",
        "--set dp.count_noise=0.3"}) {
    const CliResult refused = RunCli(run + " " + bad + " --out " + ClearedPath("cli", "dp_refused"));
    EXPECT_EQ(refused.code, 1) << bad;
    EXPECT_EQ(CountLines(refused.output), 1) << refused.output;
    EXPECT_NE(refused.output.find("dp."), std::string::npos) << refused.output;
  }
}

// Distributed DP under SecAgg+: the clients' noise is seeded per client, so
// the threads and a kill and resume change no number; each round's ε is the
// accountant's for the clients its sum held (a thin round costs more), and
// what it cannot run with is refused in one line.
TEST(DpCliTest, DistributedDpChangesNoNumberAndChargesEachRoundByItsSum) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  // K = 8 of N = 10 (q = 0.8): a session needs at least 3 invited clients
  // with one of the 10 colluding, which a Poisson sample at q = 0.4 would
  // miss in 17% of rounds (refused below).
  const std::string settings =
      "--set strategy.fraction=0.8 --set dp.mode=distributed --set dp.noise_multiplier=0.7 "
      "--set dp.clip_norm=0.5 --set secagg.protocol=secagg+ --set secagg.min_clients=2 --set rounds=5";
  const std::string sets = std::string(kSmallRun) + " " + settings;
  const std::string run = "simulate " + sets;
  const std::string one = ExpectSameWithAnyThreadsAndAcrossAKill(sets, "ddp");
  if (HasFatalFailure()) return;

  // LeNet-5's 61,706 values, δ = 1/10; each round's encoding for the
  // clients its session invited (selected), charged by those its sum held
  // (returned), of whom all but the one colluder are honest.
  Config config;
  for (const char* assignment :
       {"clients.count=10", "strategy.fraction=0.8", "dp.mode=distributed", "dp.noise_multiplier=0.7",
        "dp.clip_norm=0.5", "secagg.protocol=secagg+", "secagg.min_clients=2"}) {
    config.SetAssignment(assignment);
  }
  const DpFedAvgOptions o = DpOptionsFrom(config.options());
  const auto m = Columns(one + "/metrics.csv");
  ASSERT_EQ(m.at("dp_epsilon").size(), 5u);
  std::vector<DdgRelease> releases;
  for (size_t i = 0; i < 5; ++i) {
    const int64_t invited = std::stoll(m.at("selected")[i]), held = std::stoll(m.at("returned")[i]);
    ASSERT_EQ(o.fewest_in_sum(invited) - o.fewest_honest_in_sum(invited), 1) << "one colluder";
    releases.push_back({DdgRound(o, 0.5, static_cast<int64_t>(i) + 1, 61706, invited), held, held - 1});
    EXPECT_NEAR(std::stod(m.at("dp_epsilon")[i]), DdgEpsilon(releases, 0.8, 0.1).epsilon, 1e-6) << i;
    EXPECT_GT(std::stod(m.at("dp_epsilon_server")[i]), std::stod(m.at("dp_epsilon")[i])) << i;
  }
  // summary.json states the last round's epsilon against the server too.
  const double server_epsilon = std::stod(m.at("dp_epsilon_server").back());
  EXPECT_NEAR(Summary(one).at("dp_epsilon_server").get<double>(), server_epsilon, 1e-6 * server_epsilon);
  // privacy dp reads the run's config and prints both epsilons side by side,
  // round by round: against the server, who knows who took part, a round
  // costs at least what the whole sampled round costs against observers.
  const CliResult ledger = RunCli(std::string("privacy dp --model-values 61706 ") + kSmallRun + " " + settings);
  ASSERT_EQ(ledger.code, 0) << ledger.output;
  static const std::regex line(
      "round +([0-9]+)  epsilon ([0-9.]+)  against the server: ([0-9.]+) in one round, ([0-9.]+) in ([0-9]+)");
  int printed = 0;
  for (auto it = std::sregex_iterator(ledger.output.begin(), ledger.output.end(), line);
       it != std::sregex_iterator(); ++it, ++printed) {
    const double observers = std::stod((*it)[2]), one_round = std::stod((*it)[3]), most = std::stod((*it)[4]);
    if ((*it)[1] == "1") {
      EXPECT_GE(one_round, observers) << ledger.output;
    }
    EXPECT_GE(most, one_round) << ledger.output;
  }
  EXPECT_EQ(printed, 5) << ledger.output;

  std::set<std::string> selected(m.at("selected").begin(), m.at("selected").end());
  EXPECT_GT(selected.size(), 1u) << "a Poisson sample's size varies";
  const std::string thin = RunCli(std::string("simulate ") + kSmallRun + " " + settings +
                                  " --set strategy.fraction=0.4 --out " + ClearedPath("cli", "ddp_thin"))
                               .output;
  EXPECT_NE(
      thin.find("draws fewer in 16.7% of rounds, each of which would lose its sum; raise strategy.fraction"),
      std::string::npos)
      << thin;

  // A target just above round 3's ε: no round's ε passes it, whoever its
  // sum held, and the run says where it stopped.
  const double target = std::stod(m.at("dp_epsilon")[2]) + 1e-9;
  const std::string capped = ClearedPath("cli", "ddp_target");
  const CliResult stopped =
      RunCli(run + " --set dp.target_epsilon=" + FormatDouble(target, "%.17g") + " --out " + capped);
  ASSERT_EQ(stopped.code, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("beyond dp.target_epsilon"), std::string::npos) << stopped.output;
  const auto c = Columns(capped + "/metrics.csv");
  ASSERT_GE(c.at("dp_epsilon").size(), 1u);
  EXPECT_LE(c.at("dp_epsilon").size(), 3u);
  for (const std::string& e : c.at("dp_epsilon")) EXPECT_LE(std::stod(e), target);

  for (const std::string bad : {"--set secagg.protocol=none", "--set dp.clipping=adaptive"}) {
    const CliResult refused = RunCli(run + " " + bad + " --out " + ClearedPath("cli", "ddp_refused"));
    EXPECT_EQ(refused.code, 1) << bad;
    EXPECT_EQ(CountLines(refused.output), 1) << refused.output;
    EXPECT_NE(refused.output.find("dp."), std::string::npos) << refused.output;
  }
}

// FedProf under DP: profiles only through Paillier matching, clients
// Poisson-sampled by score with at most 2K/N = 0.5 each, which the ledger
// charges every round; the threads change no number.
TEST(DpCliTest, FedProfUnderDpIsChargedAtItsCap) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string run =
      std::string("simulate ") + kFedProfRun +
      " --set dp.mode=central --set fedprof.secure_matching=paillier --set dp.count_noise=1 "
      "--set rounds=3 --set model.profile_layer=conv2";  // 16 channels: little homomorphic work
  const std::string one = ClearedPath("cli", "dp_fedprof_1"), two = ClearedPath("cli", "dp_fedprof_2");
  ASSERT_EQ(RunCli(run + " --set threads=1 --out " + one).code, 0);
  ASSERT_EQ(RunCli(run + " --set threads=2 --out " + two).code, 0);
  EXPECT_EQ(MetricsWithoutWall(one), MetricsWithoutWall(two));
  EXPECT_EQ(ReadFile(one + "/scores.csv"), ReadFile(two + "/scores.csv"));
  const auto m = Columns(one + "/metrics.csv");
  for (size_t i = 0; i < 3; ++i) {
    // 20 clients, K = 5: q = 0.5 (not 0.25), δ = 1/20, z = 1.
    EXPECT_NEAR(std::stod(m.at("dp_epsilon")[i]), SampledGaussianEpsilon(0.5, 1.0, i + 1, 0.05).epsilon,
                1e-7);
  }
}

// Secure matching (App. C.2): the divergences the server decrypts from the
// clients' ciphertexts select exactly the clients plain profiles select.
TEST(CliTest, SecureMatchingSelectsTheSameClients) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  // conv2's 16 channels keep the homomorphic work small.
  const std::string run = std::string("simulate ") + kFedProfRun +
                          " --set rounds=10 --set model.profile_layer=conv2";
  const std::string plain = ClearedPath("cli", "plain_matching");
  const std::string secure = ClearedPath("cli", "secure_matching");
  ASSERT_EQ(RunCli(run + " --out " + plain).code, 0);
  const CliResult r = RunCli(run + " --set fedprof.secure_matching=paillier --out " + secure);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(FirstColumns(plain + "/clients.csv", 5), FirstColumns(secure + "/clients.csv", 5));
  // times_selected, the last column, holds the selections of all 10 rounds.
  auto selections = [](const std::string& dir) {
    std::istringstream in(ReadFile(dir + "/clients.csv"));
    std::string line, out;
    while (std::getline(in, line)) out += line.substr(line.rfind(',')) + "\n";
    return out;
  };
  EXPECT_EQ(selections(plain), selections(secure));
  const auto a = Columns(plain + "/metrics.csv"), b = Columns(secure + "/metrics.csv");
  EXPECT_EQ(a.at("accuracy"), b.at("accuracy"));
  EXPECT_EQ(a.at("train_loss"), b.at("train_loss"));
  // The cost model counts the encrypted reference and the client's work.
  const auto sa = nlohmann::json::parse(ReadFile(plain + "/summary.json"));
  const auto sb = nlohmann::json::parse(ReadFile(secure + "/summary.json"));
  EXPECT_GT(sb.at("profiling_time_per_round_s").get<double>(),
            sa.at("profiling_time_per_round_s").get<double>());
  EXPECT_GT(sb.at("profiling_energy_per_round_wh").get<double>(),
            sa.at("profiling_energy_per_round_wh").get<double>());
}

TEST(FedProfCliTest, FedProfWithoutAReferenceSetIsRefused) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const CliResult r = RunCli("simulate --set strategy.name=fedprof --set data.holdout_share=0 --out " +
                          ClearedPath("cli", "no_reference"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("data.holdout_share"), std::string::npos) << r.output;
}

TEST(FedProfCliTest, ProfileAndDivergenceTools) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string out = ClearedPath("cli", "profile_tools");
  ASSERT_EQ(RunCli(std::string("simulate ") + kSmallRun + " --set rounds=1 --out " + out).code, 0);
  const std::string a = out + "/fmnist.json", b = out + "/mnist.json";
  CliResult r = RunCli("profile --model " + out + " --data fashion-mnist:test --limit 500 --out " + a);
  ASSERT_EQ(r.code, 0) << r.output;
  r = RunCli("profile --model " + out + "/checkpoint.bin --data mnist:test --limit 500 --out " + b);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto pa = nlohmann::json::parse(ReadFile(a));
  EXPECT_EQ(pa.at("version"), 1);
  EXPECT_EQ(pa.at("layer"), "fc1");
  EXPECT_EQ(pa.at("mean").size(), 120u);

  r = RunCli("divergence " + a + " " + a + " --json");
  ASSERT_EQ(r.code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("divergence"), 0.0);
  EXPECT_EQ(j.at("score"), 1.0);
  EXPECT_EQ(j.at("kl").size(), 120u);
  r = RunCli("divergence " + b + " " + a + " --alpha 2 --json");
  j = nlohmann::json::parse(r.output);
  const double div = j.at("divergence");
  EXPECT_GT(div, 0.01);  // MNIST digits under a Fashion-MNIST model
  EXPECT_DOUBLE_EQ(j.at("score").get<double>(), std::exp(-2 * div));
  r = RunCli("divergence " + b + " " + a);
  EXPECT_NE(r.output.find("divergence "), std::string::npos) << r.output;
  // Both sides of secure matching, with what each spent.
  r = RunCli("divergence " + b + " " + a + " --secure --json");
  ASSERT_EQ(r.code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_NEAR(j.at("secure_divergence").get<double>(), div, 1e-9 * div);
  EXPECT_GT(j.at("client_ms").get<double>(), 0);
  EXPECT_GT(j.at("server_ms").get<double>(), 0);
  EXPECT_EQ(j.at("bytes_to_server").get<int64_t>(), 512);  // one ciphertext mod n², 2048-bit n
  EXPECT_GT(j.at("bytes_to_client").get<int64_t>(), 3 * 120 * 512);
  r = RunCli("divergence " + b + " " + a + " --secure");
  EXPECT_NE(r.output.find("secure "), std::string::npos) << r.output;

  // Malformed profiles are refused with one line naming the file and reason.
  auto bad = pa;
  bad["var"][3] = -1.0;
  WriteFileAtomic(out + "/neg.json", bad.dump());
  r = RunCli("divergence " + out + "/neg.json " + a);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("neg.json: variance <= 0 at unit 3"), std::string::npos) << r.output;
  bad = pa;
  bad["mean"].erase(0);
  WriteFileAtomic(out + "/short.json", bad.dump());
  r = RunCli("divergence " + out + "/short.json " + a);
  EXPECT_NE(r.output.find("units"), std::string::npos) << r.output;
  bad = pa;
  bad["version"] = 5;
  WriteFileAtomic(out + "/v5.json", bad.dump());
  r = RunCli("divergence " + out + "/v5.json " + a);
  EXPECT_NE(r.output.find("model version 5"), std::string::npos) << r.output;
  WriteFileAtomic(out + "/nan.json", "{\"version\": 1, \"layer\": \"fc1\", \"mean\": [NaN], \"var\": [1]}");
  r = RunCli("divergence " + out + "/nan.json " + a);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("nan.json"), std::string::npos) << r.output;
}

TEST(FedProfCliTest, EveryStrategyRunsInBothAggregationModes) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string out = ClearedPath("cli", "all_strategies");
  const std::string strategies =
      "fedavg,fedprof,cfcfm,fedavg-rp,fedprox:partial,fedadam:partial,afl:partial,"
      "clustered:partial,fedbn:partial,fedprof:partial";
  const CliResult r = RunCli(std::string("compare ") + kFedProfRun +
                          " --set data.train_limit=1000 --set rounds=1 --set model.name=cnn"
                          " --strategies " + strategies +
                          " --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(CountLines(ReadFile(out + "/comparison.csv")), 11);
  EXPECT_NE(ReadFile(out + "/comparison.md").find("| fedavg-rp-full |"), std::string::npos);
}

TEST(FedProfCliTest, CompareRunsEveryStrategyOnTheSameClients) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string out = ClearedPath("cli", "compare"), jobs_out = ClearedPath("cli", "compare-jobs");
  const CliResult r = RunCli(std::string("compare ") + kFedProfRun +
                          " --set rounds=2 --set report.target=0.2 --seeds 2 "
                          "--strategies fedavg,fedprof:partial --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string md = ReadFile(out + "/comparison.md");
  EXPECT_NE(md.find("| fedavg-full | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| fedprof-partial | 2 |"), std::string::npos) << md;
  EXPECT_EQ(CountLines(ReadFile(out + "/comparison.csv")), 5);
  // Same seed, same clients: the partitions, data kinds and devices agree
  // (round times differ: FedProf's include profiling).
  EXPECT_EQ(FirstColumns(out + "/fedavg-full/seed-2/clients.csv", 5),
            FirstColumns(out + "/fedprof-partial/seed-2/clients.csv", 5));
  EXPECT_TRUE(FileExists(out + "/accuracy.png"));
  EXPECT_TRUE(FileExists(out + "/fedprof-partial/seed-1/scores.png"));
  EXPECT_TRUE(FileExists(out + "/fedprof-partial/seed-1/selection.png"));
  // The same runs as two concurrent processes give the same table.
  const CliResult jobs = RunCli(std::string("compare ") + kFedProfRun +
                             " --set rounds=2 --set report.target=0.2 --seeds 2 --jobs 2 "
                             "--strategies fedavg,fedprof:partial --out " + jobs_out);
  ASSERT_EQ(jobs.code, 0) << jobs.output;
  EXPECT_EQ(WithoutLastColumn(out + "/comparison.csv"),
            WithoutLastColumn(jobs_out + "/comparison.csv"));  // all but wall_s
  const CliResult bad = RunCli("compare --strategies fedavg,fedbogus --out " + out + "/bad");
  EXPECT_FALSE(FileExists(out + "/bad/fedavg-full"));  // refused before any run started
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("fedbogus"), std::string::npos) << bad.output;
}


// The built-in LeNet-5's initial parameters for `seed`, as JSON {name: values}.
void WriteBuiltInLeNetInit(const std::string& path, int seed) {
  Config config;
  config.Set("seed", std::to_string(seed));
  auto model = InitialModel(config.options().seed, ModelSpec{"lenet5", {1, 28, 28}, 10, {}, ""});
  nlohmann::json j;
  for (const auto& p : model->named_parameters()) {
    const at::Tensor t = p.value().detach().contiguous();
    j[p.key()] = std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  WriteFileAtomic(path, j.dump());
}

// Tolerances of the comparison below. From the same initial parameters on
// the same batches only floating-point rounding could tell the two apart
// (TorchScript's graph executor against LibTorch's modules): here the runs
// are identical to the last digit, and a LibTorch built otherwise (a fuser)
// may move a test image or two of 500 per round. From another
// initialisation, the seed-to-seed spread: the built-in LeNet-5's best
// accuracy on this run over seeds 1-4 is 0.598, 0.588, 0.616, 0.624 (sd
// 0.016), so two draws differ by up to ~3.5 sd of their difference.
constexpr double kSameInitTolerance = 0.004;
constexpr double kOtherInitTolerance = 0.08;

// Clean, IID data on which LeNet-5 reaches ~0.6 in 10 rounds.
const char* kCleanRun =
    "--set data.train_limit=3000 --set data.test_limit=500 --set clients.count=10 "
    "--set partition.kind=iid --set strategy.fraction=0.5 --set train.epochs=2 --set train.lr=0.02 "
    "--set rounds=10 --set seed=1 --set report.progress=false";

// (a) A LeNet-5 written in PyTorch (tests/torchscript_export.h), exported
// and trained here, learns as the built-in LeNet-5 does on the same run.
TEST(ModelFileCliTest, PyTorchLeNetTrainsLikeTheBuiltInOne) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = ClearedPath("cli", "model_file_lenet");
  MakeDirs(dir);
  WriteBuiltInLeNetInit(dir + "/builtin_init.json", 1);
  ASSERT_EQ(testing_support::RunPyTorch(dir, "export_lenet", R"(
net = lenet5()
init = json.load(open(out + '/builtin_init.json'))
state = net.state_dict()
net.load_state_dict({k: torch.tensor(init[k], dtype=torch.float32).reshape(state[k].shape)
                     for k in state})
torch.jit.script(net).save(out + '/lenet_builtin_init.pt')
torch.manual_seed(0)
torch.jit.script(lenet5()).save(out + '/lenet_pytorch_init.pt')
)"),
            0)
      << "needs python3-torch (scripts/install-deps.sh)";
  const std::string run = std::string("simulate ") + kCleanRun;
  ASSERT_EQ(RunCli(run + " --out " + dir + "/builtin").code, 0);
  const CliResult same = RunCli(run + " --set model.file=" + dir + "/lenet_builtin_init.pt --out " + dir + "/same");
  ASSERT_EQ(same.code, 0) << same.output;
  const CliResult own = RunCli(run + " --set model.file=" + dir + "/lenet_pytorch_init.pt --out " + dir + "/own");
  ASSERT_EQ(own.code, 0) << own.output;
  const std::vector<std::string> builtin = Columns(dir + "/builtin/metrics.csv").at("accuracy");
  const std::vector<std::string> scripted = Columns(dir + "/same/metrics.csv").at("accuracy");
  ASSERT_EQ(builtin.size(), 10u);
  ASSERT_EQ(scripted.size(), 10u);
  // From the same initial parameters, on the same batches, the two differ
  // only by floating-point rounding (TorchScript's graph executor against
  // LibTorch's modules), which moves a few of the 500 test images at most.
  for (size_t r = 0; r < builtin.size(); ++r) {
    EXPECT_NEAR(std::stod(scripted[r]), std::stod(builtin[r]), kSameInitTolerance) << "round " << r + 1;
  }
  // From PyTorch's own initialisation (another draw from the same
  // distribution as the built-in's), within seed-to-seed noise.
  const auto best = [&](const std::string& run_dir) {
    return nlohmann::json::parse(ReadFile(run_dir + "/summary.json")).at("best_accuracy").get<double>();
  };
  EXPECT_NEAR(best(dir + "/own"), best(dir + "/builtin"), kOtherInitTolerance);
  EXPECT_GT(best(dir + "/own"), 0.5);  // chance is 0.1
  const auto summary = nlohmann::json::parse(ReadFile(dir + "/same/summary.json"));
  EXPECT_EQ(summary.at("model"), dir + "/lenet_builtin_init.pt");
  EXPECT_EQ(summary.at("model_parameters"), 61706);
}

// A run resumes only with the module it was started with.
TEST(ModelFileCliTest, ResumeNeedsTheSameModule) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = ClearedPath("cli", "model_file_resume");
  MakeDirs(dir);
  ASSERT_EQ(testing_support::RunPyTorch(dir, "export", R"(
torch.manual_seed(0)
torch.jit.script(lenet5()).save(out + '/a.pt')
torch.jit.script(lenet5()).save(out + '/b.pt')
)"),
            0);
  std::filesystem::copy_file(dir + "/a.pt", dir + "/net.pt");
  const CliResult first = RunCli(std::string("simulate ") + kSmallRun + " --set rounds=1 --set model.file=" +
                              dir + "/net.pt --out " + dir + "/run");
  ASSERT_EQ(first.code, 0) << first.output;
  const auto summary = nlohmann::json::parse(ReadFile(dir + "/run/summary.json"));
  EXPECT_EQ(summary.at("model_sha256").get<std::string>().size(), 64u);
  std::filesystem::copy_file(dir + "/b.pt", dir + "/net.pt",
                             std::filesystem::copy_options::overwrite_existing);
  const CliResult changed = RunCli("simulate --resume " + dir + "/run --set rounds=2");
  EXPECT_EQ(changed.code, 1);
  EXPECT_EQ(CountLines(changed.output), 1) << changed.output;
  EXPECT_NE(changed.output.find("was started with " + summary.at("model_sha256").get<std::string>()),
            std::string::npos)
      << changed.output;
  std::filesystem::copy_file(dir + "/a.pt", dir + "/net.pt",
                             std::filesystem::copy_options::overwrite_existing);
  const CliResult resumed = RunCli("simulate --resume " + dir + "/run --set rounds=2");
  EXPECT_EQ(resumed.code, 0) << resumed.output;
}

// Every kind of strategy trains a PyTorch model with batch norm (Net2 in
// tests/torchscript_export.h): FedProf profiles its first dense layer, AFL
// values it by loss, clustered sampling sketches its updates, FedAdam steps
// on its flattened parameters, FedBN keeps its BatchNorm layers local (the
// other selectors never look at the model). A model with a residual
// connection is profiled too; a layer its forward calls twice is refused in
// one line.
TEST(ModelFileCliTest, EveryStrategyTrainsAPyTorchModel) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = ClearedPath("cli", "model_file_strategies");
  MakeDirs(dir);
  ASSERT_EQ(testing_support::RunPyTorch(dir, "export_net2", R"(
torch.manual_seed(0)
torch.jit.script(Net2()).save(out + '/net2.pt')
torch.jit.script(Residual()).save(out + '/residual.pt')
torch.jit.script(Branchy()).save(out + '/branchy.pt')
)"),
            0);
  const CliResult r = RunCli(std::string("compare ") + kFedProfRun + " --set rounds=1 --set model.file=" +
                          dir + "/net2.pt --strategies fedprof,fedadam,afl,fedbn,clustered,"
                          "fedprof+fedbn --out " + dir + "/cmp");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(CountLines(ReadFile(dir + "/cmp/comparison.csv")), 7);
  const auto fedprof = nlohmann::json::parse(ReadFile(dir + "/cmp/fedprof-full/seed-1/summary.json"));
  EXPECT_GT(fedprof.at("profiling_time_per_round_s").get<double>(), 0);
  EXPECT_GT(fedprof.at("best_accuracy").get<double>(), 0.15);

  const std::string residual = std::string(" --set model.file=") + dir + "/residual.pt";
  const CliResult profiled = RunCli(std::string("simulate ") + kFedProfRun + " --set rounds=1" +
                                 residual + " --out " + dir + "/residual_fedprof");
  EXPECT_EQ(profiled.code, 0) << profiled.output;
  const CliResult refused = RunCli(std::string("simulate ") + kFedProfRun + " --set rounds=1" +
                                " --set model.file=" + dir + "/branchy.pt" +
                                " --set model.profile_layer=flatten --out " + dir + "/branchy");
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(CountLines(refused.output), 1) << refused.output;
  EXPECT_NE(refused.output.find("model.profile_layer: 'flatten' cannot be profiled"),
            std::string::npos)
      << refused.output;
  const CliResult unknown = RunCli(std::string("simulate ") + kSmallRun + " --set model.file=" + dir +
                                "/net2.pt --set model.profile_layer=classifier.9 --out " + dir + "/x");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.output.find("expected features|features.0|"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace fedprof
