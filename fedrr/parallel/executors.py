"""The executor protocol: ``map(fn, tasks) -> list`` in task order. ``fn`` is a top-level
function so that process- and cluster-based executors (Ray) can ship it."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol

import numpy as np


class Executor(Protocol):
    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]: ...


class SerialExecutor:
    """Runs tasks one after another in this process."""

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        return [fn(t) for t in tasks]

    def __repr__(self) -> str:
        return "SerialExecutor()"


def shard_bounds(n: int, shard_size: int) -> list[tuple[int, int]]:
    """Fixed-size contiguous shards [(start, stop)]: independent of how many workers run them."""
    return [(s, min(s + shard_size, n)) for s in range(0, n, shard_size)] or [(0, 0)]


def shard_generators(seed_seq: np.random.SeedSequence, n_shards: int) -> list[np.random.Generator]:
    return [np.random.default_rng(s) for s in seed_seq.spawn(n_shards)]


class LocalExecutor:
    """Runs tasks in a pool of local worker processes (no Ray needed); same results as serial."""

    def __init__(self, n_workers: int = 2):
        self.n_workers = n_workers

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        from concurrent.futures import ProcessPoolExecutor

        tasks = list(tasks)
        with ProcessPoolExecutor(max_workers=self.n_workers) as pool:
            return list(pool.map(fn, tasks))

    def __repr__(self) -> str:
        return f"LocalExecutor(n_workers={self.n_workers})"
