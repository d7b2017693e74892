"""Wasserstein DRO logistic regression on LDP-noised inputs (Farokhi 2020, eq 8 with the logistic
loss); it builds on the shared base and checks of :mod:`fedrr.estimators._dro`."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted

from .._params import Boolean
from ..errors import ValidationError
from ._dro import BETA, RESCALE_ABOVE, RHO, _validate, _WassersteinBase
from ._dro_sdp import _values, solve_problem


def binary_labels(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the two classes, index 0 or 1 of each label); a ValidationError naming y otherwise."""
    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise ValidationError("y", str(exc)) from exc
    y_type = type_of_target(y, input_name="y")
    classes, yi = np.unique(y, return_inverse=True)
    if y_type != "binary" or classes.size > 2:
        raise ValidationError(
            "y",
            f"Only binary classification is supported. The type of the target is {y_type} ({classes.size} classes)",
        )
    if classes.size < 2:
        raise ValidationError("y", f"needs exactly two classes; got 1 class ({classes[0]!r})")
    return classes, yi


def zero_radius(X: np.ndarray, s: np.ndarray, fit_intercept: bool) -> float:
    """‖g‖₂, g = ∇_θ of the mean logistic loss at θ = 0 and the best intercept (labels s = ±1): the
    smallest ρ at which eq (8)'s minimiser is θ = 0 (ρ‖θ‖₂'s subdifferential at 0 is the ball of
    radius ρ). inf for inputs too large to evaluate."""
    b0 = math.log(np.mean(s > 0) / np.mean(s < 0)) if fit_intercept else 0.0
    with np.errstate(over="ignore", invalid="ignore"):  # huge inputs: g = inf
        g = -(s / (1.0 + np.exp(s * b0))) @ X / len(s)
        g_norm = float(np.linalg.norm(g))
    return g_norm if math.isfinite(g_norm) else math.inf


class BinaryClassifierMixin(ClassifierMixin):
    """A classifier of two labels only: sklearn's ``multi_class`` tag off."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


class WassersteinDROLogisticRegression(BinaryClassifierMixin, _WassersteinBase):
    """Binary logistic regression on LDP-noised inputs with the W-DRO regulariser (eq 8):
    min (1/n) Σ log(1 + exp(−sᵢ(θᵀx̃ᵢ + b))) + ρ‖θ‖₂, sᵢ = ±1 (``classes_[1]`` ↦ +1).

    Lipschitz constant: ∂ℓ/∂x = −s σ(−s z) θ with |σ| < 1, so L(θ) = ‖θ‖₂ in x on all of ℝ^p
    (transport cost ‖x − x'‖₂, labels fixed — only inputs are noised). Remark 2 prints
    (Y + X + 2)‖θ‖_* for a cost that also moves the label; with labels fixed the exact
    constant is ‖θ‖₂ and the relaxation is exact (Shafieezadeh-Abadeh, Esfahani & Kuhn 2015).
    Any two label values are accepted. Parameters as in :class:`WassersteinDRORegression`.

    Attributes: classes_, coef_ (1, n_features), intercept_ (1,), rho_, rho_parts_,
    lipschitz_, objective_, n_features_in_.
    """

    def __init__(
        self,
        rho="auto",
        mechanism=None,
        beta=0.05,
        zeta_constants=None,
        fit_intercept=True,
        solver="CLARABEL",
        solver_options=None,
    ):
        self.rho = rho
        self.mechanism = mechanism
        self.beta = beta
        self.zeta_constants = zeta_constants
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options

    _parameter_constraints = {"rho": RHO, "beta": BETA, "fit_intercept": [Boolean()]}

    def fit(self, X, y):
        params = self._params()
        X, y = _validate(self, X, y, dtype=np.float64)
        classes, _ = binary_labels(y)
        self.classes_ = classes
        n, p = X.shape
        self._common_checks(n, p, params)
        s = np.where(y == classes[1], 1.0, -1.0)
        # columns with huge inputs are solved for θ'_j = c_j θ_j on X_j / c_j (the same problem:
        # Xθ = (X/c)θ', ‖θ‖ = ‖θ'/c‖); c = 1 for ordinary columns
        big = np.max(np.abs(X), axis=0) if n else np.zeros(p)
        c = np.where(big > RESCALE_ABOVE, big, 1.0)
        theta = cp.Variable(p, name="theta")
        b = cp.Variable(name="b") if self.fit_intercept else None
        z = (X / c) @ theta + (b if self.fit_intercept else 0.0)
        emp = cp.sum(cp.logistic(-cp.multiply(s, z))) / n
        pen = cp.norm(cp.multiply(1.0 / c, theta) if np.any(c != 1.0) else theta, 2)
        # for ρ ≥ ‖g‖, g = ∇_θ of the mean loss at θ = 0 (and the best intercept), the minimiser is θ = 0
        # (ρ‖θ‖'s subdifferential at 0 is the ball of radius ρ): larger ρ are solved as 2‖g‖ + 1 — the same
        # minimiser and objective — because the conic solver fails for huge ρ (measured: 2⁶³)
        g_norm = zero_radius(X, s, self.fit_intercept)
        rho = min(self.rho_, 2.0 * g_norm + 1.0) if math.isfinite(g_norm) else self.rho_
        prob = cp.Problem(cp.Minimize(emp + rho * pen if rho > 0 else emp))
        what = "WassersteinDROLogisticRegression"
        self.objective_ = solve_problem(prob, self.solver, self.solver_options, what)
        vals = _values(theta, *([b] if self.fit_intercept else []), what=what)
        vals[0] = vals[0] / c
        self.coef_ = vals[0].reshape(1, -1)
        self.intercept_ = np.array([float(vals[1]) if self.fit_intercept else 0.0])
        self.lipschitz_ = float(np.linalg.norm(vals[0]))
        return self

    def decision_function(self, X):
        check_is_fitted(self, "coef_")
        X = _validate(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_[0] + self.intercept_[0]

    def predict_proba(self, X):
        d = self.decision_function(X)
        p1 = 0.5 * (1.0 + np.tanh(0.5 * d))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X):
        d = self.decision_function(X)
        return self.classes_[(d > 0).astype(int)]
