"""Spread-EM over paired releases (``PairedRecordMechanism``): each person released m sampled pairs
(x_j, y), each as one value v_j = x_j·C + y through a frequency oracle, and no separate label.

The E-step's target (Barber eq 47 with the label inside the pairs) is, per record,

    p(x, y | x̃) ∝ Π_{j sampled} P(v̂_j | x_j, y) · p(x) · p_θ(y | x),

the unreleased attributes entering only through the prior. It is written in the shape the record
E-step already samples: a proposal over x alone and a label term that now depends on x. Fix any
positive table w_j(s, c) (here the maximum-likelihood p̂(y = c | x_j = s) of attribute j's pair
reports) and let

    L̄_j(s) = Σ_c w_j(s, c) P(v̂_j | x_j = s, y = c)        (the *marginal channel* of x_j),
    t_j(s, c) = log P(v̂_j | s, c) − log L̄_j(s).

Then p(x, y | x̃) ∝ [p(x) Π_j L̄_j(x_j)] · p_θ(y | x) · exp(Σ_j t_j(x_j, y)): the bracket is the
posterior of a record whose attribute j was released through the channel L̄_j (``PairMarginal``, an
ordinary discrete oracle to the priors and samplers: factorised, naive-Bayes and joint priors all
draw from it exactly), and the rest replaces the record E-step's label term log p(c̃ | c) by
Σ_j t_j(x_j, c). The independence-Metropolis chain accepts with g(x')/g(x), g(x) =
Σ_c p_θ(c | x) exp(Σ_j t_j(x_j, c)), and the responsibilities are p(c | x, x̃) ∝ p_θ(c | x)
exp(Σ_j t_j(x_j, c)): exact whatever w is (w only shapes the proposal, so the chain mixes well when
w is close to the true p(y | x_j)). Since Σ_c w_j(s, c) = 1, L̄_j is a genuine likelihood of the
report given x_j when y | x_j ~ w_j, so the marginal maximum-likelihood prior through it is the
x_j-margin of the pair table's MLE (consistent) when w is that table's conditional.

The held-out score (``_cv_scores.heldout_loglik``) stays exact in expectation: E_ρ[g] = p(x̃) / p̄(x̃)
with p̄ the marginal under the L̄ channels, which ``log_marginal`` of the view computes, so their sum is log p(x̃)."""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from ...errors import ValidationError
from ...mechanisms import DiscreteMechanism, PairedRecordMechanism, RecordMechanism
from .._frequencies import simplex_mle
from ._logexp import logsumexp

#: smallest class weight of w_j(s, ·) (a floor keeps the proposal's support the posterior's)
W_FLOOR = 1e-3


class PairMarginal(DiscreteMechanism):
    """Attribute j's pair oracle seen as a channel of x_j alone: log p(v̂ | x_j = s) =
    log Σ_c w(s, c) P(v̂ | s, c), the report's likelihood when y | x_j = s ~ w(s, ·). Server side
    only: it has no release of its own (its reports are the pair oracle's)."""

    kind = "pair_marginal"

    def __init__(self, oracle: DiscreteMechanism, k: int, n_classes: int, log_w: np.ndarray):
        self.oracle, self.k, self.n_classes = oracle, int(k), int(n_classes)
        self.log_w = np.asarray(log_w, float).reshape(self.k, self.n_classes)

    @property
    def epsilon(self) -> float:
        return float(self.oracle.epsilon)

    def pair_log_likelihood_matrix(self, x_tilde) -> np.ndarray:
        """(n, k, C): log P(v̂ | x_j = s, y = c) of the reports ``x_tilde`` (n,)."""
        L = self.oracle.log_likelihood_matrix(np.asarray(x_tilde, dtype=float).reshape(-1))
        return L.reshape(-1, self.k, self.n_classes)

    def log_likelihood_matrix(self, x_tilde) -> np.ndarray:
        xt = np.asarray(x_tilde)
        out = logsumexp(self.pair_log_likelihood_matrix(xt) + self.log_w[None], axis=-1)
        return out.reshape(xt.shape + (self.k,))

    def validate_release(self, x_tilde, field: str = "x_tilde") -> np.ndarray:
        return self.oracle.validate_release(x_tilde, field)

    def release(self, x, rng):
        raise ValidationError("mechanism", "a PairMarginal is the server's view of a pair oracle: it releases nothing")

    def to_spec(self) -> dict:
        return {"kind": self.kind, "oracle": self.oracle.to_spec(), "k": self.k, "log_w": self.log_w.tolist()}


