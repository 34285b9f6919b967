"""Strategies, data and models from Python: Python selectors and
aggregators against the built-in ones they reimplement, data from NumPy
against the same data read from IDX files, hooks that fail or misbehave,
and the final model back in Python. Run by ctest (python.api) with
PYTHONPATH at the build tree's python/."""

import hashlib
import os
import traceback

import numpy as np
import pytest

import fedprof
from python_test import SMALL  # the small run of both files

MNIST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "mnist")



class Uniform(fedprof.Selector):
    """The built-in uniform selector, in Python: a partial Fisher-Yates
    shuffle drawn from the run's stream."""

    def select(self, round, clients, k):  # noqa: A002
        n = len(clients)
        k = min(k, n)
        order = np.arange(n)
        for i in range(k):
            j = i + self.rng.index(n - i)
            order[i], order[j] = order[j], order[i]
        return clients.ids[np.sort(order[:k])]


class Average(fedprof.Aggregator):
    """FedAvg's full aggregation (Eq. 8), in Python."""

    def aggregate(self, round, global_model, results, total_samples):  # noqa: A002
        g = global_model.astype(np.float64)
        step = np.zeros_like(g)
        for r in results:
            step += r.num_samples * (r.params.astype(np.float64) - g)
        return (g + step / total_samples).astype(np.float32)


def model_hash(run):
    return run.summary["final_model_sha256"]


@pytest.mark.parametrize("aggregator", ["average", "fedadam"])
def test_a_python_uniform_selector_gives_the_builtins_model(tmp_path, aggregator):
    options = dict(SMALL, **{"strategy.aggregator": aggregator})
    builtin = fedprof.simulate(options, out=tmp_path / "builtin")
    python = fedprof.simulate(options, out=tmp_path / "python", selector=Uniform())
    assert model_hash(python) == model_hash(builtin)
    with open(tmp_path / "python" / "config.toml") as f:
        assert 'selector = "python.uniform"' in f.read()


def test_a_python_average_gives_the_builtins_model(tmp_path):
    builtin = fedprof.simulate(SMALL, out=tmp_path / "builtin")
    python = fedprof.simulate(SMALL, out=tmp_path / "python", aggregator=Average())
    both = fedprof.simulate(SMALL, out=tmp_path / "both", selector=Uniform(), aggregator=Average(), threads=1)
    assert model_hash(python) == model_hash(builtin) == model_hash(both)


def test_compare_takes_python_strategies(tmp_path):
    options = dict(SMALL, rounds=2)
    c = fedprof.compare(["fedavg", (Uniform(), Average()), fedprof.Strategy()], config=options, out=tmp_path / "c")
    assert sorted(c.runs) == ["fedavg-full", "python.strategy+python.strategy-full",
                              "python.uniform+python.average-full"]
    assert len({model_hash(runs[0]) for runs in c.runs.values()}) == 1


class EvaluateFirst(fedprof.Strategy):
    """FedAvg's fit; federated evaluation by the k lowest ids, unweighted."""

    def __init__(self):
        self.figures = []

    def configure_evaluate(self, round, clients, k):  # noqa: A002
        return clients.ids[:k]

    def aggregate_evaluate(self, round, evaluations):  # noqa: A002
        accuracy = float(np.mean(evaluations["correct"] / evaluations["samples"]))
        loss = float(np.mean(evaluations["loss"]))
        self.figures.append((round, evaluations["client_id"].tolist(), accuracy, loss))
        return accuracy, loss


