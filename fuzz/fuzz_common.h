#ifndef FEDPROF_FUZZ_FUZZ_COMMON_H_
#define FEDPROF_FUZZ_FUZZ_COMMON_H_

// What every fuzz target shares. A target feeds its input to one parser;
// fedprof::Error is the expected way to refuse it. Anything else is a bug
// libFuzzer reports: a crash or sanitizer finding, any other exception
// (uncaught, so it aborts), a leak, a hang, or a broken property checked
// with FUZZ_CHECK (an error message that is empty or spans several lines,
// a result that is not what the input said).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fedprof/core/error.h"

namespace fedprof::fuzz {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* what,
                                     const std::string& detail) {
  std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed %s\n", file, line, what, detail.c_str());
  std::abort();
}

#define FUZZ_CHECK(cond, detail)                                                  \
  do {                                                                            \
    if (!(cond)) ::fedprof::fuzz::CheckFailed(__FILE__, __LINE__, #cond, detail); \
  } while (0)

// An expected error: one non-empty line (the project's error contract).
inline void CheckMessage(const Error& e) {
  const std::string what = e.what();
  FUZZ_CHECK(!what.empty(), "(empty fedprof::Error)");
  FUZZ_CHECK(what.find('\n') == std::string::npos, "(multi-line error): " + what);
}

// Runs `body`, accepting fedprof::Error (checked by CheckMessage) and
// nothing else.
template <typename Body>
int Run(Body&& body) {
  try {
    body();
  } catch (const Error& e) {
    CheckMessage(e);
  }
  return 0;
}

inline std::string Bytes(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Splits the input at the first occurrence of `separator` (a two-part
// input); without it, the first part is everything and the second empty.
inline std::pair<std::string, std::string> SplitAt(const std::string& in,
                                                   const std::string& separator) {
  const size_t at = in.find(separator);
  if (at == std::string::npos) return {in, ""};
  return {in.substr(0, at), in.substr(at + separator.size())};
}

}  // namespace fedprof::fuzz

#endif  // FEDPROF_FUZZ_FUZZ_COMMON_H_
