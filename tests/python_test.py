"""`import fedprof` against the CLI: the same numbers, the option table's
errors, progress, Ctrl-C and resume. Run by ctest (python.api) with
PYTHONPATH at the build tree's python/ and FEDPROF_CLI at the built tool."""

import csv
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fedprof

CLI = os.environ.get("FEDPROF_CLI", "build/fedprof")

# A small run of each kind (as the C++ tests' SmallRun): 10 clients, 3 of
# them a round, 3 rounds.
SMALL = {
    "data.train_limit": 1000,
    "data.test_limit": 500,
    "clients.count": 10,
    "strategy.fraction": 0.3,
    "rounds": 3,
    "partition.kind": "iid",
    "train.epochs": 1,
    "quality.blurred": 0.2,
    "data.holdout_share": 0.1,
    "report.progress": False,
    "threads": 2,
}


def cli_run(out, options):
    sets = []
    for key, value in options.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        sets += ["--set", f"{key}={text}"]
    done = subprocess.run([CLI, "simulate", "--out", str(out)] + sets, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return fedprof.Run(str(out))


def reproducible_rows(path):
    """metrics.csv without wall_s, the one column that is not reproducible."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    drop = rows[0].index("wall_s")
    return [[c for i, c in enumerate(r) if i != drop] for r in rows]


@pytest.mark.parametrize("strategy", ["fedavg", "fedprof"])
def test_numbers_are_the_clis(tmp_path, strategy):
    options = dict(SMALL, **{"strategy.name": strategy})
    cli = cli_run(tmp_path / "cli", options)
    py = fedprof.simulate(options, out=tmp_path / "py")
    assert py.summary["final_model_sha256"] == cli.summary["final_model_sha256"]
    py_rows = reproducible_rows(tmp_path / "py" / "metrics.csv")
    assert py_rows == reproducible_rows(tmp_path / "cli" / "metrics.csv")
    assert list(py.metrics["round"]) == [1.0, 2.0, 3.0]
    assert py.metrics["accuracy"].dtype == np.float64


@pytest.mark.parametrize("partition", [
    {"partition.kind": "dirichlet", "partition.beta": 0.5, "partition.min_size": 20},
    {"partition.kind": "classes", "partition.classes": 2, "quality.feature_skew": 0.3},
    {"partition.kind": "sampled_dirichlet", "partition.size_mean": 80, "partition.size_sd": 10},
    {"partition.kind": "dirichlet", "partition.min_size": 20, "strategy.name": "scaffold"},
])
def test_label_skewed_partitions_and_client_algorithms_are_the_clis(tmp_path, partition):
    options = dict(SMALL, **partition)
    cli = cli_run(tmp_path / "cli", options)
    py = fedprof.simulate(options, out=tmp_path / "py")
    assert py.summary["final_model_sha256"] == cli.summary["final_model_sha256"]
    assert py.summary["partition_js"] == cli.summary["partition_js"] > 0.05
    labels = [name for name in py.clients if name.startswith("label_")]
    assert labels == [f"label_{c}" for c in range(10)]
    counts = np.stack([py.clients[name] for name in labels], axis=1)
    assert (counts == np.stack([cli.clients[name] for name in labels], axis=1)).all()
    assert (counts.sum(axis=1) == py.clients["size"]).all()


def test_the_numbers_do_not_depend_on_the_processs_thread_settings(tmp_path):
    # Python cannot set OMP_NUM_THREADS before the BLAS loads, and a user may
    # ask the CLI for more: a product split over threads must not move a number.
    reference = cli_run(tmp_path / "cli", SMALL)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    script = f"import fedprof; print(fedprof.simulate({SMALL!r}, out={str(tmp_path / 'py')!r}).summary['final_model_sha256'])"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == reference.summary["final_model_sha256"]
    sets = sum((["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"] for k, v in SMALL.items()), [])
    done = subprocess.run([CLI, "simulate", "--out", str(tmp_path / "omp2")] + sets, capture_output=True, text=True,
                          timeout=300, env=dict(env, OMP_NUM_THREADS="2"))
    assert done.returncode == 0, done.stderr
    assert fedprof.Run(str(tmp_path / "omp2")).summary["final_model_sha256"] == reference.summary["final_model_sha256"]


def test_from_another_directory_it_finds_the_data_and_shows_each_round_once(tmp_path):
    """As a reader of python.md runs it, outside the repository: MNIST is
    found beside the repository the package was built in (not beside
    /usr/bin/python3), and progress=True prints each round's line once."""
    import importlib.util

    env = {k: v for k, v in os.environ.items() if k != "FEDPROF_DATA"}
    options = {k: v for k, v in SMALL.items() if k != "report.progress"}
    options.update({"data.name": "mnist", "rounds": 2})
    script = f"import fedprof; fedprof.simulate({options!r}, out='run', progress=True)"
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("round")]
    # With tqdm installed the rounds go to its bar on stderr instead.
    assert shown == ([] if importlib.util.find_spec("tqdm") else ["1/2", "2/2"]), done.stdout


