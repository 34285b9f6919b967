// End-to-end tests of the fedprof command line on real data.
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
#include "tests/test_dirs.h"
#include "tests/torchscript_export.h"

namespace fedprof {
namespace {

using testing_support::ClearedPath;
using testing_support::CliResult;
using testing_support::Columns;
using testing_support::FirstColumns;
using testing_support::RunCli;
using testing_support::Summary;

bool HaveFashionMnist() { return FileExists("/usr/share/datasets/fashion-mnist"); }

// A small but real run: 3000 Fashion-MNIST images among 10 clients.
const char* kSmallRun =
    "--set data.train_limit=3000 --set data.test_limit=500 --set clients.count=10 "
    "--set strategy.fraction=0.4 --set train.epochs=1 --set quality.blurred=0.2 "
    "--set quality.salt_pepper=0.2 --set quality.irrelevant=0.1 --set report.progress=false";

// A CSV file without its last column.
std::string WithoutLastColumn(const std::string& path) {
  std::istringstream in(ReadFile(path));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

// metrics.csv without wall_s, the one column that is not reproducible.
std::string MetricsWithoutWall(const std::string& dir) { return WithoutLastColumn(dir + "/metrics.csv"); }

int CountLines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(CliTest, HelpListsTheSubcommands) {
  const CliResult r = RunCli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("simulate"), std::string::npos) << r.output;
  const CliResult sim = RunCli("simulate --help");
  EXPECT_NE(sim.output.find("--resume"), std::string::npos) << sim.output;
}

// docs/options.md is the table with the resumable options above it
// (scripts/docs.py, which ctest's docs.commands runs, checks the whole page).
TEST(CliTest, OptionsDocIsGeneratedFromTheTable) {
  const CliResult r = RunCli("options");
  ASSERT_EQ(r.code, 0);
  const std::string doc = ReadFile(std::string(FEDPROF_SOURCE_DIR) + "/docs/options.md");
  EXPECT_TRUE(doc.size() >= r.output.size() &&
              doc.compare(doc.size() - r.output.size(), r.output.size(), r.output) == 0)
      << "regenerate with: make docs";
  const CliResult names = RunCli("options --names");
  ASSERT_EQ(names.code, 0);
  EXPECT_EQ(CountLines(names.output), CountLines(r.output) - 2);  // less the header rows
  const CliResult resumable = RunCli("options --resumable");
  ASSERT_EQ(resumable.code, 0);
  EXPECT_EQ(resumable.output, ResumableOptionsList() + "\n");
}

// The flags of every command, from the parser, for scripts/docs.py.
TEST(CliTest, HelpFlagsListsEveryCommandWithItsFlags) {
  const CliResult r = RunCli("help --flags");
  ASSERT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("fedprof --help -h --version\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nfedprof simulate --help -h --config= --set=... --out= --resume="),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nfedprof privacy label "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" <target>\n"), std::string::npos) << r.output;
}

// Federated evaluation on the simulated clients' data: every 2 rounds and the
// last, half of them; it changes no bit of training, and a resumed run keeps
// the evaluations up to its checkpoint.
TEST(CliTest, FederatedEvaluationReportsAndChangesNoTraining) {
  const std::string dir = ClearedPath("cli", "federated");
  const std::string run = std::string("simulate ") + kSmallRun + " --set rounds=3";
  const std::string fed = " --set eval.federated_every=2 --set eval.federated_fraction=0.5";
  ASSERT_EQ(RunCli(run + " --out " + dir + "/plain").code, 0);
  const CliResult r = RunCli(run + fed + " --out " + dir + "/fed");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(Summary(dir + "/fed").at("final_model_sha256"),
            Summary(dir + "/plain").at("final_model_sha256"));
  const auto m = Columns(dir + "/fed/metrics.csv");
  ASSERT_EQ(m.at("fed_clients").size(), 3u);
  EXPECT_EQ(m.at("fed_clients")[0], "");  // round 1: none
  EXPECT_EQ(m.at("fed_clients")[1], "5");
  EXPECT_EQ(m.at("fed_clients")[2], "5");  // the last round
  EXPECT_FALSE(m.at("fed_accuracy")[2].empty());
  EXPECT_EQ(Columns(dir + "/fed/evaluation.csv").at("round").size(), 10u);
  EXPECT_EQ(Columns(dir + "/plain/metrics.csv").count("fed_accuracy"), 0u);
  // Stopped after round 2 and resumed: the same evaluations, in order.
  ASSERT_EQ(RunCli(std::string("simulate ") + kSmallRun + " --set rounds=2" + fed + " --out " + dir +
                   "/resumed")
                .code,
            0);
  ASSERT_EQ(RunCli("simulate --resume " + dir + "/resumed --set rounds=3").code, 0);
  EXPECT_EQ(ReadFile(dir + "/resumed/evaluation.csv"), ReadFile(dir + "/fed/evaluation.csv"));
}

TEST(CliTest, PrivacyLabelPrintsThePapersCheckValue) {
  CliResult r = RunCli("privacy label --classes 10 --samples-per-client 8");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("|B| = 24310"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("H(B|P_uni)  = 13.860 bits"), std::string::npos) << r.output;
  r = RunCli("privacy label --classes 10 --samples-per-client 8 --clients 100 --json");
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_LE(j.at("h_query_bits").get<double>(), std::log2(100.0) + 1e-9);
  EXPECT_NEAR(j.at("leakage_t_bits").get<double>(),
              j.at("h_uniform_bits").get<double>() - j.at("h_query_bits").get<double>(), 1e-12);
  r = RunCli("privacy label --classes 3 --distribution 0.5,0.5");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
}

TEST(CliTest, PrivacyDpPrintsEpsilon) {
  const CliResult r =
      RunCli("privacy dp --noise-multiplier 1 --sample-rate 1 --steps 1 --delta 1e-5");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("epsilon = "), std::string::npos) << r.output;
  const CliResult bad = RunCli("privacy dp --noise-multiplier 1 --sample-rate 2 --steps 1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("--sample-rate"), std::string::npos) << bad.output;
}

TEST(CliTest, PayloadReproducesTableIII) {
  const CliResult r = RunCli("payload --model vgg16 --input 3x224x224 --cut fc2");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("153144650 parameters"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| FL | 656250 | 153144650 | 4.901 Gb | 3216 Tb |"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("| FTL_c | 525000 | 35665418 | 1.141 Gb |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| FbFTL | 50000 | 4096 | 131.1 Kb | 6.554 Gb | 3.759 Gb |"),
            std::string::npos)
      << r.output;
  // Any transfer architecture or model file, traced stage by stage.
  const CliResult small = RunCli("payload --model vgg_small --input 1x28x28 --cut fc2 --clients 500");
  ASSERT_EQ(small.code, 0) << small.output;
  EXPECT_NE(small.output.find("2249162 parameters"), std::string::npos) << small.output;
  EXPECT_NE(small.output.find("| FTL_c | 42000 | 1842698 |"), std::string::npos) << small.output;
  const CliResult unknown = RunCli("payload --model vgg99");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.output.find("--model: 'vgg99'"), std::string::npos) << unknown.output;
  const CliResult bad = RunCli("payload --cut fc9");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("--cut"), std::string::npos) << bad.output;
}

