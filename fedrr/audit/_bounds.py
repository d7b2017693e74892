"""Certified bounds of an audit: Clopper–Pearson intervals, the certified ε̂, sample sizes, and
the result objects (``Witness``, ``AuditResult``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from .._validation import check_int, check_open_unit
from ..errors import ValidationError

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
            f"{self.count}/{self.n} vs {self.count_prime}/{self.n} hits, "
            f"P(S|x) >= {self.p_lower:.4g}, P(S|x') <= {self.q_upper:.4g}"
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
