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
import socket
import subprocess
import sys
import time

import numpy as np

from . import _fedprof
from .data import Dataset, _inputs
from .parts import Aggregator, AlgorithmResult, ClientAlgorithm, Clients, Result, Selector, Strategy, _spec

Rng = _fedprof.Rng

__all__ = ["Aggregator", "AlgorithmResult", "ClientAlgorithm", "Clients", "Comparison", "Dataset", "Result", "Rng", "Run", "Selector", "Strategy",
           "compare", "divergence", "dp_epsilon", "label_leakage", "launch", "options", "payload", "profile",
           "read_profile", "resume", "serve", "simulate"]


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


class _NoProgress:
    # Python shows whatever progress is asked for: the engine prints no
    # line of its own (in a notebook its stdout would not show anyway).
    assignments = ["report.progress=false"]

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class _Progress(_NoProgress):
    """progress=True: a tqdm bar where tqdm is installed, else a line per
    round (the one fedprof simulate prints)."""

    def __init__(self, rounds):
        self.rounds = rounds
        self.bar = None

    def __enter__(self):
        try:
            import tqdm  # noqa: PLC0415 - optional
        except ImportError:
            return self.line
        self.bar = tqdm.tqdm(total=self.rounds, unit="round")
        return self.tick

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False

    @staticmethod
    def _accuracy(m):
        return "-" if m["accuracy"] is None else f"{m['accuracy']:.4f}"

    @staticmethod
    def line(m):
        print(m["line"], flush=True)

    def tick(self, m):
        self.bar.set_postfix(accuracy=self._accuracy(m), refresh=False)
        self.bar.update(1)


class _Callback(_NoProgress):
    def __init__(self, callback):
        self.callback = callback

    def __enter__(self):
        return self.callback


def _progress(progress, rounds):
    """A context giving the callback handed to the engine: `progress`
    itself, a bar or a line per round for True, nothing for None."""
    if progress is None or progress is False:
        return _NoProgress()
    if progress is True:
        return _Progress(rounds)
    if callable(progress):
        return _Callback(progress)
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

    def __init__(self, out, data=None, parts=None):
        self.out = out
        # What state_dict() needs again: the in-memory data, the Python parts.
        self._data = data
        self._parts = parts
        self.metrics = _read_csv(os.path.join(out, "metrics.csv"))
        clients = os.path.join(out, "clients.csv")
        self.clients = _read_csv(clients) if os.path.exists(clients) else {}
        summary = os.path.join(out, "summary.json")
        self.summary = None
        if os.path.exists(summary):
            with open(summary) as f:
                self.summary = json.load(f)

    def state_dict(self):
        """The final global model (the last completed round's) as
        {name: NumPy array}, parameters then buffers, named as the model
        names them (a module's own names for model.file)."""
        parts = self._parts
        return _fedprof.state_dict(self.out, parts)

    def model(self):
        """The final global model as a torch.nn.Module, for runs of a
        TorchScript module (model.file, or simulate(model=...)): the module
        with the run's parameters loaded. Built-in models exist only in
        the engine; state_dict() gives their values."""
        import torch  # noqa: PLC0415 - optional, and slow to import

        path = _read_option(self.out, "model", "file")
        if not path:
            raise ValueError(f"{self.out}: the run trained a built-in model (model.name); use state_dict()")
        module = torch.jit.load(path)
        module.load_state_dict({k: torch.from_numpy(v) for k, v in self.state_dict().items()})
        return module

    def metrics_frame(self):
        """metrics.csv as a pandas DataFrame (needs pandas)."""
        import pandas  # noqa: PLC0415 - optional

        return pandas.DataFrame(self.metrics)

    def __repr__(self):
        rounds = len(next(iter(self.metrics.values()), []))
        return f"Run({self.out!r}, {rounds} rounds)"


def _read_option(out, section, key):
    import tomllib  # noqa: PLC0415

    with open(os.path.join(out, "config.toml"), "rb") as f:
        return tomllib.load(f).get(section, {}).get(key, "")


