#!/usr/bin/python3
"""The slowest tests of a ctest run, from its log (ctest -O FILE): printed
at the end of `make test`, so that a test that grew slow is seen.

    scripts/slowest_tests.py build/ctest.log [N]
"""

import re
import sys


def slowest(text, n=10):
    """The n slowest (seconds, name) of a ctest log's result lines."""
    times = []
    for m in re.finditer(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) .*?([\d.]+) sec$", text, re.M):
        times.append((float(m.group(2)), m.group(1)))
    return sorted(times, reverse=True)[:n]


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.strip())
    try:
        with open(argv[1], encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"slowest_tests: cannot read the ctest log {argv[1]}: {e.strerror}")
    rows = slowest(text, int(argv[2]) if len(argv) == 3 else 10)
    print(f"The {len(rows)} slowest tests:")
    for seconds, name in rows:
        print(f"  {seconds:7.1f} s  {name}")


if __name__ == "__main__":
    main(sys.argv)
