"""Noise calibration for numeric mechanisms: Laplace, the classic Gaussian bound, and the
analytic Gaussian mechanism (Balle & Wang 2018, Thm 8), valid for every ε > 0."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

from .._validation import check_open_unit, check_positive


def laplace_scale(epsilon: float, sensitivity: float) -> float:
    """b = Δ₁/ε: the Laplace mechanism is ε-DP for L1 sensitivity Δ₁ (Dwork & Roth Thm 3.6)."""
    return check_positive("sensitivity", sensitivity) / check_positive("epsilon", epsilon)


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """σ = √(2 ln(1.25/δ)) Δ₂/ε (Dwork & Roth Thm A.1; a valid (ε, δ) guarantee only for ε < 1)."""
    eps = check_positive("epsilon", epsilon)
    d = check_open_unit("delta", delta)
    return math.sqrt(2.0 * math.log(1.25 / d)) * check_positive("sensitivity", sensitivity) / eps


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
    f = lambda log_s: math.log(max(analytic_gaussian_delta(eps, math.exp(log_s), sens), 1e-320)) - math.log(d)
    lo, hi = math.log(sens) - 10.0, math.log(sens) + 10.0
    while f(lo) < 0:
        lo -= 10.0
    while f(hi) > 0:
        hi += 10.0
    return math.exp(brentq(f, lo, hi, xtol=1e-14, rtol=1e-14))


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float) -> float:
    """Smallest ε with δ(ε; σ) ≤ δ for a given noise σ: the exact guarantee of existing noise."""
    s = check_positive("sigma", sigma)
    d = check_open_unit("delta", delta)
    sens = check_positive("sensitivity", sensitivity)
    if analytic_gaussian_delta(1e-12, s, sens) <= d:
        return 0.0
    f = lambda e: analytic_gaussian_delta(e, s, sens) - d
    hi = 1.0
    while f(hi) > 0:
        hi *= 2.0
    return brentq(f, 0.0, hi, xtol=1e-14, rtol=1e-12)


def l2_sensitivity(lower: np.ndarray, upper: np.ndarray) -> float:
    """Largest ‖x − x'‖₂ over the box [lower, upper]."""
    return float(np.sqrt(np.sum((np.asarray(upper) - np.asarray(lower)) ** 2)))


def l1_sensitivity(lower: np.ndarray, upper: np.ndarray) -> float:
    """Largest ‖x − x'‖₁ over the box [lower, upper]."""
    return float(np.sum(np.asarray(upper) - np.asarray(lower)))
