"""Debiased frequency estimation from randomised-response releases (Warner 1965; Barber §3.2).

Statistical levels: every check compares a Monte-Carlo statistic to its sampling distribution and
accepts at two-sided level 1e-3 with a fixed seed (χ²_R for a sum of R squared z-scores,
F(R, R) for the ratio of two such sums, |z| < 3.29 for CLT means).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedrr.errors import ConvergenceError, ValidationError
from fedrr.estimators import estimate_frequencies, project_to_simplex, warner_estimate
from fedrr.mechanisms import RandomizedResponse, TransitionMatrix

LEVEL = 1e-3
Z = stats.norm.ppf(1 - LEVEL / 2)  # 3.29

WARNER_CASES = [  # (θ0, P10, P01)
    (0.3, 0.2, 0.2),
    (0.7, 0.1, 0.3),  # asymmetric
    (0.1, 0.35, 0.05),  # asymmetric, the other way
]


def warner_sd(theta0, p10, p01, n):
    """Asymptotic sd of θ̂: var = f1(1 − f1) / (N (1 − P10 − P01)²), f1 = P10(1 − θ0) + (1 − P01)θ0."""
    f1 = p10 * (1 - theta0) + (1 - p01) * theta0
    return math.sqrt(f1 * (1 - f1) / (n * (1 - p10 - p01) ** 2))


def simulate_warner(theta0, p10, p01, n, reps, rng):
    mech = TransitionMatrix.binary(p10, p01)
    x = (rng.random((reps, n)) < theta0).astype(np.int64)
    xt = mech.release(x, rng)
    return mech, xt


@pytest.mark.parametrize("theta0, p10, p01", WARNER_CASES)
def test_warner_rmse_matches_asymptotic_sd_and_shrinks_4x(theta0, p10, p01):
    R = 200
    rng = np.random.default_rng(int(1000 * theta0 + 100 * p10 + 10 * p01))
    z2 = {}
    rmse = {}
    for n in (1000, 16_000):
        mech, xt = simulate_warner(theta0, p10, p01, n, R, rng)
        theta_hat = warner_estimate(xt.mean(axis=1), p10, p01)
        # estimate_frequencies(inversion) is the same estimator, projected onto [0, 1]
        for r in range(0, R, 20):
            pi = estimate_frequencies(xt[r], mech)
            assert pi[1] == pytest.approx(min(max(theta_hat[r], 0.0), 1.0), abs=1e-12)
            assert pi.sum() == pytest.approx(1.0, abs=1e-12)
        sd = warner_sd(theta0, p10, p01, n)
        z2[n] = np.sum(((theta_hat - theta0) / sd) ** 2)  # ~ χ²_R when θ̂ ~ N(θ0, sd²)
        rmse[n] = math.sqrt(np.mean((theta_hat - theta0) ** 2))
        p = stats.chi2.cdf(z2[n], R)
        assert LEVEL / 2 < p < 1 - LEVEL / 2, f"N={n}: RMSE {rmse[n]:.4g} vs theory {sd:.4g} (χ² cdf {p:.2e})"
        # and unbiased: mean error within Z standard errors
        assert abs(np.mean(theta_hat) - theta0) < Z * sd / math.sqrt(R)
    # RMSE ratio: (RMSE_1k / RMSE_16k)² / 16 = (z2_1k / z2_16k) ~ F(R, R)
    lo, hi = stats.f.ppf([LEVEL / 2, 1 - LEVEL / 2], R, R)
    ratio = rmse[1000] / rmse[16_000]
    assert 4 * math.sqrt(lo) < ratio < 4 * math.sqrt(hi), (
        f"ratio {ratio:.3f} not in [{4 * math.sqrt(lo):.2f}, {4 * math.sqrt(hi):.2f}]"
    )


def spread_log_likelihood(theta, x_tilde, mech):
    """Barber eq (22): Σ_n log Σ_x p(x̃_n | x) p(x | θ), from the mechanism's own log_likelihood."""
    counts = np.bincount(x_tilde, minlength=2)
    ll = 0.0
    for xt_val in (0, 1):
        p_given0 = math.exp(mech.log_likelihood(xt_val, 0))
        p_given1 = math.exp(mech.log_likelihood(xt_val, 1))
        ll = ll + counts[xt_val] * np.log(p_given0 * (1 - theta) + p_given1 * theta)
    return ll


