"""Held-out scores and the fallback's test of ``SpreadLogisticRegressionCV`` on paired releases
(``PairedRecordMechanism``), where the label travels inside each (attribute, label) report and has
no release of its own, so neither p(c̃ | x̃) nor a permutation of released labels exists.

What a fitted model says about a paired report. With the model p_θ(c | x) and its prior p(x), the
pair table of attribute j is q_j(s, c) = p(x_j = s) · E[p_θ(c | x) | x_j = s] (``model_pair_tables``),
and a report v of attribute j has likelihood Σ_{s,c} P(v | s, c) q_j(s, c). The selection scores a
held-out record by the sum of these over its released pairs (exact for one pair per record; a
composite likelihood for several).

The fallback's test (``association_test``). No signal means y independent of x, so every pair table
is a product m_j(s)·π(c). The model fitted on A predicts a direction of association; on B's reports
the statistic is

    T = Σ_j n_j Σ_{s,c} a_j(s, c) [Ê_j(s, c) − m̂_j(s) π̂_j(c)],

with Ê_j the mean of the oracle's unbiased one-hot estimates of B's pairs of attribute j and m̂_j,
π̂_j its margins, and a_j(s, c) = δ_j(s, c) / (g₀ + q_j(s, c)) the model's association δ_j = q_j −
(its margins' product) weighted by a cell's variance per report (g₀ the oracle's rare-value
variance): nearly the efficient score direction, where log q_j(c | s) (the chi-square weights) gives
rare states, whose reports are all noise at small ε, far too much weight (on Adult paired ε 1 they
let the test fall back on fits that these weights keep; a one-off check, not a committed script).
T is unchanged by any part of a_j additive in s or in c, and the margins' estimation error enters it
only at second order (the centring is Neyman-orthogonal), so under no signal T is a sum of n_B
independent mean-zero terms t_i = Σ_{j released} w_j a'_j(ê_ij) (a'_j the doubly centred table,
w_j the attribute's weight below). The p-value is the one-sided normal tail of T / √Σ(t_i − t̄)².
It is approximate (normal, with estimated margins), so its level is measured, not claimed:
``simulations/spread_fallback_level.py --part level --only paired:2`` (and ``paired:3``).

The attributes' weights w_j (``attribute_weights``). A model fitted on noisy pairs predicts some attributes'
association wrongly: on Adult paired ε 1 (seed 0 of ``configs/adult_paired.toml``) the model on A
had capital_loss's association reversed, and with w_j = 1 such attributes' parts of T drowned the
rest (z 0.66, where the clean tables' association as the direction gives 4.5). The selection's
folds, which fit each candidate on part of A and hold out the rest, therefore also measure each
attribute's held-out statistic, and w_j = max(z_j, 0) / s_j weighs attribute j by the drift its
folds showed (z_j) per unit of its noise (s_j, its terms' sd per report), 0 for an attribute whose
association did not hold out. For independent normal parts the optimal weights are mean/variance,
estimated by T_j/V_j = z_j/(s_j √n_j); w_j drops the factor 1/√n_j, which is the same for every
attribute when they are sampled uniformly (as every fedrr mechanism samples them), so there w_j is
optimal up to a constant and sampling noise in n_j. (The s_j are the fold models' terms, applied to
the model on A, whose a_j are of about the same size.) The weights depend on part A only, so under
no signal T given A is still a sum of independent mean-zero terms. On that seed the estimator's z
is 2.1 (p 0.017); over the five seeds at ε 1 z ranged from 1.6 (seed 1, dropped at p 0.055, which
the unweighted test kept at z 1.8) to above 3.7 (``results/spread_fallback_level/adult_paired``).
On the tests' well-specified pools, where every attribute carries signal, the noisy weights cost a
little (z 3.05 against 3.31)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm

from ..mechanisms.oracles import rare_value_variance
from .spread_joint import JointSpreadPrior
from .spread_mixture import MixtureSpreadPrior
from .spread_mstep import log_class_probs
from .spread_paired import PairedView, class_margin

#: draws from the prior per (attribute, state) for the model's pair tables
N_DRAWS = 1024


def model_pair_tables(est, n_draws: int = N_DRAWS, seed: int = 0) -> list[np.ndarray]:
    """Per attribute j the fitted model's pair table q_j(s, c) = p(x_j = s)·E[p_θ(c | x) | x_j = s]
    (k_j, C), the expectation over the fitted prior's x given x_j = s: exact conditional weights for
    a mixture (p(z | x_j = s) ∝ π_z p(s | z)) or a joint prior (its rows with x_j = s), the other
    attributes drawn independently of x_j for a factorised prior."""
    prior, design = est._prior_state, est.design_
    ks = np.asarray(design.layout.k, np.int64)
    D, C = ks.size, len(est.classes_)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(104729,)))
    z = None
    if isinstance(prior, JointSpreadPrior):
        rows = np.asarray(prior.rows)
        X = rows[rng.integers(rows.shape[0], size=n_draws)] if rows.shape[0] > n_draws else rows
    elif isinstance(prior, MixtureSpreadPrior):
        z = rng.choice(len(prior.log_pi), size=n_draws, p=_normalise(np.exp(prior.log_pi)))
        X = np.empty((n_draws, D))
        for d in range(D):
            cdf = np.cumsum(np.exp(prior.log_p[d]), axis=1)
            u = rng.random(n_draws) * cdf[z, -1]
            X[:, d] = (cdf[z] < u[:, None]).sum(axis=1)
    else:
        X = np.stack([prior.sample_column(d, rng, (n_draws,)) for d in range(D)], axis=1)
    X = np.minimum(X, ks - 1).astype(float)
    out = []
    for j, k in enumerate(ks):
        Xj = np.repeat(X[None], k, axis=0)  # (k, n, D): every draw with x_j set to s
        Xj[:, :, j] = np.arange(k)[:, None]
        pr = np.exp(log_class_probs(design.decode(Xj.reshape(-1, D)), est.coef_, est.intercept_)).reshape(k, -1, C)
        if isinstance(prior, JointSpreadPrior):
            w = (X[None, :, j] == np.arange(k)[:, None]).astype(float)
            w[w.sum(axis=1) == 0] = 1.0  # a state no row has: the other attributes as drawn
        elif z is not None:
            w = np.exp(prior.log_p[j][z].T)  # (k, n): p(x_j = s | z_i)
        else:
            w = np.ones((k, X.shape[0]))
        cond = np.einsum("sn,snc->sc", w, pr) / w.sum(axis=1)[:, None]
        margin = _normalise(np.maximum(prior.disc[j, :k], 0.0))
        out.append(margin[:, None] * cond)
    return out


def pair_report_loglik(tables: list[np.ndarray], groups: list, X: np.ndarray) -> np.ndarray:
    """Per record Σ_{j released} log Σ_{s,c} P(v_j | s, c) q_j(s, c): the held-out likelihood of its
    pair reports under the model's pair tables ``tables`` (``groups``: (paired mechanism or view, rows))."""
    out = np.zeros(X.shape[0])
    for rm, rows in groups:
        paired = rm.paired if isinstance(rm, PairedView) else rm
        for j, t in enumerate(tables):
            r = rows[~np.isnan(X[rows, j])]
            if r.size:
                L = paired.pair_log_likelihood(j, X[r, j])  # (n_j, k_j, C)
                with np.errstate(divide="ignore"):
                    out[r] += logsumexp(L + np.log(t)[None], axis=(1, 2))
    return out


