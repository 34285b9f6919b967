#ifndef FEDPROF_TESTS_EXPECT_ERROR_H_
#define FEDPROF_TESTS_EXPECT_ERROR_H_

// The one check of the library's error contract (core/error.h): a refusal is
// a fedprof::Error whose what() is one line naming what was wrong.

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "fedprof/core/error.h"

namespace fedprof::testing_support {

// What the message must hold: ExpectError(f, "one") or ExpectError(f, {"a", "b"}).
// Implicit, so that a call reads like the message it expects.
struct Substrings {
  Substrings(const char* one) : all{one} {}  // NOLINT(google-explicit-constructor)
  Substrings(std::string one) : all{std::move(one)} {}  // NOLINT(google-explicit-constructor)
  Substrings(std::initializer_list<std::string> many) : all(many) {}
  std::vector<std::string> all;
};

// Runs `fn`, which must throw fedprof::Error with a one-line message holding
// every string in `parts`.
inline void ExpectError(const std::function<void()>& fn, const Substrings& parts) {
  std::string wanted;
  for (const std::string& part : parts.all) wanted += " '" + part + "'";
  try {
    fn();
    ADD_FAILURE() << "no error; expected a fedprof::Error containing" << wanted;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    for (const std::string& part : parts.all) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "missing '" << part << "' in: " << message;
    }
  }
}

}  // namespace fedprof::testing_support

#endif  // FEDPROF_TESTS_EXPECT_ERROR_H_
