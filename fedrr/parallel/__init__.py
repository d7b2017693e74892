"""Generic executors: ``map(fn, tasks)`` serially, on threads, on local processes or as Ray tasks,
and Ray actors lent to jobs that keep their data in them (``RayExecutor.actor_slots``). They name
no estimator's work: spread-EM's groups of shards live with it (``fedrr.estimators.spread``).
Results never depend on the number of workers: work is cut into fixed shards, each with its own seed.
The modules are private (``_executors``, ``_ray_executor``); the names below are the public surface."""

from ._executors import Executor, LocalExecutor, SerialExecutor, ThreadExecutor, make_executor, shard_bounds
from ._ray_executor import (  # import ray only when first used
    RayExecutor,
    ray_alive,
    ray_kill,
    ray_map_unordered,
    ray_node,
    ray_ready,
    ray_stop,
)

__all__ = [
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "SerialExecutor",
    "ThreadExecutor",
    "make_executor",
    "ray_alive",
    "ray_kill",
    "ray_map_unordered",
    "ray_node",
    "ray_ready",
    "ray_stop",
    "shard_bounds",
]
