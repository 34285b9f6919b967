#include "fedprof/core/process_exit.h"

#include <cstdio>
#include <cstdlib>

namespace fedprof {

int EndProcess(int code) {
#if defined(__SANITIZE_ADDRESS__)
  return code;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return code;
#endif
#endif
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace fedprof
