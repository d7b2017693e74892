"""Baselines for spread-EM, so every comparison is one call: train on the noisy data as if it
were clean (Barber §4.2, optionally with cross-validated C) and reconstruct-then-learn (§4.3)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.utils.validation import check_is_fitted

from .._validation import _as_array
from ..errors import ValidationError
from ..mechanisms import RecordMechanism
from ..parallel.executors import SerialExecutor, shard_bounds
from ._sklearn import class_labels, validate
from .spread import ENCODINGS, SpreadLogisticRegression, _decode_states, check_release_X
from .spread_estep import estep_task
from .spread_mstep import fit_soft_logistic
from .spread_prior import ColumnLayout


class NaiveLogisticRegression(ClassifierMixin, BaseEstimator):
    """scikit-learn logistic regression on the releases as if they were clean (Barber eq 34).
    ``cv`` = None uses the given C; an int tunes C by cross-validation on the noisy data — the fair
    naive baseline (shared/research-notes.md). Discrete states are encoded like spread-EM's."""

    def __init__(
        self,
        C: float = 1.0,
        *,
        cv: int | None = None,
        encoding: str = "unit",
        max_iter: int = 2000,
        mechanism: Any = None,
    ):
        self.C = C
        self.cv = cv
        self.encoding = encoding
        self.max_iter = max_iter
        self.mechanism = mechanism

    def _check_params(self) -> None:
        try:
            C = float(self.C)
        except (TypeError, ValueError, OverflowError):
            C = math.nan
        if isinstance(self.C, (bool, str)) or not C > 0:
            raise ValidationError("C", f"must be a number > 0 (np.inf for no penalty), got {self.C!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValidationError("max_iter", f"must be an integer >= 1, got {self.max_iter!r}")
        if self.cv is not None and (
            isinstance(self.cv, bool) or not isinstance(self.cv, (int, np.integer)) or self.cv < 2
        ):
            raise ValidationError("cv", f"must be None or an integer >= 2 (folds), got {self.cv!r}")
        if self.encoding not in ENCODINGS:
            raise ValidationError("encoding", f"must be one of {ENCODINGS}, got {self.encoding!r}")

    def fit(self, X, y, mechanism: Any = None):
        self._check_params()
        mechanism = self.mechanism if mechanism is None else mechanism
        if isinstance(mechanism, (list, tuple)) and mechanism:
            mechanism = mechanism[0]
        if mechanism is not None and not isinstance(mechanism, RecordMechanism):
            raise ValidationError("mechanism", f"must be a RecordMechanism or None, got {type(mechanism).__name__}")
        if mechanism is not None:
            Xv, yv = mechanism.validate_release(X, y if mechanism.label is not None else None)
            if yv is None:  # no label mechanism: clean labels
                yv = _as_array("y", y, f"must be an array of shape ({Xv.shape[0]},)")
                if yv.shape != (Xv.shape[0],):
                    raise ValidationError("y", f"must have shape ({Xv.shape[0]},) to match X, got {yv.shape}")
            self.layout_ = ColumnLayout.from_mechanism(mechanism)
        else:
            Xv, yv = validate(self, X, y)
            self.layout_ = None
        if Xv.shape[0] == 0:
            raise ValidationError("X", "needs at least one record")
        class_labels(yv)
        largest = int(np.max(np.unique(yv, return_counts=True)[1]))
        if self.cv is not None and self.cv > largest:  # (stratified folds: sklearn's own limit)
            raise ValidationError(
                "cv", f"{self.cv} folds need a class with at least {self.cv} records; the largest has {largest}"
            )
        Z = _decode_states(Xv, self.layout_, self.encoding)
        if self.cv is None:
            self.model_ = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(Z, yv)
        else:
            self.model_ = LogisticRegressionCV(Cs=np.logspace(-4, 4, 17), cv=self.cv, max_iter=self.max_iter).fit(Z, yv)
        self.classes_ = self.model_.classes_
        self.coef_, self.intercept_ = self.model_.coef_, self.model_.intercept_
        self.n_iter_ = self.model_.n_iter_
        self.n_features_in_ = Z.shape[1]
        return self

    def _inputs(self, X):
        check_is_fitted(self, "model_")
        if self.layout_ is None:
            return validate(self, X, reset=False)
        return _decode_states(check_release_X(X, self.layout_), self.layout_, self.encoding)

    def decision_function(self, X):
        Z = self._inputs(X)
        return self.model_.decision_function(Z)

    def predict_proba(self, X):
        Z = self._inputs(X)
        return self.model_.predict_proba(Z)

    def predict(self, X):
        Z = self._inputs(X)
        return self.model_.predict(Z)


class ReconstructionLogisticRegression(SpreadLogisticRegression):
    """Reconstruct-then-learn (Barber §4.3, eq 36–37): draw clean-data guesses from the
    prior-only posterior p(x | x̃) ∝ p(x̃ | x) p(x) and p(c | c̃) ∝ p(c̃ | c) (flat class prior),
    then fit logistic regression to them once. Not consistent in general (Fig 1)."""

    def __init__(
        self,
        C: float = 1.0,
        *,
        prior: Any = "learned",
        n_samples: int | None = 10,
        encoding: str = "unit",
        numeric_prior: str = "gaussian",
        n_bins: int = 10,
        fit_intercept: bool = True,
        executor: Any = None,
        shard_size: int = 2048,
        random_state: Any = None,
        mechanism: Any = None,
    ):
        super().__init__(
            C,
            prior=prior,
            n_samples=n_samples,
            encoding=encoding,
            numeric_prior=numeric_prior,
            n_bins=n_bins,
            fit_intercept=fit_intercept,
            executor=executor,
            shard_size=shard_size,
            random_state=random_state,
            mechanism=mechanism,
        )

    def _run_em(self, X, y, groups, prior, n_classes: int, C: float):
        S = self.n_samples or 10
        executor = self.executor if self.executor is not None else SerialExecutor()
        rows_n = 1 if n_classes == 2 else n_classes
        D = X.shape[1]
        entropy = (
            self.random_state if isinstance(self.random_state, (int, np.integer)) else np.random.SeedSequence().entropy
        )
        tasks = []
        for gi, (rm, rows) in enumerate(groups):
            for s0, s1 in shard_bounds(len(rows), self.shard_size):
                tasks.append(
                    {
                        "rm": rm,
                        "X_tilde": X[rows[s0:s1]],
                        "y_tilde": y[rows[s0:s1]],
                        "state": None,
                        "prior": prior,
                        "coef": np.zeros((rows_n, D)),
                        "intercept": np.zeros(rows_n),
                        "label_logP": None if rm.label is None else np.log(rm.label.matrix),
                        "n_samples": S,
                        "mode": "importance",
                        "seed": np.random.SeedSequence(entropy, spawn_key=(0, len(tasks))),
                        "encoding": self.encoding,
                        "layout": self.layout_,
                    }
                )
        res = executor.map(estep_task, tasks)
        Z = np.concatenate([r["Z"] for r in res])
        R = np.concatenate([r["R"] for r in res])
        w = np.concatenate([r["w"] for r in res])
        self.coef_, self.intercept_, obj = fit_soft_logistic(
            Z, R, w, np.zeros((rows_n, D)), np.zeros(rows_n), C, self.fit_intercept, max_iter=1000
        )
        self.n_iter_ = 1
        self.history_ = [{"iter": 1, "objective": obj}]
        self.prior_ = prior.public()
        return self
