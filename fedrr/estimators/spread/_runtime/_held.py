"""Whole fits where their data is held: a job (spread-EM's cross-validation) sends its records once
to each actor of a Ray executor, then runs its independent tasks (one candidate's fit and held-out
scores on one fold; the tested fit beside the refit) on whichever actor is free, the driver sending
only each task's few arguments. Off Ray the tasks run here, one after another, on the executor the
job was given. A task's result depends on its arguments and the data only, so every executor gives
the same results."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ....errors import ExecutorError
from ....parallel import RayExecutor, SerialExecutor
from ._ray_actor import ShardActor, _cause


class HeldData:
    """``data`` held where ``executor`` runs work, for the tasks of ``run`` until ``close``: on a Ray
    executor every actor (the executor's pooled ones, or its own) holds it, put in the object store
    once; elsewhere this process does."""

    def __init__(self, executor: Any, data: Any):
        self.executor, self.data, self.actors, self._pool = executor, data, [], None
        self.remote = isinstance(executor, RayExecutor)
        if not self.remote:
            return
        import ray  # optional and heavy: only a Ray executor gets here

        self.ray = ray
        n, self._pool = executor.actor_slots()
        cls = ray.remote(num_cpus=executor.cpus_per_task, max_restarts=0)(ShardActor)
        if self._pool is None:
            self.actors = [cls.remote() for _ in range(n)]
        else:
            self._pool.extend(cls.remote() for _ in range(n - len(self._pool)))
            self.actors = self._pool[:n]
        self.key = uuid.uuid4().hex
        ref = ray.put(data)
        self._call(lambda: ray.get([a.hold.remote(self.key, ref) for a in self.actors]))

    def run(self, fn: Callable, tasks: Sequence[tuple]) -> list[Any]:
        """``[fn(data, executor', *task) for task in tasks]``, in task order: on Ray each task on the
        next free actor with ``executor'`` a ``SerialExecutor`` (an actor is one CPU); elsewhere here,
        in order, with ``executor' = executor``."""
        if not self.remote:
            return [fn(self.data, self.executor, *t) for t in tasks]
        return self._call(lambda: self._spread_over_actors(fn, tasks))

    def _spread_over_actors(self, fn: Callable, tasks: Sequence[tuple]) -> list[Any]:
        out: list[Any] = [None] * len(tasks)
        todo = list(range(len(tasks)))[::-1]
        running: dict[Any, tuple[int, Any]] = {}

        def submit(actor) -> None:
            i = todo.pop()
            running[actor.run_held.remote(self.key, fn, (SerialExecutor(), *tasks[i]))] = (i, actor)

        for a in self.actors[: len(tasks)]:
            submit(a)
        while running:
            (done,), _ = self.ray.wait(list(running), num_returns=1)
            i, a = running.pop(done)
            out[i] = self.ray.get(done)
            if todo:
                submit(a)
        return out

    def _call(self, fn: Callable) -> Any:
        try:
            return fn()
        except self.ray.exceptions.RayTaskError as exc:  # a task's own error (a ValidationError, say)
            raise _cause(exc) from None
        except self.ray.exceptions.RayError as exc:  # an actor died: this job's tasks are lost
            if self._pool is not None:
                self._pool.clear()
            raise ExecutorError(f"an actor holding a cross-validation's records failed: {type(exc).__name__}") from exc

    def close(self) -> None:
        """The actors let go of the data (pooled ones stay for the next job; its own are ended)."""
        if not self.remote:
            return
        for a in self.actors:
            try:
                if self._pool is None:
                    self.ray.kill(a)
                else:
                    self.ray.get(a.drop.remote(self.key))
            except self.ray.exceptions.RayError:  # already gone
                pass
        self.actors = []

    def __enter__(self) -> HeldData:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
