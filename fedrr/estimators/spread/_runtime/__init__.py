"""Spread-EM's runtime: groups of shards that own a block of the records for a whole fit and answer
the EM's small calls (E-steps, prior updates, the M-step's sums), in this process (``LocalShards``,
on the executor's threads) or in Ray actors (``RayShards``). ``shard_group`` picks the group for an
executor of ``fedrr.parallel``, which knows nothing of spread-EM: it only runs tasks and lends
actors. Every group implements ``ShardGroup`` and gives the same numbers (sums in shard order, a
seed per shard)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ....parallel import RayExecutor, SerialExecutor, ThreadExecutor
from ._group import ShardGroup
from ._held import HeldData
from ._local import LocalShards, Lockstep, prior_step, traffic_report
from ._ray_shards import RayShards

__all__ = [
    "HeldData",
    "LocalShards",
    "Lockstep",
    "RayShards",
    "ShardGroup",
    "holds_shards",
    "prior_step",
    "shard_group",
    "traffic_report",
]


def holds_shards(executor: Any) -> bool:
    """Can spread-EM keep its shards on ``executor`` between calls? Serial, thread and Ray executors
    can, or an object with its own ``shard_group(factories, chains)`` (a wrapper that times a group,
    say); a pool of processes cannot."""
    return isinstance(executor, (SerialExecutor, ThreadExecutor, RayExecutor)) or callable(
        getattr(executor, "shard_group", None)
    )


def shard_group(executor: Any, factories: Sequence[Callable[[], Any]], chains: int = 1) -> ShardGroup:
    """The shards built by ``factories`` (zero-argument callables), held where ``executor`` runs work
    for the whole fit: in this process, called one after another (serial) or on the executor's
    threads; or in Ray actors, one per CPU of the cluster (``n_actors`` to choose), ``cpus_per_task``
    CPUs each, the ``chains`` placed on teams of actors unless ``split_chains`` is False."""
    if isinstance(executor, RayExecutor):
        n_actors, pool = executor.actor_slots()
        cls = executor.group_class or RayShards
        chains = chains if executor.split_chains else 1
        return cls(factories, n_actors, cpus=executor.cpus_per_task, pool=pool, chains=chains)
    if isinstance(executor, ThreadExecutor):
        return LocalShards(factories, executor.workers())
    if isinstance(executor, SerialExecutor):
        return LocalShards(factories, 1)
    return executor.shard_group(factories, chains=chains)
