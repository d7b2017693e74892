"""The executor protocol: ``map(fn, tasks) -> list`` in task order. ``fn`` is a top-level
function so that process- and cluster-based executors (Ray) can ship it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from ..errors import ValidationError
from ._ray_executor import RayExecutor


class Executor(Protocol):
    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]: ...


class SerialExecutor:
    """Runs tasks one after another in this process."""

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        return [fn(t) for t in tasks]

    def __repr__(self) -> str:
        return "SerialExecutor()"


class ThreadExecutor:
    """Runs tasks in a pool of threads in this process (no pickling, shared memory). Pays off for
    work that releases the GIL, such as the compiled E-step kernel; same results as serial.
    ``n_workers`` defaults to the number of CPUs this process may use."""

    def __init__(self, n_workers: int | None = None):
        self.n_workers = n_workers

    def workers(self) -> int:
        """The number of threads ``map`` uses at most."""
        if self.n_workers is not None:
            return max(1, int(self.n_workers))
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not Linux
            return os.cpu_count() or 1

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        tasks = list(tasks)
        n = min(self.workers(), len(tasks))
        if n <= 1:
            return [fn(t) for t in tasks]
        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(fn, tasks))

    def __repr__(self) -> str:
        return f"ThreadExecutor(n_workers={self.n_workers})"


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
        tasks = list(tasks)
        with ProcessPoolExecutor(max_workers=self.n_workers) as pool:
            return list(pool.map(fn, tasks))

    def __repr__(self) -> str:
        return f"LocalExecutor(n_workers={self.n_workers})"


def make_executor(kind: str, ray_address: str = "") -> Any:
    """serial | threads | ray. Inside a Flower simulation Ray is already up and its actors hold the
    CPUs, so Ray tasks ask for no CPU there (else they could never be scheduled)."""
    if kind == "serial":
        return SerialExecutor()
    if kind == "threads":
        return ThreadExecutor()
    if kind == "ray":
        import ray  # optional and heavy: only asked for here

        if ray.is_initialized():
            return RayExecutor(cpus_per_task=0)
        return RayExecutor(address=ray_address or None)
    raise ValidationError("executor", f"must be 'serial', 'threads' or 'ray', got {kind!r}")
