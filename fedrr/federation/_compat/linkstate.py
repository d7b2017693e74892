"""An index for Flower 1.41's in-memory link state, so a simulated round scales with the number
of nodes.

Why: the simulation engine polls every node every 0.1 s with ``get_message_ins(node_id)``, and the
in-memory link state answers by scanning *all* stored messages (``in_memory_linkstate.py``), so one
poll costs nodes × messages: a round to 10,000 nodes ran at 30 clients/s here. Sending in waves
does not help — each poll still scans the whole wave for every node. This keeps a per-node index
of message ids, maintained on store and delete, and answers ``get_message_ins`` from it with the
same checks in the same order (expiry, federation, undelivered, run id, limit). Nothing else in
Flower changes. Applied by ``fedrr.federation.run_federation`` (``indexed_linkstate=True``); idempotent."""

from __future__ import annotations

import flwr
from flwr.server.superlink.linkstate.in_memory_linkstate import InMemoryLinkState
from flwr.supercore.date import now

from . import TESTED_FLWR

_ORIGINAL = {}


def _index(state) -> dict[int, dict[str, None]]:
    idx = state.__dict__.get("_fedrr_by_node")
    if idx is None:
        idx = {}
        for mid, msg in state.message_ins_store.items():
            idx.setdefault(msg.metadata.dst_node_id, {})[mid] = None
        state.__dict__["_fedrr_by_node"] = idx
    return idx


def _store_message_ins(self, message):
    with self.lock:
        message_id = _ORIGINAL["store_message_ins"](self, message)
        if message_id:
            _index(self).setdefault(message.metadata.dst_node_id, {})[message_id] = None
    return message_id


def _delete_messages(self, message_ins_ids):
    with self.lock:
        idx = _index(self)
        for mid in message_ins_ids or ():
            msg = self.message_ins_store.get(mid)
            if msg is not None:
                idx.get(msg.metadata.dst_node_id, {}).pop(mid, None)
        return _ORIGINAL["delete_messages"](self, message_ins_ids)


def _get_message_ins(self, node_id, limit, *, run_id=None):
    if limit is not None and limit < 1:
        raise AssertionError("`limit` must be >= 1")
    found = []
    with self.lock:
        mine = _index(self).get(node_id)
        for mid in list(mine or ()):
            self._check_stored_messages({mid})
            msg = self.message_ins_store.get(mid)
            if msg is None:
                mine.pop(mid, None)
                continue
            if (run_id is None or msg.metadata.run_id == run_id) and msg.metadata.delivered_at == "":
                found.append(msg)
            if limit and len(found) == limit:
                break
    delivered_at = now().isoformat()
    for msg in found:
        msg.metadata.delivered_at = delivered_at
    return found


def enable() -> bool:
    """Install the index on Flower's InMemoryLinkState (only for the flwr version it was checked
    against; other versions run unpatched). Returns whether it is active."""
    if flwr.__version__ != TESTED_FLWR:
        return False
    if not _ORIGINAL:
        _ORIGINAL.update(
            store_message_ins=InMemoryLinkState.store_message_ins,
            delete_messages=InMemoryLinkState.delete_messages,
            get_message_ins=InMemoryLinkState.get_message_ins,
        )
        InMemoryLinkState.store_message_ins = _store_message_ins
        InMemoryLinkState.delete_messages = _delete_messages
        InMemoryLinkState.get_message_ins = _get_message_ins
    return True


def disable() -> None:
    """Restore Flower's own methods."""
    if _ORIGINAL:
        for name, fn in _ORIGINAL.items():
            setattr(InMemoryLinkState, name, fn)
        _ORIGINAL.clear()
