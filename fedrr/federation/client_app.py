"""fedrr's Flower ClientApp: a node hosts one client (or a cohort of logical clients), each with
one private record, and answers the server's release query with one LDP release per client —
once. Asked again it replays the stored release byte for byte (``fedrr.release``'s ledger rule).

Two modes, chosen on the node, never by the server:
* simulation (default): records and budgets come from the run's population; the ledger lives in
  ``Context.state``; noise comes from a generator derived from the run seed and the client id,
  so a run is reproducible and equals ``fedrr.release.offline_release``;
* deployment (node config ``ledger-dir``, or env ``FEDRR_DEPLOYMENT=1``): the node's own record
  and mechanism come from ``record-file`` (``fedrr.release.write_record_file``); the ledger
  persists on the node's disk; the noise comes from OS entropy. With node config
  ``node-public-key`` (the SuperNode's authentication key, ``fedrr credentials``' ``node-<i>.pub``)
  the ledger is keyed by that credential: a node started with another key on the same
  ``ledger-dir`` refuses, rather than release again or replay another identity's release.

A failure is answered with an error reply that carries a one-line message, never a traceback.
"""

from __future__ import annotations

import os

import numpy as np
from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp

from ..assembly import build_population
from ..errors import ValidationError
from ..population import ClientPopulation
from ..release import (
    ClientUnavailable,
    DiskLedger,
    FilePopulation,
    Release,
    client_generator,
    release_clients,
    release_once,
)
from ..run_config import RunConfig
from ._compat import error_reply
from ._protocol import META_KEY, PROTOCOL, QUERY_KEY, RELEASE_KEY, content_release, release_content

app = ClientApp()

LEDGER_KEY = "fedrr.ledger"


class ContextLedger:
    """Simulation ledger in the node's ``Context.state`` (kept by Flower across messages)."""

    def __init__(self, context: Context):
        self.state = context.state

    def get(self) -> Release | None:
        if LEDGER_KEY + ".x" not in self.state:
            return None
        return content_release(
            RecordDict({RELEASE_KEY: self.state[LEDGER_KEY + ".x"], META_KEY: self.state[LEDGER_KEY + ".meta"]})
        )

    def put(self, rel: Release) -> None:
        content = release_content(rel)
        self.state[LEDGER_KEY + ".x"] = content.array_records[RELEASE_KEY]
        self.state[LEDGER_KEY + ".meta"] = content.config_records[META_KEY]


def is_deployment(context: Context) -> bool:
    return "ledger-dir" in context.node_config or os.environ.get("FEDRR_DEPLOYMENT") == "1"


def hosted_clients(context: Context, cfg: RunConfig, n_clients: int) -> range:
    """Client ids this node hosts: partition p hosts [p·m, (p+1)·m) with m = ``cohort-size``."""
    m = cfg.cohort_size
    p = int(context.node_config.get("partition-id", 0))
    return range(p * m, min((p + 1) * m, n_clients))


_POP_CACHE: dict[RunConfig, ClientPopulation] = {}


def population(cfg: RunConfig) -> ClientPopulation:
    """One population object per worker process and config (building one loads a dataset)."""
    key = cfg.replace(extras={}) if not cfg.extras else cfg
    try:
        hit = _POP_CACHE.get(key)
    except TypeError:  # extras with unhashable values: no caching
        return build_population(cfg)
    if hit is None:
        _POP_CACHE.clear()
        hit = _POP_CACHE[key] = build_population(cfg)
    return hit


def answer(context: Context) -> Release:
    """This node's release: the stored one, or a new one (stored first)."""
    if is_deployment(context):
        if "ledger-dir" not in context.node_config:
            raise ValidationError(
                "node_config", "deployment mode needs 'ledger-dir' (where this node keeps its release)"
            )
        ledger = DiskLedger(str(context.node_config["ledger-dir"]), credential=node_credential(context))
        with ledger.locked():  # get-or-release is one step, even for queries handled concurrently
            return release_once(ledger, lambda: _deployment_release(context))
    cfg = RunConfig.from_flwr(context.run_config)
    pop = population(cfg)
    hosted = hosted_clients(context, cfg, pop.n_clients)
    return release_once(
        ContextLedger(context), lambda: release_clients(pop, hosted, lambda c: client_generator(cfg.seed, c))
    )


def node_credential(context: Context) -> str | None:
    """Deployment: the fingerprint (``SHA256:...``) of the key in node config ``node-public-key``
    (the OpenSSH public key registered for this SuperNode, or its private key), None without one."""
    key = context.node_config.get("node-public-key")
    if key is None:
        return None
    from ._credentials import public_key_fingerprint

    return public_key_fingerprint(str(key))


def _deployment_release(context: Context) -> Release:
    if "record-file" not in context.node_config:
        raise ValidationError("node_config", "deployment mode needs 'record-file' (this node's record and mechanism)")
    pop = FilePopulation(str(context.node_config["record-file"]))
    return release_clients(pop, [pop.client_id], lambda c: np.random.default_rng())  # OS entropy


def check_query(msg: Message) -> None:
    query = msg.content.config_records.get(QUERY_KEY)
    if query is None or query.get("protocol") != PROTOCOL:
        raise ValidationError("message", f"expected a {PROTOCOL!r} release query")


@app.query("release")
def release(msg: Message, context: Context) -> Message:
    """Answer the release query. Only the protocol version is read from the message."""
    try:
        check_query(msg)
        return Message(release_content(answer(context)), reply_to=msg)
    except ClientUnavailable:
        return error_reply(msg, "dropped out")
    except Exception as exc:  # the server gets a message, never a traceback or a local path
        return error_reply(msg, exc)
