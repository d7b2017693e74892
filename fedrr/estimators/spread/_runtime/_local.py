"""Groups of shards: objects that own a block of the data for a whole job and answer small calls.
The driver calls a method on every shard (``call``) or on every shard with summed results
(``reduce``); arguments and results are models and sufficient statistics, never the data.
``bytes``: a local group counts the raw size of its messages; a Ray group what it sends
(compressed, ``Packed``). A
local group keeps the shards in this process and runs calls serially or on threads; a Ray group
(``_ray_shards.RayShards``) keeps them in actors. Results come back in shard order and sums are
taken in shard order, so every group gives the same numbers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ._wire import SETUP_METHODS, nbytes, total


def prior_step(prior: Any, stats: Any, gamma: float) -> Any:
    """One stochastic-approximation step of a chain's prior from its E-step statistics (eq 65):
    (1 − γ)·π + γ·π̂(stats). Every group — and every actor — updates with this one function."""
    return prior.blend(prior.estimate(stats), gamma)


class LocalShards:
    """Shards built in this process by ``factories`` (zero-argument callables); calls run on up to
    ``n_threads`` threads (the compiled E-step releases the GIL). A ``ShardGroup``."""

    #: one block holds every chain's shards, but ``reduce`` costs no round trip: the EM calls it directly
    solo_chains = False

    def __init__(self, factories: Sequence[Callable[[], Any]], n_threads: int = 1):
        self.shards = [f() for f in factories]
        self.n_threads = max(1, int(n_threads))
        # also for one shard: the chains' calls on it are separate tasks (``reduce_each``)
        self._pool = ThreadPoolExecutor(self.n_threads) if self.n_threads > 1 else None
        self.bytes = 0  # the raw size of every message a call would send, both ways
        self.iteration_bytes = 0  # of those, the calls from the first E-step on, set-up methods excepted
        self._in_iterations = False
        self.restarts = 0  # nothing is rebuilt in this process

    def _count(self, method: str, n: int) -> None:
        self.bytes += n
        if self._in_iterations and method not in SETUP_METHODS:
            self.iteration_bytes += n

    def __len__(self) -> int:
        return len(self.shards)

    def call(self, method: str, *args: Any, packed: bool = False) -> list[Any]:
        """``shard.method(*args)`` for every shard, results in shard order (``packed``: what a Ray
        group compresses for the wire; nothing to do in-process)."""
        self._count(method, nbytes(args))
        fn = lambda s: getattr(s, method)(*args)  # noqa: E731
        out = self._map(fn, self.shards)
        self._count(method, sum(nbytes(r) for r in out))
        return out

    def update_prior(self, chain: int, stats: Any, gamma: float, updated: Any) -> None:
        """Every shard's prior of ``chain`` becomes ``updated`` — the driver's copy, computed from
        the same statistics by the same function as each shard would (one object, shared)."""
        self._count("update_prior", nbytes(stats))
        for s in self.shards:
            s.set_prior(chain, updated)

    def update_priors(self, updates: Sequence[tuple]) -> list[Any]:
        """For each (chain, stats, gamma, prior) of ``updates``: the chain's prior updated from
        its E-step statistics (``prior_step``), set on every shard; the updated priors, in order."""
        out = []
        for chain, stats, gamma, prior in updates:
            out.append(prior_step(prior, stats, gamma))
            self.update_prior(chain, stats, gamma, out[-1])
        return out

    def fetch_priors(self, chains: Sequence[int]) -> list[Any]:
        """Copies of the priors the shards hold for ``chains`` (one object per chain, shared)."""
        return [self.shards[0].prior[c].copy() for c in chains]

    def run_each(self, fn: Callable, jobs: Sequence[tuple], one_off: bool = False) -> list[Any]:
        """``fn(self, *args)`` for every (chain, args) of ``jobs``: this group is the one block
        holding every chain's shards (nothing crosses a wire, so ``one_off`` changes nothing)."""
        return [fn(self, *args) for _, args in jobs]

    def reduce(self, method: str, *args: Any) -> Any:
        """The sum, in shard order, of ``shard.method(*args)`` over the shards."""
        return self.reduce_each(method, [args])[0]

    def reduce_each(self, method: str, arg_lists: Sequence[tuple]) -> list[Any]:
        """``[reduce(method, *args) for args in arg_lists]`` as one batch of tasks (every pair of
        arguments and shard), so the threads stay busy across the batch — e.g. the E-steps of all
        chains, whose shards alone do not divide evenly over the threads. Same sums, same order."""
        self._in_iterations = self._in_iterations or method == "estep"
        self._count(method, sum(nbytes(a) for a in arg_lists))
        tasks = [(a, s) for a in arg_lists for s in self.shards]
        fn = lambda t: getattr(t[1], method)(*t[0])  # noqa: E731
        out = self._map(fn, tasks)
        self._count(method, sum(nbytes(r) for r in out))
        n = len(self.shards)
        return [total(out[i * n : (i + 1) * n]) for i in range(len(arg_lists))]

    def _map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``fn`` over ``items`` in order: on the threads if there are several items."""
        if self._pool is None or len(items) < 2:
            return [fn(x) for x in items]
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def traffic_report(group: Any, n_iter: int) -> dict:
    """A group's traffic for results files: bytes per ``"<method> down|up"`` (Ray); for groups that
    tell them apart (this process's and Ray's), ``per_iteration`` (E-steps, prior updates, M-step
    calls, averaged over the iterations: the steady state) and ``setup`` (everything else: initial
    priors and samples, the start's M-step, preconditioners, the priors fetched at the end)."""
    out: dict[str, float] = {k: int(v) for k, v in getattr(group, "traffic", {}).items()}
    if hasattr(group, "iteration_bytes"):
        out["per_iteration"] = group.iteration_bytes / max(n_iter, 1)
        out["setup"] = group.bytes - group.iteration_bytes
    return out


class Lockstep:
    """Several callers' reductions on one group, batched: each caller (one chain's optimiser, in
    its own thread) asks for ``reduce(method, *args)`` and waits; when every running caller has
    asked, one ``reduce_each`` answers them all. Chains whose M-steps need several gradient
    evaluations then share each round trip to the shards (and its threads or actors), yet each
    gets exactly the numbers it would alone: a caller's values depend only on its own arguments."""

    def __init__(self, group: Any, method: str):
        self.group, self.method = group, method
        self._cv = threading.Condition()
        self._asked: dict[int, tuple] = {}
        self._answers: dict[int, Any] = {}
        self._running = 0
        self._error: BaseException | None = None

    def ask(self, who: int, *args: Any) -> Any:
        with self._cv:
            if self._error is not None:
                raise self._error
            self._asked[who] = args
            self._flush()
            while who not in self._answers and self._error is None:
                self._cv.wait()
            if who not in self._answers:
                raise self._error
            return self._answers.pop(who)

    def _flush(self) -> None:
        """Under the lock: answer the batch once every running caller waits in it."""
        if not self._asked or len(self._asked) < self._running:
            return
        if self._error is not None:  # a caller failed: nobody waits for a batch any more
            self._cv.notify_all()
            return
        who = sorted(self._asked)
        batch = [self._asked[w] for w in who]
        self._asked = {}
        try:
            out = self.group.reduce_each(self.method, batch)
        except BaseException as exc:  # noqa: BLE001 - handed to every caller
            self._error = exc
        else:
            self._answers.update(zip(who, out))
        self._cv.notify_all()

    def run(self, jobs: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run ``jobs`` (each calls ``ask`` with its own index) concurrently; their results in order.
        The first exception raised by a job, or by the group, is raised here."""
        self._running, self._error = len(jobs), None
        results: list[Any] = [None] * len(jobs)
        errors: list[BaseException] = []

        def one(i: int) -> None:
            try:
                results[i] = jobs[i]()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
                with self._cv:
                    self._error = self._error or exc
                    self._cv.notify_all()
            finally:
                with self._cv:
                    self._running -= 1
                    self._flush()

        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors or self._error is not None:
            raise self._error if self._error is not None else errors[0]
        return results
