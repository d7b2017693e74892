"""Fault injection for executors: a task function wrapper whose worker process dies (SIGKILL) the
first time it runs a chosen task. It shows that a killed worker costs a retry, not a result."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any


def kill_count(marker_dir: str | os.PathLike) -> int:
    """How many worker processes CrashOnce wrappers using ``marker_dir`` have killed so far."""
    return sum(1 for n in os.listdir(marker_dir) if n.startswith("killed-"))


class CrashOnce:
    """Wraps ``fn``; a task for which ``select(task)`` is true kills its own process the first
    ``times`` times it runs (attempts are counted by marker files under ``marker_dir``, which
    every worker on the machine sees). Later attempts run ``fn`` normally."""

    def __init__(
        self, fn: Callable[[Any], Any], select: Callable[[Any], bool], marker_dir: str | os.PathLike, times: int = 1
    ):
        self.fn = fn
        self.select = select
        self.marker_dir = os.fspath(marker_dir)
        self.times = times

    def __call__(self, task: Any) -> Any:
        if self.select(task):
            for attempt in range(self.times):
                try:
                    fd = os.open(os.path.join(self.marker_dir, f"killed-{attempt}"), os.O_CREAT | os.O_EXCL)
                except FileExistsError:
                    continue
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)
        return self.fn(task)
