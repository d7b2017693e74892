"""Executors that run per-shard work (E-steps, sweep cells). Results never depend on the
number of workers: work is cut into fixed shards, each with its own seed."""

from .executors import Executor, LocalExecutor, SerialExecutor, shard_bounds

__all__ = ["Executor", "LocalExecutor", "SerialExecutor", "shard_bounds"]
