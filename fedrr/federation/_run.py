"""Run the fedrr Flower app in Flower's simulation runtime from Python, with the run config carried
by Flower itself (``context.run_config`` on the ServerApp and every ClientApp, as ``flwr run``).

Ray: a local instance sized to this machine, or an existing cluster when ``RAY_ADDRESS`` is set —
then no resource arguments are passed to ``ray.init`` (passing ``num_cpus`` while attached to a
running cluster made the simulation hang)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import tomllib
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FedrrError, ValidationError
from ..run_config import RunConfig

QUIET_ENV = {
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


def load_run_config(config: RunConfig | Mapping[str, Any] | str | os.PathLike) -> RunConfig:
    """A RunConfig from itself, a dict of Flower keys, or a JSON/TOML file of them."""
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        p = Path(config)
        if not p.exists():
            raise ValidationError("config", f"file {p.name!r} does not exist")
        try:
            raw = tomllib.loads(p.read_text()) if p.suffix == ".toml" else json.loads(p.read_text())
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise ValidationError("config", f"cannot parse {p.name!r}: {exc}") from None
        return RunConfig.from_flwr(raw)
    return RunConfig.from_flwr(config)


def run_federation(
    config: RunConfig | Mapping[str, Any] | str | os.PathLike,
    *,
    client_cpus: float = 1.0,
    verbose: bool = False,
    server_app: Any = None,
    client_app: Any = None,
    indexed_linkstate: bool = True,
) -> dict:
    """Run one simulated federation (one node per client, or cohorts) and return its metrics.

    Results land in ``results-dir/run-name/``. The run config's ``protocol`` picks fedrr's apps
    (``record``: client_app/server_app; ``ldp-sgd``: ldp_sgd_client/ldp_sgd_server); ``server_app`` /
    ``client_app`` replace them (e.g. a ServerApp that audits what crosses the wire, or
    fault-injecting clients from ``fedrr.testing``). ``indexed_linkstate`` indexes Flower's in-memory
    link state by node: same messages, but a round no longer slows down with the square of the number
    of nodes."""
    for k, v in QUIET_ENV.items():
        os.environ.setdefault(k, v)
    from .._user_code import mark_start_dir

    mark_start_dir()  # Flower's apps (in Ray workers) import a population module from here too
    cfg = load_run_config(config)  # validated before anything starts
    for note in cfg.budget_notes():
        print(note, file=sys.stderr)
    if not cfg.run_name:
        cfg = cfg.replace(run_name=time.strftime("run-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6])
    from . import _compat
    from ._compat import linkstate

    if cfg.protocol == "ldp-sgd":  # each client releases one gradient (Wang et al. 2019 §V), not its record
        from ._ldp_sgd_client import app as default_client_app
        from ._ldp_sgd_server import app as default_server_app
    else:
        from .client_app import app as default_client_app
        from .server_app import app as default_server_app

    server_app = server_app if server_app is not None else default_server_app
    (linkstate.enable if indexed_linkstate else linkstate.disable)()
    if not verbose:
        logging.getLogger("flwr").setLevel(logging.WARNING)
    _compat.simulate(
        server_app,
        client_app if client_app is not None else default_client_app,
        cfg.to_flwr(),
        cfg.n_nodes,
        backend_config(client_cpus),
        verbose,
    )
    metrics_path = Path(cfg.results_dir) / cfg.run_name / "metrics.json"
    if server_app is not default_server_app and not metrics_path.exists():
        return {}
    if not metrics_path.exists():
        raise FedrrError(f"the ServerApp wrote no metrics ({metrics_path}); see the log above")
    metrics = json.loads(metrics_path.read_text())
    if metrics.get("status") != "done":
        raise FedrrError(f"federated run did not finish: {metrics.get('status')} (metrics in {metrics_path})")
    return metrics
