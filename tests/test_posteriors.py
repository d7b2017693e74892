"""Exact posteriors p(x | x̃) against brute force.

Discrete: enumeration p(x | x̃) ∝ exp(log_likelihood(x̃, x))·π(x), to 1e-9 relative; samples by
chi-square (fixed seed, p > ALPHA = 1e-3, cells with expected count < 5 pooled).
Continuous: the unnormalised density prior(x)·noise(x̃ − x) is written here with scipy.stats only,
normalised by adaptive quadrature (scipy.integrate.quad, breakpoints at the kinks, computed with a
log-space shift so nothing underflows) and compared to the posterior's logpdf / mean / bin_proba to
1e-9; samples are KS-tested (p > ALPHA) against the CDF obtained by Gauss-Legendre quadrature of
that same exact density.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import logsumexp

from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    CategoricalPrior,
    GaussianMechanism,
    GaussianPrior,
    HistogramPrior,
    LaplaceMechanism,
    RandomizedResponse,
    TransitionMatrix,
)

ALPHA = 1e-3
TOL = 1e-9


# ================================ discrete ========================================================


def enumerate_posterior(mech, x_tilde, prior):
    """p(x | x̃) for every x by enumeration over states, using only mech.log_likelihood.
    prior: (k,) shared or (d, k) per feature (aligned with the last axis of x̃)."""
    k = mech.k
    xt = np.asarray(x_tilde)
    ll = mech.log_likelihood(xt[..., None], np.arange(k))  # (..., k): log P[x̃, x]
    with np.errstate(divide="ignore"):
        lp = ll + np.log(prior)
    return np.exp(lp - logsumexp(lp, axis=-1, keepdims=True))


def chisquare_pooled(observed, expected):
    """Chi-square GOF p-value; cells with expected < 5 are pooled into one (dropped if still < 5)."""
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    small = expected < 5
    obs = list(observed[~small])
    exp = list(expected[~small])
    if small.any():
        if expected[small].sum() >= 5:
            obs.append(observed[small].sum())
            exp.append(expected[small].sum())
        else:  # pooled tail too small for the χ² approximation: it must then be (nearly) empty
            assert observed[small].sum() <= max(10, 10 * expected[small].sum())
    exp = np.array(exp) * (np.sum(obs) / np.sum(exp))  # re-normalise the kept cells
    return stats.chisquare(obs, exp).pvalue


def near_degenerate_prior(k=256, top=0.9, n_zero=20, seed=0):
    """Most mass on state 0, exact zeros on states 1..n_zero, the rest spread unevenly."""
    rng = np.random.default_rng(seed)
    p = np.zeros(k)
    p[0] = top
    rest = rng.dirichlet(np.full(k - 1 - n_zero, 2.0))
    p[1 + n_zero :] = (1 - top) * rest
    return p


@pytest.mark.parametrize("k, eps", [(2, 0.5), (5, 1.0), (17, 2.0), (256, 3.0)])
def test_rr_posterior_proba_matches_enumeration_flat_and_random_prior(k, eps):
    m = RandomizedResponse(k, epsilon=eps)
    rng = np.random.default_rng(k)
    xt = np.arange(k)
    for prior in [np.full(k, 1 / k), rng.dirichlet(np.ones(k))]:
        post = m.posterior(xt, prior)
        ref = enumerate_posterior(m, xt, prior)
        np.testing.assert_allclose(post.proba(), ref, rtol=TOL, atol=0)
        np.testing.assert_allclose(np.exp(post.log_proba()), ref, rtol=TOL, atol=0)
    # default prior is flat
    np.testing.assert_allclose(m.posterior(xt).proba(), enumerate_posterior(m, xt, np.full(k, 1 / k)), rtol=TOL)


@pytest.mark.parametrize("top", [0.9, 1 - 1e-6, 1 - 1e-12])
def test_rr_posterior_k256_near_degenerate_prior_matches_enumeration(top):
    k = 256
    m = RandomizedResponse(k, epsilon=3.0)
    prior = near_degenerate_prior(k, top=top)
    xt = np.arange(k)
    post = m.posterior(xt, CategoricalPrior(prior))
    ref = enumerate_posterior(m, xt, prior)
    got = post.proba()
    np.testing.assert_allclose(got, ref, rtol=TOL, atol=1e-300)
    assert np.all(got[:, 1:21] == 0.0), "states with zero prior mass must have zero posterior mass"
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.all(np.isneginf(post.log_proba()[:, 1:21]))


@pytest.mark.parametrize("x_tilde", [0, 5, 100, 255])
def test_rr_posterior_samples_k256_near_degenerate_chisquare(x_tilde):
    # x̃ = 5 has zero prior mass: the posterior can never be 5.
    k, n = 256, 200_000
    m = RandomizedResponse(k, epsilon=3.0)
    prior = near_degenerate_prior(k, top=0.9)
    post = m.posterior(np.array(x_tilde), prior)
    s = post.sample(np.random.default_rng(100 + x_tilde), size=n)
    assert s.shape == (n,) and s.min() >= 0 and s.max() < k
    probs = enumerate_posterior(m, np.array(x_tilde), prior)
    counts = np.bincount(s, minlength=k)
    assert counts[probs == 0].sum() == 0, "sampled a zero-probability state"
    p = chisquare_pooled(counts[probs > 0], n * probs[probs > 0])
    assert p > ALPHA, f"x̃={x_tilde}: χ² p={p:.2e}"


def test_rr_posterior_prior_all_on_one_state():
    m = RandomizedResponse(4, epsilon=1.0)
    prior = np.array([1.0, 0.0, 0.0, 0.0])
    post = m.posterior(np.array([0, 3, 2]), prior)
    np.testing.assert_array_equal(post.proba(), np.tile(prior, (3, 1)))
    assert np.all(post.sample(np.random.default_rng(0), size=1000) == 0)


def test_rr_posterior_per_feature_priors_proba_and_samples():
    k, d = 5, 3
    rng = np.random.default_rng(1)
    m = RandomizedResponse(k, epsilon=1.5)
    prior = rng.dirichlet(np.ones(k), size=d)  # (d, k)
    prior[1, 2] = 0.0
    prior[1] /= prior[1].sum()
    xt = rng.integers(0, k, size=(4, d))
    xt[0, 1] = 2  # a zero-prior state released for feature 1
    post = m.posterior(xt, CategoricalPrior(prior))
    ref = enumerate_posterior(m, xt, prior)
    assert post.proba().shape == (4, d, k)
    np.testing.assert_allclose(post.proba(), ref, rtol=TOL, atol=0)
    n = 20_000
    s = post.sample(np.random.default_rng(2), size=n)
    assert s.shape == (n, 4, d)
    for i in range(4):
        for j in range(d):
            counts = np.bincount(s[:, i, j], minlength=k)
            assert counts[ref[i, j] == 0].sum() == 0
            p = chisquare_pooled(counts[ref[i, j] > 0], n * ref[i, j][ref[i, j] > 0])
            assert p > ALPHA, f"record {i} feature {j}: χ² p={p:.2e}"
    # without size: one draw per value, same shape as x̃
    assert post.sample(np.random.default_rng(0)).shape == xt.shape


def test_rr_posterior_equals_dense_posterior_of_its_matrix():
    k = 7
    rr = RandomizedResponse(k, epsilon=0.8)
    tm = TransitionMatrix(rr.matrix)
    prior = np.random.default_rng(3).dirichlet(np.ones(k))
    xt = np.arange(k)
    np.testing.assert_allclose(rr.posterior(xt, prior).proba(), tm.posterior(xt, prior).proba(), rtol=1e-12)


ASYM_3x3 = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6]])


@pytest.mark.parametrize("mech", [TransitionMatrix.binary(0.1, 0.3), TransitionMatrix(ASYM_3x3)], ids=["binary", "3x3"])
def test_dense_posterior_matches_enumeration_and_samples(mech):
    k = mech.k
    rng = np.random.default_rng(4)
    xt = np.arange(k)
    for prior in [np.full(k, 1 / k), rng.dirichlet(np.ones(k)), np.r_[1e-12, np.full(k - 1, (1 - 1e-12) / (k - 1))]]:
        post = mech.posterior(xt, prior)
        ref = enumerate_posterior(mech, xt, prior)
        np.testing.assert_allclose(post.proba(), ref, rtol=TOL, atol=0)
    # per-feature priors with x̃ of shape (n, d)
    d = 2
    prior = rng.dirichlet(np.ones(k), size=d)
    xt2 = rng.integers(0, k, size=(3, d))
    post = mech.posterior(xt2, prior)
    ref = enumerate_posterior(mech, xt2, prior)
    np.testing.assert_allclose(post.proba(), ref, rtol=TOL, atol=0)
    n = 20_000
    s = post.sample(np.random.default_rng(5), size=n)
    assert s.shape == (n, 3, d)
    for i in range(3):
        for j in range(d):
            p = chisquare_pooled(np.bincount(s[:, i, j], minlength=k), n * ref[i, j])
            assert p > ALPHA


# ================================ continuous: helpers =============================================


def noise_logpdf(mech, t):
    if isinstance(mech, LaplaceMechanism):
        return stats.laplace.logpdf(t, scale=mech.scale)
    return stats.norm.logpdf(t, scale=mech.sigma)


class ExactPosterior:
    """prior density × noise density, normalised by quadrature; everything in shifted log space."""

    def __init__(self, log_prior, mech, x_tilde, a, b, breaks):
        self.mech, self.xt = mech, float(x_tilde)
        self.log_prior = log_prior
        self.breaks = np.unique(np.clip(np.r_[a, b, breaks], a, b))
        grid = np.linspace(a, b, 20001)
        self.shift = float(np.max(self.log_unnorm(np.r_[grid, self.breaks])))

        def f(x):
            return math.exp(self.log_unnorm(x) - self.shift)

        def g(x):
            return x * math.exp(self.log_unnorm(x) - self.shift)

        z = m1 = 0.0
        for lo, hi in zip(self.breaks[:-1], self.breaks[1:]):
            z += integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-13, limit=500)[0]
            m1 += integrate.quad(g, lo, hi, epsabs=1e-300, epsrel=1e-13, limit=500)[0]
        self.log_z = math.log(z)
        self.mean = m1 / z
        self._build_cdf()

    def log_unnorm(self, x):
        x = np.asarray(x, float)
        return self.log_prior(x) + noise_logpdf(self.mech, self.xt - x)

    def logpdf(self, x):
        return self.log_unnorm(x) - self.shift - self.log_z

    # CDF by Gauss-Legendre (order 20) on a fine grid whose nodes include every kink
    _gl_x, _gl_w = np.polynomial.legendre.leggauss(20)

    def _gl(self, lo, hi):
        lo, hi = np.asarray(lo, float), np.asarray(hi, float)
        half = (hi - lo)[..., None] / 2
        x = (lo + hi)[..., None] / 2 + half * self._gl_x
        with np.errstate(under="ignore"):
            return np.sum(half * self._gl_w * np.exp(self.logpdf(x)), axis=-1)

    def _build_cdf(self):
        pieces = [np.linspace(lo, hi, 401)[:-1] for lo, hi in zip(self.breaks[:-1], self.breaks[1:])]
        self.grid = np.r_[np.concatenate(pieces), self.breaks[-1]]
        self.cum = np.r_[0.0, np.cumsum(self._gl(self.grid[:-1], self.grid[1:]))]
        assert self.cum[-1] == pytest.approx(1.0, abs=1e-9), "GL and quad normalisers disagree"

    def cdf(self, x):
        x = np.clip(np.asarray(x, float), self.grid[0], self.grid[-1])
        i = np.clip(np.searchsorted(self.grid, x, side="right") - 1, 0, len(self.grid) - 2)
        return np.clip(self.cum[i] + self._gl(self.grid[i], x), 0.0, 1.0)


def gaussian_log_prior(mu, var):
    return lambda x: stats.norm.logpdf(x, mu, math.sqrt(var))


def histogram_log_prior(edges, probs):
    edges, probs = np.asarray(edges, float), np.asarray(probs, float)
    dens = probs / np.diff(edges)

    def f(x):
        x = np.asarray(x, float)
        i = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(probs) - 1)
        inside = (x >= edges[0]) & (x <= edges[-1])
        with np.errstate(divide="ignore"):
            return np.where(inside, np.log(dens[i]), -np.inf)

    return f


def exact_for_gaussian_prior(mech, x_tilde, mu, var):
    s = math.sqrt(var)
    scale = mech.noise_std
    a = min(mu, x_tilde) - 40 * s - 2 * scale
    b = max(mu, x_tilde) + 40 * s + 2 * scale
    extra = [x_tilde, mu]
    if isinstance(mech, LaplaceMechanism):
        extra += [mu + var / mech.scale, mu - var / mech.scale]
    return ExactPosterior(gaussian_log_prior(mu, var), mech, x_tilde, a, b, extra)


def exact_for_histogram(mech, x_tilde, edges, probs):
    return ExactPosterior(
        histogram_log_prior(edges, probs), mech, x_tilde, edges[0], edges[-1], list(edges) + [x_tilde]
    )


# ================================ continuous: Gaussian prior =======================================

GAUSS = GaussianMechanism(sigma=0.4, delta=1e-5)
LAPLACE = LaplaceMechanism(2.0, 0.0, 1.0)  # b = 0.5


@pytest.mark.parametrize("mech", [GAUSS, LAPLACE], ids=["gaussian_noise", "laplace_noise"])
@pytest.mark.parametrize("x_tilde", [0.3, -1.2, 2.5, 12.0, -40.0])
def test_gaussian_prior_posterior_logpdf_and_mean_match_quadrature(mech, x_tilde):
    mu, var = 0.3, 0.2**2
    post = mech.posterior(np.array([x_tilde]), GaussianPrior(mu, var))
    ex = exact_for_gaussian_prior(mech, x_tilde, mu, var)
    post_mean = float(np.asarray(post.mean()).ravel()[0])
    # points around the posterior mass (±4 posterior sd around its mean), and at x̃ itself
    sd = 0.2
    xs = np.r_[np.linspace(ex.mean - 4 * sd, ex.mean + 4 * sd, 9), x_tilde]
    got = np.array([float(np.asarray(post.logpdf(np.array([x]))).ravel()[0]) for x in xs])
    np.testing.assert_allclose(got, ex.logpdf(xs), rtol=0, atol=TOL)
    assert post_mean == pytest.approx(ex.mean, abs=TOL)


def test_gaussian_gaussian_closed_form_is_barber_68_69():
    sigma, mu, var, xt = 0.4, 0.3, 0.04, 1.1
    post = GaussianMechanism(sigma=sigma, delta=1e-5).posterior(np.array([xt]), GaussianPrior(mu, var))
    a = 1 / sigma**2 + 1 / var
    assert float(post.mean()[0]) == pytest.approx((xt / sigma**2 + mu / var) / a, rel=1e-14)
    assert float(post.var[0]) == pytest.approx(1 / a, rel=1e-14)


@pytest.mark.parametrize("mech", [GAUSS, LAPLACE], ids=["gaussian_noise", "laplace_noise"])
def test_gaussian_prior_per_feature_parameters(mech):
    mu = np.array([0.0, 0.5, -1.0])
    var = np.array([0.01, 0.25, 1.0])
    xt = np.array([[0.1, 0.9, -3.0], [2.0, 0.4, 0.0]])
    post = mech.posterior(xt, GaussianPrior(mu, var))
    assert np.shape(post.mean()) == xt.shape
    lp = post.logpdf(np.zeros_like(xt))
    for i in range(2):
        for j in range(3):
            ex = exact_for_gaussian_prior(mech, xt[i, j], mu[j], var[j])
            assert post.mean()[i, j] == pytest.approx(ex.mean, abs=TOL)
            assert lp[i, j] == pytest.approx(float(ex.logpdf(0.0)), abs=TOL)
    with pytest.raises(ValidationError) as ei:
        mech.posterior(np.zeros((2, 2)), GaussianPrior(mu, var))
    assert ei.value.field == "prior.mean"


@pytest.mark.parametrize("mech", [GAUSS, LAPLACE], ids=["gaussian_noise", "laplace_noise"])
@pytest.mark.parametrize("x_tilde", [0.3, 2.5, -40.0])
def test_gaussian_prior_posterior_samples_ks(mech, x_tilde):
    mu, var = 0.3, 0.04
    post = mech.posterior(np.array([x_tilde]), GaussianPrior(mu, var))
    ex = exact_for_gaussian_prior(mech, x_tilde, mu, var)
    s = post.sample(np.random.default_rng(7), size=3000)
    assert s.shape == (3000, 1) and np.all(np.isfinite(s))
    p = stats.kstest(s[:, 0], ex.cdf).pvalue
    assert p > ALPHA, f"KS p={p:.2e}"


# ================================ continuous: histogram prior ======================================

EDGES = np.array([0.0, 0.2, 0.5, 1.0])
PROBS = np.array([0.3, 0.5, 0.2])
H_GAUSS = GaussianMechanism(sigma=0.1, delta=1e-5)
H_LAPLACE = LaplaceMechanism(10.0, 0.0, 1.0)  # b = 0.1


def exact_bin_logmass(mech, x_tilde, edges, probs, normalise=True):
    """log ∫_bin prior density · noise(x̃ − x) dx per bin (normalised over bins unless told otherwise);
    each bin's integrand is shifted by its own maximum so nothing underflows."""
    out = []
    for lo, hi, p in zip(edges[:-1], edges[1:], probs):
        if p == 0:
            out.append(-np.inf)
            continue
        c = float(noise_logpdf(mech, x_tilde - np.clip(x_tilde, lo, hi)))  # max of the noise over the bin

        def f(x, x_tilde=x_tilde, c=c):
            return math.exp(float(noise_logpdf(mech, x_tilde - x)) - c)

        pts = [x_tilde] if lo < x_tilde < hi else None
        val = integrate.quad(f, lo, hi, points=pts, epsabs=0, epsrel=1e-13, limit=500)[0]
        out.append(math.log(p / (hi - lo)) + c + math.log(val))
    out = np.array(out)
    return out - logsumexp(out) if normalise else out


