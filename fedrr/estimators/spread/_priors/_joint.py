"""A joint input prior for spread-EM: the empirical distribution of a public sample of clean
records (``fedrr.mechanisms.EmpiricalPrior``). Barber §5.2 factorises p(x) over the columns; when a
public dataset for a similar problem exists the prior can be that known model instead, and it keeps
how attributes co-occur — which records that release one sampled attribute cannot show, and which a
factorised prior gets wrong (it imputes the attributes a record did not release independently of
the one it did). Without public data, ``prior="naive-bayes"`` (``_priors._mixture``) lets attributes
co-occur through the label instead."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ....errors import ValidationError
from ....mechanisms import EmpiricalPrior, RecordMechanism
from .._design import ColumnLayout
from .._logexp import logsumexp
from ._factorised import SpreadPrior, _empty


@dataclass
class JointSpreadPrior(SpreadPrior):
    """A fixed joint prior: the empirical distribution of public rows (M, D) of discrete states
    (``EmpiricalPrior``). ``disc`` holds its marginals, which the EM's start reads; the E-step
    proposes whole public rows (``Shard._propose``) and the held-out score uses ``log_marginal``."""

    rows: np.ndarray | None = None

    def copy(self) -> JointSpreadPrior:
        base = SpreadPrior.copy(self)
        return JointSpreadPrior(**{f.name: getattr(base, f.name) for f in fields(SpreadPrior)}, rows=self.rows)

    def log_weights(self, rm: RecordMechanism, X: np.ndarray, released: np.ndarray) -> np.ndarray:
        """log p(x̃ | x = row) for every record (n) and public row (M): the sum over the record's
        released columns of the mechanism's log-likelihood at the row's state; (n, M)."""
        out = np.zeros((X.shape[0], self.rows.shape[0]))
        for mech, cols in rm.column_groups():
            for c in cols:
                rel = np.flatnonzero(released[:, c])
                if rel.size:
                    L = mech.log_likelihood_matrix(X[rel, c].astype(np.int64))  # (n_rel, k)
                    out[rel] += L[:, self.rows[:, c]]
        return out

    def log_marginal(self, rm: RecordMechanism, X: np.ndarray, released: np.ndarray) -> np.ndarray:
        """log p(x̃) = log (1/M) Σ_i p(x̃ | row_i) per record: exact under the empirical prior;
        computed once per distinct release pattern (records that released the same values alike)."""
        uniq, inv = np.unique(np.where(released, X, -1.0), axis=0, return_inverse=True)
        lw = self.log_weights(rm, np.where(uniq < 0, np.nan, uniq), uniq >= 0)
        return (logsumexp(lw, axis=1) - np.log(self.rows.shape[0]))[inv.ravel()]


def joint_prior(layout: ColumnLayout, prior: EmpiricalPrior) -> JointSpreadPrior:
    """The spread-EM prior of an ``EmpiricalPrior`` for records of ``layout`` (all discrete, the
    rows' states inside each column's domain); its ``disc`` the rows' marginal frequencies."""
    D = layout.n_features
    rows = prior.rows
    if not layout.discrete.all():
        raise ValidationError("prior", "an EmpiricalPrior needs all feature columns discrete")
    if rows.shape[1] != D:
        raise ValidationError("prior.rows", f"must have {D} columns (one per feature), got {rows.shape[1]}")
    over = np.flatnonzero(np.any(rows >= layout.k[None, :], axis=0))
    if over.size:
        c = int(over[0])
        raise ValidationError("prior.rows", f"column {c} holds states outside [0, {int(layout.k[c]) - 1}]")
    out = _empty(layout, "gaussian", 1)
    joint = JointSpreadPrior(**{f.name: getattr(out, f.name) for f in fields(SpreadPrior)}, rows=rows)
    for c in range(D):
        joint.disc[c, : layout.k[c]] = np.bincount(rows[:, c], minlength=int(layout.k[c])) / rows.shape[0]
    return joint


class PatternSampler:
    """Exact draws from ρ(row | x̃) ∝ p(x̃ | row) for a block of records, by inverse CDF over the M
    public rows. Records that released the same values in the same columns share one CDF (with one
    sampled attribute a block has at most Σ_d k_d patterns), and a joint prior is fixed, so the
    CDFs are computed once and each draw is a binary search."""

    def __init__(self, prior: JointSpreadPrior, rm: RecordMechanism, X: np.ndarray, released: np.ndarray):
        pattern = np.where(released, X, -1.0)
        uniq, inv = np.unique(pattern, axis=0, return_inverse=True)
        lw = prior.log_weights(rm, np.where(uniq < 0, np.nan, uniq), uniq >= 0)
        self.cdf = np.cumsum(np.exp(lw - lw.max(axis=1, keepdims=True)), axis=1)  # (patterns, M)
        self.rows = prior.rows
        inv = inv.ravel()
        order = np.argsort(inv, kind="stable")
        self.groups = np.split(order, np.cumsum(np.bincount(inv, minlength=len(uniq)))[:-1])

    @staticmethod
    def size(X: np.ndarray, released: np.ndarray, n_rows: int) -> int:
        """Bytes of the CDFs: one per distinct release pattern (counted, not bounded by one per record)."""
        return 8 * len(np.unique(np.where(released, X, -1.0), axis=0)) * n_rows

    def draw(self, u: np.ndarray) -> np.ndarray:
        """The public rows drawn by uniforms ``u`` (one per record): (n, D) states."""
        idx = np.empty(u.shape, np.int64)
        for c, members in zip(self.cdf, self.groups):
            idx[members] = np.searchsorted(c, u[members] * c[-1], side="left")  # #entries below u·total
        return self.rows[np.minimum(idx, len(self.rows) - 1)]
