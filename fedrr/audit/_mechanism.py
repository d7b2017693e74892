"""Audits of one field's mechanism: single-output sets for discrete mechanisms whose releases are
states, likelihood-ratio threshold sets (fixed by a pilot sample) for everything else: additive
noise, unary encoding and local hashing, the Piecewise and Duchi mechanisms."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_open_unit
from ..errors import ValidationError
from ..mechanisms import Mechanism, PairedRecordMechanism, RecordMechanism, TripleRecordMechanism, is_record_mechanism
from ._bounds import (
    _CHUNK_ELEMENTS,
    DEFAULT_ALPHA,
    MAX_ALL_STATES,
    AuditResult,
    Witness,
    _certified_log_ratio,
    clopper_pearson,
)
from ._exact import (
    _check_common,
    _default_pair,
    _is_additive,
    _is_bounded,
    _is_discrete,
    _is_oracle,
    _label,
    exact_additive_epsilon,
    exact_bounded_epsilon,
    exact_discrete_epsilon,
    exact_oracle_epsilon,
)
from ._paired import audit_paired
from ._record import audit_record
from ._threshold_sets import _threshold_pipeline, _threshold_result, _witness_from


def _audit_discrete(
    mech: Mechanism, n: int, rng: np.random.Generator, alpha: float, inputs: Any, label: str
) -> AuditResult:
    k = int(mech.k)
    exact, (o_star, x_star, xp_star) = exact_discrete_epsilon(mech)
    if inputs is None:
        states = (
            np.arange(k)
            if k <= MAX_ALL_STATES
            else np.array(sorted({x_star, xp_star}) if x_star != xp_star else [0, 1])
        )
    else:
        states = np.unique(mech.validate_input(np.asarray(inputs), "inputs").ravel())
        if states.size < 2:
            raise ValidationError("inputs", f"must hold at least two distinct states, got {states.tolist()}")
    m = states.size
    counts = np.zeros((k, m), dtype=np.int64)
    chunk = max(10_000, _CHUNK_ELEMENTS // k)
    for i, s in enumerate(states):
        done = 0
        while done < n:
            b = min(chunk, n - done)
            out = np.asarray(mech.release(np.full(b, s, dtype=np.int64), rng)).ravel()
            counts[:, i] += np.bincount(out, minlength=k)[:k]
            done += b
    n_intervals = 2 * k * m
    lo, hi = clopper_pearson(counts, n, alpha / n_intervals)
    delta = float(mech.delta)
    # ratio[o, i, j] = certified log((P(o | states[i]) − δ) / P(o | states[j])), i ≠ j
    ratio = _certified_log_ratio(lo[:, :, None], hi[:, None, :], delta)
    ratio[:, np.arange(m), np.arange(m)] = -np.inf
    o, i, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    best = float(ratio[o, i, j])
    witness = Witness(
        int(states[i]),
        int(states[j]),
        f"S = {{x̃ = {int(o)}}}",
        int(counts[o, i]),
        int(counts[o, j]),
        n,
        float(lo[o, i]),
        float(hi[o, j]),
        output=int(o),
    )
    eps_hat = max(0.0, best)
    claimed = float(mech.epsilon)
    return AuditResult(
        label,
        claimed,
        delta,
        eps_hat,
        exact,
        n,
        n,
        alpha,
        n_intervals,
        eps_hat <= claimed,
        witness,
        f"discrete: single outputs, {m} input states, Clopper–Pearson + Bonferroni",
    )


def _audit_threshold(
    mech: Mechanism, n: int, rng, alpha: float, inputs: Any, statistic: str, pilot_fraction: float, label: str
) -> AuditResult:
    """Threshold sets on the LLR (or projection) for a pair of inputs: additive noise and bounded
    numeric fields (default: lower vs upper), discrete oracles (default: the exact worst pair)."""
    oracle = _is_oracle(mech)
    if oracle and statistic != "llr":
        raise ValidationError("statistic", "must be 'llr' for a discrete oracle (its releases are not numbers)")
    if inputs is None:
        x, xp = (tuple(float(s) for s in exact_oracle_epsilon(mech)[1][1:])) if oracle else _default_pair(mech)
    else:
        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise ValidationError("inputs", "must be a pair (x, x_prime) for this mechanism")
        x, xp = (mech.validate_input(v, f"inputs[{i}]") for i, v in enumerate(inputs))
        if mech.width == 1:
            x, xp = float(np.asarray(x).ravel()[0]), float(np.asarray(xp).ravel()[0])
    xa, xpa = np.asarray(x, float), np.asarray(xp, float)
    if np.array_equal(xa, xpa):
        raise ValidationError("inputs", "the two neighbouring inputs must differ")
    w = mech.width

    def draw_at(v):
        def draw(b, g):
            base = np.full(b, float(v)) if w == 1 else np.broadcast_to(np.asarray(v, float), (b, w))
            return mech.release(base, g)

        return draw

    if statistic == "llr":

        def stat(xt):
            l1 = np.asarray(mech.log_likelihood(xt, x)).reshape(xt.shape[0], -1).sum(axis=1)
            l2 = np.asarray(mech.log_likelihood(xt, xp)).reshape(xt.shape[0], -1).sum(axis=1)
            return l1 - l2

        name = "LLR(x̃)"
    else:
        direction = (xa - xpa).reshape(-1)
        mid = ((xa + xpa) / 2).reshape(-1)

        def stat(xt):
            return (np.asarray(xt, float).reshape(xt.shape[0], -1) - mid) @ direction

        name = "<x̃ − (x+x')/2, x − x'>"
    delta = float(mech.delta)
    res, n_cert = _threshold_pipeline(draw_at(x), draw_at(xp), stat, n, rng, alpha, pilot_fraction, delta, w)
    witness = _witness_from(res, x, xp, n_cert, name)
    if oracle:
        exact, kind = exact_oracle_epsilon(mech)[0], "discrete oracle"
    elif _is_bounded(mech):
        exact, kind = exact_bounded_epsilon(mech, x, xp), "bounded numeric"
    else:
        exact, kind = exact_additive_epsilon(mech, x, xp), "additive noise"
    return _threshold_result(
        label, mech, delta, exact, n, alpha, (res, n_cert), witness, f"{kind}: threshold sets on {statistic}"
    )


# ----------------------------------------------------------------------------- public entry points
def _record_audit(kind: str):
    """The audit of a record mechanism's design, by its spec kind (one entry per design)."""
    audits = {RecordMechanism.kind: audit_record, PairedRecordMechanism.kind: audit_paired}
    return (audits | {TripleRecordMechanism.kind: audit_paired}).get(kind, audit_record)


