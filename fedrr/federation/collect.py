"""The server's one collection round: wait for the nodes, query each once in bounded waves, and
validate every reply (a bad one is dropped and counted with its reason, never pooled)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from flwr.app import Message
from flwr.serverapp import Grid

from ..pool import ReplyRejected
from .protocol import MESSAGE_TYPE, parse_reply, query_content


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


def validate_replies(
    replies: list[Message], n_features: int | None, n_clients: int | None
) -> tuple[list, dict[str, int]]:
    """Valid Releases and a count per rejection reason (duplicated client ids are dropped too).
    Without ``n_features`` the pool's width is the first valid reply's, and every reply, even one
    that arrived before it, is checked against it: a reply's reason does not depend on the order."""
    valid, reasons, seen = [], Counter(), set()
    expected = set(range(n_clients)) if n_clients is not None and n_clients <= 10_000_000 else None
    if n_features is None:
        n_features = _first_valid_width(replies, expected)
    for r in replies:
        try:
            rel = parse_reply(r, n_features, expected)
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


def _first_valid_width(replies: list[Message], expected: set[int] | None) -> int | None:
    for r in replies:
        try:
            return int(parse_reply(r, None, expected).x.shape[1])
        except ReplyRejected:
            continue
    return None