@pytest.mark.parametrize("mech", [H_GAUSS, H_LAPLACE], ids=["gaussian_noise", "laplace_noise"])
@pytest.mark.parametrize("x_tilde", [0.35, 0.2, -0.15, 1.4, 1.0 + 30 * 0.1, -30 * 0.1, 1.0 + 80 * 0.1])
def test_histogram_posterior_bin_proba_and_logpdf(mech, x_tilde):
    # x̃ = 1 + 30σ, −30σ, 1 + 80σ: the noise density at far bins is e^{-800} and below (underflows naively).
    post = mech.posterior(np.array([x_tilde]), HistogramPrior(EDGES, PROBS))
    ref_log = exact_bin_logmass(mech, x_tilde, EDGES, PROBS)
    got = post.bin_proba()[0]
    assert np.all(np.isfinite(got)) and got.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(got, np.exp(ref_log), rtol=TOL, atol=1e-300)
    # logpdf vs brute force: log prior density + log noise − log Σ_b ∫_b prior·noise
    xs = np.array([0.01, 0.1, 0.2, 0.35, 0.49, 0.5, 0.75, 0.999])
    unnorm_ref = histogram_log_prior(EDGES, PROBS)(xs) + noise_logpdf(mech, x_tilde - xs)
    log_norm = logsumexp(exact_bin_logmass(mech, x_tilde, EDGES, PROBS, normalise=False))
    got_lp = np.asarray(post.logpdf(xs[:, None]))[:, 0]
    assert np.all(np.isfinite(got_lp))
    np.testing.assert_allclose(got_lp, unnorm_ref - log_norm, rtol=1e-12, atol=TOL)
    assert np.isneginf(post.logpdf(np.array([[-0.01]])))[0, 0] and np.isneginf(post.logpdf(np.array([[1.01]])))[0, 0]


