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
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
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
using testing_support::CountLines;
using testing_support::HaveFashionMnist;
using testing_support::kFedProfRun;
using testing_support::kSmallRun;
using testing_support::KillOnceCheckpointed;
using testing_support::MetricsWithoutWall;
using testing_support::RunCli;
using testing_support::Summary;

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
  EXPECT_NE(ReadFile(out + "/config.toml").find("train_limit = 1000"), std::string::npos);

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

// Tensor ops stay on one thread (core/single_threaded_ops.h): started
// without OMP_NUM_THREADS, the tool re-executes itself with it before any
// library's initialiser has run, so LibTorch is loaded twice and
// initialised once (the loader's own trace says so); started with it, it
// loads once. Either way the command runs.
TEST(CliTest, WithoutOmpNumThreadsTheToolRestartsBeforeAnyLibraryStarts) {
  const auto trace = [](const std::string& environment) {
    std::string said;
    const std::string cmd = "env " + environment + " LD_DEBUG=libs " FEDPROF_CLI " --version 2>&1";
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) said.append(buf, n);
      ::pclose(p);
    }
    return said;
  };
  const auto count = [](const std::string& text, const std::regex& line) {
    return std::distance(std::sregex_iterator(text.begin(), text.end(), line), std::sregex_iterator());
  };
  const std::regex found("find library=libtorch_cpu\\.so"), started("calling init: \\S*libtorch_cpu\\.so");
  const std::string unset = trace("-u OMP_NUM_THREADS"), set = trace("OMP_NUM_THREADS=1");
  EXPECT_EQ(count(unset, found), 2) << unset.substr(0, 2000);
  EXPECT_EQ(count(unset, started), 1);
  EXPECT_EQ(count(set, found), 1) << set.substr(0, 2000);
  EXPECT_EQ(count(set, started), 1);
  for (const std::string* said : {&unset, &set}) {
    EXPECT_NE(said->find("fedprof " FEDPROF_VERSION " (LibTorch "), std::string::npos);
  }
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
  EXPECT_NE(Columns(adam + "/metrics.csv").at("loss"), Columns(preset + "/metrics.csv").at("loss"));
  EXPECT_NE(Columns(adam + "/metrics.csv").at("loss"), Columns(fedadam + "/metrics.csv").at("loss"));
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

}  // namespace
}  // namespace fedprof

namespace fedprof {
namespace {

using testing_support::ClearedPath;
using testing_support::CliResult;
using testing_support::Columns;
using testing_support::CountLines;
using testing_support::HaveFashionMnist;
using testing_support::RunCli;
using testing_support::Summary;

// The label counts of clients.csv's label_* columns, a row per client.
std::vector<std::vector<int64_t>> LabelColumns(const std::string& path) {
  const auto cols = Columns(path);
  std::vector<std::vector<int64_t>> rows(cols.at("id").size());
  for (int c = 0; cols.count("label_" + std::to_string(c)); ++c) {
    const auto& column = cols.at("label_" + std::to_string(c));
    for (size_t k = 0; k < rows.size(); ++k) rows[k].push_back(std::stoll(column.at(k)));
  }
  return rows;
}

// fedprof partition describes a partition without training, and a run of
// the same config writes the same label counts and partition_js.
TEST(CliTest, PartitionDescribesTheClientsLabelsAsTheRunDoes) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string dir = ClearedPath("cli", "partition");
  const std::string config =
      " --set data.train_limit=2000 --set data.test_limit=200 --set clients.count=8 --set rounds=1 "
      "--set train.epochs=1 --set report.progress=false --set partition.kind=classes --set partition.classes=2";
  const CliResult r = RunCli("partition" + config + " --out " + dir + "/described");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("labels a client holds: 2.00 on average"), std::string::npos) << r.output;
  const std::vector<std::vector<int64_t>> described = LabelColumns(dir + "/described/clients.csv");
  ASSERT_EQ(described.size(), 8u);
  const auto sizes = Columns(dir + "/described/clients.csv").at("size");
  for (size_t k = 0; k < described.size(); ++k) {
    ASSERT_EQ(described[k].size(), 10u);
    EXPECT_EQ(std::count_if(described[k].begin(), described[k].end(), [](int64_t v) { return v > 0; }), 2);
    EXPECT_GT(described[k][k % 10], 0) << "client k's first label is k mod 10";
    EXPECT_EQ(std::accumulate(described[k].begin(), described[k].end(), int64_t{0}), std::stoll(sizes.at(k)));
  }
  const std::string png = ReadFile(dir + "/described/labels.png");
  EXPECT_EQ(png.substr(1, 3), "PNG");
  const auto json = nlohmann::json::parse(ReadFile(dir + "/described/partition.json"));
  EXPECT_GT(json.at("partition_js").get<double>(), 0.3);

  const CliResult run = RunCli("simulate" + config + " --out " + dir + "/run");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(LabelColumns(dir + "/run/clients.csv"), described);
  EXPECT_EQ(Summary(dir + "/run").at("partition_js").get<double>(), json.at("partition_js").get<double>());
  EXPECT_TRUE(FileExists(dir + "/run/labels.png"));
  EXPECT_GT(ReadFile(dir + "/run/selection.png").size(), 1000u) << "times_selected found by its header";

  // Requests no partition can meet: one line naming the option, nothing written.
  for (const auto& [set, named] : std::vector<std::pair<std::string, std::string>>{
           {"--set partition.classes=11", "partition.classes: 11 labels a client, but the data has 10 classes"},
           {"--set partition.kind=dirichlet --set partition.beta=0.01 --set partition.min_size=250",
            "partition.min_size: no partition of 2000 samples over 8 clients"},
           {"--set partition.beta=0", "partition.beta"},
           {"--set partition.kind=shards --set partition.sizes=dirichlet", "partition.kind: shards decides"}}) {
    const CliResult bad = RunCli("partition" + config + " " + set + " --out " + dir + "/bad");
    EXPECT_EQ(bad.code, 1) << set;
    EXPECT_EQ(CountLines(bad.output), 1) << bad.output;
    EXPECT_NE(bad.output.find(named), std::string::npos) << bad.output;
    EXPECT_FALSE(FileExists(dir + "/bad")) << set;
  }
}

}  // namespace
}  // namespace fedprof
