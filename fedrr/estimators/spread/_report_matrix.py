"""A released pair's report likelihoods P(v | cell) as one matrix (reports × cells): dense, or for local
hashing (``LocalHashing``) two-valued, ``low`` off and ``high`` on the cells each report's hash maps to
its value. Every consumer (the direct fit's likelihood, the pair tables' EM, the pairwise prior) reads it
only through ``L @ q`` and ``L.T @ r``, so the two-valued form costs O(cells/g) a report, not O(cells):
at 10⁶ triple reports on Adult that is about 1 GB of dense matrix read twice per evaluation."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix, vstack


class HitMatrix:
    """P(v | cell) = low + (high − low)·S[v, cell], S (u, cells) sparse 0/1 (``LocalHashing.likelihood_hits``)."""

    def __init__(self, S: csr_matrix, low: float, high: float):
        self.S, self.low, self.high = S.tocsr(), float(low), float(high)
        self.ST = self.S.T  # Sᵀ as its CSC view, made once: ``L.T @ r`` per evaluation

    @property
    def shape(self) -> tuple[int, int]:
        return self.S.shape

    def __matmul__(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, float)
        return self.low * q.sum(axis=0) + (self.high - self.low) * (self.S @ q)

    @property
    def T(self) -> _Transposed:
        return _Transposed(self)

    def toarray(self) -> np.ndarray:
        """The dense matrix (for checks)."""
        return self.low + (self.high - self.low) * self.S.toarray()


class _Transposed:
    """Lᵀ of a ``HitMatrix``, for ``L.T @ r``."""

    def __init__(self, L: HitMatrix):
        self.L = L

    def __matmul__(self, r: np.ndarray) -> np.ndarray:
        r = np.asarray(r, float)
        return self.L.low * r.sum(axis=0) + (self.L.high - self.L.low) * (self.L.ST @ r)


def report_matrix(oracle, reports: np.ndarray):
    """The likelihoods of ``reports`` under a discrete ``oracle`` (u, k): a ``HitMatrix`` where the
    oracle gives its hits (local hashing), else the dense exp of its log-likelihood matrix."""
    if hasattr(oracle, "likelihood_hits"):
        return HitMatrix(*oracle.likelihood_hits(reports))
    return np.exp(oracle.log_likelihood_matrix(reports))


def stack_reports(a, b):
    """Two report matrices of the same cells, one below the other (the reports of two mechanisms)."""
    if isinstance(a, HitMatrix) and isinstance(b, HitMatrix) and (a.low, a.high) == (b.low, b.high):
        return HitMatrix(vstack([a.S, b.S], format="csr"), a.low, a.high)
    dense = [x.toarray() if isinstance(x, HitMatrix) else x for x in (a, b)]
    return np.concatenate(dense)
