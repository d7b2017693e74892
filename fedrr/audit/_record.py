"""Audit of a whole record: neighbouring records that differ in every field, threshold sets on the
record's log-likelihood ratio."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_open_unit
from ..errors import ValidationError
from ..mechanisms import Mechanism, RecordMechanism
from ._bounds import DEFAULT_ALPHA, AuditResult
from ._exact import (
    _check_common,
    _is_additive,
    _is_bounded,
    _is_discrete,
    _is_oracle,
    _is_record,
    _label,
    _log_matrix,
    exact_bounded_epsilon,
    exact_discrete_epsilon,
    exact_oracle_epsilon,
)
from ._threshold_sets import _threshold_pipeline, _threshold_result, _witness_from


def _field_pair(mech: Mechanism) -> tuple[np.ndarray, np.ndarray]:
    """Worst-case neighbouring values of one field, as 1-d arrays of its width."""
    if _is_discrete(mech):
        _, (_, x, xp) = exact_discrete_epsilon(mech)
        return np.array([x], float), np.array([xp], float)
    if _is_additive(mech) or _is_bounded(mech):
        return np.asarray(mech.lower, float).copy(), np.asarray(mech.upper, float).copy()
    raise ValidationError("record", f"cannot choose neighbouring values for field mechanism {type(mech).__name__}")


def _field_sup(mech: Mechanism, a: np.ndarray, b: np.ndarray) -> float | None:
    """sup over outputs of log p(out | a) − log p(out | b) for one pure-ε field; None if unknown/infinite."""
    if _is_oracle(mech):  # symmetric in the states: every pair of distinct states has the same sup
        return exact_oracle_epsilon(mech)[0] if int(a.ravel()[0]) != int(b.ravel()[0]) else 0.0
    if _is_bounded(mech):
        return exact_bounded_epsilon(mech, float(a.ravel()[0]), float(b.ravel()[0]))
    if _is_discrete(mech):
        logP = _log_matrix(mech)
        ia, ib = int(a.ravel()[0]), int(b.ravel()[0])
        with np.errstate(invalid="ignore"):
            return float(np.max(logP[:, ia] - logP[:, ib]))
    if _is_additive(mech) and mech.noise_family == "laplace":
        return float(np.abs(a - b).sum() / mech.noise_scale)
    return None


def neighbour_pair(pair: Any, mech: Any, dtype: type) -> tuple[tuple, tuple]:
    """A user's ``pair`` = ((X, y), (X', y')) checked against ``mech.validate_input``: two records of
    ``dtype`` states (y None for a record without a label) that differ; the errors name pair[i]."""
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(isinstance(r, (tuple, list)) and len(r) == 2 for r in pair)
    ):
        raise ValidationError("pair", "must be ((X, y), (X_prime, y_prime))")
    out = []
    for i, (X, lab) in enumerate(pair):
        X = np.asarray(X).reshape(-1)
        try:
            mech.validate_input(X[None, :], None if lab is None else np.asarray([lab]))
        except ValidationError as e:
            raise ValidationError(f"pair[{i}]", e.message) from None
        out.append((X.astype(dtype), lab))  # cast once valid (a state 1.5 is refused, not truncated)
    (X, y), (Xp, yp) = out
    if np.array_equal(X, Xp) and y == yp:
        raise ValidationError("pair", "the two neighbouring records must differ")
    return (X, y), (Xp, yp)


def llr_threshold_test(mech: Any, r: tuple, rp: tuple, n: int, rng, alpha: float, pilot: float, delta: float):
    """``_threshold_pipeline`` on a record release's log-likelihood ratio log p(x̃, ỹ | r) − log p(x̃, ỹ | r')
    (the optimal distinguisher) between the records r = (X, y) and r' (y None: no label)."""
    d = len(r[0])

    def rows(rec, b):
        return np.broadcast_to(rec[0], (b, d)), None if rec[1] is None else np.full(b, rec[1])

    def draw_at(rec):
        return lambda b, g: mech.release(*rows(rec, b), rng=g)

    def stat(out):
        Xt, yt = out
        b = Xt.shape[0]
        return mech.log_likelihood(Xt, yt, *rows(r, b)) - mech.log_likelihood(Xt, yt, *rows(rp, b))

    return _threshold_pipeline(draw_at(r), draw_at(rp), stat, n, rng, alpha, pilot, delta, d + 1)


