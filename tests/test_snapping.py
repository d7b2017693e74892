"""Floating-point hardening of Laplace releases (issue #7): Mironov's attack and the snapping mechanism.

* the attack bites: against ``LaplaceMechanism`` (numpy's sampler, replayed bit for bit) and the
  textbook sampler, a large fraction of releases from x0 *prove* the input was not x1, and no
  release is ever declared unreachable from its true input;
* against ``SnappingLaplaceMechanism`` the same exact search over the mechanism's own sampler finds
  every release reachable from both inputs; releases are grid values whose low-order bits are a
  function of the grid index only, with the same support for x and nextafter(x);
* the snapped release follows the stated pmf (chi-square, fixed seed, α = ALPHA); the stated ε is
  Mironov's bound with η' = 2⁻⁵² and never exceeds the requested ε; posteriors are exact;
* ``harden`` swaps Laplace fields for snapped ones without raising the record's ε.

Statistical thresholds: a fixed seed and α = 1e-3 throughout; attack rates use exact
Clopper–Pearson intervals at 99.9%.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedrr.audit._fp_attack import (
    _reachable_monotone,
    clopper_pearson,
    exclusion_rate,
    laplace_reachable,
    numpy_laplace_noise,
    snapping_reachable,
)
from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    GaussianMechanism,
    GaussianPrior,
    HistogramPrior,
    LaplaceMechanism,
    RandomizedResponse,
    RecordMechanism,
    SnappingLaplaceMechanism,
    harden,
    libm_log,
    mechanism_from_spec,
)
from fedrr.mechanisms._exact_sampling import ETA, calibrate, next_power_of_two, uniform_double

ALPHA = 1e-3


# --- the attack bites on naive Laplace ----------------------------------------------------------


def test_numpy_laplace_is_replayed_bit_for_bit():
    """numpy_laplace_noise(k) equals Generator.laplace for the same 53-bit draws k = raw >> 11."""
    n, scale = 50_000, 0.37
    y = np.random.default_rng(7).laplace(0.0, scale, size=n)
    k = (np.random.default_rng(7).bit_generator.random_raw(n) >> np.uint64(11)).astype(np.int64)
    assert np.array_equal(numpy_laplace_noise(k, scale), y)


def test_reachability_search_is_exact_on_a_toy_function():
    """_reachable_monotone finds values in the image of a monotone step function and rejects gaps."""

    def fn(k, i):  # image: even numbers, each hit by 3 consecutive k
        return (k // 3) * 2.0

    target = np.array([0.0, 2.0, 3.0, 10.0, 666.0, 668.0, -2.0])
    got = _reachable_monotone(fn, target, 0, 1000)
    assert got.tolist() == [True, True, False, True, True, False, False]


@pytest.mark.parametrize("eps, x0, x1", [(1.0, 0.0, 1.0), (1.0, 1.0, 0.0), (0.5, 0.25, 0.75)])
def test_attack_excludes_the_wrong_input_for_numpy_laplace(eps, x0, x1):
    """Releases of LaplaceMechanism from x0 prove 'not x1' in most cases (measured ≈ 0.8; we require
    the 99.9% Clopper–Pearson lower bound to exceed 0.5), and never exclude x0 itself."""
    r = exclusion_rate(LaplaceMechanism(eps, 0.0, 1.0), x0, x1, 1500, np.random.default_rng(11))
    lo, _ = clopper_pearson(r["excluded"], r["n"], ALPHA)
    assert r["false_exclusions"] == 0
    assert lo > 0.5, r["rate"]


def test_attack_separates_x_from_its_next_double():
    """Even x and nextafter(x) are told apart with certainty in a sizeable fraction of releases."""
    x0 = 0.3
    r = exclusion_rate(LaplaceMechanism(1.0, 0.0, 1.0), x0, np.nextafter(x0, 1.0), 1500, np.random.default_rng(12))
    assert r["false_exclusions"] == 0
    assert clopper_pearson(r["excluded"], r["n"], ALPHA)[0] > 0.2, r["rate"]


def test_attack_on_textbook_sampler():
    """The reference sampler x + S·b·log(k·2⁻⁵³) leaks the same way."""
    r = exclusion_rate(LaplaceMechanism(1.0, 0.0, 1.0), 0.0, 1.0, 1500, np.random.default_rng(13), sampler="textbook")
    assert r["false_exclusions"] == 0
    assert clopper_pearson(r["excluded"], r["n"], ALPHA)[0] > 0.4, r["rate"]


def test_laplace_reachable_on_the_release_itself():
    """A release is reachable from its own input; y = x0 + 0.1 exactly is typically not a release."""
    mech = LaplaceMechanism(1.0, 0.0, 1.0)
    y = mech.release(np.full(200, 0.5), np.random.default_rng(3))
    assert laplace_reachable(y, 0.5, mech.scale).all()
    with pytest.raises(ValidationError) as e:
        laplace_reachable(y, 0.5, mech.scale, sampler="mkl")
    assert e.value.field == "sampler"


# --- the snapped release has no such leak ------------------------------------------------------


@pytest.mark.parametrize("eps, x0, x1", [(1.0, 0.0, 1.0), (0.5, 0.25, 0.75), (4.0, 0.3, float(np.nextafter(0.3, 1.0)))])
def test_attack_finds_nothing_against_snapping(eps, x0, x1):
    """The exact search over the snapped sampler's (S, U*) finds every release reachable from both
    inputs: 0 exclusions (99.9% CP upper bound < 0.5%)."""
    mech = SnappingLaplaceMechanism(eps, 0.0, 1.0)
    r = exclusion_rate(mech, x0, x1, 2000, np.random.default_rng(21))
    assert r["false_exclusions"] == 0
    assert r["excluded"] == 0
    assert clopper_pearson(0, r["n"], ALPHA)[1] < 0.005


def test_every_grid_value_is_reachable_from_every_input():
    """Support is input-independent: all 2M+1 grid values are reachable from both ends of the domain."""
    mech = SnappingLaplaceMechanism(2.0, -1.0, 3.0)
    for x in (-1.0, 3.0, 0.123):
        assert snapping_reachable(mech, mech.support, x).all()


def test_snapped_outputs_are_grid_values_with_input_independent_low_bits():
    """Every release is mid + k·step for |k| ≤ M; the normalised value k·Λ has 45 zero low mantissa
    bits; the low 16 bits of a release are a function of k alone, identical under x0 and x1."""
    mech = SnappingLaplaceMechanism(1.0, 0.0, 1.0)
    rng = np.random.default_rng(5)
    ys = {x: mech.release(np.full(20_000, x), rng) for x in (0.0, 1.0)}
    seen: dict[int, int] = {}
    for y in ys.values():
        k = mech.index(y)
        assert np.isin(y, mech.support).all()
        assert np.array_equal(y, mech.support[k + mech.M])
        norm_bits = (k * mech.Lambda).astype(np.float64).view(np.uint64)
        assert np.all(norm_bits & np.uint64((1 << 45) - 1) == 0)
        low = y.view(np.uint64) & np.uint64(0xFFFF)
        for kk, lb in zip(k.tolist(), low.tolist()):
            assert seen.setdefault(kk, lb) == lb


def test_x_and_next_double_have_identical_support_and_indistinguishable_outputs():
    """x and nextafter(x): identical support (exact reachability), pmfs within a factor e^{1e-12},
    and a two-sample chi-square on 40k releases each does not reject (α = ALPHA)."""
    mech = SnappingLaplaceMechanism(2.0, 0.0, 1.0)
    x0 = 0.3
    x1 = float(np.nextafter(x0, 1.0))
    assert snapping_reachable(mech, mech.support, x0).all() and snapping_reachable(mech, mech.support, x1).all()
    lp0 = mech.log_likelihood(mech.support, x0)
    lp1 = mech.log_likelihood(mech.support, x1)
    assert np.max(np.abs(lp0 - lp1)) < 1e-12
    rng = np.random.default_rng(6)
    c0 = np.bincount(mech.index(mech.release(np.full(40_000, x0), rng)) + mech.M, minlength=2 * mech.M + 1)
    c1 = np.bincount(mech.index(mech.release(np.full(40_000, x1), rng)) + mech.M, minlength=2 * mech.M + 1)
    keep = (c0 + c1) >= 10
    table = np.vstack([np.append(c0[keep], c0[~keep].sum()), np.append(c1[keep], c1[~keep].sum())])
    table = table[:, table.sum(0) > 0]
    assert stats.chi2_contingency(table).pvalue > ALPHA


def test_ideal_privacy_loss_is_bounded_by_the_laplace_epsilon():
    """max_k |log P(k|x) − log P(k|x')| ≤ 1/λ ≤ stated ε over the whole support and domain ends."""
    for eps in (0.3, 1.0, 5.0):
        mech = SnappingLaplaceMechanism(eps, -2.0, 2.0)
        loss = np.abs(mech.log_likelihood(mech.support, -2.0) - mech.log_likelihood(mech.support, 2.0))
        assert loss.max() <= 1.0 / mech.lam + 1e-12
        assert 1.0 / mech.lam <= mech.epsilon <= eps


# --- the stated pmf ----------------------------------------------------------------------------


def _chi2_against_pmf(mech, x, n, seed):
    k = mech.index(mech.release(np.full(n, x), np.random.default_rng(seed)))
    obs = np.bincount(k + mech.M, minlength=2 * mech.M + 1).astype(float)
    p = np.exp(mech.log_likelihood(mech.support, x))
    assert abs(p.sum() - 1.0) < 1e-12
    exp = n * p
    big = exp >= 5
    obs_m = np.append(obs[big], obs[~big].sum())
    exp_m = np.append(exp[big], exp[~big].sum())
    if exp_m[-1] < 5:  # fold the rare tail into the smallest kept cell
        j = np.argmin(exp_m[:-1])
        obs_m[j] += obs_m[-1]
        exp_m[j] += exp_m[-1]
        obs_m, exp_m = obs_m[:-1], exp_m[:-1]
    return stats.chisquare(obs_m, exp_m).pvalue


@pytest.mark.parametrize("eps, lo, hi, x", [(1.0, 0.0, 1.0, 0.7), (4.0, -3.0, 5.0, 4.9), (0.2, 0.0, 1.0, 0.0)])
def test_release_matches_the_stated_pmf(eps, lo, hi, x):
    assert _chi2_against_pmf(SnappingLaplaceMechanism(eps, lo, hi), x, 100_000, seed=31) > ALPHA


@pytest.mark.parametrize("eps, x", [(1.0, 0.7), (3.0, 0.51), (16.0, 0.0)])
def test_release_matches_the_stated_pmf_big(eps, x):
    assert _chi2_against_pmf(SnappingLaplaceMechanism(eps, 0.0, 1.0), x, 2_000_000, seed=32) > ALPHA


def test_uniform_double_has_full_resolution_and_is_uniform():
    """U* ∈ (0, 1); P(U* < 2⁻ʲ) = 2⁻ʲ (binomial, α); below 2⁻¹⁰ the draws are not on the 2⁻⁵³ grid
    (their low significand bits are random); the exponent is geometric (chi-square)."""
    rng = np.random.default_rng(41)
    n = 400_000
    u = uniform_double(rng, n)
    assert u.shape == (n,) and np.all(u > 0) and np.all(u < 1)
    for j in (1, 4, 10):
        assert stats.binomtest(int(np.sum(u < 2.0**-j)), n, 2.0**-j).pvalue > ALPHA
    small = u[u < 2.0**-10]
    assert np.mean(small * 2.0**53 != np.round(small * 2.0**53)) > 0.99
    e = -np.frexp(u)[1]  # u ∈ [2^-(e+1), 2^-e)
    obs = np.bincount(np.minimum(e, 12), minlength=13)
    p = np.array([0.5 ** (i + 1) for i in range(12)] + [0.5**12])
    assert stats.chisquare(obs, n * p).pvalue > ALPHA
    assert np.mean(u) == pytest.approx(0.5, abs=5 * math.sqrt(1 / 12 / n))
    assert uniform_double(rng).shape == () and uniform_double(rng, (2, 3)).shape == (2, 3)


def test_libm_log_matches_math_log():
    x = np.random.default_rng(0).random(1000) + 1e-3
    assert np.array_equal(libm_log(x), np.array([math.log(v) for v in x]))


# --- ε accounting ------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 1.0, 2.0, 3.7, 16.0, 1000.0])
@pytest.mark.parametrize("tail", [1.0, 40.0])
def test_stated_epsilon_and_noise_scale_follow_the_documented_formula(eps, tail):
    """λ = (1 + 6η')/(ε − 12η'(T+2) − 2η') (up to the final round-up), Λ the next power of 2,
    B = M·Λ with M = max(2, ⌈(½ + tail·λ)/Λ⌉), ε_stated = (1 + 12Bη')/λ + 2η' ≤ ε exactly, and
    Mironov's λ < B < 2⁴⁶λ."""
    mech = SnappingLaplaceMechanism(eps, 2.0, 7.0, tail=tail)
    T = max(tail, 2.0)
    lam0 = (1 + 6 * ETA) / (eps - 12 * ETA * (T + 2) - 2 * ETA)
    assert lam0 <= mech.lam <= lam0 * (1 + 1e-15)
    assert mech.lam * eps - 1 < 1e-10  # the inflation over the Laplace scale 1/ε is negligible
    assert mech.Lambda == next_power_of_two(mech.lam) and mech.lam <= mech.Lambda < 2 * mech.lam
    assert math.log2(mech.Lambda).is_integer()
    assert mech.M == max(2, math.ceil((0.5 + tail * mech.lam) / mech.Lambda)) and mech.bound == mech.M * mech.Lambda
    assert mech.lam < mech.bound < 2.0**46 * mech.lam
    exact = (1 + 12 * Fraction(mech.bound) * Fraction(ETA)) / Fraction(mech.lam) + 2 * Fraction(ETA)
    assert Fraction(mech.epsilon) >= exact and mech.epsilon == pytest.approx(float(exact), rel=1e-15)
    assert mech.epsilon <= eps and mech.requested_epsilon == eps
    assert mech.noise_scale == pytest.approx(5.0 * mech.lam, rel=1e-15)
    assert mech.step == 5.0 * mech.Lambda


def test_next_power_of_two():
    assert next_power_of_two(1.0) == 1.0 and next_power_of_two(1.0000000001) == 2.0
    assert next_power_of_two(0.3) == 0.5 and next_power_of_two(2.0**-60 * 3) == 2.0**-58


def test_calibrate_reports_the_parameters():
    c = calibrate(1.0)
    assert set(c) == {"lam", "Lambda", "M", "bound", "epsilon"} and c["epsilon"] <= 1.0


# --- validation and specs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": 1e-14}, "epsilon"),
        ({"epsilon": 1e16}, "epsilon"),
        ({"lower": 1.0, "upper": 0.0}, "upper"),
        ({"lower": 1.0, "upper": 1.0}, "upper"),
        ({"lower": float("nan")}, "lower"),
        ({"upper": float("nan")}, "upper"),
        ({"lower": [0.0, 0.0], "upper": [1.0, 1.0]}, "lower"),
        ({"tail": 0.0}, "tail"),
        ({"lower": 1e300 * -1.0, "upper": 1e308}, "upper"),
    ],
)
def test_bad_parameters_raise_validation_error(kwargs, field):
    args = {"epsilon": 1.0, "lower": 0.0, "upper": 1.0, **kwargs}
    tail = args.pop("tail", 40.0)
    with pytest.raises(ValidationError) as e:
        SnappingLaplaceMechanism(args["epsilon"], args["lower"], args["upper"], tail=tail)
    assert e.value.field == field


