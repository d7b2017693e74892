"""W-DRO logistic regression with its radius chosen by k-fold cross-validation on the releases.

Farokhi (2020) takes ρ from the LDP noise level (:mod:`fedrr.estimators._dro_radius`); at the
budgets people deploy that radius is so large that the fit is the intercept-only model (see
docs/results.md). Here ρ is chosen the way a user without clean data can: each radius of a grid is
scored by the held-out log-likelihood of the *released* labels, under the model composed with the
label mechanism when there is one. The (radius, fold) fits run on any fedrr executor (serial,
threads, Ray tasks), the data travelling once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.validation import check_is_fitted

from .._params import Boolean, HasMethods, Interval, IsNone, ListOf, Text, random_state_constraints, validate_params
from ..errors import ValidationError
from ..mechanisms import DiscreteMechanism
from ..parallel import SerialExecutor
from ._dro import _validate
from ._dro_logistic import BinaryClassifierMixin, WassersteinDROLogisticRegression, binary_labels, zero_radius
from ._dro_radius import wasserstein_radius

_RHO = Interval(float, 0, None)


def _fit_fold(task: dict) -> float:
    """One (radius, fold) of the grid: W-DRO fitted on the other folds, scored on this one (mean
    log-likelihood per record of the released labels; a top-level function so Ray can ship it)."""
    X, y, fold_of, k = task["X"], task["y"], task["fold_of"], task["fold"]
    train, test = fold_of != k, fold_of == k
    est = WassersteinDROLogisticRegression(rho=task["rho"], **task["params"]).fit(X[train], y[train])
    return heldout_loglik(est.decision_function(X[test]), task["yi"][test], task["P"])


def heldout_loglik(z: np.ndarray, yi: np.ndarray, P: np.ndarray | None) -> float:
    """Mean log q(ỹ | x̃) of released label indices ``yi`` at logits ``z`` (class 1 vs 0): q = p with
    no label mechanism, else q(ỹ | x̃) = Σ_y P[ỹ, y] p(y | x̃) (P column-stochastic, P[x̃, x])."""
    s = np.where(yi == 1, 1.0, -1.0)
    if P is None:
        return float(-np.mean(np.logaddexp(0.0, -s * z)))
    logp = np.column_stack([-np.logaddexp(0.0, z), -np.logaddexp(0.0, -z)])  # log p(y = 0, 1 | x̃)
    logq = np.logaddexp(logp[:, 0] + np.log(P[yi, 0]), logp[:, 1] + np.log(P[yi, 1]))
    return float(np.mean(logq))


class WassersteinDROLogisticRegressionCV(BinaryClassifierMixin, BaseEstimator):
    """Binary W-DRO logistic regression (Farokhi 2020 eq 8; :class:`WassersteinDROLogisticRegression`)
    with ρ chosen by stratified k-fold cross-validation on the releases (mirrors scikit-learn's
    ``LogisticRegressionCV``).

    Parameters
    ----------
    rhos : an int n (the grid: 0 and n radii log-spaced from 10⁻⁴·ρ_max to ρ_max, where ρ_max =
        ``zero_radius`` of the data, the smallest radius whose fit is θ = 0) or a list of radii ≥ 0.
    cv : number of folds (≥ 2, at most the smaller class's count).
    label_mechanism : the binary :class:`DiscreteMechanism` that released the labels (e.g.
        ``RandomizedResponse(2, ...)``), or None for labels as they are. With it the labels must be
        its states 0 and 1, and held-out scores compose the model with it.
    mechanism : the inputs' mechanism (optional): its radius (Thms 2-4, ``rho_auto_``) joins an int grid.
    beta, zeta_constants : as in :class:`WassersteinDRORegression`, for ``rho_auto_``.
    executor : where the (radius, fold) fits run (``fedrr.parallel``); None: serially.
    random_state : seed of the fold shuffle.

    Attributes
    ----------
    rhos_ (ascending), scores_ (n_rhos, cv): held-out mean log-likelihood per record,
    mean_scores_, se_scores_ (standard error over folds), best_index_, rho_ (chosen), rho_max_,
    rho_auto_ (None without ``mechanism``), intercept_only_ (rho_ ≥ rho_max_: the fit is θ = 0),
    estimator_ (the refit on all records), classes_, coef_, intercept_, n_features_in_.
    """

    _parameter_constraints = {
        "rhos": [Interval(int, 1, 200), ListOf(_RHO)],
        "cv": [Interval(int, 2, None)],
        "label_mechanism": [IsNone(), HasMethods("log_likelihood_matrix")],
        "beta": [Interval(float, 0, 1, closed="neither")],
        "fit_intercept": [Boolean()],
        "executor": [IsNone(), HasMethods("map")],
        "random_state": random_state_constraints(),
        "solver": [Text(nonempty=True)],
    }

    def __init__(
        self,
        rhos=10,
        *,
        cv=5,
        label_mechanism=None,
        mechanism=None,
        beta=0.05,
        zeta_constants=None,
        fit_intercept=True,
        executor=None,
        random_state=0,
        solver="CLARABEL",
        solver_options=None,
    ):
        self.rhos = rhos
        self.cv = cv
        self.label_mechanism = label_mechanism
        self.mechanism = mechanism
        self.beta = beta
        self.zeta_constants = zeta_constants
        self.fit_intercept = fit_intercept
        self.executor = executor
        self.random_state = random_state
        self.solver = solver
        self.solver_options = solver_options

    def fit(self, X, y):
        params = {k: getattr(self, k) for k in self._parameter_constraints}
        if isinstance(params["rhos"], np.ndarray):
            params["rhos"] = params["rhos"].tolist()
        p = validate_params(params, self._parameter_constraints)
        X, y = _validate(self, X, y, dtype=np.float64)
        yi, P = self._labels(y, p["label_mechanism"])
        n = len(yi)
        counts = np.bincount(yi, minlength=2)
        if p["cv"] > counts.min():
            raise ValidationError(
                "cv", f"{p['cv']} folds need at least {p['cv']} records of each class; the smaller has {counts.min()}"
            )
        s = np.where(yi == 1, 1.0, -1.0)
        self.rho_max_ = zero_radius(X, s, p["fit_intercept"])
        self.rho_auto_ = None
        if self.mechanism is not None:
            self.rho_auto_ = float(
                wasserstein_radius(self.mechanism, X.shape[1], n, beta=p["beta"], zeta_constants=self.zeta_constants)[0]
            )
        self.rhos_ = self._grid(p["rhos"])
        folds = StratifiedKFold(p["cv"], shuffle=True, random_state=p["random_state"])
        fold_of = np.empty(n, np.int64)
        for k, (_, test) in enumerate(folds.split(np.zeros(n), yi)):
            fold_of[test] = k
        params = {"fit_intercept": p["fit_intercept"], "solver": p["solver"], "solver_options": self.solver_options}
        tasks = [
            {"X": X, "y": y, "yi": yi, "fold_of": fold_of, "fold": k, "rho": float(r), "params": params, "P": P}
            for r in self.rhos_
            for k in range(p["cv"])
        ]
        executor = p["executor"] if p["executor"] is not None else SerialExecutor()
        self.scores_ = np.array(executor.map(_fit_fold, tasks), dtype=float).reshape(len(self.rhos_), p["cv"])
        self.mean_scores_ = self.scores_.mean(axis=1)
        self.se_scores_ = self.scores_.std(axis=1, ddof=1) / math.sqrt(p["cv"])
        self.best_index_ = int(np.argmax(self.mean_scores_))
        self.rho_ = float(self.rhos_[self.best_index_])
        self.intercept_only_ = bool(self.rho_ >= self.rho_max_)
        self.estimator_ = WassersteinDROLogisticRegression(rho=self.rho_, **params).fit(X, y)
        self.classes_ = self.estimator_.classes_
        self.coef_, self.intercept_ = self.estimator_.coef_, self.estimator_.intercept_
        return self

    def _labels(self, y: np.ndarray, mech: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """(index of each label, 0 or 1; the label mechanism's matrix P[ỹ, y] or None)."""
        classes, yi = binary_labels(y)
        if mech is None:
            return yi, None
        if not isinstance(mech, DiscreteMechanism) or getattr(mech, "k", None) != 2:
            raise ValidationError("label_mechanism", "must be a DiscreteMechanism with 2 states (binary labels)")
        if not set(classes.tolist()) <= {0, 1}:
            raise ValidationError("y", f"with a label_mechanism the labels are its states 0 and 1, got {classes}")
        return y.astype(np.int64), np.asarray(mech.matrix, dtype=float)

    def _grid(self, rhos) -> np.ndarray:
        if isinstance(rhos, tuple):
            return np.sort(np.asarray(rhos, dtype=float))
        top = self.rho_max_ if math.isfinite(self.rho_max_) and self.rho_max_ > 0 else 1.0
        grid = [0.0, *np.geomspace(1e-4 * top, top, rhos)]
        if self.rho_auto_ is not None:
            grid.append(self.rho_auto_)
        return np.unique(np.asarray(grid, dtype=float))

    def decision_function(self, X):
        check_is_fitted(self, "estimator_")
        return self.estimator_.decision_function(X)

    def predict_proba(self, X):
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_proba(X)

    def predict(self, X):
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(X)
