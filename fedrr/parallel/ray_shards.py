"""Shards in Ray actors: each actor builds its block of shards once (from factories, which may read their
rows from a file so the data never passes through the driver) and keeps them, with their chains and priors,
for the whole job. Traffic per EM iteration is O(model), and every result equals the serial one bit for bit:

* a call sends its arguments once (``ray.put``, fetched by every actor), compressed (``Packed``);
* a sum over the shards (``reduce``: E-step statistics, losses and gradients, Hessians) is folded
  along the actors in shard order — actor a adds its shards' results to the running sum it gets
  from actor a − 1 and hands it on — so the floats are added in exactly the serial order and each
  actor sends one model-sized message, however many shards it holds;
* the last actor keeps each chain's summed E-step statistics, so a prior update sends them only
  to the other actors (straight from its output, not through the driver). ``traffic`` counts
  what crosses to or from an actor, pickled, per ``"<method> down|up"``.

An actor that dies (killed, out of memory, node lost) is rebuilt from its factories; its chains
restart from the priors the driver holds and the last E-step is replayed with the same seeds, so
the fit completes (deterministically, though not bit-identical to an uninterrupted run). A call is
numbered, and an actor that is asked for the same call again (because a later actor in the fold
lost its input) reuses its results instead of advancing its chains twice. An exception raised by
a shard itself (a ValidationError, say) is not retried: it reaches the caller as itself."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ExecutorError
from . import delta
from .shards import add, nbytes, pack, unpack

INLINE_BYTES = 64 * 1024  #: messages up to this size travel inside the call (no object-store trip)
#: methods whose traffic is one-off set-up (the initial priors and samples, the preconditioner)
SETUP_METHODS = ("set_prior", "init_samples", "hessian")


class ShardActor:
    """Holds a block of shards; answers the group's calls."""

    def __init__(self, factories: Sequence[Callable[[], Any]] = ()):
        from threadpoolctl import threadpool_limits

        self._limit = threadpool_limits(1, user_api="blas")  # the same BLAS arithmetic as the driver's shards
        self.load(factories)

    def load(self, factories: Sequence[Callable[[], Any]]) -> int:
        """Drop the shards held so far and build these (an actor serves one group after another)."""
        self.shards: list = []
        self._seq: Any = None
        self._out: list = []
        self._kept: dict[Any, Any] = {}  # chain -> the E-step sum this actor produced last (last actor)
        self._totals: dict[Any, tuple] = {}  # chain -> (id, the last E-step total it received)
        self._sent: dict[Any, tuple] = {}  # chain -> (id, the E-step sums it sent last)
        self._upstream: dict[Any, tuple] = {}  # chain -> (id, the E-step sums it received last)
        self.shards = [f() for f in factories]
        return len(self.shards)

    def _compute(self, seq: Any, method: str, args: Any) -> list:
        if seq is not None and seq == self._seq:  # the same call again: its results, not a second step
            return self._out
        out = [getattr(s, method)(*unpack(args)) for s in self.shards]
        self._seq, self._out = seq, out
        return out

    def call(self, seq: Any, method: str, args: Any, packed: bool) -> list:
        out = self._compute(seq, method, args)
        return [pack(r) for r in out] if packed else out

    def fold(
        self, seq: Any, method: str, args: Any, prev: list | None, keep: Any = None, base: Any = None, last=False
    ) -> tuple[Any, list[int]]:
        """The running sum after this actor's shards, in shard order, from the previous actor's
        (``prev`` = [its output, its handle]: in a list, so that Ray does not wait for it before
        this actor's own work starts); and the bytes of every actor's message so far. ``keep``: the
        chain of an E-step, whose sums are sent as changes against the sums of the E-step ``base``
        (``delta``), which the receivers hold; the last actor keeps the total for the prior update."""
        out = self._compute(seq, method, args)
        acc, sizes = None, []
        if prev is not None:
            import ray

            msg, sizes = ray.get(prev[0])
            acc = delta.decode(msg, self._upstream.get(keep)) if keep is not None else unpack(msg)
            if acc is None:  # a change against sums this actor does not hold (rebuilt): fetch them whole
                whole = ray.get(prev[1].sent.remote(keep))
                sizes = [*sizes, _wire(whole)]
                acc = unpack(whole)
            if keep is not None:
                self._upstream[keep] = (seq, acc)
        for r in out:
            acc = r if acc is None else add(acc, r)
        if keep is None:
            msg = pack(acc)
        else:
            msg = delta.encode(acc, base, self._sent.get(keep))
            self._sent[keep] = (seq, acc)
            if last:
                self._kept[keep] = acc
        return msg, [*sizes, _wire(msg)]

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
            stats = self._kept.pop(chain)["stats"]
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
        new = p.blend(p.estimate(stats), gamma)
        for s in self.shards:
            s.set_prior(chain, new)
        return True

    def replay(self, method: str, args: Any) -> None:
        """Run a call for its effect on the shards (a rebuilt actor's chains), results dropped."""
        for s in self.shards:
            getattr(s, method)(*unpack(args))

    def ping(self) -> int:
        return len(self.shards)

    def peak_rss(self) -> int:
        """This worker process's peak resident memory, bytes (Linux reports kB)."""
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class RayShards:
    """``n_actors`` actors, each owning a contiguous block of the shards (``cpus`` CPUs per actor).
    ``pool``: idle actors to load the blocks into (kept, emptied, on ``close``; updated in place when
    an actor is rebuilt; topped up to ``n_actors``), so a series of fits starts its workers once."""

    def __init__(
        self, factories: Sequence[Callable[[], Any]], n_actors: int, cpus: float = 1.0, pool: list | None = None
    ):
        import ray

        self.ray = ray
        n_actors = max(1, min(int(n_actors), len(factories)))
        bounds = [round(i * len(factories) / n_actors) for i in range(n_actors + 1)]
        self.blocks = [list(factories[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        self._remote = ray.remote(num_cpus=cpus, max_restarts=0)(ShardActor)
        self._pool = pool
        if pool is not None:
            pool.extend(self._remote.remote() for _ in range(n_actors - len(pool)))
            self.actors = pool[:n_actors]
            self._wait_all([a.load.remote(b) for a, b in zip(self.actors, self.blocks)])
        else:
            self.actors = [self._remote.remote(b) for b in self.blocks]
            self._wait_all([a.ping.remote() for a in self.actors])
        self.bytes = 0
        self.traffic: dict[str, int] = {}  # "method down" / "method up" -> bytes
        self.iteration_bytes = 0  # bytes of the calls after the first E-step, set-up methods excepted
        self.restarts = 0
        self._seq = 0
        self._in_iterations = False
        self._priors: dict[int, Any] = {}  # the driver's copy of each chain's prior
        self._last_estep: dict[int, tuple] = {}  # chain -> the last E-step's arguments (for a replay)
        self._folded: dict[int, tuple] = {}  # chain -> (stats of its last E-step, output ref, bytes, id)
        self._totals: dict[int, tuple] = {}  # chain -> (id, its last E-step total), as the actors know it
        self._init_args: tuple | None = None

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks)

    # -------------------------------------------------------------------------- calls
    def _send(self, method: str, args: Any):
        """The message, counted once per actor; large ones put in the object store once (every
        actor fetches the same object), small ones go inline with each call."""
        msg = pack(args)
        size = _wire(msg)
        self._count(f"{method} down", size * len(self.actors))
        return self.ray.put(msg) if size > INLINE_BYTES else msg

    def call(self, method: str, *args: Any, packed: bool = False) -> list[Any]:
        """``shard.method(*args)`` for every shard, results in shard order."""
        if method == "set_prior":
            self._priors[args[0]] = args[1]
        if method == "init_samples":
            self._init_args = args
        self._seq += 1
        seq, ref = self._seq, self._send(method, args)
        blocks = self._gather(lambda i, a, revived: a.call.remote(seq, method, ref, True))
        out = [r for block in blocks for r in block]
        self._count(f"{method} up", sum(_wire(r) for r in out))
        return [_own(unpack(r)) for r in out]

    def reduce_each(self, method: str, arg_lists: list[tuple]) -> list[Any]:
        return [self.reduce(method, *a) for a in arg_lists]  # each reduce keeps every actor busy

    def reduce(self, method: str, *args: Any) -> Any:
        """The sum, in shard order, of ``shard.method(*args)`` over all shards, folded along the actors."""
        if method == "estep":
            self._in_iterations = True
            self._last_estep[args[0]] = args
        keep = args[0] if method == "estep" else None
        self._seq += 1
        seq, ref = self._seq, self._send(method, args)
        base = self._totals[keep][0] if keep in self._totals else None
        for _ in range(3 * len(self.actors) + 1):
            outs, prev = [], None
            for i, a in enumerate(self.actors):
                up = None if prev is None else [prev, self.actors[i - 1]]
                prev = a.fold.remote(seq, method, ref, up, keep, base, i == len(self.actors) - 1)
                outs.append(prev)
            got = self._settle(outs, skip_chain=keep if method == "estep" else None)
            if got is not None:
                break
        else:
            raise ExecutorError(f"{method}: actors kept dying ({self.restarts} rebuilt)")
        msg, sizes = got
        self._count(f"{method} up", sum(sizes))
        if keep is None:
            return _own(unpack(msg))
        result = delta.decode(msg, self._totals.get(keep))
        if result is None:  # defensive: a change against a total the driver does not hold
            whole = self.ray.get(self.actors[-1].sent.remote(keep))
            self._count(f"{method} up", _wire(whole))
            result = unpack(whole)
        result = _own(result)
        self._totals[keep] = (seq, result)
        self._folded[keep] = (result["stats"], outs[-1], sizes[-1], seq)
        return result

    def update_prior(self, chain: int, stats: Any, gamma: float, updated: Any) -> None:
        """Every actor's prior of ``chain`` becomes ``updated``, which the driver computed from
        ``stats``: the last actor from the sum it kept, the others from its output."""
        hit = self._folded.pop(chain, None)
        last = len(self.actors) - 1
        tid = hit[3] if hit is not None else None
        whole: list = []

        def send_whole(i, a, revived):  # the statistics themselves
            whole[:] = whole or [pack(stats)]
            self._count("update_prior down", _wire(whole[0]))
            return a.update_prior.remote(chain, whole[0], gamma, False, tid)

        if hit is not None and hit[0] is stats:
            out_ref, size = hit[1], hit[2]  # what each other actor fetches: the last actor's message
            self._count("update_prior down", size * last)

            def submit(i, a, revived):
                if revived:  # a rebuilt actor holds nothing
                    return send_whole(i, a, revived)
                return a.update_prior.remote(chain, None if i == last else out_ref, gamma, i != last, tid)

            done = self._gather(submit)
            again = [i for i, ok in enumerate(done) if ok is False]  # it lacked the change's base
            if again:
                self._gather(send_whole, again)
        else:
            self._gather(send_whole)
        self._priors[chain] = updated

    # ---------------------------------------------------------------------- failures
    def _gather(self, submit, only: list[int] | None = None) -> list:
        """``submit(i, actor, revived)`` on every actor (or those in ``only``); results in actor
        order. A dead actor is rebuilt and its call submitted again."""
        which = list(range(len(self.actors))) if only is None else only
        refs = [submit(i, self.actors[i], False) for i in which]
        out = []
        for i, ref in zip(which, refs):
            for _ in range(3):
                try:
                    out.append(self.ray.get(ref))
                    break
                except self.ray.exceptions.RayTaskError as exc:  # the shard's own error: not a dead actor
                    raise _cause(exc) from None
                except self.ray.exceptions.RayActorError:
                    self._revive(i)
                    ref = submit(i, self.actors[i], True)
            else:
                raise ExecutorError(f"actor {i} kept dying ({self.restarts} rebuilt)")
        return out

    def _settle(self, refs: list, skip_chain: Any = None) -> Any:
        """Wait for a fold: the last actor's output if it completed; None if actors died (they
        are rebuilt: fold again). A shard's own exception is raised as itself."""
        try:
            return self.ray.get(refs[-1])
        except self.ray.exceptions.RayError:
            self.ray.wait(refs, num_returns=len(refs))
        dead = [i for i, a in enumerate(self.actors) if not self._alive(a)]
        if not dead:  # nobody died: the first actor whose task failed raised the shard's exception
            for ref in refs:
                try:
                    self.ray.get(ref)
                except self.ray.exceptions.RayTaskError as exc:
                    raise _cause(exc) from None
            raise ExecutorError("a fold failed but every actor is alive")  # pragma: no cover - defensive
        for i in dead:
            self._revive(i, skip_chain)
        return None

    def _alive(self, actor) -> bool:
        try:
            self.ray.get(actor.ping.remote())  # queued behind its running call, if any
            return True
        except self.ray.exceptions.RayActorError:
            return False

    def _revive(self, i: int, skip_chain: Any = None) -> None:
        """Rebuild actor i from its factories; restore every chain's prior and replay the last
        E-step (but that of ``skip_chain``, which the caller is about to run), so its shards hold
        samples again."""
        self.restarts += 1
        actor = self._remote.remote(self.blocks[i])
        self.ray.get(actor.ping.remote())
        for chain, prior in self._priors.items():
            self.ray.get(actor.call.remote(None, "set_prior", pack((chain, prior)), False))
        if self._init_args is not None:
            self.ray.get(actor.replay.remote("init_samples", pack(self._init_args)))
        for chain, args in self._last_estep.items():
            if chain != skip_chain:
                self.ray.get(actor.replay.remote("estep", pack(args)))
        self.actors[i] = actor
        if self._pool is not None:
            self._pool[i] = actor
        if i == len(self.actors) - 1:  # the sums the last actor kept are gone: prior updates send them
            self._folded.clear()

    def actor_peak_rss(self) -> list[int]:
        """Each actor's peak resident memory, bytes (for benchmarks)."""
        return [int(v) for v in self.ray.get([a.peak_rss.remote() for a in self.actors])]

    def kill(self, i: int) -> None:
        """Kill actor i (for fault tests): the next call finds it dead and rebuilds it."""
        self.ray.kill(self.actors[i], no_restart=True)

    def close(self) -> None:
        """Pooled actors drop their shards and stay for the next group; others are killed."""
        if self._pool is not None:
            try:
                self.ray.get([a.load.remote(()) for a in self.actors])
            except self.ray.exceptions.RayError:  # a dead one: the pool is rebuilt next time
                self._pool.clear()
        else:
            for a in self.actors:
                try:
                    self.ray.kill(a)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self.actors = []

    def _wait_all(self, refs: list) -> None:
        try:
            self.ray.get(refs)
        except self.ray.exceptions.RayTaskError as exc:  # a factory's own error (bad rows, say)
            raise _cause(exc) from None

    def _count(self, key: str, n: int) -> None:
        self.bytes += n
        self.traffic[key] = self.traffic.get(key, 0) + n
        if self._in_iterations and key.split()[0] not in SETUP_METHODS:
            self.iteration_bytes += n


def _own(obj: Any) -> Any:
    """Arrays Ray handed over read-only (zero-copy from its object store) copied, so the caller
    may change them in place as it may a local group's results."""
    if isinstance(obj, np.ndarray):
        return obj if obj.flags.writeable else obj.copy()
    if isinstance(obj, dict):
        return {k: _own(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_own(v) for v in obj)
    return obj


def _cause(exc: BaseException) -> BaseException:
    """The exception a shard raised, unwrapped from Ray's task error (nested folds wrap it again)."""
    while True:
        cause = getattr(exc, "cause", None)
        if not isinstance(cause, BaseException):
            return exc
        exc = cause


def _wire(obj: Any) -> int:
    """Bytes of a message as serialised (what crosses to or from an actor)."""
    try:
        return len(pickle.dumps(obj, protocol=5))
    except Exception:  # noqa: BLE001 - an unpicklable object is Ray's business; count its arrays
        return nbytes(obj)
