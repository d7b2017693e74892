"""A malicious Flower ServerApp for ``tests/test_malicious_server.py`` (issue #7).

It plays every trick a curious server has against fedrr's real ClientApp, in phases, and writes
what came back to ``results-dir/run-name/attack.json`` (plus a ``metrics.json`` saying ``done``,
so ``run_federation`` / ``flwr_run`` accept the run). The test asserts on that file, so the same
app serves a Flower simulation (loaded by object) and a real SuperLink (loaded from a FAB as
``malicious_server:app``). It imports only flwr, numpy and fedrr's server side, never test code.

Phases, in order (each waits for all its replies before the next starts):

* ``first``: the very first messages any node ever sees, ``FIRST_BURST`` of them pushed at once
  (a node that handles them concurrently must still release once), are ``query.release``
  queries whose query record carries overrides (seed, ε, flip probabilities, k, mechanism, ledger
  paths...), the first of them also with extra config / metric / array records (a planted
  "release" and ledger entries);
* ``crafted``: the same tricks one at a time, to every node;
* ``repeat``: ``REPEATS`` honest release queries per node;
* ``out_of_protocol``: other message types (train, evaluate, query.clean, ...) and
  ``query.release`` with a wrong / missing protocol version or query record;
* ``final``: one honest query per node, after all of the above.

Every reply is summarised (error or not, record names, array keys/dtypes/shapes, the arrays
themselves, a digest of their bytes) — the server keeps nothing else.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp

from ..federation import MESSAGE_TYPE, PROTOCOL, query_content, wait_for_nodes
from ..run_config import RunConfig

REPEATS = 20
FIRST_BURST = 4  # crafted queries pushed at once as each node's very first messages
ATTACK_FILE = "attack.json"

#: what a server would like the client to use instead of its own budget and noise
OVERRIDES = {
    "protocol": PROTOCOL,
    "seed": 123,
    "epsilon": 1e6,
    "flip_prob": 0.0,
    "flip-prob": 0.0,
    "feature-flip": 0.0,
    "label-flip": 0.0,
    "feature-epsilon": 1e6,
    "label-epsilon": 1e6,
    "k": 2,
    "mechanism": "laplace",
    "population": "fedrr.examples:TwoBudgetSyntheticPopulation",
    "run-mode": "cohort",
    "cohort-size": 1000,
    "partition-id": 0,
    "n-clients": 1,
    "ledger-dir": "/tmp/fedrr-attacker-ledger",
    "record-file": "/tmp/fedrr-attacker-record.npz",
    "deployment": False,
    "replay": False,
    "reset": True,
    "release-again": True,
    "echo-clean": True,
}


def _fake_release(n_features: int = 64) -> ArrayRecord:
    """A release the server would like the node to adopt as its ledger entry."""
    return ArrayRecord(
        {
            "x": Array(np.zeros((1, n_features), np.int64)),
            "y": Array(np.zeros(1, np.int64)),
            "client_id": Array(np.zeros(1, np.int64)),
            "mechanism_index": Array(np.zeros(1, np.int64)),
        }
    )


def crafted_variants() -> dict[str, RecordDict]:
    """release queries that keep the protocol version but add the server's wishes."""
    honest = {"protocol": PROTOCOL}
    extra_configs = {
        "config": ConfigRecord(OVERRIDES),
        "run_config": ConfigRecord(OVERRIDES),
        "node_config": ConfigRecord(
            {"ledger-dir": OVERRIDES["ledger-dir"], "record-file": OVERRIDES["record-file"], "partition-id": 0}
        ),
        "meta": ConfigRecord(
            {
                "protocol": PROTOCOL,
                "mechanisms": json.dumps([json.dumps({"kind": "record", "features": [], "label": None})]),
            }
        ),
        "fedrr.ledger.meta": ConfigRecord({"protocol": PROTOCOL, "mechanisms": "[]"}),
    }
    arrays = {
        "release": _fake_release(),
        "fedrr.ledger.x": _fake_release(),
        "arrays": ArrayRecord({"seed": Array(np.array([123], np.int64)), "flip_prob": Array(np.array([0.0]))}),
    }
    metrics = {"metrics": MetricRecord({"epsilon": 1e6, "seed": 123, "flip_prob": 0.0, "k": 2})}
    return {
        "overrides_in_query": RecordDict({"query": ConfigRecord(OVERRIDES)}),
        "extra_config_records": RecordDict({"query": ConfigRecord(honest), **extra_configs}),
        "array_payloads": RecordDict({"query": ConfigRecord(honest), **arrays}),
        "metric_records": RecordDict({"query": ConfigRecord(honest), **metrics}),
        "everything": RecordDict({"query": ConfigRecord(OVERRIDES), **extra_configs, **arrays, **metrics}),
    }