def attribute_terms(tables: list[np.ndarray], groups: list, X: np.ndarray) -> list:
    """Per attribute j the records that released it and their terms a'_j(ê_ij) of the statistic T
    (module doc): ``[(rows, terms)]``, ``(empty, empty)`` for an attribute no record released."""
    D = len(tables)
    E = [[] for _ in range(D)]  # per attribute: (record index, unbiased (k_j, C) tables)
    g0 = np.zeros(D)  # per attribute: the largest rare-value variance of one report among its oracles
    for rm, rows in groups:
        paired = rm.paired if isinstance(rm, PairedView) else rm
        for j in range(D):
            r = rows[~np.isnan(X[rows, j])]
            if r.size:
                E[j].append((r, paired.unbiased_pair_table(j, X[r, j])))
                g0[j] = max(g0[j], rare_value_variance(paired.oracles[j]))
    out = []
    for j, parts in enumerate(E):
        if not parts:
            out.append((np.zeros(0, np.int64), np.zeros(0)))
            continue
        U = np.concatenate([u for _, u in parts])  # (n_j, k_j, C)
        Ehat = U.mean(axis=0)
        m, pi = Ehat.sum(axis=1), Ehat.sum(axis=0)
        q = tables[j] / tables[j].sum()
        delta = q - np.outer(q.sum(axis=1), q.sum(axis=0))  # the model's association in this table
        a = delta / (g0[j] + q)  # ≈ the efficient weights: a cell's noise per report is ≈ g₀ + q
        a = a - (a @ pi)[:, None] - (m @ a)[None, :] + m @ a @ pi  # doubly centred at this part's margins
        out.append((np.concatenate([r for r, _ in parts]), np.einsum("nsc,sc->n", U, a)))
    return out