def test_histogram_posterior_laplace_far_right_is_distance_invariant():
    # Beyond the support, Laplace noise multiplies the prior by e^{x/b}·const: the posterior no longer
    # depends on how far x̃ is (checked from 30b to 5000b, where e^{-|x̃−x|/b} underflows to 0).
    prior = HistogramPrior(EDGES, PROBS)
    ref = H_LAPLACE.posterior(np.array([1.0 + 30 * 0.1]), prior).bin_proba()
    for xt in [1.0 + 200 * 0.1, 1.0 + 5000 * 0.1]:
        np.testing.assert_allclose(H_LAPLACE.posterior(np.array([xt]), prior).bin_proba(), ref, rtol=1e-12)


def test_histogram_posterior_gaussian_very_far_is_finite():
    post = H_GAUSS.posterior(np.array([1e4, -1e4]), HistogramPrior(EDGES, PROBS))
    bp = post.bin_proba()
    assert np.all(np.isfinite(bp))
    np.testing.assert_allclose(bp, [[0, 0, 1], [1, 0, 0]], atol=1e-300)
    s = post.sample(np.random.default_rng(0), size=200)
    assert np.all(np.isfinite(s))
    assert np.all((s[:, 0] >= 0.5) & (s[:, 0] <= 1.0)) and np.all((s[:, 1] >= 0.0) & (s[:, 1] <= 0.2))
    assert s[:, 0].min() > 1 - 1e-3 and s[:, 1].max() < 1e-3  # σ²/|x̃| ≈ 1e-6: glued to the near edge


