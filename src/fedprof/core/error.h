#ifndef FEDPROF_CORE_ERROR_H_
#define FEDPROF_CORE_ERROR_H_

#include <stdexcept>
#include <string>

namespace fedprof {

// An expected failure: bad input file, bad config value, a misbehaving client.
// what() is one line naming the offending file or field and what was
// expected; the CLI prints it and exits non-zero.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A failure of code the run was given, not of a client: a hook from outside
// the engine that raised or returned what it must not while a client
// trained. It ends the run, where a client's Error only fails that client.
class RunError : public Error {
 public:
  using Error::Error;
};

}  // namespace fedprof

#endif  // FEDPROF_CORE_ERROR_H_
