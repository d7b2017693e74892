"""The Ray actor behind ``_ray_shards.RayShards``: it holds a block of shards (with their chains and
priors) for the whole job and answers the group's calls — each call numbered, so that a call asked
again (a fold retried after another actor died) returns its results instead of advancing the chains
twice; a batch of calls (every chain's E-step) is kept until the next batch starts."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from . import _delta as delta
from ._local import prior_step
from ._wire import add, pack, total, unpack, walk, wire


class _Block:
    """An actor's shards as a group for code run on the actor: sums in shard order, as a fold."""

    def __init__(self, shards: list):
        self.shards = shards

    def reduce(self, method: str, *args: Any) -> Any:
        return total([getattr(s, method)(*args) for s in self.shards])

    def reduce_each(self, method: str, arg_lists: Sequence[tuple]) -> list[Any]:
        return [self.reduce(method, *a) for a in arg_lists]


class ShardActor:
    """Holds a block of shards; answers the group's calls."""

    def __init__(self, factories: Sequence[Callable[[], Any]] = ()):
        self._limit = threadpool_limits(1, user_api="blas")  # the same BLAS arithmetic as the driver's shards
        self._held: dict[Any, Any] = {}  # key -> data a job keeps here across its tasks (``hold``)
        self.load(factories)

    def hold(self, key: Any, data: Any) -> None:
        """Keep ``data`` (a job's records, sent once) for the tasks that ``run_held`` gives it. Its
        arrays stay read-only, shared with the object store (not copied per actor): a fit's kernels
        take arrays made from them, not these (a CV on Ray compiles no kernel again: ``_own``)."""
        self._held[key] = data

    def run_held(self, key: Any, fn: Callable, args: tuple) -> Any:
        """``fn(data, *args)`` on the data held under ``key``, with one BLAS thread (as the shards)."""
        with threadpool_limits(1, user_api="blas"):
            return fn(self._held[key], *_own(args))

    def drop(self, key: Any) -> None:
        self._held.pop(key, None)

    def load(self, factories: Sequence[Callable[[], Any]]) -> int:
        """Drop the shards held so far and build these (an actor serves one group after another)."""
        self.shards: list = []
        self._done: dict[int, list] = {}  # call number -> its results, for the current batch
        self._kept: dict[Any, Any] = {}  # chain -> the E-step sum this actor produced last (last actor)
        self._totals: dict[Any, tuple] = {}  # chain -> (id, the last E-step total it received)
        self._sent: dict[Any, tuple] = {}  # chain -> (id, the E-step sums it sent last)
        self._upstream: dict[Any, tuple] = {}  # chain -> (id, the E-step sums it received last)
        self.shards = [f() for f in factories]
        return len(self.shards)

    def _compute(self, seq: Any, method: str, args: Any) -> list:
        """``seq``: (this call's number, the first number of its batch), or None (not kept)."""
        if seq is None:
            return [getattr(s, method)(*_arrived(args)) for s in self.shards]
        n, first = seq
        if n in self._done:  # the same call again: its results, not a second step
            return self._done[n]
        self._done = {k: v for k, v in self._done.items() if k >= first}
        out = self._done[n] = [getattr(s, method)(*_arrived(args)) for s in self.shards]
        return out

    def call(self, seq: Any, method: str, args: Any, packed: bool) -> list:
        out = self._compute(seq, method, args)
        return [pack(r) for r in out] if packed else out

    def fold(
        self,
        seq: Any,
        method: str,
        args: Any,
        prev: list | None,
        keep: Any = None,
        base: Any = None,
        last=False,
        own: bool = False,
    ) -> tuple[Any, list[int]]:
        """The running sum after this actor's shards, in shard order, from the previous actor's
        (``prev`` = [its output, its handle]: in a list, so that Ray does not wait for it before
        this actor's own work starts); and the bytes of every actor's message so far. ``keep``: the
        chain of an E-step, whose sums are sent as changes against the sums of the E-step ``base``
        (``delta``), which the receivers hold; the last actor keeps the total for the prior update.
        ``own``: this actor alone holds the chain (and its prior): it keeps the prior's statistics
        and sends the rest."""
        out = self._compute(seq, method, args)
        acc, sizes = None, []
        if prev is not None:
            import ray  # on the actor, where Ray runs it: never imported by a fit without Ray

            msg, sizes = ray.get(prev[0])
            acc = delta.decode(msg, self._upstream.get(keep)) if keep is not None else unpack(msg)
            if acc is None:  # a change against sums this actor does not hold (rebuilt): fetch them whole
                whole = ray.get(prev[1].sent.remote(keep))
                sizes = [*sizes, wire(whole)]
                acc = unpack(whole)
            if keep is not None:
                self._upstream[keep] = (seq[0], acc)
        for r in out:
            acc = r if acc is None else add(acc, r)
        if keep is None:
            msg = pack(acc)
        elif own:
            self._kept[keep] = acc
            msg = pack({k: v for k, v in acc.items() if k != "stats"})
        else:
            msg = delta.encode(acc, base, self._sent.get(keep))
            self._sent[keep] = (seq[0], acc)
            if last:
                self._kept[keep] = acc
        return msg, [*sizes, wire(msg)]

    def run(self, fn: Callable, args: Any) -> Any:
        """``fn(block, *args)`` with this actor's shards as a group (``RayShards.run_each``), packed;
        one BLAS thread in every BLAS library loaded by then (``fn`` may have loaded scipy's)."""
        with threadpool_limits(1, user_api="blas"):
            return pack(fn(_Block(self.shards), *_arrived(args)))

    def sent(self, chain: int) -> Any:
        """The E-step sums of ``chain`` this actor sent last, whole."""
        return pack(self._sent[chain][1])

    def update_prior(self, chain: int, stats: Any, gamma: float, whole: bool, total_id: Any = None) -> bool:
        """One prior update for the whole block (the shards share the result), from the same
        statistics and by the same function as the driver's. ``stats`` None: the sum this actor
        kept; ``whole``: ``stats`` is the last actor's output (E-step total ``total_id``, maybe a
        change against the previous total). False, and nothing done, if that change is against a
        total this actor does not hold (rebuilt since): the driver then sends the statistics."""
        if stats is None:
            kept = self._kept.pop(chain, None)
            if kept is None:  # rebuilt since its E-step: its prior stays as restored
                return False
            stats = kept["stats"]
        elif whole:
            result = delta.decode(stats[0], self._totals.get(chain))
            if result is None:
                return False
            self._totals[chain] = (total_id, result)
            stats = result["stats"]
        else:
            stats = unpack(stats)
            self._totals[chain] = (total_id, {"stats": stats})
        p = self.shards[0].prior[chain]
        new = prior_step(p, stats, gamma)
        for s in self.shards:
            s.set_prior(chain, new)
        return True

    def replay(self, method: str, args: Any, keep: bool = False) -> None:
        """Run a call for its effect on the shards (a rebuilt actor's chains), results dropped;
        ``keep``: the actor owns the chain, so an E-step's sum is kept for its prior update."""
        args = _arrived(args)
        out = [getattr(s, method)(*args) for s in self.shards]
        if keep and method == "estep":
            self._kept[args[0]] = total(out)

    def prior_of(self, chain: int) -> Any:
        """The prior of ``chain`` the shards use (every shard holds the same), without the
        smoothing center it pulls toward: that never changes, and the driver holds it
        (``with_center``). Half the bytes of a smoothed prior."""
        p = self.shards[0].prior[chain]
        if getattr(p, "center", None) is None:
            return p
        out = copy.copy(p)
        out.center = None
        return out

    def ping(self) -> int:
        return len(self.shards)

    def peak_rss(self) -> int:
        """This worker process's peak resident memory, bytes (Linux reports kB)."""
        import resource  # Unix only: a benchmark's question, never asked on other systems

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def with_center(prior: Any, known: Any) -> Any:
    """A prior from ``ShardActor.prior_of`` given back the center of the driver's copy ``known``."""
    center = getattr(known, "center", None)
    if center is not None and getattr(prior, "center", "absent") is None:
        prior.center = center
    return prior


