"""Shards in Ray actors: each actor builds its block of shards once (from factories, which may read
their rows from a file so the data never passes through the driver) and keeps them, with their
chains and priors, for the whole job. Each call sends the model once (``ray.put``, fetched by every
actor) and returns per-shard results — sufficient statistics compressed (``Packed``), losses and
gradients as they are — so the traffic per EM iteration is O(model), whatever the data size, and
the driver sums in shard order exactly as a local group does: the same numbers, bit for bit.

An actor that dies (killed, out of memory, node lost) is rebuilt from its factories; its chains
restart from the priors the driver holds and the last E-step is replayed with the same seeds, so
the fit completes (deterministically, though not bit-identical to an uninterrupted run)."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import Any

from .shards import nbytes, pack, total, unpack


class ShardActor:
    """Holds a block of shards; answers the group's calls."""

    def __init__(self, factories: Sequence[Callable[[], Any]]):
        from threadpoolctl import threadpool_limits

        self._limit = threadpool_limits(1, user_api="blas")  # the same BLAS arithmetic as the driver's shards
        self.shards = [f() for f in factories]

    def call(self, method: str, args: Any, packed: bool) -> list:
        args = unpack(args)
        out = [getattr(s, method)(*args) for s in self.shards]
        return [pack(r) for r in out] if packed else out

    def update_prior(self, chain: int, stats: Any, gamma: float, fallback: Any) -> None:
        """One prior update for the whole block (the shards share the result), from the same
        statistics and by the same function as the driver's."""
        stats = unpack(stats)
        p = self.shards[0].prior[chain] if self.shards[0].prior[chain] is not None else fallback
        new = p.blend(p.estimate(stats), gamma)
        for s in self.shards:
            s.set_prior(chain, new)

    def set_prior(self, chain: int, prior: Any) -> None:
        for s in self.shards:
            s.set_prior(chain, prior)

    def ping(self) -> int:
        return len(self.shards)


class RayShards:
    """``n_actors`` actors, each owning a contiguous block of the shards (``cpus`` CPUs per actor)."""

    def __init__(
        self, factories: Sequence[Callable[[], Any]], n_actors: int, cpus: float = 1.0, max_task_retries: int = 0
    ):
        import ray

        self.ray = ray
        n_actors = max(1, min(int(n_actors), len(factories)))
        bounds = [round(i * len(factories) / n_actors) for i in range(n_actors + 1)]
        self.blocks = [list(factories[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        self._remote = ray.remote(num_cpus=cpus, max_restarts=0)(ShardActor)
        self.actors = [self._remote.remote(b) for b in self.blocks]
        ray.get([a.ping.remote() for a in self.actors])
        self.bytes = 0
        self.restarts = 0
        self._priors: dict[int, Any] = {}  # the driver's copy of each chain's prior
        self._last_estep: dict[int, tuple] = {}  # chain -> the last E-step's arguments (for a replay)

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks)

    # -------------------------------------------------------------------------- calls
    def call(self, method: str, *args: Any, packed: bool = False) -> list[Any]:
        if method == "estep":
            self._last_estep[args[0]] = args
        if method == "set_prior":
            self._priors[args[0]] = args[1]
        msg = pack(args)
        self.bytes += _wire(msg) * len(self.actors)
        ref = self.ray.put(msg)
        results = self._gather(lambda a: a.call.remote(method, ref, packed), method, args, packed)
        out = [r for block in results for r in block]
        self.bytes += sum(_wire(r) for r in out)
        return [unpack(r) for r in out] if packed else out

    def reduce(self, method: str, *args: Any) -> Any:
        return total(self.call(method, *args, packed=True))

    def update_prior(self, chain: int, stats: Any, gamma: float, updated: Any) -> None:
        msg = pack(stats)
        self.bytes += _wire(msg) * len(self.actors)
        ref = self.ray.put(msg)
        self._gather(lambda a: a.update_prior.remote(chain, ref, gamma, None), None, None, False)
        self._priors[chain] = updated

    def _gather(self, submit, method, args, packed) -> list:
        refs = [submit(a) for a in self.actors]
        out = []
        for i, ref in enumerate(refs):
            try:
                out.append(self.ray.get(ref))
            except self.ray.exceptions.RayTaskError:  # the shard's own error: not a dead actor
                raise
            except self.ray.exceptions.RayActorError:
                self._revive(i)
                out.append(self.ray.get(submit(self.actors[i])))
        return out

    def _revive(self, i: int) -> None:
        """Rebuild actor i from its factories; restore every chain's prior and replay the last
        E-step, so its shards hold samples again."""
        self.restarts += 1
        actor = self._remote.remote(self.blocks[i])
        self.ray.get(actor.ping.remote())
        for chain, prior in self._priors.items():
            self.ray.get(actor.set_prior.remote(chain, prior))
        for args in self._last_estep.values():
            self.ray.get(actor.call.remote("estep", pack(args), True))
        self.actors[i] = actor

    def kill(self, i: int) -> None:
        """Kill actor i (for fault tests): the next call finds it dead and rebuilds it."""
        self.ray.kill(self.actors[i], no_restart=True)

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []


def _wire(obj: Any) -> int:
    """Bytes of a message as serialised (what crosses to or from an actor)."""
    try:
        return len(pickle.dumps(obj, protocol=5))
    except Exception:  # noqa: BLE001 - an unpicklable object is Ray's business; count its arrays
        return nbytes(obj)