// Pretrain a source on Fashion-MNIST, transfer it to MNIST with all five
// schemes, and read the Table III-like outputs.
TEST(CliTest, PretrainThenTransferWritesTheSchemeTable) {
  ASSERT_TRUE(HaveFashionMnist());
  const std::string dir = ClearedPath("cli", "fbftl");
  MakeDirs(dir);
  const std::string source = dir + "/source.pt";
  const CliResult pre = RunCli("pretrain --set data.train_limit=1000 --set data.test_limit=200 "
                            "--set pretrain.epochs=1 --out " + source);
  ASSERT_EQ(pre.code, 0) << pre.output;
  EXPECT_NE(pre.output.find("written to " + source), std::string::npos) << pre.output;
  const CliResult run = RunCli(
      "fbftl --set data.name=mnist --set data.dir=" FEDPROF_SOURCE_DIR "/data/mnist "
      "--set data.test_limit=200 --set transfer.source_model=" + source +
      " --set transfer.clients=16 --set transfer.fraction=0.25 --set transfer.epochs=1 "
      "--set transfer.head_epochs=2 --out " + dir + "/run");
  ASSERT_EQ(run.code, 0) << run.output;
  const std::string table = ReadFile(dir + "/run/schemes.md");
  for (const char* scheme : {"| FL |", "| FTL_f |", "| FTL_c |", "| SFL |", "| FbFTL |"}) {
    EXPECT_NE(table.find(scheme), std::string::npos) << scheme << "\n" << table;
  }
  EXPECT_EQ(CountLines(ReadFile(dir + "/run/schemes.csv")), 6);
  EXPECT_TRUE(FileExists(dir + "/run/uplink.png"));
  // A missing source model is one line naming it.
  const CliResult missing = RunCli("fbftl --set transfer.source_model=" + dir + "/none.pt --out " + dir + "/x");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(CountLines(missing.output), 1) << missing.output;
  EXPECT_NE(missing.output.find("none.pt: no such model file"), std::string::npos) << missing.output;
}

