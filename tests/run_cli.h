#ifndef FEDPROF_TESTS_RUN_CLI_H_
#define FEDPROF_TESTS_RUN_CLI_H_

// Runs the fedprof tool as a user would, for the end-to-end tests.

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace fedprof::testing_support {

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
