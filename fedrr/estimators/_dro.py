"""Wasserstein distributionally-robust learners for locally-private inputs (Farokhi 2020).

The server sees (x̃ᵢ, yᵢ) with x̃ = x + w (eq 3a-b: LDP noise on the inputs only). The clean
distribution P lies, w.h.p., in a Wasserstein ball of radius ρ around the noisy empirical
distribution (Thm 2), so the learner minimises the worst-case expected loss over that ball
(eq 6) or its Lipschitz relaxation (Prop 1, eq 8):

    min_θ  (1/n) Σ ℓ(θ; x̃ᵢ, yᵢ) + ρ · L(θ),

with L(θ) the Lipschitz constant of the loss in x under the transport cost. ``rho="auto"``
takes ρ from the mechanism (see :mod:`fedrr.estimators._dro_radius`).

Transport cost (all three estimators in this module): c((x, y), (x', y')) = ‖x − x'‖₂ if
y = y', +∞ otherwise — the ball moves inputs only, because the noise does (ỹ = y, eq 3b;
the coupling (x + w, y) ↔ (x, y) behind the noise term of Thms 2-5 leaves y in place). The
dual of ‖·‖₂ is ‖·‖₂. Consequence: L(θ) involves the slope coefficients only; the intercept is
never penalised. (``GaussianDROLinearRegression`` follows Theorem 6, which moves (x, y).)

Estimators: :class:`WassersteinDRORegression` (squared / absolute loss),
:class:`WassersteinDROLogisticRegression`, :class:`GaussianDROLinearRegression` (§4, Thm 6).
"""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._params import Boolean, Interval, Options, validate_estimator
from .._validation import as_float_array
from ..errors import ValidationError
from ._dro_radius import input_box, wasserstein_radius
from ._dro_sdp import _values, solve_problem, solve_sdp, solve_socp
from ._sklearn import validate

__all__ = ["WassersteinDRORegression", "GaussianDROLinearRegression"]

LOSSES = ("squared", "absolute")
LIPSCHITZ = ("box", "remark2")
GAUSSIAN_METHODS = ("socp", "sdp")


# --------------------------------------------------------------------------- validation helpers

_validate = validate  # sklearn's validate_data, re-raised as ValidationError naming X or y

#: the conic solver works to absolute tolerances (~1e-8) and fails on inputs of 1e12 and more
#: (measured with Clarabel): the logistic fit rescales inputs larger than this (an exact equivalence)
RESCALE_ABOVE = 1e6


#: the radius: "auto" (from the mechanism, Thm 5) or a finite real number >= 0
RHO = [Options("auto"), Interval(float, 0, None, closed="left")]
#: the radius's confidence level 1 - β (rho="auto"): a real number in (0, 1)
BETA = [Interval(float, 0, 1, closed="neither")]


class _WassersteinBase(BaseEstimator):
    """Shared parameter validation (each class's ``_parameter_constraints``) and the radius."""

    _parameter_constraints: dict = {}

    def _params(self) -> dict:
        return validate_estimator(self)

    def _common_checks(self, n_samples: int, n_features: int, params: dict) -> None:
        rho, beta = params["rho"], params.get("beta", 0.05)
        if rho == "auto":
            self.rho_, self.rho_parts_ = wasserstein_radius(
                self.mechanism, n_features, n_samples, beta=beta, zeta_constants=getattr(self, "zeta_constants", None)
            )
        else:
            if self.mechanism is not None:  # still validate it: it also declares the input box
                input_box(self.mechanism, n_features)
            self.rho_, self.rho_parts_ = rho, {"given": rho}
        self.rho_ = float(self.rho_)


# --------------------------------------------------------------------------- regression