def test_bad_release_inputs_raise_validation_error():
    mech = SnappingLaplaceMechanism(1.0, 0.0, 1.0)
    rng = np.random.default_rng(0)
    for x, field in ((np.nan, "x"), (1.5, "x"), ([0.2, np.inf], "x")):
        with pytest.raises(ValidationError) as e:
            mech.release(x, rng)
        assert e.value.field == field
    with pytest.raises(ValidationError) as e:
        mech.release(0.5, 0)
    assert e.value.field == "rng"
    y = mech.release(np.full(3, 0.5), rng)
    for bad in (y + 1e-9, np.array([mech.support[-1] + mech.step]), np.array([np.nan])):
        with pytest.raises(ValidationError) as e:
            mech.log_likelihood(bad, 0.5)
        assert e.value.field == "x_tilde"


def test_spec_round_trip():
    mech = SnappingLaplaceMechanism(0.7, -1.5, 2.5, tail=30.0)
    spec = json.loads(json.dumps(mech.to_spec()))
    again = mechanism_from_spec(spec)
    assert again == mech and isinstance(again, SnappingLaplaceMechanism)
    assert (again.lam, again.Lambda, again.M, again.epsilon) == (mech.lam, mech.Lambda, mech.M, mech.epsilon)
    assert np.array_equal(again.support, mech.support)
    rm = RecordMechanism([mech, RandomizedResponse(3, 0.2)], RandomizedResponse(2, 0.1))
    assert RecordMechanism.from_spec(json.loads(json.dumps(rm.to_spec()))) == rm


