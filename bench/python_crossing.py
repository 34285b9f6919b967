#!/usr/bin/python3
"""What a selector and an aggregator written in Python cost a round.

Runs the same experiment with the built-in uniform selector and averaging,
and with their Python reimplementations (tests/python_parts_test.py's, which
give the same model), alternating the two a few times in one process, and
prints per round: the built-in's wall time, the Python parts', the time
spent in the Python hooks (selection and aggregation: the crossing and the
parts' own work), the crossing alone (the hooks' time outside the parts'
select() and aggregate(): wrapping arrays, views, results and checking them)
and both as shares of the built-in's round.

    PYTHONPATH=build/python bench/python_crossing.py [--repeats 3] [--large-clients 10000]

Two setups: K = 10 (the default experiment: 100 Fashion-MNIST clients, 10
per round) and K = --large-clients clients per round (every client of a
sampled population of that size, 10 samples each, one epoch).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time


import fedprof

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from python_parts_test import Average, Uniform  # noqa: E402 - the parts the tests check


class Timed:
    """Adds up the wall time of a part's engine-facing calls."""

    def __init__(self, part, method):
        self.seconds = 0.0
        inner = getattr(part, method)

        def timed(*args):
            start = time.perf_counter()
            try:
                return inner(*args)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(part, method, timed)


def run(config, options, out, python):
    selector, aggregator = (Uniform(), Average()) if python else (None, None)
    # The parts' own work, then everything the engine calls (set second, so it wraps the first).
    work = [Timed(selector, "select"), Timed(aggregator, "aggregate")] if python else []
    hooks = [Timed(selector, "_select"), Timed(aggregator, "_aggregate")] if python else []
    result = fedprof.simulate(config, out=out, selector=selector, aggregator=aggregator,
                              **{k.replace(".", "__"): v for k, v in options.items()})
    rounds = len(result.metrics["round"])
    in_hooks = sum(t.seconds for t in hooks) / rounds
    crossing = in_hooks - sum(t.seconds for t in work) / rounds
    # wall_s is the time since the run started, at the end of each round.
    return (float(result.metrics["wall_s"][-1]) / rounds, in_hooks, crossing,
            result.summary["final_model_sha256"])


def measure(name, config, options, repeats, work):
    builtin, python, hooks, crossings = [], [], [], []
    for i in range(repeats):
        b, _, _, hb = run(config, options, os.path.join(work, f"{name}-builtin-{i}"), python=False)
        p, h, c, hp = run(config, options, os.path.join(work, f"{name}-python-{i}"), python=True)
        if hb != hp:
            raise SystemExit(f"{name}: the Python parts gave another model ({hp} != {hb})")
        builtin.append(b)
        python.append(p)
        hooks.append(h)
        crossings.append(c)
    b, p = statistics.median(builtin), statistics.median(python)
    h, c = statistics.median(hooks), statistics.median(crossings)
    print(f"| {name} | {b:.3f} | {p:.3f} | {h * 1e3:.1f} ({100 * h / b:.2f}%) | {c * 1e3:.1f} ({100 * c / b:.2f}%) "
          f"| {100 * (p - b) / b:+.2f}% |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--large-clients", type=int, default=10000, help="0: the K = 10 setup only")
    args = parser.parse_args()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    common = {"report.progress": False}
    small = dict(common, rounds=5)
    large = dict(common, **{
        "rounds": 2, "clients.count": args.large_clients, "strategy.fraction": 1.0,
        "partition.kind": "sampled", "partition.size_mean": 10, "train.epochs": 1, "eval.every": 2,
    })
    print("| setup | built-in s/round | Python parts s/round | in the hooks, ms/round (share) | "
          "crossing alone, ms/round (share) | round time |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="fedprof-crossing-") as work:
        measure("K = 10 (default experiment)", os.path.join(here, "configs/default.toml"), small, args.repeats,
                work)
        if args.large_clients > 0:
            measure(f"K = {args.large_clients}", None, large, args.repeats, work)


if __name__ == "__main__":
    main()