def audit_record(
    record: RecordMechanism,
    *,
    n_samples: int,
    rng: np.random.Generator,
    alpha: float = DEFAULT_ALPHA,
    pair: Any = None,
    pilot_fraction: float = 0.1,
    label: str | None = None,
) -> AuditResult:
    """Audit a whole record's composed (ε, δ) = (record.epsilon, record.delta).

    ``pair`` = ((X, y), (X', y')) two records (X of length n_features; y None when the record has
    no label); default: every field at its own worst pair, so the records differ in every field.
    The test sets are thresholds of the record LLR log p(x̃, ỹ | r) − log p(x̃, ỹ | r') — the optimal
    distinguisher — chosen on a pilot, as for additive mechanisms. ``exact_epsilon`` is the sum of
    the per-field sups for pure-ε records (None if some field has δ > 0); with attribute sampling
    (``n_sampled = m``) the label's sup plus the m largest field sups (the sampled set's probability
    is the same under both records and cancels from every ratio)."""
    if not _is_record(record):
        raise ValidationError("record", f"must be a RecordMechanism, got {type(record).__name__}")
    n, rng, alpha = _check_common(n_samples, rng, alpha)
    pilot_fraction = check_open_unit("pilot_fraction", pilot_fraction)
    name = _label(record, label)
    d = record.n_features
    if pair is None:
        X, Xp = np.empty(d), np.empty(d)
        for f in record.fields:
            a, b = _field_pair(f.mechanism)
            cols = list(f.columns)
            X[cols], Xp[cols] = (np.resize(a, len(cols)), np.resize(b, len(cols)))
        if record.label is not None:
            a, b = _field_pair(record.label)
            y, yp = a[0], b[0]
        else:
            y = yp = None
    else:
        (X, y), (Xp, yp) = neighbour_pair(pair, record, float)
    yv = None if y is None else np.asarray([y])
    ypv = None if yp is None else np.asarray([yp])
    record.validate_input(X[None, :], yv)
    record.validate_input(Xp[None, :], ypv)
    delta = float(record.delta)
    res, n_cert = llr_threshold_test(record, (X, y), (Xp, yp), n, rng, alpha, pilot_fraction, delta)
    x_desc = (X.copy(), y) if y is not None else X.copy()
    xp_desc = (Xp.copy(), yp) if yp is not None else Xp.copy()
    witness = _witness_from(res, x_desc, xp_desc, n_cert, "record LLR")
    exact = None
    if delta == 0:
        sups = []  # (forward, backward) per feature field, then the label
        for f in record.fields:
            a, b = X[list(f.columns)], Xp[list(f.columns)]
            sups.append((_field_sup(f.mechanism, a, b), _field_sup(f.mechanism, b, a)))
        label_sup = (0.0, 0.0)
        if record.label is not None:
            a, b = np.array([y], float), np.array([yp], float)
            label_sup = (_field_sup(record.label, a, b), _field_sup(record.label, b, a))
        if all(v is not None for pair in sups + [label_sup] for v in pair):
            m = len(sups) if record.n_sampled is None else record.n_sampled
            fwd = label_sup[0] + sum(sorted((p[0] for p in sups), reverse=True)[:m])
            bwd = label_sup[1] + sum(sorted((p[1] for p in sups), reverse=True)[:m])
            exact = float(max(fwd, bwd))
    return _threshold_result(
        name, record, delta, exact, n, alpha, (res, n_cert), witness, "record: threshold sets on the record LLR"
    )


# ----------------------------------------------------------------------------- a mechanism that lies