# --- posteriors --------------------------------------------------------------------------------

_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)


def _quad_posterior(mech, k, prior_pdf, lo, hi, breaks=()):
    """Independent check by brute force: 20-point Gauss–Legendre on a 400-interval grid of [lo, hi]
    that contains every kink of prior(x)·P(k | x) (domain ends, cell edges, ``breaks``), so the
    integrand is smooth on each interval. Returns (Z, mean, cdf(t), grid, cumulative mass)."""
    kinks = [
        mech.lower[0],
        mech.upper[0],
        mech.mid + mech.range * (k - 0.5) * mech.Lambda,
        mech.mid + mech.range * (k + 0.5) * mech.Lambda,
        *breaks,
    ]
    grid = np.unique(np.concatenate([np.linspace(lo, hi, 401), [p for p in kinks if lo < p < hi]]))
    a, b = grid[:-1, None], grid[1:, None]
    nodes = 0.5 * (a + b) + 0.5 * (b - a) * _GL_X
    weights = 0.5 * (b - a) * _GL_W

    def f(x):
        return prior_pdf(x) * np.exp(mech.log_pmf_index(k, mech.normalise(x)))

    lik = f(nodes)
    mass = (lik * weights).sum(1)
    Z = mass.sum()
    cum = np.concatenate([[0.0], np.cumsum(mass)]) / Z

    def cdf(t):  # exact up to quadrature: whole intervals plus GL on [grid[j], t]
        t = np.clip(np.asarray(t, float), lo, hi)
        j = np.clip(np.searchsorted(grid, t, side="right") - 1, 0, len(grid) - 2)
        a, b = grid[j][:, None], t[:, None]
        part = (f(0.5 * (a + b) + 0.5 * (b - a) * _GL_X) * 0.5 * (b - a) * _GL_W).sum(1)
        return cum[j] + part / Z

    return Z, (nodes * lik * weights).sum() / Z, cdf, grid, cum


