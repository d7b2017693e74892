"""Exact floating-point sampling pieces of the snapping mechanism (Mironov 2012): uniform doubles
from raw bits, the C library's log, the snapped ε and its calibration, and the pmf of one rounding
cell. See ``fedrr.mechanisms._snapping`` for the analysis."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .._validation import check_positive, check_rng
from ..errors import ValidationError
from ._continuous_posteriors import log1mexp

#: η' = 2⁻⁵²: twice the unit round-off 2⁻⁵³ (covers a log with error < 1 ulp, see module doc)
ETA = 2.0**-52
#: default output clamp: B ≈ ½ + tail·λ (normalised units)
DEFAULT_TAIL = 40.0

_LOG_HALF = math.log(0.5)


# ------------------------------------------------------------------------------ sampling
def libm_log(u: Any) -> np.ndarray:
    """Elementwise natural log by the C library (``math.log``): the same function numpy's C
    samplers (``Generator.laplace``) call, unlike the SIMD ``np.log`` ufunc."""
    arr = np.asarray(u, dtype=float)
    flat = arr.ravel().tolist()
    return np.fromiter(map(math.log, flat), dtype=float, count=len(flat)).reshape(arr.shape)


def _bit_length(w: np.ndarray) -> np.ndarray:
    """Exact bit length of uint64 words (0 for 0), via two exact 32-bit halves and frexp."""
    hi = (w >> np.uint64(32)).astype(np.float64)
    lo = (w & np.uint64(0xFFFFFFFF)).astype(np.float64)
    _, e_hi = np.frexp(hi)
    _, e_lo = np.frexp(lo)
    return np.where(hi > 0, 32 + e_hi, e_lo).astype(np.int64)


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)


def uniform_double(rng: np.random.Generator, size: Any = None) -> np.ndarray:
    """Mironov's U*: uniform over the doubles in (0, 1), each double u output with probability
    equal to the length of [u, next double), i.e. U* = (1.m₁…m₅₂)₂ · 2⁻ᵉ with e ~ Geometric(½) on
    {1, 2, …} and a uniform 52-bit significand. Unlike ``rng.random()`` (multiples of 2⁻⁵³) every
    double of (0, 1) with exponent ≥ −1022 is reachable; e is capped at 1022 (probability 2⁻¹⁰²²).
    Vectorised; returns an array of shape ``size`` (a 0-d array for size=None)."""
    check_rng("rng", rng)
    shape = () if size is None else tuple(np.atleast_1d(size).astype(int).tolist())
    n = int(np.prod(shape)) if shape else 1
    # exponent: 1 + number of leading zero bits of a stream of fair bits
    e = np.ones(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        w = _words(rng, todo.size)
        e[todo] += 64 - _bit_length(w)
        todo = todo[w == 0]  # 64 zero bits: keep counting (probability 2⁻⁶⁴)
    e = np.minimum(e, 1022)
    mant = _words(rng, n) >> np.uint64(12)  # 52 uniform bits
    sig = (mant | np.uint64(1 << 52)).astype(np.float64)  # exact: < 2⁵³
    return np.ldexp(sig, -(52 + e)).reshape(shape)


def random_sign(rng: np.random.Generator, size: Any = None) -> np.ndarray:
    """S: ±1.0 with probability ½ each."""
    return rng.integers(0, 2, size=size).astype(float) * 2.0 - 1.0


# ------------------------------------------------------------------------------ accounting
def next_power_of_two(v: float) -> float:
    """Λ: the smallest power of 2 ≥ v (v > 0), exactly."""
    m, e = math.frexp(float(v))
    return float(v) if m == 0.5 else math.ldexp(1.0, e)


def _exact_epsilon(lam: float, bound: float, eta: float) -> Fraction:
    return (1 + 12 * Fraction(bound) * Fraction(eta)) / Fraction(lam) + 2 * Fraction(eta)


def _round_up(q: Fraction) -> float:
    f = float(q)
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def snapping_epsilon(lam: float, bound: float, eta: float = ETA) -> float:
    """Mironov's guarantee for a sensitivity-1 query, (1 + 12·B·η)/λ + 2η, rounded up."""
    return _round_up(_exact_epsilon(lam, bound, eta))


def _grid_bound(lam: float, Lam: float, tail: float) -> int:
    return max(2, math.ceil((0.5 + tail * lam) / Lam))


def calibrate(epsilon: float, tail: float = DEFAULT_TAIL, eta: float = ETA) -> dict:
    """Normalised parameters of a snapped release whose stated ε is ≤ ``epsilon``:
    {"lam": λ, "Lambda": Λ, "M": M, "bound": B = M·Λ, "epsilon": stated ε}."""
    eps = check_positive("epsilon", epsilon)
    tail = check_positive("tail", tail)
    T = max(tail, 2.0)
    denom = eps - 12 * eta * (T + 2) - 2 * eta
    if not denom > 0:
        raise ValidationError(
            "epsilon",
            f"must exceed {12 * eta * (T + 2) + 2 * eta:.3g} for the snapping mechanism's "
            f"floating-point error terms, got {epsilon!r}",
        )
    lam = (1 + 6 * eta) / denom
    for _ in range(64):
        Lam = next_power_of_two(lam)
        M = _grid_bound(lam, Lam, tail)
        B = M * Lam
        exact = _exact_epsilon(lam, B, eta)
        if exact <= Fraction(eps):
            break
        lam = math.nextafter(lam, math.inf)
    else:  # pragma: no cover - the closed form already satisfies the bound up to rounding
        raise ValidationError("epsilon", f"could not calibrate the snapping mechanism for epsilon={epsilon!r}")
    if not (lam < B < 2.0**46 * lam):
        raise ValidationError(
            "epsilon",
            f"snapping needs λ < B < 2^46·λ (Mironov 2012, Thm 1); got λ={lam:.3g}, "
            f"B={B:.3g} for epsilon={epsilon!r} — epsilon is too large",
        )
    return {"lam": lam, "Lambda": Lam, "M": M, "bound": B, "epsilon": _round_up(exact)}


# ------------------------------------------------------------------------------ pmf pieces
def _cell(k: np.ndarray, Lam: float, M: int) -> tuple[np.ndarray, np.ndarray]:
    """Rounding cell [a, b] of grid index k (normalised units); the end cells take the tails."""
    k = np.asarray(k, dtype=float)
    a = np.where(k <= -M, -np.inf, (k - 0.5) * Lam)
    b = np.where(k >= M, np.inf, (k + 0.5) * Lam)
    return a, b


def log_cell_mass(a: np.ndarray, b: np.ndarray, z: np.ndarray, lam: float) -> np.ndarray:
    """log P(z + Lap(λ) ∈ [a, b]) for a < b (a may be −inf, b +inf), stable in the tails."""
    a, b, z = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float), np.asarray(z, float))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        width = b - a
        tail_factor = log1mexp(-width / lam)  # log(1 − e^{−(b−a)/λ}); 0 for an infinite cell
        right = _LOG_HALF - (a - z) / lam + tail_factor  # z ≤ a: the cell is right of z
        left = _LOG_HALF - (z - b) / lam + tail_factor  # z ≥ b: the cell is left of z
        ea = np.where(np.isfinite(a), np.exp(-(z - a) / lam), 0.0)
        eb = np.where(np.isfinite(b), np.exp(-(b - z) / lam), 0.0)
        inside = np.log1p(-0.5 * ea - 0.5 * eb)
    return np.where(z <= a, right, np.where(z >= b, left, inside))
