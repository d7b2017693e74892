"""fedrr's LDP-SGD ClientApp: a node hosts one client, which answers ONE query ever — a gradient (train
message: the intercept or a model round) or the check (evaluate message) — computed by
``fedrr.gradient_release.GradientClients`` (holding the one client) from its own record at its own ε.
The first query's model determines the release; it is stored in the node's ledger before it is sent
(``fedrr.release``'s rule: ``Context.state`` in simulation, ``DiskLedger`` in deployment — the same
single slot a record release uses, so a node releases one thing once, whatever the protocol) and every
later query, whatever model it carries, gets that stored release back byte for byte.

Modes as in ``client_app``: simulation (records, budgets and the layout from the run's population,
noise from ``client_generator(seed, client_id)``, so a federation equals ``LDPSGDClassifier`` fitted on
``GradientClients`` for a seed) or deployment (``record-file`` and ``ledger-dir`` node config, OS
entropy). The node's ε is its record mechanism's ε (``RecordMechanism.epsilon``), never set by the
server.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from ..errors import ValidationError
from ..estimators import ldp_sgd_design
from ..gradient_release import GradientClients, n_inputs
from ..learners import record_domain
from ..release import ClientUnavailable, DiskLedger, FilePopulation, release_once
from ..run_config import RunConfig
from ._compat import error_reply
from ._ldp_sgd_protocol import IDENTITY_KEY, content_query, release_of
from ._protocol import release_content
from .client_app import ContextLedger, hosted_clients, is_deployment, population

app = ClientApp()


def _client(context: Context) -> tuple[int, np.ndarray, int, object, RunConfig, bool]:
    """(client id, record x, label, record mechanism, run config, deployed?) of this node's client."""
    cfg = RunConfig.from_flwr(context.run_config)
    if is_deployment(context):
        if "record-file" not in context.node_config or "ledger-dir" not in context.node_config:
            raise ValidationError("node_config", "deployment mode needs 'record-file' and 'ledger-dir'")
        pop = FilePopulation(str(context.node_config["record-file"]))
        x, y = pop.record(pop.client_id)
        return pop.client_id, np.asarray(x), int(y), pop.mechanism(pop.client_id), cfg, True
    pop = population(cfg)
    hosted = hosted_clients(context, cfg, pop.n_clients)
    if len(hosted) != 1:
        raise ValidationError("run-mode", "protocol 'ldp-sgd' needs one client per node")
    cid = hosted[0]
    if not pop.is_present(cid):
        raise ClientUnavailable(f"client {cid} dropped out")
    x, y = pop.record(cid)
    return cid, np.asarray(x), int(y), pop.mechanism(cid), cfg, False


@app.query("identify")
def identify(msg: Message, context: Context) -> Message:
    """The node's client id and ε (public: what every record reply carries too). Releases nothing."""
    try:
        cid, _, _, rm, _, _ = _client(context)
        ident = ConfigRecord({"client_id": int(cid), "epsilon": float(rm.epsilon)})
        return Message(RecordDict({IDENTITY_KEY: ident}), reply_to=msg)
    except ClientUnavailable:
        return error_reply(msg, "dropped out")
    except Exception as exc:
        return error_reply(msg, exc)


def answer(msg: Message, context: Context) -> Message:
    cid, x, y, rm, cfg, deployed = _client(context)
    n_states, n_classes = ldp_sgd_design(record_domain(rm))  # a paired record: its clean domain

    def make():
        q = content_query(msg.content, (n_classes - 1, 1 + n_inputs(n_states)))
        seed = None if deployed else cfg.seed  # None: OS entropy when deployed
        me = GradientClients(x[None], [y], rm.epsilon, client_ids=[cid], classes=np.arange(n_classes), seed=seed)
        kw = {"mechanism": cfg.ldp_sgd_mechanism, "n_sampled": cfg.ldp_sgd_n_sampled or None, "clip": cfg.ldp_sgd_clip}
        got = me.answer(q, [cid], n_states=n_states, **kw)
        return release_of(q, got.x[0], got.mechanisms[0], cid)

    if deployed:
        ledger = DiskLedger(str(context.node_config["ledger-dir"]))
        with ledger.locked():  # get-or-release is one step, even for queries handled concurrently
            return Message(release_content(release_once(ledger, make)), reply_to=msg)
    return Message(release_content(release_once(ContextLedger(context), make)), reply_to=msg)


@app.train()
def train(msg: Message, context: Context) -> Message:
    """An intercept or gradient query: this node's one release (or the stored one)."""
    try:
        return answer(msg, context)
    except ClientUnavailable:
        return error_reply(msg, "dropped out")
    except Exception as exc:  # the server gets a one-line message, never a traceback or a local path
        return error_reply(msg, exc)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """The check query: this node's one release (or the stored one)."""
    return train(msg, context)
