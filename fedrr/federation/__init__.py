"""Flower federation: one-record clients that release once, a server that pools, validates and
trains. ``client_app.app`` and ``server_app.app`` are the Flower app components (pyproject's
``[tool.flwr.app.components]``); ``run_federation`` runs them in a Flower simulation from Python."""

from .config import DEFAULTS, load_run_config, n_nodes
from .pool import Pool, ReplyRejected, parse_reply
from .population import ClientPopulation, DatasetPopulation, build_population, record_mechanism_for
from .protocol import MESSAGE_TYPE, PROTOCOL, NodeRelease
from .run import run_federation
from .strategy import LEARNERS, ReleaseStrategy

__all__ = [
    "DEFAULTS", "load_run_config", "n_nodes", "Pool", "ReplyRejected", "parse_reply", "ClientPopulation",
    "DatasetPopulation", "build_population", "record_mechanism_for", "MESSAGE_TYPE", "PROTOCOL", "NodeRelease",
    "run_federation", "LEARNERS", "ReleaseStrategy",
]