@pytest.mark.parametrize("theta0, p10, p01", WARNER_CASES)
def test_warner_closed_form_is_the_spread_mle_and_the_printed_formula_is_biased(theta0, p10, p01):
    n = 16_000
    rng = np.random.default_rng(7)
    mech, xt = simulate_warner(theta0, p10, p01, n, 1, rng)
    xt = xt[0]
    grid = np.linspace(0.0, 1.0, 1_000_001)  # step 1e-6
    theta_grid = grid[np.argmax(spread_log_likelihood(grid, xt, mech))]
    f1 = xt.mean()
    closed = warner_estimate(f1, p10, p01)
    assert 0 < closed < 1
    assert closed == pytest.approx((f1 - p10) / (1 - p10 - p01), rel=1e-15)
    assert abs(theta_grid - closed) <= 1e-6
    assert abs(closed - theta0) < Z * warner_sd(theta0, p10, p01, n)
    # Barber's printed eqs (2)/(24) read θ̂ = (f̃1 + P10)/(1 − P10 − P01): a sign error. It is off by
    # exactly 2·P10/(1 − P10 − P01) from the maximiser, i.e. biased by that much at any N.
    printed = (f1 + p10) / (1 - p10 - p01)
    assert printed - closed == pytest.approx(2 * p10 / (1 - p10 - p01), rel=1e-12)
    assert abs(printed - theta0) > 10 * warner_sd(theta0, p10, p01, n)
    assert spread_log_likelihood(np.clip(printed, 0, 1), xt, mech) < spread_log_likelihood(closed, xt, mech)


# --- k-ary ---------------------------------------------------------------------------------------

PI5 = np.array([0.4, 0.25, 0.15, 0.12, 0.08])


def em_map(pi, P, f):
    new = pi * (P.T @ (f / (P @ pi)))
    return new / new.sum()


def em_rate(pi, P, f, h=1e-7):
    """Spectral radius of the EM map's Jacobian at its fixed point (finite differences)."""
    k = len(pi)
    J = np.empty((k, k))
    for j in range(k):
        e = np.zeros(k)
        e[j] = h
        J[:, j] = (em_map(pi + e, P, f) - em_map(pi - e, P, f)) / (2 * h)
    return float(np.max(np.abs(np.linalg.eigvals(J))))


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 4.0])
def test_mle_equals_inversion_inside_simplex(eps):
    k, n = 5, 20_000
    rng = np.random.default_rng(int(eps * 10))
    mech = RandomizedResponse(k, epsilon=eps)
    xt = mech.release(rng.choice(k, size=n, p=PI5), rng)
    f = np.bincount(xt, minlength=k) / n
    raw = np.linalg.solve(mech.matrix, f)
    assert raw.min() > 0, "test design: the inversion estimate must be interior"
    inv = estimate_frequencies(xt, mech, method="inversion")
    np.testing.assert_allclose(inv, raw, rtol=0, atol=1e-14)
    tol = 1e-10
    mle = estimate_frequencies(xt, mech, method="mle", tol=tol)
    # EM stops when a step is < tol; with linear rate ρ the remaining error is ≲ tol·ρ/(1 − ρ)
    rho = em_rate(raw, mech.matrix, f)
    assert rho < 1
    assert np.max(np.abs(mle - inv)) <= 10 * tol / (1 - rho)


