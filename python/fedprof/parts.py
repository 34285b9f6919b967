"""Selectors, aggregators and client algorithms written in Python, composed
with the engine's.

A subclass of Selector or Aggregator passed to fedprof.simulate (selector=,
aggregator=), fedprof.compare (inside a Strategy) or fedprof.resume takes
the place of the built-in part of its kind; the other part stays whatever
the options say. The engine calls the hooks on the round loop's thread,
one at a time, while the clients train on the others. A ClientAlgorithm
(algorithm=) runs around each client's local training, and its server
half after the aggregator.
"""

import re

import numpy as np

__all__ = ["Aggregator", "AlgorithmResult", "ClientAlgorithm", "Clients", "Result", "Selector", "Strategy"]


def _name(part):
    """The part's registered name: "python." and its class name in
    snake case, unless the class sets `name`."""
    name = getattr(type(part), "name", None)
    if isinstance(name, str) and name:
        return name
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", type(part).__name__).lower()
    return "python." + re.sub(r"[^a-z0-9_.-]", "_", snake)


class _Part:
    def start_run(self):
        """Called as each run using this part starts (compare runs several
        with the same object): reset what one run must not pass on."""

    def save_state(self):
        """What the part must keep across a resume, as a str, or None.
        Called after every round; the checkpoint stores it."""
        return None

    def load_state(self, state):
        """Restores what save_state returned, when a run resumes."""

    # The engine's side.
    @property
    def name(self):
        """The name options and outputs know the part by (strategy.selector
        or strategy.aggregator): the class's `name` attribute, else
        "python." and the class name in snake case."""
        return _name(self)

    def _save_state(self):
        state = self.save_state()
        if state is not None and not isinstance(state, str):
            raise TypeError(f"{type(self).__name__}.save_state() must return a str or None")
        return state

    def _load_state(self, state):
        self.load_state(state)


class Clients:
    """The clients a Selector may choose from in a round: parallel NumPy
    arrays, one entry per online client, in increasing id order.

    ids              client ids
    num_samples      |D_k|, as each client states it
    expected_time_s  a round's expected duration (the cost model's in a
                     simulation, the last measured in a deployment); NaN
                     when unknown
    times_selected   how often the selector chose each client so far
    train_loss       the client's last reported training loss; NaN before
    loss             the current global model's loss on the client's data
                     (when `reports` has "loss"); NaN otherwise
    score            FedProf's profile score exp(-alpha * div), computed as
                     the built-in FedProf selector computes it (when
                     `reports` has "profile"); 0 before a client's first
                     profile, NaN when not asked for
    """

    __slots__ = ("ids", "num_samples", "expected_time_s", "times_selected", "train_loss", "loss", "score")

    def __init__(self, ids, num_samples, expected_time_s, times_selected, train_loss, loss, score):
        self.ids = ids
        self.num_samples = num_samples
        self.expected_time_s = expected_time_s
        self.times_selected = times_selected
        self.train_loss = train_loss
        self.loss = loss
        self.score = score

    def __len__(self):
        return len(self.ids)

    def __repr__(self):
        return f"Clients({len(self)} clients)"


class Selector(_Part):
    """Chooses the clients that train in each round. Subclass it and
    implement select(); set `reports` to what the clients should report
    besides their model ("loss", "profile").

        class Fastest(fedprof.Selector):
            def select(self, round, clients, k):
                return clients.ids[np.argsort(clients.expected_time_s, kind="stable")[:k]]

    self.rng is the run's sampling stream during select() (fedprof.Rng:
    index(n), random()); drawing from it keeps a run reproducible from its
    seed and independent of the threads.
    """

    reports = ()

    def select(self, round, clients, k):  # noqa: A002 - the round's number
        """The ids of at most k distinct clients among clients.ids (any
        order, any integer sequence) to train in round `round`."""
        raise NotImplementedError(f"{type(self).__name__}.select(round, clients, k)")

    def _reports(self):
        reports = (self.reports,) if isinstance(self.reports, str) else tuple(self.reports)
        for r in reports:
            if r not in ("loss", "profile"):
                raise ValueError(f"{type(self).__name__}.reports: {r!r} is not 'loss' or 'profile'")
        return reports

    def _select(self, round, ids, num_samples, expected, times, train_loss, loss, score, k, rng):  # noqa: A002
        return self._choose(self.select, "select", round, Clients(ids, num_samples, expected, times, train_loss,
                                                                   loss, score), k, rng)

    def _configure_evaluate(self, *args):
        return None  # the engine's: uniformly at random

    def _choose(self, hook, hook_name, round, clients, k, rng):  # noqa: A002
        self.rng = rng
        try:
            chosen = hook(int(round), clients, int(k))
        finally:
            self.rng = None
        if chosen is None:
            return None
        chosen = np.asarray(chosen)
        if chosen.ndim != 1 or (chosen.size and chosen.dtype.kind not in "iu"):
            raise TypeError(f"{type(self).__name__}.{hook_name}() must return a sequence of client ids (integers), "
                            f"got {chosen.dtype} of shape {chosen.shape}")
        return chosen.astype(np.int64)


