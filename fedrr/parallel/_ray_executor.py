"""Ray executor: the same ``map(fn, tasks)`` contract, run as Ray tasks on a local Ray instance or
an existing cluster (``address`` or the ``RAY_ADDRESS`` environment variable). Results equal the
serial executor's because every shard carries its own seed."""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..errors import ExecutorError, ValidationError

#: arrays at least this large go through the object store once per life, not once per task
_PUT_MIN_BYTES = 1 << 20


def _run_task(fn: Callable[[Any], Any], task: Any, keys: list[str], *arrays: Any) -> Any:
    """Worker side: Ray resolves the top-level refs to (read-only, zero-copy) arrays."""
    if keys:
        task = {**task, **dict(zip(keys, arrays))}
    return fn(task)


_QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}


def init_ray(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Make sure this process is connected to Ray: a running connection is kept; ``address`` (or
    ``RAY_ADDRESS``) joins that cluster, with no resource arguments (Ray rejects them there);
    otherwise a local instance of ``num_cpus`` is started. True if this call started or joined it."""
    import ray  # optional and heavy: imported when Ray is first used

    for k, v in _QUIET_ENV.items():
        os.environ.setdefault(k, v)
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=False)
    else:  # "local": a new instance, never one another process started on this machine
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    return True


class RayExecutor:
    """Runs each task as a Ray remote call. ``num_cpus`` is only used when this executor starts
    a local Ray instance; with a cluster (``address``/``RAY_ADDRESS``) it is not passed, because
    Ray rejects resource arguments when connecting to an existing cluster. ``cpus_per_task=0``
    shares a Ray whose CPUs are all held by actors (a Flower simulation's ClientApp actors).
    ``max_retries``: how often Ray reruns a task whose worker died (killed, out of memory, node
    lost); every task carries its own seed, so a rerun gives the same result. A task that still
    fails raises :class:`fedrr.errors.ExecutorError` naming it; an exception raised *by* the task
    (a ValidationError, say) is not retried and reaches the caller as itself.

    Jobs that keep their data in actors for their whole run (spread-EM's shards) take them from
    ``actor_slots``: ``n_actors`` of them (default one per CPU). ``reuse_actors``: the same actors
    serve job after job, so worker processes start once (``shutdown`` ends them; ``map`` ends idle
    ones first, as they hold CPUs). ``split_chains``: a job that runs several independent chains
    may put them on different actors where the counts allow (same numbers); False keeps every actor
    on a block of the data for every chain. ``group_class``: the class such a job builds its group
    of actors with (None: the job's own; fault tests put a subclass)."""

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        cpus_per_task: float = 1.0,
        max_retries: int = 3,
        n_actors: int | None = None,
        reuse_actors: bool = True,
        split_chains: bool = True,
    ):
        if isinstance(cpus_per_task, bool) or not isinstance(cpus_per_task, (int, float)) or not cpus_per_task >= 0:
            raise ValidationError("cpus_per_task", f"must be a number >= 0, got {cpus_per_task!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, (int, np.integer)) or max_retries < 0:
            raise ValidationError("max_retries", f"must be an integer >= 0, got {max_retries!r}")
        if n_actors is not None and (
            isinstance(n_actors, bool) or not isinstance(n_actors, (int, np.integer)) or n_actors < 1
        ):
            raise ValidationError("n_actors", f"must be None or an integer >= 1, got {n_actors!r}")
        if not isinstance(split_chains, (bool, np.bool_)):
            raise ValidationError("split_chains", f"must be True or False, got {split_chains!r}")
        self.split_chains = split_chains
        self.address = address
        self.num_cpus = num_cpus
        self.cpus_per_task = cpus_per_task
        self.max_retries = max_retries
        self.n_actors = n_actors
        self._started_here = False
        self.group_class = None  # the class a job builds its actor group with (None: its own)
        self.reuse_actors = reuse_actors
        self._actors: list = []  # idle actors kept between jobs (reuse_actors)
        self._remote_fn = None
        self._puts: dict[int, tuple[weakref.ref, Any]] = {}

    def _ensure(self):
        import ray  # optional and heavy: imported when Ray is first used

        if init_ray(self.address, self.num_cpus):
            self._started_here = True
        return ray

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
        """Run ``fn(task)`` for every task as a Ray task; results in task order. Large arrays in a
        task dict travel through the object store once: an array seen again in a later call (the
        released records, every EM iteration) reuses its object instead of being copied again."""
        ray = self._ensure()
        self.shutdown_actors()
        remote = self._remote(ray)
        self._purge()
        calls = []
        for t in tasks:
            keys, refs = [], []
            if isinstance(t, dict):
                light = dict(t)
                for k, v in t.items():
                    if isinstance(v, np.ndarray) and v.nbytes >= _PUT_MIN_BYTES:
                        keys.append(k)
                        refs.append(self._ref(ray, v))
                        light[k] = None
                t = light
            calls.append(remote.remote(fn, t, keys, *refs))
        out = []
        for i, ref in enumerate(calls):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayTaskError:  # the task's own exception (also an instance of its type)
                raise
            except ray.exceptions.RayError as exc:  # the worker or its node died, after every retry
                for rest in calls[i + 1 :]:
                    ray.cancel(rest)
                raise ExecutorError(
                    f"task {i} of {len(calls)} failed after {self.max_retries} retries: "
                    f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                ) from exc
        return out

    def _remote(self, ray):
        if self._remote_fn is None:
            self._remote_fn = ray.remote(num_cpus=self.cpus_per_task, max_retries=self.max_retries)(_run_task)
        return self._remote_fn

    def _ref(self, ray, arr: np.ndarray):
        """The object-store ref of ``arr``, put once while ``arr`` lives (keyed by identity)."""
        hit = self._puts.get(id(arr))
        if hit is not None and hit[0]() is arr:
            return hit[1]
        ref = ray.put(arr)
        self._puts[id(arr)] = (weakref.ref(arr), ref)
        return ref

    def _purge(self) -> None:
        for key in [k for k, (w, _) in self._puts.items() if w() is None]:
            del self._puts[key]

    def actor_slots(self) -> tuple[int, list | None]:
        """Ray connected; how many actors one job may hold (``n_actors``, or one per CPU of the
        cluster at ``cpus_per_task`` CPUs each; one per CPU when they ask for none), and the list of
        idle actors kept between jobs (``reuse_actors``: the job loads its work into them and tops
        the list up; the idle ones are ended first if there are more than it may hold), or None (a
        job's actors end with it)."""
        ray = self._ensure()
        cpus = ray.cluster_resources().get("CPU", 1)
        # actors that ask for no CPU (inside a Flower simulation): still one per CPU, never one per shard
        n = self.n_actors or max(1, int(cpus // (self.cpus_per_task or 1)))
        if not self.reuse_actors:
            return n, None
        if len(self._actors) > n:
            self.shutdown_actors()
        return n, self._actors

    def shutdown_actors(self) -> None:
        """Kill the idle actors: they hold their CPUs, which Ray tasks or another
        executor's actors may need (``map`` and ``shutdown`` call this)."""
        if self._actors:
            import ray  # optional and heavy: imported when Ray is first used

            for a in self._actors:
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self._actors.clear()

    def shutdown(self) -> None:
        """Kill the idle actors; stop the Ray instance if this executor started it (never a
        cluster it joined)."""
        if ray_ready():
            self.shutdown_actors()
        self._actors.clear()
        if self._started_here:
            import ray  # optional and heavy: imported when Ray is first used

            ray.shutdown()
            self._started_here = False
        self._remote_fn = None
        self._puts.clear()

    def __repr__(self) -> str:
        return (
            f"RayExecutor(address={self.address!r}, num_cpus={self.num_cpus!r}, cpus_per_task={self.cpus_per_task!r}, "
            f"max_retries={self.max_retries!r}, n_actors={self.n_actors!r}, reuse_actors={self.reuse_actors!r}, "
            f"split_chains={self.split_chains!r})"
        )


def ray_ready() -> bool:
    import ray  # optional and heavy: imported when Ray is first used

    return ray.is_initialized()


def ray_stop() -> None:
    """Shut this process's Ray down (or disconnect from a cluster), if it is up."""
    import ray  # optional and heavy: imported when Ray is first used

    if ray.is_initialized():
        ray.shutdown()


def ray_node() -> str | None:
    """This process's Ray node id (a restarted Ray has another), None when Ray is not up."""
    import ray  # optional and heavy: imported when Ray is first used

    return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None


def ray_alive(actors: list, timeout: float = 60.0) -> bool:
    """Whether every actor answers within ``timeout`` seconds (a dead one raises at once)."""
    import ray  # optional and heavy: imported when Ray is first used

    try:
        ray.get([a.__ray_ready__.remote() for a in actors], timeout=timeout)
    except Exception:  # noqa: BLE001 - any failure: not every actor is alive
        return False
    return True


def ray_kill(actors: list) -> None:
    """Kill the actors; one already gone (with its Ray instance) is skipped."""
    import ray  # optional and heavy: imported when Ray is first used

    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor)


def ray_map_unordered(
    fn: Callable[[Any], Any],
    tasks: dict[Any, Any],
    num_cpus: int,
    address: str | None,
    done: Callable[[Any, Any, BaseException | None], None],
    *,
    fatal: tuple = (),
    max_retries: int = 2,
) -> None:
    """Run ``fn(task)`` for every task as a Ray task (one CPU each) and report each to
    ``done(key, result, error)`` as it finishes. Starts a local Ray of ``num_cpus`` CPUs, or joins
    the cluster at ``address`` / RAY_ADDRESS (every node needs fedrr installed); a Ray this call
    started is stopped at the end. A task's own exception of a type in ``fatal`` stops everything
    and is raised; other failures (the task's error, or its worker dying after every retry) are
    reported and the rest go on."""
    import ray  # optional and heavy: imported when Ray is first used

    started = init_ray(address or None, num_cpus)
    try:
        remote = ray.remote(num_cpus=1, max_retries=max_retries)(fn)
        refs = {remote.remote(t): k for k, t in tasks.items()}
        pending = list(refs)
        try:
            while pending:
                finished, pending = ray.wait(pending, num_returns=1)
                for ref in finished:
                    try:
                        rec = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the task's own error
                        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
                        if isinstance(cause, fatal):
                            raise cause from None
                        done(refs[ref], None, cause)
                    except ray.exceptions.RayError as exc:  # its worker died after every retry
                        done(refs[ref], None, exc)
                    else:
                        done(refs[ref], rec, None)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()