def _default_out(kind="python"):
    return os.path.join("runs", kind + "-" + time.strftime("%Y%m%d-%H%M%S"))


def _config_path(config):
    if isinstance(config, (str, os.PathLike)):
        return os.fspath(config)
    if config is not None and not isinstance(config, dict):
        raise TypeError("config: a TOML file's path, a dict of options or None")
    return ""


def _scripted(model, out):
    """`model` (a torch.nn.Module) saved as TorchScript in the run
    directory, for model.file: the engine trains that file's module."""
    import torch  # noqa: PLC0415 - optional, and slow to import

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    try:
        scripted = model if isinstance(model, torch.jit.ScriptModule) else torch.jit.script(model)
    except Exception as e:  # noqa: BLE001 - TorchScript raises many kinds
        raise ValueError(f"model: torch.jit.script cannot compile {type(model).__name__} ({e}); "
                         "pass a ScriptModule (torch.jit.trace(model, example)) instead") from None
    os.makedirs(out, exist_ok=True)
    path = os.path.abspath(os.path.join(out, "model.pt"))
    scripted.save(path)
    return path


class _Parts:
    """What simulate, compare and resume take from Python besides options:
    the Python selectors, aggregators and client algorithms to register,
    and the assignments that name them and the data and model."""

    def __init__(self, overrides, selector=None, aggregator=None, data=None, model=None, out=None, strategy=None,
                 algorithm=None):
        self.selectors, self.aggregators, self.algorithms, self.assignments = [], [], [], []
        if strategy is not None:
            if not isinstance(strategy, Strategy):
                raise TypeError(f"strategy: expected a fedprof.Strategy, got {type(strategy).__name__}")
            if selector is not None or aggregator is not None:
                raise ValueError("strategy= is a selector and an aggregator: give it alone")
            selector = aggregator = strategy
        for part, kind, option in ((selector, Selector, "strategy__selector"),
                                   (aggregator, Aggregator, "strategy__aggregator"),
                                   (algorithm, ClientAlgorithm, "strategy__algorithm")):
            if part is None:
                continue
            if option in overrides:
                raise ValueError(f"{option.replace('__', '.')} and {option.split('__')[1]}= both name the "
                                 f"{option.split('__')[1]}; give one")
            if isinstance(part, str):
                self.assignments.append(f"{option.replace('__', '.')}={part}")
            elif isinstance(part, kind):
                self.add(part)
                self.assignments.append(f"{option.replace('__', '.')}={part.name}")
            else:
                raise TypeError(f"{option.split('__')[1]}: expected a fedprof.{kind.__name__} or a built-in's "
                                f"name, got {type(part).__name__}")
        if data is not None:
            if not isinstance(data, Dataset):
                raise TypeError(f"data: expected a fedprof.Dataset, got {type(data).__name__}")
            self.assignments += data._assignments()
            if data.partition is not None:
                if "partition__kind" not in overrides:
                    self.assignments.append("partition.kind=given")
                if "clients__count" not in overrides:
                    self.assignments.append(f"clients.count={len(data.partition)}")
        if model is not None:
            self.assignments.append(f"model.file={_scripted(model, out)}")

    def add(self, part):
        """Registers a Python part (once, however often it is named); a
        Strategy is both a selector and an aggregator."""
        for kind, into in ((Selector, self.selectors), (Aggregator, self.aggregators),
                           (ClientAlgorithm, self.algorithms)):
            if isinstance(part, kind) and not any(p is part for p in into):
                into.append(part)


