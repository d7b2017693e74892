"""Spread-EM logistic regression (Barber 2020 §5): maximise the likelihood of the noisy records
log Σ_{c,x} p(c̃|c) p(x̃|x) p_θ(c|x) p(x) (eq 47) by Monte Carlo EM, learning the prior on the way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._validation import _as_array, as_float_array
from ..errors import ValidationError
from ..mechanisms import RecordMechanism
from ..parallel.executors import ThreadExecutor, shard_bounds
from ._sklearn import class_labels, validate
from .spread_estep import estep_task
from .spread_mstep import fit_soft_logistic, log_class_probs
from .spread_prior import ColumnLayout, SpreadPrior, flat_prior, given_prior, marginal_mle_prior

E_STEPS = ("mcmc", "importance")
ENCODINGS = ("unit", "index")


def _group_records(mechanism: Any, n: int) -> list[tuple[RecordMechanism, np.ndarray]]:
    """[(record mechanism, row indices)]: one mechanism for all rows, or one per row (grouped)."""
    if isinstance(mechanism, RecordMechanism):
        return [(mechanism, np.arange(n))]
    if isinstance(mechanism, (list, tuple, np.ndarray)):
        if len(mechanism) != n:
            raise ValidationError(
                "mechanism", f"a per-record list must have one RecordMechanism per row ({n}), got {len(mechanism)}"
            )
        groups: dict[str, tuple[RecordMechanism, list[int]]] = {}
        key_of: dict[int, str] = {}  # id -> spec key: a pool of 10⁶ records shares a few objects
        for i, m in enumerate(mechanism):
            key = key_of.get(id(m))
            if key is None:
                if not isinstance(m, RecordMechanism):
                    raise ValidationError("mechanism", f"entry {i} must be a RecordMechanism, got {type(m).__name__}")
                key = key_of[id(m)] = repr(m.to_spec())  # the list keeps m alive, so its id stays unique
            groups.setdefault(key, (m, []))[1].append(i)
        return [(m, np.asarray(rows)) for m, rows in groups.values()]
    raise ValidationError(
        "mechanism", f"must be a RecordMechanism or a per-record sequence of them, got {type(mechanism).__name__}"
    )


class SpreadLogisticRegression(ClassifierMixin, BaseEstimator):
    """Logistic regression for clean data, fitted from randomised-response / LDP releases only.

    Parameters
    ----------
    C : inverse L2 penalty on ``coef_`` as in scikit-learn (np.inf: none).
    prior : "learned" (per-column deconvolution MLE, refined by eq 65 during EM), "flat", or a
        given prior (CategoricalPrior / (D, k) array, GaussianPrior, HistogramPrior, per-column list).
    e_step : "mcmc" (default; consistent: exact-posterior Metropolis chains, labels summed out)
        or "importance" (Barber §5.1 self-normalised importance sampling, for reproduction).
    n_samples : samples per record per iteration (default 2 for mcmc, 10 for importance).
    max_iter : most EM iterations in all.
    burn_in : iterations before parameter averaging starts; None (default) starts when the
        parameter norm stops drifting (at max_iter − n_average at the latest).
    n_average, tol : the estimate is the mean of ``n_average`` post-burn-in iterates (stochastic
        EM); it stops earlier once ≥ 10 are averaged and their mean moves by < tol (relative).
    encoding : model input of a discrete state s with k states: s/(k−1) ("unit") or s ("index").
    numeric_prior : "gaussian" or "histogram" (with ``n_bins``) for numeric columns.
    relaxation : over-relaxation ω of each EM step, θ ← θ + ω(M(θ) − θ), in (0, 2); 1 is plain EM.
    executor : object with ``map(fn, tasks)``; shards of ``shard_size`` records, each with its own
        seed, so the result does not depend on how many workers run them. None (default): a
        ThreadExecutor over all CPUs (the compiled E-step releases the GIL; the M-step's matrix
        products use the same number of threads).
    mechanism : default RecordMechanism when ``fit`` gets none; None there means clean data.
    """

    def __init__(
        self,
        C: float = 1.0,
        *,
        prior: Any = "learned",
        e_step: str = "mcmc",
        n_samples: int | None = None,
        max_iter: int = 200,
        tol: float = 1e-4,
        burn_in: int | None = None,
        n_average: int = 30,
        m_step_iter: int = 10,
        encoding: str = "unit",
        numeric_prior: str = "gaussian",
        n_bins: int = 10,
        fit_intercept: bool = True,
        executor: Any = None,
        shard_size: int = 2048,
        random_state: Any = None,
        mechanism: Any = None,
        relaxation: float = 1.8,
        verbose: int = 0,
    ):
        self.C = C
        self.relaxation = relaxation
        self.prior = prior
        self.e_step = e_step
        self.n_samples = n_samples
        self.max_iter = max_iter
        self.n_average = n_average
        self.tol = tol
        self.burn_in = burn_in
        self.m_step_iter = m_step_iter
        self.encoding = encoding
        self.numeric_prior = numeric_prior
        self.n_bins = n_bins
        self.fit_intercept = fit_intercept
        self.executor = executor
        self.shard_size = shard_size
        self.random_state = random_state
        self.mechanism = mechanism
        self.verbose = verbose

    # ------------------------------------------------------------------------------- checks
    def _check_params(self):
        if self.e_step not in E_STEPS:
            raise ValidationError("e_step", f"must be one of {E_STEPS}, got {self.e_step!r}")
        if self.encoding not in ENCODINGS:
            raise ValidationError("encoding", f"must be one of {ENCODINGS}, got {self.encoding!r}")
        if self.numeric_prior not in ("gaussian", "histogram"):
            raise ValidationError("numeric_prior", f"must be 'gaussian' or 'histogram', got {self.numeric_prior!r}")
        try:
            C = float(self.C)
        except (TypeError, ValueError, OverflowError):
            raise ValidationError("C", f"must be a number > 0 (np.inf for no penalty), got {self.C!r}") from None
        if not C > 0:
            raise ValidationError("C", f"must be > 0 (np.inf for no penalty), got {self.C!r}")
        for name, lo in (("max_iter", 1), ("n_average", 1), ("m_step_iter", 1), ("shard_size", 1), ("n_bins", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValidationError(name, f"must be an integer >= {lo}, got {v!r}")
        S = self.n_samples
        if S is not None and (isinstance(S, bool) or not isinstance(S, (int, np.integer)) or S < 1):
            raise ValidationError("n_samples", f"must be an integer >= 1 or None, got {S!r}")
        if not (isinstance(self.tol, (int, float)) and self.tol > 0):
            raise ValidationError("tol", f"must be a number > 0, got {self.tol!r}")
        if not (isinstance(self.relaxation, (int, float)) and 0 < self.relaxation < 2):
            raise ValidationError("relaxation", f"must be in (0, 2) (1 = plain EM), got {self.relaxation!r}")
        if isinstance(self.prior, str) and self.prior not in ("learned", "flat"):
            raise ValidationError("prior", f"must be 'learned', 'flat' or a prior object, got {self.prior!r}")
        B = self.burn_in
        if B is not None and (isinstance(B, bool) or not isinstance(B, (int, np.integer)) or B < 0):
            raise ValidationError("burn_in", f"must be an integer >= 0 or None, got {B!r}")
        _check_random_state(self.random_state)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise ValidationError("fit_intercept", f"must be True or False, got {self.fit_intercept!r}")
        if self.executor is not None and not callable(getattr(self.executor, "map", None)):
            raise ValidationError(
                "executor", f"must be None or an object with map(fn, tasks), got {type(self.executor).__name__}"
            )
        return C

    # --------------------------------------------------------------------------------- fit
    def fit(self, X, y, mechanism: Any = None):
        """Fit from released features X (n, D) and released labels y (n,) produced by ``mechanism``
        (a RecordMechanism, or one per record). With no mechanism the data are taken as clean."""
        # the work is matrix-vector products: multi-threaded BLAS only contends (measured 4x slower)
        with threadpool_limits(limits=1, user_api="blas"):
            return self._fit(X, y, mechanism)

    def _fit(self, X, y, mechanism: Any = None):
        C = self._check_params()
        mechanism = self.mechanism if mechanism is None else mechanism
        if mechanism is None:
            return self._fit_clean(X, y, C)
        Xa = _as_array("X", X, "must be a 2-d array (n_records, n_features)")
        if Xa.ndim != 2:
            raise ValidationError("X", f"must be 2-d (n_records, n_features), got shape {np.shape(X)}")
        n = Xa.shape[0]
        if n == 0:
            raise ValidationError("X", "needs at least one record")
        groups = _group_records(mechanism, n)
        y = _as_array("y", y, f"must be an array of shape ({n},)")
        layout = ColumnLayout.from_mechanism(groups[0][0])
        has_label = groups[0][0].label is not None
        pools, y_all = [], np.empty(n, dtype=np.int64)
        Xv_all = np.empty(Xa.shape, dtype=float)
        for rm, rows in groups:
            if not ColumnLayout.from_mechanism(rm).same_domain(layout):
                raise ValidationError(
                    "mechanism",
                    "all record mechanisms in one pool must share the feature domains (k per discrete column, bounds per numeric column)",
                )
            if (rm.label is not None) != has_label:
                raise ValidationError("mechanism", "either every record mechanism has a label mechanism or none does")
            Xv, yv = rm.validate_release(
                Xa[rows], None if not has_label else np.asarray(y)[rows] if np.shape(y) == (n,) else y
            )
            if not has_label:
                yv = np.asarray(y)[rows] if np.shape(y) == (n,) else None
                if yv is None:
                    raise ValidationError("y", f"must have shape ({n},), got {np.shape(y)}")
            Xv_all[rows] = Xv
            y_all[rows] = self._label_index(yv, rm, has_label)
            pools.append((rm, Xv))
        if has_label:
            k = groups[0][0].label.k
            if any(rm.label.k != k for rm, _ in groups):
                raise ValidationError("mechanism", "label mechanisms must all have the same number of classes")
            self.classes_ = np.arange(k)
        n_classes = len(self.classes_)
        if n_classes < 2:
            raise ValidationError("y", "needs at least 2 classes")
        self.layout_ = layout
        self.n_features_in_ = layout.n_features
        prior = self._initial_prior(layout, pools)
        self._run_em(Xv_all, y_all, groups, prior, n_classes, C)
        return self

    def _label_index(self, yv, rm, has_label):
        if has_label:
            return yv
        if not hasattr(self, "_clean_label_classes"):
            raise ValidationError(
                "mechanism",
                "record mechanisms without a label mechanism need clean labels; use mechanism with label=None only via _fit_clean",
            )
        return np.searchsorted(self.classes_, yv)

    def _initial_prior(self, layout: ColumnLayout, pools) -> SpreadPrior:
        if isinstance(self.prior, str) and self.prior == "flat":
            return flat_prior(layout, self.numeric_prior, 1 if self.numeric_prior == "histogram" else self.n_bins)
        if isinstance(self.prior, str) and self.prior == "learned":
            return marginal_mle_prior(layout, pools, self.numeric_prior, self.n_bins)
        return given_prior(layout, self.prior)

    def _fit_clean(self, X, y, C):
        """No mechanism: ordinary L2-penalised logistic regression (sklearn's input rules)."""
        Xa, ya = validate(self, X, y)
        self.classes_, yi = class_labels(ya)
        self.layout_ = None
        self.n_features_in_ = Xa.shape[1]
        R = np.eye(len(self.classes_))[yi]
        rows = 1 if len(self.classes_) == 2 else len(self.classes_)
        coef, b, obj = fit_soft_logistic(
            Xa,
            R,
            np.ones(len(yi)),
            np.zeros((rows, Xa.shape[1])),
            np.zeros(rows),
            C,
            self.fit_intercept,
            max_iter=max(self.m_step_iter, 1000),
        )
        self.coef_, self.intercept_ = coef, b
        self.prior_ = None
        self.n_iter_ = 1
        self.history_ = [{"iter": 1, "objective": obj}]
        return self

    def _run_em(self, X, y, groups, prior: SpreadPrior, n_classes: int, C: float):
        mode = self.e_step
        S = self.n_samples if self.n_samples is not None else (2 if mode == "mcmc" else 10)
        executor = self.executor if self.executor is not None else ThreadExecutor()
        # the M-step's matrix products run on the executor's threads if it has any (a ThreadExecutor,
        # or a wrapper with ``workers()``); the result is the same for any number
        m_threads = int(executor.workers()) if callable(getattr(executor, "workers", None)) else 1
        rows_n = 1 if n_classes == 2 else n_classes
        D = X.shape[1]
        entropy = (
            np.random.SeedSequence(
                self.random_state
                if isinstance(self.random_state, (int, np.integer)) or self.random_state is None
                else None
            ).entropy
            if not isinstance(self.random_state, np.random.Generator)
            else int(self.random_state.integers(2**63))
        )
        # initial θ: logistic regression on the decoded releases (the naive fit)
        Z0 = _decode_states(X, self.layout_, self.encoding)
        Z0 = [Z0[s0:s1] for s0, s1 in shard_bounds(len(Z0), self.shard_size)]  # row blocks, for the threads
        coef, b, _ = fit_soft_logistic(
            Z0,
            np.eye(n_classes)[y],
            np.ones(len(y)),
            np.zeros((rows_n, D)),
            np.zeros(rows_n),
            C,
            self.fit_intercept,
            max_iter=50,
            n_threads=m_threads,
        )
        shards = []  # (group index, released features, released labels): sliced once, reused every iteration
        for gi, (rm, rows) in enumerate(groups):
            for s0, s1 in shard_bounds(len(rows), self.shard_size):
                shards.append((gi, X[rows[s0:s1]], y[rows[s0:s1]]))
        label_logP = [None if rm.label is None else np.log(rm.label.matrix) for rm, _ in groups]
        states: list[Any] = [None] * len(shards)
        norms: list[float] = []
        burn_in = self.burn_in  # None: detected from the iterates (see _stationary)
        avg_coef = avg_b = None
        n_avg = 0
        self.history_ = []
        for it in range(1, self.max_iter + 1):
            tasks = [
                {
                    "rm": groups[gi][0],
                    "X_tilde": Xs,
                    "y_tilde": ys,
                    "state": states[si],
                    "prior": prior,
                    "coef": coef,
                    "intercept": b,
                    "label_logP": label_logP[gi],
                    "n_samples": S,
                    "mode": mode,
                    "seed": np.random.SeedSequence(entropy, spawn_key=(it, si)),
                    "encoding": self.encoding,
                    "layout": self.layout_,
                    "n_classes": n_classes,
                }
                for si, (gi, Xs, ys) in enumerate(shards)
            ]
            results = executor.map(estep_task, tasks)
            states = [r["state"] for r in results]
            R = np.concatenate([r["R"] for r in results])
            w = np.concatenate([r["w"] for r in results])
            # the shards' samples as row blocks: no (n·S, D) concatenated copy
            new_coef, new_b, obj = fit_soft_logistic(
                [r["Z"] for r in results],
                R,
                w,
                coef,
                b,
                C,
                self.fit_intercept,
                max_iter=self.m_step_iter,
                n_threads=m_threads,
            )
            # over-relaxed EM: θ ← θ + ω (M(θ) − θ); same fixed point, faster in slow directions
            coef = coef + self.relaxation * (new_coef - coef)
            b = b + self.relaxation * (new_b - b)
            if isinstance(self.prior, str) and self.prior == "learned":
                prior = prior.blend(_prior_from_stats(prior, [r["stats"] for r in results]), 1.0 / (it + 1))
            accepted = sum(r["accepted"] for r in results) / max(1, sum(r["proposed"] for r in results))
            change = np.nan
            norms.append(float(np.linalg.norm(np.r_[coef.ravel(), b])))
            if burn_in is None and (_stationary(norms) or it >= self.max_iter - self.n_average):
                burn_in = it
            if burn_in is not None and it > burn_in:
                n_avg += 1
                if avg_coef is None:
                    avg_coef, avg_b = coef.copy(), b.copy()
                else:
                    prev = avg_coef.copy()
                    avg_coef += (coef - avg_coef) / n_avg
                    avg_b += (b - avg_b) / n_avg
                    change = float(np.linalg.norm(avg_coef - prev) / max(np.linalg.norm(avg_coef), 1e-12))
            self.history_.append(
                {
                    "iter": it,
                    "objective": obj,
                    "acceptance": accepted,
                    "coef_norm": float(np.linalg.norm(coef)),
                    "avg_change": change,
                    "averaging": burn_in is not None and it > burn_in,
                }
            )
            if self.verbose:
                print(
                    f"[spread-EM] iter {it}: objective={obj:.4f} |coef|={np.linalg.norm(coef):.4f} accept={accepted:.3f} change={change:.2e}"
                )
            if n_avg >= self.n_average or (n_avg >= 10 and change < self.tol):
                break
        self.coef_ = avg_coef if avg_coef is not None else coef
        self.intercept_ = avg_b if avg_b is not None else b
        self.n_iter_ = it
        self.burn_in_ = burn_in
        self.prior_ = prior.public()
        self._prior_state = prior
        return self

    # ---------------------------------------------------------------------------- predict
    def _model_input(self, X) -> np.ndarray:
        check_is_fitted(self, "coef_")
        if self.layout_ is None:
            return validate(self, X, reset=False)
        return _decode_states(check_release_X(X, self.layout_), self.layout_, self.encoding)

    def decision_function(self, X) -> np.ndarray:
        Z = self._model_input(X)
        z = Z @ self.coef_.T + self.intercept_
        return z[:, 0] if self.coef_.shape[0] == 1 else z

    def predict_log_proba(self, X) -> np.ndarray:
        return log_class_probs(self._model_input(X), self.coef_, self.intercept_)

    def predict_proba(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        log_proba = self.predict_log_proba(X)
        return self.classes_[np.argmax(log_proba, axis=1)]


def check_release_X(X, layout: ColumnLayout) -> np.ndarray:
    """Released features (n, D) in the layout's domain, as floats: the input of ``predict``."""
    Xa = _as_array("X", X, f"must be a 2-d array (n_records, {layout.n_features})")
    if Xa.ndim != 2:
        raise ValidationError("X", f"must be 2-d (n_records, {layout.n_features}), got shape {Xa.shape}")
    Xa = as_float_array("X", Xa, ndim=2)
    if Xa.shape[0] == 0:
        raise ValidationError("X", "needs at least one record")
    if Xa.shape[1] != layout.n_features:
        raise ValidationError("X", f"has {Xa.shape[1]} features, but the model was fitted with {layout.n_features}")
    if layout.discrete.any():
        kk = layout.k[layout.discrete]
        sub = Xa[:, layout.discrete]
        if np.any(sub != np.round(sub)) or np.any(sub < 0) or np.any(sub >= kk):
            raise ValidationError("X", "discrete columns must hold integer states in {0, ..., k-1}")
    return Xa


def _check_random_state(rs: Any) -> None:
    if rs is None or isinstance(rs, np.random.Generator):
        return
    if isinstance(rs, bool) or not isinstance(rs, (int, np.integer)) or rs < 0:
        raise ValidationError("random_state", f"must be None, an integer >= 0 or a numpy.random.Generator, got {rs!r}")


def _stationary(norms: list[float], window: int = 20, threshold: float = 2.0) -> bool:
    """Has the EM trajectory stopped drifting? Compares the mean parameter norm over the last
    ``window`` iterations with the window before, in units of their Monte Carlo spread. Averaging
    iterates that are still drifting would bias the estimate toward the starting point."""
    if len(norms) < 2 * window:
        return False
    a = np.asarray(norms[-2 * window : -window])
    b = np.asarray(norms[-window:])
    spread = np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / window) + 1e-12
    return abs(b.mean() - a.mean()) / spread < threshold


def _decode_states(X: np.ndarray, layout: ColumnLayout | None, encoding: str) -> np.ndarray:
    X = np.asarray(X, dtype=float)
    if layout is None or encoding == "index" or not layout.discrete.any():
        return X
    out = X.copy()
    d = layout.discrete
    out[:, d] = X[:, d] / (layout.k[d] - 1.0)
    return out


def _prior_from_stats(prior: SpreadPrior, stats: Sequence[dict]) -> SpreadPrior:
    """The EM prior update from weighted posterior samples: eq 65 for discrete columns, weighted
    moments (Gaussian) or bin counts (histogram) for numeric ones."""
    out = prior.copy()
    layout = prior.layout
    disc = np.flatnonzero(layout.discrete)
    if disc.size:
        counts = sum(s["counts"] for s in stats)
        out.disc[disc] = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1e-300)
    num = np.flatnonzero(~layout.discrete)
    if num.size:
        s0 = sum(s["s0"] for s in stats)
        s1 = sum(s["s1"] for s in stats)
        s2 = sum(s["s2"] for s in stats)
        if prior.numeric_kind == "gaussian":
            m = s1 / s0
            floor = 1e-3 * (layout.upper[num] - layout.lower[num]) ** 2 / 12.0
            out.mean[num] = m
            out.var[num] = np.maximum(s2 / s0 - m**2, floor)
        else:
            h = sum(s["hist"] for s in stats)
            out.probs[num] = h / h.sum(axis=1, keepdims=True)
    return out
