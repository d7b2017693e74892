"""Spread's tree prior p(x) = Π_v p(x_v | x_pa(v)) (Chow and Liu 1968), fitted to paired releases of
two pairs per record, which identify every attribute pair's table p(x_j, x_k, y). Each pair's table is
its maximum-likelihood estimate from the reports of the records that released that pair (EM on their
exact likelihood, shrunk toward naive Bayes's table by a few pseudo-records), the tree is the maximum
spanning tree of the tables' mutual information, and its conditionals are the edges' tables. A
naive-Bayes prior imputes the attributes a record did not release through the class alone; the tree,
through how the attributes depend on each other. The direct solver fits it (``TwoPairLikelihood``)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from scipy.sparse.csgraph import minimum_spanning_tree

from .._design import ColumnLayout
from ._factorised import SpreadPrior, _empty

#: each pair table's EM adds this many pseudo-records per cell, spread as naive Bayes's table of the
#: pair (the model the tree nests through the class): a pair few records released stays near it
TABLE_PSEUDO_COUNT = 0.5
#: the pair tables' EM stops when the mean log-likelihood per record rises by less than this
TABLE_TOL = 1e-9
TABLE_MAX_ITER = 500


@dataclass
class TreeSpreadPrior(SpreadPrior):
    """A fixed tree (a forest where no released pair links two parts): ``parent`` (D,) (−1 at a root),
    ``log_cond`` per column (k_pa, k_v) log p(x_v | x_pa), (1, k_v) log p(x_v) at a root, and each
    column's ``mutual_information`` with its parent (nats; 0 at a root). ``disc`` holds its marginals."""

    parent: np.ndarray | None = None
    log_cond: list | None = None
    mutual_information: np.ndarray | None = None

    def copy(self) -> TreeSpreadPrior:
        base = SpreadPrior.copy(self)
        kept = {f.name: getattr(base, f.name) for f in fields(SpreadPrior)}
        return TreeSpreadPrior(
            **kept, parent=self.parent, log_cond=self.log_cond, mutual_information=self.mutual_information
        )

    def order(self) -> list[int]:
        """The columns, each after its parent."""
        out = [int(r) for r in np.flatnonzero(self.parent < 0)]
        for v in out:  # grows while read: breadth first
            out.extend(int(c) for c in np.flatnonzero(self.parent == v))
        return out

    def _parent_states(self, X: np.ndarray, v: int) -> np.ndarray:
        return X[..., self.parent[v]] if self.parent[v] >= 0 else np.zeros(X.shape[:-1], np.int64)

    def log_prob(self, X: np.ndarray) -> np.ndarray:
        """log p(x) of states X (..., D)."""
        return sum(self.log_cond[v][self._parent_states(X, v), X[..., v]] for v in range(self.parent.size))

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n draws of x (n, D), each column after its parent (inverse CDF)."""
        X = np.zeros((n, self.parent.size), np.int64)
        for v in self.order():
            cdf = np.cumsum(np.exp(self.log_cond[v]), axis=1)[self._parent_states(X, v)]
            u = rng.random(n)[:, None] * cdf[:, -1:]
            X[:, v] = np.minimum((u > cdf).sum(axis=1), cdf.shape[1] - 1)
        return X

    def _down(self, a: int, v: int) -> np.ndarray:
        """p(x_v | x_a) (k_a, k_v) for an ancestor a of v (the identity at v = a)."""
        path = []
        while v != a:
            path.append(v)
            v = int(self.parent[v])
        T = np.eye(self.layout.k[a])
        for w in reversed(path):
            T = T @ np.exp(self.log_cond[w])
        return T

    def _ancestors(self, v: int) -> list[int]:
        out = [v]
        while self.parent[out[-1]] >= 0:
            out.append(int(self.parent[out[-1]]))
        return out

    def pair_margin(self, j: int, k: int) -> np.ndarray:
        """p(x_j = s, x_k = t) (k_j, k_k), exactly: through their lowest common ancestor a,
        Σ_a p(a) p(x_j | a) p(x_k | a); the product of the margins across two trees of a forest."""
        kj, kk = self.layout.k[j], self.layout.k[k]
        common = [a for a in self._ancestors(j) if a in self._ancestors(k)]
        if not common:
            return np.outer(self.disc[j, :kj], self.disc[k, :kk])
        a = common[0]
        return self._down(a, j).T @ (self.disc[a, : self.layout.k[a], None] * self._down(a, k))

    def _cell_log(self, X: np.ndarray, cell: dict):
        """Σ of the log factors that hold a column of ``cell`` (column: its states, shaped to broadcast
        against the draws' axis), the others at the draws' X (n, D): log p(x with the cell set) up
        to what does not depend on the cell."""
        F = 0.0
        for v in range(self.parent.size):
            a = int(self.parent[v])
            if v in cell or a in cell:
                pa = (cell[a] if a in cell else X[:, a]) if a >= 0 else 0
                F = F + self.log_cond[v][pa, cell[v] if v in cell else X[:, v]]
        return F

    def state_weights(self, X: np.ndarray, j: int) -> np.ndarray:
        """Weights (k_j, n) of draws X with Σ_n W[s] f(x_n with x_j = s) ≈ E[f | x_j = s], each row
        summing to 1: importance weights p(x_j = s | the draw's other attributes) / p(x_j = s)."""
        F = self._cell_log(X, {j: np.arange(self.layout.k[j])[:, None]}) + np.zeros((1, X.shape[0]))
        R = np.exp(F - F.max(axis=0, keepdims=True))
        R /= R.sum(axis=0, keepdims=True)
        return R / R.sum(axis=1, keepdims=True)

    def cell_weights(self, X: np.ndarray, j: int, k: int) -> np.ndarray:
        """Weights Wm (k_j, k_k, n) of draws X (n, D) from this prior with Σ_n Wm[s, t] f(x_n with x_j = s,
        x_k = t) ≈ p(x_j = s, x_k = t) E[f | x_j = s, x_k = t]: each draw's p(x_j, x_k | its other
        attributes) over n (Rao-Blackwellised)."""
        kj, kk = self.layout.k[j], self.layout.k[k]
        cell = {j: np.arange(kj)[:, None, None], k: np.arange(kk)[None, :, None]}
        F = self._cell_log(X, cell) + np.zeros((1, 1, X.shape[0]))
        R = np.exp(F - F.max(axis=(0, 1), keepdims=True))
        return R / (R.sum(axis=(0, 1), keepdims=True) * X.shape[0])

    def public(self) -> dict:
        """What users see as ``prior_``: the margins, and the tree (each column's parent and their
        mutual information)."""
        tree = {"parent": self.parent.copy(), "mutual_information": self.mutual_information.copy()}
        return super().public() | {"tree": tree}


def pair_tables(units: dict, start: dict) -> dict:
    """Per released pair (j, k): the maximum-likelihood table Q(s, t, c) of (x_j, x_k, y) from its
    records' reports (``units``: counts of distinct reports, P(v_j | s, c), P(v_k | t, c)), by EM
    from ``start``'s table with ``TABLE_PSEUDO_COUNT`` pseudo-records per cell spread as it."""
    out = {}
    for jk, (cnt, Lj, Lk) in units.items():
        q0 = start[jk].ravel()
        L = (Lj[:, :, None, :] * Lk[:, None, :, :]).reshape(cnt.size, -1)  # (u, k_j·k_k·C)
        N, a = float(cnt.sum()), TABLE_PSEUDO_COUNT * q0.size
        q, prev = q0.copy(), -np.inf
        for _ in range(TABLE_MAX_ITER):
            pv = np.maximum(L @ q, 1e-300)
            ll = float(cnt @ np.log(pv)) / N
            q = (q * (L.T @ (cnt / pv)) + a * q0) / (N + a)
            if ll - prev < TABLE_TOL:
                break
            prev = ll
        out[jk] = q.reshape(start[jk].shape)
    return out


def naive_bayes_pair_tables(nb, units: dict) -> dict:
    """Naive Bayes's table π_c p(s | c) p(t | c) (k_j, k_k, C) of each released pair, from its mixture
    prior ``nb``: where the pair tables' EM starts, and what their pseudo-records spread as."""
    pi = np.exp(nb.log_pi)
    P = [np.exp(lp) for lp in nb.log_p]
    ks = nb.layout.k
    return {(j, k): np.einsum("c,cs,ct->stc", pi, P[j][:, : ks[j]], P[k][:, : ks[k]]) for j, k in units}


def tree_prior(layout: ColumnLayout, units: dict, start: dict) -> TreeSpreadPrior:
    """``prior="tree"``: the Chow–Liu tree of the released pairs' tables (``pair_tables``; ``start``:
    naive Bayes's table per pair), over the maximum spanning tree of their mutual information
    I(x_j; x_k). A column no released pair holds keeps a uniform margin."""
    ks = [int(k) for k in layout.k]
    D = len(ks)
    P = {jk: q.sum(axis=2) for jk, q in pair_tables(units, start).items()}
    MI = np.zeros((D, D))
    margin, seen = [np.zeros(k) for k in ks], np.zeros(D)
    for (j, k), p in P.items():
        p = np.maximum(p, 1e-300) / p.sum()
        pj, pk = p.sum(axis=1), p.sum(axis=0)
        MI[j, k] = float(np.sum(p * (np.log(p) - np.log(pj)[:, None] - np.log(pk)[None, :])))
        margin[j] += pj
        margin[k] += pk
        seen[[j, k]] += 1
    margin = [m / s if s else np.full(k, 1.0 / k) for m, s, k in zip(margin, seen, ks)]
    # csgraph reads 0 as no edge: a released pair's weight is below 0 even at zero information
    W = np.zeros((D, D))
    for j, k in P:
        W[j, k] = -(MI[j, k] + 1e-12)
    T = minimum_spanning_tree(W).toarray()
    adj = (T != 0) | (T.T != 0)
    parent = np.full(D, -1)
    done = np.zeros(D, bool)
    for r in range(D):
        if done[r]:
            continue
        done[r], todo = True, [r]
        for v in todo:  # grows while read: breadth first
            for c in np.flatnonzero(adj[v] & ~done):
                parent[c], done[c] = v, True
                todo.append(int(c))
    log_cond, mi = [], np.zeros(D)
    for v in range(D):
        a = int(parent[v])
        if a < 0:
            log_cond.append(np.log(np.maximum(margin[v], 1e-300))[None])
            continue
        p = P[(a, v)] if a < v else P[(v, a)].T  # (k_a, k_v)
        p = np.maximum(p, 1e-300)
        log_cond.append(np.log(p / p.sum(axis=1, keepdims=True)))
        mi[v] = MI[min(a, v), max(a, v)]
    return fixed_tree(layout, parent, log_cond, mi)


def fixed_tree(layout: ColumnLayout, parent: np.ndarray, log_cond: list, mi: np.ndarray | None = None):
    """The TreeSpreadPrior of these parents and log-conditionals (``TreeSpreadPrior``), with its
    marginals, each column's from its parent's, in ``disc``."""
    out = _empty(layout, "gaussian", 1)
    prior = TreeSpreadPrior(
        **{f.name: getattr(out, f.name) for f in fields(SpreadPrior)},
        parent=np.asarray(parent),
        log_cond=log_cond,
        mutual_information=np.zeros(len(parent)) if mi is None else mi,
    )
    ks = layout.k
    for v in prior.order():
        a = int(prior.parent[v])
        pv = np.exp(log_cond[v][0]) if a < 0 else prior.disc[a, : ks[a]] @ np.exp(log_cond[v])
        prior.disc[v, : ks[v]] = pv
    return prior