def simulate(config=None, out=None, progress=None, *, strategy=None, selector=None, aggregator=None, algorithm=None,
             data=None, model=None, overwrite=False, **overrides):
    """Runs one simulated federated training and returns its Run.

    config      a TOML file's path, a dict of options (nested by section or
                dotted keys), or None for the defaults
    out         the run directory (default runs/python-<time>); one that
                holds a run already is refused unless overwrite=True
    progress    a callable given each completed round's metrics (a dict),
                True for a line per round (a tqdm bar where tqdm is
                installed), or None
    strategy    a fedprof.Strategy (its selector and aggregator at once)
    selector    a fedprof.Selector, or a built-in selector's name
    aggregator  a fedprof.Aggregator, or a built-in aggregator's name
    algorithm   a fedprof.ClientAlgorithm, or a built-in client
                algorithm's name (strategy.algorithm)
    data        a fedprof.Dataset (NumPy arrays, torch Datasets, a given
                partition) instead of data.name's files
    model       a torch.nn.Module, scripted and trained instead of
                model.name (saved as <out>/model.pt, model.file)
    overrides   options by name, '__' for '.': rounds=5, strategy__name="fedprof"

    Raises ValueError for a bad option, KeyboardInterrupt on Ctrl-C (at the
    end of a round, or in a Python hook; fedprof.resume(out) continues),
    RuntimeError when the run fails, or whatever a hook or the progress
    callback raised (the run stops; what is on disk resumes).
    """
    out = os.fspath(out) if out is not None else _default_out()
    parts = _Parts(overrides, selector, aggregator, data, model, out, strategy, algorithm)
    rounds = overrides.get("rounds", (config or {}).get("rounds") if isinstance(config, dict) else None)
    shown = _progress(progress, rounds)
    with shown as callback:
        _fedprof.simulate(_config_path(config), shown.assignments + _assignments(config, overrides) + parts.assignments,
                          out, callback, parts, bool(overwrite))
    return Run(out, data, parts)


def _refuse_client_algorithm(overrides, why):
    if "algorithm" in overrides:
        raise ValueError(f"algorithm: a fedprof.ClientAlgorithm runs in this process's clients, and {why}; "
                         "simulate, compare or resume it (built-in client algorithms: strategy__algorithm)")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_environment(rank, nproc, port):
    # The CLI's own (fedprof launch): one home for what a rank is given.
    return dict(_fedprof.rank_environment(rank, nproc, port))


def launch(config=None, nproc=2, out=None, progress=None, *, strategy=None, selector=None, aggregator=None,
           rendezvous_timeout_s=60.0, **overrides):
    """Runs a simulation over `nproc` ranks of torch.distributed (Gloo) on
    this machine, as `fedprof launch --nproc N -- simulate` does, with the
    same numbers as simulate, and returns its Run.

    Rank 0 runs in this process (the server: selection, aggregation, the
    Python parts, progress); ranks 1 .. nproc-1 are child processes of this
    Python that train their share of the clients and end with the run
    (terminated, then killed, 10 s after it if they have not). Data must
    come from files (data.name): a fedprof.Dataset lives in this process
    only.
    """
    if nproc < 1:
        raise ValueError(f"nproc: expected 1 or more, got {nproc}")
    _refuse_client_algorithm(overrides, "launch's ranks > 0 train clients in processes of their own")
    if "data" in overrides:
        raise ValueError("data: launch's ranks read their data from files (data.name); a fedprof.Dataset "
                         "lives in this process only")
    if strategy is not None:
        if selector is not None or aggregator is not None:
            raise ValueError("strategy= is a selector and an aggregator: give it alone")
        selector = aggregator = strategy
    # What the ranks > 0 need of the Python parts: their names, the reports a selector asks for.
    names = ([(selector.name, list(selector._reports()))] if isinstance(selector, Selector) else [],
             [aggregator.name] if isinstance(aggregator, Aggregator) else [])
    port = _free_port()
    workers = []
    saved = {k: os.environ.get(k) for k in _rank_environment(0, nproc, port)}
    try:
        for rank in range(1, nproc):
            env = dict(os.environ, **_rank_environment(rank, nproc, port))
            script = f"import fedprof._fedprof as f; f.worker({float(rendezvous_timeout_s)!r}, *{names!r})"
            workers.append(subprocess.Popen([sys.executable, "-c", script], env=env))
        os.environ.update(_rank_environment(0, nproc, port))
        return simulate(config, out, progress, selector=selector, aggregator=aggregator, **overrides)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for w in workers:
            try:
                w.wait(timeout=10)
            except subprocess.TimeoutExpired:
                w.terminate()
                try:
                    w.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    w.kill()
                    w.wait()


