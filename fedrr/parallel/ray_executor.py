"""Ray executor: the same ``map(fn, tasks)`` contract, run as Ray tasks on a local Ray instance or
an existing cluster (``address`` or the ``RAY_ADDRESS`` environment variable). Results equal the
serial executor's because every shard carries its own seed."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from ..errors import ValidationError

_QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}


class RayExecutor:
    """Runs each task as a Ray remote call. ``num_cpus`` is only used when this executor starts
    a local Ray instance; with a cluster (``address``/``RAY_ADDRESS``) it is not passed, because
    Ray rejects resource arguments when connecting to an existing cluster. ``cpus_per_task=0``
    shares a Ray whose CPUs are all held by actors (a Flower simulation's ClientApp actors)."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None, cpus_per_task: float = 1.0):
        if isinstance(cpus_per_task, bool) or not isinstance(cpus_per_task, (int, float)) or not cpus_per_task >= 0:
            raise ValidationError("cpus_per_task", f"must be a number >= 0, got {cpus_per_task!r}")
        self.address = address
        self.num_cpus = num_cpus
        self.cpus_per_task = cpus_per_task
        self._started_here = False

    def _ensure(self):
        import ray

        for k, v in _QUIET_ENV.items():
            os.environ.setdefault(k, v)
        if ray.is_initialized():
            return ray
        address = self.address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False)
        self._started_here = True
        return ray

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        ray = self._ensure()
        remote = ray.remote(num_cpus=self.cpus_per_task, max_retries=3)(fn)
        return ray.get([remote.remote(t) for t in tasks])

    def shutdown(self) -> None:
        """Stop the Ray instance if this executor started it (never a cluster it joined)."""
        if self._started_here:
            import ray

            ray.shutdown()
            self._started_here = False

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, num_cpus={self.num_cpus!r}, cpus_per_task={self.cpus_per_task!r})"
