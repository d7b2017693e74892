"""Everything that depends on the installed flwr version, in one place: the simulation runner
that lets Flower carry fedrr's run config, sanitised error replies, and the link-state index.
fedrr pins flwr 1.41.0 (pyproject); these use private Flower APIs checked against that version
and fail with a clear message on another one."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import re
import tempfile
from pathlib import Path
from typing import Any

import flwr
import tomli_w
from flwr.app import Context, Error, Message, RecordDict

from ...errors import FedrrError

TESTED_FLWR = "1.41.0"
_PATH = re.compile(r"(?<![\w.])(/[^\s'\":,;)]+)+")


def public_message(exc: BaseException | str) -> str:
    """'TypeName: message' on one line, with absolute paths replaced by their last component: what
    may leave a node or reach a log (never a traceback or a local path)."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    text = " ".join(str(text).split())
    return _PATH.sub(lambda m: "<path>/" + Path(m.group(0)).name, text)[:500]


def error_reply(msg: Message, exc: BaseException | str) -> Message:
    """An error reply to ``msg`` carrying only ``public_message(exc)``."""
    from flwr.common.constant import ErrorCode

    reason = public_message(exc)
    logging.getLogger("fedrr").warning("client error: %s", reason)
    return Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason), reply_to=msg)


def _check_version() -> None:
    if flwr.__version__ != TESTED_FLWR:
        raise FedrrError(
            f"fedrr's simulation runner is written for flwr {TESTED_FLWR}, found {flwr.__version__}; "
            f"install flwr=={TESTED_FLWR} or use `flwr run` (fedrr.federation.flwr_cli)"
        )


@contextlib.contextmanager
def ray_kept_up():
    """Flower's Ray backend starts Ray when it is not running and shuts it down at the end of every
    simulation; inside this block it only stops the run's ClientApp actors, so the next simulation
    starts no Ray instance (a sweep's Flower cells, one after another). Ray is shut down when the
    block ends, if it was not running before it. The block's value restarts it: called after a
    failed cell, it shuts down the Ray this block started (a cell may have broken it; the next
    Flower simulation starts a fresh one), and leaves alone a Ray that was up before.

    The ClientApp actors are kept too: a simulation whose actors all came back idle hands them to
    the next one with the same client resources, which then starts none (each start imports flwr
    and fedrr and loads the population's dataset: seconds per Flower cell); kept only if every one
    still answers. A node's ledger is in its Context, which Flower keeps on the driver, and the app
    arrives with every message; what an actor keeps is its process's caches (the last population,
    keyed by the whole run config, run name included), so a reused actor answers as a fresh one."""
    from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend

    from ...parallel import ray_alive, ray_kill, ray_node, ray_ready, ray_stop

    was_up = ray_ready()
    original = RayBackend.terminate, RayBackend.build
    kept: dict[str, Any] = {}  # "key": Ray node, pool size and resources; "actors": the last run's idle actors

    def key(backend, capacity: int) -> str:  # the same Ray instance (node), resources and pool size
        return repr((ray_node(), capacity, sorted(backend.client_resources.items()), backend.actor_kwargs))

    def drop_kept() -> None:
        ray_kill(kept.pop("actors", ()))
        kept.clear()

    def build(self, app_fn) -> None:  # RayBackend.build, on the last run's actors when they fit
        from flwr.simulation.ray_transport.ray_actor import BasicActorPool, ClientAppActor, pool_size_from_resources

        if not kept or kept.get("key") != key(self, pool_size_from_resources(self.client_resources)):
            drop_kept()
            return original[1](self, app_fn)
        self.pool = BasicActorPool(
            actor_type=ClientAppActor, client_resources=self.client_resources, actor_kwargs=self.actor_kwargs
        )
        self.pool.pool.extend(kept.pop("actors"))
        self.pool.num_actors = len(self.pool.pool)
        kept.clear()
        self.app_fn = app_fn

    def terminate(self) -> None:  # RayBackend.terminate without its ray.shutdown(), keeping idle actors
        if not self.pool:
            return
        drop_kept()
        pool = self.pool
        idle = pool.num_actors > 0 and len(pool.pool) == pool.num_actors and not pool._future_to_actor
        if idle and ray_alive(pool.pool):
            kept.update(key=key(self, pool.actors_capacity), actors=list(pool.pool))
        else:  # Flower puts an actor back in its pool after any error, a dead one included
            ray_kill([*pool.pool, *pool._future_to_actor.values()])

    def restart() -> None:
        drop_kept()
        if not was_up:
            ray_stop()

    RayBackend.terminate, RayBackend.build = terminate, build
    try:
        yield restart
    finally:
        RayBackend.terminate, RayBackend.build = original
        drop_kept()
        if not was_up:
            ray_stop()


def simulate(
    server_app: Any, client_app: Any, run_config: dict, num_supernodes: int, backend_config: dict, verbose: bool = False
) -> None:
    """Flower's simulation runtime with ``run_config`` as the run config of the ServerApp and every
    ClientApp (``context.run_config``), as ``flwr run --run-config`` gives it: written as the
    [tool.flwr.app.config] of a throw-away app directory, the way Flower reads an app's config.
    (``flwr.simulation.run_simulation`` gives the apps an empty run config.)"""
    _check_version()
    from flwr.common.constant import RUN_ID_NUM_BYTES, SUPERLINK_NODE_ID, TASK_ID_NUM_BYTES
    from flwr.server.superlink.linkstate.utils import generate_rand_int_from_bytes

    rs = importlib.import_module("flwr.simulation.run_simulation")  # the module, not the function
    from flwr.supercore.constant import NOOP_FEDERATION_ID
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.supercore.telemetry import EventType

    params = inspect.signature(rs._run_simulation).parameters
    if not {"app_dir", "run", "server_app_context", "is_app"} <= set(params):
        raise FedrrError(f"flwr {flwr.__version__}'s simulation runtime has changed; fedrr needs flwr=={TESTED_FLWR}")
    run_id = generate_rand_int_from_bytes(RUN_ID_NUM_BYTES)
    run = Run.create_empty(run_id=run_id)
    run.primary_task_id = generate_rand_int_from_bytes(TASK_ID_NUM_BYTES)
    run.federation_id = NOOP_FEDERATION_ID
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run_id, SUPERLINK_NODE_ID
    server_ctx = Context(run_id=run_id, node_id=0, node_config={}, state=RecordDict(), run_config=dict(run_config))
    with tempfile.TemporaryDirectory(prefix="fedrr-app-") as app_dir:
        project = {
            "build-system": {"requires": ["hatchling"], "build-backend": "hatchling.build"},
            "project": {"name": "fedrr-run", "version": "1.0.0", "dependencies": []},
            "tool": {
                "flwr": {
                    "app": {
                        "publisher": "fedrr",
                        "components": {
                            "serverapp": "fedrr.federation.server_app:app",
                            "clientapp": "fedrr.federation.client_app:app",
                        },
                        "config": dict(run_config),
                    }
                }
            },
        }
        (Path(app_dir) / "pyproject.toml").write_text(tomli_w.dumps(project))
        rs._run_simulation(
            num_supernodes=num_supernodes,
            exit_event=EventType.PYTHON_API_RUN_SIMULATION_LEAVE,
            client_app=client_app,
            server_app=server_app,
            backend_name="ray",
            backend_config=backend_config,
            app_dir=app_dir,
            run=run,
            server_app_context=server_ctx,
            verbose_logging=verbose,
            is_app=True,
        )
