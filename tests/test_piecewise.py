"""Piecewise Mechanism (Wang et al., ICDE 2019, Algorithm 2) and Duchi et al.'s mechanism.

Checked against brute force: the paper's continuous PM density by quadrature (normalisation,
E[t̃] = t, the variance formula); the snapped PM's pmf by enumerating every output cell on coarse
grids (normalisation, unbiasedness, ε as the largest log-ratio, equality with Algorithm 2's cell
masses, the worst-case sd); releases by chi-square (fixed seeds, level ALPHA); unbiasedness at the
default resolution by Monte Carlo within Z_TOL standard errors; posteriors against quadrature
(bin masses, means, densities) and their samplers by KS tests against the quadrature CDF.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import integrate, stats

from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    DuchiMechanism,
    GaussianPrior,
    HistogramPrior,
    PiecewiseMechanism,
    mechanism_from_spec,
)

ALPHA = 1e-3
Z_TOL = 4.0


# ----------------------------------------------------------------------------- the paper's formulas
def paper_pm(eps: float):
    """Algorithm 2 as printed: C, p, l(t), r(t) and the density of t̃ given t."""
    h = math.exp(eps / 2)
    C = (h + 1) / (h - 1)
    p = (math.exp(eps) - h) / (2 * h + 2)

    def left(t):
        return (C + 1) * t / 2 - (C - 1) / 2

    def density(v, t):
        return p if left(t) <= v <= left(t) + C - 1 else p / math.exp(eps)

    return C, p, left, density


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("t", [-1.0, -0.4, 0.0, 0.77, 1.0])
def test_paper_pm_density_normalised_unbiased_and_variance(eps, t):
    """Quadrature of the printed density: ∫ = 1, ∫ v = t, ∫ v² − t² = t²/(e^{ε/2} − 1) +
    (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²) (ICDE'19 Lemma 1), sup/inf of the density = e^ε."""
    C, p, left, density = paper_pm(eps)
    pts = [left(t), left(t) + C - 1]
    mass = integrate.quad(lambda v: density(v, t), -C, C, points=pts, epsabs=1e-13)[0]
    m1 = integrate.quad(lambda v: v * density(v, t), -C, C, points=pts, epsabs=1e-13)[0]
    m2 = integrate.quad(lambda v: v * v * density(v, t), -C, C, points=pts, epsabs=1e-13)[0]
    h = math.exp(eps / 2)
    assert mass == pytest.approx(1.0, abs=1e-10)
    assert m1 == pytest.approx(t, abs=1e-10)
    assert m2 - t * t == pytest.approx(t * t / (h - 1) + (h + 3) / (3 * (h - 1) ** 2), rel=1e-9)
    assert -C <= left(t) and left(t) + C - 1 <= C
    assert p / (p / math.exp(eps)) == pytest.approx(math.exp(eps))


# ----------------------------------------------------------------------------- snapped PM, enumerated
COARSE = [(2.0, 3), (1.0, 5), (0.5, 9), (4.0, 2)]


def pm_pmf(m: PiecewiseMechanism, x) -> np.ndarray:
    """(len(x), N): P(cell j | x) from log_likelihood (a density: times the cell width in x)."""
    cells = m.release_value(np.arange(m.n_cells))
    dens = np.exp(m.log_likelihood(cells[None, :], np.asarray(x, float)[:, None]))
    return dens * m.cell_width * m.half


def test_coarse_grid_parameters():
    m = PiecewiseMechanism(2.0, resolution=3)
    assert (m.resolution, m.n_outer, m.n_cells) == (3, 8, 11) and m.C == pytest.approx(11 / 5)
    assert m.epsilon == pytest.approx(2 * math.log(8 / 3), rel=1e-14) and m.epsilon <= 2.0


@pytest.mark.parametrize("eps, M", COARSE)
def test_snapped_pm_pmf_enumerated(eps, M):
    """On every cell: the pmf sums to 1; Σ P·x̃ = x (unbiased, 1e-12) on and off the grid; ``epsilon``
    = max log-ratio over cells and inputs; Var at grid inputs = Wang's formula at ε' minus w²/12;
    ``noise_std`` = the largest sd over inputs."""
    m = PiecewiseMechanism(eps, -2.0, 3.0, resolution=M)
    L = m.n_outer
    grid_x = m.mid + m.half * (2 * np.arange(L + 1) / L - 1)
    xs = np.concatenate([grid_x, np.random.default_rng(0).uniform(-2, 3, 50)])
    P = pm_pmf(m, xs)
    vals = m.release_value(np.arange(m.n_cells))
    assert np.allclose(P.sum(1), 1.0, atol=1e-12)
    assert np.allclose(P @ vals, xs, atol=1e-12 * m.C * m.half)
    lp = np.log(P)
    assert float(np.max(lp.max(0) - lp.min(0))) == pytest.approx(m.epsilon, abs=1e-12)
    t = (grid_x - m.mid) / m.half
    var_t = (P[: L + 1] @ vals**2 - grid_x**2) / m.half**2
    r = m.rho
    assert np.allclose(var_t, t**2 / (r - 1) + (r + 3) / (3 * (r - 1) ** 2) - m.cell_width**2 / 12, atol=1e-10)
    sd = np.sqrt(P @ vals**2 - xs**2)
    assert m.noise_std == pytest.approx(sd.max(), rel=1e-9)


@pytest.mark.parametrize("eps, M", COARSE)
def test_snapped_pm_is_algorithm_2_at_eps_prime_rounded_to_cells(eps, M):
    """For real t (off the grid too), P(cell j | t) equals the mass that the printed Algorithm 2
    density at ε' = 2 ln(L/M) puts on cell j = [−C + jw, −C + (j + 1)w] (exact overlap lengths)."""
    m = PiecewiseMechanism(eps, resolution=M)
    eps_p = 2 * math.log(m.n_outer / m.resolution)
    C, p, left, _ = paper_pm(eps_p)
    assert C == pytest.approx(m.C, rel=1e-12)
    w = m.cell_width
    lo = -C + w * np.arange(m.n_cells)
    for t in np.concatenate([[-1.0, 1.0], np.random.default_rng(1).uniform(-1, 1, 20)]):
        a, b = left(t), left(t) + C - 1
        overlap = np.clip(np.minimum(lo + w, b) - np.maximum(lo, a), 0, None)
        want = p * overlap + p / math.exp(eps_p) * (w - overlap)
        assert np.allclose(pm_pmf(m, [t])[0], want, atol=1e-12)


@pytest.mark.parametrize("eps, M", COARSE[:2])
def test_snapped_pm_release_chisquare(eps, M):
    """Releases at a grid input and two off-grid inputs match the enumerated pmf (chi-square)."""
    m = PiecewiseMechanism(eps, 0.0, 1.0, resolution=M)
    rng = np.random.default_rng(21)
    n = 30_000
    for x in (0.0, 0.3141, 0.9):
        out = m.release(np.full(n, x), rng)
        counts = np.bincount(m.cell(out), minlength=m.n_cells)
        expected = n * pm_pmf(m, [x])[0]
        assert expected.min() >= 5
        assert stats.chisquare(counts, expected).pvalue > ALPHA


@pytest.mark.parametrize("eps", [0.2, 1.0, 5.0])
def test_default_pm_unbiased_monte_carlo_and_exact_epsilon(eps):
    """Default resolution: ε' ≤ ε within 1e-6 relative; the mean release at several x is within Z_TOL
    standard errors of x (sd from Wang's variance at t)."""
    m = PiecewiseMechanism(eps, 10.0, 20.0)
    assert eps * (1 - 1e-6) <= m.epsilon <= eps * (1 + 1e-14)
    rng = np.random.default_rng(3)
    n = 100_000
    for x in (10.0, 13.7, 20.0):
        t = (x - m.mid) / m.half
        sd = m.half * math.sqrt(t * t / (m.rho - 1) + (m.rho + 3) / (3 * (m.rho - 1) ** 2))
        out = m.release(np.full(n, x), rng)
        assert abs(out.mean() - x) / (sd / math.sqrt(n)) < Z_TOL
        assert np.all(np.abs(out - m.mid) <= m.C * m.half)


# ----------------------------------------------------------------------------- Duchi
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_duchi_pmf_unbiased_epsilon_and_release(eps):
    """P(+) + P(−) = 1, B(P(+) − P(−)) = t (1e-12), ε = max log-ratio over t ∈ [−1, 1] (at ±1), B =
    (e^ε + 1)/(e^ε − 1) up to the grid rounding of γ, binomial test of releases, noise_std at t = 0."""
    d = DuchiMechanism(eps, 0.0, 4.0)
    x = np.linspace(0, 4, 41)
    lp, lm = d.log_likelihood(d.values[1], x), d.log_likelihood(d.values[0], x)
    assert np.allclose(np.exp(lp) + np.exp(lm), 1.0, atol=1e-14)
    assert np.allclose(d.values[1] * np.exp(lp) + d.values[0] * np.exp(lm), x, atol=1e-12)
    ratio = max(np.max(lp) - np.min(lp), np.max(lm) - np.min(lm))
    assert ratio == pytest.approx(d.epsilon, abs=1e-12) and d.epsilon <= eps * (1 + 1e-14)
    assert d.B == pytest.approx((math.exp(eps) + 1) / (math.exp(eps) - 1), rel=1e-12)
    rng = np.random.default_rng(4)
    for xv in (0.0, 1.3, 4.0):
        out = d.release(np.full(50_000, xv), rng)
        k = int(np.sum(out == d.values[1]))
        assert k + int(np.sum(out == d.values[0])) == 50_000
        assert stats.binomtest(k, 50_000, float(np.exp(d.log_likelihood(d.values[1], xv)))).pvalue > ALPHA
    sd = np.sqrt(d.values[1] ** 2 * np.exp(lp) + d.values[0] ** 2 * np.exp(lm) - x**2)
    assert d.noise_std == pytest.approx(sd.max(), rel=1e-12)


# ----------------------------------------------------------------------------- posteriors
def quad_posterior(mech, xt: float, prior_logpdf, lo, hi, breaks):
    """Normalised posterior by quadrature: (Z, density function)."""
    lik = lambda x: math.exp(float(mech.log_likelihood(xt, x)) + prior_logpdf(x))  # noqa: E731
    pts = sorted({float(b) for b in breaks if lo < b < hi})
    Z = integrate.quad(lik, lo, hi, points=pts or None, limit=500, epsabs=1e-14, epsrel=1e-11)[0]
    return Z, lambda x: lik(x) / Z, pts


def quad_mean(dens, pts) -> float:
    return integrate.quad(lambda x: x * dens(x), -1.0, 2.0, points=pts or None, limit=500)[0]


def ks_pvalue(post, sample, pts, n_grid: int) -> float:
    """KS p-value of ``sample`` against the CDF of exp(post.logpdf) by the midpoint rule on a grid that
    contains every knot and edge (exact for a piecewise-linear density, whatever its jumps)."""
    grid = np.unique(np.concatenate([np.linspace(-1, 2, n_grid), np.clip(pts, -1, 2)]))
    f = np.exp(post.logpdf((grid[1:] + grid[:-1]) / 2))
    cdf = np.concatenate([[0.0], np.cumsum(np.diff(grid) * f)])
    assert cdf[-1] == pytest.approx(1.0, abs=1e-6)
    return stats.kstest(sample, lambda v: np.interp(v, grid, cdf / cdf[-1])).pvalue


def bin_masses(dens, pts, edges) -> list[float]:
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        lo, hi = max(a, -1.0), min(b, 2.0)
        inner = [p for p in pts if lo < p < hi] or None
        out.append(integrate.quad(dens, lo, hi, points=inner, limit=500)[0] if hi > lo else 0.0)
    return out


def hist_logpdf(edges, probs):
    def f(x):
        b = np.searchsorted(edges, x, side="right") - 1
        if b < 0 or b >= len(probs) or probs[b] == 0:
            return -np.inf
        return math.log(probs[b] / (edges[b + 1] - edges[b]))

    return f


def mechs_for_posteriors():
    return [
        PiecewiseMechanism(2.0, -1.0, 2.0, resolution=3),  # coarse: the ramps are wide
        PiecewiseMechanism(1.0, -1.0, 2.0),
        DuchiMechanism(1.5, -1.0, 2.0),
    ]


def likelihood_breaks(mech, xt):
    knots, _ = mech._likelihood_knots(np.asarray(xt, float))
    return knots.ravel().tolist()


@pytest.mark.parametrize("mi", [0, 1, 2])
def test_histogram_posterior_matches_quadrature(mi):
    """Prior bins that stick out of the domain and leave part of it uncovered, one empty bin: bin
    masses, the mean and the density equal quadrature (1e-8); samples pass a KS test against the
    exact CDF (trapezoid rule on every knot and edge, exact for a piecewise-linear density)."""
    mech = mechs_for_posteriors()[mi]
    edges = np.array([-1.5, -0.5, 0.1, 0.2, 1.0, 1.7])
    probs = np.array([0.3, 0.2, 0.0, 0.35, 0.15])
    prior = HistogramPrior(edges, probs)
    rng = np.random.default_rng(8)
    for xt in mech.release(np.array([-1.0, 0.15, 1.9]), rng):
        post = mech.posterior(xt, prior)
        Z, dens, pts = quad_posterior(
            mech, xt, hist_logpdf(edges, probs), -1.0, 2.0, list(edges) + likelihood_breaks(mech, xt)
        )
        assert Z > 0
        assert np.allclose(post.bin_proba(), bin_masses(dens, pts, edges), atol=1e-8)
        assert float(post.mean()) == pytest.approx(quad_mean(dens, pts), abs=1e-8)
        for x in (-0.9, 0.15, 0.5, 1.5, 1.99, 2.5):
            want = dens(x) if -1 <= x <= 2 else 0.0
            got = float(np.exp(post.logpdf(x)))
            assert got == pytest.approx(want, rel=1e-8, abs=1e-12)
        s = post.sample(rng, 4000)
        assert s.shape == (4000,) and np.all((s >= -1) & (s <= 2))
        assert ks_pvalue(post, s, pts, 3001) > ALPHA


@pytest.mark.parametrize("mi", [0, 1, 2])
def test_gaussian_posterior_matches_quadrature(mi):
    """Gaussian prior (mean inside and far outside the domain): the density integrates to 1 and equals
    prior·likelihood/Z from quadrature (1e-8); the mean equals quadrature; samples pass a KS test
    against the quadrature CDF."""
    mech = mechs_for_posteriors()[mi]
    rng = np.random.default_rng(9)
    for mu, var in ((0.5, 0.8), (-3.0, 0.5)):
        prior = GaussianPrior(mu, var)
        plog = lambda x, mu=mu, var=var: -0.5 * (x - mu) ** 2 / var - 0.5 * math.log(2 * math.pi * var)  # noqa: E731
        for xt in mech.release(np.array([-1.0, 1.2]), rng):
            post = mech.posterior(xt, prior)
            Z, dens, pts = quad_posterior(mech, xt, plog, -1.0, 2.0, likelihood_breaks(mech, xt))
            assert float(post.mean()) == pytest.approx(quad_mean(dens, pts), abs=1e-8)
            for x in (-1.0, -0.3, 0.4, 1.9):
                assert float(np.exp(post.logpdf(x))) == pytest.approx(dens(x), rel=1e-8)
            assert ks_pvalue(post, post.sample(rng, 3000), pts, 20001) > ALPHA


def test_posterior_shapes_per_feature_priors_and_errors():
    """Vectorised over (n, d) releases with per-feature priors; sample(size) prepends the size; a
    prior with no mass on the domain or of the wrong type is rejected."""
    m = PiecewiseMechanism(1.0, 0.0, 1.0)
    rng = np.random.default_rng(2)
    xt = m.release(rng.uniform(0, 1, (5, 3)), rng)
    post = m.posterior(xt, GaussianPrior(np.array([0.2, 0.5, 0.8]), np.array([0.1, 0.2, 0.3])))
    assert post.mean().shape == (5, 3) and post.sample(rng).shape == (5, 3) and post.sample(rng, 4).shape == (4, 5, 3)
    assert post.logpdf(0.5).shape == (5, 3)
    hp = HistogramPrior.uniform(np.zeros(3), np.ones(3), 4)
    ph = m.posterior(xt, hp)
    assert ph.bin_proba().shape == (5, 3, 4) and np.allclose(ph.bin_proba().sum(-1), 1.0)
    one = m.posterior(xt[0, 1], HistogramPrior.uniform(0.0, 1.0, 4))
    assert np.allclose(one.bin_proba(), ph.bin_proba()[0, 1])
    with pytest.raises(ValidationError) as e:
        m.posterior(xt, HistogramPrior(np.array([2.0, 3.0]), np.array([1.0])))
    assert e.value.field == "prior"
    with pytest.raises(ValidationError) as e:
        m.posterior(xt, "flat")
    assert e.value.field == "prior"


# ----------------------------------------------------------------------------- validation and specs
@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: PiecewiseMechanism(0.0), "epsilon"),
        (lambda: PiecewiseMechanism(math.inf), "epsilon"),
        (lambda: PiecewiseMechanism(1.0, 1.0, 1.0), "upper"),
        (lambda: PiecewiseMechanism(1.0, [0.0, 1.0], 2.0), "lower"),
        (lambda: PiecewiseMechanism(1.0, -1e308, 1e308), "upper"),
        (lambda: PiecewiseMechanism(1.0, resolution=1), "resolution"),  # L = ⌊1.65⌋ = 1: no outer cells
        (lambda: PiecewiseMechanism(1.0, resolution=0), "resolution"),
        (lambda: PiecewiseMechanism(1.0, resolution=2**45), "resolution"),  # cells below 2^12 ulps
        (lambda: PiecewiseMechanism(1e-9), "epsilon"),
        (lambda: DuchiMechanism(-1.0), "epsilon"),
        (lambda: DuchiMechanism(1.0, 2.0, 1.0), "upper"),
        (lambda: DuchiMechanism(1e-12), "epsilon"),
        (lambda: DuchiMechanism(1.0, "0", 1.0), "lower"),
    ],
)
def test_constructor_validation(call, field):
    with pytest.raises(ValidationError) as e:
        call()
    assert e.value.field == field


