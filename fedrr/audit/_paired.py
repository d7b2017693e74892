"""Audit of a paired release (``PairedRecordMechanism``) or a triple release (``TripleRecordMechanism``):
two neighbouring records that differ in every (attribute, label) pair, or every (attribute, attribute,
label) triple, threshold sets on the release's log-likelihood ratio — the optimal distinguisher, as
``audit_record`` does for split records."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_open_unit
from ..errors import ValidationError
from ..mechanisms import PairedRecordMechanism, TripleRecordMechanism, is_paired
from ._bounds import DEFAULT_ALPHA, AuditResult
from ._exact import _check_common, _is_oracle, _label, exact_discrete_epsilon, exact_oracle_epsilon
from ._record import llr_threshold_test, neighbour_pair
from ._threshold_sets import _threshold_result, _witness_from


def exact_paired_epsilon(mech: PairedRecordMechanism, v: np.ndarray, v_prime: np.ndarray) -> float:
    """max over outputs of log P(o | r) − log P(o | r') for records whose pairs are v, v' (F,): the sum of the
    n_sampled largest per-attribute sups (0 where v_j = v'_j; every oracle here is symmetric in its
    states, so one exact sup serves every differing pair), the sampled set's probability cancelling."""
    sups = []
    for j, o in enumerate(mech.oracles):
        if int(v[j]) == int(v_prime[j]):
            sups.append(0.0)
        else:
            sups.append(exact_oracle_epsilon(o)[0] if _is_oracle(o) else exact_discrete_epsilon(o)[0])
    return float(sum(sorted(sups, reverse=True)[: mech.n_sampled]))


def exact_triple_epsilon(mech: TripleRecordMechanism, r: tuple, r_prime: tuple) -> float:
    """max over outputs of log P(o | r) − log P(o | r') for records r = (x, y), r' = (x', y'): the
    largest exact sup of the pairs' triple oracles over the pairs whose triple values differ (0 where
    none does), the pair's sampling probability cancelling."""
    (x, y), (xp, yp) = r, r_prime
    sups = [0.0]
    for (j, k), o in zip(mech.pairs, mech.oracles):
        if (int(x[j]), int(x[k]), int(y)) != (int(xp[j]), int(xp[k]), int(yp)):
            sups.append(exact_oracle_epsilon(o)[0] if _is_oracle(o) else exact_discrete_epsilon(o)[0])
    return float(max(sups))


def audit_paired(
    mech: PairedRecordMechanism,
    *,
    n_samples: int,
    rng: np.random.Generator,
    alpha: float = DEFAULT_ALPHA,
    pair: Any = None,
    pilot_fraction: float = 0.1,
    label: str | None = None,
) -> AuditResult:
    """Audit a paired release's claimed ε (δ = 0). ``pair`` = ((X, y), (X', y')) two records (X of length
    n_features); default x = 0, y = 0 vs x' = 1, y' = 1, so every pair value differs (v_j = 0 vs C + 1)
    and the exact loss is the claimed sum of the n_sampled largest pair ε. Test sets: thresholds of the
    LLR log P(x̃ | r) − log P(x̃ | r') chosen on a pilot of ``pilot_fraction``·n draws per record."""
    if not is_paired(mech):
        msg = f"must be a PairedRecordMechanism or TripleRecordMechanism, got {type(mech).__name__}"
        raise ValidationError("mechanism", msg)
    n, rng, alpha = _check_common(n_samples, rng, alpha)
    pilot_fraction = check_open_unit("pilot_fraction", pilot_fraction)
    name = _label(mech, label)
    d, C = mech.n_features, mech.n_classes
    if pair is None:
        X, y, Xp, yp = np.zeros(d, np.int64), 0, np.ones(d, np.int64), 1
    else:
        (X, y), (Xp, yp) = neighbour_pair(pair, mech, np.int64)
        y, yp = int(y), int(yp)
    res, n_cert = llr_threshold_test(mech, (X, y), (Xp, yp), n, rng, alpha, pilot_fraction, 0.0)
    witness = _witness_from(res, (np.asarray(X).copy(), y), (np.asarray(Xp).copy(), yp), n_cert, "paired LLR")
    if isinstance(mech, TripleRecordMechanism):
        exact = exact_triple_epsilon(mech, (X, y), (Xp, yp))  # symmetric: every oracle is
    else:
        v, vp = np.asarray(X) * C + y, np.asarray(Xp) * C + yp
        exact = max(exact_paired_epsilon(mech, v, vp), exact_paired_epsilon(mech, vp, v))
    return _threshold_result(
        name, mech, 0.0, exact, n, alpha, (res, n_cert), witness, "paired record: threshold sets on the release LLR"
    )
