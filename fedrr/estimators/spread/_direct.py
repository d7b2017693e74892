"""Spread's penalised maximum-likelihood fit maximised directly on paired releases of one pair per
record (``solver="direct"``). With the prior p(x) fixed, a record that released attribute j's pair
report v has likelihood Σ_{s,c} P(v | s, c) q_j(s, c) with q_j(s, c) = p(x_j = s) E[p_θ(c | x) | x_j = s]
(Barber 2020's likelihood of the noisy data, model ∘ known noise, the unreleased attributes summed
out under the prior): θ enters only through the pair tables, and the releases only through the
counts of their distinct reports per attribute. The expectation over the prior is taken on fixed
draws (``prior_draws``; by enumeration when the states' product is small), so the objective is
smooth and deterministic, and L-BFGS maximises log-likelihood − ‖coef − centre‖²/(2C): the
objective whose maximiser is spread-EM's fixed point, without EM's Monte Carlo noise or its slow
steps where most of the information is missing (97 % on Adult at ε 1: results/adult_scale_designs)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from ...errors import ValidationError
from ...mechanisms import EmpiricalPrior
from ._logexp import logsumexp
from ._mstep import class_log_softmax, lbfgs, penalised
from ._paired import PairedView, distinct_reports
from ._priors._joint import JointSpreadPrior
from ._priors._mixture import MixtureSpreadPrior

#: draws from the prior for the pair tables' expectation (states' products up to this are enumerated)
N_DRAWS = 16384


def prior_draws(prior, ks: np.ndarray, n_draws: int, rng: np.random.Generator, exact: bool = False):
    """Draws of x from the prior (n, D) and, per attribute j, weights (k_j, n) that make
    Σ_n W_j[s, n] f(x_n with x_j set to s) the expectation of f given x_j = s (rows summing to 1):
    a mixture's conditional weights p(x_j = s | z_n), a joint prior's rows with x_j = s, equal weights
    for a factorised prior. ``exact``: when the states' product is at most ``n_draws`` (and the prior
    is not a joint prior), every x once, weighted by the prior's probability of x with x_j set to s."""
    D = ks.size
    if exact and not isinstance(prior, JointSpreadPrior) and np.prod(ks.astype(float)) <= n_draws:
        X = np.array(list(itertools.product(*[range(k) for k in ks])), np.int64)
        W = []
        for j, k in enumerate(ks):
            Xs = np.repeat(X[None], k, axis=0)
            Xs[:, :, j] = np.arange(k)[:, None]
            W.append(np.exp(_log_prob(prior, Xs.reshape(-1, D))).reshape(k, -1))
        return X, [w / w.sum(axis=1, keepdims=True) for w in W]
    z = None
    if isinstance(prior, JointSpreadPrior):
        rows = np.asarray(prior.rows)
        X = rows[rng.integers(rows.shape[0], size=n_draws)] if rows.shape[0] > n_draws else rows
    elif isinstance(prior, MixtureSpreadPrior):
        z = rng.choice(len(prior.log_pi), size=n_draws, p=normalise(np.exp(prior.log_pi)))
        X = np.empty((n_draws, D))
        for d in range(D):
            cdf = np.cumsum(np.exp(prior.log_p[d]), axis=1)
            u = rng.random(n_draws) * cdf[z, -1]
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


def _log_prob(prior, X: np.ndarray) -> np.ndarray:
    """log p(x) of states X (n, D) under a mixture or a factorised prior."""
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


def blocker(mechanisms, prior) -> str | None:
    """Why ``solver="direct"`` cannot fit releases of these (prepared) record mechanisms with this
    ``prior`` parameter (None when it can): what "auto" reads, before any fit."""
    mechanisms = list(mechanisms)
    if not all(isinstance(rm, PairedView) for rm in mechanisms):
        return "needs paired releases (PairedRecordMechanism): a released label of its own is not a pair table's"
    if any(rm.paired.n_sampled != 1 for rm in mechanisms):
        return "needs one pair per record (n_sampled=1): several pairs' likelihood is a joint table's"
    if isinstance(prior, str) and prior == "learned":
        return "needs a fixed prior: prior='learned' is refined during EM"
    if isinstance(prior, EmpiricalPrior):
        return "does not take a prior of public rows"
    return None


def direct_blocker(groups: list, prior, p: dict) -> str | None:
    """``blocker`` of a fit's groups, and of its built prior."""
    why = blocker([rm for rm, _ in groups], p["prior"])
    return why or ("does not take a prior of public rows" if isinstance(prior, JointSpreadPrior) else None)


