"""Spread-EM's cross-validation as tasks (``SpreadLogisticRegressionCV``): what every task reads
(``task_data``: the releases, prepared and as given, and the sub-fits' parameters) and the tasks
themselves, one candidate's fit and held-out scores on one fold (``fold_scores``) and the tested
fit or the refit (``final_fit``). They run where ``_runtime.HeldData`` holds the data (in this
process, or on Ray's actors) and depend on their arguments and the data only."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...parallel import RayExecutor
from ._cv_paired import model_pair_tables, pair_report_loglik
from ._cv_scores import _mechanism_arg, debiased_hits, heldout_loglik
from ._direct import blocker, triple_report_loglik
from ._estimator import SpreadLogisticRegression
from ._pair_reports import is_triple
from ._pool import group_records


def task_data(cv, p: dict, releases: tuple, n_classes: int, seed: int, paired: bool, fit_args, memo: dict) -> dict:
    """What the tasks of the CV ``cv`` read (``fold_scores``, ``final_fit``): the releases as
    prepared (``releases``: X, y, each record's mechanism and its fold, −1 outside the selection),
    as given (``fit_args``: X, y, mechanism, for a refit beside the test; else None), and the
    sub-fits' parameters, and ``memo``, the starting priors the fits share (``SpreadLogisticRegression._fit``)."""
    Xv, yi, mechs, fold = releases
    remote = isinstance(cv.executor, RayExecutor)
    fixed = isinstance(cv.random_state, (int, np.integer))
    if remote and not fixed:  # one latent-class start for the whole CV
        memo.setdefault(("latent-class", "seed"), seed)
    return {
        "X": Xv,
        "y": yi,
        "mechs": mechs,
        "fold": fold,
        "fit_args": fit_args,
        "params": {k: v for k, v in cv._spread_params().items() if k != "executor"},
        # an int random_state is passed on as it is; otherwise, on Ray, the CV's own seed (a
        # Generator drawn from on each actor would give each actor's fits other seeds)
        "random_state": cv.random_state if not remote or fixed else seed,
        # a direct fit converges within max_iter in seconds: the folds take it whole; EM folds cv_max_iter
        "max_iter": cv.max_iter if _direct_folds(cv, mechs) else p["cv_max_iter"],
        "heldout_samples": p["heldout_samples"],
        "accuracy": p["scoring"] == "accuracy",
        "seed": seed,
        "cv": p["cv"],
        "n_classes": n_classes,
        "paired": paired,
        "memo": memo,  # on Ray each actor holds a copy: one start, the same centers
    }


def _direct_folds(cv, mechs: list) -> bool:
    """Whether the fold fits run ``solver="direct"`` ("auto": where it applies to these releases)."""
    if cv.solver != "auto":
        return cv.solver == "direct"
    return blocker({id(m): m for m in mechs if m is not None}.values(), cv._spread_params()["prior"]) is None


def fold_scores(data: dict, executor: Any, f: int, C: float, a: float) -> tuple[float, float, float]:
    """One selection task: the candidate (C, prior strength a) fitted with one chain on the folds
    other than f, and its mean held-out scores on fold f: log p(x̃, c̃), log p(c̃ | x̃) and the
    debiased accuracy (NaN unless scored); paired releases: the pairs' log-likelihood, twice."""
    Xv, yi, mechs, fold = data["X"], data["y"], data["mechs"], data["fold"]
    tr, te = np.flatnonzero((fold >= 0) & (fold != f)), np.flatnonzero(fold == f)
    mech_tr, mech_te = [mechs[i] for i in tr], [mechs[i] for i in te]
    kw = {**data["params"], "C": C, "prior_strength": a, "max_iter": data["max_iter"], "n_chains": 1}
    # one chain per selection fit: its score needs no agreement check
    est = SpreadLogisticRegression(random_state=data["random_state"], executor=executor, **kw)
    triple = is_triple(mech_tr[0])
    est._fit(Xv[tr], None if triple else yi[tr], _mechanism_arg(mech_tr), data["memo"])
    seed = data["seed"]
    if triple:  # the triples' held-out likelihood under the fitted model and prior
        held = group_records(_mechanism_arg(mech_te), te.size)
        fitted = data["memo"].get("direct likelihood", (None, None, None))[2]  # the fit's own, on these folds
        score = triple_report_loglik(est, held, Xv[te], seed + f, fitted)
        return score, score, np.nan
    if data["paired"]:  # the pairs' held-out likelihood: the only score a paired release has
        tables = model_pair_tables(est, seed=seed + f)
        held = group_records(_mechanism_arg(mech_te), te.size)
        score = float(pair_report_loglik(tables, held, Xv[te]).mean())
        return score, score, np.nan
    full, cond, proba = heldout_loglik(est, Xv[te], yi[te], mech_te, data["heldout_samples"], seed + f)
    acc = np.nan
    if data["accuracy"]:
        acc = float(debiased_hits(proba.argmax(axis=1), yi[te], mech_te, data["n_classes"]).mean())
    return float(full.mean()), float(cond.mean()), acc


def final_fit(data: dict, executor: Any, kind: str, C: float, a: float, sel=None, test=None):
    """The chosen candidate's tested fit on the selection part ``sel`` and its held-out
    (log p(c̃ | x̃), p̂(c | x̃)) on the ``test`` rows (kind "test"), or its refit on all the releases
    as the CV was given them (kind "refit"), with the CV's other spread-EM parameters."""
    est = SpreadLogisticRegression(
        random_state=data["random_state"], executor=executor, **{**data["params"], "C": C, "prior_strength": a}
    )
    if kind == "refit":  # beside the test: its error matters only if the test keeps the model
        X, y, mechanism = data["fit_args"]
        try:
            est._fit(X, y, mechanism, data["memo"])
        except Exception as exc:  # noqa: BLE001 - handed to _finish, which raises it if the model is kept
            return exc
        return est
    Xv, yi, mechs = data["X"], data["y"], data["mechs"]
    est._fit(Xv[sel], yi[sel], _mechanism_arg([mechs[i] for i in sel]), data["memo"])
    mech_b = [mechs[i] for i in test]
    _, cond, proba = heldout_loglik(est, Xv[test], yi[test], mech_b, data["heldout_samples"], data["seed"] + data["cv"])
    return cond, proba