@pytest.mark.parametrize(
    "eps, pi_true, seed",
    [
        (0.1, PI5, 0),
        (0.25, PI5, 0),
        (0.25, np.array([0.5, 0.3, 0.2, 0.0, 0.0]), 0),
        (0.5, np.array([0.5, 0.3, 0.2, 0.0, 0.0]), 1),
    ],
    ids=["eps0.1-interior", "eps0.25-interior", "eps0.25-boundary", "eps0.5-boundary"],
)
def test_mle_converges_at_small_epsilon(eps, pi_true, seed):
    """BUG (pinned): estimate_frequencies(method='mle') does not deliver the MLE at small ε
    (k = 5, N = 20_000, default tol/max_iter). EM's linear rate is 1 − O(k(q − r)²) ≈ 0.997 at
    ε = 0.25, and it is sublinear when the MLE is on the boundary (true zeros). From the uniform start:
      * interior, ε = 0.1: ConvergenceError after max_iter = 10_000;
      * interior, ε = 0.25: stops on the step rule |Δπ| < 1e-10 with an actual error of 6e-8 ≈ tol/(1 − ρ),
        although the inversion estimate is interior and therefore *is* the MLE (docstring contract);
      * boundary, ε = 0.25 and 0.5: ConvergenceError (the duality gap is still ~1e-6 after 10⁴ steps).
    Checked: the returned π is a KKT point, i.e. the duality gap max_j g_j − 1 with
    g = Pᵀ(f̃ / Pπ) (which bounds L(π*) − L(π) per observation) is ≤ 1e-9."""
    k, n = 5, 20_000
    rng = np.random.default_rng(seed)
    mech = RandomizedResponse(k, epsilon=eps)
    xt = mech.release(rng.choice(k, size=n, p=pi_true), rng)
    f = np.bincount(xt, minlength=k) / n
    raw = np.linalg.solve(mech.matrix, f)
    interior = bool(np.all(pi_true > 0))
    assert (raw.min() > 0) == interior, "test design: interior case needs an interior inversion, boundary case not"
    mle = estimate_frequencies(xt, mech, method="mle")
    assert np.all(mle >= 0) and mle.sum() == pytest.approx(1.0, abs=1e-12)
    gap = np.max(mech.matrix.T @ (f / (mech.matrix @ mle))) - 1
    assert gap <= 1e-9
    if interior:
        np.testing.assert_allclose(mle, raw, rtol=0, atol=1e-8)


def test_mle_stays_on_simplex_and_satisfies_kkt_when_inversion_leaves_it():
    k = 5
    pi = np.array([0.5, 0.3, 0.2, 0.0, 0.0])
    mech = RandomizedResponse(k, epsilon=1.0)
    rng = np.random.default_rng(3)
    xt = mech.release(rng.choice(k, size=500, p=pi), rng)
    f = np.bincount(xt, minlength=k) / len(xt)
    raw = np.linalg.solve(mech.matrix, f)
    assert raw.min() < 0, "test design: the raw inversion must leave the simplex"
    inv = estimate_frequencies(xt, mech, method="inversion")
    mle = estimate_frequencies(xt, mech, method="mle")
    for est in (inv, mle):
        assert np.all(est >= 0) and est.sum() == pytest.approx(1.0, abs=1e-12)
    # KKT of max Σ f_i log (Pπ)_i on the simplex: g_j = Σ_i f_i P_ij/(Pπ)_i equals 1 where π_j > 0 and ≤ 1 where π_j = 0
    g = mech.matrix.T @ (f / (mech.matrix @ mle))
    support = mle > 1e-6
    np.testing.assert_allclose(g[support], 1.0, atol=1e-6)
    assert np.all(g[~support] <= 1 + 1e-6)

    def loglik(p):
        return float(f @ np.log(mech.matrix @ p))

    assert loglik(mle) >= loglik(inv) - 1e-12
    for p in rng.dirichlet(np.ones(k), size=200):
        assert loglik(mle) >= loglik(p)


@pytest.mark.parametrize("method", ["inversion", "mle"])
def test_kary_error_shrinks_like_one_over_sqrt_n(method):
    k, eps, R = 5, 2.0, 200
    mech = RandomizedResponse(k, epsilon=eps)
    P = mech.matrix
    Pinv = np.linalg.inv(P)
    f = P @ PI5
    trace = np.trace(Pinv @ (np.diag(f) - np.outer(f, f)) @ Pinv.T)  # N·E‖π̂ − π‖² for the inversion
    rng = np.random.default_rng(99)
    mse, se = {}, {}
    for n in (2000, 32_000):
        x = rng.choice(k, size=(R, n), p=PI5)
        xt = mech.release(x, rng)
        sq = np.array([np.sum((estimate_frequencies(xt[r], mech, method=method) - PI5) ** 2) for r in range(R)])
        mse[n], se[n] = sq.mean(), sq.std(ddof=1) / math.sqrt(R)
        # projection can only shrink the error, and is rarely active here (π_min = 0.08 ≈ 4 sd at N=2000)
        assert abs(mse[n] - trace / n) < Z * se[n], f"N={n}: MSE {mse[n]:.3g} vs theory {trace / n:.3g} ± {se[n]:.2g}"
    ratio = math.sqrt(mse[2000] / mse[32_000])
    rel_se = 0.5 * math.hypot(se[2000] / mse[2000], se[32_000] / mse[32_000])  # delta method for √(ratio)
    assert abs(ratio / 4 - 1) < Z * rel_se, f"RMSE ratio {ratio:.3f}, expected 4 ± {4 * Z * rel_se:.2f}"


