"""Releases of two attributes per record (two pairs, or one triple), arranged by the pair of attributes
released: the distinct reports' counts and their likelihoods P(v | cell) as one matrix (reports × cells)
per pair (``release_units``). A triple's matrix is dense, or for local hashing (``LocalHashing``)
two-valued, ``low`` off and ``high`` on the cells each report's hash maps to its value. Every consumer
(the direct fit's likelihood, the pair tables' EM, the pairwise prior) reads it only through ``L @ q``
and ``L.T @ r``, so the two-valued form costs O(cells/g) a report, not O(cells): at 10⁶ triple reports
on Adult that is about 1 GB of dense matrix read twice per evaluation."""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix, vstack

from ...errors import ValidationError
from ...mechanisms import TripleRecordMechanism


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


def two_pair_units(groups: list, X: np.ndarray) -> tuple[dict, int]:
    """The releases of two pairs per record by the pair of attributes released, j < k: (counts of the
    distinct reports (u,), P(v_j | s, c) (u, k_j, C), P(v_k | t, c) (u, k_k, C)) per pair, and the
    number of records. A record that released another number of pairs is refused, naming ``solver``."""
    units, n = {}, 0
    for rm, rows in groups:
        Xg = X[rows]
        released = ~np.isnan(Xg)
        odd = int(np.sum(released.sum(axis=1) != 2))
        if odd:
            raise ValidationError("solver", f"'direct' needs both pairs of every record: {odd} hold another number")
        for j, k, at in _by_pair(released):
            pairs, cnt = np.unique(Xg[at][:, [j, k]], axis=0, return_counts=True)
            Lj = np.exp(rm.paired.pair_log_likelihood(j, pairs[:, 0]))
            Lk = np.exp(rm.paired.pair_log_likelihood(k, pairs[:, 1]))
            old = units.get((j, k))
            new = (cnt.astype(float), Lj, Lk)
            units[(j, k)] = new if old is None else tuple(np.concatenate(ab) for ab in zip(old, new))
            n += int(cnt.sum())
    return units, n


def triple_units(groups: list, X: np.ndarray) -> tuple[dict, int]:
    """Triple releases (``TripleRecordMechanism``) by the pair of attributes released, j < k: (counts of
    the distinct reports (u,), P(v | s, t, c) (u, k_j·k_k·C), cells (s, t, c) row-major, a
    ``report_matrix``) per pair, and the number of records."""
    units, n = {}, 0
    for rm, rows in groups:
        Xg = X[rows]
        for j, k, at in _by_pair(~np.isnan(Xg)):
            reports, cnt = np.unique(Xg[at, j], return_counts=True)
            L = report_matrix(rm.oracle_of(j, k), reports)
            old = units.get((j, k))
            units[(j, k)] = (
                (cnt.astype(float), L) if old is None else (np.concatenate([old[0], cnt]), stack_reports(old[1], L))
            )
            n += int(cnt.sum())
    return units, n


def _by_pair(released: np.ndarray):
    """(j, k, the records' indices) per pair of attributes j < k released by records of two attributes
    each (``released`` (n, D) bool, two True a row), in the order of (j, k)."""
    cols = np.nonzero(released)[1].reshape(-1, 2)
    code = cols[:, 0] * released.shape[1] + cols[:, 1]
    order = np.argsort(code, kind="stable")
    for at in np.split(order, np.flatnonzero(np.diff(code[order])) + 1):
        if at.size:
            j, k = divmod(int(code[at[0]]), released.shape[1])
            yield j, k, at


def release_units(groups: list, X: np.ndarray) -> tuple[dict, int]:
    """``triple_units`` of triple releases, else ``two_pair_units``."""
    return (triple_units if is_triple(groups[0][0]) else two_pair_units)(groups, X)


def is_triple(rm) -> bool:
    """True for a triple release's mechanism (``TripleRecordMechanism``)."""
    return isinstance(rm, TripleRecordMechanism)