def serve(config=None, out=None, progress=None, *, listen="127.0.0.1:50051", tls_dir=None, insecure=False,
          strategy=None, selector=None, aggregator=None, overwrite=False, **overrides):
    """Runs a deployment's server in this process, as `fedprof server`
    does, and returns its Run when the run is over: clients on other
    machines (`fedprof client --server HOST:PORT --id K`) connect over gRPC
    with mutual TLS (tls_dir holds ca.crt, server.crt, server.key), or in
    plaintext with insecure=True on a loopback address only. Python
    selectors and aggregators run here, on the server, on the results in
    the order they arrive (their numbers are a simulation's when the
    clients are the simulation's). An `out` that holds a run already is
    refused unless overwrite=True."""
    _refuse_client_algorithm(overrides, "a deployment's clients run on their own machines")
    out = os.fspath(out) if out is not None else _default_out("python-server")
    parts = _Parts(overrides, selector, aggregator, strategy=strategy)
    shown = _progress(progress, overrides.get("rounds"))
    with shown as callback:
        _fedprof.serve(_config_path(config), shown.assignments + _assignments(config, overrides) + parts.assignments,
                       out, listen,
                       os.fspath(tls_dir) if tls_dir else "", bool(insecure), callback, parts, bool(overwrite))
    return Run(out, None, parts)


def resume(out, progress=None, *, strategy=None, selector=None, aggregator=None, algorithm=None, data=None,
           **overrides):
    """Continues the run in `out` from its last completed round (after a
    Ctrl-C, a crash or a kill) and returns its Run; `overrides` may change
    only the options a resume may (rounds, threads, ...). A run of Python
    parts or of a fedprof.Dataset needs them again (the same data; parts
    of the same names)."""
    out = os.fspath(out)
    parts = _Parts({}, selector, aggregator, strategy=strategy, algorithm=algorithm)
    if data is not None and not isinstance(data, Dataset):
        raise TypeError(f"data: expected a fedprof.Dataset, got {type(data).__name__}")
    shown = _progress(progress, overrides.get("rounds"))
    with shown as callback:
        _fedprof.resume(out, shown.assignments + _assignments(None, overrides), callback, parts)
    return Run(out, data, parts)


def profile(run, data, layer=None):
    """The representation profile (Eq. 8) of `data` under `run`'s final
    model, as `fedprof profile` computes it: a dict of layer, version (the
    model's), samples, and per-unit mean and var (NumPy arrays).

    run    a Run, or a run directory
    data   inputs (an array, scaled as fedprof.Dataset scales them), or a
           fedprof.Dataset (its test set)
    layer  the layer to profile; default the run's (model.profile_layer)
    """
    if not isinstance(run, Run):
        run = Run(os.fspath(run))
    x = data.test_x if isinstance(data, Dataset) else _inputs(data, "data")
    return _fedprof.profile(run.out, x, layer or "", run._parts)


def divergence(profile, reference, alpha=10.0):
    """FedProf's divergence of a profile from a reference profile (Eq. 9),
    its score exp(-alpha * divergence) (Eq. 13) and the per-unit KL
    (Eq. 10), as `fedprof divergence` computes them. Profiles are dicts as
    fedprof.profile returns them, or profile JSON files' paths."""
    def load(p):
        return _fedprof.read_profile(os.fspath(p)) if isinstance(p, (str, os.PathLike)) else p

    return _fedprof.divergence(load(profile), load(reference), float(alpha))


def read_profile(path):
    """A profile JSON file, as `fedprof profile` writes it, as a dict."""
    return _fedprof.read_profile(os.fspath(path))