@pytest.mark.parametrize("mech", [H_GAUSS, H_LAPLACE], ids=["gaussian_noise", "laplace_noise"])
@pytest.mark.parametrize("x_tilde", [0.35, -0.15, 1.0 + 30 * 0.1])
def test_histogram_posterior_samples_ks(mech, x_tilde):
    post = mech.posterior(np.array([x_tilde]), HistogramPrior(EDGES, PROBS))
    ex = exact_for_histogram(mech, x_tilde, EDGES, PROBS)
    s = post.sample(np.random.default_rng(11), size=3000)[:, 0]
    assert np.all((s >= EDGES[0]) & (s <= EDGES[-1]))
    p = stats.kstest(s, ex.cdf).pvalue
    assert p > ALPHA, f"KS p={p:.2e}"


def test_histogram_posterior_per_feature_edges_and_zero_bins():
    edges = np.array([[0.0, 0.5, 1.0, 2.0], [-1.0, 0.0, 1.0, 3.0]])
    probs = np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25]])
    mech = LaplaceMechanism(1.0, [0.0, -1.0], [2.0, 3.0])  # block of width 2: b = 6
    xt = np.array([[0.7, 2.5], [5.0, -4.0]])
    post = mech.posterior(xt, HistogramPrior(edges, probs))
    bp = post.bin_proba()
    assert bp.shape == (2, 2, 3)
    for i in range(2):
        for j in range(2):
            np.testing.assert_allclose(
                bp[i, j], np.exp(exact_bin_logmass(mech, xt[i, j], edges[j], probs[j])), rtol=TOL, atol=1e-300
            )
    assert np.all(bp[:, 0, 1] == 0.0)
    s = post.sample(np.random.default_rng(0), size=500)
    assert not np.any((s[..., 0] >= 0.5) & (s[..., 0] < 1.0)), "sampled inside a zero-mass bin"


