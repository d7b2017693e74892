"""The repeated-release attack through a real Flower federation: a ServerApp that sends every node
``M`` release queries at once, run against fedrr's own ClientApp in Flower's simulation engine.

``collect_replays`` returns every reply of every client in query order; ``attack_federation``
checks that each client's replies are byte-identical, equal to ``fedrr.release.offline_release``
for the seed and carry the client's unchanged mechanism, that the server's exact posterior after M
replies is array_equal to the one after 1, and scores that server against a resampling client with
the same records and mechanisms (simulated offline). The math is ``fedrr.audit._repeated_release``."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..mechanisms import RandomizedResponse
from ._repeated_release import M_GRID, field_for, posterior_independent, posterior_replaying, score_rows

#: the arrays of a reply, hashed in this order for the byte-identity check
_ARRAYS = ("x", "y", "client_id", "mechanism_index")


def collect_replays(config: Mapping[str, Any], M: int, timeout: float = 300.0) -> dict[int, list[tuple]]:
    """Run one simulated federation (fedrr's ClientApp, one node per client) whose ServerApp sends
    every node ``M`` ``query.release`` messages at once. ``config`` is a Flower run config (dict of
    dashed keys, as ``RunConfig.to_flwr``). Returns {client id: [(x, y, sha256 of the reply's
    arrays, the reply's mechanisms JSON)] × M} in query order; RuntimeError if a query went
    unanswered."""
    from flwr.app import Context, Message
    from flwr.serverapp import Grid, ServerApp

    from ..federation import MESSAGE_TYPE, RELEASE_KEY, parse_reply, query_content, run_federation, wait_for_nodes
    from ..run_config import RunConfig

    got: dict[str, Any] = {}
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        rc = RunConfig.from_flwr(context.run_config)
        nodes = wait_for_nodes(grid, rc.n_nodes, rc.node_wait_timeout)
        msgs = [
            Message(content=query_content(), dst_node_id=nid, message_type=MESSAGE_TYPE, group_id=f"query-{m}")
            for m in range(M)
            for nid in nodes
        ]
        pending = {mid: i for i, mid in enumerate(grid.push_messages(msgs)) if mid}
        order: dict[int, list] = {}
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            replies = list(grid.pull_messages(list(pending)))
            for r in replies:
                i = pending.pop(r.metadata.reply_to_message_id, None)
                if i is None:
                    continue
                rel = parse_reply(r, None, None)
                arrays = r.content.array_records[RELEASE_KEY]
                digest = hashlib.sha256(b"".join(arrays[k].data for k in _ARRAYS)).hexdigest()
                order.setdefault(int(rel.client_id[0]), []).append(
                    (i, rel.x[0], rel.y[0], digest, json.dumps(list(rel.mechanisms)))
                )
            if not replies:
                time.sleep(0.05)
        got["replies"] = {c: [t[1:] for t in sorted(v, key=lambda t: t[0])] for c, v in order.items()}
        got["unanswered"] = len(pending)

    cfg = RunConfig.from_flwr(config)
    run_federation(cfg, server_app=app)
    if got.get("unanswered", 1) or len(got.get("replies", {})) != cfg.n_clients:
        raise RuntimeError(f"the federation did not answer every query: {got.get('unanswered')} unanswered")
    return got["replies"]


def attack_federation(
    config: Mapping[str, Any], M: int, rng: np.random.Generator, m_grid=M_GRID
) -> tuple[list[dict], dict]:
    """The replaying client through Flower (``collect_replays``) against a resampling client
    simulated offline with the same records and mechanisms, per field type: every pixel of every
    client, and the label, each under a uniform prior. ``config`` is a Flower run config of the
    built-in dataset population with one mechanism for all clients. Returns (rows as
    ``score_rows``, part "flower"; checks)."""
    from ..assembly import build_population
    from ..release import offline_release
    from ..run_config import RunConfig

    t0 = time.perf_counter()
    replies = collect_replays(config, M)
    seconds = time.perf_counter() - t0
    rc = RunConfig.from_flwr(config)
    pop = build_population(rc)
    honest = offline_release(pop, rc.seed)
    ids = sorted(replies)
    checks = {
        "federation": rc.mechanism,
        "n_clients": rc.n_clients,
        "queries_per_client": M,
        "seconds": seconds,
        "byte_identical": all(len({r[2] for r in replies[c]}) == 1 for c in ids),
        "equals_offline_release": all(
            np.array_equal(replies[c][0][0], honest.x[honest.client_id == c][0])
            and replies[c][0][1] == honest.y[honest.client_id == c][0]
            for c in ids
        ),
        "mechanism_unchanged": all(
            json.loads(replies[c][0][3]) == [json.dumps(pop.mechanism(c).to_spec(), sort_keys=True)] for c in ids
        ),
    }
    mech = pop.mechanism(0)
    feat, lab = mech.mechanism_for(0), mech.label
    feat_txt = (
        f"RR k={feat.k} f={feat.flip_prob:g}" if isinstance(feat, RandomizedResponse) else f"Laplace ε={feat.epsilon:g}"
    )
    ffield = field_for(f"{rc.mechanism} federation: pixel, {feat_txt}", feat)
    lfield = field_for(f"{rc.mechanism} federation: label, RR k={lab.k} f={lab.flip_prob:g}", lab)
    X = np.stack([np.stack([r[0] for r in replies[c]]) for c in ids])  # (n, M, D)
    Y = np.stack([np.array([r[1] for r in replies[c]]) for c in ids])  # (n, M)
    clean_x = np.stack([pop.record(c)[0] for c in ids])
    clean_y = np.array([pop.record(c)[1] for c in ids])
    rows, equal = [], True
    for field, rep, clean in ((ffield, X.transpose(0, 2, 1).reshape(-1, M), clean_x.reshape(-1)), (lfield, Y, clean_y)):
        truth = field.truth_index(clean)
        lp_replay = posterior_replaying(field, rep)
        equal &= all(np.array_equal(lp_replay[:, m], lp_replay[:, 0]) for m in range(M))
        fresh = field.mech.release(np.repeat(field.support[truth][:, None], M, axis=1), rng)
        post = {"resampler (offline)": posterior_independent(field, fresh), "replayer (Flower)": lp_replay}
        rows += score_rows(field, post, truth, m_grid, part="flower", n_clients=rc.n_clients, n_values=len(truth))
    checks["posterior_after_M_equals_after_1"] = bool(equal)
    return rows, checks