def test_transition_matrix_estimate_recovers_3x3_distribution():
    P = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6]])
    mech = TransitionMatrix(P)
    pi = np.array([0.2, 0.5, 0.3])
    n = 50_000
    rng = np.random.default_rng(8)
    xt = mech.release(rng.choice(3, size=n, p=pi), rng)
    f = mech.matrix @ pi
    Pinv = np.linalg.inv(mech.matrix)
    sd = np.sqrt(np.diag(Pinv @ (np.diag(f) - np.outer(f, f)) @ Pinv.T) / n)
    for method in ("inversion", "mle"):
        est = estimate_frequencies(xt, mech, method=method)
        assert np.all(np.abs(est - pi) < Z * sd), method


def test_weights():
    mech = RandomizedResponse(3, epsilon=1.0)
    xt = np.array([0, 1, 2, 2, 1, 0, 0, 2])
    w = np.array([1, 3, 2, 1, 1, 2, 1, 4])
    repeated = np.repeat(xt, w)
    for method in ("inversion", "mle"):
        np.testing.assert_allclose(
            estimate_frequencies(xt, mech, method=method, weights=w),
            estimate_frequencies(repeated, mech, method=method),
            atol=1e-9,
        )
        np.testing.assert_array_equal(
            estimate_frequencies(xt, mech, method=method, weights=np.ones(8)),
            estimate_frequencies(xt, mech, method=method),
        )


def test_mle_raises_convergence_error_rather_than_returning_garbage():
    # data whose inversion estimate leaves the simplex, so EM really has to iterate
    mech = RandomizedResponse(5, epsilon=1.0)
    rng = np.random.default_rng(3)
    xt = mech.release(rng.choice(5, size=500, p=[0.5, 0.3, 0.2, 0.0, 0.0]), rng)
    with pytest.raises(ConvergenceError, match="max_iter=3"):
        estimate_frequencies(xt, mech, method="mle", max_iter=3)


def test_simplex_mle_newton_and_em_agree_and_estimate_frequencies_is_its_newton():
    """One solver: estimate_frequencies(method="mle") off the square shortcut is simplex_mle's Newton
    method on the released values' rows of P; its EM (the large-k path) reaches the same certified gap."""
    from fedrr.estimators._frequencies import simplex_mle

    mech = RandomizedResponse(5, epsilon=1.0)
    rng = np.random.default_rng(3)
    xt = mech.release(rng.choice(5, size=500, p=[0.5, 0.3, 0.2, 0.0, 0.0]), rng)
    counts = np.bincount(xt, minlength=5).astype(float)
    L = np.log(mech.matrix[counts > 0])
    newton, _ = simplex_mle(L, counts[counts > 0], tol=1e-10, max_iter=10_000, method="newton")
    em, _ = simplex_mle(L, counts[counts > 0], tol=1e-9, max_iter=200_000, method="em")
    np.testing.assert_array_equal(estimate_frequencies(xt, mech, method="mle"), newton)
    f = counts / counts.sum()
    for p in (newton, em):
        assert np.max(mech.matrix.T @ (f / (mech.matrix @ p))) - 1 <= 1e-9
    np.testing.assert_allclose(em, newton, atol=1e-4)
    with pytest.raises(ValidationError, match="method"):
        simplex_mle(L, counts[counts > 0], tol=1e-10, max_iter=10, method="bfgs")


# --- simplex projection and warner_estimate -----------------------------------------------------


def test_project_to_simplex_satisfies_optimality_conditions():
    rng = np.random.default_rng(0)
    V = rng.normal(0, 1, size=(300, 6)) * rng.choice([0.1, 1, 10], size=(300, 1))
    W = project_to_simplex(V)
    assert W.shape == V.shape
    for v, w in zip(V, W):
        assert np.all(w >= 0) and w.sum() == pytest.approx(1.0, abs=1e-12)
        # Euclidean projection ⇔ w = max(v − θ, 0) for one θ: v_j − w_j = θ on the support, v_j ≤ θ off it
        pos = w > 0
        theta = v[pos] - w[pos]
        assert np.ptp(theta) < 1e-12
        assert np.all(v[~pos] <= theta[0] + 1e-12)
    p = rng.dirichlet(np.ones(6))
    np.testing.assert_allclose(project_to_simplex(p), p, atol=1e-15)


