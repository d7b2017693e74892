"""Numeric mechanisms (Laplace, Gaussian) and their calibration.

* the noise x̃ − x of ``release`` follows the density implied by ``log_likelihood`` (KS test, fixed
  seed, p > ALPHA = 1e-3), and exp(log_likelihood) is a normalised density (quadrature, 1e-9);
* the calibration formulas: Laplace b = Δ₁/ε; classic σ = √(2 ln(1.25/δ))Δ₂/ε; Farokhi's Δ = Σ range;
  analytic σ solves Balle & Wang's δ(ε, σ) = δ, checked with an independent implementation of δ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats

from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    laplace_scale,
)

ALPHA = 1e-3


def bw_delta(eps: float, sigma: float, sens: float) -> float:
    """Balle & Wang 2018 Thm 8, written independently of fedrr: plain norm.cdf, no log-space."""
    a = sens / (2 * sigma)
    b = eps * sigma / sens
    return float(stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b))


def bw_sigma(eps: float, delta: float, sens: float) -> float:
    """Independent solve of bw_delta(ε, σ) = δ for σ (δ is decreasing in σ)."""
    return optimize.brentq(lambda s: bw_delta(eps, s, sens) - delta, 1e-3 * sens, 1e4 * sens, xtol=1e-15, rtol=1e-15)


# --- 1. release vs log_likelihood ----------------------------------------------------------------

MECHS = [
    ("laplace_scalar", lambda: LaplaceMechanism(1.0, 0.0, 1.0)),
    ("laplace_block3", lambda: LaplaceMechanism(2.0, [0.0, -1.0, 2.0], [1.0, 1.0, 5.0])),
    ("gauss_scalar", lambda: GaussianMechanism(1.0, 1e-5, -2.0, 3.0)),
    ("gauss_block3", lambda: GaussianMechanism(0.5, 1e-6, [0.0, 0.0, 0.0], [1.0, 2.0, 2.0])),
    ("gauss_farokhi", lambda: GaussianMechanism(4.0, 1e-5, [0.0] * 2, [1.0] * 2, calibration="farokhi")),
]


def noise_dist(mech):
    if isinstance(mech, LaplaceMechanism):
        return stats.laplace(scale=mech.scale)
    return stats.norm(scale=mech.sigma)


@pytest.mark.parametrize("name, make", MECHS, ids=[m[0] for m in MECHS])
def test_release_noise_matches_log_likelihood_ks(name, make):
    mech = make()
    rng = np.random.default_rng(2024)
    n = 5000
    lo, hi = mech.lower, mech.upper
    # clean values spread over the box, including both bounds exactly
    x = lo + (hi - lo) * rng.random((n, mech.width))
    x[0], x[1] = lo, hi
    if mech.width == 1:
        x = x[:, 0]
    xt = mech.release(x, rng)
    assert xt.shape == x.shape and xt.dtype == np.float64
    noise = (xt - x).reshape(n, -1)
    dist = noise_dist(mech)
    for c in range(noise.shape[1]):  # each coordinate of a block gets its own iid noise
        p = stats.kstest(noise[:, c], dist.cdf).pvalue
        assert p > ALPHA, f"{name} coord {c}: KS p={p:.2e}"
    # coordinates independent: sample correlation within 4 standard errors (1/√n) of 0
    if noise.shape[1] > 1:
        corr = np.corrcoef(noise.T)[np.triu_indices(noise.shape[1], 1)]
        assert np.all(np.abs(corr) < 4 / math.sqrt(n))


@pytest.mark.parametrize("name, make", MECHS, ids=[m[0] for m in MECHS])
def test_log_likelihood_is_the_scipy_density_and_integrates_to_one(name, make):
    mech = make()
    dist = noise_dist(mech)
    lo, hi = mech.lower, mech.upper
    x = (lo + hi) / 2 if mech.width > 1 else float(lo[0] + 0.3 * (hi[0] - lo[0]))
    t = np.linspace(-6, 6, 41)[:, None] * mech.noise_std
    xt = x + t if mech.width > 1 else x + t[:, 0]
    ll = mech.log_likelihood(xt, x)
    np.testing.assert_allclose(ll, dist.logpdf(np.asarray(xt) - x), rtol=1e-12, atol=1e-12)
    # ∫ exp(log p(x̃ | x)) dx̃ = 1 for one coordinate (a breakpoint at the Laplace kink x̃ = x)
    x0 = float(np.atleast_1d(x)[0])
    if mech.width == 1:

        def f(v):
            return math.exp(float(mech.log_likelihood(v, x0)))
    else:
        xb = np.atleast_1d(x).astype(float)

        def f(v):
            return math.exp(float(mech.log_likelihood(np.r_[v, xb[1:]], xb)[0]))

    w = 60 * mech.noise_std
    total = sum(integrate.quad(f, a, b, epsabs=0, epsrel=1e-12, limit=200)[0] for a, b in [(x0 - w, x0), (x0, x0 + w)])
    assert total == pytest.approx(1.0, abs=1e-9)


def test_noise_std_matches_family():
    lap = LaplaceMechanism(0.5, 0, 2)
    assert lap.noise_std == pytest.approx(math.sqrt(2) * lap.scale, rel=1e-15)
    assert stats.laplace(scale=lap.scale).std() == pytest.approx(lap.noise_std, rel=1e-12)
    g = GaussianMechanism(1.0, 1e-5)
    assert g.noise_std == g.sigma == g.noise_scale


# --- 2. calibration --------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.1, 1.0, 8.0])
def test_laplace_scale_is_l1_sensitivity_over_epsilon(eps):
    lo, hi = [0.0, -1.0, 2.0], [1.0, 1.0, 5.0]
    m = LaplaceMechanism(eps, lo, hi)
    assert m.sensitivity == pytest.approx(1 + 2 + 3, rel=1e-15)  # Σ (upper − lower)
    assert m.scale == pytest.approx(6.0 / eps, rel=1e-15)
    assert m.epsilon == eps and m.delta == 0.0 and m.width == 3
    assert laplace_scale(eps, 6.0) == pytest.approx(6.0 / eps, rel=1e-15)
    # scalar: Δ₁ = range; explicit sensitivity overrides
    assert LaplaceMechanism(eps, -2.0, 3.0).scale == pytest.approx(5.0 / eps, rel=1e-15)
    assert LaplaceMechanism(eps, 0, 1, sensitivity=2.5).scale == pytest.approx(
        2.5 / eps, rel=1e-15
    )  # a larger Δ is allowed
    with pytest.raises(ValidationError, match="L1 diameter"):  # a smaller one would understate ε (fedrr.audit found it)
        LaplaceMechanism(eps, 0, 1, sensitivity=0.25)
    with pytest.raises(ValidationError, match="L2 diameter"):
        GaussianMechanism(eps, 1e-5, [0, 0], [1, 1], sensitivity=1.0)


def test_laplace_is_exactly_epsilon_ldp_on_its_box():
    # Worst ratio p(x̃|x)/p(x̃|x') over x, x' in the box is e^{Δ₁/b} = e^ε (attained for x̃ outside the box).
    m = LaplaceMechanism(0.7, [0.0, 0.0], [1.0, 2.0])
    x, xp = np.array([0.0, 0.0]), np.array([1.0, 2.0])
    xt = np.array([-3.0, -3.0])
    ratio = m.log_likelihood(xt, x).sum() - m.log_likelihood(xt, xp).sum()
    assert ratio == pytest.approx(0.7, rel=1e-12)


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-5), (0.5, 1e-6), (0.9, 1e-3)])
def test_classic_gaussian_sigma_formula(eps, delta):
    lo, hi = [0.0, 0.0, 0.0], [1.0, 2.0, 2.0]
    m = GaussianMechanism(eps, delta, lo, hi, calibration="classic")
    d2 = math.sqrt(1 + 4 + 4)  # L2 sensitivity of the box = 3
    assert m.sensitivity == pytest.approx(d2, rel=1e-15)
    assert m.sigma == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) * d2 / eps, rel=1e-14)
    assert classic_gaussian_sigma(eps, delta, d2) == pytest.approx(m.sigma, rel=1e-15)
    # the classic bound is valid (conservative) for ε < 1: its exact δ at ε is ≤ δ
    assert bw_delta(eps, m.sigma, d2) <= delta


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0, 8.0])
@pytest.mark.parametrize("p", [1, 4])
def test_farokhi_calibration_uses_l1_range_and_epsilon_exact_is_consistent(eps, p):
    delta = 1e-5
    m = GaussianMechanism(eps, delta, [0.0] * p, [2.0] * p, calibration="farokhi")
    assert m.sensitivity == pytest.approx(2.0 * p, rel=1e-15)  # Δ = (x̄ − x̲)·p_x
    assert m.sigma == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) * 2.0 * p / eps, rel=1e-14)
    assert m.epsilon == eps  # nominal
    # epsilon_exact: the analytic ε of this σ for the true L2 sensitivity 2·√p
    d2 = 2.0 * math.sqrt(p)
    ee = m.epsilon_exact
    assert bw_delta(ee, m.sigma, d2) == pytest.approx(delta, rel=1e-9)
    assert ee == pytest.approx(analytic_gaussian_epsilon(m.sigma, delta, d2), rel=1e-12)
    if eps < 1:  # classic bound valid and Δ₁ ≥ Δ₂: the nominal ε is conservative
        assert ee < eps


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 2.5, 10.0, 40.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-5, 1e-2])
@pytest.mark.parametrize("sens", [0.5, 1.0, 3.0])
def test_analytic_sigma_solves_balle_wang_delta(eps, delta, sens):
    sigma = analytic_gaussian_sigma(eps, delta, sens)
    assert bw_delta(eps, sigma, sens) == pytest.approx(delta, rel=1e-9)
    # it is the *smallest* such σ: δ(ε, σ) is decreasing, so a slightly smaller σ violates δ
    assert bw_delta(eps, sigma * (1 - 1e-6), sens) > delta
    assert analytic_gaussian_delta(eps, sigma, sens) == pytest.approx(delta, rel=1e-9)


def test_analytic_delta_matches_independent_formula():
    rng = np.random.default_rng(0)
    for _ in range(200):
        eps, sigma, sens = rng.uniform(0.01, 5), rng.uniform(0.1, 10), rng.uniform(0.1, 3)
        ref = bw_delta(eps, sigma, sens)
        if ref > 1e-12:  # plain cdfs cancel catastrophically below that; fedrr works in log space
            assert analytic_gaussian_delta(eps, sigma, sens) == pytest.approx(ref, rel=1e-7)


def test_analytic_sigma_known_value_eps1_delta1e5():
    # ε = 1, δ = 1e-5, Δ = 1: independent solve gives σ ≈ 3.7306 (vs classic 4.8448, invalid at ε = 1).
    ref = bw_sigma(1.0, 1e-5, 1.0)
    assert round(ref, 2) == 3.73
    m = GaussianMechanism(1.0, 1e-5, 0.0, 1.0)
    assert m.calibration == "analytic"
    assert m.sigma == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("eps", [0.05, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("delta", [1e-8, 1e-5, 1e-3])
def test_analytic_sigma_smaller_than_classic_below_one(eps, delta):
    a = GaussianMechanism(eps, delta, calibration="analytic").sigma
    c = GaussianMechanism(eps, delta, calibration="classic").sigma
    assert a < c


@pytest.mark.parametrize("sigma", [0.2, 1.0, 3.7306, 20.0, 300.0])
@pytest.mark.parametrize("delta", [1e-7, 1e-5])
def test_sigma_constructor_round_trips_epsilon(sigma, delta):
    m = GaussianMechanism(sigma=sigma, delta=delta, lower=0.0, upper=2.0)
    assert m.sigma == sigma
    assert bw_delta(m.epsilon, sigma, 2.0) == pytest.approx(delta, rel=1e-9)
    back = GaussianMechanism(m.epsilon, delta, 0.0, 2.0)
    assert back.sigma == pytest.approx(sigma, rel=1e-9)
    assert m.epsilon_exact == pytest.approx(m.epsilon, rel=1e-12)


def test_analytic_epsilon_exact_equals_nominal_for_analytic_calibration():
    m = GaussianMechanism(1.3, 1e-6, [0.0, 0.0], [1.0, 1.0])
    assert m.sensitivity == pytest.approx(math.sqrt(2), rel=1e-15)
    assert m.epsilon_exact == pytest.approx(1.3, rel=1e-9)


def test_gaussian_epsilon_exact_is_relative_to_the_box_not_an_explicit_sensitivity():
    # Documented behaviour: epsilon_exact is the exact ε of this σ for the box's L2 range. With an
    # explicit sensitivity=2 on [0, 1] the noise is calibrated for Δ=2 at ε=1 (σ solves δ(1, σ; 2) = δ),
    # while on the box (Δ₂ = 1) the same noise is ≈0.47-DP.
    m = GaussianMechanism(1.0, 1e-5, 0.0, 1.0, sensitivity=2.0)
    assert bw_delta(1.0, m.sigma, 2.0) == pytest.approx(1e-5, rel=1e-9)
    assert bw_delta(m.epsilon_exact, m.sigma, 1.0) == pytest.approx(1e-5, rel=1e-9)
    assert m.epsilon_exact < m.epsilon
