"""Fit and score: one learner fitted and scored on a clean test set (``fit_and_score``), its failure kept
as an entry, and the lines that show its score and any fallback; sweeps, the ServerApp and scripts use it."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import FedrrError
from ._registry import FitData, FitOptions, get


@dataclass
class Scored:
    """One learner's outcome: ``entry`` is what results files hold (metric, seconds, n_iter,
    diagnostics, or error); ``estimator`` the fitted object (None after an error)."""

    entry: dict[str, Any] = field(default_factory=dict)
    estimator: Any = None


#: errors one learner may raise without losing the others' results
LEARNER_ERRORS = (FedrrError, ValueError, ArithmeticError)


def classification_scores(est: Any, X: np.ndarray, y: np.ndarray) -> dict:
    """Accuracy, balanced accuracy and AUC (two classes: of p̂(1 | x); more: one-vs-rest, macro) on a
    clean test set; AUC is None when the estimator gives no probabilities or one class is absent."""
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    out = {"accuracy": float(est.score(X, y)), "balanced_accuracy": float(balanced_accuracy_score(y, est.predict(X)))}
    out["auc"] = None
    if hasattr(est, "predict_proba") and len(np.unique(y)) > 1:
        P = est.predict_proba(X)
        if P.shape[1] == len(est.classes_) and set(np.unique(y)) <= set(est.classes_.tolist()):
            pos = P[:, 1] if P.shape[1] == 2 else P
            out["auc"] = float(
                roc_auc_score(y, pos, multi_class="ovr", labels=est.classes_ if P.shape[1] > 2 else None)
            )
    return out


def fallback_note(entry: Mapping[str, Any]) -> str:
    """For a learner's results entry (``Scored.entry``): ``"fell back (reason, p = …)"`` when its
    estimator fell back to the intercept-only model (``fallback_``), else "". The reason is short
    (the whole of it is ``fallback_reason_``, in the entry's diagnostics); p is the p-value the
    fallback decision was taken on (spread: ``p_value_``; LDP-SGD: its check group's one-sided z-test,
    gain against Z_CHECK standard errors), left out when the decision had none (an a-priori fallback)."""
    d = entry.get("diagnostics") or {}
    if not d.get("fallback"):
        return ""
    gain, check, p = d.get("heldout_gain") or {}, d.get("check"), d.get("p_value")
    if gain.get("statistic") == "independence":
        why = "no label-attribute association in the pairs"
    elif gain:
        why = "no held-out gain over the intercept-only model"
    elif check:
        why = "no accuracy gain on the check group"
        z = check["gain"] / check["se"] if check.get("se") else 0.0
        p = 0.5 * math.erfc(z / math.sqrt(2.0))  # one-sided normal p of the check's z
    else:
        why = str(d.get("fallback_reason") or "no model supported").split(":")[0]
    return f"fell back ({why}, p = {p:.3g})" if p is not None else f"fell back ({why})"


def score_text(entry: Mapping[str, Any], metric: str = "accuracy") -> str:
    """A learner's score as a live line shows it: ``"accuracy 0.8900"``, with ``fallback_note``."""
    note = fallback_note(entry)
    return f"{metric} {entry.get(metric, float('nan')):.4f}" + (f", {note}" if note else "")


def fit_and_score(
    name: str,
    data: FitData,
    test: tuple[np.ndarray, np.ndarray] | None,
    options: FitOptions = FitOptions(),  # noqa: B008  frozen (ruff sees it only where FitOptions is defined)
    *,
    task: str = "classification",
) -> Scored:
    """Fit learner ``name`` and score it on the clean ``test`` set (``classification_scores``, or MSE
    for regression).
    A learner that fails is reported as ``{"error": ...}``, never raised: a run keeps the others."""
    learner = get(name, task)
    out = Scored()
    t0 = time.perf_counter()
    try:
        est = learner.fit(data, options)
        out.entry["seconds"] = time.perf_counter() - t0
        if hasattr(est, "n_iter_"):
            out.entry["n_iter"] = int(np.max(est.n_iter_))
        if hasattr(est, "rho_"):
            out.entry["rho"] = float(est.rho_)
        if callable(getattr(est, "diagnostics", None)):  # spread-EM: did its chains agree, did it fall back
            out.entry["diagnostics"] = est.diagnostics()
        if test is not None:
            Xte, yte = test
            if task == "regression":
                out.entry["mse"] = float(np.mean((est.predict(Xte) - yte) ** 2))
            else:
                out.entry.update(classification_scores(est, Xte, yte))
        out.estimator = est
    except LEARNER_ERRORS as exc:
        out.entry["error"] = f"{type(exc).__name__}: {exc}"
    return out
