#!/usr/bin/env python3
"""Tests of code_sizes.py on small sources whose functions are counted by hand."""

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import code_sizes  # noqa: E402


def measured(text):
    return [(f.name, f.first, f.lines) for f in code_sizes.functions_of("x.cc", text)]


class FunctionsTest(unittest.TestCase):
    def test_free_and_qualified_functions(self):
        text = """\
#include "a.h"

namespace fedprof {
namespace {

int Twice(int x) { return 2 * x; }

}  // namespace

void Server::Fit(const std::vector<int>& tasks,
                 const Sink& sink) {
  for (int t : tasks) {
    sink(t);
  }
}

}  // namespace fedprof
"""
        self.assertEqual(measured(text), [("Twice", 6, 1), ("Server::Fit", 10, 6)])

    def test_braces_in_comments_strings_chars_and_raw_strings(self):
        text = """\
void F() {
  // a } in a comment {
  /* and { here } */
  const char* s = "}{ \\" }";
  const char c = '}';
  const char o = '{';
  const std::string raw = R"js(function() { if (x) { })js";
  const std::string raw2 = R"(})";
  const long n = 1'000'000;
}
int G() { return '{'; }
"""
        self.assertEqual(measured(text), [("F", 1, 10), ("G", 11, 1)])

    def test_members_defined_in_their_class(self):
        text = """\
class Stopwatch {
 public:
  explicit Stopwatch(Cost& cost) : cost_(cost), start_(Now()) {}
  ~Stopwatch() {
    cost_.seconds += Now() - start_;
  }
  bool operator==(const Stopwatch& o) const { return start_ == o.start_; }
  struct Inner {
    int Get() const noexcept { return 1; }
  };

 private:
  Cost& cost_;
  double start_ = 0;
};
"""
        self.assertEqual(measured(text), [
            ("Stopwatch::Stopwatch", 3, 1),
            ("Stopwatch::~Stopwatch", 4, 3),
            ("Stopwatch::operator==", 7, 1),
            ("Stopwatch::Inner::Get", 9, 1),
        ])

    def test_constructor_with_braced_initialisers(self):
        text = """\
Pool::Pool(int n, Options options)
    : n_{n},
      options_(std::move(options)),
      queue_{Queue<int>{n}},
      base_<int>{3} {
  Start();
}
"""
        self.assertEqual(measured(text), [("Pool::Pool", 1, 7)])

    def test_templates_lambdas_and_default_arguments(self):
        text = """\
template <typename Message,
          typename = std::enable_if_t<std::is_class_v<Message>>>
Message Carry(const Message& m, const std::vector<int>& v = {}) {
  auto each = [&](int x) {
    if (x) { return 1; }
    return 0;
  };
  return m;
}
const auto kSquare = [](int x) {
  return x * x;
};
const std::map<std::string, std::function<int()>> kTable = {
    {"a", [] { return 1; }},
};
auto Sum(int a, int b) -> decltype(a + b) {
  return a + b;
}
"""
        self.assertEqual(measured(text), [("Carry", 3, 7), ("kSquare", 10, 3), ("Sum", 16, 3)])

    def test_test_bodies_and_macros(self):
        text = """\
TEST(SecAggTest, SumsMasked) {
  EXPECT_EQ(1, 1);
}
TEST_F(PaillierTest, Adds) { EXPECT_TRUE(true); }
uint8_t U(const Bytes& b) { return b[0]; }
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return 0;
}
"""
        self.assertEqual(measured(text), [
            ("TEST(SecAggTest, SumsMasked)", 1, 3),
            ("TEST_F(PaillierTest, Adds)", 4, 1),
            ("U", 5, 1),
            ("LLVMFuzzerTestOneInput", 6, 3),
        ])

    def test_declarations_are_not_functions(self):
        text = """\
enum class Kind : int64_t { kA = 1, kB = 2 };
struct Options {
  int n = 0;
  std::vector<int> v{1, 2};
  void Set(int x);
  virtual void Run() = 0;
  Options() = default;
};
constexpr int kN[] = {1, 2};
#define BODY(x) { return x; }
"""
        self.assertEqual(measured(text), [])


class MainTest(unittest.TestCase):
    def run_main(self, args):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = code_sizes.main(args)
        return code, out.getvalue()

    def test_limits_list_each_offender_and_fail(self):
        with tempfile.TemporaryDirectory() as d:
            body = "".join(f"  x += {i};\n" for i in range(5))
            with open(os.path.join(d, "a.cc"), "w") as f:
                f.write("int Short() { return 1; }\n\nint Long(int x) {\n" + body + "  return x;\n}\n")
            path = os.path.join(d, "a.cc")
            code, out = self.run_main(["--max-function-lines", "7", "--max-file-lines", "20", d])
            self.assertEqual(code, 1)
            self.assertEqual(out, f"{path}:3 Long 8 lines\n")
            code, out = self.run_main(["--max-function-lines", "8", "--max-file-lines", "9", d])
            self.assertEqual(code, 1)
            self.assertEqual(out, f"{path}:1 (file) 10 lines\n")
            code, out = self.run_main(["--max-function-lines", "8", "--max-file-lines", "10", d])
            self.assertEqual((code, out), (0, ""))
            code, out = self.run_main(["--summary", d])
            self.assertEqual(code, 0)
            self.assertIn("functions over 80 lines: 0", out)
            self.assertIn(f"  {path}:3 Long 8 lines\n  {path}:1 Short 1 lines\n", out)


if __name__ == "__main__":
    unittest.main()