def test_release_and_input_validation():
    """Releases off the grid, outside [mid − C·half, mid + C·half], NaN, or (Duchi) not one of the two
    values are rejected; inputs outside [lower, upper] too."""
    m = PiecewiseMechanism(1.0, 0.0, 1.0, resolution=4)
    d = DuchiMechanism(1.0, 0.0, 1.0)
    ok = m.release_value(np.arange(m.n_cells))
    assert np.array_equal(m.validate_release(ok), ok)
    lo, hi = m.mid - m.C * m.half, m.mid + m.C * m.half
    for bad in ([ok[0] + m.cell_width * m.half / 3], [lo - 1.0], [hi + 1e-9], [math.nan], [1e308]):
        with pytest.raises(ValidationError) as e:
            m.validate_release(bad)
        assert e.value.field == "x_tilde"
    for bad in ([0.5], [d.values[0] + 1e-6], [math.inf]):
        with pytest.raises(ValidationError) as e:
            d.log_likelihood(bad, 0.5)
        assert e.value.field == "x_tilde"
    for mech in (m, d):
        with pytest.raises(ValidationError) as e:
            mech.release([1.5], np.random.default_rng(0))
        assert e.value.field == "x"
        with pytest.raises(ValidationError) as e:
            mech.release([0.5], 0)
        assert e.value.field == "rng"


def test_specs_round_trip_and_generic_attributes():
    """Specs rebuild equal mechanisms (JSON) that release identically; lower/upper are (1,) arrays,
    width 1; log_likelihood broadcasts."""
    for mech in (PiecewiseMechanism(1.3, 2.0, 5.0), PiecewiseMechanism(2.0, resolution=3), DuchiMechanism(0.7, -3, 3)):
        again = mechanism_from_spec(json.loads(json.dumps(mech.to_spec())))
        assert again == mech and again.epsilon == mech.epsilon
        assert mech.lower.shape == (1,) and mech.upper.shape == (1,) and mech.width == 1
        x = np.linspace(mech.lower[0], mech.upper[0], 7)
        out = mech.release(x, np.random.default_rng(5))
        assert np.array_equal(out, again.release(x, np.random.default_rng(5)))
        assert mech.log_likelihood(out[:, None], x[None, :]).shape == (7, 7)
    assert PiecewiseMechanism(1.0) != PiecewiseMechanism(1.0, resolution=5) != DuchiMechanism(1.0)
