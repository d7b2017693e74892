"""Noise calibration for numeric mechanisms: Laplace, the classic Gaussian bound, and the
analytic Gaussian mechanism (Balle & Wang 2018, Thm 8), valid for every ε > 0."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

from .._validation import check_open_unit, check_positive
from ..errors import ValidationError


def _noise_scale(scale: float, epsilon: float) -> float:
    """A noise scale must be a finite number > 0: ε (relative to the sensitivity) too small
    overflows it, too large underflows it to 0 (no noise at all)."""
    if not (0.0 < scale < math.inf):
        raise ValidationError(
            "epsilon",
            f"is too {'small' if scale else 'large'} for the sensitivity: the noise scale "
            f"{'overflows' if scale else 'underflows to 0'} (epsilon={epsilon!r})",
        )
    return scale


def laplace_scale(epsilon: float, sensitivity: float) -> float:
    """b = Δ₁/ε: the Laplace mechanism is ε-DP for L1 sensitivity Δ₁ (Dwork & Roth Thm 3.6)."""
    return _noise_scale(check_positive("sensitivity", sensitivity) / check_positive("epsilon", epsilon), epsilon)


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """σ = √(2 ln(1.25/δ)) Δ₂/ε (Dwork & Roth Thm A.1; a valid (ε, δ) guarantee only for ε < 1)."""
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    return _noise_scale(math.sqrt(2.0 * math.log(1.25 / d)) * check_positive("sensitivity", sensitivity) / eps, epsilon)


def analytic_gaussian_delta(epsilon: float, sigma: float, sensitivity: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism N(0, σ²) with L2 sensitivity Δ (Balle & Wang, Thm 8):
    δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    log_first = log_ndtr(a - b)
    log_second = epsilon + log_ndtr(-a - b)
    if log_second >= log_first:
        return 0.0
    return float(math.exp(log_first) * -math.expm1(log_second - log_first))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest σ with δ(ε; σ) ≤ δ: the analytic Gaussian mechanism (Balle & Wang 2018, Alg 1)."""
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    sens = check_positive("sensitivity", sensitivity)
    if d < 1e-300:  # δ(σ) is floored at 1e-320 below: a smaller target is never reached
        raise ValidationError("delta", f"must be >= 1e-300 for the analytic Gaussian calibration, got {delta!r}")

    def f(log_s):
        return math.log(max(analytic_gaussian_delta(eps, math.exp(log_s), sens), 1e-320)) - math.log(d)

    lo, hi = max(math.log(sens) - 10.0, -700.0), min(math.log(sens) + 10.0, 700.0)
    while f(lo) < 0:
        lo -= 10.0
        if lo < -700.0:  # exp(lo) underflows to σ = 0
            raise ValidationError(
                "epsilon", f"is too large: σ would underflow to 0 (epsilon={epsilon!r}, sensitivity={sens:g})"
            )
    while f(hi) > 0:
        hi += 10.0
        if hi > 700.0:  # exp(hi) overflows
            raise ValidationError(
                "epsilon",
                f"is too small: σ would overflow (epsilon={epsilon!r}, delta={delta!r}, sensitivity={sens:g})",
            )
    return math.exp(brentq(f, lo, hi, xtol=1e-14, rtol=1e-14))


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float) -> float:
    """Smallest ε with δ(ε; σ) ≤ δ for a given noise σ: the exact guarantee of existing noise."""
    s = check_positive("sigma", sigma)
    d = check_open_unit("delta", delta)
    sens = check_positive("sensitivity", sensitivity)
    if analytic_gaussian_delta(1e-12, s, sens) <= d:
        return 0.0

    def f(e):
        return analytic_gaussian_delta(e, s, sens) - d

    hi = 1.0
    while f(hi) > 0:
        hi *= 2.0
        if hi > 1e300:  # the next doubling is inf, where δ(ε) is NaN
            raise ValidationError(
                "sigma", f"is too small for sensitivity {sens:g}: its ε exceeds 1e300 (sigma={sigma!r})"
            )
    return brentq(f, 0.0, hi, xtol=1e-14, rtol=1e-12)


def l2_sensitivity(lower: np.ndarray, upper: np.ndarray) -> float:
    """Largest ‖x − x'‖₂ over the box [lower, upper]."""
    return float(np.sqrt(np.sum((np.asarray(upper) - np.asarray(lower)) ** 2)))


def l1_sensitivity(lower: np.ndarray, upper: np.ndarray) -> float:
    """Largest ‖x − x'‖₁ over the box [lower, upper]."""
    return float(np.sum(np.asarray(upper) - np.asarray(lower)))
