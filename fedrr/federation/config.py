"""The federation's run config: flat Flower user-config keys with defaults, in this order of
precedence: Flower's ``context.run_config`` (``flwr run --run-config``, pyproject) > the JSON/TOML
file named by ``FEDRR_RUN_CONFIG`` (how ``run_federation`` passes config, because
``flwr.simulation.run_simulation`` gives apps an empty run config) > ``DEFAULTS``."""

from __future__ import annotations

import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from .population import POPULATION_DEFAULTS

CONFIG_ENV = "FEDRR_RUN_CONFIG"

DEFAULTS: dict[str, Any] = {
    "population": "dataset",
    **POPULATION_DEFAULTS,
    "run-mode": "node",  # "node": one Flower node per client; "cohort": a node hosts cohort-size clients
    "cohort-size": 1,
    "learners": "spread,naive",  # comma list of spread | spread-flat | naive | naive-cv | wdro
    "spread-max-iter": 200,
    "C": 1.0,
    "wdro-max-iter": 0,  # iteration cap of W-DRO's conic solver (Clarabel); 0 = the solver's default
    "executor": "threads",  # serial | threads | ray (RAY_ADDRESS or ray-address for a cluster)
    "ray-address": "",
    "wave-size": 256,  # most release queries in flight at once
    "min-valid": 20,  # fewer valid releases than this: the run fails with a clear error
    "node-wait-timeout": 120.0,  # seconds to wait for the expected nodes to register
    "reply-timeout": 600.0,  # seconds to wait for all replies of the collection round
    "results-dir": "results/federation",
    "run-name": "",
}


#: learners the server can train on the releases (``strategy`` uses this list; it lives here so
#: that the client side, which loads this module, never imports the estimators)
LEARNERS = ("spread", "spread-flat", "naive", "naive-cv", "wdro")

#: numbers that must lie in a range: key -> (test, the range as printed)
_RANGES: dict[str, tuple[Callable[[float], bool], str]] = {
    "C": (lambda v: v > 0, "> 0"),
    "node-wait-timeout": (lambda v: v > 0, "> 0"),
    "reply-timeout": (lambda v: v > 0, "> 0"),
    "dropout": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "malformed-rate": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "delta": (lambda v: 0 < v < 1, "in (0, 1)"),
    **{
        k: (lambda v: v >= 0, ">= 0 (0 = not used)")
        for k in ("feature-flip", "feature-epsilon", "label-flip", "label-epsilon")
    },
}


def _coerce(key: str, value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValidationError(key, f"must be true or false, got {value!r}")
        return value
    if isinstance(default, int) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ValidationError(key, f"must be an integer, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError(key, f"must be a number, got {value!r}")
        try:
            return float(value)
        except OverflowError:  # an int too large for a float
            raise ValidationError(key, f"must be a finite number, got {value!r}") from None
    if isinstance(default, str) and not isinstance(value, str):
        raise ValidationError(key, f"must be a string, got {value!r}")
    return value


def read_config_file(path: str | os.PathLike) -> dict:
    p = Path(path)
    if not p.exists():
        raise ValidationError(CONFIG_ENV, f"config file {str(p)!r} does not exist")
    text = p.read_text()
    try:
        return tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValidationError(CONFIG_ENV, f"cannot parse {str(p)!r}: {exc}") from None


def load_run_config(run_config: Mapping[str, Any] | None = None) -> dict:
    """Merged, type-checked run config. Keys a custom population needs may be extra (kept as is)."""
    merged: dict[str, Any] = dict(DEFAULTS)
    if os.environ.get(CONFIG_ENV):
        merged.update(read_config_file(os.environ[CONFIG_ENV]))
    merged.update(dict(run_config or {}))
    for key, default in DEFAULTS.items():
        merged[key] = _coerce(key, merged[key], default)
    if merged["run-mode"] not in ("node", "cohort"):
        raise ValidationError("run-mode", f"must be 'node' or 'cohort', got {merged['run-mode']!r}")
    if merged["run-mode"] == "node" and merged["cohort-size"] != 1:
        raise ValidationError("cohort-size", "must be 1 in run-mode 'node' (use run-mode 'cohort')")
    for key in ("cohort-size", "wave-size", "min-valid", "n-clients", "spread-max-iter"):
        if merged[key] < 1:
            raise ValidationError(key, f"must be an integer >= 1, got {merged[key]!r}")
    if merged["wdro-max-iter"] < 0:
        raise ValidationError(
            "wdro-max-iter", f"must be an integer >= 0 (0: the solver's default), got {merged['wdro-max-iter']!r}"
        )
    for key in ("seed", "n-test-per-class"):
        if merged[key] < 0:
            raise ValidationError(key, f"must be an integer >= 0, got {merged[key]!r}")
    for key, (ok, allowed) in _RANGES.items():
        if not (math.isfinite(merged[key]) and ok(merged[key])):
            raise ValidationError(key, f"must be a finite number {allowed}, got {merged[key]!r}")
    if merged["executor"] not in ("serial", "threads", "ray"):
        raise ValidationError("executor", f"must be 'serial', 'threads' or 'ray', got {merged['executor']!r}")
    names = [n.strip() for n in merged["learners"].split(",") if n.strip()]
    if not names or any(n not in LEARNERS for n in names):
        raise ValidationError("learners", f"must be a comma list of {', '.join(LEARNERS)}, got {merged['learners']!r}")
    return merged


def n_nodes(cfg: Mapping[str, Any]) -> int:
    """Flower nodes a simulation needs: one per client, or one per cohort."""
    n, m = int(cfg["n-clients"]), int(cfg["cohort-size"])
    return -(-n // m)
