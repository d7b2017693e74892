"""Empirical differential-privacy audit of fedrr's local randomisers (issue #7).

A mechanism M claims (ε, δ)-LDP: for every pair of inputs x, x' (in LDP any two values of the
domain are neighbours) and every output set S, P(M(x) ∈ S) ≤ e^ε P(M(x') ∈ S) + δ. The audit
turns samples of ``release`` into a *certified lower bound* ε̂ on the ε that the mechanism
actually has at its claimed δ (Jagielski et al. 2020; Nasr et al. 2021; Ding et al.'s StatDP;
Bichsel et al.'s DP-Sniper):

1. fix neighbouring inputs x, x' and a family of test sets S (below);
2. draw n releases at x and n at x', count the hits of each S;
3. bound every hit probability with a one-sided Clopper–Pearson interval at level α/m, where m is
   the number of one-sided intervals used (Bonferroni), so that *all* of them hold at once with
   probability ≥ 1 − α;
4. ε̂ = max over S and both directions of log((p_lo(S|x) − δ) / p_hi(S|x')), clipped at 0.

If M really is (ε, δ)-LDP then, on the event that every interval holds,
p_lo − δ ≤ P(S|x) − δ ≤ e^ε P(S|x') ≤ e^ε p_hi, i.e. ε̂ ≤ ε. So a correctly calibrated mechanism
fails the audit (ε̂ > claimed ε) with probability at most α — the stated false-alarm rate — and
a mechanism that leaks more than it claims fails once n is large enough (``samples_needed``).

Test sets:

* discrete mechanisms (``RandomizedResponse``, ``TransitionMatrix``): single outputs S = {o}.
  For pure ε the sup over sets of P(S|x)/P(S|x') is attained by a single output, so nothing is
  lost. The exact loss max_{o,x,x'} log P(o|x)/P(o|x') is computed from ``log_likelihood`` on the
  full k × k grid (every pair of states). The sampled part uses every state when k ≤ 16 and
  otherwise the worst pair found by the exact computation (a white-box choice of the neighbours,
  as in the auditing literature; the statistics that certify ε̂ stay black-box), or ``inputs``.
* additive-noise mechanisms (Laplace, Gaussian; width 1 or a block of width d): x = lower and
  x' = upper, the opposite corners of the box, which attain both the L1 and the L2 sensitivity
  (the worst case for additive noise, whatever ``sensitivity`` the mechanism was given).
  S = {LLR(x̃) ≥ t} and {LLR(x̃) ≤ t} with LLR = log p(x̃|x) − log p(x̃|x'): the Neyman–Pearson
  optimal sets (for Gaussian noise the LLR is the projection on x − x'; ``statistic="projection"``
  uses that projection for any noise and does not rely on ``log_likelihood``). The thresholds t
  are quantiles of a separate pilot sample (``pilot_fraction`` of the draws), so the sets are
  fixed before the certifying sample is looked at and the union bound is valid.
* whole records (``RecordMechanism``): neighbouring records that differ in every field (each
  field at its own worst pair) and threshold sets on the record's LLR
  log p(x̃, ỹ | r) − log p(x̃, ỹ | r'), again the optimal distinguisher.

Exact values (``exact_epsilon``): discrete — from the transition probabilities; Laplace —
‖x − x'‖₁/b, the sup of the log-density ratio; Gaussian — the smallest ε with
δ_exact(ε; σ, ‖x − x'‖₂) ≤ claimed δ on the analytic-Gaussian curve (Balle & Wang 2018); pure-ε
records — the sum of the per-field sups (basic composition is tight for pure ε on a pair that
differs everywhere); records with a δ > 0 field — not computed (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from ._validation import check_int, check_open_unit, check_positive, check_rng
from .errors import ValidationError
from .mechanisms import calibration as cal
from .mechanisms.base import Mechanism
from .mechanisms.record import RecordMechanism

__all__ = [
    "AuditResult",
    "Witness",
    "audit_mechanism",
    "audit_record",
    "clopper_pearson",
    "exact_discrete_epsilon",
    "exact_additive_epsilon",
    "samples_needed",
    "max_certifiable_epsilon",
    "MisclaimedMechanism",
    "DEFAULT_ALPHA",
]

DEFAULT_ALPHA = 1e-6
#: discrete mechanisms with at most this many states are sampled at every state by default
MAX_ALL_STATES = 16
_CHUNK_ELEMENTS = 1 << 22  # work arrays of at most ~4M entries (~32 MB of float64)
_N_LEVELS = 24  # pilot quantile levels per tail
_TIE_TOL = 1e-9  # LLR values within this (relative) tolerance are one atom


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Witness:
    """The neighbouring inputs and the test set that achieved the certified bound.

    ``count``/``count_prime`` are the hits of S among the ``n`` certifying releases at ``x`` and
    at ``x_prime``; ``p_lower`` is the Clopper–Pearson lower bound of P(M(x) ∈ S) and ``q_upper``
    the upper bound of P(M(x') ∈ S), each at the Bonferroni-corrected level."""

    x: Any
    x_prime: Any
    test_set: str
    count: int
    count_prime: int
    n: int
    p_lower: float
    q_upper: float
    #: discrete audits: the output o of S = {x̃ = o}
    output: int | None = None
    #: threshold audits: t of S = {s ≥ t} (``direction`` "+", s the statistic for x vs x') or
    #: S = {s ≤ t} ("-": x and x' are then the roles swapped, x being the numerator input)
    threshold: float | None = None
    direction: str | None = None

    def describe(self) -> str:
        return (
            f"x={_short(self.x)} vs x'={_short(self.x_prime)}, {self.test_set}: "
            f"{self.count}/{self.n} vs {self.count_prime}/{self.n} hits, P(S|x) >= {self.p_lower:.4g}, P(S|x') <= {self.q_upper:.4g}"
        )


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    ``epsilon_lower_bound`` (ε̂) holds with probability ≥ 1 − ``alpha``: the mechanism's true ε at
    δ = ``claimed_delta`` is at least ε̂. ``passed`` is ε̂ ≤ ``claimed_epsilon``. ``exact_epsilon``
    is the true ε on the audited pair(s) computed from the noise distribution (None when not
    computable). ``n_samples`` releases were drawn per neighbouring input, ``n_certify`` of them
    certify (the rest, if any, were the pilot that fixed the test sets); ``n_intervals`` one-sided
    intervals share the error budget α."""

    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    epsilon_lower_bound: float
    exact_epsilon: float | None
    n_samples: int
    n_certify: int
    alpha: float
    n_intervals: int
    passed: bool
    witness: Witness | None
    method: str

    @property
    def exact_matches_claim(self) -> bool | None:
        """exact ε ≤ claimed ε (up to 1e-9 relative); None if the exact value is unknown."""
        if self.exact_epsilon is None:
            return None
        return self.exact_epsilon <= self.claimed_epsilon * (1 + 1e-9) + 1e-12

    @property
    def max_certifiable(self) -> float:
        """The largest ε̂ this sample size could certify for any mechanism (see max_certifiable_epsilon):
        a claim above it cannot fail, so a PASS there says little."""
        return max_certifiable_epsilon(self.n_certify, n_intervals=self.n_intervals, alpha=self.alpha)

    def summary(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        exact = "n/a" if self.exact_epsilon is None else f"{self.exact_epsilon:.4f}"
        return (
            f"{verdict} {self.mechanism}: claimed ε={self.claimed_epsilon:.4f} (δ={self.claimed_delta:g}), "
            f"certified ε̂ ≥ {self.epsilon_lower_bound:.4f} at α={self.alpha:g}, exact {exact}, n={self.n_samples}"
            + ("" if self.witness is None else f"; witness: {self.witness.describe()}")
        )

    def to_row(self) -> dict:
        """A flat dict for CSV/markdown tables."""
        w = self.witness
        return {
            "mechanism": self.mechanism,
            "claimed_epsilon": self.claimed_epsilon,
            "claimed_delta": self.claimed_delta,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "exact_epsilon": self.exact_epsilon,
            "n_samples": self.n_samples,
            "n_certify": self.n_certify,
            "alpha": self.alpha,
            "n_intervals": self.n_intervals,
            "max_certifiable": self.max_certifiable,
            "passed": self.passed,
            "method": self.method,
            "witness": None if w is None else w.describe(),
        }


def _short(v: Any) -> str:
    if isinstance(v, tuple):  # a record (X, y)
        return "(" + ", ".join(_short(p) for p in v) + ")"
    a = np.asarray(v)
    if a.ndim == 0:
        return f"{a.item():g}" if a.dtype.kind == "f" else str(a.item())
    if a.size > 6:
        return f"[{', '.join(f'{t:g}' for t in a.ravel()[:3])}, ... ({a.size} values)]"
    return "[" + ", ".join(f"{t:g}" for t in a.ravel()) + "]"


# ----------------------------------------------------------------------------- statistics
def clopper_pearson(count: Any, n: Any, level: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper–Pearson bounds for a binomial proportion (vectorised).

    Returns (lower, upper): P(p < lower) ≤ level and P(p > upper) ≤ level, each separately
    (lower = Beta(level; c, n − c + 1) quantile, 0 when c = 0; upper = Beta(1 − level; c + 1, n − c)
    quantile, 1 when c = n)."""
    lvl = check_open_unit("level", level)
    c = np.asarray(count, dtype=float)
    nn = np.asarray(n, dtype=float)
    if np.any(c < 0) or np.any(c > nn) or np.any(c != np.round(c)):
        raise ValidationError("count", "must be integers in [0, n]")
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(c > 0, stats.beta.ppf(lvl, np.maximum(c, 1), nn - c + 1), 0.0)
        upper = np.where(c < nn, stats.beta.ppf(1 - lvl, c + 1, np.maximum(nn - c, 1)), 1.0)
    return lower, upper


def _certified_log_ratio(p_lower: np.ndarray, q_upper: np.ndarray, delta: float) -> np.ndarray:
    """log((p_lo − δ)/q_hi), −inf where p_lo ≤ δ."""
    num = p_lower - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num > 0, np.log(np.maximum(num, 1e-300)) - np.log(q_upper), -np.inf)


def max_certifiable_epsilon(n: int, *, n_intervals: int, alpha: float = DEFAULT_ALPHA) -> float:
    """The largest ε̂ any mechanism can get from n certifying draws: numerator probability 1 (all n
    hits) over the upper bound of a set never hit, ≈ log(n / log(n_intervals/α)). A claimed ε above
    this can never fail the audit at this n, whatever the mechanism does."""
    n = check_int("n", n, minimum=1)
    level = check_open_unit("alpha", alpha) / check_int("n_intervals", n_intervals, minimum=1)
    lo, _ = clopper_pearson(n, n, level)
    _, hi = clopper_pearson(0, n, level)
    return float(np.log(lo) - np.log(hi))


def samples_needed(
    p: float,
    q: float,
    target: float,
    *,
    n_intervals: int,
    alpha: float = DEFAULT_ALPHA,
    miss: float = 1e-6,
    delta: float = 0.0,
    n_max: int = 10**11,
) -> int:
    """Smallest n (releases per input) such that, for a test set with true probabilities
    P(S|x) = p and P(S|x') = q, the certified bound log((p_lo − δ)/q_hi) computed at level
    α/n_intervals is ≥ ``target`` with probability ≥ 1 − ``miss``.

    Exact Clopper–Pearson bounds are evaluated at pessimistic counts (the miss/2 binomial quantile
    of the numerator's count, the 1 − miss/2 quantile of the denominator's); the bound is
    monotone in both counts, so the claim holds. Raises ValidationError if even ``n_max`` is not
    enough (e.g. target ≥ log((p − δ)/q), which no n can certify)."""
    p = check_open_unit("p", p)
    q = check_open_unit("q", q)
    n_intervals = check_int("n_intervals", n_intervals, minimum=1)
    level = check_open_unit("alpha", alpha) / n_intervals
    miss = check_open_unit("miss", miss)
    if p - delta <= 0 or target >= math.log((p - delta) / q):
        raise ValidationError(
            "target", f"must be < log((p − δ)/q) = {math.log(max(p - delta, 1e-300) / q):.6g}: no n can certify it"
        )

    def ok(n: int) -> bool:
        c = stats.binom.ppf(miss / 2, n, p)
        c2 = stats.binom.isf(miss / 2, n, q)
        lo, _ = clopper_pearson(c, n, level)
        _, hi = clopper_pearson(c2, n, level)  # P(count > c2) <= miss/2
        return bool(_certified_log_ratio(lo, hi, delta) >= target)

    lo_n, hi_n = 1, 2
    while not ok(hi_n):
        lo_n, hi_n = hi_n, hi_n * 2
        if hi_n > n_max:
            raise ValidationError("target", f"needs more than n_max={n_max} samples")
    while hi_n - lo_n > max(1, lo_n // 1000):  # within 0.1%: round up
        mid = (lo_n + hi_n) // 2
        if ok(mid):
            hi_n = mid
        else:
            lo_n = mid
    return int(hi_n)


# ----------------------------------------------------------------------------- exact losses
def _is_record(m: Any) -> bool:
    return isinstance(m, RecordMechanism)


def _is_discrete(m: Any) -> bool:
    return isinstance(m, Mechanism) and hasattr(m, "k") and not hasattr(m, "lower")


def _is_additive(m: Any) -> bool:
    return isinstance(m, Mechanism) and hasattr(m, "lower") and hasattr(m, "upper") and hasattr(m, "noise_family")


def _log_matrix(mech: Mechanism) -> np.ndarray:
    """log P[o, x] = log p(x̃ = o | x) on the full k × k grid, from ``log_likelihood``."""
    k = int(mech.k)
    states = np.arange(k)
    with np.errstate(divide="ignore"):
        return np.asarray(mech.log_likelihood(states[:, None], states[None, :]), dtype=float)


def exact_discrete_epsilon(mech: Mechanism) -> tuple[float, tuple[int, int, int]]:
    """max over outputs o and every pair of states x, x' of log P(o|x) − log P(o|x'), from the
    mechanism's likelihood; returns (ε, (o, x, x')) with the maximising triple. For pure ε this
    is also the sup over output *sets* (a ratio of sums never exceeds the largest ratio)."""
    if not _is_discrete(mech):
        raise ValidationError(
            "mechanism", f"must be a discrete mechanism with states 0..k-1, got {type(mech).__name__}"
        )
    logP = _log_matrix(mech)
    hi, lo = logP.max(axis=1), logP.min(axis=1)
    with np.errstate(invalid="ignore"):
        gap = hi - lo
    o = int(np.nanargmax(gap))
    return float(gap[o]), (o, int(np.argmax(logP[o])), int(np.argmin(logP[o])))


def _default_pair(mech: Mechanism) -> tuple[Any, Any]:
    lo, hi = np.asarray(mech.lower, dtype=float), np.asarray(mech.upper, dtype=float)
    if mech.width == 1:
        return float(lo[0]), float(hi[0])
    return lo.copy(), hi.copy()


def exact_additive_epsilon(mech: Mechanism, x: Any = None, x_prime: Any = None) -> float | None:
    """True ε of an additive-noise mechanism on the pair (x, x') (default: the box corners lower,
    upper) at its claimed δ: Laplace ‖x − x'‖₁/b; Gaussian the analytic-Gaussian ε for
    Δ = ‖x − x'‖₂ at δ. None for an unknown noise family."""
    if not _is_additive(mech):
        raise ValidationError(
            "mechanism", f"must be an additive-noise mechanism (Laplace/Gaussian), got {type(mech).__name__}"
        )
    if x is None and x_prime is None:
        x, x_prime = _default_pair(mech)
    diff = np.atleast_1d(np.asarray(x, float) - np.asarray(x_prime, float))
    family = mech.noise_family
    if family == "laplace":
        return float(np.abs(diff).sum() / mech.noise_scale)
    if family == "gaussian":
        l2 = float(np.sqrt(np.sum(diff**2)))
        if l2 == 0:
            return 0.0
        return float(cal.analytic_gaussian_epsilon(mech.noise_scale, mech.delta, l2))
    return None


# ----------------------------------------------------------------------------- argument checks
def _check_common(n_samples: Any, rng: Any, alpha: Any) -> tuple[int, np.random.Generator, float]:
    n = check_int("n_samples", n_samples, minimum=20)
    return n, check_rng("rng", rng), check_open_unit("alpha", alpha)


def _label(mech: Any, label: str | None) -> str:
    if label is not None:
        if not isinstance(label, str):
            raise ValidationError("label", f"must be a string or None, got {type(label).__name__}")
        return label
    return repr(mech)


# ----------------------------------------------------------------------------- discrete audit
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


# ----------------------------------------------------------------------------- threshold-set audit
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
    if r_plus.max() >= r_minus.max():
        t = int(np.argmax(r_plus))
        return (
            float(r_plus[t]),
            "+",
            float(thresholds[t]),
            (int(ge_x[t]), int(ge_xp[t])),
            (float(lo_ge_x[t]), float(hi_ge_xp[t])),
            n_intervals,
        )
    t = int(np.argmax(r_minus))
    return (
        float(r_minus[t]),
        "-",
        float(thresholds[t]),
        (int(le_xp[t]), int(le_x[t])),
        (float(lo_le_xp[t]), float(hi_le_x[t])),
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


def _threshold_pipeline(
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


def _audit_additive(
    mech: Mechanism, n: int, rng, alpha: float, inputs: Any, statistic: str, pilot_fraction: float, label: str
) -> AuditResult:
    if inputs is None:
        x, xp = _default_pair(mech)
    else:
        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise ValidationError("inputs", "must be a pair (x, x_prime) for an additive-noise mechanism")
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
    eps_hat = max(0.0, res[0])
    claimed = float(mech.epsilon)
    exact = exact_additive_epsilon(mech, x, xp)
    return AuditResult(
        label,
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
        f"additive noise: threshold sets on {statistic}, {res[5] // 4} pilot thresholds, Clopper–Pearson + Bonferroni",
    )


# ----------------------------------------------------------------------------- public entry points
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

    * discrete mechanisms (have ``k``): ``inputs`` = states to sample (default: all states when
      k ≤ 16, else the exact worst pair); test sets are single outputs; no pilot.
    * additive-noise mechanisms (Laplace/Gaussian, any width): ``inputs`` = a pair (x, x')
      (default: the box corners lower, upper); test sets are thresholds of ``statistic``
      ("llr": the log-likelihood ratio, or "projection": ⟨x̃, x − x'⟩) chosen on a pilot of
      ``pilot_fraction``·n draws per input.
    * a ``RecordMechanism`` is passed on to ``audit_record`` (``inputs`` = a pair of records).

    ``alpha`` is the overall false-alarm probability: a mechanism that satisfies its claim fails
    with probability ≤ α (union bound over all ``n_intervals`` confidence intervals)."""
    if _is_record(mech):
        return audit_record(
            mech, n_samples=n_samples, rng=rng, alpha=alpha, pair=inputs, pilot_fraction=pilot_fraction, label=label
        )
    n, rng, alpha = _check_common(n_samples, rng, alpha)
    if statistic not in ("llr", "projection"):
        raise ValidationError("statistic", f"must be 'llr' or 'projection', got {statistic!r}")
    pilot_fraction = check_open_unit("pilot_fraction", pilot_fraction)
    name = _label(mech, label)
    if _is_discrete(mech):
        return _audit_discrete(mech, n, rng, alpha, inputs, name)
    if _is_additive(mech):
        return _audit_additive(mech, n, rng, alpha, inputs, statistic, pilot_fraction, name)
    raise ValidationError(
        "mechanism",
        f"cannot audit {type(mech).__name__}: need a discrete mechanism (with k states), "
        "an additive-noise mechanism (lower/upper/noise_family) or a RecordMechanism",
    )


def _field_pair(mech: Mechanism) -> tuple[np.ndarray, np.ndarray]:
    """Worst-case neighbouring values of one field, as 1-d arrays of its width."""
    if _is_discrete(mech):
        _, (_, x, xp) = exact_discrete_epsilon(mech)
        return np.array([x], float), np.array([xp], float)
    if _is_additive(mech):
        return np.asarray(mech.lower, float).copy(), np.asarray(mech.upper, float).copy()
    raise ValidationError("record", f"cannot choose neighbouring values for field mechanism {type(mech).__name__}")


def _field_sup(mech: Mechanism, a: np.ndarray, b: np.ndarray) -> float | None:
    """sup over outputs of log p(out | a) − log p(out | b) for one pure-ε field; None if unknown/infinite."""
    if _is_discrete(mech):
        logP = _log_matrix(mech)
        ia, ib = int(a.ravel()[0]), int(b.ravel()[0])
        with np.errstate(invalid="ignore"):
            return float(np.max(logP[:, ia] - logP[:, ib]))
    if _is_additive(mech) and mech.noise_family == "laplace":
        return float(np.abs(a - b).sum() / mech.noise_scale)
    return None


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
    the per-field sups for pure-ε records (None if some field has δ > 0)."""
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
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or not all(isinstance(r, (tuple, list)) and len(r) == 2 for r in pair)
        ):
            raise ValidationError("pair", "must be ((X, y), (X_prime, y_prime))")
        (X, y), (Xp, yp) = pair
        X, Xp = np.asarray(X, float).reshape(-1), np.asarray(Xp, float).reshape(-1)
        for nm, v, lab in (("pair[0]", X, y), ("pair[1]", Xp, yp)):
            try:
                record.validate_input(v[None, :], None if lab is None else np.asarray([lab]))
            except ValidationError as e:
                raise ValidationError(nm, e.message) from None
        if np.array_equal(X, Xp) and y == yp:
            raise ValidationError("pair", "the two neighbouring records must differ")
    yv = None if y is None else np.asarray([y])
    ypv = None if yp is None else np.asarray([yp])
    record.validate_input(X[None, :], yv)
    record.validate_input(Xp[None, :], ypv)

    def draw_at(row, lab):
        def draw(b, g):
            Xb = np.broadcast_to(row, (b, d))
            yb = None if lab is None else np.full(b, lab)
            return record.release(Xb, yb, rng=g)

        return draw

    def stat(out):
        Xt, yt = out
        b = Xt.shape[0]
        Xb, Xpb = np.broadcast_to(X, (b, d)), np.broadcast_to(Xp, (b, d))
        yb = None if y is None else np.full(b, y)
        ypb = None if yp is None else np.full(b, yp)
        return record.log_likelihood(Xt, yt, Xb, yb) - record.log_likelihood(Xt, yt, Xpb, ypb)

    delta = float(record.delta)
    res, n_cert = _threshold_pipeline(draw_at(X, y), draw_at(Xp, yp), stat, n, rng, alpha, pilot_fraction, delta, d + 1)
    x_desc = (X.copy(), y) if y is not None else X.copy()
    xp_desc = (Xp.copy(), yp) if yp is not None else Xp.copy()
    witness = _witness_from(res, x_desc, xp_desc, n_cert, "record LLR")
    exact = None
    if delta == 0:
        fwd, bwd = 0.0, 0.0
        for f in list(record.fields) + ([] if record.label is None else [None]):
            mech = record.label if f is None else f.mechanism
            cols = [] if f is None else list(f.columns)
            if f is None:
                a, b = np.array([y], float), np.array([yp], float)
            else:
                a, b = X[cols], Xp[cols]
            parts = []
            if f is not None and mech.width == 1 and len(cols) > 1:
                parts = [(a[[j]], b[[j]]) for j in range(len(cols))]  # replicated scalar field
            else:
                parts = [(a, b)]
            for pa, pb in parts:
                s1, s2 = _field_sup(mech, pa, pb), _field_sup(mech, pb, pa)
                if s1 is None or s2 is None:
                    fwd = bwd = float("nan")
                    break
                fwd, bwd = fwd + s1, bwd + s2
        exact = None if math.isnan(fwd) else float(max(fwd, bwd))
    eps_hat = max(0.0, res[0])
    claimed = float(record.epsilon)
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
        f"record: threshold sets on the record LLR, {res[5] // 4} pilot thresholds, Clopper–Pearson + Bonferroni",
    )


# ----------------------------------------------------------------------------- a mechanism that lies
class MisclaimedMechanism(Mechanism):
    """Wraps a mechanism and *claims* ``claim_factor`` × its true ε (and its δ) while releasing
    exactly as the wrapped one. Exists only to show that the audit catches a false privacy
    claim (claim_factor < 1); never use it on real data. Not registered: no spec round trip."""

    kind = "misclaimed"

    def __init__(self, inner: Mechanism, claim_factor: float = 0.5):
        if not isinstance(inner, Mechanism):
            raise ValidationError("inner", f"must be a Mechanism, got {type(inner).__name__}")
        self._inner = inner
        self.claim_factor = check_positive("claim_factor", claim_factor)

    def __getattr__(self, name: str):  # k, lower, upper, noise_family, noise_scale, sigma, matrix, ...
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    @property
    def epsilon(self) -> float:
        return self.claim_factor * self._inner.epsilon

    @property
    def delta(self) -> float:
        return self._inner.delta

    @property
    def width(self) -> int:
        return self._inner.width

    def release(self, x, rng):
        return self._inner.release(x, rng)

    def log_likelihood(self, x_tilde, x):
        return self._inner.log_likelihood(x_tilde, x)

    def posterior(self, x_tilde, prior):
        return self._inner.posterior(x_tilde, prior)

    def validate_input(self, x, field: str = "x"):
        return self._inner.validate_input(x, field)

    def validate_release(self, x_tilde, field: str = "x_tilde"):
        return self._inner.validate_release(x_tilde, field)

    def to_spec(self) -> dict:
        return {"kind": self.kind, "claim_factor": self.claim_factor, "inner": self._inner.to_spec()}

    def __repr__(self) -> str:
        return f"MisclaimedMechanism({self._inner!r}, claim_factor={self.claim_factor:g})"


def undercalibrated(mech: Mechanism, factor: float = 0.5) -> Mechanism:
    """A deliberately mis-calibrated copy of a Laplace or Gaussian mechanism: its noise is set for a
    sensitivity ``factor`` times the box's, while it still states the original ε. The mechanism
    classes refuse such a sensitivity; this bypass exists only to show that the audit bites."""
    import copy

    from .mechanisms import GaussianMechanism, LaplaceMechanism

    check_positive("factor", factor)
    bad = copy.copy(mech)
    if isinstance(mech, LaplaceMechanism):
        bad.sensitivity = mech.sensitivity * factor
        bad.scale = cal.laplace_scale(mech.epsilon, bad.sensitivity)
    elif isinstance(mech, GaussianMechanism) and mech.calibration == "analytic":
        bad.sensitivity = mech.sensitivity * factor
        bad.sigma = cal.analytic_gaussian_sigma(mech.epsilon, mech.delta, bad.sensitivity)
    else:
        raise ValidationError("mech", f"must be a LaplaceMechanism or an analytic GaussianMechanism, got {mech!r}")
    return bad
