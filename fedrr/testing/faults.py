"""Fault injection for federation tests: a ClientApp whose nodes send a corrupted reply with a
given probability (each of the kinds the server must reject), while their ledger still keeps the
honest release. Pass it to ``run_federation(..., client_app=faulty_client_app(...))``."""

from __future__ import annotations

import json

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from ..federation import META_KEY, RELEASE_KEY, error_reply, release_content
from ..federation.client_app import answer, check_query, hosted_clients, population
from ..population import unit_uniform
from ..release import ClientUnavailable
from ..run_config import RunConfig

#: faults a client can inject into its reply, and the server's reason for each
FAULT_KINDS = {
    "nan": "not_finite",
    "wrong_shape": "wrong_shape",
    "wrong_dtype": "wrong_dtype",
    "out_of_domain": "out_of_domain",
    "unknown_mechanism": "unknown_mechanism",
    "missing_meta": "malformed",
}


def reply_fault(seed: int, client_id: int, rate: float, kinds: tuple[str, ...]) -> str | None:
    """The fault client ``client_id`` injects (None: an honest reply), reproducibly from the seed."""
    if unit_uniform(seed, client_id, "fault") >= rate:
        return None
    return kinds[int(unit_uniform(seed, client_id, "fault-kind") * len(kinds))]


def corrupt(content: RecordDict, kind: str) -> RecordDict:
    """A copy of a reply broken in one way."""
    arrays = content.array_records[RELEASE_KEY]
    x = arrays["x"].numpy()
    parts = {k: arrays[k].numpy() for k in ("y", "client_id", "mechanism_index")}
    meta = dict(content.config_records[META_KEY])
    if kind == "nan":
        x = x.astype(float)
        x[0, 0] = np.nan
    elif kind == "wrong_shape":
        x = np.concatenate([x, x[:, :1]], axis=1)
    elif kind == "wrong_dtype":
        x = x.astype(np.complex64)
    elif kind == "out_of_domain":
        x = x + 1000
    elif kind == "unknown_mechanism":
        meta["mechanisms"] = json.dumps([json.dumps({"kind": "secret-sauce"})])
    out = {"x": Array(np.ascontiguousarray(x)), **{k: Array(v) for k, v in parts.items()}}
    records: dict = {RELEASE_KEY: ArrayRecord(out)}
    if kind != "missing_meta":
        records[META_KEY] = ConfigRecord(meta)
    return RecordDict(records)


def faulty_client_app(rate: float, kinds: tuple[str, ...] = tuple(FAULT_KINDS)) -> ClientApp:
    """fedrr's ClientApp, except that a ``rate`` fraction of nodes (chosen from the run seed and
    their first client's id) answer with a corrupted copy of their honest release."""
    bad = [k for k in kinds if k not in FAULT_KINDS]
    if bad or not kinds or not 0 <= rate <= 1:
        raise ValueError(f"rate must be in [0, 1] and kinds a non-empty subset of {tuple(FAULT_KINDS)}")
    app = ClientApp()

    @app.query("release")
    def release(msg: Message, context: Context) -> Message:
        check_query(msg)
        cfg = RunConfig.from_flwr(context.run_config)
        try:
            content = release_content(answer(context))
        except ClientUnavailable:
            return error_reply(msg, "dropped out")
        hosted = hosted_clients(context, cfg, population(cfg).n_clients)
        fault = reply_fault(cfg.seed, hosted[0], rate, tuple(kinds)) if len(hosted) else None
        return Message(corrupt(content, fault) if fault else content, reply_to=msg)

    return app
