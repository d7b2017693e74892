"""Shards in Ray actors: each actor builds its block of shards once (from factories, which may read their
rows from a file so the data never passes through the driver) and keeps them, with their chains and priors,
for the whole job. Traffic per EM iteration is O(model), and every result equals the serial one bit for bit:

* a call sends its arguments once (``ray.put``, fetched by every actor), compressed (``Packed``);
* a sum over the shards (``reduce``: E-step statistics, losses and gradients, Hessians) is folded
  along the actors in shard order — actor a adds its shards' results to the running sum it gets
  from actor a − 1 and hands it on — so the floats are added in exactly the serial order and each
  actor sends one model-sized message, however many shards it holds;
* a batch of sums (every chain's E-step; the chains' M-step gradients, ``_local.Lockstep``) is
  pipelined: all its folds are submitted before any is awaited;
* the last actor keeps each chain's summed E-step statistics, so a prior update sends them only
  to the other actors (straight from its output, not through the driver). ``traffic`` counts
  what crosses to or from an actor, pickled, per ``"<method> down|up"``;
* ``chains`` > 1 (spread-EM's independent chains): the actors form teams, as many as the greatest
  common divisor of chains and actors; each team holds every shard, split in blocks over its
  actors, and serves the chains c with c mod teams = its index. Two actors and two chains: each
  actor runs one chain over all the data, with no fold between actors, and ``run_each`` runs a
  chain's whole M-step there (no round trip per gradient). A chain's sums are still taken in
  shard order: the same numbers.
* one actor per chain owns that chain's prior: its E-step statistics stay on the actor (only the
  M-step's sums come back), its prior updates are submitted without waiting (the next call
  queues behind them), the driver fetches the prior every ``CHECKPOINT_EVERY`` updates (what a
  rebuilt actor restarts from) and at the end (``fetch_priors``).

An actor that dies (killed, out of memory, node lost) is rebuilt from its factories; its chains
restart from the priors the driver holds (a checkpoint, where the actor owned them) and the last
E-step is replayed with the same seeds, so
the fit completes (deterministically, though not bit-identical to an uninterrupted run). A call is
numbered, and an actor that is asked for the same call again (because a later actor in the fold
lost its input) reuses its results instead of advancing its chains twice. An exception raised by
a shard itself (a ValidationError, say) is not retried: it reaches the caller as itself."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from ....errors import ExecutorError
from . import _delta as delta
from ._ray_actor import ShardActor, _cause, _own
from ._ray_priors import PriorUpdates
from ._wire import SETUP_METHODS, pack, unpack, wire

INLINE_BYTES = 64 * 1024  #: messages up to this size travel inside the call (no object-store trip)
#: shard methods whose first argument is a chain (they go to that chain's team; others to team 0)
CHAIN_METHODS = frozenset(
    ("set_prior", "update_prior", "estep", "init_samples", "n_samples_weight", "loss_grad", "hessian", "logit_moments")
)


class RayShards(PriorUpdates):
    """``n_actors`` actors in teams (``chains``, see the module doc), each actor owning a contiguous
    block of the shards (``cpus`` CPUs per actor). ``pool``: idle actors to load the blocks into
    (kept, emptied, on ``close``; updated in place when an actor is rebuilt; topped up to
    ``n_actors``), so a series of fits starts its workers once."""

    def __init__(
        self,
        factories: Sequence[Callable[[], Any]],
        n_actors: int,
        cpus: float = 1.0,
        pool: list | None = None,
        chains: int = 1,
    ):
        import ray  # optional and heavy: only a Ray group imports it

        self.ray = ray
        n_teams = math.gcd(max(1, int(chains)), max(1, int(n_actors)))
        per_team = max(1, min(int(n_actors) // n_teams, len(factories)))
        n_actors = n_teams * per_team
        bounds = [round(i * len(factories) / per_team) for i in range(per_team + 1)]
        self.blocks = [list(factories[a:b]) for _ in range(n_teams) for a, b in zip(bounds[:-1], bounds[1:])]
        self.teams = [list(range(t * per_team, (t + 1) * per_team)) for t in range(n_teams)]
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
        self._pending: list = []  # (chain of a checkpoint or None, ref): submitted, not awaited (``_flush``)
        self._updates = 0

    def __len__(self) -> int:
        return sum(len(self.blocks[i]) for i in self.teams[0])

    def _team(self, method: str, args: Sequence) -> list[int]:
        """The actors a call goes to: its chain's team, or team 0 (calls without a chain)."""
        return self.teams[args[0] % len(self.teams) if method in CHAIN_METHODS else 0]

    # -------------------------------------------------------------------------- calls
    def _send(self, method: str, args: Any, n_actors: int, one_off: bool = False):
        """The message, counted once per actor it goes to; large ones put in the object store once
        (every actor fetches the same object), small ones go inline with each call."""
        msg = pack(args)
        size = wire(msg)
        self._count(f"{method} down", size * n_actors, one_off)
        return self.ray.put(msg) if size > INLINE_BYTES else msg

    def call(self, method: str, *args: Any, packed: bool = False) -> list[Any]:
        """``shard.method(*args)`` for every shard, results in shard order."""
        if method == "set_prior":
            self._priors[args[0]] = args[1]
        if method == "init_samples":
            self._init_args = args
        self._seq += 1
        team = self._team(method, args)
        seq, ref = (self._seq, self._seq), self._send(method, args, len(team))
        blocks = self._gather(lambda i, a, revived: a.call.remote(seq, method, ref, True), team)
        out = [r for block in blocks for r in block]
        self._count(f"{method} up", sum(wire(r) for r in out))
        return [_own(unpack(r)) for r in out]

    def reduce(self, method: str, *args: Any) -> Any:
        """The sum, in shard order, of ``shard.method(*args)`` over all shards, folded along the actors."""
        return self.reduce_each(method, [args])[0]

    def reduce_each(self, method: str, arg_lists: Sequence[tuple]) -> list[Any]:
        """``[reduce(method, *args) for args in arg_lists]``, pipelined: every fold is submitted
        before any is awaited, so each actor goes from one to the next (the chains' E-steps, their
        M-steps' gradients) without waiting for the driver in between. A batch in which an actor
        died is folded again whole: the survivors answer from the results they kept."""
        estep = method == "estep"
        own = estep and self.solo_chains  # each chain's actor keeps its prior's statistics
        first, calls = self._seq + 1, []
        for args in arg_lists:
            self._before(method, args)
            if estep:
                self._in_iterations = True
                self._last_estep[args[0]] = args
            keep = args[0] if estep else None
            self._seq += 1
            base = self._totals[keep][0] if keep in self._totals else None
            team = self._team(method, args)
            calls.append(((self._seq, first), self._send(method, args, len(team)), keep, base, team))
        for _ in range(3 * len(self.actors) + 1):
            folds = []
            for seq, ref, keep, base, team in calls:
                outs, prev = [], None
                for j, i in enumerate(team):
                    up = None if prev is None else [prev, self.actors[team[j - 1]]]
                    last = j == len(team) - 1
                    prev = self.actors[i].fold.remote(seq, method, ref, up, keep, base, last, own)
                    outs.append(prev)
                folds.append(outs)
            got = self._settle(folds, skip_chains={c[2] for c in calls} if estep else set())
            if got is not None:
                break
        else:
            raise ExecutorError(f"{method}: actors kept dying ({self.restarts} rebuilt)")
        return [self._result(method, call, outs, msg) for call, outs, msg in zip(calls, folds, got)]

    def _before(self, method: str, args: tuple) -> None:
        """Called before each fold of a batch is submitted (fault tests kill an actor here)."""

    def _result(self, method: str, call: tuple, outs: list, got: tuple) -> Any:
        (n, _), _, keep, _, team = call
        msg, sizes = got
        self._count(f"{method} up", sum(sizes))
        if keep is None or self.solo_chains:
            return _own(unpack(msg))
        result = delta.decode(msg, self._totals.get(keep))
        if result is None:  # defensive: a change against a total the driver does not hold
            whole = self.ray.get(self.actors[team[-1]].sent.remote(keep))
            self._count(f"{method} up", wire(whole))
            result = unpack(whole)
        result = _own(result)
        self._totals[keep] = (n, result)
        self._folded[keep] = (result["stats"], outs[-1], sizes[-1], n)
        return result

    @property
    def solo_chains(self) -> bool:
        """Does one actor hold every shard of each chain (``run_each`` can run a chain's work there)?"""
        return all(len(t) == 1 for t in self.teams)

    def run_each(self, fn: Callable, jobs: Sequence[tuple], one_off: bool = False) -> list[Any]:
        """``fn(block, *args)`` for every (chain, args) of ``jobs`` on the actor of that chain's team
        (``solo_chains``), where ``block.reduce`` sums that actor's shards in shard order — the same
        numbers as this group's ``reduce``, without a round trip per call (a whole M-step on the
        actor). All submitted before any is awaited; a dead actor is rebuilt and asked again.
        ``one_off``: its traffic is set-up (the preconditioner), not per iteration."""
        if not self.solo_chains:
            raise ValueError("run_each needs one actor per team (n_actors dividing the chains)")
        subs = []
        for chain, args in jobs:
            self._before("run", args)
            msg = self._send(f"run:{getattr(fn, '__name__', 'fn')}", args, 1, one_off)
            subs.append((lambda i, a, revived, m=msg: a.run.remote(fn, m), self._team("estep", (chain,))))
        outs = [got[0] for got in self._gather_many(subs)]
        self._count(f"run:{getattr(fn, '__name__', 'fn')} up", sum(wire(o) for o in outs), one_off)
        return [_own(unpack(o)) for o in outs]

    # ---------------------------------------------------------------------- failures
    def _gather(self, submit, only: list[int] | None = None) -> list:
        """``submit(i, actor, revived)`` on every actor (or those in ``only``); results in actor
        order. A dead actor is rebuilt and its call submitted again."""
        return self._gather_many([(submit, only)])[0]

    def _gather_many(self, jobs: list) -> list[list]:
        """``_gather`` of several calls, ``jobs`` = [(submit, only)], all submitted before any is awaited."""
        everyone = list(range(len(self.actors)))
        jobs = [(submit, everyone if only is None else only) for submit, only in jobs]
        refs = [[submit(i, self.actors[i], False) for i in which] for submit, which in jobs]
        self._flush()
        outs = []
        for (submit, which), sent in zip(jobs, refs):
            out = []
            for i, ref in zip(which, sent):
                for _ in range(3):
                    try:
                        out.append(self.ray.get(ref))
                        break
                    except self.ray.exceptions.RayTaskError as exc:  # the shard's own error: not a dead actor
                        raise _cause(exc) from None
                    except self.ray.exceptions.RayActorError:
                        if self._alive(self.actors[i]):  # rebuilt already, for an earlier call
                            ref = submit(i, self.actors[i], True)
                            continue
                        self._revive(i)
                        ref = submit(i, self.actors[i], True)
                else:
                    raise ExecutorError(f"actor {i} kept dying ({self.restarts} rebuilt)")
            outs.append(out)
        return outs

    def _settle(self, folds: list[list], skip_chains: set) -> list | None:
        """Wait for a batch of folds: each one's last output if all completed; None if actors died
        (they are rebuilt: fold again). A shard's own exception is raised as itself."""
        self._flush()
        try:
            return self.ray.get([outs[-1] for outs in folds])
        except self.ray.exceptions.RayError:
            refs = [r for outs in folds for r in outs]
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
            self._revive(i, skip_chains)
        return None

    def _alive(self, actor) -> bool:
        try:
            self.ray.get(actor.ping.remote())  # queued behind its running call, if any
            return True
        except self.ray.exceptions.RayActorError:
            return False

    def _revive(self, i: int, skip_chains: set = frozenset()) -> None:
        """Rebuild actor i from its factories; restore every chain's prior and replay the last
        E-step (but those of ``skip_chains``, which the caller is about to run), so its shards hold
        samples again."""
        self.restarts += 1
        actor = self._remote.remote(self.blocks[i])
        self.ray.get(actor.ping.remote())
        team = next(t for t in self.teams if i in t)
        mine = lambda method, chain: i in self._team(method, (chain,))  # noqa: E731 - the chains it serves
        for chain, prior in self._priors.items():
            if mine("set_prior", chain):
                self.ray.get(actor.call.remote(None, "set_prior", pack((chain, prior)), False))
        if self._init_args is not None and mine("init_samples", self._init_args[0]):
            self.ray.get(actor.replay.remote("init_samples", pack(self._init_args)))
        for chain, args in self._last_estep.items():
            if chain not in skip_chains and mine("estep", chain):
                self.ray.get(actor.replay.remote("estep", pack(args), self.solo_chains))
        self.actors[i] = actor
        if self._pool is not None:
            self._pool[i] = actor
        if i == team[-1]:  # the sums its team's last actor kept are gone: prior updates send them
            self._folded = {c: v for c, v in self._folded.items() if not mine("estep", c)}

    def actor_peak_rss(self) -> list[int]:
        """Each actor's peak resident memory, bytes (for benchmarks)."""
        self._flush()
        return [int(v) for v in self.ray.get([a.peak_rss.remote() for a in self.actors])]

    def kill(self, i: int) -> None:
        """Kill actor i (for fault tests): the next call finds it dead and rebuilds it. ``ray.kill``
        only sends the request, so wait until ``ping`` finds the actor dead (else the next call may
        still run on it)."""
        actor = self.actors[i]
        self.ray.kill(actor, no_restart=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.ray.get(actor.ping.remote(), timeout=10)
            except self.ray.exceptions.RayActorError:
                return
            except self.ray.exceptions.GetTimeoutError:
                continue
            time.sleep(0.02)
        raise RuntimeError(f"actor {i} was still alive 60 s after ray.kill")

    def close(self) -> None:
        """Pooled actors drop their shards and stay for the next group; others are killed (after
        the prior updates still pending, whose errors are raised)."""
        self._flush()
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

    def _count(self, key: str, n: int, one_off: bool = False) -> None:
        self.bytes += n
        self.traffic[key] = self.traffic.get(key, 0) + n
        if self._in_iterations and not one_off and key.split()[0] not in SETUP_METHODS:
            self.iteration_bytes += n