def audit_mechanism(
    mech: Mechanism | RecordMechanism,
    *,
    n_samples: int,
    rng: np.random.Generator,
    alpha: float = DEFAULT_ALPHA,
    inputs: Any = None,
    statistic: str = "llr",
    pilot_fraction: float = 0.1,
    label: str | None = None,
) -> AuditResult:
    """Audit one mechanism's claimed (ε, δ) from ``n_samples`` releases per neighbouring input.

    * discrete mechanisms releasing states (randomised response, TransitionMatrix): ``inputs`` =
      states to sample (default: all states when k ≤ 16, else the exact worst pair); test sets are
      single outputs; no pilot.
    * unary encoding, local hashing: ``inputs`` = a pair of states (default: the exact worst pair);
      threshold sets on the LLR (its three atoms ±ε, 0 include the optimal set), with a pilot.
    * Piecewise and Duchi mechanisms: as additive noise below (exact ε from ``exact_bounded_epsilon``).
    * additive-noise mechanisms (Laplace/Gaussian, any width): ``inputs`` = a pair (x, x')
      (default: the box corners lower, upper); test sets are thresholds of ``statistic``
      ("llr": the log-likelihood ratio, or "projection": ⟨x̃, x − x'⟩) chosen on a pilot of
      ``pilot_fraction``·n draws per input.
    * a ``RecordMechanism`` is passed on to ``audit_record`` (``inputs`` = a pair of records), a
      ``PairedRecordMechanism`` to ``audit_paired`` (likewise).

    ``alpha`` is the overall false-alarm probability: a mechanism that satisfies its claim fails
    with probability ≤ α (union bound over all ``n_intervals`` confidence intervals)."""
    if is_record_mechanism(mech):  # a whole record: its design's audit
        audit = _record_audit(mech.kind)
        return audit(
            mech, n_samples=n_samples, rng=rng, alpha=alpha, pair=inputs, pilot_fraction=pilot_fraction, label=label
        )
    n, rng, alpha = _check_common(n_samples, rng, alpha)
    if statistic not in ("llr", "projection"):
        raise ValidationError("statistic", f"must be 'llr' or 'projection', got {statistic!r}")
    pilot_fraction = check_open_unit("pilot_fraction", pilot_fraction)
    name = _label(mech, label)
    if _is_discrete(mech) and not _is_oracle(mech):
        return _audit_discrete(mech, n, rng, alpha, inputs, name)
    if _is_oracle(mech) or _is_additive(mech) or _is_bounded(mech):
        return _audit_threshold(mech, n, rng, alpha, inputs, statistic, pilot_fraction, name)
    raise ValidationError(
        "mechanism",
        f"cannot audit {type(mech).__name__}: need a discrete mechanism (with k states), an additive-noise, "
        "Piecewise or Duchi mechanism (lower/upper) or a RecordMechanism",
    )
