"""Spread's penalised maximum-likelihood fit maximised directly on paired releases of one pair per
record (``solver="direct"``; two pairs per record through their joint tables, ``TwoPairLikelihood``).
With the prior p(x) fixed, a record that released attribute j's pair report v has likelihood
Σ_{s,c} P(v | s, c) q_j(s, c) with q_j(s, c) = p(x_j = s) E[p_θ(c | x) | x_j = s]
(Barber 2020's likelihood of the noisy data, model ∘ known noise, the unreleased attributes summed
out under the prior): θ enters only through the pair tables, and the releases only through the
counts of their distinct reports per attribute. The expectation over the prior is taken on fixed
draws (``prior_draws``; by enumeration when the states' product is small), so the objective is
smooth and deterministic, and L-BFGS maximises log-likelihood − ‖coef − centre‖²/(2C): the
objective whose maximiser is spread-EM's fixed point, without EM's Monte Carlo noise or its slow
steps where most of the information is missing (97 % on Adult at ε 1: results/adult_scale_designs)."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ...errors import ValidationError
from ._logexp import logsumexp
from ._mstep import class_log_softmax, lbfgs, penalised
from ._pair_reports import is_triple, release_units
from ._paired import PairedView, distinct_reports
from ._priors._joint import JointSpreadPrior
from ._priors._mixture import MixtureSpreadPrior
from ._priors._tree import TreeSpreadPrior

#: draws from the prior for the pair tables' expectation (states' products up to this are enumerated)
N_DRAWS = 16384
#: two pairs per record under a mixture prior: fewer draws, stratified (``prior_draws``). On Adult's
#: releases (N 1e5, ε 2; naive-Bayes and 4-class latent-class priors) fits on 8,192 such draws land
#: closer to a 65,536-random-draw fit than fits on N_DRAWS random ones (coefficients' rms 0.012 vs
#: 0.015, 0.009 vs 0.011; 3 seeds each), 4,096 do not; a factorised prior gained nothing: N_DRAWS
TWO_PAIR_DRAWS = 8192
#: a prior of public rows (``EmpiricalPrior``): up to this many rows are taken whole, the pair tables
#: then exact (Adult's 30,162 training rows); more are drawn uniformly, this many
JOINT_ROWS = 65536


def prior_draws(
    prior, ks: np.ndarray, n_draws: int, rng: np.random.Generator, exact: bool = False, stratified: bool = False
):
    """Draws of x from the prior (n, D) and, per attribute j, weights (k_j, n) that make
    Σ_n W_j[s, n] f(x_n with x_j set to s) the expectation of f given x_j = s (rows summing to 1):
    a mixture's conditional weights p(x_j = s | z_n), a joint prior's rows with x_j = s, equal weights
    for a factorised prior. ``exact``: when the states' product is at most ``n_draws`` (and the prior
    is not a joint prior), every x once, weighted by the prior's probability of x with x_j set to s.
    ``stratified`` (a mixture prior): each component's share of the draws is its weight's (largest
    remainders), and within it each attribute's states come from one uniform per stratum
    (``_stratified``): every count within 2 of its share, and on Adult's two-pair fits about a third
    of random draws' variance in the coefficients (``TWO_PAIR_DRAWS``)."""
    D = ks.size
    if exact and not isinstance(prior, JointSpreadPrior) and np.prod(ks.astype(float)) <= n_draws:
        X = np.array(list(itertools.product(*[range(k) for k in ks])), np.int64)
        W = []
        for j, k in enumerate(ks):
            Xs = np.repeat(X[None], k, axis=0)
            Xs[:, :, j] = np.arange(k)[:, None]
            W.append(np.exp(_log_prob(prior, Xs.reshape(-1, D))).reshape(k, -1))
        return X, [w / w.sum(axis=1, keepdims=True) for w in W]
    if isinstance(prior, TreeSpreadPrior):
        X = prior.draws(n_draws, rng)
        return X, [prior.state_weights(X, j) for j in range(D)]
    z = None
    if isinstance(prior, JointSpreadPrior):  # public rows: whole up to n_draws (exact), else n_draws drawn
        rows = np.asarray(prior.rows)
        X = rows[rng.integers(rows.shape[0], size=n_draws)] if rows.shape[0] > n_draws else rows
    elif isinstance(prior, MixtureSpreadPrior):
        if stratified:
            z = np.repeat(np.arange(len(prior.log_pi)), apportion(normalise(np.exp(prior.log_pi)), n_draws))
        else:
            z = rng.choice(len(prior.log_pi), size=n_draws, p=normalise(np.exp(prior.log_pi)))
        X = np.empty((n_draws, D))
        for d in range(D):
            cdf = np.cumsum(np.exp(prior.log_p[d]), axis=1)
            u = (_stratified(z, rng) if stratified else rng.random(n_draws)) * cdf[z, -1]
            X[:, d] = (cdf[z] < u[:, None]).sum(axis=1)
    else:
        X = np.stack([prior.sample_column(d, rng, (n_draws,)) for d in range(D)], axis=1)
    X = np.minimum(X, ks - 1).astype(np.int64)
    W = []
    for j, k in enumerate(ks):
        if isinstance(prior, JointSpreadPrior):
            w = (X[None, :, j] == np.arange(k)[:, None]).astype(float)
            w[w.sum(axis=1) == 0] = 1.0  # a state no row has: the other attributes as drawn
        elif z is not None:
            w = np.exp(prior.log_p[j][z].T)  # (k, n): p(x_j = s | z_n)
        else:
            w = np.ones((k, X.shape[0]))
        W.append(w / w.sum(axis=1, keepdims=True))
    return X, W


