"""fedrr's Flower ServerApp: wait for the nodes, run one release-collection round (in bounded
waves), validate every reply and count what was dropped, pool the releases, train the configured
learners through ``ReleaseStrategy`` and evaluate them on the held-out clean test set.

Everything finished is written as it finishes (``results-dir/run-name/``): the pool right after
collection, then one model file per learner and ``metrics.json`` after each learner, so a run
that dies part-way keeps what it had."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context, Message
from flwr.serverapp import Grid, ServerApp

from .. import __version__
from .._io import write_json
from ..errors import FedrrError
from .config import load_run_config, n_nodes
from .pool import Pool, ReplyRejected, parse_reply
from .population import build_population
from .protocol import MESSAGE_TYPE, query_content
from .strategy import ReleaseStrategy, make_executor

app = ServerApp()


class InsufficientReleases(FedrrError):
    """Too few valid releases to train on (the counts say why)."""


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
    """Valid NodeReleases and a count per rejection reason (duplicated client ids are dropped too)."""
    valid, reasons, seen = [], Counter(), set()
    expected = set(range(n_clients)) if n_clients is not None and n_clients <= 10_000_000 else None
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
        if n_features is None:
            n_features = rel.x.shape[1]
        valid.append(rel)
    return valid, dict(reasons)


def run_server(grid: Grid, cfg: dict, log=print) -> dict:
    """The whole server side of one federated run; returns the metrics it wrote."""
    t_start = time.perf_counter()
    name = cfg["run-name"] or time.strftime("run-%Y%m%d-%H%M%S")
    out = Path(cfg["results-dir"]) / name
    out.mkdir(parents=True, exist_ok=True)
    population = build_population(cfg)  # server side: n_clients and test_set() only, never record()
    metrics: dict[str, Any] = {
        "run_name": name,
        "config": cfg,
        "fedrr_version": __version__,
        "status": "collecting",
        "population": population.describe(),
    }
    expected = n_nodes(cfg)
    t0 = time.perf_counter()
    node_ids = wait_for_nodes(grid, expected, float(cfg["node-wait-timeout"]))
    metrics["nodes_expected"], metrics["nodes_registered"] = expected, len(node_ids)
    metrics["seconds_wait_nodes"] = time.perf_counter() - t0
    log(f"[fedrr] {len(node_ids)}/{expected} nodes registered; querying in waves of {cfg['wave-size']}")
    t0 = time.perf_counter()
    replies, no_reply = collect_releases(grid, node_ids, int(cfg["wave-size"]), float(cfg["reply-timeout"]))
    metrics["seconds_collect"] = time.perf_counter() - t0
    valid, reasons = validate_replies(replies, None, population.n_clients)
    if no_reply:
        reasons["no_reply"] = no_reply
    n_valid = int(sum(len(v.client_id) for v in valid))
    metrics.update(
        replies=len(replies),
        dropped=reasons,
        n_releases=n_valid,
        clients_per_second=n_valid / max(metrics["seconds_collect"], 1e-9),
    )
    log(
        f"[fedrr] {n_valid} valid releases from {len(replies)} replies in {metrics['seconds_collect']:.1f} s; dropped: {reasons or 'none'}"
    )
    if n_valid < int(cfg["min-valid"]):
        metrics["status"] = "failed: too few valid releases"
        write_json(out / "metrics.json", metrics)
        raise InsufficientReleases(
            f"only {n_valid} valid releases (min-valid = {cfg['min-valid']}); dropped: {reasons}"
        )
    pool = Pool.from_releases(valid, reasons)
    pool.save(out / "pool.npz")
    acc = pool.accounting()
    metrics["record_epsilon"] = {"min": acc["min"], "max": acc["max"], "mean": acc["record"], "delta": acc["delta"]}
    metrics["status"] = "training"
    metrics["learners"] = {}
    write_json(out / "metrics.json", metrics)
    test = population.test_set()
    strategy = ReleaseStrategy(
        cfg["learners"],
        C=float(cfg["C"]),
        executor=make_executor(cfg["executor"], cfg["ray-address"]),
        random_state=int(cfg["seed"]),
        spread_max_iter=int(cfg["spread-max-iter"]),
        wdro_max_iter=int(cfg["wdro-max-iter"]),
    )
    for learner in strategy.learners:
        entry: dict[str, Any] = {}
        try:
            res = strategy.fit(learner, pool)
            est = res.estimator
            entry.update(seconds=res.seconds, n_iter=int(np.max(getattr(est, "n_iter_", 1))))
            if test is not None:
                entry["accuracy"] = float(est.score(*test))
            np.savez(
                out / f"model-{learner}.npz",
                coef=est.coef_,
                intercept=np.atleast_1d(est.intercept_),
                classes=est.classes_,
            )
            log(f"[fedrr] {learner}: accuracy {entry.get('accuracy', float('nan')):.4f} ({res.seconds:.1f} s)")
        except (FedrrError, ValueError, ArithmeticError) as exc:  # one learner failing must not lose the others
            entry["error"] = f"{type(exc).__name__}: {exc}"
            log(f"[fedrr] {learner} failed: {entry['error']}")
        metrics["learners"][learner] = entry
        write_json(out / "metrics.json", metrics)
    metrics["status"] = "done"
    metrics["seconds_total"] = time.perf_counter() - t_start
    write_json(out / "metrics.json", metrics)
    return metrics


@app.main()
def main(grid: Grid, context: Context) -> None:
    run_server(grid, load_run_config(context.run_config))
