#!/usr/bin/python3
"""The table bench/niid_bench.sh prints: the final test accuracy of each
data set, partition and algorithm (mean ± standard deviation over the seeds'
summary.json), the paper's figure beside it, and the mean wall time of a run.

    bench/niid_table.py RUNS PAPER.tsv SETTING

RUNS holds <data>/<partition>/<algorithm>/seed-<s>/summary.json; FedProx's
runs are named fedprox-mu<μ>, and the μ with the best mean is kept, as the
paper tunes it. PAPER.tsv: data, partition, algorithm, accuracy, spread (in
percent), one row each; a cell it lacks prints "—".
"""

import csv
import json
import os
import statistics
import sys

ORDER = ["dir0.5", "dir0.1", "c1", "c2", "c3", "iid", "quantity", "noise"]
NAMES = {"dir0.5": "p_k ~ Dir(0.5)", "dir0.1": "p_k ~ Dir(0.1)", "c1": "#C = 1", "c2": "#C = 2",
         "c3": "#C = 3", "iid": "IID", "quantity": "q ~ Dir(0.5)", "noise": "x ~ Gau(0.1)"}
ALGORITHMS = ["fedavg", "fedprox", "scaffold", "fednova", "feddyn", "moon"]


def runs_of(folder):
    """(final accuracies in %, wall seconds) of the seeds in `folder`."""
    accuracy, wall = [], []
    for seed in sorted(os.listdir(folder)):
        path = os.path.join(folder, seed, "summary.json")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            summary = json.load(f)
        accuracy.append(100.0 * summary["final_accuracy"])
        wall.append(summary["wall_s"])
    return accuracy, wall


def cell(accuracy):
    if not accuracy:
        return "—"
    spread = statistics.pstdev(accuracy) if len(accuracy) > 1 else 0.0
    return f"{statistics.mean(accuracy):.1f} ± {spread:.1f}"


def main(runs, paper_path, setting):
    paper = {}
    with open(paper_path, newline="") as f:
        for row in csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t"):
            paper[(row["data"], row["partition"], row["algorithm"])] = f"{row['accuracy']} ± {row['spread']}"
    for data in sorted(os.listdir(runs)):
        print(f"\n{data} ({setting}): final test accuracy (%)")
        print("| partition | algorithm | here, mean ± sd | paper | wall s a run |")
        print("|---|---|---|---|---|")
        root = os.path.join(runs, data)
        for partition in [p for p in ORDER if os.path.isdir(os.path.join(root, p))]:
            folder = os.path.join(root, partition)
            for algorithm in ALGORITHMS:
                candidates = [name for name in sorted(os.listdir(folder))
                              if name == algorithm or name.startswith(algorithm + "-mu")]
                best, best_name, best_wall = [], "", []
                for name in candidates:
                    accuracy, wall = runs_of(os.path.join(folder, name))
                    if accuracy and (not best or statistics.mean(accuracy) > statistics.mean(best)):
                        best, best_name, best_wall = accuracy, name, wall
                if not best:
                    continue
                label = algorithm + (f" (μ = {best_name.split('-mu')[1]})" if "-mu" in best_name else "")
                figure = paper.get((data, partition, algorithm), "—")
                print(f"| {NAMES[partition]} | {label} | {cell(best)} | {figure} | "
                      f"{statistics.mean(best_wall):.0f} |")

if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