@dataclass
class DirectResult:
    coef: np.ndarray  # (Rn, n_inputs)
    intercept: np.ndarray  # (Rn,)
    n_iter: int
    converged: bool
    message: str
    objective: float


class PairLikelihood:
    """−log-likelihood of the releases' pair reports under a logistic model (``value_grad``), from
    the counts of each attribute's distinct reports and fixed draws from the prior."""

    def __init__(self, groups: list, X: np.ndarray, design, prior, n_classes: int, n_draws: int, seed: int):
        ks = np.asarray(design.layout.k, np.int64)
        self.D, self.ks = ks.size, ks
        self.Rn = 1 if n_classes == 2 else n_classes
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(2020,)))
        self.X, self.W = prior_draws(prior, ks, n_draws, rng, exact=True)
        self.margin = [prior_margin(prior, j, k) for j, k in enumerate(ks)]
        z0 = design.decode(np.zeros((1, self.D), np.int64))[0].astype(float)
        self.z0, self.E = z0, []
        for d, k in enumerate(ks):  # the encoding is additive over the columns: z(x) = z0 + Σ_d E_d[x_d]
            rows = np.zeros((k, self.D), np.int64)
            rows[:, d] = np.arange(k)
            self.E.append(design.decode(rows).astype(float) - z0)
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

    def _tables(self, coef, intercept):
        T = [E @ coef.T for E in self.E]  # (k_d, Rn): each state's contribution to the logits
        full = intercept + self.z0 @ coef.T + sum(T[d][self.X[:, d]] for d in range(self.D))  # (n, Rn)
        out = []
        for j in range(self.D):
            ell = full[None] - T[j][self.X[:, j]][None] + T[j][:, None, :]  # (k_j, n, Rn): x_j set to s
            if self.Rn == 1:  # one logit: p(1 | x) = σ(ℓ), kept as (k_j, n, 1)
                P = expit(ell)
                q1 = self.margin[j] * np.einsum("sn,sn->s", self.W[j], P[:, :, 0])
                q = np.stack([self.margin[j] - q1, q1], axis=1)
            else:
                P = np.exp(class_log_softmax(ell))  # (k_j, n, C)
                q = self.margin[j][:, None] * np.einsum("sn,snc->sc", self.W[j], P)
            out.append((q, P))
        return out, T

    def value_grad(self, coef: np.ndarray, intercept: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(−log-likelihood, its gradient in coef (Rn, n_inputs), in the intercepts (Rn,))."""
        parts, T = self._tables(coef, intercept)
        loss = 0.0
        a_tot = np.zeros((self.X.shape[0], self.Rn))
        gT = [np.zeros_like(t) for t in T]
        for j, ((q, P), rep) in enumerate(zip(parts, self.reports)):
            if rep is None:
                continue
            cnt, M = rep
            pv = np.maximum(np.einsum("usc,sc->u", M, q), 1e-300)
            loss -= float(cnt @ np.log(pv))
            G = -np.einsum("u,usc->sc", cnt / pv, M)  # d loss / d q_j(s, c)
            Gm = self.margin[j][:, None, None] * self.W[j][:, :, None]  # (k_j, n, 1)
            if self.Rn == 1:  # one logit (class 1 against 0): P holds P1, dP1/dℓ = P1 (1 − P1)
                A = Gm * (P * (1.0 - P)) * (G[:, 1] - G[:, 0])[:, None, None]
            else:  # softmax: dP_c/dℓ_r = P_c (δ_cr − P_r)
                A = Gm * P * (G[:, None, :] - np.sum(G[:, None, :] * P, axis=2, keepdims=True))
            gT[j] += A.sum(axis=1)
            a = A.sum(axis=0)  # (n, Rn): through the other attributes' states
            gT[j] -= _bincount(self.X[:, j], a, self.ks[j])
            a_tot += a
        for d in range(self.D):
            gT[d] += _bincount(self.X[:, d], a_tot, self.ks[d])
        gb = a_tot.sum(axis=0)
        gcoef = sum(g.T @ E for g, E in zip(gT, self.E)) + np.outer(gb, self.z0)
        return loss, gcoef, gb


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


def check_direct(groups: list, prior, p: dict) -> None:
    """``solver="direct"``'s check at fit: a ValidationError naming ``solver`` and why."""
    why = direct_blocker(groups, prior, p)
    if why is not None:
        raise ValidationError("solver", f"'direct' {why}; solver='em' fits them")
