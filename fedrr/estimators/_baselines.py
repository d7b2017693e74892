"""Baselines for spread-EM, so every comparison is one call: train on the noisy data as if it
were clean (Barber §4.2, optionally with cross-validated C) and reconstruct-then-learn (§4.3)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._params import Interval, IsNone, Options, seed_from, validate_estimator
from .._validation import as_array
from ..errors import ValidationError
from ..mechanisms import DiscreteMechanism, RecordMechanism
from ..parallel import SerialExecutor
from ._sklearn import class_labels, validate, warn_clean
from .spread._cv_scores import class_freqs
from .spread._design import ENCODINGS, ColumnLayout, Design
from .spread._estep import shard_factories
from .spread._estimator import SpreadLogisticRegression, check_clean_X
from .spread._mstep import ChainObjective
from .spread._pool import group_records
from .spread._runtime import shard_group


def naive_inputs(X_tilde: np.ndarray, rm: RecordMechanism, design: Design) -> np.ndarray:
    """Releases read as clean records: each discrete field's point guess of its state
    (``decode``: the released state for randomised response), numeric releases as they are;
    then the model inputs, with attributes a client did not release (NaN) set to the column's
    mean input over the clients that did."""
    X = np.array(X_tilde, dtype=float)
    for mech, cols in rm.groups():
        if isinstance(mech, DiscreteMechanism):
            for c in cols:
                rel = ~np.isnan(X[:, c])
                X[rel, c] = mech.decode(X[rel, c].astype(np.int64)) if rel.any() else X[rel, c]
    miss = np.isnan(X)
    if not miss.any():
        return design.decode(X)
    Z = design.decode(np.where(miss, 0.0, X))
    for d in np.flatnonzero(miss.any(axis=0)):
        cols = slice(design.offsets[d], design.offsets[d] + design.widths[d])
        rel = ~miss[:, d]
        Z[np.flatnonzero(~rel), cols] = Z[rel, cols].mean(axis=0) if rel.any() else 0.0
    return Z


class NaiveLogisticRegression(ClassifierMixin, BaseEstimator):
    """scikit-learn logistic regression on the releases as if they were clean (Barber eq 34).
    ``clean=True``: the records are clean (the ``clean`` oracle); the mechanism only gives their
    domain, for the same encoding as the learners on releases. Without a mechanism it is plain
    logistic regression on X as given, with a ``CleanDataWarning`` unless ``clean=True`` (a warning,
    not an error: ``check_estimator`` fits plain arrays).
    ``cv`` = None uses the given C; an int tunes C by cross-validation on the noisy data — the fair
    naive baseline (shared/research-notes.md). Discrete states are encoded like spread-EM's."""

    _parameter_constraints = {
        "C": [Interval(float, 0, None, closed="neither", inf=True)],
        "cv": [IsNone(), Interval(int, 2, None)],
        "encoding": [Options(*ENCODINGS)],
        "max_iter": [Interval(int, 1, None)],
    }

    def __init__(
        self,
        C: float = 1.0,
        *,
        cv: int | None = None,
        encoding: str = "unit",
        max_iter: int = 2000,
        mechanism: Any = None,
        clean: bool = False,
    ):
        self.C = C
        self.clean = clean
        self.cv = cv
        self.encoding = encoding
        self.max_iter = max_iter
        self.mechanism = mechanism

    def fit(self, X, y, mechanism: Any = None):
        p = validate_estimator(self)
        mechanism = self.mechanism if mechanism is None else mechanism
        if mechanism is None and not self.clean:
            warn_clean(self, "clean=True")
        if isinstance(mechanism, (list, tuple)) and mechanism:
            mechanism = group_records(mechanism, len(mechanism))[0][0]
        if mechanism is not None and not isinstance(mechanism, RecordMechanism):
            raise ValidationError("mechanism", f"must be a RecordMechanism or None, got {type(mechanism).__name__}")
        if mechanism is not None and self.clean:  # clean records in the mechanism's domain (an oracle)
            Xv, _ = mechanism.validate_input(X, None if mechanism.label is None else y)
            self.design_ = Design(ColumnLayout.from_mechanism(mechanism), p["encoding"])
            Z, yv = self.design_.decode(Xv), as_array("y", y, "must be an array of labels")
        elif mechanism is not None:
            Xv, yv = mechanism.validate_release(X, y if mechanism.label is not None else None)
            if yv is None:  # no label mechanism: clean labels
                yv = as_array("y", y, f"must be an array of shape ({Xv.shape[0]},)")
                if yv.shape != (Xv.shape[0],):
                    raise ValidationError("y", f"must have shape ({Xv.shape[0]},) to match X, got {yv.shape}")
            self.design_ = Design(ColumnLayout.from_mechanism(mechanism), p["encoding"])
            Z = naive_inputs(Xv, mechanism, self.design_)
        else:
            Z, yv = validate(self, X, y)
            self.design_ = None
        if Z.shape[0] == 0:
            raise ValidationError("X", "needs at least one record")
        class_labels(yv)
        largest = int(np.max(np.unique(yv, return_counts=True)[1]))
        if p["cv"] is not None and p["cv"] > largest:  # (stratified folds: sklearn's own limit)
            raise ValidationError(
                "cv", f"{p['cv']} folds need a class with at least {p['cv']} records; the largest has {largest}"
            )
        if p["cv"] is None:
            self.model_ = LogisticRegression(C=p["C"], max_iter=p["max_iter"]).fit(Z, yv)
        else:
            self.model_ = LogisticRegressionCV(Cs=np.logspace(-4, 4, 17), cv=p["cv"], max_iter=p["max_iter"]).fit(Z, yv)
        self.classes_ = self.model_.classes_
        self.coef_, self.intercept_ = self.model_.coef_, self.model_.intercept_
        self.n_iter_ = self.model_.n_iter_
        self.n_features_in_ = X.shape[1] if hasattr(X, "shape") else Z.shape[1]
        return self

    def _inputs(self, X):
        check_is_fitted(self, "model_")
        if self.design_ is None:
            return validate(self, X, reset=False)
        # float64: the design decodes to float32, and probabilities should sum to 1 in double precision
        return self.design_.decode(check_clean_X(X, self.design_.layout)).astype(np.float64)

    def decision_function(self, X):
        Z = self._inputs(X)  # checks fitted first
        return self.model_.decision_function(Z)

    def predict_proba(self, X):
        Z = self._inputs(X)  # checks fitted first
        return self.model_.predict_proba(Z)

    def predict(self, X):
        Z = self._inputs(X)  # checks fitted first
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

    def _fit_noisy(self, X, y, mechanism, p):
        with threadpool_limits(limits=1, user_api="blas"):
            Xv, yi, groups, layout = self._prepare(X, y, mechanism, p)
            C = len(self.classes_)
            design = Design(layout, p["encoding"])
            prior = self._initial_prior(
                layout, [(rm, Xv[rows]) for rm, rows in groups], {**p, "prior_strength": 0.0}, Xv.shape[0]
            )
            entropy = seed_from(p["random_state"])
            factories = shard_factories(groups, Xv, yi, design, C, entropy, 1, "importance", p["shard_size"])
            executor = p["executor"] if p["executor"] is not None else SerialExecutor()
            group = shard_group(executor, factories)
            try:
                rows_n = 1 if C == 2 else C
                group.call("set_prior", 0, prior)
                group.call("estep", 0, 0, np.zeros((rows_n, design.n_inputs)), np.zeros(rows_n), p["n_samples"] or 10)
                prob = ChainObjective(group, 0, rows_n, design.n_inputs, p["C"], p["fit_intercept"])
                res = prob.mstep(np.zeros(rows_n * design.n_inputs + (rows_n if p["fit_intercept"] else 0)), 1000)
            finally:
                group.close()
        self.design_, self.layout_, self.n_features_in_ = design, layout, layout.n_features
        self.coef_, self.intercept_ = prob.unpack(res.x)
        self.n_iter_, self.history_ = 1, [{"iter": 1, "objective": float(res.fun)}]
        self.prior_ = prior.public()
        return self