@pytest.mark.parametrize("eps", [1.0, 2.0, 8.0])
def test_histogram_posterior_is_exact(eps):
    mech = SnappingLaplaceMechanism(eps, 0.0, 1.0)
    prior = HistogramPrior(np.array([-0.2, 0.1, 0.3, 0.6, 0.8, 1.0, 1.4]), np.array([0.05, 0.2, 0.3, 0.25, 0.15, 0.05]))
    dens = prior.probs / np.diff(prior.edges)

    def pdf(x):
        j = np.searchsorted(prior.edges, x, side="right") - 1
        return np.where((j >= 0) & (j < len(dens)), dens[np.clip(j, 0, len(dens) - 1)], 0.0)

    ks = np.array([-mech.M, -1, 0, 1, mech.M])
    post = mech.posterior(mech.support[ks + mech.M], prior)
    bp, mean = post.bin_proba(), post.mean()
    draws = post.sample(np.random.default_rng(51), 20_000)
    e = prior.edges
    for i, k in enumerate(ks):
        _, m, cdf, grid, cum = _quad_posterior(mech, k, pdf, e[0], e[-1], breaks=e)
        assert np.allclose(bp[i], np.diff(np.interp(e, grid, cum)), rtol=1e-9, atol=1e-12)
        assert mean[i] == pytest.approx(m, abs=1e-9)
        assert stats.kstest(draws[:, i], cdf).pvalue > ALPHA


