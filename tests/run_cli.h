#ifndef FEDPROF_TESTS_RUN_CLI_H_
#define FEDPROF_TESTS_RUN_CLI_H_

// Runs the fedprof tool as a user would, for the end-to-end tests.

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace fedprof::testing_support {

// The tool under test.
inline const std::string kCli = FEDPROF_CLI;

// Options for a small real run: `images` Fashion-MNIST training images (by
// default 1000, or 10 a client for more than 100 clients) among `clients`
// clients, a fraction of them selected each round. Its point is a protocol
// or an identity, not accuracy: a round's training is the least that still
// moves every number; a test that asks for learning asks for more images.
inline std::string SmallRun(int clients, double fraction, int rounds, int images = 0) {
  if (images == 0) images = std::max(1000, 10 * clients);
  return "--set data.train_limit=" + std::to_string(images) +
         " --set data.test_limit=500 --set clients.count=" +
         std::to_string(clients) + " --set strategy.fraction=" + std::to_string(fraction) +
         " --set rounds=" + std::to_string(rounds) +
         " --set partition.kind=iid --set train.epochs=1 --set quality.blurred=0.2 "
         "--set quality.salt_pepper=0.2 --set quality.irrelevant=0.1 "
         "--set data.holdout_share=0.1 --set report.progress=false";
}

// A small but real run without rounds or a partition of its own: 1000
// Fashion-MNIST images among 10 clients, 4 of them a round, some of them
// blurred, noisy or irrelevant.
inline constexpr const char* kSmallRun =
    "--set data.train_limit=1000 --set data.test_limit=500 --set clients.count=10 "
    "--set strategy.fraction=0.4 --set train.epochs=1 --set quality.blurred=0.2 "
    "--set quality.salt_pepper=0.2 --set quality.irrelevant=0.1 --set report.progress=false";

// FedProf's run of the CLI tests: 20 clients, 5 a round, 55% of them with
// blurred, noisy or irrelevant (MNIST) data, a reference set held out.
inline constexpr const char* kFedProfRun =
    "--set data.train_limit=4000 --set data.test_limit=500 --set clients.count=20 "
    "--set strategy.fraction=0.25 --set train.epochs=1 --set quality.blurred=0.25 "
    "--set quality.salt_pepper=0.25 --set quality.irrelevant=0.15 --set quality.irrelevant_source=mnist "
    "--set strategy.name=fedprof --set data.holdout_share=0.1 --set report.progress=false";

// The lines of a text (its newlines).
inline int CountLines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

struct CliResult {
  int code = -1;       // exit status; -1 when the tool did not exit normally
  std::string output;  // stdout and stderr, merged
};

// Runs the CLI (FEDPROF_CLI) with `args`, a shell-quoted string.
inline CliResult RunCli(const std::string& args) {
  const std::string cmd = std::string(FEDPROF_CLI) + " " + args + " 2>&1";
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_RUN_CLI_H_
