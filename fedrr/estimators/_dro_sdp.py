"""Exact Gaussian Wasserstein DRO for linear regression (Farokhi 2020, §4): the SDP of Theorem 6
and an equivalent second-order cone program, plus the cvxpy status handling shared by the W-DRO
estimators.

Problem (10): min_{A,B} sup { E_G (Ax + B − y)² : G Gaussian, E_G ξ = μ̂, W₂(G, D̂) ≤ ρ },
ξ = (x, y), D̂ = N(μ̂, Σ̂). With v = [A, −1] the loss is vᵀSv + (vᵀμ̂ + B)² for covariance S of G.

Equivalence used by ``method="socp"``. For same-mean Gaussians W₂(G, D̂) ≤ ρ iff G is the law
of ξ + Δ with ξ ~ D̂ and E‖Δ‖² ≤ ρ² jointly Gaussian (Gelbrich / Givens-Shortt [36, Prop 7]).
Then √(vᵀSv) = ‖vᵀ(ξ − μ̂) + vᵀΔ‖_{L²} ≤ √(vᵀΣ̂v) + ‖v‖₂ ρ (Minkowski, Cauchy-Schwarz), with
equality at Δ = ρ·(v/‖v‖)·vᵀ(ξ − μ̂)/√(vᵀΣ̂v), which keeps G Gaussian with mean μ̂. Hence

    sup_G E_G ℓ = (√(vᵀΣ̂v) + ρ‖v‖₂)² + (vᵀμ̂ + B)²,                          (★)

i.e. f(A) of §4 equals (√(vᵀΣ̂v) + ρ‖v‖)² and λ(A) of eq (12) is f(A) − vᵀΣ̂v. With a free
intercept the second term is 0 at B = −vᵀμ̂ = μ̂_y − Aμ̂_x, and minimising (★) over A is the SOCP
min ‖Σ̂^{1/2}v‖ + ρ‖v‖ (Σ̂^{1/2} any square-root factor). Without an intercept it is
min ‖(t, vᵀμ̂)‖ s.t. t ≥ ‖Σ̂^{1/2}v‖ + ρ‖v‖. The tests check (★) against the SDP to 1e-5.
Note the transport here moves (x, y) jointly (‖v‖ includes the −1), as in Theorem 6.

Scaling. Both programs are solved for the data scaled by s = max(ρ, √trace Σ̂): Σ̂/s², μ̂/s,
ρ/s, which leaves A unchanged and divides the objective by s². At the paper's radii
(ρ ≫ spread of the data) the unscaled SDP is badly conditioned; scaled, Clarabel solves it.
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..errors import ConvergenceError, ValidationError

#: for the SDP: tighter than Clarabel's defaults (1e-8) so that it agrees with the SOCP to 1e-5 in
#: coefficients (the SOCP path is polished by Newton's method instead)
SDP_CLARABEL_DEFAULTS = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-9}


def solve_problem(
    problem: cp.Problem, solver: str, solver_options: dict | None, what: str, defaults: dict | None = None
) -> float:
    """Solve a cvxpy problem; raise ConvergenceError unless it reaches an (approximately) optimal point.

    ``defaults`` are solver options used for Clarabel unless ``solver_options`` overrides them.
    Status "optimal_inaccurate" gives a ConvergenceWarning; infeasible, unbounded, errors and
    missing values raise ConvergenceError."""
    if not isinstance(solver, str) or solver.upper() not in cp.installed_solvers():
        raise ValidationError(
            "solver", f"must be one of the installed cvxpy solvers {cp.installed_solvers()}, got {solver!r}"
        )
    solver = solver.upper()
    opts = dict(defaults or {}) if solver == "CLARABEL" else {}
    if solver_options is not None:
        if not isinstance(solver_options, dict):
            raise ValidationError("solver_options", f"must be a dict or None, got {type(solver_options).__name__}")
        opts.update(solver_options)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # cvxpy's "may be inaccurate": handled below
            problem.solve(solver=solver, **opts)
    except cp.error.SolverError as exc:
        raise ConvergenceError(f"{what}: solver {solver} failed ({exc})") from exc
    except (TypeError, ValueError) as exc:  # the solver refused an option (unknown name, wrong type)
        if not solver_options:
            raise
        raise ValidationError("solver_options", f"{solver} rejected the options {solver_options!r}: {exc}") from None
    status = problem.status
    if status == cp.OPTIMAL_INACCURATE:
        warnings.warn(
            f"{what}: solver {solver} returned status {status!r}; the model may be inaccurate",
            ConvergenceWarning,
            stacklevel=3,
        )
    elif status != cp.OPTIMAL:
        raise ConvergenceError(f"{what}: solver {solver} returned status {status!r} (no model returned)")
    if problem.value is None or not np.isfinite(problem.value):
        raise ConvergenceError(f"{what}: solver {solver} returned no finite objective value (status {status!r})")
    return float(problem.value)


def _values(*variables: cp.Variable, what: str) -> list[np.ndarray]:
    out = []
    for v in variables:
        if v.value is None or not np.all(np.isfinite(v.value)):
            raise ConvergenceError(f"{what}: solver returned no finite value for {v.name()}")
        out.append(np.asarray(v.value, dtype=float))
    return out


def sqrt_factor(Sigma: np.ndarray) -> np.ndarray:
    """Symmetric PSD square root of a covariance (eigenvalues clipped at 0)."""
    w, V = np.linalg.eigh(0.5 * (Sigma + Sigma.T))
    return (V * np.sqrt(np.clip(w, 0.0, None))) @ V.T


def gaussian_dro_objective(A: np.ndarray, B: float, mu: np.ndarray, Sigma: np.ndarray, rho: float) -> float:
    """(★): the worst-case expected squared loss of x ↦ Ax + B over the Gaussian W₂-ball."""
    v = np.append(np.asarray(A, float), -1.0)
    q = max(float(v @ Sigma @ v), 0.0)
    return (np.sqrt(q) + rho * np.linalg.norm(v)) ** 2 + (float(v @ mu) + B) ** 2


def _scale(mu, Sigma, rho):
    s = max(rho, float(np.sqrt(max(np.trace(Sigma), 0.0))), 1e-300)
    return s, mu / s, Sigma / s**2, rho / s


def solve_socp(mu, Sigma, rho, *, fit_intercept=True, solver="CLARABEL", solver_options=None, polish=True):
    """Minimise (★) as an SOCP (then polish with Newton's method where (★) is smooth).

    Returns (A, B, objective, seconds)."""
    t0 = time.perf_counter()
    s, mu_s, Sig_s, rho_s = _scale(mu, Sigma, rho)
    p = Sigma.shape[0]
    L = sqrt_factor(Sig_s)
    A = cp.Variable(p - 1, name="A")
    v = cp.hstack([A, np.array([-1.0])])
    spread = cp.norm(L @ v, 2) + rho_s * cp.norm(v, 2)
    if fit_intercept:
        prob = cp.Problem(cp.Minimize(spread))
    else:
        t = cp.Variable(name="t")
        prob = cp.Problem(cp.Minimize(cp.norm(cp.hstack([t, v @ mu_s]), 2)), [t >= spread])
    solve_problem(prob, solver, solver_options, "GaussianDROLinearRegression (socp)")
    (A_hat,) = _values(A, what="GaussianDROLinearRegression (socp)")
    if polish:
        A_hat = _newton_polish(A_hat, mu_s, Sig_s, rho_s, 0.0 if fit_intercept else 1.0)
    B_hat = float(mu[-1] - A_hat @ mu[:-1]) if fit_intercept else 0.0
    return A_hat, B_hat, gaussian_dro_objective(A_hat, B_hat, mu, Sigma, rho), time.perf_counter() - t0


def solve_sdp(mu, Sigma, rho, *, fit_intercept=True, solver="CLARABEL", solver_options=None):
    """Theorem 6 (13a-b) in cvxpy, on the rescaled data. Returns (A, B, objective, seconds)."""
    t0 = time.perf_counter()
    s, mu_s, Sig_s, rho_s = _scale(mu, Sigma, rho)
    p = Sigma.shape[0]
    Sh = sqrt_factor(Sig_s)
    A = cp.Variable(p - 1, name="A")
    B = cp.Variable(name="B") if fit_intercept else None
    xi = cp.Variable(name="xi")
    Z = cp.Variable((p, p), symmetric=True, name="Z")
    v = cp.reshape(cp.hstack([A, np.array([-1.0])]), (p, 1), order="C")
    lmi = cp.bmat(
        [
            [Z, xi * Sh, np.zeros((p, 1))],
            [xi * Sh, xi * np.eye(p), v],
            [np.zeros((1, p)), v.T, np.ones((1, 1))],
        ]
    )
    lmi = 0.5 * (lmi + lmi.T)
    mean_term = cp.square(v[:, 0] @ mu_s + (B if fit_intercept else 0.0))
    objective = xi * (rho_s**2 - np.trace(Sig_s)) + cp.trace(Z) + mean_term
    prob = cp.Problem(cp.Minimize(objective), [lmi >> 0])
    solve_problem(prob, solver, solver_options, "GaussianDROLinearRegression (sdp)", SDP_CLARABEL_DEFAULTS)
    vals = _values(A, *([B] if fit_intercept else []), what="GaussianDROLinearRegression (sdp)")
    A_hat = vals[0]
    B_hat = float(vals[1]) * s if fit_intercept else 0.0
    return A_hat, B_hat, float(prob.value) * s**2, time.perf_counter() - t0


def _newton_polish(A0, mu, Sigma, rho, c, max_iter=50):
    """Damped Newton on F(A) = (√q + ρ‖v‖)² + c (vᵀμ)², q = vᵀΣv, v = [A, −1]; F is smooth and
    strictly convex while q > 0. Returns A0 unchanged if that is not the case or F does not drop."""
    Sxx, sxy = Sigma[:-1, :-1], Sigma[:-1, -1]
    mx, my = mu[:-1], mu[-1]
    scale_q = max(np.trace(Sigma), 1e-300)

    def parts(A):
        q = A @ Sxx @ A - 2 * A @ sxy + Sigma[-1, -1]
        if q <= 1e-12 * scale_q:
            return None
        sq, sn = np.sqrt(q), np.sqrt(1.0 + A @ A)
        g = sq + rho * sn
        m = A @ mx - my
        F = g * g + c * m * m
        dq = 2 * (Sxx @ A - sxy)
        dg = dq / (2 * sq) + rho * A / sn
        Hg = Sxx / sq - np.outer(dq, dq) / (4 * q * sq) + rho * (np.eye(A.size) / sn - np.outer(A, A) / sn**3)
        grad = 2 * g * dg + 2 * c * m * mx
        H = 2 * np.outer(dg, dg) + 2 * g * Hg + 2 * c * np.outer(mx, mx)
        return F, grad, H

    A = np.asarray(A0, float).copy()
    cur = parts(A)
    if cur is None:
        return A0
    F0 = cur[0]
    for _ in range(max_iter):
        F, grad, H = cur
        if np.max(np.abs(grad)) <= 1e-13 * (1.0 + F):
            break
        try:
            step = np.linalg.solve(H, -grad)
        except np.linalg.LinAlgError:
            return A0
        t, dec = 1.0, grad @ step
        if not dec < 0:
            break
        while t > 1e-10:
            nxt = parts(A + t * step)
            if nxt is not None and nxt[0] <= F + 1e-4 * t * dec:
                break
            t *= 0.5
        else:
            break
        A, cur = A + t * step, nxt
    return A if cur[0] <= F0 else A0
