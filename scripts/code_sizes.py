#!/usr/bin/env python3
"""Sizes of the C++ sources: every file's line count and every function's length.

  scripts/code_sizes.py PATH...                      list files and functions
  scripts/code_sizes.py --max-file-lines 800 --max-function-lines 80 PATH...
                                                     list only what is over, exit 1 if any
  scripts/code_sizes.py --summary PATH...            counts, the longest functions, long files

A function runs from the line of its name to the line of its closing brace:
free and member functions (also those defined inside a class), constructors
with their initialiser lists, operators, templates and test bodies (TEST(...)
{...}). A lambda or local class counts as part of the function around it; a
lambda given a name at namespace scope counts as a function of that name.
Comments, strings (raw strings too) and character literals are blanked before
braces are matched, so braces inside them do not count. The preprocessor's
lines are ignored: a function split across #if branches is not measured.
"""

import argparse
import os
import re
import sys

EXTENSIONS = (".cc", ".cpp", ".cxx", ".c", ".h", ".hh", ".hpp")


def blank(text):
    """Returns `text` with comments, string and character literals and
    preprocessor lines replaced by spaces, newlines kept, so that offsets and
    line numbers stay those of the file."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True  # only whitespace so far on this line

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if line_start and c == "#":
            # A directive, with its continuation lines.
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                if text.startswith("/*", j):  # a comment may run past the line
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            wipe(i, j)
            i = j
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
            continue
        m = re.compile(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(').match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            wipe(i, j)
            i = j
            continue
        if c == '"' or (c == "'" and not digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            wipe(i, j)
            i = j
            continue
        i += 1
    return "".join(out)


def digit_separator(text, i):
    """Whether the quote at `i` separates digits (1'000'000, 0xFF'FF)."""
    if i == 0 or i + 1 >= len(text) or not text[i + 1].isalnum():
        return False
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_.'"):
        j -= 1
    return text[j].isdigit()


# What may follow a function's parameter list before its body.
QUALIFIERS = re.compile(
    r"\s*(?:const|volatile|&&|&|noexcept\s*(?:\([^()]*(?:\([^()]*\)[^()]*)*\))?|override|final|"
    r"mutable|constexpr|try|throw\s*\(\s*\)|"
    r"__attribute__\s*\(\([^()]*\)\))")
CLASS_HEAD = re.compile(
    r"^(?:\s*template\s*<.*?>)?\s*(?:typedef\s+)?(?:class|struct|union|enum)\b", re.S)
NAMESPACE_HEAD = re.compile(r"^\s*(?:inline\s+)?(?:namespace\b|extern\s*$|extern\s+\S*\s*$)", re.S)
FUNCTION_NAME = re.compile(
    r"((?:[A-Za-z_]\w*\s*(?:<[^;{}]*?>)?\s*::\s*)*"
    r"(?:operator\s*(?:\(\s*\)|\[\s*\]|[^\s\w(]+|\s\w[\w\s:<>*&]*?)|(?:~\s*)?[A-Za-z_]\w*))"
    r"\s*(?:<[^;{}()]*>)?\s*$")
LAMBDA_NAME = re.compile(r"([A-Za-z_]\w*)\s*=\s*\[[^\]]*\]\s*$")


class Function:
    def __init__(self, path, name, first, last):
        self.path, self.name, self.first, self.last = path, name, first, last

    @property
    def lines(self):
        return self.last - self.first + 1

    def __str__(self):
        return f"{self.path}:{self.first} {self.name} {self.lines} lines"


def skip_group(code, i, open_char, close_char):
    """Offset just past the bracket that closes the one at `i`."""
    depth = 0
    n = len(code)
    while i < n:
        if code[i] == open_char:
            depth += 1
        elif code[i] == close_char:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def tail_is_function(tail):
    """Whether `tail`, the text after a parenthesised group and before a
    brace, is what may follow a function's parameters: qualifiers, a
    trailing return type, an initialiser list (its braces already skipped)."""
    pos = 0
    while True:
        m = QUALIFIERS.match(tail, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    rest = tail[pos:].strip()
    if not rest:
        return True
    if rest.startswith("->"):
        return ";" not in rest and "=" not in rest.replace("==", "")
    return rest.startswith(":") and not rest.startswith("::")


def top_level_groups(stmt):
    """(start, end) of each parenthesised group of `stmt` at depth 0."""
    groups = []
    i = 0
    while i < len(stmt):
        if stmt[i] == "(":
            end = skip_group(stmt, i, "(", ")")
            groups.append((i, end))
            i = end
        else:
            i += 1
    return groups


def function_name(stmt, group_start, group_end):
    """The function a declaration heads, or None if it heads none. `stmt` is
    the declaration up to the brace; the group its parameter list."""
    before = stmt[:group_start]
    m = LAMBDA_NAME.search(before)
    if m:
        return m.group(1)
    m = FUNCTION_NAME.search(before)
    if not m:
        return None
    name = re.sub(r"\s+", " ", m.group(1)).strip()
    name = re.sub(r"\s*::\s*", "::", name)
    keyword = name.split("::")[-1]
    if keyword in ("if", "for", "while", "switch", "return", "sizeof", "decltype", "catch"):
        return None
    args = re.sub(r"\s+", " ", stmt[group_start:group_end])
    if re.fullmatch(r"[A-Z][A-Z0-9_]+", name) and re.fullmatch(r"\( ?\w+(?: ?, ?\w+)* ?\)", args):
        return name + args  # a macro's body: TEST(Suite, Name)
    return name


def functions_of(path, text):
    """Every function of one file, in order."""
    code = blank(text)
    line_of = []  # line number of each offset, 1-based
    line = 1
    for ch in code:
        line_of.append(line)
        if ch == "\n":
            line += 1
    line_of.append(line)
    found = []
    # The enclosing classes and namespaces (names, for member functions).
    scopes = []
    stmt_start = 0
    i = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c == "(":  # a default argument's braces are no body
            i = skip_group(code, i, "(", ")")
            continue
        if c == ";":
            stmt_start = i + 1
        elif c == "}":
            if scopes:
                scopes.pop()
            stmt_start = i + 1
        elif c == "{":
            stmt = code[stmt_start:i]
            if NAMESPACE_HEAD.match(stmt):
                scopes.append(None)
                stmt_start = i + 1
            elif CLASS_HEAD.match(stmt) and not re.search(r"\)\s*(?:const\s*)?$", stmt):
                m = re.match(r"^(?:\s*template\s*<.*?>)?\s*(?:typedef\s+)?"
                             r"(?:class|struct|union|enum)\s+(?:class\s+|struct\s+)?"
                             r"(?:\[\[[^\]]*\]\]\s*)?(?:alignas\s*\([^)]*\)\s*)?([A-Za-z_]\w*)?",
                             stmt, re.S)
                scopes.append(m.group(1) if m and m.group(1) else "")
                stmt_start = i + 1
            else:
                kind = declaration_kind(stmt)
                if kind == "init":  # a member's braced initialiser, or a variable's
                    i = skip_group(code, i, "{", "}")
                    continue
                end = skip_group(code, i, "{", "}")
                if kind is not None:
                    # A member defined in its class: named as one defined outside.
                    owner = [s for s in scopes if s]
                    name = "::".join(owner + [kind]) if owner and "::" not in kind else kind
                    first = line_of[stmt_start + name_offset(stmt)]
                    found.append(Function(path, name, first, line_of[max(end - 1, 0)]))
                    stmt_start = end
                i = end
                continue
        i += 1
    return found


def declaration_kind(stmt):
    """For the text before a brace at namespace or class scope: the name of
    the function it heads, "init" when the brace opens an initialiser (of a
    variable, or of a member in a constructor's initialiser list), or None
    for anything else (the block is then skipped whole)."""
    groups = top_level_groups(stmt)
    for start, end in groups:
        if tail_is_function(stmt[end:]):
            name = function_name(stmt, start, end)
            if name is None:
                continue
            tail = stmt[end:].strip()
            # A member initialiser x_{...} in the list: the body comes later.
            if tail.startswith(":") and re.search(r"[\w>]\s*$", stmt):
                return "init"
            return name
    return "init"


def name_offset(stmt):
    """Offset in `stmt` of the function's name: its signature line is that
    name's, below any template header, attribute or access specifier."""
    for start, end in top_level_groups(stmt):
        if tail_is_function(stmt[end:]) and function_name(stmt, start, end):
            before = stmt[:start]
            m = LAMBDA_NAME.search(before) or FUNCTION_NAME.search(before)
            return m.start(1)
    return len(stmt) - len(stmt.lstrip())


def source_files(paths, extensions):
    for path in paths:
        if os.path.isfile(path):
            yield path
            continue
        if not os.path.isdir(path):
            raise SystemExit(f"code_sizes: {path}: no such file or directory")
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for f in sorted(files):
                if f.endswith(extensions):
                    yield os.path.join(root, f)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="files and directories (searched recursively)")
    parser.add_argument("--max-file-lines", type=int, help="list files longer than this; exit 1 if any")
    parser.add_argument("--max-function-lines", type=int,
                        help="list functions longer than this; exit 1 if any")
    parser.add_argument("--summary", action="store_true",
                        help="counts of long functions, the longest ones and the long files")
    parser.add_argument("--top", type=int, default=15, help="how many functions --summary lists")
    args = parser.parse_args(argv)

    files = []  # (path, lines)
    functions = []
    for path in source_files(args.paths, EXTENSIONS):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        files.append((path, len(text.splitlines())))
        functions.extend(functions_of(path, text))

    checking = args.max_file_lines is not None or args.max_function_lines is not None
    offenders = 0
    if checking:
        if args.max_file_lines is not None:
            for path, lines in files:
                if lines > args.max_file_lines:
                    print(f"{path}:1 (file) {lines} lines")
                    offenders += 1
        if args.max_function_lines is not None:
            for fn in functions:
                if fn.lines > args.max_function_lines:
                    print(fn)
                    offenders += 1
    elif not args.summary:
        by_file = {}
        for fn in functions:
            by_file.setdefault(fn.path, []).append(fn)
        for path, lines in files:
            print(f"{path} {lines} lines")
            for fn in by_file.get(path, []):
                print(f"  {fn}")

    if args.summary:
        function_limit = args.max_function_lines or 80
        file_limit = args.max_file_lines or 800
        if checking:
            print()
        print(f"{len(files)} files, {sum(lines for _, lines in files)} lines, "
              f"{len(functions)} functions")
        for limit in sorted({function_limit, 100}):
            count = sum(1 for fn in functions if fn.lines > limit)
            print(f"functions over {limit} lines: {count}")
        print(f"longest {min(args.top, len(functions))} functions:")
        for fn in sorted(functions, key=lambda f: (-f.lines, f.path, f.first))[:args.top]:
            print(f"  {fn}")
        long_files = sorted((f for f in files if f[1] > file_limit), key=lambda f: (-f[1], f[0]))
        print(f"files over {file_limit} lines: {len(long_files)}")
        for path, lines in long_files:
            print(f"  {path} {lines} lines")

    if checking and offenders:
        print(f"code_sizes: {offenders} over the limits", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