@pytest.mark.parametrize("eps, mu, var", [(1.0, 0.3, 0.04), (2.0, 0.5, 0.3), (8.0, 0.6, 0.2), (20.0, 0.2, 0.3)])
def test_gaussian_posterior_is_exact(eps, mu, var):
    mech = SnappingLaplaceMechanism(eps, 0.0, 1.0)
    sd = math.sqrt(var)

    def pdf(x):
        return stats.norm.pdf(x, mu, sd)

    x_probe = 0.37
    ks = np.array([-mech.M, -1, 0, 1, mech.M])
    post = mech.posterior(mech.support[ks + mech.M], GaussianPrior(mu, var))
    mean = post.mean()
    draws = post.sample(np.random.default_rng(52), 20_000)
    lp = post.logpdf(np.full(ks.shape, x_probe))
    for i, k in enumerate(ks):
        Z, m, cdf, _, _ = _quad_posterior(mech, k, pdf, mu - 12 * sd, mu + 12 * sd)
        assert mean[i] == pytest.approx(m, abs=1e-9)
        assert lp[i] == pytest.approx(
            math.log(pdf(x_probe) * math.exp(mech.log_pmf_index(k, mech.normalise(x_probe))) / Z), abs=1e-9
        )
        assert stats.kstest(draws[:, i], cdf).pvalue > ALPHA