def attribute_statistics(tables: list[np.ndarray], groups: list, X: np.ndarray) -> np.ndarray:
    """Per attribute j the part T_j of the statistic, its sum of squared centred terms and its number
    of reports: a (D, 3) array, summed over the selection's folds to weigh the attributes (``attribute_weights``)."""
    return np.array(
        [
            [t.sum(), np.sum((t - t.mean()) ** 2) if t.size else 0.0, t.size]
            for _, t in attribute_terms(tables, groups, X)
        ]
    )


def heldout_z(stats: np.ndarray) -> np.ndarray:
    """Per attribute its held-out z over the selection's folds, T_j / √V_j, from the summed
    ``attribute_statistics`` (0 for an attribute with no variance: nothing, or one report, released)."""
    T, V, _ = stats.T
    return np.where(V > 0, T / np.sqrt(np.where(V > 0, V, 1.0)), 0.0)


def attribute_weights(stats: np.ndarray) -> np.ndarray:
    """The attributes' weights in the test from the selection's cross-fitted ``attribute_statistics``
    (summed over folds): w_j = max(z_j, 0) / s_j, z_j the attribute's ``heldout_z`` and s_j =
    √(V_j / n_j) its terms' sd per report: attribute j's terms on B scaled to unit noise per report,
    weighted by the drift the folds measured (optimal up to a common factor when the attributes are
    sampled uniformly; module doc); an attribute whose association did not hold out gets 0. A
    function of part A only: the level stands."""
    _, V, n = stats.T
    ok = (V > 0) & (n > 0)
    s = np.sqrt(np.where(ok, V, 1.0) / np.where(ok, n, 1.0))
    return np.where(ok, np.maximum(heldout_z(stats), 0.0) / s, 0.0)


def association_test(tables: list[np.ndarray], groups: list, X: np.ndarray, weights: np.ndarray | None = None) -> dict:
    """The fallback's test on held-out paired releases ``X`` (module doc), attribute j's terms scaled
    by ``weights[j]`` (default 1): the statistic T, its standard error, z and the one-sided p-value,
    and per record the mean statistic (``value``)."""
    t = np.zeros(X.shape[0])
    for j, (rows, terms) in enumerate(attribute_terms(tables, groups, X)):
        np.add.at(t, rows, terms * (1.0 if weights is None else weights[j]))
    n = X.shape[0]
    T = float(t.sum())
    se = float(np.sqrt(max(np.sum((t - t.mean()) ** 2), 0.0)))
    z = T / se if se > 1e-12 * (1.0 + abs(T)) else 0.0
    return {"statistic": T, "se": se, "z": z, "p_value": float(norm.sf(z)) if se > 0 else 1.0, "value": T / n}


def paired_class_prior(groups: list) -> np.ndarray:
    """The class prior of paired releases: the class margins of the views' maximum-likelihood pair
    tables, averaged over attributes and weighted by each group's records (the intercept-only model)."""
    tot, w = 0.0, 0
    for rm, rows in groups:
        tot, w = tot + rows.size * class_margin(rm.tables), w + rows.size
    return tot / w


def _normalise(p: np.ndarray) -> np.ndarray:
    return p / p.sum()