def test_keywords_and_a_config_file_are_options_too(tmp_path):
    config = tmp_path / "small.toml"
    config.write_text("rounds = 2\n[train]\nepochs = 1\n")
    rest = {k: v for k, v in SMALL.items() if k not in ("rounds", "train.epochs")}
    a = fedprof.simulate(config, out=tmp_path / "a", **{k.replace(".", "__"): v for k, v in rest.items()})
    b = fedprof.simulate(dict(rest, **{"rounds": 2, "train.epochs": 1}), out=tmp_path / "b")
    assert a.summary["final_model_sha256"] == b.summary["final_model_sha256"]
    assert len(a.metrics["round"]) == 2
    # A run already in `out` is kept unless overwrite=True replaces it.
    one_round = dict(rest, **{"rounds": 1, "train.epochs": 1})
    with pytest.raises(RuntimeError, match=r"holds a run already.*overwrite=True"):
        fedprof.simulate(one_round, out=tmp_path / "b")
    assert len(fedprof.Run(tmp_path / "b").metrics["round"]) == 2
    assert len(fedprof.simulate(one_round, out=tmp_path / "b", overwrite=True).metrics["round"]) == 1


def test_a_bad_option_is_one_value_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"strategy\.nmae.*strategy\.name"):
        fedprof.simulate(out=tmp_path / "x", strategy__nmae="fedprof")
    with pytest.raises(ValueError, match=r"rounds"):
        fedprof.simulate(out=tmp_path / "y", rounds=0)
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_options_are_the_table():
    table = {o["name"]: o for o in fedprof.options()}
    assert table["rounds"]["resumable"] and table["rounds"]["type"] == "int"
    assert "fedprof" in table["strategy.name"]["valid"]
    assert not table["seed"]["resumable"]


def test_progress_sees_every_round_and_its_exception_ends_the_run(tmp_path):
    seen = []
    fedprof.simulate(SMALL, out=tmp_path / "a", progress=seen.append)
    assert [m["round"] for m in seen] == [1, 2, 3]
    assert seen[-1]["accuracy"] is not None

    class Stop(Exception):
        pass

    def stop_at_two(m):
        if m["round"] == 2:
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        fedprof.simulate(SMALL, out=tmp_path / "b", progress=stop_at_two)


# A SIGINT to itself, as a Ctrl-C in a terminal would be: from the progress
# callback after round 1, or from another thread while round 2 computes.
CTRL_C_IN_CALLBACK = """
def ctrl_c(m):
    if m["round"] == 1:
        os.kill(os.getpid(), signal.SIGINT)
"""
CTRL_C_WHILE_COMPUTING = """
import threading
first_round = threading.Event()
def interrupt():
    first_round.wait()
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt).start()
def ctrl_c(m):
    if m["round"] == 1:
        first_round.set()
"""


@pytest.mark.parametrize("when", [CTRL_C_IN_CALLBACK, CTRL_C_WHILE_COMPUTING])
def test_ctrl_c_stops_at_a_rounds_end_and_the_run_resumes_to_the_same_model(tmp_path, when):
    options = dict(SMALL, rounds=6)
    whole = fedprof.simulate(options, out=tmp_path / "whole")
    script = "import os, signal, sys, fedprof\n" + when + textwrap.dedent(f"""
        try:
            fedprof.simulate({options!r}, out={str(tmp_path / "cut")!r}, progress=ctrl_c)
        except KeyboardInterrupt as e:
            print("interrupted:", e)
            sys.exit(3)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ))
    assert done.returncode == 3, done.stdout + done.stderr
    cut = fedprof.Run(str(tmp_path / "cut"))
    stopped_after = len(cut.metrics["round"])
    assert 1 <= stopped_after < 6 and cut.summary is None
    assert f"interrupted after round {stopped_after};" in done.stdout
    resumed = fedprof.resume(tmp_path / "cut")
    assert resumed.summary["final_model_sha256"] == whole.summary["final_model_sha256"]
    assert list(resumed.metrics["round"]) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_compare_is_the_clis(tmp_path):
    options = dict(SMALL, rounds=2)
    sets = []
    for key, value in options.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        sets += ["--set", f"{key}={text}"]
    command = [CLI, "compare", "--strategies", "fedavg,fedprof", "--seeds", "2", "--jobs", "1",
               "--out", str(tmp_path / "cli")]
    done = subprocess.run(command + sets, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    labels = []
    py = fedprof.compare("fedavg,fedprof", seeds=2, config=options, out=tmp_path / "py",
                         progress=lambda m: labels.append(m["run"]))
    assert sorted(py.runs) == ["fedavg-full", "fedprof-full"]
    assert [len(r) for r in py.runs.values()] == [2, 2]
    for label, runs in py.runs.items():
        for seed, run in enumerate(runs, start=1):
            cli = fedprof.Run(str(tmp_path / "cli" / label / f"seed-{seed}"))
            assert run.summary["final_model_sha256"] == cli.summary["final_model_sha256"]
    cli_results = fedprof._read_csv(str(tmp_path / "cli" / "comparison.csv"))
    assert sorted(py.results) == sorted(cli_results)
    for column in py.results:
        if column == "strategy":
            assert list(py.results[column]) == list(cli_results[column])
        elif column != "wall_s":
            np.testing.assert_array_equal(py.results[column], cli_results[column], err_msg=column)
    assert "| fedprof-full |" in py.table
    assert len(labels) == 8 and len(set(labels)) == 4  # 2 rounds of each of the 4 runs
