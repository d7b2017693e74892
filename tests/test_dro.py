"""Wasserstein DRO learners (Farokhi 2020): the Theorem-6 SDP equals its SOCP form, ρ="auto" equals
hand-computed radii, ρ → 0 recovers the unregularised fits, the squared-loss Lipschitz constant
is valid and tight, scikit-learn's estimator checks pass, and bad input raises precise errors."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
import scipy.linalg as sla
from scipy.optimize import linprog
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.utils.estimator_checks import parametrize_with_checks

from fedrr.errors import ConvergenceError, ValidationError
from fedrr.estimators import (
    GaussianDROLinearRegression,
    WassersteinDROLogisticRegression,
    WassersteinDRORegression,
    noise_radius,
    wasserstein_radius,
)
from fedrr.estimators._dro_radius import zeta
from fedrr.estimators._dro_sdp import gaussian_dro_objective, solve_problem, solve_sdp, solve_socp
from fedrr.mechanisms import GaussianMechanism, LaplaceMechanism, RandomizedResponse, RecordMechanism


def _regression(rng, n=80, p=4, noise=0.1):
    X = rng.uniform(0, 1, size=(n, p))
    y = np.clip(0.5 + (X - 0.5) @ rng.normal(scale=0.3, size=p) + noise * rng.normal(size=n), 0, 1)
    return X, y


def _gaussian_problem(rng, p_x, n=40):
    X = rng.normal(size=(n, p_x)) @ rng.normal(size=(p_x, p_x))
    y = X @ rng.normal(size=p_x) + rng.normal(size=n) + 3.0
    xi = np.column_stack([X, y])
    return X, y, xi.mean(0), np.cov(xi, rowvar=False)


# --------------------------------------------------------------------------- Gaussian DRO: SDP == SOCP


@pytest.mark.parametrize(
    "p_x, rho, fit_intercept",
    [
        (1, 0.3, True),
        (3, 0.05, True),
        (4, 1.0, True),
        (6, 25.0, True),
        (5, 400.0, True),
        (8, 3e4, True),
        (3, 2.0, False),
        (5, 150.0, False),
    ],
)
def test_sdp_equals_socp(p_x, rho, fit_intercept):
    rng = np.random.default_rng(100 + p_x)
    _, _, mu, Sigma = _gaussian_problem(rng, p_x)
    A1, B1, J1, _ = solve_sdp(mu, Sigma, rho, fit_intercept=fit_intercept)
    A2, B2, J2, _ = solve_socp(mu, Sigma, rho, fit_intercept=fit_intercept)
    assert abs(J1 - J2) <= 1e-5 * max(1.0, abs(J2))
    np.testing.assert_allclose(A1, A2, rtol=0, atol=1e-5)
    assert abs(B1 - B2) <= 1e-5 * max(1.0, abs(B2))
    # the SOCP's reported value is (★) at its own solution, and the SDP's value is (★) at the SDP's solution
    assert abs(J2 - gaussian_dro_objective(A2, B2, mu, Sigma, rho)) <= 1e-9 * J2
    assert abs(J1 - gaussian_dro_objective(A1, B1, mu, Sigma, rho)) <= 1e-5 * J1


def test_gaussian_worst_case_formula_by_construction():
    """(★) checked without any solver: the Gaussian G* built from the Minkowski-tight perturbation
    has W₂(G*, D̂) = ρ (Gelbrich formula, eq 11) and E_G* ℓ = (★); random covariances on the sphere
    W₂ = ρ never do better."""
    rng = np.random.default_rng(7)
    _, _, mu, Sigma = _gaussian_problem(rng, 3)
    rho, A, B = 0.7, rng.normal(size=3), 0.4
    v = np.append(A, -1.0)
    q = v @ Sigma @ v
    u = v / np.linalg.norm(v)
    # ξ' = ξ + Δ, Δ = ρ u vᵀ(ξ − μ)/√q  ⇒  ξ' − μ = (I + ρ u vᵀ/√q)(ξ − μ)
    T = np.eye(4) + rho * np.outer(u, v) / math.sqrt(q)
    S_star = T @ Sigma @ T.T

    def w2(S):
        r = sla.sqrtm(Sigma)
        return math.sqrt(max(np.trace(S + Sigma - 2 * np.real(sla.sqrtm(r @ S @ r))), 0.0))

    assert w2(S_star) == pytest.approx(rho, rel=1e-6)
    J_star = v @ S_star @ v + (v @ mu + B) ** 2
    assert J_star == pytest.approx(gaussian_dro_objective(A, B, mu, Sigma, rho), rel=1e-10)
    for _ in range(200):  # random transports T = I + E, scaled so that the Gelbrich distance is ρ
        E = rng.normal(size=(4, 4))
        lo, hi = 0.0, 10.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            (lo, hi) = (mid, hi) if w2((np.eye(4) + mid * E) @ Sigma @ (np.eye(4) + mid * E).T) < rho else (lo, mid)
        S = (np.eye(4) + lo * E) @ Sigma @ (np.eye(4) + lo * E).T
        assert v @ S @ v + (v @ mu + B) ** 2 <= J_star * (1 + 1e-9)


def test_gaussian_estimator_methods_agree_and_expose_regularizer():
    rng = np.random.default_rng(3)
    X, y, _, _ = _gaussian_problem(rng, 5, n=60)
    a = GaussianDROLinearRegression(rho=2.0).fit(X, y)
    b = GaussianDROLinearRegression(rho=2.0, method="sdp").fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-5)
    assert a.intercept_ == pytest.approx(b.intercept_, abs=1e-5)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-5)
    # eq (12): objective = empirical Gaussian loss + λ(A), λ(A) = f(A) − vᵀΣ̂v
    xi = np.column_stack([X, y])
    v = np.append(a.coef_, -1.0)
    emp = v @ np.cov(xi, rowvar=False) @ v + (v @ xi.mean(0) + a.intercept_) ** 2
    assert a.objective_ == pytest.approx(emp + a.regularizer_, rel=1e-10)
    assert a.regularizer_ > 0


# --------------------------------------------------------------------------- the radius


def test_rho_auto_laplace_by_hand():
    p, eps = 6, 2.0
    X, y = _regression(np.random.default_rng(0), p=p)
    # one scalar Laplace mechanism per column (L1 sensitivity 1 ⇒ b = 1/ε)
    m = WassersteinDRORegression(mechanism=LaplaceMechanism(eps, 0.0, 1.0)).fit(X, y)
    assert m.rho_parts_ == {"zeta": 0.0, "noise": pytest.approx(math.sqrt(2 * p) * 1.0 / eps, rel=1e-12)}
    # Farokhi's Thm 1 calibration on the whole block: Δ = (x̄ − x̲) p_x, b = Δ/ε ⇒ ρ = √(2 p_x) Δ/ε (Thm 3)
    block = LaplaceMechanism(eps, np.zeros(p), np.ones(p))
    m = WassersteinDRORegression(mechanism=block).fit(X, y)
    assert m.rho_ == pytest.approx(math.sqrt(2 * p) * p / eps, rel=1e-12)


def test_rho_auto_gaussian_by_hand():
    p, eps, delta = 5, 3.0, 1e-2
    X, y = _regression(np.random.default_rng(1), p=p)
    far = GaussianMechanism(eps, delta, np.zeros(p), np.ones(p), calibration="farokhi")
    hand = math.sqrt(2 * math.log(1.25 / delta) * p) * p / eps  # Thm 3 with p → p_x, Δ = p_x
    for est in (
        WassersteinDRORegression(mechanism=far),
        WassersteinDROLogisticRegression(mechanism=far),
        GaussianDROLinearRegression(mechanism=far),
    ):
        yy = (y > np.median(y)).astype(int) if isinstance(est, WassersteinDROLogisticRegression) else y
        est.fit(X, yy)
        assert est.rho_ == pytest.approx(hand, rel=1e-12)
        assert est.rho_parts_["noise"] == pytest.approx(hand, rel=1e-12)
    ana = GaussianMechanism(eps, delta, np.zeros(p), np.ones(p))  # fedrr's analytic calibration: its own σ
    m = WassersteinDRORegression(mechanism=ana).fit(X, y)
    assert m.rho_ == pytest.approx(math.sqrt(p) * ana.sigma, rel=1e-12)
    assert ana.sigma < far.sigma / 2  # the analytic σ is smaller (L2 sensitivity √p, exact ε)


def test_rho_auto_record_mechanism_and_zeta():
    mix = RecordMechanism([LaplaceMechanism(1.0, 0.0, 1.0), GaussianMechanism(2.0, 1e-3, [0.0, 0.0], [1.0, 2.0])])
    g = mix.fields[1].mechanism
    assert noise_radius(mix, 3) == pytest.approx(math.sqrt(2 * 1.0**2 + 2 * g.sigma**2), rel=1e-12)
    # ζ(β) of Thm 2 with explicit constants, both branches, p = p_x + 1
    c1, c2, a, beta = 2.0, 0.5, 1.5, 0.05
    L = math.log(c1 / beta)
    assert zeta(beta, 1000, 4, (c1, c2, a)) == pytest.approx((L / (c2 * 1000)) ** (1 / 4))
    assert zeta(beta, 3, 4, (c1, c2, a)) == pytest.approx((L / (c2 * 3)) ** (1 / a))
    rho, parts = wasserstein_radius(mix, 3, 1000, beta=beta, zeta_constants=(c1, c2, a))
    assert rho == pytest.approx(parts["zeta"] + parts["noise"]) and parts["zeta"] > 0


# --------------------------------------------------------------------------- ρ → 0 is the unregularised fit


def test_rho_zero_squared_is_least_squares():
    X, y = _regression(np.random.default_rng(2), n=120, p=5)
    ref = LinearRegression().fit(X, y)
    for rho in (0.0, 1e-9):
        m = WassersteinDRORegression(rho=rho).fit(X, y)
        np.testing.assert_allclose(m.coef_, ref.coef_, atol=1e-6)
        assert m.intercept_ == pytest.approx(ref.intercept_, abs=1e-6)
    g = GaussianDROLinearRegression(rho=0.0).fit(X, y)
    np.testing.assert_allclose(g.coef_, ref.coef_, atol=1e-8)
    assert g.intercept_ == pytest.approx(ref.intercept_, abs=1e-8)
    # the SDP approaches it as ρ → 0 (at ρ = 0 its infimum over ξ is not attained: the SOCP is used)
    assert GaussianDROLinearRegression(rho=0.0, method="sdp").fit(X, y).method_ == "socp"
    g = GaussianDROLinearRegression(rho=1e-4, method="sdp").fit(X, y)
    np.testing.assert_allclose(g.coef_, ref.coef_, atol=1e-3)


def test_rho_zero_absolute_is_least_absolute_deviation():
    rng = np.random.default_rng(4)
    X, y = _regression(rng, n=60, p=3, noise=0.2)
    n, p = X.shape
    # LAD as an LP: min Σ(u⁺ + u⁻) s.t. Xθ + b + u⁻ − u⁺ = y   (variables θ, b free; u ≥ 0)
    c = np.r_[np.zeros(p + 1), np.ones(2 * n)]
    A_eq = np.hstack([X, np.ones((n, 1)), np.eye(n), -np.eye(n)])
    lp = linprog(c, A_eq=A_eq, b_eq=y, bounds=[(None, None)] * (p + 1) + [(0, None)] * (2 * n), method="highs")
    m = WassersteinDRORegression(loss="absolute", rho=0.0).fit(X, y)
    assert np.mean(np.abs(X @ m.coef_ + m.intercept_ - y)) == pytest.approx(lp.fun / n, rel=1e-7)
    np.testing.assert_allclose(np.r_[m.coef_, m.intercept_], lp.x[: p + 1], atol=1e-5)


def test_rho_zero_logistic_is_unpenalised_logistic_regression():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    y = np.where(rng.random(300) < 1 / (1 + np.exp(-(X @ [1.0, -0.5, 0.3, 0.0] + 0.2))), "yes", "no")
    ref = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(X, y)
    m = WassersteinDROLogisticRegression(rho=0.0).fit(X, y)
    np.testing.assert_allclose(m.coef_, ref.coef_, atol=1e-5)
    np.testing.assert_allclose(m.intercept_, ref.intercept_, atol=1e-5)
    assert list(m.classes_) == ["no", "yes"]
    np.testing.assert_array_equal(m.predict(X), ref.predict(X))
    np.testing.assert_allclose(m.predict_proba(X), ref.predict_proba(X), atol=1e-6)


def test_large_rho_gives_the_constant_predictors():
    X, y = _regression(np.random.default_rng(6), n=50, p=4)
    sq = WassersteinDRORegression(rho=1e3).fit(X, y)
    ab = WassersteinDRORegression(loss="absolute", rho=1e3).fit(X, y)
    assert np.max(np.abs(sq.coef_)) < 1e-7 and sq.intercept_ == pytest.approx(y.mean(), abs=1e-6)
    ys = np.sort(y)  # n = 50: every value between the 25th and 26th order statistics is a median
    assert np.max(np.abs(ab.coef_)) < 1e-7 and ys[24] - 1e-6 <= ab.intercept_ <= ys[25] + 1e-6
    g = GaussianDROLinearRegression(rho=1e3).fit(X, y)
    assert np.max(np.abs(g.coef_)) < 1e-3 and g.intercept_ == pytest.approx(y.mean(), abs=1e-3)


def test_logistic_penalty_shrinks_monotonically():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 3))
    y = (X @ [1.0, -1.0, 0.5] + rng.normal(size=200) > 0).astype(int)
    norms = [np.linalg.norm(WassersteinDROLogisticRegression(rho=r).fit(X, y).coef_) for r in (0.0, 0.05, 0.2, 1.0)]
    assert norms[0] > norms[1] > norms[2] > norms[3] == pytest.approx(0.0, abs=1e-7)


# --------------------------------------------------------------------------- the squared-loss constant


def test_squared_loss_lipschitz_constant_is_valid_and_tight():
    rng = np.random.default_rng(9)
    p = 4
    lo, hi = np.array([0.0, -1.0, 0.0, 2.0]), np.array([1.0, 1.0, 0.5, 3.0])
    ylo, yhi = -0.5, 1.5
    c, h = (lo + hi) / 2, (hi - lo) / 2
    Rx, Y = np.linalg.norm(h), yhi - ylo
    worst = 0.0
    for _ in range(300):
        theta = rng.normal(size=p) * rng.choice([0.1, 1.0, 10.0])
        b = rng.uniform(ylo, yhi) - theta @ c  # the constraint θᵀc + b ∈ [y_lower, y_upper]
        L = Rx * theta @ theta + Y * np.linalg.norm(theta)
        x1 = rng.uniform(lo, hi, size=(50, p))
        x2 = rng.uniform(lo, hi, size=(50, p))
        yy = rng.uniform(ylo, yhi, size=50)
        d = 0.5 * ((x1 @ theta + b - yy) ** 2 - (x2 @ theta + b - yy) ** 2)
        ratio = np.abs(d) / np.linalg.norm(x1 - x2, axis=1)
        assert np.all(ratio <= L * (1 + 1e-12))
        worst = max(worst, ratio.max() / L)
    # tight: θ ∝ h, b at the low end, y at the high end, at the vertex c − h: slope |r|‖θ‖ → L
    theta = -h.copy()
    b = ylo - theta @ c
    x = c - h * np.sign(theta)  # = c + h, so θᵀ(x − c) = −‖θ‖‖h‖; r = θᵀx + b − y_upper = −(‖θ‖R_x + Y)
    r = theta @ x + b - yhi
    assert abs(r) * np.linalg.norm(theta) == pytest.approx(Rx * theta @ theta + Y * np.linalg.norm(theta), rel=1e-12)
    assert 0.1 < worst <= 1.0


def test_remark2_constant_is_not_lipschitz_in_y_and_penalises_the_intercept():
    # (x, y) metric at θ = 0: ℓ = ½(b − y)² has slope |b − y| in y, but (X + 1 + Y)‖θ‖² = 0 without b
    b, y1, y2 = 0.2, 0.9, 0.8
    assert abs(0.5 * (b - y1) ** 2 - 0.5 * (b - y2) ** 2) / abs(y1 - y2) > 0.5
    X, y = _regression(np.random.default_rng(10), n=80, p=3)
    r2 = WassersteinDRORegression(rho=5.0, lipschitz="remark2").fit(X, y)
    box = WassersteinDRORegression(rho=5.0).fit(X, y)
    assert abs(box.intercept_ + box.coef_ @ X.mean(0) - y.mean()) < 1e-6  # no bias in the mean
    assert r2.intercept_ < 0.5 * y.mean()  # Remark 2 shrinks the intercept towards 0


def test_noisy_inputs_outside_the_box_are_accepted():
    rng = np.random.default_rng(11)
    X, y = _regression(rng, n=60, p=3)
    mech = GaussianMechanism(1.0, 1e-2, np.zeros(3), np.ones(3))
    Xt = mech.release(X, rng)
    assert np.any(Xt < 0) and np.any(Xt > 1)
    m = WassersteinDRORegression(mechanism=mech).fit(Xt, y)
    np.testing.assert_array_equal(m.input_bounds_[0], np.zeros(3))
    assert m.y_bounds_ == (y.min(), y.max())


# --------------------------------------------------------------------------- scikit-learn conventions


@parametrize_with_checks(
    [
        WassersteinDRORegression(rho=0.01),
        WassersteinDRORegression(loss="absolute", rho=0.01),
        WassersteinDROLogisticRegression(rho=0.01),
        GaussianDROLinearRegression(rho=0.01),
    ]
)
def test_sklearn_compatible(estimator, check):
    # Nothing is skipped or expected to fail. (check_array_api_input skips itself unless
    # SCIPY_ARRAY_API is set; the estimators are numpy/cvxpy-only.)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_binary_classifier_tag_and_label_values():
    assert WassersteinDROLogisticRegression().__sklearn_tags__().classifier_tags.multi_class is False
    X = np.random.default_rng(12).normal(size=(40, 2))
    y = np.where(X[:, 0] + 0.3 * np.random.default_rng(13).normal(size=40) > 0, 7, -3)
    m = WassersteinDROLogisticRegression(rho=0.01).fit(X, y)
    assert set(m.predict(X)) <= {7, -3} and m.coef_.shape == (1, 2) and m.intercept_.shape == (1,)


# --------------------------------------------------------------------------- errors


def _field(excinfo) -> str:
    return excinfo.value.field


def test_rho_auto_without_mechanism_names_mechanism():
    X, y = _regression(np.random.default_rng(14))
    for est in (WassersteinDRORegression(), WassersteinDROLogisticRegression(), GaussianDROLinearRegression()):
        yy = (y > 0.5).astype(int) if isinstance(est, WassersteinDROLogisticRegression) else y
        with pytest.raises(ValidationError, match="mechanism") as ei:
            est.fit(X, yy)
        assert _field(ei) == "mechanism"


@pytest.mark.parametrize("rho", [-0.1, float("nan"), float("inf"), "big", True, None])
def test_bad_rho(rho):
    X, y = _regression(np.random.default_rng(15))
    with pytest.raises(ValidationError) as ei:
        WassersteinDRORegression(rho=rho).fit(X, y)
    assert _field(ei) == "rho"


def test_bad_parameters_are_named():
    X, y = _regression(np.random.default_rng(16))
    cases = [
        (WassersteinDRORegression(loss="huber", rho=0.1), "loss"),
        (WassersteinDRORegression(rho=0.1, beta=1.5), "beta"),
        (WassersteinDRORegression(rho=0.1, fit_intercept="yes"), "fit_intercept"),
        (WassersteinDRORegression(rho=0.1, solver="NOPE"), "solver"),
        (WassersteinDRORegression(loss="absolute", rho=0.1, lipschitz="remark2"), "lipschitz"),
        (WassersteinDRORegression(rho=0.1, y_lower=1.0, y_upper=0.0), "y_upper"),
        (WassersteinDRORegression(rho=0.1, input_bounds=(1.0, 0.0)), "input_bounds"),
        (WassersteinDRORegression(mechanism=GaussianMechanism(1.0, 1e-2, np.zeros(3), np.ones(3))), "mechanism"),
        (WassersteinDRORegression(mechanism="gaussian"), "mechanism"),
        (WassersteinDRORegression(mechanism=RandomizedResponse(2, epsilon=1.0)), "mechanism"),
        (
            WassersteinDRORegression(
                mechanism=RecordMechanism(LaplaceMechanism(1.0), RandomizedResponse(2, epsilon=1.0), n_features=4)
            ),
            "mechanism",
        ),
        (GaussianDROLinearRegression(rho=0.1, method="qp"), "method"),
        (
            WassersteinDRORegression(rho="auto", mechanism=LaplaceMechanism(1.0), zeta_constants=(1.0, 1.0, 0.5)),
            "zeta_constants[a]",
        ),
    ]
    for est, field in cases:
        with pytest.raises(ValidationError) as ei:
            est.fit(X, y)
        assert _field(ei) == field, (est, ei.value)


def test_targets_outside_declared_bounds():
    X, y = _regression(np.random.default_rng(17))
    y = y.copy()
    y[3] = 1.2
    with pytest.raises(ValidationError, match=r"\[y_lower, y_upper\].*index 3") as ei:
        WassersteinDRORegression(rho=0.1, y_lower=0.0, y_upper=1.0).fit(X, y)
    assert _field(ei) == "y"
    WassersteinDRORegression(rho=0.1, y_lower=0.0, y_upper=1.0, loss="absolute").fit(X, y)  # bounds unused


def test_shapes_and_nan():
    X, y = _regression(np.random.default_rng(18))
    est = WassersteinDRORegression(rho=0.1)
    bad = [((X[:, 0], y), "X"), ((X, y[:-1]), "X"), ((X, np.c_[y, y]), "y")]
    Xn = X.copy()
    Xn[2, 1] = np.nan
    yn = y.copy()
    yn[5] = np.nan
    bad += [((Xn, y), "X"), ((X, yn), "y")]
    for args, field in bad:
        with pytest.raises(ValidationError) as ei:
            est.fit(*args)
        assert _field(ei) == field, (args[0].shape, ei.value)
    est.fit(X, y)
    with pytest.raises(ValidationError, match="features") as ei:
        est.predict(X[:, :2])
    assert _field(ei) == "X"
    with pytest.raises(ValidationError, match="n_samples = 1"):
        GaussianDROLinearRegression(rho=0.1).fit(X[:1], y[:1])
    with pytest.raises(ValidationError, match="Only binary classification") as ei:
        WassersteinDROLogisticRegression(rho=0.1).fit(X, np.arange(len(y)) % 3)
    assert _field(ei) == "y"
    with pytest.raises(ValidationError, match="1 class"):
        WassersteinDROLogisticRegression(rho=0.1).fit(X, np.zeros(len(y)))


def test_solver_failure_is_a_convergence_error_not_a_zero_model():
    X, y = _regression(np.random.default_rng(19))
    for est in (
        WassersteinDRORegression(rho=0.1, solver_options={"max_iter": 1}),
        WassersteinDROLogisticRegression(rho=0.1, solver_options={"max_iter": 1}),
        GaussianDROLinearRegression(rho=0.1, method="sdp", solver_options={"max_iter": 1}),
    ):
        yy = (y > 0.5).astype(int) if isinstance(est, WassersteinDROLogisticRegression) else y
        with pytest.raises(ConvergenceError):
            est.fit(X, yy)
        assert not hasattr(est, "coef_")
    x = cp.Variable()
    with pytest.raises(ConvergenceError, match="infeasible"):
        solve_problem(cp.Problem(cp.Minimize(x), [x >= 1, x <= 0]), "CLARABEL", None, "test")
