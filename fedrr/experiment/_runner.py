"""Run one sweep cell and write its record: offline (``fedrr.release.offline_release``, the pool a
Flower run would collect, without Flower), as a Flower simulation (``run_federation``), or a
regression cell. Every learner goes through ``fedrr.learners.fit_and_score``; oracles get the
clean records of the clients that released, outside the federation."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import _config_schema as schema
from ..assembly import build_population, fit_options
from ..errors import FedrrError, ValidationError
from ..fake import FakeClients
from ..frequency_check import check_pool
from ..io import write_json
from ..learners import FitData, fit_and_score
from ..learners import get as get_learner
from ..pool import Pool
from ..release import offline_release
from ._cells import CellSpec

#: run-config keys -> scenario keys, to report a population's errors by the scenario's key (a
#: mechanism's own parameter names: the privacy section)
_FIELD_PATHS = {k.flwr: k.scenario_path for k in schema.run_keys() if k.scenario_path}
_FIELD_PATHS |= {"flip_prob": "privacy", "epsilon": "privacy", "mechanisms": "privacy"}


def as_config_error(exc: ValidationError, cell: CellSpec) -> ValidationError:
    """A population's ValidationError named by the scenario key it comes from."""
    path = _FIELD_PATHS.get(exc.field)
    if exc.field.split(".")[0] in ("categorical", "edges"):  # a table population's column (read_table)
        path = f"population.{exc.field}"
    if cell.spec.grid_axis == "epsilon_grid" and path in (
        "privacy",
        "privacy.feature_flip_grid",
        "privacy.feature_epsilon_grid",
        "privacy.label_flip",
        "privacy.label_epsilon",
    ):
        path = "privacy.epsilon_grid"  # the per-field budgets all come from the record budget
    return ValidationError(path, exc.message) if path else exc


def run_cell(cell: CellSpec, out: str | Path, executor: str | None = None) -> dict:
    """Run one cell, write ``out/cells/<key>.json`` atomically and return the record."""
    t_start = time.perf_counter()
    out = Path(out)
    if cell.spec.task == "regression":
        record = _regression_cell(cell)
    else:
        record = _classification_cell(cell, out, executor)
    record.update(seconds=time.perf_counter() - t_start, finished_at=time.strftime("%Y-%m-%dT%H:%M:%S"), status="done")
    write_json(out / "cells" / f"{cell.key}.json", record)
    return record


def _header(cell: CellSpec) -> dict[str, Any]:
    spec = cell.spec
    return {
        "scenario": spec.name,
        "cell": cell.key,
        "g": cell.g,
        "n": cell.n,
        "r": cell.r,
        "fingerprint": cell.fingerprint(),
        "seed": cell.seed,
        "mode": spec.run.mode,
        "grid_axis": spec.grid_axis or "population",
        "grid_value": cell.grid_value,
    }


def _classification_cell(cell: CellSpec, out: Path, executor: str | None) -> dict:
    spec = cell.spec
    try:
        cfg = cell.run_config(results_dir=str(out / "runs"), executor=executor)
        population = build_population(cfg)
    except ValidationError as exc:
        raise as_config_error(exc, cell) from None
    test = population.test_set()
    options = fit_options(cfg)
    t0 = time.perf_counter()
    if spec.run.mode == "offline":
        rel = offline_release(population, cfg.seed)
        missing = population.n_clients - len(rel.client_id)
        pool = Pool.from_releases([rel], {"dropped_out": missing} if missing else {})
        seconds_collect = time.perf_counter() - t0
        if pool.n < cfg.min_valid:
            raise FedrrError(f"cell {cell.key}: only {pool.n} valid releases (run.min_valid = {cfg.min_valid})")
        data = FitData(pool.X, pool.y, pool.mechanism_arg(), public_X=population.public_sample())
        learners = {n: fit_and_score(n, data, test, options).entry for n in cfg.learners}
        dropped, n_releases = pool.counts, pool.n
        check = check_pool(pool, cfg.check_alpha).to_dict()
    else:
        from ..federation import run_federation

        if cfg.ray_address:
            os.environ["RAY_ADDRESS"] = cfg.ray_address
        metrics = run_federation(cfg)
        seconds_collect = float(metrics.get("seconds_collect", time.perf_counter() - t0))
        pool = Pool.load(out / "runs" / cell.key / "pool.npz")
        learners = {
            n: {
                k: v
                for k, v in e.items()
                if k in ("accuracy", "balanced_accuracy", "auc", "seconds", "error", "n_iter", "diagnostics")
            }
            for n, e in metrics["learners"].items()
        }
        dropped, n_releases = dict(metrics.get("dropped") or {}), int(metrics["n_releases"])
        check = metrics.get("frequency_check")
    # oracles, and learners that release something else than the record (ldp-sgd: one gradient per client,
    # simulated from the clients' own records; the simulator equals its Flower protocol for a seed)
    oracles = [n for n in spec.learners.names if get_learner(n).oracle or get_learner(n).own_protocol]
    if oracles:  # with fake clients: the honest clients' records (a fake one has none)
        fake = isinstance(population, FakeClients)
        keep = np.array([not (fake and population.is_fake(int(i))) for i in pool.client_id])
        recs = [population.record(int(i)) for i in pool.client_id[keep]]
        mech = pool.mechanism_arg()
        clean = FitData(
            pool.X[keep],
            pool.y[keep],
            [m for m, k in zip(mech, keep) if k] if isinstance(mech, list) else mech,
            clean_X=np.stack([np.asarray(x) for x, _ in recs]),
            clean_y=np.asarray([y for _, y in recs]),
            client_id=pool.client_id[keep],
        )
        for n in oracles:
            if fake and get_learner(n).own_protocol:
                learners[n] = {"error": "not run: fake clients craft record releases, not this learner's own protocol"}
                continue
            learners[n] = fit_and_score(n, clean, test, options).entry
            if get_learner(n).own_protocol and "diagnostics" in learners[n]:  # its own releases' ε per client
                learners[n]["eps_per_client"] = learners[n]["diagnostics"]["epsilon"]
    p = cell.privacy()
    return {
        **_header(cell),
        "params": {
            "mechanism": p.mechanism,
            "feature_flip": p.feature_flip,
            "feature_epsilon": p.feature_epsilon,
            "label_flip": p.label_flip,
            "label_epsilon": p.label_epsilon,
            "requested_eps_record": p.requested_eps_record,
            "text": _mix_text(p),
        },
        "population": population.describe() if population.n_clients <= 100_000 else _short_description(population),
        "n_clients": population.n_clients,
        "n_releases": n_releases,
        "dropped": dropped,
        "fake_fraction": cfg.fake_fraction,
        "frequency_check": check,
        "eps": pool.accounting(),
        "learners": {n: learners.get(n, {"error": "not run"}) for n in spec.learners.names},
        "seconds_collect": seconds_collect,
    }


