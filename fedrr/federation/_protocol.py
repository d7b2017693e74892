"""The wire protocol between fedrr's ClientApp and ServerApp (Flower Message API).

The server sends one message type, ``query.release``, whose content carries only the protocol
version: nothing in it can seed, re-budget or re-trigger a client's noise. A node answers with
the releases of the clients it hosts (one, or a cohort):

    "release" ArrayRecord:  x (m, D), y (m,), client_id (m,) int64, mechanism_index (m,) int64
    "meta"    ConfigRecord: protocol, mechanisms (JSON list of record mechanism specs: RecordMechanism or
              PairedRecordMechanism; with a paired one, x holds pair reports and y is all NaN)
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from ..pool import ReplyRejected, validate_release_arrays
from ..release import Release

PROTOCOL = "fedrr/1"
MESSAGE_TYPE = "query.release"
RELEASE_KEY = "release"
META_KEY = "meta"
QUERY_KEY = "query"
_ARRAYS = ("x", "y", "client_id", "mechanism_index")


def query_content() -> RecordDict:
    """What the server sends: the protocol version and nothing else."""
    return RecordDict({QUERY_KEY: ConfigRecord({"protocol": PROTOCOL})})


def release_content(rel: Release) -> RecordDict:
    """A node's reply: its clients' releases and the specs of their mechanisms."""
    arrays = ArrayRecord({k: Array(np.ascontiguousarray(getattr(rel, k))) for k in _ARRAYS})
    meta = ConfigRecord({"protocol": PROTOCOL, "mechanisms": json.dumps(list(rel.mechanisms))})
    return RecordDict({RELEASE_KEY: arrays, META_KEY: meta})


def content_release(content: RecordDict) -> Release:
    """The Release a node stored as reply content (its own, trusted ledger)."""
    arrays, meta = content.array_records[RELEASE_KEY], content.config_records[META_KEY]
    return Release(*(arrays[k].numpy() for k in _ARRAYS), tuple(json.loads(str(meta["mechanisms"]))))


def parse_reply(msg: Any, n_features: int | None, expected_ids: set[int] | None = None) -> Release:
    """A Flower reply -> a validated Release, or ReplyRejected naming what was wrong."""
    if msg.has_error():
        if "dropped out" in (msg.error.reason or ""):
            raise ReplyRejected("dropped_out", "the node's client(s) dropped out")
        raise ReplyRejected("error_reply", f"node answered with error {msg.error.code}: {msg.error.reason[:200]}")
    content = msg.content
    arrays = content.array_records.get(RELEASE_KEY)
    meta = content.config_records.get(META_KEY)
    if arrays is None or meta is None:
        raise ReplyRejected("malformed", f"reply lacks the {RELEASE_KEY!r} arrays or the {META_KEY!r} config")
    if meta.get("protocol") != PROTOCOL:
        raise ReplyRejected("malformed", f"protocol {meta.get('protocol')!r}, expected {PROTOCOL!r}")
    try:
        parts = {k: arrays[k].numpy() for k in _ARRAYS}
    except KeyError as exc:
        raise ReplyRejected("malformed", f"reply lacks array {exc}") from None
    except Exception as exc:  # undecodable array payload
        raise ReplyRejected("malformed", f"undecodable array: {exc}") from None
    return validate_release_arrays(parts, meta.get("mechanisms"), n_features, expected_ids)
