"""Whole fits where their data is held: a job (spread-EM's cross-validation) sends its records once
to each actor of a Ray executor, then runs its independent tasks (one candidate's fit and held-out
scores on one fold; the tested fit beside the refit) on whichever actor is free, the driver sending
only each task's few arguments. Off Ray the tasks run here, one after another, on the executor the
job was given. A task's result depends on its arguments and the data only, so every executor gives
the same results, and a task whose actor died is run again on a new one."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ....errors import ExecutorError
from ....parallel import RayExecutor, SerialExecutor
from ._ray_actor import ShardActor, _cause


def _recording(data: Any, fn: Callable, *args: Any) -> tuple[Any, list[tuple[str, type]]]:
    """``fn(data, *args)`` on an actor, with the warnings it raised (an actor's output does not reach
    the driver: ``HeldData.run`` raises them there again)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(data, *args)
    return out, [(str(w.message), w.category) for w in caught]


class HeldData:
    """``data`` held where ``executor`` runs work, for the tasks of ``run`` until ``close``: on a Ray
    executor by up to ``max_actors`` actors (the executor's pooled ones, or its own; with
    ``cpus_per_task=0`` at most one per CPU of the cluster), put in the object store once;
    elsewhere by this process."""

    def __init__(self, executor: Any, data: Any, max_actors: int | None = None):
        self.executor, self.data, self.actors, self._pool = executor, data, [], None
        self.remote = isinstance(executor, RayExecutor)
        if not self.remote:
            return
        import ray  # optional and heavy: only a Ray executor gets here

        self.ray = ray
        n, self._pool = executor.actor_slots()
        if not executor.cpus_per_task:  # actors that hold no CPU: as many as the cluster has CPUs
            n = min(n, max(1, int(ray.cluster_resources().get("CPU", 1))))
        n = max(1, min(n, max_actors or n))
        self._cls = ray.remote(num_cpus=executor.cpus_per_task, max_restarts=0)(ShardActor)
        if self._pool is None:
            self.actors = [self._cls.remote() for _ in range(n)]
        else:
            self._pool.extend(self._cls.remote() for _ in range(n - len(self._pool)))
            self.actors = self._pool[:n]
        self.key = uuid.uuid4().hex
        self._ref = ray.put(data)
        self._running: dict[Any, tuple[int, Any]] = {}
        self._call(lambda: ray.get([a.hold.remote(self.key, self._ref) for a in self.actors]))

    def run(self, fn: Callable, tasks: Sequence[tuple]) -> list[Any]:
        """``[fn(data, executor', *task) for task in tasks]``, in task order: on Ray each task on the
        next free actor with ``executor'`` a ``SerialExecutor`` (an actor is one CPU), its warnings
        raised here again; elsewhere here, in order, with ``executor' = executor``."""
        if not self.remote:
            return [fn(self.data, self.executor, *t) for t in tasks]
        out = self._call(lambda: self._spread_over_actors(fn, tasks))
        results = []
        for value, caught in out:
            for message, category in caught:
                warnings.warn(message, category, stacklevel=2)
            results.append(value)
        return results

    def _submit(self, actor: Any, fn: Callable, i: int, task: tuple) -> None:
        ref = actor.run_held.remote(self.key, _recording, (fn, SerialExecutor(), *task))
        self._running[ref] = (i, actor)

    def _spread_over_actors(self, fn: Callable, tasks: Sequence[tuple]) -> list[Any]:
        out: list[Any] = [None] * len(tasks)
        todo = list(range(len(tasks)))[::-1]
        retries = 0
        for a in self.actors[: len(tasks)]:
            i = todo.pop()
            self._submit(a, fn, i, tasks[i])
        while self._running:
            (done,), _ = self.ray.wait(list(self._running), num_returns=1)
            i, a = self._running.pop(done)
            try:
                out[i] = self.ray.get(done)
            except self.ray.exceptions.RayActorError:  # the actor died (killed, out of memory, node lost)
                retries += 1
                if retries > self.executor.max_retries:
                    raise
                a = self._replace(a)
                todo.append(i)
            if todo:
                j = todo.pop()
                self._submit(a, fn, j, tasks[j])
        return out

    def _replace(self, dead: Any) -> Any:
        """A new actor holding the data, in the dead one's place (and the pool's)."""
        new = self._cls.remote()
        new.hold.remote(self.key, self._ref)  # the task queues behind it on the new actor
        k = self.actors.index(dead)
        self.actors[k] = new
        if self._pool is not None and dead in self._pool:
            self._pool[self._pool.index(dead)] = new
        return new

    def _call(self, fn: Callable) -> Any:
        try:
            return fn()
        except BaseException as exc:  # the actors still running a task stop now, not after their fits
            self._stop_running()
            if isinstance(exc, self.ray.exceptions.RayTaskError):  # a task's own error (a ValidationError)
                raise _cause(exc) from None
            if isinstance(exc, self.ray.exceptions.RayError):  # an actor died more often than retried
                msg = f"an actor holding a cross-validation's records failed: {type(exc).__name__}"
                raise ExecutorError(msg) from exc
            raise

    def _stop_running(self) -> None:
        """Kill the actors with a task still running (out of the pool: the next job starts new ones)."""
        busy = {id(a): a for _, a in self._running.values()}
        self._running.clear()
        for a in busy.values():
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
            if self._pool is not None and a in self._pool:
                self._pool.remove(a)
            self.actors = [b for b in self.actors if b is not a]

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
