"""Executors that run per-shard work (E-steps, sweep cells). Results never depend on the
number of workers: work is cut into fixed shards, each with its own seed."""

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
