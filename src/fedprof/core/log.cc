#include "fedprof/core/log.h"

#include <cstdio>
#include <mutex>

namespace fedprof {
namespace {

std::mutex& LogMutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

void LogWarning(const std::string& message) {
  std::lock_guard<std::mutex> lock(LogMutex());
  std::fprintf(stderr, "warning: %s\n", message.c_str());
  std::fflush(stderr);
}

void LogProgress(const std::string& line) {
  std::lock_guard<std::mutex> lock(LogMutex());
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace fedprof