def _short_description(population) -> dict:
    """A large population's description without its per-client scan, still saying if it is resampled."""
    out = {"n_clients": population.n_clients}
    if getattr(population, "resample", "none") != "none":
        out["resample"] = population.resample
        out["resampled"] = f"{population.resample}: client i's row a function of (seed, i)"
    return out


def _mix_text(p) -> str | None:
    """The per-field parameters of a budget-mix, joint-Gaussian or paired cell, for the summary table
    (None otherwise: the summary builds it from the row)."""
    if p.mechanism == "auto":  # one budget: the whole record's, to the planned release
        if p.budget_mix:
            parts = ", ".join(f"{v:.3g} (weight {w:g})" for v, w in p.budget_mix)
            return f"auto: ε_record mix {parts}, each to its planned release"
        return f"auto: ε_record {p.feature_epsilon:.3g} to the planned release"
    if p.mechanism == "triple":  # one budget: the whole record's, to its one triple report
        if p.budget_mix:
            parts = ", ".join(f"{v:.3g} (weight {w:g})" for v, w in p.budget_mix)
            return f"triple: ε_record mix {parts} to one (attribute, attribute, label) report"
        return f"triple: ε_record {p.feature_epsilon:.3g} to one (attribute, attribute, label) report"
    if p.mechanism == "paired":  # one budget: the whole record's, shared by the pairs; no label budget
        m = p.n_sampled or 1
        pairs = f"{m} (attribute, label) pair{'s' if m > 1 else ''}"
        if p.budget_mix:
            parts = ", ".join(f"{v:.3g} (weight {w:g})" for v, w in p.budget_mix)
            return f"paired: ε_record mix {parts} over {pairs}, label inside the pairs"
        each = f" (ε {p.feature_epsilon / m:.3g} each)" if m > 1 else ""
        return f"paired: ε_record {p.feature_epsilon:.3g} over {pairs}{each}, label inside the pairs"
    joint = p.mechanism == "gaussian" and p.gaussian_noise == "joint"
    if p.label_flip:
        label = f"label flip {p.label_flip:.3g}"
    elif p.label_epsilon is not None:
        label = f"label ε {p.label_epsilon:.3g}"
    else:  # unset (None): a population that sets its clients' budgets itself
        label = "label budget of the population"
    if joint and not p.budget_mix and p.feature_epsilon:
        return f"joint Gaussian ε features {p.feature_epsilon:.3g}, {label}"
    if not p.budget_mix:
        return None
    unit = "flip" if p.mechanism == "rr" else "ε joint features" if joint else "ε/feature"
    parts = ", ".join(f"{v:.3g} (weight {w:g})" for v, w in p.budget_mix)
    return f"feature {unit} mix {parts}, {label}"


def _regression_cell(cell: CellSpec) -> dict:
    """A regression cell (Farokhi 2020 setting, offline): see ``fedrr.experiment._regression``."""
    from ._regression import run_regression_cell

    spec, p = cell.spec, cell.privacy()
    pop = spec.population
    res = run_regression_cell(
        cell.n_clients,
        pop.n_test_per_class,
        pop.dataset,
        p,
        list(spec.learners.names),
        np.random.SeedSequence(cell.seed),
    )
    acc = res["eps"]
    label_txt = "label public" if p.label_public else f"label ε {p.label_epsilon:.3g} (Laplace)"
    noise = f", {p.calibration} σ {res['sigma']:.3g}" if p.mechanism == "gaussian" else ""
    return {
        **_header(cell),
        "mode": "offline",
        "metric": "mse",
        "params": {
            "mechanism": p.mechanism,
            "feature_flip": None,
            "feature_epsilon": None,
            "label_flip": None,
            "label_epsilon": p.label_epsilon,
            "requested_eps_record": p.requested_eps_record,
            "calibration": p.calibration,
            "label_public": p.label_public,
            "sigma": res["sigma"],
            "text": f"input block ε {acc['features']:.3g}{noise}, {label_txt}",
        },
        "population": {
            "dataset": pop.dataset,
            "task": "regression",
            "n_clients": cell.n_clients,
            "n_test": res["n_test"],
            "p": res["p"],
        },
        "n_clients": cell.n_clients,
        "n_releases": res["n_releases"],
        "dropped": {},
        "eps": {
            **acc,
            "per_feature": None,
            "n_features": res["p"],
            "label": acc["label"] if acc["label"] != "public" else None,
        },
        "learners": res["learners"],
        "seconds_collect": 0.0,
    }