def test_a_whole_strategy_has_fits_and_evaluations_hooks(tmp_path):
    options = dict(SMALL, **{"eval.federated_every": 1, "eval.federated_fraction": 0.3})
    fedavg = fedprof.simulate(options, out=tmp_path / "fedavg")
    strategy = EvaluateFirst()
    run = fedprof.simulate(options, out=tmp_path / "mine", strategy=strategy)
    assert model_hash(run) == model_hash(fedavg)  # the default fit hooks are FedAvg's
    assert [f[0] for f in strategy.figures] == [1, 2, 3]
    assert all(f[1] == [0, 1, 2] for f in strategy.figures)
    assert run.metrics["fed_accuracy"].tolist() == pytest.approx([f[2] for f in strategy.figures], rel=1e-6)
    assert run.metrics["fed_loss"].tolist() == pytest.approx([f[3] for f in strategy.figures], rel=1e-6)
    assert not np.array_equal(run.metrics["fed_accuracy"], fedavg.metrics["fed_accuracy"])


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def mnist_arrays(train=3000, test=500):
    return ((read_idx(os.path.join(MNIST, "train-images-idx3-ubyte"))[:train],
             read_idx(os.path.join(MNIST, "train-labels-idx1-ubyte"))[:train]),
            (read_idx(os.path.join(MNIST, "t10k-images-idx3-ubyte"))[:test],
             read_idx(os.path.join(MNIST, "t10k-labels-idx1-ubyte"))[:test]))


def test_data_from_numpy_equals_the_same_data_from_idx_files(tmp_path):
    train, test = mnist_arrays()
    data = fedprof.Dataset(train, test)
    assert data.train_x.shape == (3000, 1, 28, 28) and data.num_classes == 10
    files = fedprof.simulate(SMALL, out=tmp_path / "files", data__name="mnist", data__dir=MNIST)
    arrays = fedprof.simulate(SMALL, out=tmp_path / "arrays", data=data)
    assert model_hash(arrays) == model_hash(files)
    # The run names its data by content; the same contents are the same data.
    with open(tmp_path / "arrays" / "config.toml") as f:
        assert f'memory_key = "{data.key}"' in f.read()
    assert fedprof.Dataset(train, test).key == data.key
    assert fedprof.Dataset((train[0], train[1] % 5), test).key != data.key


def test_a_torch_dataset_is_materialised_as_its_arrays():
    torch = pytest.importorskip("torch")
    train, test = mnist_arrays(train=200, test=50)
    as_torch = [torch.utils.data.TensorDataset(torch.from_numpy(x.astype(np.float32) / np.float32(255)),
                                               torch.from_numpy(y.astype(np.int64))) for x, y in (train, test)]
    assert fedprof.Dataset(*as_torch).key == fedprof.Dataset(train, test).key


def test_a_given_partition_is_the_clients_data(tmp_path):
    train, test = mnist_arrays()
    labels = train[1]
    by_class = [np.flatnonzero(labels == c) for c in range(10)]  # one client per class
    data = fedprof.Dataset(train, test, partition=by_class)
    whole = dict(SMALL, **{"data.holdout_share": 0, "data.train_limit": 0})
    run = fedprof.simulate(whole, out=tmp_path / "given", data=data, fedprof__reference="test")
    assert run.clients["size"].tolist() == [float(len(rows)) for rows in by_class]
    assert sorted(set(run.clients["data_kind"])) == ["blurred", "clean"]
    with pytest.raises(ValueError, match="row 3000, outside"):
        fedprof.Dataset(train, test, partition=[[0, 3000]])
    with pytest.raises(RuntimeError, match="data.holdout_share"):
        fedprof.simulate(dict(whole, **{"data.holdout_share": 0.1}), out=tmp_path / "holdout", data=data)


class Watching(Uniform):
    """Uniform, recording what it is shown."""

    reports = ("loss", "profile")

    def __init__(self):
        self.seen = []

    def select(self, round, clients, k):  # noqa: A002
        self.seen.append({name: np.array(getattr(clients, name)) for name in fedprof.Clients.__slots__})
        return super().select(round, clients, k)


def test_a_selector_sees_the_clients_reports(tmp_path):
    watching = Watching()
    fedprof.simulate(dict(SMALL, **{"strategy.name": "fedprof"}), out=tmp_path / "w", selector=watching)
    first, second = watching.seen[0], watching.seen[1]
    assert first["ids"].tolist() == list(range(10))
    assert np.all(np.isfinite(first["loss"])) and np.all(first["score"] > 0)  # reported before round 1
    assert np.all(np.isnan(first["train_loss"])) and first["times_selected"].sum() == 0
    assert second["times_selected"].sum() == 3 and np.isfinite(second["train_loss"]).sum() == 3
    assert np.all(np.isfinite(first["expected_time_s"]))