class Result:
    """One client's accepted model of a round, as an Aggregator gets it.

    client_id    the client
    num_samples  |D_k|, its weight in FedAvg
    params       the model as a flat, read-only float32 NumPy view of the
                 engine's buffer, valid during aggregate() only: copy what
                 you keep (numpy.array(result.params))
    """

    __slots__ = ("client_id", "num_samples", "params")

    def __init__(self, client_id, num_samples, params):
        self.client_id = client_id
        self.num_samples = num_samples
        self.params = params

    def __repr__(self):
        return f"Result(client_id={self.client_id}, num_samples={self.num_samples}, {self.params.size} values)"


class Aggregator(_Part):
    """Builds the next global model from a round's accepted models.
    Subclass it and implement aggregate(). It sees every model (as the
    robust rules do), so it cannot run under secure aggregation.

        class Mean(fedprof.Aggregator):
            def aggregate(self, round, global_model, results, total_samples):
                return np.mean([r.params for r in results], axis=0)
    """

    def aggregate(self, round, global_model, results, total_samples):  # noqa: A002
        """The next global model (an array of global_model.size values)
        from `results` (Result of each client that returned a usable model,
        in client order). global_model is the round's model as a read-only
        view; total_samples is |D| over every client that could have been
        chosen (FedAvg's full aggregation weighs by it, Eq. 8)."""
        raise NotImplementedError(f"{type(self).__name__}.aggregate(round, global_model, results, total_samples)")

    def _aggregate(self, round, global_model, ids, num_samples, params, total_samples):  # noqa: A002
        results = [Result(int(c), int(n), p) for c, n, p in zip(ids, num_samples, params)]
        out = self.aggregate(int(round), global_model, results, int(total_samples))
        del results
        out = np.ascontiguousarray(out, dtype=np.float32).reshape(-1)
        return out

    def _aggregate_evaluate(self, round, ids, samples, correct, loss):  # noqa: A002
        return None  # the engine's: weighted by the clients' sample counts

    # The checkpoint's state, on the aggregator's side.
    def _aggregator_state(self):
        return self._save_state()

    def _load_aggregator_state(self, state):
        self._load_state(state)


class Strategy(Selector, Aggregator):
    """A whole strategy with Flower's four hooks; pass it as strategy= to
    simulate, launch, serve or resume, or in compare's list. Each hook has
    a default, so a subclass writes only what it changes: configure_fit
    draws k clients uniformly (the built-in uniform selector's draws) and
    aggregate_fit averages as FedAvg does (Eq. 8): the same model as the
    fedavg preset, bit for bit.

        class FastFirst(fedprof.Strategy):
            def configure_fit(self, round, clients, k):
                return clients.ids[np.argsort(clients.expected_time_s, kind="stable")[:k]]

    configure_evaluate and aggregate_evaluate serve federated evaluation
    (eval.federated_every): by default the engine's (k clients uniformly;
    accuracy and loss weighted by the clients' sample counts).
    """

    def configure_fit(self, round, clients, k):  # noqa: A002
        """The clients to train in round `round` (as Selector.select)."""
        n = len(clients)
        k = min(k, n)
        order = np.arange(n)
        for i in range(k):  # a partial Fisher-Yates shuffle, as the built-in uniform selector draws
            j = i + self.rng.index(n - i)
            order[i], order[j] = order[j], order[i]
        return clients.ids[np.sort(order[:k])]

    def aggregate_fit(self, round, global_model, results, total_samples):  # noqa: A002
        """The next global model (as Aggregator.aggregate)."""
        g = global_model.astype(np.float64)
        step = np.zeros_like(g)
        for r in results:
            step += r.num_samples * (r.params.astype(np.float64) - g)
        return (g + step / total_samples).astype(np.float32)

    def configure_evaluate(self, round, clients, k):  # noqa: A002
        """The clients to evaluate the global model after round `round`
        (at most k ids of clients.ids), or None for the engine's choice."""
        return None

    def aggregate_evaluate(self, round, evaluations):  # noqa: A002
        """The round's federated (accuracy, loss) from `evaluations`, a dict
        of arrays in client order (client_id, samples, correct, loss: each
        client's mean loss), or None for the engine's figures."""
        return None

    def select(self, round, clients, k):  # noqa: A002
        return self.configure_fit(round, clients, k)

    def aggregate(self, round, global_model, results, total_samples):  # noqa: A002
        return self.aggregate_fit(round, global_model, results, total_samples)

    def _configure_evaluate(self, round, ids, num_samples, expected, times, train_loss, loss, score, k,  # noqa: A002
                            rng):
        return self._choose(self.configure_evaluate, "configure_evaluate", round,
                            Clients(ids, num_samples, expected, times, train_loss, loss, score), k, rng)

    # A strategy is its own selector and aggregator: its state is kept once, on the selector's side.
    def _aggregator_state(self):
        return None

    def _load_aggregator_state(self, state):
        pass

    def _aggregate_evaluate(self, round, ids, samples, correct, loss):  # noqa: A002
        out = self.aggregate_evaluate(int(round), {"client_id": ids, "samples": samples, "correct": correct,
                                                   "loss": loss})
        if out is None:
            return None
        accuracy, mean_loss = out
        return float(accuracy), float(mean_loss)


