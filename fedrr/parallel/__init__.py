"""Generic executors: ``map(fn, tasks)`` serially, on threads, on local processes or as Ray tasks,
and Ray actors lent to jobs that keep their data in them (``RayExecutor.actor_slots``). They name
no estimator's work: spread-EM's groups of shards live with it (``fedrr.estimators.spread``).
Results never depend on the number of workers: work is cut into fixed shards, each with its own seed."""

from .executors import Executor, LocalExecutor, SerialExecutor, ThreadExecutor, make_executor, shard_bounds
from .ray_executor import RayExecutor  # imports ray only when first used

__all__ = [
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "SerialExecutor",
    "ThreadExecutor",
    "make_executor",
    "shard_bounds",
]
