#include "fedprof/core/single_threaded_ops.h"

#include <dlfcn.h>
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

int SetBlasThreads(int threads) {
  using Get = int (*)();
  using Set = void (*)(int);
  const auto get = reinterpret_cast<Get>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  const auto set = reinterpret_cast<Set>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (get == nullptr || set == nullptr) return -1;
  const int before = get();
  set(threads);
  return before;
}

}  // namespace fedprof