class Failing(fedprof.Selector):
    name = "python.flaky"

    def select(self, round, clients, k):  # noqa: A002
        if round == 3:
            raise LookupError("no clients today")
        return clients.ids[:k]


class Steady(fedprof.Selector):
    name = "python.flaky"

    def select(self, round, clients, k):  # noqa: A002
        return clients.ids[:k]


def test_an_exception_in_a_hook_ends_the_run_with_its_traceback_and_it_resumes(tmp_path):
    options = dict(SMALL, rounds=4)
    whole = fedprof.simulate(options, out=tmp_path / "whole", selector=Steady())
    with pytest.raises(LookupError, match="no clients today") as failure:
        fedprof.simulate(options, out=tmp_path / "cut", selector=Failing())
    assert "in select" in "".join(traceback.format_tb(failure.value.__traceback__))
    cut = fedprof.Run(str(tmp_path / "cut"))
    assert cut.summary is None and len(cut.metrics["round"]) == 2
    resumed = fedprof.resume(tmp_path / "cut", selector=Steady())
    assert model_hash(resumed) == model_hash(whole)


def test_a_misbehaving_part_is_refused_in_one_line(tmp_path):
    class Outsider(fedprof.Selector):
        def select(self, round, clients, k):  # noqa: A002
            return [10_000]

    class Fractional(fedprof.Selector):
        def select(self, round, clients, k):  # noqa: A002
            return [0.5]

    class Keeper(fedprof.Aggregator):
        def aggregate(self, round, global_model, results, total_samples):  # noqa: A002
            self.kept = results[0].params
            return global_model

    class NotANumber(fedprof.Aggregator):
        def aggregate(self, round, global_model, results, total_samples):  # noqa: A002
            return np.full(global_model.size, np.nan)

    with pytest.raises(RuntimeError, match=r"python\.outsider\.select\(\): returned 10000, not one of"):
        fedprof.simulate(SMALL, out=tmp_path / "a", selector=Outsider())
    with pytest.raises(TypeError, match="client ids"):
        fedprof.simulate(SMALL, out=tmp_path / "b", selector=Fractional())
    with pytest.raises(RuntimeError, match="kept a view of a model"):
        fedprof.simulate(SMALL, out=tmp_path / "c", aggregator=Keeper())
    with pytest.raises(RuntimeError, match="not finite"):
        fedprof.simulate(SMALL, out=tmp_path / "d", aggregator=NotANumber())
    with pytest.raises(RuntimeError, match="sees only the sum of the round's models"):
        fedprof.simulate(SMALL, out=tmp_path / "g", aggregator=Average(), secagg__protocol="secagg")
    with pytest.raises(ValueError, match="strategy.selector"):
        fedprof.simulate(SMALL, out=tmp_path / "e", selector=Uniform(), strategy__selector="uniform")
    with pytest.raises(ValueError, match="reports"):
        fedprof.simulate(SMALL, out=tmp_path / "f", selector=type("Odd", (Uniform,), {"reports": ("gps",)})())


def test_the_final_model_comes_back(tmp_path):
    run = fedprof.simulate(SMALL, out=tmp_path / "run")
    state = run.state_dict()
    assert list(state)[:2] == ["conv1.weight", "conv1.bias"]
    flat = np.concatenate([v.reshape(-1) for v in state.values()]).astype(np.float32)
    assert hashlib.sha256(flat.tobytes()).hexdigest() == model_hash(run)


