#!/usr/bin/env python3
"""Tests of scripts/includes.py: small trees written here, and the project's
own tree with one include taken away."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts")
ROOT = os.path.dirname(SCRIPTS)
sys.path.insert(0, SCRIPTS)
import includes  # noqa: E402


def write(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def problems(files):
    with tempfile.TemporaryDirectory() as root:
        write(root, files)
        tree = includes.Tree(root)
        return includes.check_rooms(tree) + includes.check_own_includes(tree)


TEXT_H = """\
#ifndef T
#define T
#include <string>
namespace fedprof {
// FormatRate in a comment is no declaration
std::string FormatDouble(double value, const char* format = "%g");
struct Window { int size = 0; };
constexpr int kMaxWidth = 8;
class Printer {
 public:
  void Flush();  // a member: no home of a free Flush
};
}  // namespace fedprof
#endif
"""


class OwnIncludesTest(unittest.TestCase):
    def test_a_name_used_without_its_header_is_named(self):
        found = problems({
            "src/fedprof/core/text.h": TEXT_H,
            "src/fedprof/strategy/strategy.cc":
                "namespace fedprof {\nstd::string Name() { return FormatDouble(0.5); }\n}\n",
        })
        self.assertEqual(found, ["src/fedprof/strategy/strategy.cc uses FormatDouble without "
                                 "including src/fedprof/core/text.h"])

    def test_types_and_constants_count_and_an_include_through_another_header_suffices(self):
        files = {
            "src/fedprof/core/text.h": TEXT_H,
            "src/fedprof/core/wrap.h": '#include "fedprof/core/text.h"\n',
            "src/fedprof/strategy/a.cc": "namespace fedprof {\nint F() { Window w; return kMaxWidth; }\n}\n",
        }
        self.assertEqual(len(problems(files)), 2)
        files["src/fedprof/strategy/a.cc"] = '#include "fedprof/core/wrap.h"\n' + files[
            "src/fedprof/strategy/a.cc"]
        self.assertEqual(problems(files), [])

    def test_members_other_namespaces_comments_and_own_declarations_are_not_uses(self):
        found = problems({
            "src/fedprof/core/text.h": TEXT_H,
            "src/fedprof/strategy/b.cc": """\
namespace fedprof {
// Window and FormatDouble, in a comment
struct Window;  // forward declared: its own
template <class Printer> void Use(Printer p) { p.Flush(); }
void G(Thing* t) { t->FormatDouble(1); other::kMaxWidth; const char* s = "FormatDouble"; }
}
""",
        })
        self.assertEqual(found, [])

    def test_fedprof_qualified_use_is_a_use(self):
        found = problems({
            "src/fedprof/core/text.h": TEXT_H,
            "tools/fedprof/main.cc": "int main() { return ::fedprof::kMaxWidth; }\n",
        })
        self.assertEqual(len(found), 1)


    def test_a_use_qualified_by_a_namespace_of_the_project_is_a_use(self):
        files = {
            "src/fedprof/secagg/wire.h": "namespace fedprof::secagg {\nconstexpr int kMaxClients = 9;\n}\n",
            "src/fedprof/deploy/shared/setup.cc":
                "namespace fedprof {\nint N() { return secagg::kMaxClients + std::kMaxClients; }\n}\n",
        }
        self.assertEqual(problems(files), ["src/fedprof/deploy/shared/setup.cc uses kMaxClients without "
                                           "including src/fedprof/secagg/wire.h"])


class RoomsTest(unittest.TestCase):
    def test_a_room_may_include_below_never_above(self):
        files = {
            "src/fedprof/core/a.h": "namespace fedprof { struct A {}; }\n",
            "src/fedprof/run/b.h": '#include "fedprof/core/a.h"\nnamespace fedprof { struct B { A a; }; }\n',
        }
        self.assertEqual(problems(files), [])
        files["src/fedprof/core/c.h"] = '#include "fedprof/run/b.h"\nnamespace fedprof { B b; }\n'
        self.assertEqual(problems(files), ["src/fedprof/core/c.h includes src/fedprof/run/b.h: "
                                           "room core sits below run"])

    def test_a_room_not_in_the_order_is_named(self):
        found = problems({"src/fedprof/attic/x.h": "namespace fedprof {}\n"})
        self.assertEqual(found, ["src/fedprof/attic/x.h: room attic is not in scripts/includes.py's ROOMS"])


class ProjectTest(unittest.TestCase):
    def run_script(self, root):
        return subprocess.run([sys.executable, os.path.join(SCRIPTS, "includes.py"), "--root", root],
                              capture_output=True, text=True, timeout=120)

    def test_the_project_passes_and_fails_without_strategys_text_header(self):
        # The include whose absence once broke every file-by-file build.
        with tempfile.TemporaryDirectory() as root:
            for top in includes.SOURCE_DIRS:
                if os.path.isdir(os.path.join(ROOT, top)):
                    shutil.copytree(os.path.join(ROOT, top), os.path.join(root, top),
                                    ignore=shutil.ignore_patterns("*.py", "*.pyc", "__pycache__"))
            done = self.run_script(root)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            path = os.path.join(root, "src/fedprof/strategy/strategy.cc")
            with open(path, encoding="utf-8") as f:
                text = f.read()
            self.assertIn('#include "fedprof/core/text.h"\n', text)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace('#include "fedprof/core/text.h"\n', ""))
            done = self.run_script(root)
            self.assertEqual(done.returncode, 1)
            self.assertIn("src/fedprof/strategy/strategy.cc uses FormatDouble without including "
                          "src/fedprof/core/text.h", done.stdout)


if __name__ == "__main__":
    unittest.main()