def out_of_protocol_variants() -> dict[str, tuple[str, RecordDict]]:
    """(message type, content): none of these may be answered with data."""
    good = query_content
    return {
        "train": ("train", good()),
        "train_with_arrays": (
            "train",
            RecordDict({"query": ConfigRecord({"protocol": PROTOCOL}), "arrays": _fake_release()}),
        ),
        "evaluate": ("evaluate", good()),
        "query": ("query", good()),
        "query.clean": ("query.clean", good()),
        "query.record": ("query.record", good()),
        "query.ledger": ("query.ledger", good()),
        "train.release": ("train.release", good()),
        "evaluate.release": ("evaluate.release", good()),
        "protocol_fedrr/0": (MESSAGE_TYPE, RecordDict({"query": ConfigRecord({**OVERRIDES, "protocol": "fedrr/0"})})),
        "protocol_fedrr/2": (MESSAGE_TYPE, RecordDict({"query": ConfigRecord({"protocol": "fedrr/2"})})),
        "protocol_empty": (MESSAGE_TYPE, RecordDict({"query": ConfigRecord({"protocol": ""})})),
        "protocol_int": (MESSAGE_TYPE, RecordDict({"query": ConfigRecord({"protocol": 1})})),
        "protocol_list": (MESSAGE_TYPE, RecordDict({"query": ConfigRecord({"protocol": [PROTOCOL]})})),
        "protocol_missing": (
            MESSAGE_TYPE,
            RecordDict({"query": ConfigRecord({k: v for k, v in OVERRIDES.items() if k != "protocol"})}),
        ),
        "query_record_missing": (MESSAGE_TYPE, RecordDict({})),
        "query_record_renamed": (MESSAGE_TYPE, RecordDict({"Query": ConfigRecord({"protocol": PROTOCOL})})),
        "query_as_metric_record": (MESSAGE_TYPE, RecordDict({"query": MetricRecord({"seed": 123})})),
        "query_as_array_record": (MESSAGE_TYPE, RecordDict({"query": _fake_release()})),
    }


# -------------------------------------------------------------------------------- summaries
def summarise(reply: Message) -> dict:
    """Everything the server learns from one reply, as JSON."""
    out: dict = {"node": int(reply.metadata.src_node_id), "error": bool(reply.has_error())}
    if reply.has_error():
        out["reason"] = str(reply.error.reason)
        out["code"] = int(reply.error.code)
    if not reply.has_content():
        out["records"] = None
        return out
    c = reply.content
    h = hashlib.sha256()
    arrays: dict = {}
    for name in sorted(c.array_records):
        for key in sorted(c.array_records[name]):
            a = c.array_records[name][key]
            arr = a.numpy()
            h.update(f"{name}/{key}/{arr.dtype.str}/{arr.shape}".encode())
            h.update(a.data)
            arrays[f"{name}/{key}"] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "values": arr.tolist()}
    out["records"] = {
        "array": {n: sorted(r) for n, r in c.array_records.items()},
        "config": {n: {k: _jsonable(v) for k, v in r.items()} for n, r in c.config_records.items()},
        "metric": {n: {k: _jsonable(v) for k, v in r.items()} for n, r in c.metric_records.items()},
    }
    out["arrays"] = arrays
    out["digest"] = h.hexdigest()
    return out


def _jsonable(v):
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