def test_a_torch_module_trains_and_comes_back(tmp_path):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(600, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    data = fedprof.Dataset((x[:500], y[:500]), (x[500:], y[500:]))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = torch.nn.Linear(8, 16)
            self.out = torch.nn.Linear(16, 2)

        def forward(self, x):
            return self.out(torch.relu(self.hidden(x)))

    torch.manual_seed(0)
    run = fedprof.simulate(out=tmp_path / "net", data=data, model=Net(), rounds=3, clients__count=5,
                           strategy__fraction=0.6, partition__kind="iid", train__epochs=1,
                           fedprof__reference="test", report__progress=False)
    net = run.model()
    state = run.state_dict()
    assert sorted(state) == ["hidden.bias", "hidden.weight", "out.bias", "out.weight"]
    np.testing.assert_array_equal(net.hidden.weight.detach().numpy(), state["hidden.weight"])
    with torch.no_grad():
        accuracy = (net(torch.from_numpy(x[500:])).argmax(1).numpy() == y[500:]).mean()
    assert accuracy == pytest.approx(run.metrics["accuracy"][-1], abs=1e-9)


def test_profiles_and_divergences_are_the_clis(tmp_path):
    import json
    import subprocess

    cli = os.environ.get("FEDPROF_CLI", "build/fedprof")
    run = fedprof.simulate(dict(SMALL, rounds=2), out=tmp_path / "run")
    train, test = mnist_arrays()
    mine = fedprof.profile(run, test[0][:200])
    reference = fedprof.profile(run, train[0][:300])
    done = subprocess.run([cli, "profile", "--model", str(tmp_path / "run"), "--data", "mnist:test", "--data-dir",
                           MNIST, "--limit", "200", "--out", str(tmp_path / "p.json")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    theirs = fedprof.read_profile(tmp_path / "p.json")
    assert (mine["layer"], mine["version"], mine["samples"]) == ("fc1", 2, 200)
    np.testing.assert_array_equal(mine["mean"], theirs["mean"])
    np.testing.assert_array_equal(mine["var"], theirs["var"])
    with open(tmp_path / "ref.json", "w") as f:
        json.dump({"version": 2, "layer": "fc1", "mean": reference["mean"].tolist(),
                   "var": reference["var"].tolist()}, f)
    done = subprocess.run([cli, "divergence", str(tmp_path / "p.json"), str(tmp_path / "ref.json"), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    expected = json.loads(done.stdout)
    got = fedprof.divergence(tmp_path / "p.json", tmp_path / "ref.json")
    assert got["divergence"] == expected["divergence"] and got["score"] == expected["score"]
    with pytest.raises(ValueError, match="units"):
        fedprof.divergence(mine, dict(reference, mean=reference["mean"][:5], var=reference["var"][:5]))


def test_the_api_reference_is_the_docstrings():
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "python_api.py")
    done = subprocess.run([sys.executable, script, "check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_launch_over_two_ranks_gives_simulates_model(tmp_path):
    # Rank 0 here runs the Python selector; rank 1, a child process, trains
    # its share of the clients and counts their reports in their cost.
    options = dict(SMALL, **{"strategy.name": "fedprof"})
    alone = fedprof.simulate(options, out=tmp_path / "alone", selector=Watching())
    ranks = fedprof.launch(options, nproc=2, out=tmp_path / "ranks", selector=Watching(), rendezvous_timeout_s=60)
    assert model_hash(ranks) == model_hash(alone)
    np.testing.assert_array_equal(ranks.metrics["virtual_time_s"], alone.metrics["virtual_time_s"])


def test_a_deployments_server_runs_python_parts(tmp_path):
    # The server here, with the Python parts; three clients as processes of
    # the CLI, over loopback in plaintext. Same clients, same model as a
    # simulation with the built-in parts.
    import socket
    import subprocess

    cli = os.environ.get("FEDPROF_CLI", "build/fedprof")
    options = dict(SMALL, **{"clients.count": 3, "strategy.fraction": 1, "rounds": 2, "quality.blurred": 0})
    simulated = fedprof.simulate(options, out=tmp_path / "sim")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sets = sum((["--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}"] for k, v in options.items()), [])
    clients = [subprocess.Popen([cli, "client", "--server", f"127.0.0.1:{port}", "--insecure", "--id", str(k)] + sets,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for k in range(3)]
    try:
        served = fedprof.serve(options, out=tmp_path / "served", listen=f"127.0.0.1:{port}", insecure=True,
                               selector=Uniform(), aggregator=Average(), deploy__start_timeout_s=60)
    finally:
        for c in clients:
            try:
                c.wait(timeout=30)
            except subprocess.TimeoutExpired:
                c.kill()
                c.wait()
    assert model_hash(served) == model_hash(simulated)
    assert [c.returncode for c in clients] == [0, 0, 0]


def test_payload_and_privacy_are_the_clis():
    import json
    import subprocess

    cli = os.environ.get("FEDPROF_CLI", "build/fedprof")
    rows = fedprof.payload("vgg16", (3, 224, 224), 10, cut="fc2", clients=1000)
    table = subprocess.run([cli, "payload", "--clients", "1000"], capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    printed = [line.split("|")[1:-1] for line in table.stdout.splitlines() if line.startswith("| ")][1:]
    assert [r["scheme"] for r in rows] == [p[0].strip() for p in printed]
    assert [f"{r['upload_batches']:.0f}" for r in rows] == [p[1].strip() for p in printed]
    assert [f"{r['params_per_batch']:.0f}" for r in rows] == [p[2].strip() for p in printed]
    with pytest.raises(ValueError, match="--cut"):
        fedprof.payload(cut="fc9")

    done = subprocess.run([cli, "privacy", "label", "--classes", "10", "--samples-per-client", "4", "--clients",
                           "50", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert fedprof.label_leakage(10, 4, clients=50) == pytest.approx(json.loads(done.stdout), rel=0, abs=0)
    done = subprocess.run([cli, "privacy", "dp", "--noise-multiplier", "1.1", "--sample-rate", "0.01", "--steps",
                           "1000", "--delta", "1e-5"], capture_output=True, text=True, timeout=120)
    eps = fedprof.dp_epsilon(1.1, 0.01, 1000, delta=1e-5)
    assert done.stdout.startswith(f"epsilon = {eps['epsilon']:.6g} at delta = 1e-05 (RDP order {eps['order']:g};")


class Unchanged(fedprof.ClientAlgorithm):
    """A client algorithm of the defaults only: it changes nothing."""


class PyScaffold(fedprof.ClientAlgorithm):
    """SCAFFOLD (option II, server step size 1) in Python, computed as the
    built-in computes it: the correction c - c_i in float32, c_i+ in double,
    c's update as the exact sum of the round's Δc_i over N."""

    def start_run(self):
        self.c = None

    def begin(self, round, client_id, start, broadcast, kept, lr):  # noqa: A002
        c = broadcast if broadcast is not None else np.zeros_like(start)
        return c - (kept if kept is not None else np.zeros_like(start))

    def end(self, round, client_id, start, broadcast, kept, lr, trained, steps):  # noqa: A002
        c = broadcast if broadcast is not None else np.zeros_like(start)
        c_i = kept if kept is not None else np.zeros_like(start)
        scale = 1.0 / (max(steps, 1) * lr)
        after = (c_i.astype(np.float64) - c + (start.astype(np.float64) - trained) * scale).astype(np.float32)
        return after - c_i, after

    def broadcast(self, round):  # noqa: A002
        return self.c

    def finish(self, round, global_model, next_model, results, num_clients):  # noqa: A002
        if results:
            import math
            total = np.array([math.fsum(v) for v in zip(*(r.values for r in results))])
            c = self.c if self.c is not None else np.zeros(global_model.size, np.float32)
            self.c = (c.astype(np.float64) + total / num_clients).astype(np.float32)
        return None

    def save_state(self):
        return None if self.c is None else self.c.tobytes().hex()

    def load_state(self, state):
        self.c = np.frombuffer(bytes.fromhex(state), dtype=np.float32).copy()


def test_a_client_algorithm_that_changes_nothing_is_fedavg(tmp_path):
    # A client algorithm aggregates over the round's participants.
    fedavg = fedprof.simulate(SMALL, out=tmp_path / "fedavg", **{"strategy.aggregation": "partial"})
    one = fedprof.simulate(SMALL, out=tmp_path / "one", algorithm=Unchanged(), threads=1)
    two = fedprof.simulate(SMALL, out=tmp_path / "two", algorithm=Unchanged())
    assert model_hash(one) == model_hash(two) == model_hash(fedavg)
    with open(tmp_path / "two" / "config.toml") as f:
        assert 'algorithm = "python.unchanged"' in f.read()


def test_scaffold_in_python_is_the_builtins_and_resumes(tmp_path):
    builtin = fedprof.simulate(SMALL, out=tmp_path / "builtin", **{"strategy.algorithm": "scaffold"})
    python = fedprof.simulate(SMALL, out=tmp_path / "python", algorithm=PyScaffold(), threads=1)
    assert model_hash(python) == model_hash(builtin)
    # Its c (the server half's save_state) and the clients' c_i (the
    # engine's store) come back from the checkpoint.
    fedprof.simulate(SMALL, out=tmp_path / "stopped", algorithm=PyScaffold(), rounds=2)
    resumed = fedprof.resume(tmp_path / "stopped", algorithm=PyScaffold(), rounds=3)
    assert model_hash(resumed) == model_hash(builtin)


class BadOffset(fedprof.ClientAlgorithm):
    def begin(self, round, client_id, start, broadcast, kept, lr):  # noqa: A002
        return np.zeros(5)


class NanToSend(fedprof.ClientAlgorithm):
    def end(self, round, client_id, start, broadcast, kept, lr, trained, steps):  # noqa: A002
        return np.full(3, np.nan), None


class NotAPair(fedprof.ClientAlgorithm):
    def end(self, round, client_id, start, broadcast, kept, lr, trained, steps):  # noqa: A002
        return None


class BadModel(fedprof.ClientAlgorithm):
    def finish(self, round, global_model, next_model, results, num_clients):  # noqa: A002
        return next_model[:-1]


def test_a_misbehaving_client_algorithm_is_refused_in_one_line(tmp_path):
    # Each names the option, the client and the round (or the round alone
    # for the server half), and what was wrong.
    with pytest.raises(RuntimeError, match=r"^strategy\.algorithm = python\.bad_offset: client \d+ in round 1: "
                                           r"begin\(\)'s step offset has 5 values; the model has \d+$"):
        fedprof.simulate(SMALL, out=tmp_path / "a", algorithm=BadOffset())
    with pytest.raises(RuntimeError, match=r"^strategy\.algorithm = python\.nan_to_send: client \d+ in round 1: "
                                           r"end\(\)'s values to send: value 0 is not finite$"):
        fedprof.simulate(SMALL, out=tmp_path / "b", algorithm=NanToSend())
    with pytest.raises(TypeError, match=r"NotAPair\.end\(\) must return a pair"):
        fedprof.simulate(SMALL, out=tmp_path / "c", algorithm=NotAPair())
    with pytest.raises(RuntimeError, match=r"^strategy\.algorithm = python\.bad_model: round 1: finish\(\)'s model "
                                           r"has \d+ values; the model has \d+$"):
        fedprof.simulate(SMALL, out=tmp_path / "d", algorithm=BadModel())
    # Its server half reads each client's values: secure aggregation hides them.
    with pytest.raises(RuntimeError, match="hides each client.s values from its client half"):
        fedprof.simulate(SMALL, out=tmp_path / "e", algorithm=Unchanged(), **{"secagg.protocol": "secagg"})
    with pytest.raises(RuntimeError, match="fedbuff steps as results come"):
        fedprof.simulate(SMALL, out=tmp_path / "g", algorithm=Unchanged(), **{"strategy.aggregator": "fedbuff"})
    # Its client half lives in this process.
    with pytest.raises(ValueError, match="runs in this process's clients"):
        fedprof.launch(SMALL, nproc=2, out=tmp_path / "f", algorithm=Unchanged())
    assert not (tmp_path / "a" / "summary.json").exists()
