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
from .._logexp import logsumexp
from ._factorised import SpreadPrior, _empty

#: each pair table's EM adds this many pseudo-records per cell, spread as naive Bayes's table of the
#: pair (the model the tree nests through the class): a pair few records released stays near it
TABLE_PSEUDO_COUNT = 0.5
#: the pair tables' EM stops when a SQUAREM cycle raises the penalised log-likelihood per record by
#: less than this (each cycle is three EM steps)
TABLE_TOL = 1e-10
TABLE_MAX_ITER = 500


@dataclass
class TreeSpreadPrior(SpreadPrior):
    """A fixed mixture of trees over one structure (a forest where no released pair links two parts):
    p(x) = Σ_m w_m Π_v p_m(x_v | x_pa(v)), with one component (``"tree"``) or one per class
    (``"class-tree"``: tree-augmented naive Bayes's p(x), Friedman, Geiger and Goldszmidt 1997).
    ``parent`` (D,) (−1 at a root), ``log_w`` (M,), ``log_cond`` per column (M, k_pa, k_v) log p_m(x_v |
    x_pa), (M, 1, k_v) at a root, and each column's ``mutual_information`` with its parent (nats;
    conditional on the class for "class-tree"; 0 at a root). ``disc`` holds its marginals."""

    parent: np.ndarray | None = None
    log_w: np.ndarray | None = None
    log_cond: list | None = None
    mutual_information: np.ndarray | None = None

    def copy(self) -> TreeSpreadPrior:
        base = SpreadPrior.copy(self)
        kept = {f.name: getattr(base, f.name) for f in fields(SpreadPrior)}
        mi = self.mutual_information
        return TreeSpreadPrior(
            **kept, parent=self.parent, log_w=self.log_w, log_cond=self.log_cond, mutual_information=mi
        )

    def order(self) -> list[int]:
        """The columns, each after its parent."""
        out = [int(r) for r in np.flatnonzero(self.parent < 0)]
        for v in out:  # grows while read: breadth first
            out.extend(int(c) for c in np.flatnonzero(self.parent == v))
        return out

    def _factor(self, v: int, pa, xv) -> np.ndarray:
        """log p_m(x_v | x_pa) (M, ...) at parent states ``pa`` and states ``xv`` (broadcast)."""
        return self.log_cond[v][:, pa if self.parent[v] >= 0 else 0, xv]

    def log_prob(self, X: np.ndarray) -> np.ndarray:
        """log p(x) of states X (n, D)."""
        L = sum(self._factor(v, X[:, max(self.parent[v], 0)], X[:, v]) for v in range(self.parent.size))
        return logsumexp(self.log_w[:, None] + L, axis=0)

    def draws(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n draws of x (n, D): the component, then each column after its parent (inverse CDF)."""
        X = np.zeros((n, self.parent.size), np.int64)
        w = np.exp(self.log_w)
        m = rng.choice(w.size, size=n, p=w / w.sum())
        for v in self.order():
            pa = X[:, self.parent[v]] if self.parent[v] >= 0 else 0
            cdf = np.cumsum(np.exp(self.log_cond[v]), axis=2)[m, pa]
            u = rng.random(n)[:, None] * cdf[:, -1:]
            X[:, v] = np.minimum((u > cdf).sum(axis=1), cdf.shape[1] - 1)
        return X

    def _down(self, m: int, a: int, v: int) -> np.ndarray:
        """p_m(x_v | x_a) (k_a, k_v) for an ancestor a of v (the identity at v = a)."""
        path = []
        while v != a:
            path.append(v)
            v = int(self.parent[v])
        T = np.eye(self.layout.k[a])
        for u in reversed(path):
            T = T @ np.exp(self.log_cond[u][m])
        return T

    def _ancestors(self, v: int) -> list[int]:
        out = [v]
        while self.parent[out[-1]] >= 0:
            out.append(int(self.parent[out[-1]]))
        return out

    def _margin(self, m: int, v: int) -> np.ndarray:
        """p_m(x_v): its root's table carried down."""
        r = self._ancestors(v)[-1]
        return np.exp(self.log_cond[r][m, 0]) @ self._down(m, r, v)

    def pair_margin(self, j: int, k: int) -> np.ndarray:
        """p(x_j = s, x_k = t) (k_j, k_k), exactly: per component through their lowest common ancestor
        a, Σ_a p_m(a) p_m(x_j | a) p_m(x_k | a) (the product of the margins across two trees)."""
        common = [a for a in self._ancestors(j) if a in self._ancestors(k)]
        out = 0.0
        for m, w in enumerate(np.exp(self.log_w)):
            if not common:
                out = out + w * np.outer(self._margin(m, j), self._margin(m, k))
                continue
            a = common[0]
            out = out + w * self._down(m, a, j).T @ (self._margin(m, a)[:, None] * self._down(m, a, k))
        return out

    def _cell_log(self, X: np.ndarray, cell: dict, shape: tuple) -> np.ndarray:
        """log p(x) (``shape`` + (n,)) of the draws X (n, D) with the columns of ``cell`` set to its
        states (shaped to broadcast against the draws' axis), up to what the cell does not change
        (a single tree's factors that hold no column of the cell)."""
        L = np.zeros((self.log_w.size, *shape, X.shape[0]))
        for v in range(self.parent.size):
            a = int(self.parent[v])
            if v in cell or a in cell or self.log_w.size > 1:
                pa = cell[a] if a in cell else X[:, max(a, 0)]
                f = self._factor(v, pa, cell[v] if v in cell else X[:, v])
                L = L + f.reshape(f.shape[:1] + (1,) * (L.ndim - f.ndim) + f.shape[1:])  # (M, n): every cell
        return logsumexp(self.log_w.reshape((-1,) + (1,) * (L.ndim - 1)) + L, axis=0)

    def state_weights(self, X: np.ndarray, j: int) -> np.ndarray:
        """Weights (k_j, n) of draws X with Σ_n W[s] f(x_n with x_j = s) ≈ E[f | x_j = s], each row
        summing to 1: importance weights p(x_j = s | the draw's other attributes) / p(x_j = s)."""
        kj = self.layout.k[j]
        F = self._cell_log(X, {j: np.arange(kj)[:, None]}, (kj,))
        R = np.exp(F - F.max(axis=0, keepdims=True))
        R /= R.sum(axis=0, keepdims=True)
        return R / R.sum(axis=1, keepdims=True)

    def cell_weights(self, X: np.ndarray, j: int, k: int) -> np.ndarray:
        """Weights Wm (k_j, k_k, n) of draws X (n, D) from this prior with Σ_n Wm[s, t] f(x_n with x_j = s,
        x_k = t) ≈ p(x_j = s, x_k = t) E[f | x_j = s, x_k = t]: each draw's p(x_j, x_k | its other
        attributes) over n (Rao-Blackwellised)."""
        kj, kk = self.layout.k[j], self.layout.k[k]
        F = self._cell_log(X, {j: np.arange(kj)[:, None, None], k: np.arange(kk)[None, :, None]}, (kj, kk))
        R = np.exp(F - F.max(axis=(0, 1), keepdims=True))
        return R / (R.sum(axis=(0, 1), keepdims=True) * X.shape[0])

    def public(self) -> dict:
        """What users see as ``prior_``: the margins, and the tree (each column's parent and their
        mutual information)."""
        tree = {"parent": self.parent.copy(), "mutual_information": self.mutual_information.copy()}
        return super().public() | {"tree": tree}


def pair_tables(units: dict, start: dict) -> dict:
    """Per released pair (j, k): the maximum-likelihood table Q(s, t, c) of (x_j, x_k, y) from its
    records' reports (``units``: counts of distinct reports and P(v_j | s, c), P(v_k | t, c) of two
    pairs, or P(v | s, t, c) of a triple), by EM from ``start``'s table with ``TABLE_PSEUDO_COUNT``
    pseudo-records per cell spread as it."""
    return {jk: _squarem(unit_matrix(u), u[0], start[jk].ravel()).reshape(start[jk].shape) for jk, u in units.items()}


def unit_matrix(unit: tuple) -> np.ndarray:
    """A released pair's report likelihoods as one matrix (u, k_j·k_k·C) over its cells (s, t, c):
    P(v_j | s, c) P(v_k | t, c) of two pair reports, or P(v | s, t, c) of a triple (a ``report_matrix``)."""
    cnt, *L = unit
    if len(L) == 2:
        return (L[0][:, :, None, :] * L[1][:, None, :, :]).reshape(cnt.size, -1)
    return L[0]


def _squarem(L: np.ndarray, cnt: np.ndarray, q0: np.ndarray) -> np.ndarray:
    """The table q maximising Σ_u cnt_u log (L q)_u + a Σ q0 log q (a = ``TABLE_PSEUDO_COUNT`` per cell),
    from q0: EM's map F(q) = (q ⊙ Lᵀ(cnt / Lq) + a q0) / (N + a), accelerated by SQUAREM (Varadhan and
    Roland 2008, scheme S3, step ≤ −1), whose cycle keeps the plain double step F(F(q)) whenever the
    extrapolated one scores lower, so the objective never falls. Plain EM needs thousands of steps here."""
    N, a = float(cnt.sum()), TABLE_PSEUDO_COUNT * q0.size

    def em(q):
        return (q * (L.T @ (cnt / np.maximum(L @ q, 1e-300))) + a * q0) / (N + a)

    def objective(q):
        pv, qq = np.maximum(L @ q, 1e-300), np.maximum(q, 1e-300)
        return (float(cnt @ np.log(pv)) + a * float(q0 @ np.log(qq))) / max(N, 1.0)  # a pair no report holds: q0

    q, prev = q0.copy(), objective(q0)
    for _ in range(TABLE_MAX_ITER):
        q1 = em(q)
        q2 = em(q1)
        r, v = q1 - q, q2 - 2.0 * q1 + q
        nv = float(np.sqrt(v @ v))
        alpha = min(-float(np.sqrt(r @ r)) / nv, -1.0) if nv > 0 else -1.0
        step = np.maximum(q - 2.0 * alpha * r + alpha * alpha * v, 0.0)
        step = em(step / step.sum())
        new, now = step, objective(step)
        if not now >= (plain := objective(q2)):  # also when the extrapolation is not finite
            new, now = q2, plain
        q, rise, prev = new, now - prev, now
        if rise < TABLE_TOL:
            break
    return q


def naive_bayes_pair_tables(nb, units: dict) -> dict:
    """Naive Bayes's table π_c p(s | c) p(t | c) (k_j, k_k, C) of each released pair, from its mixture
    prior ``nb``: where the pair tables' EM starts, and what their pseudo-records spread as."""
    pi = np.exp(nb.log_pi)
    P = [np.exp(lp) for lp in nb.log_p]
    ks = nb.layout.k
    return {(j, k): np.einsum("c,cs,ct->stc", pi, P[j][:, : ks[j]], P[k][:, : ks[k]]) for j, k in units}


def triple_naive_bayes_prior(layout: ColumnLayout, units: dict):
    """Naive Bayes's p(x) = Σ_c π_c Π_j p(x_j | c) from triple releases (``units`` of
    ``TripleRecordMechanism``'s reports): each released pair's table by EM from the uniform table
    (``pair_tables``), then π_c and each attribute's p(x_j = s | c) averaged over the tables' margins
    that hold them (a table (j, k) holds x_j's margin with the label whatever its partner). An
    attribute no released pair holds keeps a uniform p(x_j | c)."""
    from ._mixture import mixture_prior

    ks = [int(k) for k in layout.k]
    shapes = {(j, k): (ks[j], ks[k], u[1].shape[1] // (ks[j] * ks[k])) for (j, k), u in units.items()}
    Q = pair_tables(units, {jk: np.full(shape, 1.0 / np.prod(shape)) for jk, shape in shapes.items()})
    C = next(iter(Q.values())).shape[2]
    pi = normalise_rows(sum(q.sum(axis=(0, 1)) for q in Q.values())[None])[0]
    joint = [np.zeros((C, int(k))) for k in layout.k]
    for (j, k), q in Q.items():
        joint[j] += q.sum(axis=1).T  # (C, k_j): p(x_j = s, y = c)
        joint[k] += q.sum(axis=0).T
    P = [normalise_rows(t) if t.sum() > 0 else np.full(t.shape, 1.0 / t.shape[1]) for t in joint]
    return mixture_prior(layout, pi, np.log(np.maximum(pi, 1e-300)), [np.log(np.maximum(p, 1e-300)) for p in P], P)


def normalise_rows(t: np.ndarray) -> np.ndarray:
    """Each row of t scaled to sum to 1."""
    return t / t.sum(axis=1, keepdims=True)


def tree_prior(
    layout: ColumnLayout, units: dict, start: dict, by_class: bool = False, tables: dict | None = None
) -> TreeSpreadPrior:
    """``prior="tree"``: the Chow–Liu tree of the released pairs' tables (``pair_tables``; ``start``:
    naive Bayes's table per pair; ``tables``: those tables, if already fitted), the maximum spanning
    tree of their mutual information I(x_j; x_k); ``by_class`` (``"class-tree"``): one tree per class
    over the structure of the conditional mutual information I(x_j; x_k | y), weighted by the class
    margin (tree-augmented naive Bayes's p(x)). A column no released pair holds keeps a uniform margin."""
    ks = [int(k) for k in layout.k]
    D = len(ks)
    Q = pair_tables(units, start) if tables is None else tables
    Q = {
        jk: (np.maximum(q, 1e-300) if by_class else np.maximum(q.sum(axis=2, keepdims=True), 1e-300))
        for jk, q in Q.items()
    }
    M = next(iter(Q.values())).shape[2]
    w = sum(q.sum(axis=(0, 1)) / q.sum() for q in Q.values()) / len(Q)  # (M,)
    P = {jk: q / q.sum(axis=(0, 1), keepdims=True) for jk, q in Q.items()}  # p_m(s, t)
    MI = np.zeros((D, D))
    margin, seen = [np.zeros((M, k)) for k in ks], np.zeros(D)
    for (j, k), p in P.items():
        pj, pk = p.sum(axis=1), p.sum(axis=0)  # (k_j, M), (k_k, M)
        mi = np.sum(p * (np.log(p) - np.log(pj)[:, None] - np.log(pk)[None]), axis=(0, 1))
        MI[j, k] = float(w @ mi)
        margin[j] += pj.T
        margin[k] += pk.T
        seen[[j, k]] += 1
    margin = [m / s if s else np.full((M, k), 1.0 / k) for m, s, k in zip(margin, seen, ks)]
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
            log_cond.append(np.log(np.maximum(margin[v], 1e-300))[:, None, :])
            continue
        p = P[(a, v)] if a < v else P[(v, a)].transpose(1, 0, 2)  # (k_a, k_v, M)
        log_cond.append(np.log(p / p.sum(axis=1, keepdims=True)).transpose(2, 0, 1))
        mi[v] = MI[min(a, v), max(a, v)]
    return fixed_tree(layout, parent, log_cond, mi, np.log(w))


def fixed_tree(layout: ColumnLayout, parent, log_cond: list, mi=None, log_w=None) -> TreeSpreadPrior:
    """The TreeSpreadPrior of these parents, log-conditionals ((k_pa, k_v), or (M, k_pa, k_v) with the
    components' log-weights ``log_w``; (1, k_v) or (M, 1, k_v) at a root), with its marginals in ``disc``."""
    log_cond = [lc if lc.ndim == 3 else lc[None] for lc in log_cond]
    out = _empty(layout, "gaussian", 1)
    prior = TreeSpreadPrior(
        **{f.name: getattr(out, f.name) for f in fields(SpreadPrior)},
        parent=np.asarray(parent),
        log_w=np.zeros(1) if log_w is None else np.asarray(log_w, float),
        log_cond=log_cond,
        mutual_information=np.zeros(len(parent)) if mi is None else mi,
    )
    w = np.exp(prior.log_w)
    for v, k in enumerate(layout.k):
        prior.disc[v, :k] = sum(w[m] * prior._margin(m, v) for m in range(w.size))
    return prior
