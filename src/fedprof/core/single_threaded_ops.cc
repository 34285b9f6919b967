#include "fedprof/core/single_threaded_ops.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace fedprof {

void EnsureSingleThreadedOps(char** argv) {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;
  ::setenv("OMP_NUM_THREADS", "1", 1);
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  ::execv(exe, argv);
}

}  // namespace fedprof