class PairedView(RecordMechanism):
    """A PairedRecordMechanism as spread-EM's E-step reads it: a sampled record mechanism whose
    attribute j is released through ``PairMarginal`` (the marginal channel under w_j), no label
    mechanism, plus the paired mechanism itself for the label terms t_j(s, c) (module docstring).
    ``tables``: per attribute a (k_j, C) pair distribution whose conditional p(c | s) is w_j (floored
    at ``W_FLOOR``); None: uniform (any w is exact, this one mixes worse)."""

    label_in_pairs = True  # its releases are the paired mechanism's pair reports

    def __init__(self, paired: PairedRecordMechanism, tables: list | None = None):
        C = paired.n_classes
        if tables is None:
            tables = [np.full((k, C), 1.0 / (k * C)) for k in paired.n_states]
        self.paired, self.tables = paired, [np.asarray(t, float) for t in tables]
        margs = []
        for o, k, t in zip(paired.oracles, paired.n_states, self.tables):
            w = t / np.maximum(t.sum(axis=1, keepdims=True), 1e-300)
            w = np.where(t.sum(axis=1, keepdims=True) > 0, w, 1.0 / C)
            w = np.maximum(w, W_FLOOR)
            margs.append(PairMarginal(o, k, C, np.log(w / w.sum(axis=1, keepdims=True))))
        super().__init__(margs, None, n_sampled=paired.n_sampled)

    @property
    def n_classes(self) -> int:
        return self.paired.n_classes

    def validate_release(self, X_tilde, y_tilde=None):
        """The paired mechanism's check (y_tilde None or all NaN); returns (X_tilde floats, None)."""
        return self.paired.validate_release(X_tilde, y_tilde)[0], None

    def to_spec(self) -> dict:
        return self.paired.to_spec()


def as_view(rm) -> RecordMechanism:
    """A PairedRecordMechanism as a ``PairedView`` (uniform w); anything else (a view included) unchanged."""
    return PairedView(rm) if rm.label_in_pairs and not isinstance(rm, PairedView) else rm


def pair_tables(paired: PairedRecordMechanism, X: np.ndarray, tol: float = 1e-7, max_iter: int = 200) -> list:
    """Per attribute the maximum-likelihood pair table P(x_j = s, y = c) (k_j, C) from its pair reports
    in the releases ``X`` (NaN: not sampled), exact likelihoods (``simplex_mle``, distinct reports
    grouped). An attribute no record released (a small pool, a cross-validation fold, or one whose
    records ``robust="margins"`` dropped) gets a table uniform over its states with the class margin
    of the released attributes' tables (uniform if none was released): it says nothing of x_j and
    leaves the class prior that ``class_margin`` averages over the tables where the releases put it."""
    out: list = []
    for j in range(len(paired.n_states)):
        v = X[:, j]
        v = v[~np.isnan(v)]
        out.append(ml_pair_table(paired, j, v, tol, max_iter) if v.size else None)
    seen = [t for t in out if t is not None]
    pc = class_margin(seen) if seen else np.full(paired.n_classes, 1.0 / paired.n_classes)
    return [np.tile(pc / k, (k, 1)) if t is None else t for t, k in zip(out, paired.n_states)]