def test_posterior_rejects_bad_priors():
    mech = SnappingLaplaceMechanism(1.0, 0.0, 1.0)
    y = mech.support[:4].reshape(2, 2)
    with pytest.raises(ValidationError) as e:
        mech.posterior(y, GaussianPrior(np.zeros(3), np.ones(3)))
    assert e.value.field == "prior.mean"
    with pytest.raises(ValidationError) as e:
        mech.posterior(y, "flat")
    assert e.value.field == "prior"


# --- harden ------------------------------------------------------------------------------------


def test_harden_replaces_laplace_fields_without_raising_epsilon():
    feats = [
        LaplaceMechanism(3.0, [0.0, 0.0, -1.0], [1.0, 2.0, 1.0]),
        RandomizedResponse(4, 0.2),
        LaplaceMechanism(1.0, 0.0, 10.0, sensitivity=20.0),
        GaussianMechanism(1.0, 1e-5, 0.0, 1.0),
    ]
    rm = RecordMechanism(feats, LaplaceMechanism(0.5, -1.0, 1.0))
    h = harden(rm)
    assert h.n_features == rm.n_features == 6
    kinds = [type(f.mechanism).__name__ for f in h.fields]
    assert kinds == ["SnappingLaplaceMechanism"] * 3 + [
        "RandomizedResponse",
        "SnappingLaplaceMechanism",
        "GaussianMechanism",
    ]
    assert isinstance(h.label, SnappingLaplaceMechanism) and h.label.epsilon <= 0.5
    assert h.epsilon <= rm.epsilon and h.delta == rm.delta
    # the block's budget is split by range at the block's own noise scale: ε_j = ε·r_j/Δ₁
    assert [f.mechanism.requested_epsilon for f in h.fields[:3]] == pytest.approx([0.6, 1.2, 1.2])
    assert h.fields[4].mechanism.requested_epsilon == pytest.approx(0.5)  # sensitivity 20 > range 10
    assert harden(h) == h  # idempotent
    with pytest.raises(ValidationError) as e:
        harden(rm, strict=True)
    assert e.value.field == "mechanism"
    with pytest.raises(ValidationError) as e:
        harden(LaplaceMechanism(1.0))
    assert e.value.field == "mechanism"


def test_harden_keeps_replication_and_releases_end_to_end():
    rm = RecordMechanism(LaplaceMechanism(2.0, 0.0, 1.0), RandomizedResponse(2, 0.1), n_features=4)
    h = harden(rm, strict=True)
    assert h.to_spec()["features"]["replicate"]["kind"] == "snapping_laplace"
    assert len(h.groups()) == 1 and h.epsilon <= rm.epsilon
    rng = np.random.default_rng(61)
    X, y = rng.random((50, 4)), rng.integers(0, 2, 50)
    Xt, yt = h.release(X, y, rng=rng)
    assert np.isin(Xt, h.fields[0].mechanism.support).all()
    ll = h.log_likelihood(Xt, yt, X, y)
    assert ll.shape == (50,) and np.all(np.isfinite(ll))
    assert RecordMechanism.from_spec(json.loads(json.dumps(h.to_spec()))) == h


def test_spread_em_runs_on_snapped_releases():
    """Spread-EM accepts hardened releases (both numeric priors) and recovers the sign pattern."""
    from fedrr.estimators import SpreadLogisticRegression

    rng = np.random.default_rng(71)
    n, coef = 800, np.array([3.0, -3.0])
    X = rng.random((n, 2))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ coef - 0.0)))).astype(int)
    h = harden(RecordMechanism(LaplaceMechanism(4.0, 0.0, 1.0), RandomizedResponse(2, 0.1), n_features=2))
    Xt, yt = h.release(X, y, rng=rng)
    for prior in ("gaussian", "histogram"):
        est = SpreadLogisticRegression(max_iter=15, n_average=5, numeric_prior=prior, n_bins=5, random_state=0).fit(
            Xt, yt, h
        )
        assert np.all(np.isfinite(est.coef_)) and est.coef_[0, 0] > 0 > est.coef_[0, 1]


# --- big-sample versions -----------------------------------------------------------------------


