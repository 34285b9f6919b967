#ifndef FEDPROF_TESTS_CHECKPOINTS_H_
#define FEDPROF_TESTS_CHECKPOINTS_H_

// Watching a running process's checkpoint from a test.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "fedprof/core/files.h"
#include "fedprof/server/checkpoint.h"
#include "tests/processes.h"

namespace fedprof::testing_support {

// Waits up to `timeout_s` (scaled by kTimeScale) until `dir`/checkpoint.bin
// holds round >= `round`; returns the last round read (-1 if none could be).
// Polls every 2 ms: callers stop the run right after, before it finishes.
inline int64_t WaitForCheckpoint(const std::string& dir, int64_t round, double timeout_s) {
  const std::string path = dir + "/checkpoint.bin";
  const auto deadline = DeadlineIn(timeout_s);
  int64_t at = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    if (FileExists(path)) {
      try {
        at = DecodeCheckpoint(ReadFile(path), "checkpoint").state.round;
      } catch (...) {
        // Not readable this time (the run may be replacing it): poll again.
      }
      if (at >= round) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return at;
}

// Runs `fedprof <arguments>` and SIGKILLs it once round `round` of `out` is
// checkpointed; fails when the run ended first.
inline void KillOnceCheckpointed(const std::string& arguments, const std::string& out, int64_t round) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = std::string("exec ") + FEDPROF_CLI + " " + arguments + " >/dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  WaitForCheckpoint(out, round, 120);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run ended before it could be killed";
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_CHECKPOINTS_H_