def distinct_reports(paired: PairedRecordMechanism, j: int, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Attribute j's pair reports ``v`` (none NaN) grouped: each distinct report's count (u,) and
    log P(report | x_j = s, y = c), (u, k_j·C) with (s, c) row-major."""
    uniq, counts = np.unique(v, return_counts=True)
    return counts.astype(float), paired.pair_log_likelihood(j, uniq).reshape(uniq.size, -1)


def ml_pair_table(paired: PairedRecordMechanism, j: int, v: np.ndarray, tol: float = 1e-7, max_iter: int = 200):
    """The maximum-likelihood pair table P(x_j = s, y = c) (k_j, C) of attribute j's pair reports ``v``
    (none NaN), from the uniform start (``simplex_mle`` on the ``distinct_reports``). The last tables
    are kept by content (the mechanism's spec, j, the reports' bytes, tol, max_iter): a fit's view and
    the fallback's test on the same releases solve each once (at 10⁶ reports a table is ~1 s)."""
    v = np.ascontiguousarray(v, dtype=float)
    key = (repr(paired.to_spec()), j, hashlib.blake2b(v.view(np.uint8), digest_size=16).digest(), v.size, tol, max_iter)
    hit = _ML_TABLES.get(key)
    if hit is None:
        counts, L = distinct_reports(paired, j, v)
        K = L.shape[1]
        p, _ = simplex_mle(L, counts, np.full(K, 1.0 / K), tol=tol, max_iter=max_iter)
        hit = np.maximum(p, 0).reshape(paired.n_states[j], paired.n_classes)
        with _ML_LOCK:  # a CV's fold fits run on threads
            _ML_TABLES[key] = hit
            while len(_ML_TABLES) > ML_TABLES_KEPT:
                _ML_TABLES.pop(next(iter(_ML_TABLES)))
    return hit.copy()


#: how many maximum-likelihood pair tables ``ml_pair_table`` keeps (two fits' worth on 41 attributes)
ML_TABLES_KEPT = 96
_ML_TABLES: dict = {}
_ML_LOCK = threading.Lock()


def class_margin(tables: list) -> np.ndarray:
    """The class prior p(c) that pair tables imply: their class margins averaged over attributes,
    floored at 1e-12 and normalised."""
    pc = np.maximum(np.mean([t.sum(axis=0) for t in tables], axis=0), 1e-12)
    return pc / pc.sum()


def paired_view(paired: PairedRecordMechanism, X: np.ndarray) -> PairedView:
    """The view whose w_j is the conditional of attribute j's maximum-likelihood pair table."""
    return PairedView(paired, pair_tables(paired, X))


class PairTerms:
    """The label terms t_j(s, c) of a block of paired releases (module docstring): per column j its
    records ``rows[j]`` and their tables (n_j, k_j, C); ``flat`` the same for the compiled E-step:
    ``cols`` (b, m) the released columns of each record, ``off`` (b, m) where each one's (k_j, C) table
    starts in ``tab`` (row-major: entry (s, c) at off + s·C + c)."""

    def __init__(self, view: PairedView, X: np.ndarray, released: np.ndarray):
        b, D = X.shape
        C = view.n_classes
        self.C, self.rows, self.tabs, self.lbar = C, [], [], []
        m = int(released.sum(axis=1).max()) if b else 0
        cols = np.full((b, m), -1, np.int32)
        off = np.zeros((b, m), np.int64)
        fill = np.zeros(b, np.int64)
        parts, at = [], 0
        for j, f in enumerate(view.fields):
            mech = f.mechanism
            rows = np.flatnonzero(released[:, j])
            P = mech.pair_log_likelihood_matrix(X[rows, j])  # (n_j, k_j, C)
            lbar = logsumexp(P + mech.log_w[None], axis=-1)  # log L̄_j(s), (n_j, k_j)
            T = P - lbar[..., None]
            self.rows.append(rows)
            self.lbar.append(lbar)
            self.tabs.append(T)
            size = mech.k * C
            cols[rows, fill[rows]] = j
            off[rows, fill[rows]] = at + size * np.arange(rows.size)
            fill[rows] += 1
            parts.append(T.reshape(-1))
            at += T.size
        self.cols, self.off = cols, off
        self.tab = np.concatenate(parts) if parts else np.zeros(0)

    def terms(self, x: np.ndarray) -> np.ndarray:
        """Σ_j t_j(x_j, c) for states x (..., b, D): (..., b, C)."""
        out = np.zeros(x.shape[:-1] + (self.C,))
        for j, (rows, T) in enumerate(zip(self.rows, self.tabs)):
            if rows.size:
                s = x[..., rows, j].astype(np.int64)  # (..., n_j)
                out[..., rows, :] += T[np.arange(rows.size), s]
        return out

    def class_posterior(self, tables: list) -> np.ndarray:
        """p(c | x̃) (b, C) under the pair tables ``tables`` with the attributes independent given the
        class: ∝ p(c) Π_j [Σ_s p_j(s, c) P(v̂_j | s, c) / p(c)] — the EM's starting responsibilities."""
        b = self.cols.shape[0]
        logpc = np.log(class_margin(tables))
        out = np.tile(logpc, (b, 1))
        for rows, T, lbar, t in zip(self.rows, self.tabs, self.lbar, tables):
            if rows.size:
                pj = np.log(np.maximum(t, 1e-300))[None] + T + lbar[..., None]  # log p_j(s, c) P(v̂ | s, c)
                out[rows] += logsumexp(pj, axis=1) - logpc
        return np.exp(out - logsumexp(out, axis=1, keepdims=True))
