#include "fedprof/core/single_threaded_ops.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace fedprof {

// Runs before libc's own initialiser has set `environ` (getenv would see
// nothing): the environment is the loader's `envp`.
void SingleThreadedOpsAtLoad(int /*argc*/, char** argv, char** envp) {
  static constexpr char kName[] = "OMP_NUM_THREADS=";
  std::vector<char*> environment;
  for (char** e = envp; *e != nullptr; ++e) {
    if (std::strncmp(*e, kName, sizeof(kName) - 1) == 0) return;
    environment.push_back(*e);
  }
  static char kOne[] = "OMP_NUM_THREADS=1";
  environment.push_back(kOne);
  environment.push_back(nullptr);
  ::execve("/proc/self/exe", argv, environment.data());
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
