"""fedrr's LDP-SGD ServerApp (run config ``protocol = "ldp-sgd"``): wait for the nodes, ask each for
its client id and ε (``query.identify``: no release), plan the disjoint groups exactly as the offline
``LDPSGDClassifier`` does (present clients in client-id order, shuffled once from the run seed), run
``LDPSGDStrategy`` through Flower's ``Strategy.start`` (one training round per group, the check as the
last round's evaluation), then score the model on the population's clean test set and write
``metrics.json`` and ``model-ldp-sgd.npz`` under ``results-dir/run-name/``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from .. import __version__
from ..assembly import build_population
from ..errors import FedrrError
from ..estimators import LDPSGDClassifier, LDPSGDServer, ldp_sgd_design, make_server
from ..gradient_release import n_inputs
from ..io import write_json
from ..learners import record_domain, score_text
from ..run_config import RunConfig
from ._collect import wait_for_nodes
from ._ldp_sgd_protocol import IDENTIFY, IDENTITY_KEY
from ._ldp_sgd_strategy import LDPSGDStrategy

app = ServerApp()


def fitted_classifier(server: LDPSGDServer, *, classes, n_states, client_epsilon, **params) -> LDPSGDClassifier:
    """The classifier a federation's server ends with: the offline fit's attributes, from its server."""
    eps = np.asarray(client_epsilon, float)
    kw = {k: v for k, v in params.items() if k in LDPSGDClassifier._parameter_constraints}
    est = LDPSGDClassifier(n_states=np.asarray(n_states), **kw)
    est.classes_, est.n_states_, est.n_features_in_ = np.asarray(classes), np.asarray(n_states), len(n_states)
    est.client_epsilon_ = eps
    est._set_result(server)
    return est


def identify(grid: Grid, node_ids: list[int], timeout: float) -> tuple[dict[int, tuple[int, float]], dict]:
    """{node: (client id, ε)} of the nodes whose client is present, and the others counted by reason."""
    msgs = [Message(RecordDict(), dst_node_id=n, message_type=IDENTIFY, group_id="identify") for n in node_ids]
    out: dict[int, tuple[int, float]] = {}
    reasons: dict[str, int] = {}
    for msg in grid.send_and_receive(msgs, timeout=timeout):
        rec = None if msg.has_error() else msg.content.config_records.get(IDENTITY_KEY)
        try:
            cid, eps = int(rec["client_id"]), float(rec["epsilon"])
            ok = eps > 0 and np.isfinite(eps) and cid not in {c for c, _ in out.values()}
        except (TypeError, KeyError, ValueError):
            ok = False
        if ok:
            out[msg.metadata.src_node_id] = (cid, eps)
        else:
            key = "dropped_out" if msg.has_error() and "dropped out" in (msg.error.reason or "") else "malformed"
            reasons[key] = reasons.get(key, 0) + 1
    if len(out) + sum(reasons.values()) < len(node_ids):
        reasons["no_reply"] = len(node_ids) - len(out) - sum(reasons.values())
    return out, reasons


def run_sgd_server(grid: Grid, cfg: RunConfig, log=print) -> dict:
    """The whole server side of one LDP-SGD federation; returns the metrics it wrote."""
    t_start = time.perf_counter()
    name = cfg.run_name or time.strftime("run-%Y%m%d-%H%M%S")
    out = Path(cfg.results_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    population = build_population(cfg)  # server side: the layout, n_clients and test_set(), never record()
    metrics: dict[str, Any] = {
        "run_name": name,
        "config": cfg.to_flwr(),
        "fedrr_version": __version__,
        "protocol": "ldp-sgd",
        "status": "identifying",
    }
    node_ids = wait_for_nodes(grid, cfg.n_nodes, cfg.node_wait_timeout)
    ident, reasons = identify(grid, node_ids, cfg.reply_timeout)
    order = sorted(ident, key=lambda n: ident[n][0])  # client-id order, as the simulator's rows
    cids = [ident[n][0] for n in order]
    eps = np.array([ident[n][1] for n in order])
    metrics.update(nodes_registered=len(node_ids), n_clients_present=len(order), identify_dropped=reasons)
    if len(order) < cfg.min_valid:
        metrics["status"] = "failed: too few clients"
        write_json(out / "metrics.json", metrics)
        raise FedrrError(f"only {len(order)} clients answered (min-valid = {cfg.min_valid}); {reasons}")
    n_states, n_classes = ldp_sgd_design(record_domain(population.mechanism(cids[0] if cids else 0)))
    p = cfg.ldp_sgd_params()
    server = make_server(n_classes, n_inputs(n_states), len(n_states), eps, p, cfg.seed)
    strategy = LDPSGDStrategy(
        server, order, cids, eps, mechanism=p["mechanism"], n_sampled=p["n_sampled"], clip=p["clip"]
    )
    log(f"[fedrr] LDP-SGD: {len(order)} clients present; groups {[(k, len(r)) for k, r in server.plan][:3]}...")
    metrics["status"] = "training"
    write_json(out / "metrics.json", metrics)
    t0 = time.perf_counter()
    strategy.start(
        grid,
        ArrayRecord({"theta": Array(server.theta.copy())}),
        num_rounds=len(strategy.train_rounds),
        timeout=cfg.reply_timeout,
    )
    est = fitted_classifier(
        server, classes=np.arange(n_classes), n_states=n_states, client_epsilon=strategy.realised_epsilon, **p
    )
    test = population.test_set()
    entry = {"seconds": time.perf_counter() - t0, "n_iter": est.n_iter_, "diagnostics": est.diagnostics()}
    if test is not None:
        entry["accuracy"] = float(est.score(*test))
    np.savez(
        out / "model-ldp-sgd.npz", theta=est.theta_, coef=est.coef_, intercept=est.intercept_, classes=est.classes_
    )
    metrics.update(
        learners={"ldp-sgd": entry},
        dropped=dict(strategy.dropped),
        n_releases=int(np.sum(~np.isnan(strategy.realised_epsilon))),
        client_epsilon={"max": est.epsilon_},
        status="done",
        seconds_total=time.perf_counter() - t_start,
    )
    write_json(out / "metrics.json", metrics)
    log(f"[fedrr] ldp-sgd: {score_text(entry)}")
    return metrics


@app.main()
def main(grid: Grid, context: Context) -> None:
    run_sgd_server(grid, RunConfig.from_flwr(context.run_config))
