"""The server's one collection round: wait for the nodes, query each once in bounded waves, and
validate every reply against the server's own schema (a bad one is dropped and counted with its
reason, never pooled)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Message
from flwr.serverapp import Grid

from ..mechanisms import record_mechanism_from_spec
from ..pool import ReplyRejected
from ..release import Release
from ._protocol import MESSAGE_TYPE, parse_reply, query_content


def wait_for_nodes(grid: Grid, expected: int, timeout: float, poll: float = 0.2) -> list[int]:
    """Node ids once ``expected`` nodes have registered (in simulation the ServerApp starts before
    the virtual nodes exist), or whatever registered by ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        ids = sorted(grid.get_node_ids())
        if len(ids) >= expected or time.monotonic() >= deadline:
            return ids
        time.sleep(poll)


def collect_releases(
    grid: Grid, node_ids: list[int], wave_size: int, timeout: float, progress: Any = None
) -> tuple[list[Message], int]:
    """One release query per node, at most ``wave_size`` in flight (a sliding window keeps the
    link state small). Returns (replies, number of nodes that did not answer by ``timeout``)."""
    pending = list(reversed(node_ids))
    in_flight: dict[str, int] = {}
    replies: list[Message] = []
    deadline = time.monotonic() + timeout
    while (pending or in_flight) and time.monotonic() < deadline:
        if pending and len(in_flight) < wave_size:
            batch = [pending.pop() for _ in range(min(wave_size - len(in_flight), len(pending)))]
            msgs = [
                Message(content=query_content(), dst_node_id=nid, message_type=MESSAGE_TYPE, group_id="release")
                for nid in batch
            ]
            for mid, nid in zip(grid.push_messages(msgs), batch):
                if mid:
                    in_flight[mid] = nid
        got = list(grid.pull_messages(list(in_flight))) if in_flight else []
        for r in got:
            if in_flight.pop(r.metadata.reply_to_message_id, None) is not None:
                replies.append(r)
        if progress is not None and got:
            progress(len(replies), len(node_ids))
        if not got:
            time.sleep(0.02)
    return replies, len(pending) + len(in_flight)


@dataclass(frozen=True)
class ServerSchema:
    """What the server accepts, from its own configuration and never from a reply: the pool's
    width, and either the mechanism each client must release with (``mechanism_of``: in
    simulation the population's, the same object the client uses) or, where clients choose their
    own budgets, the largest record ε accepted (``max_epsilon``). A reply claiming anything else is
    rejected with its own reason, so a first reply cannot set the width for everyone after it
    (``first_reply``), nor a client claim a nearly noiseless mechanism (``misreport``)."""

    n_features: int
    mechanism_of: Callable[[int], Any] | None = None
    max_epsilon: float | None = None

    @classmethod
    def of_population(cls, population: Any, max_epsilon: float | None = None) -> ServerSchema:
        return cls(int(population.mechanism(0).n_features), population.mechanism, max_epsilon)

    def check(self, rel: Release, cache: dict) -> None:
        """ReplyRejected unless every record's claimed mechanism is the one the server expects."""
        for j, spec in enumerate(rel.mechanisms):
            rows = np.flatnonzero(rel.mechanism_index == j)
            if rows.size == 0:
                continue
            claimed = cache.get(spec)
            if claimed is None:
                claimed = cache[spec] = record_mechanism_from_spec(json.loads(spec))
            if self.max_epsilon is not None and claimed.epsilon > self.max_epsilon * (1 + 1e-12):
                raise ReplyRejected(
                    "epsilon_above_limit",
                    f"a record claims ε {claimed.epsilon:.6g}, above the server's limit {self.max_epsilon:.6g}",
                )
            if self.mechanism_of is None:
                continue
            for cid in rel.client_id[rows].tolist():
                mech = self.mechanism_of(int(cid))
                key = ("expected", id(mech))
                if key not in cache:
                    cache[key] = (json.dumps(mech.to_spec(), sort_keys=True), mech)
                if cache[key][0] != spec:
                    raise ReplyRejected(
                        "mechanism_misreport",
                        f"client {cid} claims a mechanism of record ε {claimed.epsilon:.6g}; the server's "
                        f"configuration gives it one of ε {mech.epsilon:.6g}",
                    )


def validate_replies(
    replies: list[Message], schema: ServerSchema, n_clients: int | None
) -> tuple[list, dict[str, int]]:
    """Valid Releases and a count per rejection reason (duplicated client ids are dropped too).
    ``schema`` (or just the pool's width) comes from the server's own configuration: a reply's
    reason never depends on which replies came before it."""
    valid, reasons, seen, cache = [], Counter(), set(), {}
    expected = set(range(n_clients)) if n_clients is not None and n_clients <= 10_000_000 else None
    for r in replies:
        try:
            rel = parse_reply(r, schema.n_features, expected)
            schema.check(rel, cache)
        except ReplyRejected as exc:
            reasons[exc.reason] += 1
            continue
        ids = set(rel.client_id.tolist())
        if ids & seen:
            reasons["duplicate_client"] += 1
            continue
        seen |= ids
        valid.append(rel)
    return valid, dict(reasons)
