#!/usr/bin/env python3
"""Checks the project's #include lines without compiling anything.

  scripts/includes.py [--root DIR]            both checks below; exit 1 if any fails
  scripts/includes.py --order                 the rooms, lowest first

Rooms run downward. A room is a folder of src/fedprof (deploy's roles are
rooms of their own: deploy/shared, deploy/client, ...). ROOMS lists them
lowest first; a file may include its own room's headers and those of rooms
listed before it, never one listed after.

Each file names what it uses. A name declared at namespace scope in a
project header (a function, class, struct, enum, alias or kConstant) that a
file uses must be declared in that file or in a header it includes, directly
or through other project headers. The unity build compiles several sources
as one, so a source that leans on a header its batch-mate included builds
there and fails in a file-by-file build (the sanitizer and fuzz builds);
this finds such a source in a second. It reads names, not types: a use is
an identifier, not after `.`, `->` or another namespace's `::`, and it is
satisfied when the name appears in any header of the file's include
closure, so it can miss a missing include (a name used through a macro,
or one the closure mentions in passing).
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from code_sizes import blank  # noqa: E402

# Lowest first. A file of a room may include headers of its own room and of
# the rooms before it.
ROOMS = [
    "core", "config", "report", "models", "secagg", "data", "monitor", "profiling", "privacy",
    "aggregation", "protocol", "fbftl", "algorithms", "client", "selection", "sim", "transport",
    "deploy/shared", "deploy/client", "deploy/server", "deploy/relay", "distributed", "strategy",
    "server", "run", "federation",
]
# Folders whose C++ files are checked for their own includes (rooms are
# checked for order too).
SOURCE_DIRS = ["src/fedprof", "tools/fedprof", "python", "tests", "bench", "fuzz"]
EXTENSIONS = (".cc", ".h", ".cpp")

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
IDENT = re.compile(r"[A-Za-z_]\w*")
QUALIFIERS = re.compile(r"(?<![\w:])(?:::)?(?:[A-Za-z_]\w*::)*$")
# Names a header declares at namespace scope: the word before a '(' that
# opens a declaration, after class/struct/enum/using, or a kConstant.
# A definition, not a forward declaration (`class X;` is no home of X).
TYPE_DECL = re.compile(r"\b(?:class|struct|union|enum(?:\s+class)?)\s+([A-Z]\w*)\s*(?=[:{]|final\b)")
ALIAS_DECL = re.compile(r"\busing\s+([A-Z]\w*)\s*=")
FUNCTION_DECL = re.compile(r"(\w+|[>&*])\s+([A-Z]\w*)\s*\(")
NOT_A_TYPE = {"return", "else", "throw", "new", "delete", "case", "co_return", "co_yield", "not",
              "and", "or", "sizeof", "typename", "goto", "do"}
FORWARD_DECL = re.compile(r"\b(?:class|struct|union|enum(?:\s+class)?)\s+([A-Z]\w*)\s*[;*&]")
TEMPLATE_PARAMETER = re.compile(r"\b(?:class|typename)\s+([A-Z]\w*)\s*(?=[,>=])")
CONSTANT_DECL = re.compile(r"\b(k[A-Z]\w*)\s*(?:=|\{|\[)")


def namespace_scope(code):
    """`code` (blanked) with everything inside a class, function or
    initializer body replaced by spaces: what is left is what the file
    declares at namespace scope."""
    out = list(code)
    depth = 0  # braces that are not a namespace's
    stack = []
    i = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c == "{":
            head = code[max(code.rfind(";", 0, i), code.rfind("}", 0, i)) + 1:i]
            is_namespace = depth == 0 and re.search(r"\bnamespace\b[\w\s:]*$|\bextern\s*$", head)
            stack.append(not is_namespace)
            if not is_namespace:
                depth += 1
                if depth == 1:  # keep the brace that opens a body: `class X {`
                    i += 1
                    continue
            elif depth > 0:
                out[i] = " "
        elif c == "}":
            if stack and stack.pop():
                depth -= 1
                if depth == 0:
                    i += 1
                    continue
        if depth > 0 and out[i] != "\n":
            out[i] = " "
        i += 1
    return "".join(out)


def declared_names(code):
    """The names `code` (blanked) declares: a type, alias, function or
    constant, anywhere in it."""
    names = set()
    for pattern in (TYPE_DECL, ALIAS_DECL, CONSTANT_DECL):
        names.update(m.group(1) for m in pattern.finditer(code))
    names.update(m.group(2) for m in FUNCTION_DECL.finditer(code) if m.group(1) not in NOT_A_TYPE)
    return names


def own_names(code):
    """What `code` (blanked) declares for itself, forward declarations and
    template parameters too."""
    names = declared_names(code)
    for pattern in (FORWARD_DECL, TEMPLATE_PARAMETER):
        names.update(m.group(1) for m in pattern.finditer(code))
    return names


def used_names(code, namespaces):
    """Identifiers of `code` (blanked) that name something unqualified or
    in one of the project's `namespaces` (fedprof::, secagg::, ...), not a
    member (after . or ->) or another namespace's."""
    used = set()
    for m in IDENT.finditer(code):
        before = code[max(0, m.start() - 40):m.start()].rstrip()
        if before.endswith((".", "->")):
            continue
        if before.endswith("::"):
            chain = re.findall(r"[A-Za-z_]\w*", QUALIFIERS.search(before).group(0))
            if chain and chain[0] not in namespaces:
                continue
        used.add(m.group(0))
    return used


