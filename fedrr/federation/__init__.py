"""Flower federation: one-record clients that release once, a server that pools, validates and
trains. ``client_app.app`` and ``server_app.app`` are the Flower app components (pyproject's
``[tool.flwr.app.components]``); ``run_federation`` runs them in a Flower simulation from Python.

Names are imported lazily, so that loading the ClientApp never imports server-side code
(estimators, solvers): the client side is ``client_app``, ``population``, ``protocol``, ``config``."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "DEFAULTS": "config",
    "load_run_config": "config",
    "n_nodes": "config",
    "Pool": "pool",
    "ReplyRejected": "pool",
    "parse_reply": "pool",
    "ClientPopulation": "population",
    "DatasetPopulation": "population",
    "FaultyPopulation": "population",
    "build_population": "population",
    "record_mechanism_for": "population",
    "MESSAGE_TYPE": "protocol",
    "PROTOCOL": "protocol",
    "NodeRelease": "protocol",
    "run_federation": "run",
    "LEARNERS": "strategy",
    "ReleaseStrategy": "strategy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