def payload(model="vgg16", input=(3, 224, 224), classes=10, cut="fc2", **setup):  # noqa: A002
    """The FbFTL paper's closed-form uplink and downlink payloads and client
    compute of FL, SFL, FTL_f, FTL_c and FbFTL (Eqs. 2-17), as `fedprof
    payload` prints them: a list of dicts (scheme, upload_batches,
    params_per_batch, bits_per_batch, uplink_bits, downlink_bits,
    client_macs).

    model   vgg16, a transfer architecture (vgg_small, lenet5) or a staged
            model file
    input   (C, H, W) of one sample
    cut     the first layer of the trained head
    setup   clients (U), samples_per_client (K_u), fraction (C), bits (d),
            epochs_fl, epochs_ftl_f, epochs_ftl_c; the paper's by default
    """
    s = _fedprof.PayloadSetup()
    for key, value in setup.items():
        if not hasattr(s, key):
            raise ValueError(f"payload: unknown setting {key!r}; expected one of clients, samples_per_client, "
                             "fraction, bits, epochs_fl, epochs_ftl_f, epochs_ftl_c")
        setattr(s, key, value)
    return _fedprof.payload(os.fspath(model), [int(d) for d in input], int(classes), cut, s)


def dp_epsilon(noise_multiplier, sample_rate, steps, delta=1e-6):
    """epsilon at `delta` of `steps` releases of the subsampled Gaussian
    mechanism (each record in a step with probability sample_rate, noise
    sd = noise_multiplier x the clip norm), by the Renyi-DP accountant, as
    `fedprof privacy dp` prints it: a dict of epsilon and the RDP order
    that gives it (0 when nothing depends on the data)."""
    return _fedprof.dp_epsilon(float(noise_multiplier), float(sample_rate), int(steps), float(delta))


def label_leakage(classes=10, samples_per_client=8, distribution=None, clients=0, seed=1):
    """Label privacy leakage of K labels per client (FbFTL, Eqs. 23-36), as
    `fedprof privacy label --json` prints it: batch_types, h_uniform_bits,
    h_true_bits, leakage_s_bits (Eq. 28) and, with clients = U > 0 shuffled
    batches drawn from `seed`, h_query_bits, leakage_q_bits (Eq. 34) and
    leakage_t_bits (Eq. 36). distribution: the true label distribution
    (default uniform)."""
    return _fedprof.label_leakage(int(classes), int(samples_per_client), list(distribution or []), int(clients),
                                  int(seed))


class Comparison:
    """A comparison's outputs, read from its directory.

    out      the directory (comparison.md, comparison.csv, accuracy.png, a
             folder per strategy)
    table    comparison.md's table, as `fedprof compare` prints it
    results  comparison.csv: {column: array}, a row per run
    runs     {"<label>-<aggregation>": [Run of each seed, in seed order]}
    """

    def __init__(self, out, table, data=None, parts=None):
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
                self.runs[name] = [Run(os.path.join(folder, d), data, parts) for d in seeds]

    def __repr__(self):
        return f"Comparison({self.out!r}, {sorted(self.runs)})"


def compare(strategies, seeds=1, config=None, out=None, progress=None, *, algorithm=None, data=None, overwrite=False,
            **overrides):
    """Runs each strategy over `seeds` seeds on otherwise identical runs, one
    after the other, as `fedprof compare --jobs 1` does, and returns the
    Comparison.

    strategies  a list of: names as fedprof compare takes them ("fedavg",
                "fedavg:partial", "fedprof+fedadam"), fedprof.Strategy
                objects, (selector, aggregator) pairs of names or Python
                parts; or a comma-separated string of names
    progress    as simulate's; each round's dict also names its "run"
    algorithm   a fedprof.ClientAlgorithm or a built-in's name, for every
                run (strategy.algorithm)
    data        a fedprof.Dataset, as simulate's
    overwrite   replace the runs already in `out` (refused without it)
    """
    if isinstance(strategies, str):
        strategies = [s for s in strategies.split(",") if s]
    out = os.fspath(out) if out is not None else _default_out("python-compare")
    parts = _Parts(overrides, data=data, algorithm=algorithm)
    specs = []
    for entry in strategies:
        spec, python_parts = _spec(entry)
        for part in python_parts:
            parts.add(part)
        specs.append(spec)
    shown = _progress(progress, None)
    with shown as callback:
        table = _fedprof.compare(_config_path(config), shown.assignments + _assignments(config, overrides)
                                 + parts.assignments, specs, int(seeds), out, callback, parts, bool(overwrite))
    return Comparison(out, table, data, parts)
