"""Held-out scores and the fallback's test of ``SpreadLogisticRegressionCV`` on paired releases
(``PairedRecordMechanism``), where the label travels inside each (attribute, label) report and has
no release of its own, so neither p(c̃ | x̃) nor a permutation of released labels exists.

What a fitted model says about a paired report. With the model p_θ(c | x) and its prior p(x), the
pair table of attribute j is q_j(s, c) = p(x_j = s) · E[p_θ(c | x) | x_j = s] (``model_pair_tables``),
and a report v of attribute j has likelihood Σ_{s,c} P(v | s, c) q_j(s, c). The selection scores a
held-out record by the sum of these over its released pairs (exact for one pair per record; a
composite likelihood for several).

The fallback's test (``independence_test``). No signal means y independent of x, so every pair
table is a product m_j(s)·π(c): its interaction Ê_j − m̂_j π̂_jᵀ is 0 up to noise. Each report's
unbiased one-hot estimate ê_ij (the oracle's, E[ê_ij | x_j, y] = e_(x_j, y)) gives the record a term:
the linearisation of that interaction at the table's margins,

    u_ij = ê_ij − (ê_ij 1) π̂_jᵀ − m̂_j (1ᵀ ê_ij) + (1ᵀ ê_ij 1) m̂_j π̂_jᵀ,

whose rows and columns sum to 0, so it has (k_j − 1)(C − 1) coordinates (``independence_terms``),
mean 0 under no signal and mean m_j's and π's interaction otherwise. The records' terms, stacked
over the attributes (0 where a record released nothing), are independent across records, and the
test is Hotelling's T² of their mean against 0 with their empirical covariance (so several pairs
per record, and records under different oracles, need nothing more), its p-value from the F
distribution. The margins are estimated, but the centring is Neyman-orthogonal: their error enters
only at second order. The test uses every record's reports and no model, so nothing is held out
for it: the selection's folds run over all the releases.

Why not a direction from a fitted model. The former test (git 586430b) fitted the chosen model on
half the releases (A), took its predicted association as a direction and tested it on the other
half (B), each attribute weighted by how its association held out in A's folds. Its level was 0.040
[0.029, 0.054] at alpha 0.05, but it saw half the data through a noisy direction: on Adult paired ε 1
it dropped seed 1 at p 0.055 while the model beat the majority class by 2.3 points. T² on all the
releases gives p ≤ 0.006 on all five seeds at ε 1 (``results/spread_fallback_level/adult_paired``).
Its price is degrees of freedom: a signal in one attribute of many is diluted (at ε 0.5 it keeps
fewer fits than the directed test did, 0 of 5 against 1 of 5).

What it guarantees, and what not. Under no signal the level is approximate (T² with estimated
covariance and margins), so it is measured, not claimed:
``simulations/spread_fallback_level.py --part level --only paired:2`` (and ``paired:3``). It tests
"the releases carry an association between the label and some attribute", not "the fitted model
beats the intercept-only one": a model kept on a weak association may still predict no better than
the majority class (the selection's held-out likelihood then chooses a strong penalty)."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from scipy.stats import f as f_dist
from scipy.stats import norm

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


def _contrasts(k: int) -> np.ndarray:
    """(k, k − 1): an orthonormal basis of the vectors that sum to 0 (the doubly centred tables'
    coordinates are those of a (k_j − 1)(C − 1) space)."""
    Q, _ = np.linalg.qr(np.c_[np.ones(k), np.eye(k)[:, : k - 1]])
    return Q[:, 1:k]


def independence_terms(groups: list, X: np.ndarray) -> np.ndarray:
    """(n, Σ_j (k_j − 1)(C − 1)): per record its terms u_i of the independence test (module doc), the
    doubly centred unbiased estimates of its released pairs in each attribute's contrast coordinates
    (0 in the attributes it did not release)."""
    n, D = X.shape
    blocks = []
    for j in range(D):
        parts = []
        for rm, rows in groups:
            paired = rm.paired if isinstance(rm, PairedView) else rm
            r = rows[~np.isnan(X[rows, j])]
            if r.size:
                parts.append((r, paired.unbiased_pair_table(j, X[r, j])))
        if not parts:
            continue
        U = np.concatenate([u for _, u in parts])  # (n_j, k_j, C)
        E = U.mean(axis=0)
        m, pi = E.sum(axis=1), E.sum(axis=0)  # the table's margins, plugged in
        k, C = E.shape
        if k < 2:
            continue
        row, col, tot = U.sum(axis=2), U.sum(axis=1), U.sum(axis=(1, 2))
        # the linearisation of Ê − m̂ π̂ᵀ at the margins: rows and columns sum to 0, mean 0 under independence
        Uc = U - row[:, :, None] * pi[None, None, :] - m[None, :, None] * col[:, None, :]
        Uc += tot[:, None, None] * np.outer(m, pi)[None]
        out = np.zeros((n, (k - 1) * (C - 1)))
        coords = np.einsum("nsc,sa,cb->nab", Uc, _contrasts(k), _contrasts(C))
        out[np.concatenate([r for r, _ in parts])] = coords.reshape(U.shape[0], -1)
        blocks.append(out)
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0))


def independence_test(groups: list, X: np.ndarray) -> dict:
    """The fallback's test on paired releases ``X`` (module doc): Hotelling's T² of the records'
    ``independence_terms`` against mean 0 (the label independent of every attribute), its degrees of
    freedom (the rank of the terms' covariance) and the F-distribution p-value."""
    Z = independence_terms(groups, X)
    n = Z.shape[0]
    zbar = Z.mean(axis=0)
    if Z.shape[1] == 0 or n < 3:
        return {"statistic": 0.0, "df": 0, "p_value": 1.0, "z": 0.0}
    w, V = np.linalg.eigh(np.cov(Z, rowvar=False).reshape(Z.shape[1], Z.shape[1]))
    keep = w > 1e-10 * max(w.max(), 1e-300)
    df = int(keep.sum())
    if df == 0 or n - df < 1:
        return {"statistic": 0.0, "df": df, "p_value": 1.0, "z": 0.0}
    T2 = float(n * np.sum((V[:, keep].T @ zbar) ** 2 / w[keep]))
    p_value = float(f_dist.sf((n - df) / (df * (n - 1)) * T2, df, n - df))
    return {"statistic": T2, "df": df, "p_value": p_value, "z": float(norm.isf(max(p_value, 1e-300)))}


def paired_class_prior(groups: list) -> np.ndarray:
    """The class prior of paired releases: the class margins of the views' maximum-likelihood pair
    tables, averaged over attributes and weighted by each group's records (the intercept-only model)."""
    tot, w = 0.0, 0
    for rm, rows in groups:
        tot, w = tot + rows.size * class_margin(rm.tables), w + rows.size
    return tot / w


def _normalise(p: np.ndarray) -> np.ndarray:
    return p / p.sum()
