#ifndef FEDPROF_TESTS_CHECKPOINTS_H_
#define FEDPROF_TESTS_CHECKPOINTS_H_

// Watching a running process's checkpoint from a test.

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

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_CHECKPOINTS_H_