class MajorityClassifier(ClassifierMixin, BaseEstimator):
    """Predicts the most frequent class, its frequencies estimated from the released labels and
    debiased through the label mechanism (maximum likelihood on the simplex): the reference line a
    learner must beat to have learned anything. Without a mechanism: the labels' own frequencies,
    with a ``CleanDataWarning`` (as the other estimators: released labels are never read as clean silently)."""

    def __init__(self, mechanism: Any = None):
        self.mechanism = mechanism

    def fit(self, X, y, mechanism: Any = None):
        mechanism = self.mechanism if mechanism is None else mechanism
        if mechanism is None:
            warn_clean(self)
        ya = as_array("y", y, "must be a 1-d array of labels")
        if ya.ndim != 1 or ya.size == 0:
            raise ValidationError("y", f"must be a non-empty 1-d array, got shape {ya.shape}")
        n = ya.size
        groups = group_records(mechanism, n) if mechanism is not None else []
        if groups and groups[0][0].label is not None:
            k = groups[0][0].label.k
            self.classes_ = np.arange(k)
            self.class_prior_ = class_freqs(np.asarray(ya, np.int64), groups, k)
        else:
            self.classes_, yi = class_labels(ya)
            self.class_prior_ = np.bincount(yi, minlength=len(self.classes_)) / n
        self.n_features_in_ = np.shape(X)[1] if np.ndim(X) == 2 else 0
        return self

    def predict_proba(self, X):
        check_is_fitted(self, "class_prior_")
        return np.tile(self.class_prior_, (len(np.asarray(X)), 1))

    def predict(self, X):
        check_is_fitted(self, "class_prior_")
        return np.full(len(np.asarray(X)), self.classes_[int(np.argmax(self.class_prior_))])
