"""fedrr's Flower ServerApp: wait for the nodes, run one release-collection round, pool the valid
releases, check their frequencies (``fedrr.frequency_check``: the verdict goes into the metrics; it
flags, it removes nothing), fit the configured learners (``fedrr.learners.fit_and_score``) and
evaluate them on the held-out clean test set.

Everything finished is written as it finishes (``results-dir/run-name/``): the pool right after
collection, then one model file per learner and ``metrics.json`` after each learner, so a run
that dies part-way keeps what it had."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from .. import __version__
from ..assembly import build_population, fit_options
from ..errors import FedrrError
from ..frequency_check import check_pool
from ..io import write_json
from ..learners import FitData, fit_and_score, score_text
from ..pool import Pool
from ..run_config import RunConfig
from ._collect import ServerSchema, collect_releases, validate_replies, wait_for_nodes
from ._compat import public_message

app = ServerApp()


class InsufficientReleases(FedrrError):
    """Too few valid releases to train on (the counts say why)."""


def run_server(grid: Grid, cfg: RunConfig, log=print) -> dict:
    """The whole server side of one federated run; returns the metrics it wrote."""
    t_start = time.perf_counter()
    name = cfg.run_name or time.strftime("run-%Y%m%d-%H%M%S")
    out = Path(cfg.results_dir) / name
    out.mkdir(parents=True, exist_ok=True)
    for note in cfg.budget_notes():  # a budget nobody set is said once, before anything runs
        log(note)
    population = build_population(cfg)  # server side: n_clients and test_set() only, never record()
    described = population.describe()
    metrics: dict[str, Any] = {
        "run_name": name,
        "config": cfg.to_flwr(),
        "fedrr_version": __version__,
        "status": "collecting",
        "population": described,
        "budget": {**cfg.requested_budget(), "record_epsilon_of_mechanisms": described.get("record_epsilons")},
    }
    log(
        f"[fedrr] budget asked: {_asked(cfg)}; record ε of the population's mechanisms: "
        + ", ".join(f"{e:.6g}" for e in described.get("record_epsilons", []))
    )
    if described.get("resampled"):  # the rows are resampled (population resample = bootstrap): say so
        log(f"[fedrr] rows resampled: {described['resampled']}")
    for line in described.get("release_plans", []):  # mechanism "auto": the planner's choice, one line each
        log(f"[fedrr] {line}")
    t0 = time.perf_counter()
    node_ids = wait_for_nodes(grid, cfg.n_nodes, cfg.node_wait_timeout)
    metrics.update(
        nodes_expected=cfg.n_nodes, nodes_registered=len(node_ids), seconds_wait_nodes=time.perf_counter() - t0
    )
    log(f"[fedrr] {len(node_ids)}/{cfg.n_nodes} nodes registered; querying in waves of {cfg.wave_size}")
    if len(node_ids) < cfg.n_nodes:
        log(
            f"[fedrr] only {len(node_ids)} of the {cfg.n_nodes} nodes this run config needs registered within "
            f"node-wait-timeout ({cfg.node_wait_timeout:g} s): a bare `flwr run` starts 2 SuperNodes unless given "
            f'--federation-config "num-supernodes={cfg.n_nodes}" (python -m fedrr.federation.flwr_cli sizes it)'
        )
    t0 = time.perf_counter()
    replies, no_reply = collect_releases(grid, node_ids, cfg.wave_size, cfg.reply_timeout)
    metrics["seconds_collect"] = time.perf_counter() - t0
    # the server's own schema, never what a reply claims: the population's mechanism for each client
    # (simulation), or in a deployment the declared limit on the record ε clients may choose
    if cfg.accept_mechanisms == "declared":
        schema = ServerSchema(int(population.mechanism(0).n_features), max_epsilon=cfg.max_record_epsilon)
    else:
        schema = ServerSchema.of_population(population)
    valid, reasons = validate_replies(replies, schema, population.n_clients)
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
        f"[fedrr] {n_valid} valid releases from {len(replies)} replies in {metrics['seconds_collect']:.1f} s; "
        f"dropped: {reasons or 'none'}"
    )
    if n_valid < cfg.min_valid:
        metrics["status"] = "failed: too few valid releases"
        write_json(out / "metrics.json", metrics)
        raise InsufficientReleases(f"only {n_valid} valid releases (min-valid = {cfg.min_valid}); dropped: {reasons}")
    pool = Pool.from_releases(valid, reasons)
    pool.save(out / "pool.npz")
    acc = pool.accounting()
    metrics["record_epsilon"] = {"min": acc["min"], "max": acc["max"], "mean": acc["record"], "delta": acc["delta"]}
    metrics["budget"]["record_epsilon_realised"] = metrics["record_epsilon"]
    log(f"[fedrr] record ε realised by the pooled releases: {acc['min']:.6g} to {acc['max']:.6g} (δ {acc['delta']:g})")
    check = metrics["frequency_check"] = check_pool(pool, cfg.check_alpha).to_dict()  # flags, never removes
    log(
        f"[fedrr] frequency check (α = {cfg.check_alpha:g}): "
        + (f"FLAGGED {', '.join(check['flagged_fields'])}" if check["flagged"] else "nothing flagged")
    )
    metrics.update(status="training", learners={})
    write_json(out / "metrics.json", metrics)
    test = population.test_set()
    data = FitData(pool.X, pool.y, pool.mechanism_arg(), public_X=population.public_sample())
    options = fit_options(cfg)
    for learner in cfg.learners:
        res = fit_and_score(learner, data, test, options)
        entry = dict(res.entry)
        if "error" in entry:
            entry["error"] = public_message(entry["error"])
            log(f"[fedrr] {learner} failed: {entry['error']}")
        else:
            np.savez(out / f"model-{learner}.npz", **model_arrays(res.estimator))
            log(f"[fedrr] {learner}: {score_text(entry)} ({entry['seconds']:.1f} s)")
        metrics["learners"][learner] = entry
        write_json(out / "metrics.json", metrics)
    metrics.update(status="done", seconds_total=time.perf_counter() - t_start)
    write_json(out / "metrics.json", metrics)
    return metrics


def _asked(cfg: RunConfig) -> str:
    req = cfg.requested_budget()
    given = [f"{k} = {v}" for k, v in req["asked"].items() if v is not None]
    given += [f"{k} = {v} (default, not set)" for k, v in req["defaults_used"].items()]
    return ", ".join(given) or "none (the population sets every budget)"


def model_arrays(est: Any) -> dict[str, np.ndarray]:
    """What ``model-<learner>.npz`` holds: ``classes``, and ``coef`` and ``intercept`` of a linear
    model, or ``class_prior`` (majority, naive Bayes) and ``feature_log_prob_<j>`` (naive Bayes)."""
    out = {"classes": np.asarray(est.classes_)}
    if hasattr(est, "coef_"):
        out.update(coef=np.asarray(est.coef_), intercept=np.atleast_1d(est.intercept_))
    if hasattr(est, "class_prior_"):
        out["class_prior"] = np.asarray(est.class_prior_)
    for j, table in enumerate(getattr(est, "feature_log_prob_", None) or []):
        out[f"feature_log_prob_{j}"] = np.asarray(table)
    return out


@app.main()
def main(grid: Grid, context: Context) -> None:
    run_server(grid, RunConfig.from_flwr(context.run_config))