class Tree:
    def __init__(self, root):
        self.root = root
        self.text = {}  # relative path -> blanked text
        self.includes = {}  # relative path -> project includes, resolved
        for top in SOURCE_DIRS:
            for folder, _, files in os.walk(os.path.join(root, top)):
                for name in sorted(files):
                    if name.endswith(EXTENSIONS):
                        path = os.path.relpath(os.path.join(folder, name), root)
                        with open(os.path.join(root, path), encoding="utf-8") as f:
                            raw = f.read()
                        self.text[path] = blank(raw)
                        resolved = (self.resolve(path, inc) for inc in INCLUDE.findall(raw))
                        self.includes[path] = [inc for inc in resolved if inc]
        self.idents = {p: set(IDENT.findall(t)) for p, t in self.text.items()}  # every word of a file
        self._closure = {}
        self.declares = {p: declared_names(namespace_scope(t))
                         for p, t in self.text.items() if p.endswith(".h")}
        self.namespaces = {"fedprof"}
        for path, text in self.text.items():
            if path.startswith("src" + os.sep):
                for names in re.findall(r"\bnamespace\s+([\w:]+)\s*\{", text):
                    self.namespaces.update(n for n in names.split("::") if n)

    def resolve(self, path, include):
        """The project file `include` names from `path`, or None (a system
        or generated header)."""
        for base in ("src", os.path.dirname(path), "."):
            candidate = os.path.normpath(os.path.join(base, include))
            if os.path.isfile(os.path.join(self.root, candidate)):
                return candidate
        return None

    def closure(self, path):
        """Every project file `path` includes, directly or not."""
        if path not in self._closure:
            seen, todo = set(), list(self.includes.get(path, []))
            while todo:
                p = todo.pop()
                if p not in seen and p in self.text:
                    seen.add(p)
                    todo.extend(self.includes.get(p, []))
            self._closure[path] = seen
        return self._closure[path]


def room_of(path):
    """The room of a file under src/fedprof/, or None."""
    parts = path.split(os.sep)
    if parts[:2] != ["src", "fedprof"] or len(parts) < 4:
        return None
    if parts[2] == "deploy" and len(parts) >= 5:
        return "deploy/" + parts[3]
    return parts[2]


def check_rooms(tree):
    problems = []
    for path, incs in sorted(tree.includes.items()):
        room = room_of(path)
        if room is None or path.endswith("_test.cc"):
            continue
        if room not in ROOMS:
            problems.append(f"{path}: room {room} is not in scripts/includes.py's ROOMS")
            continue
        for inc in incs:
            other = room_of(inc)
            if other in ROOMS and ROOMS.index(other) > ROOMS.index(room):
                problems.append(f"{path} includes {inc}: room {room} sits below {other}")
    return problems


def check_own_includes(tree):
    # Where each name is declared; a name declared by a third-party header
    # too is still the project's when the project declares it.
    homes = {}
    for header, names in tree.declares.items():
        for name in names:
            homes.setdefault(name, set()).add(header)
    problems = []
    for path, code in sorted(tree.text.items()):
        closure = tree.closure(path)
        own = own_names(code)
        visible = set().union(*(tree.idents[header] for header in closure))
        for name in sorted(used_names(code, tree.namespaces) & homes.keys()):
            if name in own or name in visible:
                continue
            # A header of src/ serves every folder; one of tests/ (or fuzz/,
            # bench/...) only its own.
            places = {h for h in homes[name] - {path}
                      if h.startswith("src" + os.sep) or h.split(os.sep)[0] == path.split(os.sep)[0]}
            if not places:
                continue
            where = " or ".join(sorted(places))
            problems.append(f"{path} uses {name} without including {where}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--order", action="store_true", help="print the rooms, lowest first")
    args = parser.parse_args()
    if args.order:
        print("\n".join(ROOMS))
        return 0
    tree = Tree(args.root)
    problems = check_rooms(tree) + check_own_includes(tree)
    for problem in problems:
        print(problem)
    print(f"{len(tree.text)} files: {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
