"""The threshold-set audit shared by the field, record and paired audits: a pilot sample fixes candidate
thresholds on a statistic, the certifying sample bounds P(S | x) and P(S | x') for S = {s ≥ t} and
{s ≤ t} (Clopper–Pearson, Bonferroni over every interval), and the best certified ratio is the
audit's ε̂. In its own module so the record audits and the entry point that dispatches to them share
it without importing each other."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ValidationError
from ._bounds import _CHUNK_ELEMENTS, _N_LEVELS, _TIE_TOL, AuditResult, Witness, _certified_log_ratio, clopper_pearson


def _pilot_thresholds(s_x: np.ndarray, s_xp: np.ndarray) -> np.ndarray:
    """Candidate thresholds: quantiles of the pooled pilot statistic, dense in both tails."""
    pooled = np.concatenate([s_x, s_xp])
    levels = np.geomspace(1.0 / pooled.size, 0.5, _N_LEVELS)
    qs = np.quantile(pooled, np.concatenate([levels, 1.0 - levels]))
    cand = np.concatenate([qs, [s_x.min(), s_x.max(), s_xp.min(), s_xp.max()]])
    cand = np.unique(cand)
    # merge thresholds that are the same atom up to rounding
    keep = np.concatenate([[True], np.diff(cand) > _TIE_TOL * (1 + np.abs(cand[1:]))])
    return cand[keep]


def _threshold_audit(s_x: np.ndarray, s_xp: np.ndarray, thresholds: np.ndarray, alpha: float, delta: float):
    """Certify log((P(S|x) − δ)/P(S|x')) for S = {s ≥ t} and, swapping roles, log((P(S'|x') − δ)/P(S'|x))
    for S' = {s ≤ t}, over every t: 4·T one-sided intervals. Returns (best, which, t, counts, bounds, m)."""
    n = s_x.size
    a, b = np.sort(s_x), np.sort(s_xp)
    tol = _TIE_TOL * (1 + np.abs(thresholds))
    ge_x = n - np.searchsorted(a, thresholds - tol, side="left")
    ge_xp = n - np.searchsorted(b, thresholds - tol, side="left")
    le_x = np.searchsorted(a, thresholds + tol, side="right")
    le_xp = np.searchsorted(b, thresholds + tol, side="right")
    n_intervals = 4 * thresholds.size
    level = alpha / n_intervals
    lo_ge_x, _ = clopper_pearson(ge_x, n, level)
    _, hi_ge_xp = clopper_pearson(ge_xp, n, level)
    lo_le_xp, _ = clopper_pearson(le_xp, n, level)
    _, hi_le_x = clopper_pearson(le_x, n, level)
    r_plus = _certified_log_ratio(lo_ge_x, hi_ge_xp, delta)
    r_minus = _certified_log_ratio(lo_le_xp, hi_le_x, delta)
    if r_plus.max() >= r_minus.max():  # S = {s ≥ t}: hits at x, at x', and their bounds
        r, direction, c, c2, lo, hi = r_plus, "+", ge_x, ge_xp, lo_ge_x, hi_ge_xp
    else:  # S' = {s ≤ t}, x' and x swapped
        r, direction, c, c2, lo, hi = r_minus, "-", le_xp, le_x, lo_le_xp, hi_le_x
    t = int(np.argmax(r))
    return (
        float(r[t]),
        direction,
        float(thresholds[t]),
        (int(c[t]), int(c2[t])),
        (float(lo[t]), float(hi[t])),
        n_intervals,
    )


def _sample_statistic(draw, stat, n: int, rng: np.random.Generator, row_width: int) -> np.ndarray:
    """n values of stat(draw(b, rng)), computed in chunks so memory stays bounded."""
    chunk = max(10_000, _CHUNK_ELEMENTS // max(1, row_width))
    out = np.empty(n)
    done = 0
    while done < n:
        b = min(chunk, n - done)
        out[done : done + b] = stat(draw(b, rng))
        done += b
    return out


def _threshold_pipeline(  # noqa: PLR0913  the audit's samplers, statistic and levels, passed explicitly
    draw_x, draw_xp, stat, n: int, rng, alpha: float, pilot_fraction: float, delta: float, row_width: int
):
    n_pilot = max(1, int(round(pilot_fraction * n)))
    n_cert = n - n_pilot
    if n_cert < 10:
        raise ValidationError("n_samples", f"leaves only {n_cert} certifying samples after the pilot; use more")
    p_x = _sample_statistic(draw_x, stat, n_pilot, rng, row_width)
    p_xp = _sample_statistic(draw_xp, stat, n_pilot, rng, row_width)
    thresholds = _pilot_thresholds(p_x, p_xp)
    s_x = _sample_statistic(draw_x, stat, n_cert, rng, row_width)
    s_xp = _sample_statistic(draw_xp, stat, n_cert, rng, row_width)
    return _threshold_audit(s_x, s_xp, thresholds, alpha, delta), n_cert


def _witness_from(res, x, xp, n_cert: int, stat_name: str) -> Witness:
    best, direction, t, (c, c2), (plo, qhi), _ = res
    if direction == "+":
        return Witness(x, xp, f"S = {{{stat_name} ≥ {t:.6g}}}", c, c2, n_cert, plo, qhi, threshold=t, direction="+")
    return Witness(xp, x, f"S = {{{stat_name} ≤ {t:.6g}}}", c, c2, n_cert, plo, qhi, threshold=t, direction="-")


def _threshold_result(  # noqa: PLR0913  the AuditResult's fields, passed explicitly
    name: str, mech: Any, delta: float, exact: float | None, n: int, alpha: float, run, witness: Witness, sets: str
) -> AuditResult:
    """The AuditResult of a threshold-set audit of ``mech``'s claimed ε at ``delta``: ``run`` is
    ``_threshold_pipeline``'s (result, n_cert); ``sets`` names the test sets at the head of ``method``."""
    res, n_cert = run
    eps_hat = max(0.0, res[0])
    claimed = float(mech.epsilon)
    return AuditResult(
        name,
        claimed,
        delta,
        eps_hat,
        exact,
        n,
        n_cert,
        alpha,
        res[5],
        eps_hat <= claimed,
        witness,
        f"{sets}, {res[5] // 4} pilot thresholds, Clopper–Pearson + Bonferroni",
    )