def _values(hook, value, what):
    """`value` as a flat float32 array, or None; anything else raises,
    naming the hook."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"{hook}: {what} must be an array of numbers or None, got {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.float32).reshape(-1)


class AlgorithmResult:
    """What one client's half of a ClientAlgorithm sent in a round, as the
    server half's finish() gets it.

    client_id    the client
    num_samples  |D_k|
    values       what its end() returned to send (float32), empty if None
    """

    __slots__ = ("client_id", "num_samples", "values")

    def __init__(self, client_id, num_samples, values):
        self.client_id = client_id
        self.num_samples = num_samples
        self.values = values

    def __repr__(self):
        return f"AlgorithmResult(client_id={self.client_id}, num_samples={self.num_samples}, {self.values.size} values)"


class ClientAlgorithm(_Part):
    """What runs on each client around its local SGD, and its server half
    (docs/algorithms.md); pass it as algorithm= to simulate, compare or
    resume. Every hook has a default that changes nothing: a subclass that
    overrides none trains FedAvg's model (with partial aggregation, as
    every client algorithm), bit for bit.

    The client half (begin, end) is called on the thread that trains the
    client, for every client of every round, with what that client holds:
    the model it starts from (`start`), the server half's `broadcast` and
    what it `kept` from its last round (None before its first, or after a
    reset), as float32 arrays. It must depend on its arguments only: the
    clients of a round train in any order, on any thread. The server half
    (broadcast, finish) runs on the round loop's thread; save_state() and
    load_state() keep its state across a resume, and the engine
    checkpoints what the clients keep.
    """

    def begin(self, round, client_id, start, broadcast, kept, lr):  # noqa: A002
        """Before the client's first local step: a step offset d (an array
        of start.size values) or None. After every optimiser step the
        client's parameters become theta - lr * d (SCAFFOLD's correction
        c - c_i has this form)."""
        return None

    def end(self, round, client_id, start, broadcast, kept, lr, trained, steps):  # noqa: A002
        """After the client's last of `steps` local steps, `trained` its
        model: (send, keep), what its result carries to finish() and what
        the client keeps for its next round, arrays of at most 4 *
        start.size values or None (keep=None: what it kept stays)."""
        return None, None

    def broadcast(self, round):  # noqa: A002
        """What every client of round `round` gets beside the model (its
        `broadcast`), an array, or None."""
        return None

    def finish(self, round, global_model, next_model, results, num_clients):  # noqa: A002
        """After the aggregator: the round's next global model (an array of
        global_model.size values), or None for next_model, the aggregator's,
        as it is. results are the round's AlgorithmResult, in client order;
        num_clients is N, the population."""
        return None

    # The engine's side.
    def _begin(self, round, client_id, start, broadcast, kept, lr):  # noqa: A002
        name = f"{type(self).__name__}.begin()"
        return _values(name, self.begin(int(round), int(client_id), start, broadcast, kept, float(lr)),
                       "the step offset")

    def _end(self, round, client_id, start, broadcast, kept, lr, trained, steps):  # noqa: A002
        name = f"{type(self).__name__}.end()"
        out = self.end(int(round), int(client_id), start, broadcast, kept, float(lr), trained, int(steps))
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(f"{name} must return a pair (send, keep), got {type(out).__name__}")
        return _values(name, out[0], "send"), _values(name, out[1], "keep")

    def _broadcast(self, round):  # noqa: A002
        return _values(f"{type(self).__name__}.broadcast()", self.broadcast(int(round)), "the broadcast")

    def _finish(self, round, global_model, next_model, results, num_clients):  # noqa: A002
        seen = [AlgorithmResult(int(c), int(n), v) for c, n, v in results]
        return _values(f"{type(self).__name__}.finish()",
                       self.finish(int(round), global_model, next_model, seen, int(num_clients)), "the next model")


def _spec(entry):
    """A compare entry as `fedprof compare --strategies` names it, and the
    Python parts it needs: a name, a Strategy, or a (selector, aggregator)
    pair of names or parts."""
    if isinstance(entry, str):
        return entry, []
    if isinstance(entry, Strategy):
        return f"{entry.name}+{entry.name}", [entry]
    if isinstance(entry, tuple) and len(entry) == 2:
        selector, aggregator = entry
        for part, kind in ((selector, Selector), (aggregator, Aggregator)):
            if not isinstance(part, (str, kind)):
                raise TypeError(f"strategies: expected a {kind.__name__} or a built-in's name, got {part!r}")
        names = [p if isinstance(p, str) else p.name for p in entry]
        return "+".join(names), [p for p in entry if not isinstance(p, str)]
    raise TypeError(f"strategies: expected names, fedprof.Strategy objects or (selector, aggregator) pairs, "
                    f"got {entry!r}")