TEST(CliTest, UnknownKeyIsOneLineNamingTheNearestKey) {
  const CliResult r = RunCli("simulate --set train.lrr=0.1");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("did you mean 'train.lr'"), std::string::npos) << r.output;
  const CliResult range = RunCli("simulate --set strategy.fraction=2");
  EXPECT_EQ(range.code, 1);
  EXPECT_NE(range.output.find("strategy.fraction"), std::string::npos) << range.output;
}

TEST(CliTest, CorruptDataFileEndsTheRunWithOneLine) {
  const std::string dir = ClearedPath("cli", "corrupt");
  MakeDirs(dir);
  // Valid label file header, image file with a bad magic number.
  WriteFileAtomic(dir + "/train-images-idx3-ubyte", std::string("\x00\x00\x08\x04", 4) + std::string(64, '\0'));
  WriteFileAtomic(dir + "/train-labels-idx1-ubyte", std::string("\x00\x00\x08\x01\x00\x00\x00\x01\x03", 9));
  const CliResult r = RunCli("simulate --set data.name=mnist --set data.dir=" + dir + " --out " + dir + "/out");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("train-images-idx3-ubyte"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("magic"), std::string::npos) << r.output;
  // The run never finished a round: status offers no resume (there is no
  // checkpoint) but the command that starts it again, which runs (and meets
  // the same bad file).
  const CliResult status = RunCli("status " + dir + "/out");
  ASSERT_EQ(status.code, 0) << status.output;
  EXPECT_NE(status.output.find(": not started, round 0"), std::string::npos) << status.output;
  EXPECT_EQ(status.output.find("--resume"), std::string::npos) << status.output;
  const std::string again = "simulate --config " + dir + "/out/config.toml --out " + dir + "/out";
  EXPECT_NE(status.output.find("start again: fedprof " + again + " "), std::string::npos) << status.output;
  const CliResult rerun = RunCli(again);
  EXPECT_EQ(rerun.code, 1);
  EXPECT_NE(rerun.output.find("magic"), std::string::npos) << rerun.output;
}

TEST(CliTest, WritesTheDocumentedOutputs) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string out = ClearedPath("cli", "outputs");
  const CliResult r = RunCli(std::string("simulate ") + kSmallRun +
                          " --set rounds=2 --set model.name=cnn --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("outputs in " + out), std::string::npos);
  const std::string metrics = ReadFile(out + "/metrics.csv");
  EXPECT_EQ(CountLines(metrics), 3);  // header + 2 rounds
  const std::string clients = ReadFile(out + "/clients.csv");
  EXPECT_EQ(CountLines(clients), 11);
  EXPECT_NE(clients.find(",blurred,"), std::string::npos);
  EXPECT_NE(clients.find(",salt_pepper,"), std::string::npos);
  EXPECT_NE(clients.find(",irrelevant,"), std::string::npos);
  const auto summary = nlohmann::json::parse(ReadFile(out + "/summary.json"));
  EXPECT_EQ(summary.at("rounds"), 2);
  EXPECT_GT(summary.at("best_accuracy").get<double>(), 0.15);  // chance is 0.1
  EXPECT_EQ(summary.at("selection_by_kind").at("blurred").at("clients"), 2);
  EXPECT_NE(ReadFile(out + "/config.toml").find("train_limit = 3000"), std::string::npos);

  // A new run into the folder is refused in one line, changing nothing...
  const std::string before = ReadFile(out + "/summary.json") + ReadFile(out + "/config.toml");
  const std::string again = std::string("simulate ") + kSmallRun +
                            " --set rounds=1 --set strategy.name=fedprof --set data.holdout_share=0.05";
  const CliResult refused = RunCli(again + " --out " + out);
  EXPECT_EQ(refused.code, 1);
  EXPECT_EQ(CountLines(refused.output), 1) << refused.output;
  EXPECT_NE(refused.output.find(out + ": holds a run already"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--overwrite"), std::string::npos) << refused.output;
  EXPECT_EQ(ReadFile(out + "/summary.json") + ReadFile(out + "/config.toml"), before);
  // ... and replaces it with --overwrite: the new run's outputs only.
  ASSERT_EQ(RunCli(again + " --overwrite --out " + out).code, 0);
  EXPECT_EQ(CountLines(ReadFile(out + "/metrics.csv")), 2);
  EXPECT_EQ(nlohmann::json::parse(ReadFile(out + "/summary.json")).at("strategy"), "fedprof");
  ASSERT_EQ(RunCli(again + " --set report.per_client_limit=0 --overwrite --out " + out).code, 0);
  EXPECT_FALSE(FileExists(out + "/scores.csv"));  // the earlier FedProf run's, not this one's
}

TEST(CliTest, OneAndTwoThreadsGiveIdenticalMetrics) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string a = ClearedPath("cli", "threads1"), b = ClearedPath("cli", "threads2");
  const std::string run = std::string("simulate ") + kSmallRun + " --set rounds=3 --set model.name=cnn";
  ASSERT_EQ(RunCli(run + " --set threads=1 --out " + a).code, 0);
  ASSERT_EQ(RunCli(run + " --set threads=2 --out " + b).code, 0);
  EXPECT_EQ(MetricsWithoutWall(a), MetricsWithoutWall(b));
  EXPECT_EQ(ReadFile(a + "/clients.csv"), ReadFile(b + "/clients.csv"));
}

// Runs `fedprof <arguments>` and SIGKILLs it once round `round` of `out` is
// checkpointed; fails when the run ended first.
void KillOnceCheckpointed(const std::string& arguments, const std::string& out, int64_t round) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = std::string("exec ") + FEDPROF_CLI + " " + arguments + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  testing_support::WaitForCheckpoint(out, round, 120);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run ended before it could be killed";
}