# ------------------------------------------------------------------------------------ sending
def exchange(grid: Grid, plan: list[tuple[int, str, str, RecordDict]], timeout: float) -> tuple[list[dict], list[dict]]:
    """Send every (node, label, message type, content) in ``plan`` at once; wait for the replies.
    Returns (one summary per reply, labelled; what got no reply or could not be sent)."""
    msgs, labels = [], []
    refused = []
    for nid, label, mtype, content in plan:
        try:
            msgs.append(Message(content=content, dst_node_id=nid, message_type=mtype, group_id=label))
            labels.append((nid, label, mtype))
        except Exception as exc:  # the server's own Flower refuses to build it: nothing reached a node
            refused.append(
                {"node": nid, "label": label, "message_type": mtype, "refused": f"{type(exc).__name__}: {exc}"}
            )
    pending: dict[str, tuple[int, str, str]] = {}
    ids = list(grid.push_messages(msgs))
    for mid, lab in zip(ids, labels):
        if mid:
            pending[mid] = lab
        else:
            refused.append({"node": lab[0], "label": lab[1], "message_type": lab[2], "refused": "push refused"})
    out = []
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        got = list(grid.pull_messages(list(pending)))
        for r in got:
            lab = pending.pop(r.metadata.reply_to_message_id, None)
            if lab is not None:
                s = summarise(r)
                s.update(sent_to=lab[0], label=lab[1], message_type=lab[2])
                out.append(s)
        if not got:
            time.sleep(0.05)
    refused += [{"node": n, "label": lab, "message_type": t, "refused": "no reply"} for n, lab, t in pending.values()]
    return out, refused


def _pick(variants: dict, names: str) -> dict:
    """``names``: "" for every variant, "none" for none, else a comma list."""
    if not names:
        return variants
    if names == "none":
        return {}
    return {n: variants[n] for n in names.split(",")}


def attack(grid: Grid, cfg: RunConfig, log=print) -> dict:
    """Run every phase against the registered nodes; returns the record of what came back.

    Optional run-config keys shrink the plan (a real SuperNode starts one process per message):
    ``attack-burst`` (default ``FIRST_BURST``), ``attack-repeats`` (``REPEATS``), and
    ``attack-crafted`` / ``attack-oop``, comma lists of variant names ("" all, "none" none)."""
    t0 = time.perf_counter()
    nodes = wait_for_nodes(grid, cfg.n_nodes, cfg.node_wait_timeout)
    timeout = cfg.reply_timeout
    extra = cfg.extras
    burst, repeats = int(extra.get("attack-burst", FIRST_BURST)), int(extra.get("attack-repeats", REPEATS))
    crafted = crafted_variants()
    first = [("everything", crafted["everything"])] + [
        (f"overrides-{i}", crafted["overrides_in_query"]) for i in range(1, burst)
    ]
    crafted = _pick(crafted, str(extra.get("attack-crafted", "")))
    oop = _pick(out_of_protocol_variants(), str(extra.get("attack-oop", "")))
    result: dict = {
        "nodes": nodes,
        "repeats": repeats,
        "burst": burst,
        "overrides": OVERRIDES,
        "phases": {},
        "refused": {},
    }
    phases = [
        ("first", [(n, name, MESSAGE_TYPE, content) for name, content in first for n in nodes]),
        ("crafted", [(n, name, MESSAGE_TYPE, content) for n in nodes for name, content in crafted.items()]),
        ("repeat", [(n, f"repeat-{i}", MESSAGE_TYPE, query_content()) for i in range(repeats) for n in nodes]),
        ("out_of_protocol", [(n, name, mtype, content) for n in nodes for name, (mtype, content) in oop.items()]),
        ("final", [(n, "honest", MESSAGE_TYPE, query_content()) for n in nodes]),
    ]
    for phase, plan in phases:
        t = time.perf_counter()
        replies, refused = exchange(grid, plan, timeout) if plan else ([], [])
        result["phases"][phase] = replies
        result["refused"][phase] = refused
        log(
            f"[attack] {phase}: {len(replies)} replies, {len(refused)} refused/unanswered "
            f"in {time.perf_counter() - t:.1f} s"
        )
    result["seconds"] = time.perf_counter() - t0
    return result


def write_result(cfg: RunConfig, result: dict) -> Path:
    out = Path(cfg.results_dir) / (cfg.run_name or "attack")
    out.mkdir(parents=True, exist_ok=True)
    (out / ATTACK_FILE).write_text(json.dumps(result))
    (out / "metrics.json").write_text(
        json.dumps({"status": "done", "attack": ATTACK_FILE, "seconds": result["seconds"]})
    )
    return out / ATTACK_FILE


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = RunConfig.from_flwr(context.run_config)
    write_result(cfg, attack(grid, cfg))
