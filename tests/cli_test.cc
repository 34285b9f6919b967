// End-to-end tests of the fedprof command line on real data.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "fedprof/core/files.h"
#include "fedprof/server/checkpoint.h"

namespace fedprof {
namespace {

struct Result {
  int code = -1;
  std::string output;
};

// Runs the CLI with `args` (a shell-quoted string), stdout and stderr merged.
Result RunCli(const std::string& args) {
  const std::string cmd = std::string(FEDPROF_CLI) + " " + args + " 2>&1";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = testing::TempDir() + "/fedprof_cli_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

bool HaveFashionMnist() { return FileExists("/usr/share/datasets/fashion-mnist"); }

// A small but real run: 3000 Fashion-MNIST images among 10 clients.
const char* kSmallRun =
    "--set data.train_limit=3000 --set data.test_limit=500 --set clients.count=10 "
    "--set strategy.fraction=0.4 --set train.epochs=1 --set quality.blurred=0.2 "
    "--set quality.salt_pepper=0.2 --set quality.irrelevant=0.1 --set report.progress=false";

// metrics.csv without its last column (wall_s, the one non-reproducible column).
std::string MetricsWithoutWall(const std::string& dir) {
  std::istringstream in(ReadFile(dir + "/metrics.csv"));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.rfind(',')) + "\n";
  return out;
}

int CountLines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(CliTest, HelpListsTheSubcommands) {
  const Result r = RunCli("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.output.find("simulate"), std::string::npos) << r.output;
  const Result sim = RunCli("simulate --help");
  EXPECT_NE(sim.output.find("--resume"), std::string::npos) << sim.output;
}

TEST(CliTest, OptionsDocIsGeneratedFromTheTable) {
  const Result r = RunCli("options");
  ASSERT_EQ(r.code, 0);
  EXPECT_TRUE(r.output == ReadFile(std::string(FEDPROF_SOURCE_DIR) + "/docs/options.md"))
      << "regenerate with: build/fedprof options > docs/options.md";
}

TEST(CliTest, UnknownKeyIsOneLineNamingTheNearestKey) {
  const Result r = RunCli("simulate --set train.lrr=0.1");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("did you mean 'train.lr'"), std::string::npos) << r.output;
  const Result range = RunCli("simulate --set strategy.fraction=2");
  EXPECT_EQ(range.code, 1);
  EXPECT_NE(range.output.find("strategy.fraction"), std::string::npos) << range.output;
}

TEST(CliTest, CorruptDataFileEndsTheRunWithOneLine) {
  const std::string dir = FreshDir("corrupt");
  MakeDirs(dir);
  // Valid label file header, image file with a bad magic number.
  WriteFileAtomic(dir + "/train-images-idx3-ubyte", std::string("\x00\x00\x08\x04", 4) + std::string(64, '\0'));
  WriteFileAtomic(dir + "/train-labels-idx1-ubyte", std::string("\x00\x00\x08\x01\x00\x00\x00\x01\x03", 9));
  const Result r = RunCli("simulate --set data.name=mnist --set data.dir=" + dir + " --out " + dir + "/out");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(CountLines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("train-images-idx3-ubyte"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("magic"), std::string::npos) << r.output;
}

TEST(CliTest, WritesTheDocumentedOutputs) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string out = FreshDir("outputs");
  const Result r = RunCli(std::string("simulate ") + kSmallRun +
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
}

TEST(CliTest, OneAndTwoThreadsGiveIdenticalMetrics) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string a = FreshDir("threads1"), b = FreshDir("threads2");
  const std::string run = std::string("simulate ") + kSmallRun + " --set rounds=3 --set model.name=cnn";
  ASSERT_EQ(RunCli(run + " --set threads=1 --out " + a).code, 0);
  ASSERT_EQ(RunCli(run + " --set threads=2 --out " + b).code, 0);
  EXPECT_EQ(MetricsWithoutWall(a), MetricsWithoutWall(b));
  EXPECT_EQ(ReadFile(a + "/clients.csv"), ReadFile(b + "/clients.csv"));
}

TEST(CliTest, KilledRunResumesToTheSameMetrics) {
  if (!HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const std::string whole = FreshDir("whole"), killed = FreshDir("killed");
  const std::string run = std::string("simulate ") + kSmallRun + " --set rounds=8";
  ASSERT_EQ(RunCli(run + " --out " + whole).code, 0);

  // Start the same run, SIGKILL it once round 2 is checkpointed.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = std::string("exec ") + FEDPROF_CLI + " " + run + " --out " + killed +
                            " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int64_t killed_at = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (FileExists(killed + "/checkpoint.bin")) {
      try {
        killed_at = LoadCheckpoint(killed + "/checkpoint.bin").round;
      } catch (...) {
      }
      if (killed_at >= 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run ended before it could be killed";
  killed_at = LoadCheckpoint(killed + "/checkpoint.bin").round;
  ASSERT_LT(killed_at, 8);

  const Result resumed = RunCli("simulate --resume " + killed);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(MetricsWithoutWall(whole), MetricsWithoutWall(killed));
  EXPECT_EQ(ReadFile(whole + "/clients.csv"), ReadFile(killed + "/clients.csv"));
  const Result bad = RunCli("simulate --resume " + killed + " --set train.lr=0.5");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("cannot change on --resume"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace fedprof
