"""The wire protocol between fedrr's ClientApp and ServerApp (Flower Message API).

The server sends one message type, ``query.release``, whose content carries only the protocol
version: nothing in it can seed, re-budget or re-trigger a client's noise. A node answers with
the releases of the clients it hosts (one, or a cohort):

    "release" ArrayRecord:  x (m, D), y (m,), client_id (m,) int64, mechanism_index (m,) int64
    "meta"    ConfigRecord: protocol, mechanisms (JSON list of RecordMechanism specs)

Client code and server code both import this module and ``fedrr.mechanisms``, never each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

PROTOCOL = "fedrr/1"
MESSAGE_TYPE = "query.release"
RELEASE_KEY = "release"
META_KEY = "meta"
QUERY_KEY = "query"


def query_content() -> RecordDict:
    """What the server sends: the protocol version and nothing else."""
    return RecordDict({QUERY_KEY: ConfigRecord({"protocol": PROTOCOL})})


@dataclass(frozen=True)
class NodeRelease:
    """The releases of the clients one node hosts (what leaves the node; nothing clean)."""

    x: np.ndarray  # (m, D) released features
    y: np.ndarray  # (m,) released labels
    client_id: np.ndarray  # (m,) int64
    mechanism_index: np.ndarray  # (m,) int64 into mechanisms
    mechanisms: tuple[str, ...]  # JSON specs

    def to_content(self) -> RecordDict:
        arrays = ArrayRecord(
            {
                "x": Array(np.ascontiguousarray(self.x)),
                "y": Array(np.ascontiguousarray(self.y)),
                "client_id": Array(np.ascontiguousarray(self.client_id)),
                "mechanism_index": Array(np.ascontiguousarray(self.mechanism_index)),
            }
        )
        meta = ConfigRecord({"protocol": PROTOCOL, "mechanisms": json.dumps(list(self.mechanisms))})
        return RecordDict({RELEASE_KEY: arrays, META_KEY: meta})

    @staticmethod
    def concat(parts: list[NodeRelease]) -> NodeRelease:
        specs: list[str] = []
        idx_parts = []
        for p in parts:
            remap = np.array([_index_of(specs, s) for s in p.mechanisms], dtype=np.int64)
            idx_parts.append(remap[p.mechanism_index] if len(remap) else p.mechanism_index)
        return NodeRelease(
            np.concatenate([p.x for p in parts]),
            np.concatenate([p.y for p in parts]),
            np.concatenate([p.client_id for p in parts]),
            np.concatenate(idx_parts),
            tuple(specs),
        )


def _index_of(items: list[str], s: str) -> int:
    try:
        return items.index(s)
    except ValueError:
        items.append(s)
        return len(items) - 1
