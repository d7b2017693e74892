"""Run the fedrr Flower app from Python through ``flwr.simulation.run_simulation``.

``run_simulation`` cannot pass a run config, so the config goes to the apps through a file named
by ``FEDRR_RUN_CONFIG`` (read by ``load_run_config`` on both sides; Ray workers inherit the
environment). Ray: a local instance sized to this machine, or an existing cluster when
``RAY_ADDRESS`` is set — then no resource arguments are passed to ``ray.init`` (passing
``num_cpus`` while attached to a running cluster made ``run_simulation`` hang here)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FedrrError
from .config import CONFIG_ENV, load_run_config, n_nodes, read_config_file

_QUIET = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "RAY_DEDUP_LOGS": "0",
}


def backend_config(client_cpus: float = 1.0) -> dict:
    """Flower's Ray backend config: ``client_cpus`` per ClientApp actor (Flower's default of 2
    gives one actor on a 2-core machine); ``num_cpus`` only when Ray is started here."""
    init_args: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if os.environ.get("RAY_ADDRESS"):
        init_args["address"] = os.environ["RAY_ADDRESS"]
    else:
        init_args["num_cpus"] = os.cpu_count() or 1
    return {"client_resources": {"num_cpus": client_cpus, "num_gpus": 0.0}, "init_args": init_args}


def run_federation(
    config: Mapping[str, Any] | str | os.PathLike,
    *,
    client_cpus: float = 1.0,
    verbose: bool = False,
    server_app: Any = None,
    indexed_linkstate: bool = True,
) -> dict:
    """Run one simulated federation (one node per client, or cohorts) and return its metrics.

    ``config``: a dict of run-config keys (see ``fedrr.federation.config.DEFAULTS``) or a
    JSON/TOML file of them. Results land in ``results-dir/run-name/``. ``server_app`` replaces
    fedrr's ServerApp (e.g. one that audits what crosses the wire, as the tests do).
    ``indexed_linkstate`` indexes Flower's in-memory link state by node (``fast_linkstate``):
    same messages, but a round no longer slows down with the square of the number of nodes."""
    for k, v in _QUIET.items():
        os.environ.setdefault(k, v)
    raw = dict(read_config_file(config)) if isinstance(config, (str, os.PathLike)) else dict(config)
    if not raw.get("run-name"):
        raw["run-name"] = time.strftime("run-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    cfg = load_run_config(raw)  # validate before starting anything
    from flwr.simulation import run_simulation

    from .client_app import app as client_app
    from .server_app import app as default_server_app

    server_app = server_app if server_app is not None else default_server_app

    from . import fast_linkstate

    if indexed_linkstate:
        fast_linkstate.enable()
    else:
        fast_linkstate.disable()
    fd, path = tempfile.mkstemp(prefix="fedrr-run-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(cfg, f)
    old = os.environ.get(CONFIG_ENV)
    os.environ[CONFIG_ENV] = path
    if not verbose:
        logging.getLogger("flwr").setLevel(logging.WARNING)
    try:
        run_simulation(
            server_app=server_app,
            client_app=client_app,
            num_supernodes=n_nodes(cfg),
            backend_config=backend_config(client_cpus),
            verbose_logging=verbose,
        )
    finally:
        if old is None:
            os.environ.pop(CONFIG_ENV, None)
        else:
            os.environ[CONFIG_ENV] = old
        os.unlink(path)
    metrics_path = Path(cfg["results-dir"]) / cfg["run-name"] / "metrics.json"
    if server_app is not default_server_app and not metrics_path.exists():
        return {}
    if not metrics_path.exists():
        raise FedrrError(f"the ServerApp wrote no metrics ({metrics_path}); see the log above")
    metrics = json.loads(metrics_path.read_text())
    if metrics.get("status") != "done":
        raise FedrrError(f"federated run did not finish: {metrics.get('status')} (metrics in {metrics_path})")
    return metrics