def _own(obj: Any) -> Any:
    """Arrays Ray handed over read-only (zero-copy from its object store) copied, also in a prior
    (a dataclass: this process's own, just unpickled, so its fields are set in place). A caller may
    then change them as it may a local group's, and the compiled kernels get the arrays a local
    group gives them: numba compiles a kernel again for a read-only array, which cost a Ray fit's
    actors 8–10 s at MNIST size (three more versions of the E-step's kernels) in a fresh cache. Not
    guarded against cycles or arrays shared between fields, and a dataclass's lists (a mixture
    prior's ``log_p``) are not walked: none of those reaches a kernel."""
    return walk(obj, _own_leaf)


def _own_leaf(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return a if a.flags.writeable else a.copy(order="K")
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            v = getattr(a, f.name)
            if isinstance(v, np.ndarray) or dataclasses.is_dataclass(v):
                w = _own_leaf(v)
                if w is not v:
                    object.__setattr__(a, f.name, w)
    return a


def _arrived(args: Any) -> Any:
    """A message as the shards take it: unpacked, its arrays owned (``_own``)."""
    return _own(unpack(args))


def _cause(exc: BaseException) -> BaseException:
    """The exception a shard raised, unwrapped from Ray's task error (nested folds wrap it again)."""
    while True:
        cause = getattr(exc, "cause", None)
        if not isinstance(cause, BaseException):
            return exc
        exc = cause
