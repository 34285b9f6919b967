"""FedProf from Python: simulated federated runs on the same engine as the CLI.

    import fedprof
    run = fedprof.simulate("configs/default.toml", rounds=20, strategy__name="fedprof")
    run.metrics["accuracy"]          # one NumPy array per metrics.csv column
    run.summary["final_model_sha256"]

Options are those of `fedprof options` (fedprof.options() lists them): a
config file or dict, then keyword overrides, where a double underscore
stands for the dot of a section (train__lr=0.01 sets train.lr). A bad
option raises ValueError naming it and the nearest valid one. The numbers
are the CLI's, bit for bit. While a run computes, the GIL is released; a
Ctrl-C stops it at the end of the current round with KeyboardInterrupt,
leaving a run directory that fedprof.resume(out) continues.
"""

import csv
import json
import os
import time

import numpy as np

from . import _fedprof

__all__ = ["Comparison", "Run", "compare", "options", "resume", "simulate"]


def options():
    """Every option of a run, as dicts: name, type, default, valid values,
    whether a resume may change it, and its description."""
    return _fedprof.options()


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)


def _assignments(config, overrides):
    """`config` (a dict, nested by section or with dotted keys) and the
    keyword overrides, as the CLI's --set assignments, in that order."""
    out = []

    def flatten(prefix, d):
        for key, value in d.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                flatten(name, value)
            else:
                out.append(f"{name}={_text(value)}")

    if isinstance(config, dict):
        flatten("", config)
    for key, value in overrides.items():
        out.append(f"{key.replace('__', '.')}={_text(value)}")
    return out


def _progress(progress):
    """The callback handed to the engine: `progress` itself, a line per
    round for True, nothing for None."""
    if progress is None or progress is False:
        return None
    if callable(progress):
        return progress
    if progress is True:
        def line(m):
            acc = "-" if m["accuracy"] is None else f"{m['accuracy']:.4f}"
            print(f"round {m['round']}: accuracy {acc}, {m['returned']}/{m['selected']} clients", flush=True)
        return line
    raise TypeError("progress: a callable taking each round's metrics (a dict), True or None")


def _read_csv(path):
    """A CSV written by a run as {column: NumPy array}: numbers as float64
    (an empty cell is NaN), other columns as str arrays."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    columns = {}
    for i, name in enumerate(header):
        cells = [r[i] if i < len(r) else "" for r in body]
        try:
            columns[name] = np.array([float(c) if c != "" else np.nan for c in cells], dtype=np.float64)
        except ValueError:
            columns[name] = np.array(cells, dtype=str)
    return columns


class Run:
    """A finished (or interrupted) run's outputs, read from its directory.

    out      the run directory (config.toml, metrics.csv, clients.csv,
             summary.json, checkpoint.bin)
    metrics  metrics.csv: {column: array}, a row per round
    clients  clients.csv: {column: array}, a row per client
    summary  summary.json as a dict (None while the run has not finished)
    """

    def __init__(self, out):
        self.out = out
        self.metrics = _read_csv(os.path.join(out, "metrics.csv"))
        clients = os.path.join(out, "clients.csv")
        self.clients = _read_csv(clients) if os.path.exists(clients) else {}
        summary = os.path.join(out, "summary.json")
        self.summary = None
        if os.path.exists(summary):
            with open(summary) as f:
                self.summary = json.load(f)

    def metrics_frame(self):
        """metrics.csv as a pandas DataFrame (needs pandas)."""
        import pandas  # noqa: PLC0415 - optional

        return pandas.DataFrame(self.metrics)

    def __repr__(self):
        rounds = len(next(iter(self.metrics.values()), []))
        return f"Run({self.out!r}, {rounds} rounds)"


def _default_out(kind="python"):
    return os.path.join("runs", kind + "-" + time.strftime("%Y%m%d-%H%M%S"))


def _config_path(config):
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config)
    if config is not None and not isinstance(config, dict):
        raise TypeError("config: a TOML file's path, a dict of options or None")
    return ""


def simulate(config=None, out=None, progress=None, **overrides):
    """Runs one simulated federated training and returns its Run.

    config     a TOML file's path, a dict of options (nested by section or
               dotted keys), or None for the defaults
    out        the run directory (default runs/python-<time>)
    progress   a callable given each completed round's metrics (a dict), True
               for a line per round, or None
    overrides  options by name, '__' for '.': rounds=5, strategy__name="fedprof"

    Raises ValueError for a bad option, KeyboardInterrupt on Ctrl-C (at the
    end of a round; fedprof.resume(out) continues), RuntimeError when the
    run fails, or whatever the progress callback raised.
    """
    out = os.fspath(out) if out is not None else _default_out()
    _fedprof.simulate(_config_path(config), _assignments(config, overrides), out, _progress(progress))
    return Run(out)


def resume(out, progress=None, **overrides):
    """Continues the run in `out` from its last completed round (after a
    Ctrl-C, a crash or a kill) and returns its Run; `overrides` may change
    only the options a resume may (rounds, threads, ...)."""
    out = os.fspath(out)
    _fedprof.resume(out, _assignments(None, overrides), _progress(progress))
    return Run(out)


class Comparison:
    """A comparison's outputs, read from its directory.

    out      the directory (comparison.md, comparison.csv, accuracy.png, a
             folder per strategy)
    table    comparison.md's table, as `fedprof compare` prints it
    results  comparison.csv: {column: array}, a row per run
    runs     {"<label>-<aggregation>": [Run of each seed, in seed order]}
    """

    def __init__(self, out, table):
        self.out = out
        self.table = table
        self.results = _read_csv(os.path.join(out, "comparison.csv"))
        self.runs = {}
        for name in sorted(os.listdir(out)):
            folder = os.path.join(out, name)
            if not os.path.isdir(folder):
                continue
            seeds = sorted((d for d in os.listdir(folder) if d.startswith("seed-")), key=lambda d: int(d[5:]))
            if seeds:
                self.runs[name] = [Run(os.path.join(folder, d)) for d in seeds]

    def __repr__(self):
        return f"Comparison({self.out!r}, {sorted(self.runs)})"


def compare(strategies, seeds=1, config=None, out=None, progress=None, **overrides):
    """Runs each strategy over `seeds` seeds on otherwise identical runs, one
    after the other, as `fedprof compare --jobs 1` does, and returns the
    Comparison.

    strategies  names as fedprof compare takes them ("fedavg",
                "fedavg:partial", "fedprof+fedadam"), a list or a
                comma-separated string
    progress    as simulate's; each round's dict also names its "run"
    """
    if isinstance(strategies, str):
        strategies = [s for s in strategies.split(",") if s]
    out = os.fspath(out) if out is not None else _default_out("python-compare")
    table = _fedprof.compare(_config_path(config), _assignments(config, overrides), list(strategies),
                             int(seeds), out, _progress(progress))
    return Comparison(out, table)