class WassersteinDRORegression(RegressorMixin, _WassersteinBase):
    r"""Linear regression trained on LDP-noised inputs with the Wasserstein-DRO regulariser of
    Farokhi (2020), eq (8): min_{θ,b} (1/n) Σ ℓ(θᵀx̃ᵢ + b, yᵢ) + ρ·L(θ).

    Parameters
    ----------
    loss : "squared" (ℓ = ½(θᵀx + b − y)², Remark 2) or "absolute" (ℓ = |θᵀx + b − y|).
    rho : "auto" (ρ from ``mechanism``, Thms 2-4) or a real number ≥ 0 (used as given).
    mechanism : the LaplaceMechanism / GaussianMechanism (width 1 = applied to each column, or
        width n_features) or RecordMechanism that noised the inputs. Needed for rho="auto";
        also declares the box of the *clean* inputs used by the squared-loss constant.
    beta : confidence parameter of ζ(β) (Thm 2). Only used when ``zeta_constants`` is given.
    zeta_constants : None (ζ = 0) or (c1, c2, a), the constants of Thm 2 — see dro_radius.
    fit_intercept : fit b (never penalised: the transport moves x only).
    y_lower, y_upper : bounds of the targets (squared loss). None: the observed min / max of y.
        Targets outside given bounds are rejected (y is not noised, so they must hold).
    input_bounds : (lower, upper) of the clean inputs for the squared-loss constant. Default: the
        mechanism's bounds; without a mechanism, the range of the training X.
    lipschitz : "box" (the constant derived below) or "remark2" (the paper's printed
        (X + 1 + Y)‖(θ, b)‖₂², penalising the intercept; for reproduction only). Squared loss only.
    solver, solver_options : cvxpy solver name and options (Clarabel by default).

    Lipschitz constants (transport cost ‖x − x'‖₂ with y fixed, dual norm ‖·‖₂)
    -----------------------------------------------------------------------------
    absolute loss: |ℓ(x, y) − ℓ(x', y)| ≤ |θᵀ(x − x')| ≤ ‖θ‖₂‖x − x'‖₂, so L(θ) = ‖θ‖₂,
    valid on all of ℝ^p (also at the noisy points). With unconstrained inputs the relaxation (8)
    is then exact: the worst case over the ball equals the regularised loss
    (Shafieezadeh-Abadeh, Kuhn & Esfahani 2019). In the (x, y) metric it would be ‖(θ, −1)‖₂.

    squared loss: the loss is not globally Lipschitz, so, as Remark 2 does, we bound its slope on
    the compact domain of the clean data — the box [lower, upper] of Assumption 2 with centre c,
    half-widths h, R_x = ‖h‖₂ — and targets in [y_lower, y_upper], Y = y_upper − y_lower.
    For x, x' in the box and the same y, with r = θᵀx + b − y,

        ℓ(x, y) − ℓ(x', y) = ½(r + r')·θᵀ(x − x')  ⇒  |Δℓ| ≤ max(|r|, |r'|)·‖θ‖₂·‖x − x'‖₂,

    and, adding the constraint θᵀc + b ∈ [y_lower, y_upper] (the prediction at the centre of the
    box lies in the target range; inactive for any sensible fit),

        |r| ≤ |θᵀ(x − c)| + |θᵀc + b − y| ≤ R_x‖θ‖₂ + Y.

    Hence L(θ) = ‖θ‖₂(R_x‖θ‖₂ + Y) = R_x‖θ‖₂² + Y‖θ‖₂: convex, free of b, zero at θ = 0 (where
    the loss does not depend on x), and attained when |θ| ∝ h and y, θᵀc + b sit at opposite
    ends of the target range. The fit solves
    min ½ mean(r̃²) + ρ(R_x‖θ‖₂² + Y‖θ‖₂) s.t. θᵀc + b ∈ [y_lower, y_upper] (only when ρ > 0;
    b = 0 when fit_intercept=False).

    Why not Remark 2's L = (X + 1 + Y)‖θ‖²_*: in the (x, y) metric it is not a Lipschitz
    constant (at θ = 0 the loss ½(b − y)² still has slope |b − y| ≤ Y in y, but the constant is
    0; the (x, y) analogue of the bound above is (R_x‖θ‖₂ + Y)·√(‖θ‖₂² + 1)), and its θ contains
    the intercept, so it shrinks b to 0 instead of towards ȳ.

    Caveat: Prop 1 needs the constant on the support of the noisy empirical distribution too; the
    noisy x̃ lie outside the box, where the squared loss is steeper. For the squared loss eq (8)
    is therefore the paper's relaxation on the clean domain, not a certificate. (With independent
    zero-mean noise, E_D ℓ = E_P ℓ + ½θᵀΣ_wθ: the noisy risk already over-estimates the clean one.)

    Attributes
    ----------
    coef_ (n_features,), intercept_ (float), rho_ (float), rho_parts_ ({"zeta", "noise"} for
    rho="auto", {"given"} otherwise), lipschitz_ (L(θ̂)), objective_ (optimal value of (8): the
    empirical loss plus ρL(θ̂)), input_bounds_ and y_bounds_ (the boxes used), n_features_in_.
    """

    def __init__(
        self,
        loss="squared",
        rho="auto",
        mechanism=None,
        beta=0.05,
        zeta_constants=None,
        fit_intercept=True,
        y_lower=None,
        y_upper=None,
        input_bounds=None,
        lipschitz="box",
        solver="CLARABEL",
        solver_options=None,
    ):
        self.loss = loss
        self.rho = rho
        self.mechanism = mechanism
        self.beta = beta
        self.zeta_constants = zeta_constants
        self.fit_intercept = fit_intercept
        self.y_lower = y_lower
        self.y_upper = y_upper
        self.input_bounds = input_bounds
        self.lipschitz = lipschitz
        self.solver = solver
        self.solver_options = solver_options

    _parameter_constraints = {
        "loss": [Options(*LOSSES)],
        "rho": RHO,
        "beta": BETA,
        "fit_intercept": [Boolean()],
        "lipschitz": [Options(*LIPSCHITZ)],
    }

    def fit(self, X, y):
        params = self._params()
        loss, lipschitz = params["loss"], params["lipschitz"]
        if lipschitz == "remark2" and loss != "squared":
            raise ValidationError("lipschitz", "'remark2' is only defined for loss='squared'")
        X, y = _validate(self, X, y, y_numeric=True, dtype=np.float64)
        n, p = X.shape
        self._common_checks(n, p, params)
        rho = self.rho_
        theta = cp.Variable(p, name="theta")
        b = cp.Variable(name="b") if self.fit_intercept else None
        bexpr = b if self.fit_intercept else 0.0
        cons = []
        what = f"WassersteinDRORegression(loss={loss!r})"
        if loss == "absolute":
            emp = cp.norm1(X @ theta + bexpr - y) / n
            pen = cp.norm(theta, 2)
            self.input_bounds_, self.y_bounds_ = None, None
        else:
            lo, hi = self._input_bounds(X, p)
            ylo, yhi = self._y_bounds(y)
            self.input_bounds_, self.y_bounds_ = (lo, hi), (ylo, yhi)
            # ½ mean r² through the R factor of [X, 1, y]/√n: p+2 terms instead of n
            cols = [X, np.ones((n, 1))] if self.fit_intercept else [X]
            Rf = np.linalg.qr(np.column_stack(cols + [y]) / math.sqrt(n), mode="r")
            w = cp.hstack(
                [theta] + ([cp.reshape(b, (1,), order="C")] if self.fit_intercept else []) + [np.array([-1.0])]
            )
            emp = 0.5 * cp.sum_squares(Rf @ w)
            if lipschitz == "box":
                c, Rx, Y = 0.5 * (lo + hi), 0.5 * float(np.linalg.norm(hi - lo)), yhi - ylo
                pen = Rx * cp.sum_squares(theta) + Y * cp.norm(theta, 2)
                if rho > 0:
                    cons = [theta @ c + bexpr >= ylo, theta @ c + bexpr <= yhi]
            else:
                Xmax = float(np.linalg.norm(np.maximum(np.abs(lo), np.abs(hi))))
                Ymax = max(abs(ylo), abs(yhi))
                pen = (Xmax + 1.0 + Ymax) * (cp.sum_squares(theta) + (cp.square(b) if self.fit_intercept else 0.0))
        prob = cp.Problem(cp.Minimize(emp + rho * pen if rho > 0 else emp), cons)
        value = solve_problem(prob, self.solver, self.solver_options, what)
        vals = _values(theta, *([b] if self.fit_intercept else []), what=what)
        self.coef_ = vals[0]
        self.intercept_ = float(vals[1]) if self.fit_intercept else 0.0
        self.lipschitz_ = float(pen.value)
        self.objective_ = value
        return self

    def _input_bounds(self, X, p):
        if self.input_bounds is not None:
            try:
                lo_raw, hi_raw = self.input_bounds
            except (TypeError, ValueError):
                raise ValidationError("input_bounds", "must be a pair (lower, upper)") from None
            lo = np.broadcast_to(as_float_array("input_bounds[0]", lo_raw, ndim=(0, 1)), (p,)).astype(float)
            hi = np.broadcast_to(as_float_array("input_bounds[1]", hi_raw, ndim=(0, 1)), (p,)).astype(float)
            if np.any(hi < lo):
                raise ValidationError("input_bounds", "upper must be >= lower for every feature")
            return lo, hi
        if self.mechanism is not None:
            return input_box(self.mechanism, p)
        return X.min(axis=0), X.max(axis=0)

    def _y_bounds(self, y):
        ylo = float(y.min()) if self.y_lower is None else float(as_float_array("y_lower", self.y_lower, ndim=0))
        yhi = float(y.max()) if self.y_upper is None else float(as_float_array("y_upper", self.y_upper, ndim=0))
        if yhi < ylo:
            raise ValidationError("y_upper", f"must be >= y_lower, got y_lower={ylo}, y_upper={yhi}")
        bad = (y < ylo) | (y > yhi)
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValidationError(
                "y",
                f"targets must lie in the declared bounds [y_lower, y_upper] = [{ylo}, {yhi}] "
                f"(targets are not noised); got {y[i]!r} at index {i}",
            )
        return ylo, yhi

    def predict(self, X):
        check_is_fitted(self, "coef_")
        X = _validate(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_


# --------------------------------------------------------------------------- Gaussian DRO (§4)


class GaussianDROLinearRegression(RegressorMixin, _WassersteinBase):
    """The exact Gaussian Wasserstein DRO of Farokhi (2020) §4, eq (10)-(13):
    min_{A,B} sup { E_G (Ax + B − y)² : G Gaussian, mean μ̂, W₂(G, D̂) ≤ ρ },
    D̂ = N(μ̂, Σ̂) fitted to the noisy (x̃, y) (Σ̂ with 1/(n − 1), as in the paper).

    method="socp" (default): the equivalent closed-form objective
    (√(vᵀΣ̂v) + ρ‖v‖₂)² + (vᵀμ̂ + B)², v = [A, −1] (derivation in :mod:`dro_sdp`), minimised
    as an SOCP and polished by Newton's method; ~0.02 s at p_x = 30.
    method="sdp": Theorem 6's SDP (13a-b) in cvxpy, rescaled (Σ̂/s², ρ/s, s = max(ρ, √tr Σ̂))
    so that it solves at the paper's radii; seconds at p_x = 30. For reproduction. At ρ = 0 the
    SDP's infimum over ξ is not attained (ξ → ∞), so ρ = 0 always uses the SOCP (see ``method_``).

    The ball moves (x, y) jointly, as in Theorem 6 (‖v‖ includes the −1). rho="auto" is the
    noise term √E‖w‖² of the mechanism (Thm 5, whose sampling term vanishes as n → ∞: ζ = 0).
    Without an intercept, B = 0 and the mean term stays in the objective.

    Attributes: coef_, intercept_, rho_, rho_parts_, objective_ (the worst-case expected loss
    (10) at the solution), regularizer_ (λ(A) of eq 12 = f(A) − vᵀΣ̂v), method_ (the method
    used), solve_seconds_.
    """

    def __init__(
        self, rho="auto", mechanism=None, method="socp", fit_intercept=True, solver="CLARABEL", solver_options=None
    ):
        self.rho = rho
        self.mechanism = mechanism
        self.method = method
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options

    _parameter_constraints = {"rho": RHO, "method": [Options(*GAUSSIAN_METHODS)], "fit_intercept": [Boolean()]}

    def fit(self, X, y):
        params = self._params()
        method = params["method"]
        X, y = _validate(self, X, y, y_numeric=True, dtype=np.float64)
        n, p = X.shape
        if n < 2:
            raise ValidationError("X", f"needs at least 2 samples to estimate a covariance; got n_samples = {n}")
        self._common_checks(n, p, params)
        xi = np.column_stack([X, y])
        mu = xi.mean(axis=0)
        Sigma = np.atleast_2d(np.cov(xi, rowvar=False, ddof=1))
        if method == "sdp" and self.rho_ == 0.0:
            method = "socp"  # at ρ = 0 the infimum over ξ in (13a) is not attained (ξ → ∞): use (★)
        solve = solve_sdp if method == "sdp" else solve_socp
        self.method_ = method
        A, B, obj, secs = solve(
            mu,
            Sigma,
            self.rho_,
            fit_intercept=self.fit_intercept,
            solver=self.solver,
            solver_options=self.solver_options,
        )
        self.coef_, self.intercept_ = A, float(B)
        self.objective_ = float(obj)
        v = np.append(A, -1.0)
        q = max(float(v @ Sigma @ v), 0.0)
        self.regularizer_ = float((math.sqrt(q) + self.rho_ * np.linalg.norm(v)) ** 2 - q)
        self.solve_seconds_ = secs
        return self

    def predict(self, X):
        check_is_fitted(self, "coef_")
        X = _validate(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_