def test_warner_estimate_vectorises_and_rejects_non_invertible():
    f = np.array([0.2, 0.5, 0.8])
    np.testing.assert_allclose(warner_estimate(f, 0.2, 0.2), (f - 0.2) / 0.6, rtol=1e-15)
    with pytest.raises(ValidationError) as ei:
        warner_estimate(0.5, 0.4, 0.6)
    assert ei.value.field == "p10"


# --- the README demo (simulations/demo_frequencies.py) -------------------------------------------


def _load_demo():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "simulations" / "demo_frequencies.py"
    spec = importlib.util.spec_from_file_location("demo_frequencies", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_demo_frequencies_runs_and_debiasing_helps(tmp_path, capsys):
    import csv

    demo = _load_demo()
    n, seed = 20_000, 1
    rows = demo.main(["--out", str(tmp_path), "--n", str(n), "--seed", str(seed)])
    out = capsys.readouterr().out
    assert "naive L1" in out and "debiased L1" in out
    assert (tmp_path / "accuracy_vs_epsilon.png").stat().st_size > 10_000
    with open(tmp_path / "results.csv") as fh:
        assert fh.readline().startswith("# command: python ")  # the CSV names the command that made it
        table = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    assert len(table) == 2 * len(demo.EPSILONS) == len(rows)
    assert {float(r["epsilon"]) for r in table} == set(demo.EPSILONS)
    # reproducible from the one seed
    assert [r["inversion_l1"] for r in demo.run(2000, 5)] == [r["inversion_l1"] for r in demo.run(2000, 5)]
    # Against theory, from the same population (re-derived from the seed): the naive error is the
    # deterministic bias ‖Pπ − π‖₁ up to release noise, the debiased one is ≈ its expected value.
    # Bound: a sum of |N(0, s_j²)| exceeds c·Σ s_j√(2/π) with prob ≤ P(|N(0,1)| > c√(2/π)) ≈ 1e-5
    # at c = 5.5; 24 such checks -> overall level < 1e-3.
    pop = demo.make_population(n, np.random.default_rng(np.random.SeedSequence(seed).spawn(1 + len(demo.EPSILONS))[0]))
    c = 5.5
    for r in rows:
        mech = RandomizedResponse(r["k"], epsilon=r["epsilon"])
        P = mech.matrix
        pi = np.bincount(pop[r["attribute"]], minlength=r["k"]) / n
        bias = np.abs(P @ pi - pi).sum()
        sd_f = np.sqrt(np.maximum(np.diag(np.diag(P @ pi) - P @ np.diag(pi) @ P.T), 0) / n)
        assert abs(r["naive_l1"] - bias) <= c * sd_f.sum() * math.sqrt(2 / math.pi), r
        assert r["inversion_l1"] <= c * r["expected_debiased_l1"], r
        if r["epsilon"] <= 2:
            assert r["inversion_l1"] < r["naive_l1"], r


def test_the_deconvolution_factor_is_one_at_the_mle_and_the_same_in_a_batch():
    """``deconvolution_factor`` (the EM update both ``simplex_mle`` and spread-EM's learned prior
    take): at an interior maximum-likelihood π every state's factor is Σw (the KKT condition), away
    from it not; and a batch of distributions under one matrix gives each one's factor."""
    from fedrr.estimators._frequencies import deconvolution_factor

    rng = np.random.default_rng(5)
    mech = TransitionMatrix(np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.3], [0.1, 0.2, 0.6]]))
    x = mech.release(rng.choice(3, size=20_000, p=[0.5, 0.3, 0.2]), rng=rng)
    counts = np.bincount(x, minlength=3).astype(float)
    pi = estimate_frequencies(x, mech, method="mle")
    assert np.all(pi > 0.05)  # interior: the inversion is the MLE
    np.testing.assert_allclose(deconvolution_factor(pi, mech.matrix, counts), counts.sum(), rtol=1e-12)
    assert np.max(np.abs(deconvolution_factor(np.full(3, 1 / 3), mech.matrix, counts) / counts.sum() - 1)) > 0.05
    pis, cs = rng.dirichlet(np.ones(3), 4), rng.integers(1, 50, (4, 3)).astype(float)
    batch = deconvolution_factor(pis, mech.matrix, cs)
    np.testing.assert_allclose(batch, [deconvolution_factor(p, mech.matrix, c) for p, c in zip(pis, cs)], rtol=1e-14)