@pytest.mark.parametrize("mech", [H_GAUSS, H_LAPLACE], ids=["gaussian_noise", "laplace_noise"])
@pytest.mark.parametrize("x_tilde", [0.5, 0.93, -0.2, 1.3])
def test_histogram_posterior_within_bin_shape_ks(mech, x_tilde):
    # One wide bin: the posterior is the noise density truncated to [0, 1], so this isolates the
    # within-bin samplers (x̃ inside the bin, left of it, right of it).
    edges, probs = np.array([0.0, 1.0]), np.array([1.0])
    post = mech.posterior(np.array([x_tilde]), HistogramPrior(edges, probs))
    ex = exact_for_histogram(mech, x_tilde, edges, probs)
    s = post.sample(np.random.default_rng(12), size=10_000)[:, 0]
    p = stats.kstest(s, ex.cdf).pvalue
    assert p > ALPHA, f"KS p={p:.2e}"
    xs = np.array([0.05, 0.5, 0.95])
    np.testing.assert_allclose(post.logpdf(xs[:, None])[:, 0], ex.logpdf(xs), rtol=0, atol=TOL)


# ================================ shapes ==========================================================

SHAPE_CASES = [
    ("rr", RandomizedResponse(3, 0.2), CategoricalPrior(np.array([0.2, 0.3, 0.5])), 1),
    ("tm", TransitionMatrix.binary(0.1, 0.2), CategoricalPrior(np.array([0.5, 0.5])), 1),
    ("gauss_gauss", GAUSS, GaussianPrior(0.5, 0.04), 0.3),
    ("lap_gauss", LAPLACE, GaussianPrior(0.5, 0.04), 0.3),
    ("gauss_hist", H_GAUSS, HistogramPrior(EDGES, PROBS), 0.3),
    ("lap_hist", H_LAPLACE, HistogramPrior(EDGES, PROBS), 0.3),
]


@pytest.mark.parametrize("name, mech, prior, value", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)], ids=["scalar", "1d", "2d"])
def test_posterior_sample_shapes(name, mech, prior, value, shape):
    """sample() returns x̃'s shape (size=None) or (size,) + x̃'s shape, for scalar x̃ too."""
    xt = np.full(shape, value)
    post = mech.posterior(xt, prior)
    rng = np.random.default_rng(0)
    assert np.shape(post.sample(rng)) == shape
    assert np.shape(post.sample(rng, size=5)) == (5,) + shape