@pytest.mark.parametrize("eps, x0, x1", [(0.5, 0.0, 1.0), (1.0, 0.0, 1.0), (2.0, 0.25, 0.75)])
def test_attack_rates_big(eps, x0, x1):
    rng = np.random.default_rng(81)
    naive = exclusion_rate(LaplaceMechanism(eps, 0.0, 1.0), x0, x1, 30_000, rng)
    snap = exclusion_rate(SnappingLaplaceMechanism(eps, 0.0, 1.0), x0, x1, 30_000, rng)
    assert naive["false_exclusions"] == 0 and clopper_pearson(naive["excluded"], naive["n"], ALPHA)[0] > 0.6
    assert snap["false_exclusions"] == 0 and snap["excluded"] == 0


def test_large_epsilon_is_constructed_in_constant_time_and_tiny_grid_is_rejected():
    """ε = 10⁹ has M ≈ 2²⁸ grid points: construction must not enumerate them."""
    mech = SnappingLaplaceMechanism(1e9, 0.0, 1.0)
    assert mech.M > 2**27 and mech.epsilon <= 1e9
    y = mech.release(np.full(5, 0.25), np.random.default_rng(0))
    assert np.all(np.abs(y - 0.25) < 1e-6) and np.all(np.isfinite(mech.log_likelihood(y, 0.25)))
    with pytest.raises(ValidationError) as e:  # a grid step far below the resolution of doubles at 1e9
        SnappingLaplaceMechanism(1e6, 1e9, 1e9 + 1e-4)
    assert e.value.field == "upper"


def test_harden_returns_records_without_laplace_fields_unchanged():
    rm = RecordMechanism(RandomizedResponse(3, 0.2), RandomizedResponse(2, 0.1), n_features=4)
    assert harden(rm) is rm and harden(rm, strict=True) is rm


def test_fp_attack_script_quick(tmp_path):
    """simulations/fp_laplace_attack.py --quick writes its table; naive rates are high, snapped 0."""
    import csv
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "simulations" / "fp_laplace_attack.py"
    spec = importlib.util.spec_from_file_location("fp_laplace_attack", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--quick", "--out", str(tmp_path)]) == 0
    assert "| ε | x0 | x1 |" in (tmp_path / "fp_attack.md").read_text()
    with open(tmp_path / "fp_attack.csv") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    assert all(int(r["false_exclusions"]) == 0 for r in rows)
    assert all(int(r["excluded"]) == 0 for r in rows if r["sampler"] == "snapping")
    assert min(float(r["rate"]) for r in rows if r["sampler"] == "numpy Laplace") > 0.3


def test_a_deployment_node_releases_laplace_fields_snapped(tmp_path):
    """Deployment mode (a node with ledger-dir + record-file) hardens Laplace fields: the reply's
    spec is the snapped mechanism, its ε is at most the record's requested ε, the released value
    lies on the snapping grid, and the attack that breaks numpy's Laplace finds nothing in it."""
    import json

    from flwr.app import Context, RecordDict

    from fedrr.audit._fp_attack import snapping_reachable
    from fedrr.federation.client_app import answer
    from fedrr.mechanisms import LaplaceMechanism, mechanism_from_spec
    from fedrr.release import write_record_file

    requested = RecordMechanism(LaplaceMechanism(1.0, 0.0, 1.0), RandomizedResponse(2, 0.1), n_features=3)
    x = np.array([0.0, 0.3, 1.0])
    write_record_file(tmp_path / "record.npz", x, 1, requested)
    ctx = Context(
        run_id=1,
        node_id=1,
        node_config={"ledger-dir": str(tmp_path / "ledger"), "record-file": str(tmp_path / "record.npz")},
        state=RecordDict(),
        run_config={},
    )
    content = answer(ctx)
    spec = list(content.mechanisms)
    rm = mechanism_from_spec(json.loads(spec[0]))
    snapped = rm.fields[0].mechanism
    assert isinstance(snapped, SnappingLaplaceMechanism) and rm.epsilon <= requested.epsilon
    released = content.x[0]
    snapped.validate_release(released)  # exactly a grid value, or it raises
    for j in range(3):  # every grid value is reachable from any input: nothing to exclude
        assert snapping_reachable(snapped, released[j], 0.0) and snapping_reachable(snapped, released[j], 1.0)
    again = answer(ctx)
    assert again.x.tobytes() == content.x.tobytes()