TEST(CliTest, KilledRunResumesToTheSameMetrics) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string whole = ClearedPath("cli", "whole"), killed = ClearedPath("cli", "killed");
  const std::string run = std::string("simulate ") + kSmallRun + " --set rounds=8";
  ASSERT_EQ(RunCli(run + " --out " + whole).code, 0);

  // Start the same run, SIGKILL it once round 2 is checkpointed.
  KillOnceCheckpointed(run + " --out " + killed, killed, 2);
  if (HasFatalFailure()) return;
  const int64_t killed_at =
      DecodeCheckpoint(ReadFile(killed + "/checkpoint.bin"), "ckpt").state.round;
  ASSERT_LT(killed_at, 8);

  const CliResult resumed = RunCli("simulate --resume " + killed);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(MetricsWithoutWall(whole), MetricsWithoutWall(killed));
  EXPECT_EQ(ReadFile(whole + "/clients.csv"), ReadFile(killed + "/clients.csv"));
  const CliResult bad = RunCli("simulate --resume " + killed + " --set train.lr=0.5");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("cannot change on --resume"), std::string::npos) << bad.output;

  // Corrupted or foreign state is refused with one line, and a refused
  // resume leaves the run's files as they were.
  const std::string checkpoint = killed + "/checkpoint.bin";
  const std::string config = ReadFile(killed + "/config.toml");
  const std::string good = ReadFile(checkpoint);
  auto refused = [&](const std::string& what) {
    const CliResult r = RunCli("simulate --resume " + killed);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(ReadFile(killed + "/config.toml"), config);
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  WriteFileAtomic(checkpoint, flipped);
  refused("checksum mismatch");
  WriteFileAtomic(checkpoint, good.substr(0, good.size() - 100));
  refused("checksum mismatch");
  std::string old_format = good;
  old_format.replace(0, std::string("FEDPROF-CHECKPOINT 2").size(), "FEDPROF-CHECKPOINT 1");
  WriteFileAtomic(checkpoint, old_format);
  refused("checkpoint format 1 is from an older FedProf");
  WriteFileAtomic(checkpoint, good);
  // The checkpoint of another config: config.toml edited by hand.
  const std::string edited = std::regex_replace(config, std::regex("\nlr = [^\n]*"), "\nlr = 0.5");
  ASSERT_NE(edited, config);
  WriteFileAtomic(killed + "/config.toml", edited);
  const CliResult foreign = RunCli("simulate --resume " + killed);
  EXPECT_EQ(foreign.code, 1);
  EXPECT_NE(foreign.output.find("written by a run of another config"), std::string::npos)
      << foreign.output;
  EXPECT_EQ(ReadFile(checkpoint), good);
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

const char* kFedProfRun =
    "--set data.train_limit=4000 --set data.test_limit=500 --set clients.count=20 "
    "--set strategy.fraction=0.25 --set train.epochs=1 --set quality.blurred=0.25 "
    "--set quality.salt_pepper=0.25 --set quality.irrelevant=0.15 --set quality.irrelevant_source=mnist "
    "--set strategy.name=fedprof --set data.holdout_share=0.1 --set report.progress=false";

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
    // FedBN needs batch-norm layers; LeNet-5 keeps the others quick.
    const std::string run = std::string("simulate ") + kFedProfRun + " --set strategy.name=" +
                            strategy + (strategy == "fedbn" ? " --set model.name=cnn" : "");
    const std::string whole = ClearedPath("cli", strategy + "_whole");
    const std::string parts = ClearedPath("cli", strategy + "_parts");
    ASSERT_EQ(RunCli(run + " --set rounds=3 --out " + whole).code, 0) << strategy;
    ASSERT_EQ(RunCli(run + " --set rounds=1 --out " + parts).code, 0) << strategy;
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

// Runs `run` (a simulate command) with 1 and with 2 threads, and once more
// killed after its second checkpoint and resumed: the three give the same
// metrics and final model. Returns the 1-thread run's folder (cli/NAME_1).
std::string ExpectSameWithAnyThreadsAndAcrossAKill(const std::string& run, const std::string& name) {
  const std::string one = ClearedPath("cli", name + "_1"), two = ClearedPath("cli", name + "_2");
  const std::string killed = ClearedPath("cli", name + "_killed");
  EXPECT_EQ(RunCli(run + " --set threads=1 --out " + one).code, 0);
  EXPECT_EQ(RunCli(run + " --set threads=2 --out " + two).code, 0);
  EXPECT_EQ(MetricsWithoutWall(one), MetricsWithoutWall(two));
  EXPECT_EQ(Summary(one).at("final_model_sha256"), Summary(two).at("final_model_sha256"));
  KillOnceCheckpointed(run + " --out " + killed, killed, 2);
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
  const std::string run = std::string("simulate ") + kSmallRun +
                          " --set dp.mode=central --set dp.noise_multiplier=0.7 --set dp.clipping=adaptive "
                          "--set dp.clip_norm=0.5 --set dp.count_noise=1 --set rounds=6";
  const std::string one = ExpectSameWithAnyThreadsAndAcrossAKill(run, "dp");
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
  const std::string run = std::string("simulate ") + kSmallRun + " " + settings;
  const std::string one = ExpectSameWithAnyThreadsAndAcrossAKill(run, "ddp");
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
      "--set rounds=3";
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
                          " --set rounds=20 --set model.profile_layer=conv2";
  const std::string plain = ClearedPath("cli", "plain_matching");
  const std::string secure = ClearedPath("cli", "secure_matching");
  ASSERT_EQ(RunCli(run + " --out " + plain).code, 0);
  const CliResult r = RunCli(run + " --set fedprof.secure_matching=paillier --out " + secure);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(FirstColumns(plain + "/clients.csv", 5), FirstColumns(secure + "/clients.csv", 5));
  // times_selected, the last column, holds the selections of all 20 rounds.
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
                          " --set rounds=1 --set model.name=cnn --strategies " + strategies +
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

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

// y = 2 x1 - x2 + 0.5 x3 + small noise, as CSV with a header.
std::string RegressionCsv(int rows, uint64_t seed) {
  Rng rng = MakeRng(seed, Stream::kNoise);
  std::string csv = "x1,x2,x3,y\n";
  for (int i = 0; i < rows; ++i) {
    const double x1 = StandardNormal(rng), x2 = StandardNormal(rng), x3 = StandardNormal(rng);
    const double y = 2 * x1 - x2 + 0.5 * x3 + 0.1 * StandardNormal(rng);
    csv += FormatDouble(x1) + "," + FormatDouble(x2) + "," + FormatDouble(x3) + "," +
           FormatDouble(y) + "\n";
  }
  return csv;
}

TEST(CliTest, TabularRegressionWithPollutedAndNoisyClients) {
  const std::string dir = ClearedPath("cli", "csv");
  MakeDirs(dir);
  WriteFileAtomic(dir + "/train.csv", RegressionCsv(2000, 1));
  WriteFileAtomic(dir + "/test.csv", RegressionCsv(400, 2));
  const std::string run =
      "simulate --set data.name=csv --set data.train_file=" + dir + "/train.csv" +
      " --set data.test_file=" + dir + "/test.csv --set data.targets=y --set data.task=regression"
      " --set model.name=mlp --set model.hidden=16 --set partition.kind=iid"
      " --set partition.size_mean=150 --set partition.size_sd=30 --set clients.count=10"
      " --set quality.polluted=0.2 --set quality.gaussian_noise=0.2 --set strategy.fraction=0.5"
      " --set strategy.aggregation=partial --set train.epochs=2 --set train.batch_size=8"
      " --set rounds=5 --set report.progress=false --out " + dir + "/out";
  const CliResult r = RunCli(run);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string metrics = ReadFile(dir + "/out/metrics.csv");
  EXPECT_NE(metrics.find(",accuracy,loss,rmse,"), std::string::npos) << metrics;
  const auto summary = nlohmann::json::parse(ReadFile(dir + "/out/summary.json"));
  EXPECT_GT(summary.at("best_accuracy").get<double>(), 0.8);  // R^2
  // `loss` is the mean squared error, `rmse` its square root, as outputs.md says.
  const std::vector<std::string> rows = Split(metrics, '\n');
  const std::vector<std::string> header = Split(rows.front(), ',');
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const std::vector<std::string> final_row = Split(rows[rows.size() - 2], ',');
  const double loss = std::stod(final_row.at(column("loss"))), rmse = std::stod(final_row.at(column("rmse")));
  EXPECT_NEAR(rmse, std::sqrt(loss), 1e-4 * rmse) << metrics;
  EXPECT_NEAR(summary.at("final_rmse").get<double>(), rmse, 1e-8 * rmse);
  EXPECT_NEAR(summary.at("final_loss").get<double>(), loss, 1e-8 * loss);
  EXPECT_GE(summary.at("final_rmse").get<double>(), summary.at("best_rmse").get<double>());
  // The test file's columns are taken by name: in another order they give
  // the same numbers; under another name they are refused, naming both.
  std::string reordered = "y,x3,x1,x2\n";
  for (const std::string& line : Split(RegressionCsv(400, 2), '\n')) {
    const std::vector<std::string> c = Split(line, ',');
    if (c.size() == 4 && c[0] != "x1") reordered += c[3] + "," + c[2] + "," + c[0] + "," + c[1] + "\n";
  }
  WriteFileAtomic(dir + "/reordered.csv", reordered);
  const std::string with_reordered = std::regex_replace(run, std::regex("/test.csv"), "/reordered.csv");
  ASSERT_EQ(RunCli(std::regex_replace(with_reordered, std::regex("/out$"), "/reordered_out")).code, 0);
  EXPECT_EQ(MetricsWithoutWall(dir + "/reordered_out"), MetricsWithoutWall(dir + "/out"));
  WriteFileAtomic(dir + "/renamed.csv", std::regex_replace(RegressionCsv(400, 2), std::regex("^x1,x2,"), "x1,x9,"));
  const std::string with_renamed = std::regex_replace(run, std::regex("/test.csv"), "/renamed.csv");
  const CliResult renamed = RunCli(std::regex_replace(with_renamed, std::regex("/out$"), "/renamed_out"));
  EXPECT_EQ(renamed.code, 1);
  EXPECT_EQ(CountLines(renamed.output), 1) << renamed.output;
  EXPECT_NE(renamed.output.find("renamed.csv: feature columns x1, x9, x3; the training file's are x1, x2, x3"),
            std::string::npos)
      << renamed.output;
  const std::string clients = ReadFile(dir + "/out/clients.csv");
  EXPECT_NE(clients.find(",polluted,"), std::string::npos);
  EXPECT_NE(clients.find(",gaussian_noise,"), std::string::npos);
  // A non-numeric cell ends the run with one line naming file, line and column.
  WriteFileAtomic(dir + "/bad.csv", "x1,x2,x3,y\n1,2,3,4\n1,oops,3,4\n");
  const CliResult bad = RunCli("simulate --set data.name=csv --set data.train_file=" + dir +
                            "/bad.csv --set data.test_file=" + dir +
                            "/test.csv --set data.targets=y --set data.task=regression"
                            " --set model.name=mlp --set partition.kind=iid --out " + dir + "/bad");
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(CountLines(bad.output), 1) << bad.output;
  EXPECT_NE(bad.output.find("bad.csv"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("line 3"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

// CIFAR-10 binary records (label byte + 3072 pixel bytes) with a class signal:
// class c brightens channel c % 3.
std::string CifarRecords(int n, uint64_t seed) {
  Rng rng = MakeRng(seed, Stream::kNoise);
  std::string out;
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(UniformIndex(rng, 10));
    out += static_cast<char>(label);
    for (int c = 0; c < 3; ++c) {
      for (int p = 0; p < 1024; ++p) {
        const int base = c == label % 3 ? 160 : 60;
        out += static_cast<char>(base + static_cast<int>(UniformIndex(rng, 64)));
      }
    }
  }
  return out;
}

// The CIFAR-10 task's path end to end (binary format, ShuffleNet v2, its cost
// model and FedProf) on small generated files, since no CIFAR-10 copy can be
// downloaded here; configs/cifar10.toml runs it on the real data.
TEST(CliTest, CifarSetupRunsOnCifarBinaryFiles) {
  const std::string dir = ClearedPath("cli", "cifar");
  MakeDirs(dir);
  for (int b = 1; b <= 5; ++b) {
    WriteFileAtomic(dir + "/data_batch_" + std::to_string(b) + ".bin", CifarRecords(60, b));
  }
  WriteFileAtomic(dir + "/test_batch.bin", CifarRecords(50, 9));
  const CliResult r = RunCli("compare --config " + std::string(FEDPROF_SOURCE_DIR) +
                          "/configs/cifar10.toml --set data.dir=" + dir +
                          " --set rounds=1 --set train.epochs=1 --set model.width=0.5"
                          " --set report.progress=false --strategies fedavg-rp,fedprof:partial"
                          " --out " + dir + "/out");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto summary =
      nlohmann::json::parse(ReadFile(dir + "/out/fedprof-partial/seed-1/summary.json"));
  EXPECT_EQ(summary.at("model"), "shufflenet_v2");
  EXPECT_EQ(summary.at("clients"), 10);
  EXPECT_GT(summary.at("profiling_time_per_round_s").get<double>(), 0);
}

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

// --version names the project, LibTorch, the commit of the sources the build
// is of, and the executable's own SHA-256: what shows that two machines run
// the same build.
TEST(CliTest, VersionNamesTheProjectLibTorchTheCommitAndTheBuild) {
  const CliResult r = RunCli("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("fedprof " FEDPROF_VERSION " (LibTorch 1.", 0), 0u) << r.output;
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  std::string head;
  if (FILE* git = ::popen("git -C " FEDPROF_SOURCE_DIR " rev-parse --short=12 HEAD 2>/dev/null", "r")) {
    char line[64] = {0};
    if (std::fgets(line, sizeof(line), git) != nullptr) head = Split(line, '\n').front();
    ::pclose(git);
  }
  if (!head.empty()) {
    EXPECT_NE(r.output.find("; commit " + head), std::string::npos) << r.output;
  }
  EXPECT_NE(r.output.find("; executable SHA-256 " + FileSha256Hex(testing_support::kCli) + ")"), std::string::npos)
      << r.output;
}

// reproducibility.md's runs that agree across kinds of CPU: the kernels
// pinned in the environment reach OpenBLAS (through the binary's start,
// which sets its threads), and two pinned runs train one model.
TEST(CliTest, PinnedKernelsReachOpenBlasAndRepeat) {
  std::string said;
  if (FILE* p = ::popen("OPENBLAS_VERBOSE=2 OPENBLAS_CORETYPE=Haswell " FEDPROF_CLI " --version 2>&1", "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) said.append(buf, n);
    ::pclose(p);
  }
  EXPECT_NE(said.find("Core: Haswell"), std::string::npos) << said;
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string a = ClearedPath("cli", "pinned_a"), b = ClearedPath("cli", "pinned_b");
  const std::string run = "env OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 " FEDPROF_CLI " simulate " +
                          std::string(kSmallRun) + " --set rounds=2 --out ";
  ASSERT_EQ(std::system((run + a + " > /dev/null 2>&1").c_str()), 0);
  ASSERT_EQ(std::system((run + b + " > /dev/null 2>&1").c_str()), 0);
  EXPECT_EQ(Summary(a).at("final_model_sha256"), Summary(b).at("final_model_sha256"));
}

TEST(CliTest, PrivacyDpWithoutStepsIsNoLoss) {
  const CliResult r = RunCli("privacy dp --noise-multiplier 1.1 --sample-rate 0.01 --steps 0");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("epsilon = 0 at delta = 1e-06 (no release, 0 steps"), std::string::npos)
      << r.output;
  const CliResult one = RunCli("privacy dp --noise-multiplier 1.1 --sample-rate 0.01 --steps 1");
  EXPECT_EQ(one.output.find("epsilon = 0 "), std::string::npos) << one.output;
}

// The noise multiplier `privacy dp --epsilon` prints, to its 4 decimals, is
// one that meets the target: it rounds up, never to the nearest.
TEST(CliTest, PrivacyDpPrintsANoiseMultiplierThatMeetsTheTarget) {
  const std::regex printed("noise multiplier = ([0-9.]+): epsilon = ([0-9.e+-]+) ");
  for (const char* target : {"0.9", "1.7", "2.3", "4.1", "7.9"}) {
    const std::string of = std::string(" --sample-rate 0.03 --steps 300 --delta 1e-5");
    const CliResult r = RunCli(std::string("privacy dp --epsilon ") + target + of);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, printed)) << r.output;
    EXPECT_LE(std::stod(m[2]), std::stod(target)) << r.output;
    const CliResult again = RunCli("privacy dp --noise-multiplier " + m[1].str() + of);
    std::smatch e;
    const std::regex epsilon("^epsilon = ([0-9.e+-]+) ");
    ASSERT_TRUE(std::regex_search(again.output, e, epsilon)) << again.output;
    EXPECT_LE(std::stod(e[1]), std::stod(target)) << "z = " << m[1] << ": " << again.output;
  }
}

// One column of a metrics.csv, by name.
std::vector<std::string> Column(const std::string& dir, const std::string& name) {
  std::istringstream in(ReadFile(dir + "/metrics.csv"));
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> names = Split(line, ',');
  const size_t at = std::find(names.begin(), names.end(), name) - names.begin();
  std::vector<std::string> cells;
  while (std::getline(in, line)) cells.push_back(Split(line, ',').at(at));
  return cells;
}

// Strategies composed from a selector and an aggregator: the same
// composition reached from a preset or spelled out gives the same run, bit
// for bit; FedProf's selection with FedAdam's aggregation runs end to end
// and resumes exactly.
TEST(FedProfCliTest, ComposedStrategiesRunAndEqualTheirPresets) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string out = ClearedPath("cli", "composed");
  const CliResult r = RunCli(std::string("compare ") + kFedProfRun +
                          " --set rounds=2 --strategies fedprof,fedprof+average,fedprof+fedadam,"
                          "uniform+fedadam --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string preset = out + "/fedprof-full/seed-1", spelled = out + "/fedprof+average-full/seed-1",
                    adam = out + "/fedprof+fedadam-full/seed-1", fedadam = out + "/uniform+fedadam-full/seed-1";
  EXPECT_EQ(MetricsWithoutWall(preset), MetricsWithoutWall(spelled));
  EXPECT_EQ(ReadFile(preset + "/scores.csv"), ReadFile(spelled + "/scores.csv"));
  // FedProf+FedAdam: FedProf's scores, FedAdam's server step.
  EXPECT_TRUE(FileExists(adam + "/scores.csv"));
  EXPECT_EQ(FirstColumns(adam + "/scores.csv", 3), FirstColumns(preset + "/scores.csv", 3))
      << "the first round's selection is the same";
  EXPECT_NE(Column(adam, "loss"), Column(preset, "loss"));
  EXPECT_NE(Column(adam, "loss"), Column(fedadam, "loss"));
  const auto summary = nlohmann::json::parse(ReadFile(adam + "/summary.json"));
  EXPECT_EQ(summary.at("selector"), "fedprof");
  EXPECT_EQ(summary.at("aggregator"), "fedadam");
  // The same composition through the options: a preset plus an override.
  const std::string via = ClearedPath("cli", "composed_via_options");
  ASSERT_EQ(RunCli(std::string("simulate ") + kFedProfRun +
                   " --set rounds=2 --set strategy.name=fedadam --set strategy.selector=fedprof --out " + via)
                .code,
            0);
  EXPECT_EQ(MetricsWithoutWall(via), MetricsWithoutWall(adam));
  // Resumed after round 1, it ends as the uninterrupted run.
  const std::string parts = ClearedPath("cli", "composed_parts");
  ASSERT_EQ(RunCli(std::string("simulate ") + kFedProfRun +
                   " --set rounds=1 --set strategy.aggregator=fedadam --out " + parts)
                .code,
            0);
  const CliResult resumed = RunCli("simulate --resume " + parts + " --set rounds=2");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(MetricsWithoutWall(parts), MetricsWithoutWall(adam));
  EXPECT_EQ(ReadFile(parts + "/scores.csv"), ReadFile(adam + "/scores.csv"));
}

TEST(FedProfCliTest, CompositionsThatCannotWorkAreRefused) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = ClearedPath("cli", "refused_compositions");
  CliResult r = RunCli(std::string("simulate ") + kSmallRun + " --set strategy.name=fedbn --out " + dir + "/a");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("model lenet5 has none; use a model with batch norm"), std::string::npos)
      << r.output;
  r = RunCli(std::string("simulate ") + kSmallRun + " --set strategy.aggregator=fedbn --out " + dir + "/b");
  EXPECT_NE(r.output.find("(strategy.aggregator = fedbn)"), std::string::npos) << r.output;
  r = RunCli("simulate --set strategy.selector=fedprox --out " + dir + "/c");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("'fedprox' is not one of uniform|size|fedprof|afl|cfcfm|clustered|oort"),
            std::string::npos)
      << r.output;
  r = RunCli("compare --strategies fedavg,uniform+average --out " + dir + "/d");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("uniform+average is fedavg-full again"), std::string::npos) << r.output;
  EXPECT_FALSE(FileExists(dir + "/d/fedavg-full"));
  r = RunCli("compare --strategies fedprof+geomedian --out " + dir + "/e");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("'geomedian' is not one of "
                          "average|fedadam|fedbn|fedbuff|median|trimmed_mean|krum|multi_krum"),
            std::string::npos)
      << r.output;
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
  const std::vector<std::string> builtin = Column(dir + "/builtin", "accuracy");
  const std::vector<std::string> scripted = Column(dir + "/same", "accuracy");
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
