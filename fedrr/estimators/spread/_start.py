"""Where spread-EM starts (``init``): "calibration", an M-step on the regression-calibration
inputs (``Shard.init_samples``), or "naive-bayes", the same M-step on an E-step's samples drawn at
the log-odds of ``LDPNaiveBayes`` fitted on the same releases (``run_em``). Naive Bayes's log-odds
log p(c | x) = log π_c + Σ_j log p(x_j | c) + const is additive in the attributes (Yilmaz et al.
2019's model), so a logistic model with one-hot inputs represents it exactly; under "unit"/"index"
inputs each attribute's log-odds is projected on its one input by weighted least squares (weights:
the naive-Bayes marginal p(x_j = s)). Measured on Adult with one pair per person
(results/adult_scale_designs/summary.md): from it spread ends at or just above paired naive Bayes,
not always above the calibration start, and its burn-in runs to the budget's cap."""

from __future__ import annotations

import numpy as np

from ...errors import ValidationError
from ...mechanisms import RecordMechanism
from .._naive_bayes import LDPNaiveBayes
from .._naive_bayes_releases import check_naive_bayes_mechanism
from ._design import Design
from ._paired import PairedView

INITS = ("calibration", "naive-bayes", "auto")
#: what the L2 penalty shrinks the coefficients toward: 0 (the ridge) or naive Bayes's log-odds
SHRINK_TO = ("zero", "naive-bayes", "auto")


def naive_bayes_blocker(groups: list, design: Design, has_label: bool, fit_intercept: bool) -> str | None:
    """Why the naive-Bayes start cannot be built for these releases (None: it can)."""
    if not fit_intercept:
        return "needs fit_intercept=True (the class prior enters as the intercept)"
    if len(groups) != 1:
        return "needs one record mechanism for every record (naive Bayes is fitted on one)"
    if not design.layout.discrete.all():
        return "needs discrete attributes (naive Bayes's tables are over states)"
    rm = groups[0][0]
    if isinstance(rm, PairedView):
        return None
    if not has_label:
        return "needs released labels (a label mechanism) or paired releases"
    try:
        check_naive_bayes_mechanism(rm)
    except ValidationError as e:
        return f"needs releases LDPNaiveBayes fits: {e.message}"
    return None


def fit_naive_bayes(X: np.ndarray, y: np.ndarray, groups: list) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """``LDPNaiveBayes()`` on the releases -> (log class prior (C,), per attribute log p(x_j | c) (C, k_j),
    None for an attribute no record released (split releases: it does not vote))."""
    rm = groups[0][0]
    try:
        if isinstance(rm, PairedView):
            nb = LDPNaiveBayes().fit(X, None, mechanism=rm.paired)
            return nb.class_log_prior_, list(nb.feature_log_prob_)
        mechs, label = check_naive_bayes_mechanism(rm)
        seen = np.flatnonzero(~np.all(np.isnan(X), axis=0))
        if seen.size == 0:
            raise ValidationError("X", "no record released any attribute")
        nb = LDPNaiveBayes().fit(X[:, seen], y, mechanism=RecordMechanism([mechs[d] for d in seen], label))
    except ValidationError as e:
        raise ValidationError("init", f"'naive-bayes' fits LDPNaiveBayes on the releases: {e.message}") from e
    tables: list[np.ndarray | None] = [None] * X.shape[1]
    for d, lp in zip(seen, nb.feature_log_prob_):
        tables[d] = lp
    return nb.class_log_prior_, tables


def naive_bayes_start(log_prior: np.ndarray, tables: list, design: Design) -> tuple[np.ndarray, np.ndarray]:
    """Naive Bayes's log-odds as the logistic model's (coef (Rn, n_inputs), intercept (Rn,)).

    Rows: two classes, one row, class 1 against class 0: a_j(s) = log p(x_j=s | 1) − log p(x_j=s | 0),
    a_0 = log π_1 − log π_0. More classes, one row per class (the estimator's softmax has no reference
    class): a_{c,j}(s) = log p(x_j=s | c) centred over the classes (the softmax is unchanged by a
    shift common to the rows; centred, the L2 penalty is smallest). One-hot inputs (state 0 the
    reference): coef = a_j(s) − a_j(0), intercept = a_0 + Σ_j a_j(0): exact. Scalar inputs e_j(s)
    (unit, index): per attribute the weighted least-squares fit a_j(s) ≈ β_j e_j(s) + γ_j with weights
    the naive-Bayes marginal p(x_j = s) = Σ_c π_c p(x_j = s | c); intercept a_0 + Σ_j γ_j."""
    C = log_prior.size
    pi = np.exp(log_prior - np.logaddexp.reduce(log_prior))
    rows = 1 if C == 2 else C

    def per_row(v: np.ndarray) -> np.ndarray:  # (C, ...) -> (rows, ...)
        return v[1:2] - v[0:1] if C == 2 else v - v.mean(axis=0, keepdims=True)

    coef = np.zeros((rows, design.n_inputs))
    intercept = per_row(np.asarray(log_prior, float)).copy()
    onehot = design.encoding == "onehot"
    for d, lp in enumerate(tables):
        if lp is None:  # never released: no vote
            continue
        a = per_row(np.asarray(lp, float))  # (rows, k)
        o, k = design.offsets[d], lp.shape[1]
        if onehot:  # state s > 0 sets input o + s − 1 (k = 2: the one indicator of state 1)
            coef[:, o : o + k - 1] = a[:, 1:] - a[:, :1]
            intercept += a[:, 0]
            continue
        w = pi @ np.exp(lp)  # p(x_j = s), (k,)
        w = w / w.sum()
        e = design.state_table[d, :k].astype(float)
        em, am = w @ e, a @ w  # weighted means (rows,)
        var = w @ (e - em) ** 2
        beta = ((a - am[:, None]) * (e - em)) @ w / var if var > 0 else np.zeros(rows)
        coef[:, o] = beta
        intercept += am - beta * em
    return coef, intercept