def apportion(p: np.ndarray, n: int) -> np.ndarray:
    """Integer shares of n in proportion to p (summing to 1): floors, plus one for the largest remainders."""
    m = np.floor(p * n).astype(np.int64)
    m[np.argsort(m - p * n, kind="stable")[: n - m.sum()]] += 1
    return m


def _stratified(z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniform per draw, stratified within each component's m draws: (π(i) + U_i)/m for a random
    permutation π of 0..m−1, new for each attribute (a Latin hypercube)."""
    u = np.empty(z.size)
    for c in np.unique(z):
        rows = np.flatnonzero(z == c)
        u[rows] = (rng.permutation(rows.size) + rng.random(rows.size)) / rows.size
    return u


def _log_prob(prior, X: np.ndarray) -> np.ndarray:
    """log p(x) of states X (n, D) under a mixture, a tree or a factorised prior."""
    if isinstance(prior, TreeSpreadPrior):
        return prior.log_prob(X)
    if isinstance(prior, MixtureSpreadPrior):
        lp = np.tile(prior.log_pi, (X.shape[0], 1))
        for d in range(X.shape[1]):
            lp = lp + prior.log_p[d][:, X[:, d]].T
        return logsumexp(lp, axis=1)
    with np.errstate(divide="ignore"):
        return sum(np.log(np.maximum(prior.disc[d, X[:, d]], 0.0)) for d in range(X.shape[1]))


def prior_margin(prior, j: int, k: int) -> np.ndarray:
    """p(x_j = s) under the prior, clipped to the simplex."""
    return normalise(np.maximum(prior.disc[j, :k], 0.0))


def normalise(p: np.ndarray) -> np.ndarray:
    """p scaled to sum to 1."""
    return p / p.sum()


def blocker(mechanisms, prior, max_pairs: int = 1) -> str | None:
    """Why ``solver="direct"`` cannot fit releases of these (prepared) record mechanisms with this
    ``prior`` parameter (None when it can). "auto" reads it with ``max_pairs`` 1, before any fit: two
    pairs per record are fitted only when asked for (``TwoPairLikelihood``, a research option whose
    accuracy is not yet measured against spread-EM's)."""
    mechanisms = list(mechanisms)
    if any(is_triple(rm) for rm in mechanisms):
        if not all(is_triple(rm) for rm in mechanisms):
            return "needs one kind of release for every record: these mix triples with other releases"
        if isinstance(prior, str) and prior == "learned":
            return "needs a fixed prior: prior='learned' is refined during EM"
        return None
    if not all(isinstance(rm, PairedView) for rm in mechanisms):
        return "needs paired releases (PairedRecordMechanism): a released label of its own is not a pair table's"
    if any(rm.paired.n_sampled > max_pairs for rm in mechanisms):
        if max_pairs == 1:
            return "is chosen by 'auto' for one pair per record (n_sampled=1); ask for it to fit two"
        return "fits one or two pairs per record (n_sampled 1 or 2): more pairs' likelihood is a larger joint table's"
    if len({rm.paired.n_sampled for rm in mechanisms}) > 1:
        return "needs one number of pairs per record for every record"
    if isinstance(prior, str) and prior == "learned":
        return "needs a fixed prior: prior='learned' is refined during EM"
    return None


@dataclass
class DirectResult:
    coef: np.ndarray  # (Rn, n_inputs)
    intercept: np.ndarray  # (Rn,)
    n_iter: int
    converged: bool
    message: str
    objective: float


class _DrawnModel:
    """What both likelihoods share: fixed draws of x from the prior, and the logistic model's logits
    on them as sums of per-attribute state contributions (the encoding is additive over columns)."""

    def __init__(self, design, prior, n_classes: int, n_draws: int, seed: int, stratified: bool = False):
        ks = np.asarray(design.layout.k, np.int64)
        self.D, self.ks = ks.size, ks
        self.Rn = 1 if n_classes == 2 else n_classes
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2020,)))
        self.X, self.W = prior_draws(prior, ks, n_draws, rng, exact=True, stratified=stratified)
        self.margin = [prior_margin(prior, j, k) for j, k in enumerate(ks)]
        z0 = design.decode(np.zeros((1, self.D), np.int64))[0].astype(float)
        self.z0, self.E = z0, []
        for d, k in enumerate(ks):  # z(x) = z0 + Σ_d E_d[x_d]
            rows = np.zeros((k, self.D), np.int64)
            rows[:, d] = np.arange(k)
            self.E.append(design.decode(rows).astype(float) - z0)

    def _logits(self, coef, intercept):
        """(T, full): each state's contribution to the logits (k_d, Rn) per attribute, and the draws'
        logits (n, Rn)."""
        T = [E @ coef.T for E in self.E]
        return T, intercept + self.z0 @ coef.T + sum(T[d][self.X[:, d]] for d in range(self.D))

    def _close(self, gT: list, a_tot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(gradient in coef, in the intercepts) from the state contributions' gradients ``gT`` and
        the draws' logits' ``a_tot`` (n, Rn), which reach every attribute's state and the intercept."""
        for d in range(self.D):
            gT[d] += _bincount(self.X[:, d], a_tot, self.ks[d])
        gb = a_tot.sum(axis=0)
        return sum(g.T @ E for g, E in zip(gT, self.E)) + np.outer(gb, self.z0), gb

    def _table(self, ell, Wm):
        """For logits ``ell`` (..., n, Rn) of the draws with a cell's states set and their weights
        times the cell's prior mass ``Wm`` (..., n): the class probabilities P (..., n, Rn) and the
        table q (..., C) = Σ_n Wm P."""
        if self.Rn == 1:  # one logit: p(1 | x) = σ(ℓ)
            P = expit(ell)
            q1 = np.einsum("...n,...n->...", Wm, P[..., 0])
            return P, np.stack([Wm.sum(axis=-1) - q1, q1], axis=-1)
        P = np.exp(class_log_softmax(ell))
        return P, np.einsum("...n,...nc->...c", Wm, P)

    def _logit_grad(self, P, Wm, G):
        """d loss / d ell (..., n, Rn) from ``_table``'s P and ``G`` (..., C) = d loss / d q."""
        if self.Rn == 1:  # dP1/dℓ = P1 (1 − P1)
            return Wm[..., None] * (P * (1.0 - P)) * (G[..., 1] - G[..., 0])[..., None, None]
        Gx = G[..., None, :]  # softmax: dP_c/dℓ_r = P_c (δ_cr − P_r)
        return Wm[..., None] * P * (Gx - np.sum(Gx * P, axis=-1, keepdims=True))

    def _pair_table(self, base, tj, tk, cell) -> tuple:
        """(q (k_j, k_k, C), back) for the logits ℓ = base[n] + tj[s] + tk[t] and the cells' weights
        ``cell``; back(G) with G = d loss / d q gives the gradients in tj (k_j, Rn), tk (k_k, Rn) and
        base (n, Rn). A binary model's by ``two_pair_table`` and ``two_pair_grad`` (e^{−ℓ} a product
        of three exps, no (k_j, k_k, n) array), unless the parts' sizes could take that product past
        exp's range; else in numpy."""
        scale, Wa, Wb, *kept = cell  # kept: the cells' weights Wm, when the caller keeps them
        if self.Rn == 1 and np.abs(base).max() + np.abs(tj).max() + np.abs(tk).max() < 600.0:
            from ._direct_kernels import two_pair_grad, two_pair_table  # numba: compiled at first use

            e = (np.exp(-base[:, 0]), np.exp(-tj[:, 0]), np.exp(-tk[:, 0]))
            q = np.empty((*scale.shape, 2))
            two_pair_table(*e, scale, Wa, Wb, q)

            def back(G):
                gj, gk, a = np.zeros((scale.shape[0], 1)), np.zeros((scale.shape[1], 1)), np.zeros((e[0].size, 1))
                two_pair_grad(*e, scale, Wa, Wb, G[..., 1] - G[..., 0], gj[:, 0], gk[:, 0], a[:, 0])
                return gj, gk, a

            return q, back
        ell = base[None, None] + (tj[:, None, :] + tk[None, :, :])[:, :, None, :]  # (k_j, k_k, n, Rn)
        Wm = kept[0] if kept else scale[:, :, None] * Wa * Wb
        P, q = self._table(ell, Wm)

        def back(G):
            A = self._logit_grad(P, Wm, G)  # (k_j, k_k, n, Rn)
            return A.sum(axis=(1, 2)), A.sum(axis=(0, 2)), A.sum(axis=(0, 1))

        return q, back


class PairLikelihood(_DrawnModel):
    """−log-likelihood of the releases' pair reports under a logistic model (``value_grad``), from
    the counts of each attribute's distinct reports and fixed draws from the prior. Each attribute's
    table goes through ``_pair_table`` with a second attribute of one state, so a binary model's runs
    in the compiled two-pair kernels (2.5× numpy's per evaluation on Adult's releases, equal to 1e-13
    of the gradient's scale)."""

    def __init__(self, groups: list, X: np.ndarray, design, prior, n_classes: int, n_draws: int, seed: int):
        super().__init__(design, prior, n_classes, n_draws, seed)
        ks = self.ks
        self.reports = []  # per attribute: (counts (u,), P(v | s, c) (u, k_j, C)) over every group's distinct reports
        self.n = 0
        for j in range(self.D):
            cnt, lik = [], []
            for rm, rows in groups:
                v = X[rows, j]
                v = v[~np.isnan(v)]
                if v.size:
                    c, L = distinct_reports(rm.paired, j, v)
                    cnt.append(c)
                    lik.append(np.exp(L).reshape(c.size, ks[j], n_classes))
            self.reports.append((np.concatenate(cnt), np.concatenate(lik)) if cnt else None)
            self.n += int(sum(c.sum() for c in cnt))
        # attribute j's cells for ``_pair_table``, with a second attribute of one state; their weights
        # Wm = p(x_j = s) W_j[s, n] kept for a model of several logits (numpy's path)
        ones = np.ones((1, 1, self.X.shape[0]))
        self.cells = [(self.margin[j][:, None], self.W[j][:, None, :], ones) for j in range(self.D)]
        if self.Rn > 1:
            self.cells = [(*c, c[0][:, :, None] * c[1]) for c in self.cells]
        self.no_state = np.zeros((1, self.Rn))

    def value_grad(self, coef: np.ndarray, intercept: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(−log-likelihood, its gradient in coef (Rn, n_inputs), in the intercepts (Rn,))."""
        T, full = self._logits(coef, intercept)
        loss = 0.0
        a_tot = np.zeros((self.X.shape[0], self.Rn))
        gT = [np.zeros_like(t) for t in T]
        for j, rep in enumerate(self.reports):
            if rep is None:
                continue
            cnt, M = rep
            base = full - T[j][self.X[:, j]]  # (n, Rn): the draws without x_j
            q, back = self._pair_table(base, T[j], self.no_state, self.cells[j])
            q = q[:, 0]  # q_j(s, c)
            pv = np.maximum(np.einsum("usc,sc->u", M, q), 1e-300)
            loss -= float(cnt @ np.log(pv))
            G = -np.einsum("u,usc->sc", cnt / pv, M)  # d loss / d q_j(s, c)
            gj, _, a = back(G[:, None])  # a (n, Rn): through the other attributes' states
            gT[j] += gj - _bincount(self.X[:, j], a, self.ks[j])
            a_tot += a
        return (loss, *self._close(gT, a_tot))


class TwoPairLikelihood(_DrawnModel):
    """−log-likelihood of releases that carry two attributes per record: two pairs, or one triple. A
    record that released attributes j and k's pair reports (v_j, v_k), one label behind both, has
    likelihood Σ_{s,t,c} P(v_j | s, c) P(v_k | t, c) q_jk(s, t, c), and one that released their triple
    report v, Σ_{s,t,c} P(v | s, t, c) q_jk(s, t, c); q_jk(s, t, c) = p(x_j = s, x_k = t)
    E[p_θ(c | x) | x_j = s, x_k = t] (Barber's likelihood of the noisy data, the other attributes summed
    out under the prior): the same construction as ``PairLikelihood`` on the joint tables of the pairs
    of attributes, which is where a prior that knows how attributes co-occur enters. A mixture prior's
    draws are stratified (``prior_draws``)."""

    #: a prior of rows takes each row's own cell (``_rows_value_grad``); False: the cells' weights, as any
    #: other prior (the same value; a benchmark's baseline, ``benchmarks/bench_spread_scale.py --cells``)
    ROWS_OWN_CELL = True

    def __init__(self, groups, X, design, prior, n_classes: int, n_draws: int, seed: int, units: dict | None = None):
        super().__init__(design, prior, n_classes, n_draws, seed, stratified=True)
        self.prior = prior
        # every x once, weighted by p(x) (public rows are never enumerated)
        self.exact = not isinstance(prior, JointSpreadPrior) and self.X.shape[0] == int(np.prod(self.ks.astype(float)))
        self.by_row = self.ROWS_OWN_CELL and isinstance(prior, JointSpreadPrior)
        if self.by_row:  # each distinct row once, weighted by its count (a pairwise prior's 65,536 hold ~30,000)
            self.X, counts = np.unique(self.X, axis=0, return_counts=True)
            self.row_weight = counts / counts.sum()
            self.W = None  # the draws' per-state weights were the cells' path's, over the draws before this
        if units is None:
            units = release_units(groups, X)[0]
        self._set_units(units)

    def _set_units(self, units: dict) -> None:
        """The releases' units, arranged for ``value_grad``: two pairs' class-major (C, u, k) for the
        products, a triple's (u, k_j·k_k·C) for one matrix product; the cells of every pair they hold."""
        self.units, self.n = {}, int(sum(u[0].sum() for u in units.values()))
        for jk, (cnt, *L) in units.items():
            if len(L) == 2:
                self.units[jk] = (cnt, *(np.ascontiguousarray(x.transpose(2, 0, 1)) for x in L))
            else:
                self.units[jk] = (cnt, L[0])
        if self.by_row:  # a prior of rows: the pairs and where each pair's cells start (``_rows_value_grad``)
            self.row_pairs = np.array(list(self.units), np.int64).reshape(-1, 2)
            sizes = [int(self.ks[j] * self.ks[k]) for j, k in self.units]
            self.row_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            self.XT = np.ascontiguousarray(self.X.T)
            return
        cells = getattr(self, "cells", {})
        self.cells = {jk: cells.get(jk) or self._cell_weights(self.prior, *jk, self.exact) for jk in self.units}

    def with_releases(self, groups: list, X: np.ndarray) -> TwoPairLikelihood:
        """The likelihood of other releases under the same prior, draws and cells (a CV's held-out fold)."""
        other = copy.copy(self)
        other._set_units(release_units(groups, X)[0])
        return other

    def _cell_weights(self, prior, j: int, k: int, exact: bool) -> tuple:
        """(scale (k_j, k_k), Wa, Wb): the cells' weights Wm = scale[:, :, None] Wa Wb (k_j, k_k, n),
        p(x_j = s, x_k = t) times the draws' weights given that cell, each cell's weights summing to 1:
        by p(x) with the two states set when every x is drawn once (Wa (k_j, k_k, n), Wb ones), a tree's
        own (``TreeSpreadPrior.cell_weights`` as Wa), else the product of the one-attribute weights
        Wa (k_j, 1, n), Wb (1, k_k, n), renormalised (exact for a mixture: p(s | z) p(t | z)). Factors,
        not the product, where they are factors: Adult's would take 600 MB."""
        kj, kk = self.ks[j], self.ks[k]
        if isinstance(prior, TreeSpreadPrior) and not exact:
            return np.ones((kj, kk)), prior.cell_weights(self.X, j, k), np.ones((1, 1, self.X.shape[0]))
        if isinstance(prior, JointSpreadPrior):  # rows: Wa Wb is the indicator of the cell, as a row's own
            pm = np.zeros((kj, kk))
            np.add.at(pm, (self.X[:, j], self.X[:, k]), 1.0 / self.X.shape[0])  # the rows' pair frequencies
            den = self.W[j] @ self.W[k].T  # n_st / (n_s n_t); a cell no row holds has no mass
            scale = np.divide(pm, den, out=np.zeros((kj, kk)), where=pm > 0)
            return scale, np.ascontiguousarray(self.W[j][:, None, :]), np.ascontiguousarray(self.W[k][None, :, :])
        pm = pair_margin(prior, j, k, kj, kk)
        if exact:
            Xs = np.repeat(self.X[None, None], kj, axis=0).repeat(kk, axis=1)
            Xs[..., j] = np.arange(kj)[:, None, None]
            Xs[..., k] = np.arange(kk)[None, :, None]
            W = np.exp(_log_prob(prior, Xs.reshape(-1, self.D))).reshape(kj, kk, -1)
            return pm, W / W.sum(axis=2, keepdims=True), np.ones((1, 1, W.shape[2]))
        Wa, Wb = np.ascontiguousarray(self.W[j][:, None, :]), np.ascontiguousarray(self.W[k][None, :, :])
        return pm / (self.W[j] @ self.W[k].T), Wa, Wb

    def value_grad(self, coef: np.ndarray, intercept: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(−log-likelihood, its gradient in coef (Rn, n_inputs), in the intercepts (Rn,))."""
        return (self._rows_value_grad if self.by_row else self._cells_value_grad)(coef, intercept)

    def _cells_value_grad(self, coef: np.ndarray, intercept: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``value_grad`` by the cells' weights over every (s, t, draw) (``_cell_weights``)."""
        T, full = self._logits(coef, intercept)
        loss = 0.0
        a_tot = np.zeros((self.X.shape[0], self.Rn))
        gT = [np.zeros_like(t) for t in T]
        Xd = self.X
        for (j, k), (cnt, *L) in self.units.items():
            base = full - T[j][Xd[:, j]] - T[k][Xd[:, k]]  # (n, Rn): the draws without x_j, x_k
            q, back = self._pair_table(base, T[j], T[k], self.cells[(j, k)])  # q_jk(s, t, c)
            term, G = _reports_term(q, cnt, L)
            loss += term
            gj, gk, a = back(G)
            gT[j] += gj - _bincount(Xd[:, j], a, self.ks[j])  # a (n, Rn): through the draws' own states
            gT[k] += gk - _bincount(Xd[:, k], a, self.ks[k])
            a_tot += a
        return (loss, *self._close(gT, a_tot))

    def _rows_value_grad(self, coef: np.ndarray, intercept: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``value_grad`` under a prior of rows (``JointSpreadPrior``). A distinct row is the prior's only
        draw in its own cell, so q_jk(s, t, c) = Σ_{rows n in (s, t)} w_n p_θ(c | x_n), w_n the row's share
        of the draws: one count of the rows' class probabilities per pair (``rows_tables``), where
        ``_cell_weights`` spans every (s, t, draw) (k_j·k_k times the work, the same table). The states'
        gradients through the cell and through the
        other attributes cancel, so the gradient reaches θ through the rows' own logits alone: each row
        gathers d loss / d q at its cells (``rows_gather``), then through p_θ(c | x_n)."""
        from ._direct_kernels import rows_gather, rows_tables  # numba: compiled at first use

        T, full = self._logits(coef, intercept)
        w = self.row_weight[:, None]
        if self.Rn == 1:  # P (n, 2) without 1 − p's cancellation
            P = np.stack([expit(-full[:, 0]), expit(full[:, 0])], axis=1)
        else:
            P = np.exp(class_log_softmax(full))
        q_all = np.zeros((int(self.row_offsets[-1]), P.shape[1]))
        cells = (self.XT, self.row_pairs, self.ks, self.row_offsets)  # each row's cell of each pair
        rows_tables(*cells, w * P, q_all)
        G_all = np.empty_like(q_all)
        loss = 0.0
        for (j, k), (cnt, *L), lo, hi in zip(self.units, self.units.values(), self.row_offsets, self.row_offsets[1:]):
            q = q_all[lo:hi].reshape(self.ks[j], self.ks[k], -1)
            term, G = _reports_term(q, cnt, L)
            loss += term
            G_all[lo:hi] = G.reshape(hi - lo, -1)
        Gn = np.zeros_like(P)
        rows_gather(*cells, G_all, Gn)  # (n, C): Σ over pairs of d loss / d q at the row's cells
        Gn *= w
        if self.Rn == 1:  # dp(1)/dℓ = p(0) p(1)
            a_tot = (P[:, 0] * P[:, 1] * (Gn[:, 1] - Gn[:, 0]))[:, None]
        else:  # softmax: dP_c/dℓ_r = P_c (δ_cr − P_r)
            a_tot = P * (Gn - np.sum(Gn * P, axis=1, keepdims=True))
        return (loss, *self._close([np.zeros_like(t) for t in T], a_tot))


def _reports_term(q: np.ndarray, cnt: np.ndarray, L: list) -> tuple[float, np.ndarray]:
    """One pair's −log-likelihood of its distinct reports (counts ``cnt``) given its table q_jk (k_j, k_k,
    C), and its gradient in q: two pairs' p(v_j, v_k) = Σ_{s,t,c} P(v_j | s, c) P(v_k | t, c) q(s, t, c)
    (``L`` their class-major matrices), a triple's p(v) = Σ_{s,t,c} P(v | s, t, c) q(s, t, c)."""
    if len(L) == 2:
        Lj, Lk = L
        pv = np.maximum(np.einsum("cus,cus->u", Lj, Lk @ q.transpose(2, 1, 0)), 1e-300)
        G = -(Lj.transpose(0, 2, 1) @ (Lk * (cnt / pv)[:, None])).transpose(1, 2, 0)
    else:
        pv = np.maximum(L[0] @ q.ravel(), 1e-300)
        G = -(L[0].T @ (cnt / pv)).reshape(q.shape)
    return -float(cnt @ np.log(pv)), G


def triple_report_loglik(est, groups: list, X: np.ndarray, seed: int, fitted=None) -> float:
    """The mean held-out log-likelihood of triple reports ``X`` (``groups``: their mechanisms and rows)
    under a fitted spread model ``est`` and its prior: ``TwoPairLikelihood``'s, at the model's θ;
    ``fitted``: the likelihood ``est`` was fitted on (its prior's draws and cells are reused), or None."""
    if fitted is not None and fitted.prior is est._prior_state:
        lik = fitted.with_releases(groups, X)
    else:
        lik = TwoPairLikelihood(groups, X, est.design_, est._prior_state, len(est.classes_), N_DRAWS, seed)
    return -lik.value_grad(est.coef_, est.intercept_)[0] / max(lik.n, 1)


def pair_margin(prior, j: int, k: int, kj: int, kk: int) -> np.ndarray:
    """p(x_j = s, x_k = t) (k_j, k_k) under a mixture prior (Σ_z π_z p(s | z) p(t | z)), a tree, or the
    product of the margins under a factorised one."""
    if isinstance(prior, TreeSpreadPrior):
        return normalise(prior.pair_margin(j, k)[:kj, :kk])
    if isinstance(prior, MixtureSpreadPrior):
        m = np.einsum("z,zs,zt->st", np.exp(prior.log_pi), np.exp(prior.log_p[j]), np.exp(prior.log_p[k]))
        return normalise(m[:kj, :kk])
    return np.outer(prior_margin(prior, j, kj), prior_margin(prior, k, kk))


def pair_likelihood(groups: list, X: np.ndarray, design, prior, n_classes: int, seed: int, units=None):
    """The likelihood of these paired releases: ``PairLikelihood`` for one pair per record on N_DRAWS
    draws (a prior of public rows: its rows, up to JOINT_ROWS), ``TwoPairLikelihood`` for two (on
    TWO_PAIR_DRAWS stratified draws of a mixture prior; ``units``: their ``two_pair_units`` if already
    built)."""
    if is_triple(groups[0][0]) or groups[0][0].paired.n_sampled == 2:
        n_draws = TWO_PAIR_DRAWS if isinstance(prior, MixtureSpreadPrior) else N_DRAWS
        n_draws = JOINT_ROWS if isinstance(prior, JointSpreadPrior) else n_draws
        return TwoPairLikelihood(groups, X, design, prior, n_classes, n_draws, seed, units)
    n_draws = JOINT_ROWS if isinstance(prior, JointSpreadPrior) else N_DRAWS
    return PairLikelihood(groups, X, design, prior, n_classes, n_draws, seed)


def _bincount(idx: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """Σ of the rows of w (n, R) per value of idx: (k, R)."""
    return np.stack([np.bincount(idx, w[:, r], minlength=k) for r in range(w.shape[1])], axis=1)


def fit_direct(lik: PairLikelihood, C: float, fit_intercept: bool, center, start, max_iter: int) -> DirectResult:
    """L-BFGS on ``lik``'s −log-likelihood + ‖coef − center‖²/(2C) from ``start`` (θ: coefficients
    row-major, then the intercepts; None: θ = 0)."""
    Rn, p = lik.Rn, lik.z0.size
    lam = 0.0 if not np.isfinite(C) else 1.0 / C

    def unpack(v):
        coef = v[: Rn * p].reshape(Rn, p)
        return coef, (v[Rn * p :] if fit_intercept else np.zeros(Rn))

    def fg(v):
        coef, b = unpack(v)
        loss, gc, gb = lik.value_grad(coef, b)
        return penalised(loss, gc, gb, coef, lam, fit_intercept, center)

    v0 = np.zeros(Rn * p + (Rn if fit_intercept else 0)) if start is None else np.asarray(start, float).copy()
    if not fit_intercept and start is not None:
        v0 = v0[: Rn * p]
    res = lbfgs(fg, v0, float(lik.n), max_iter, tol=1e-7)
    coef, b = unpack(res.x)
    msg = f"L-BFGS on the pair reports' likelihood: {res.nit} iterations, {res.message}"
    return DirectResult(coef.copy(), np.asarray(b, float).copy(), int(res.nit), bool(res.success), msg, float(res.fun))


def check_tree(groups: list, solver: str, prior: str = "tree") -> None:
    """The check at fit of a prior fitted to pair tables (``prior``: "tree", "class-tree", "pairwise"):
    releases of two attributes per record (one pair shows nothing of how attributes co-occur), fitted by
    the direct solver; a ValidationError naming the parameter."""
    mechanisms = [rm for rm, _ in groups]
    two = all(is_triple(rm) for rm in mechanisms) or all(
        isinstance(rm, PairedView) and rm.paired.n_sampled == 2 for rm in mechanisms
    )
    if not two:
        msg = (
            f"{prior!r} needs releases of two attributes per record: paired releases of two pairs "
            "(PairedRecordMechanism(n_sampled=2)) or triples (TripleRecordMechanism)"
        )
        raise ValidationError("prior", f"{msg}: the pairs a record releases together are what identify it")
    if solver == "em":
        msg = f"'em' does not fit prior={prior!r}: its fit is solver='direct' ('auto' runs it)"
        raise ValidationError("solver", msg)


def check_direct(groups: list, prior) -> None:
    """``solver="direct"``'s check at fit (``prior``: the parameter): a ValidationError naming ``solver``
    and why."""
    why = blocker([rm for rm, _ in groups], prior, max_pairs=2)
    if why is not None:
        raise ValidationError("solver", f"'direct' {why}; solver='em' fits them")
