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

whose rows and columns sum to 0, so it has (k_j − 1)(C − 1) coordinates (``interaction_map``,
``independence_terms``), mean 0 under no signal and the table's interaction otherwise. The records'
terms, stacked over the attributes (0 where a record released nothing), are independent across
records, and the test is the score statistic T = n z̄ᵀ S⁻¹ z̄ of their mean z̄, referred to
chi-square on rank(S) degrees of freedom. S is their covariance under no signal: within an
attribute it is exact given the margins, from the oracle's support probabilities
(``unbiased_onehot_covariance`` at the product of the margins); between two attributes (records
that release several pairs) it is the terms' empirical second moment. The empirical covariance
instead (Hotelling's T², F reference) kept 7.7 % at alpha 0.05 on no-signal pools of 400 records
at ε 2 and 11.8 % at ε 4 (two classes; 13.7 % with three at ε 2): with a few records per cell it
underestimates the noise of rare cells. The score form kept 3.5 %, 5.0 % and 4.0 % (1,000 pools
each, ``simulations/paired_independence_level.py``,
results/spread_fallback_level/independence_direct.md). The margins are estimated, but the centring
is Neyman-orthogonal: their error enters only at second order, which is small unless the noise per
cell is large beside the margins (below). In OLH's regime (ε 1, a few hundred reports per attribute)
it is conservative: 0.024 and 0.019 kept at alpha 0.05 on 1,000 no-signal pools
(results/spread_fallback_level/independence_olh_raw_margins.md, issue 45). The test uses every
record's reports and no model, so nothing is held out for it: the selection's folds run over all
the releases.

Why not a direction from a fitted model. The former test (git 586430b) fitted the chosen model on
half the releases (A), took its predicted association as a direction and tested it on the other
half (B), each attribute weighted by how its association held out in A's folds. Its level was 0.040
[0.029, 0.054] at alpha 0.05, but it saw half the data through a noisy direction: on Adult paired ε 1
it dropped seed 1 at p 0.055 while the model beat the majority class by 2.3 points. T on all the
releases gives p ≤ 0.004 on all five seeds at ε 1 (``results/spread_fallback_level/adult_paired``).
Its price is degrees of freedom: a signal in one attribute of many is diluted (at ε 0.5 it keeps
0 of 5 fits where the directed test kept 1, a model 0.0002 above the majority class).

What it guarantees, and what not. Under no signal the level is approximate (a chi-square
reference, estimated margins), so it is measured, not claimed:
``simulations/spread_fallback_level.py --part level --only paired:2`` (and ``paired:3``). It tests
"the releases carry an association between the label and some attribute", not "the fitted model
beats the intercept-only one": a model kept on a weak association may still predict no better than
the majority class (the selection's held-out likelihood then chooses a strong penalty). Its level is
conservative where the noise per cell is large beside the margins (few reports, small ε, many
states; ``independence_direct.md``), which costs power there. The likely cause is the margins,
estimated from the same reports, pulling T below its chi-square reference; no committed script
measures that yet. A parametric bootstrap from the oracles at the estimated margins would
calibrate it; it is not built."""

from __future__ import annotations

import numpy as np
from scipy.stats import chi2, norm

from ...mechanisms import unbiased_onehot_covariance
from ._logexp import logsumexp
from ._mstep import log_class_probs
from ._paired import PairedView, class_margin
from ._priors._joint import JointSpreadPrior
from ._priors._mixture import MixtureSpreadPrior

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
    """(k, k − 1): an orthonormal basis of the vectors that sum to 0 (a doubly centred k × C table has
    (k − 1)(C − 1) coordinates in the products of two such bases)."""
    Q, _ = np.linalg.qr(np.c_[np.ones(k), np.eye(k)[:, : k - 1]])
    return Q[:, 1:k]


def interaction_map(m: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """((k − 1)(C − 1), k·C): the linear map from a report's unbiased one-hot estimate ê (flattened
    (s, c)) to its term u = ê − (ê 1) πᵀ − m (1ᵀ ê) + (1ᵀ ê 1) m πᵀ in contrast coordinates: the
    linearisation of the interaction Ê − m̂ π̂ᵀ at the margins (m, π) (module doc)."""
    k, C = m.size, pi.size
    Bs, Bc = _contrasts(k), _contrasts(C)
    G = np.empty(((k - 1) * (C - 1), k * C))
    for v in range(k * C):
        U = np.zeros((k, C))
        U.flat[v] = 1.0
        Uc = U - U.sum(axis=1)[:, None] * pi[None] - m[:, None] * U.sum(axis=0)[None] + U.sum() * np.outer(m, pi)
        G[:, v] = (Bs.T @ Uc @ Bc).ravel()
    return G


def independence_terms(groups: list, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record its terms of the independence test (module doc), stacked over the attributes (0
    where it released nothing), (n, Σ_j (k_j − 1)(C − 1)); and their covariance per record under no
    signal, averaged over the records: per attribute from its oracles' ``unbiased_onehot_covariance``
    at the product of the table's margins (clipped to the simplex), between two attributes (records
    releasing several pairs) the terms' empirical second moment."""
    n, D = X.shape
    blocks, null_covs = [], []
    for j in range(D):
        parts = []
        for rm, rows in groups:
            paired = rm.paired if isinstance(rm, PairedView) else rm
            r = rows[~np.isnan(X[rows, j])]
            if r.size:
                parts.append((r, paired.unbiased_pair_table(j, X[r, j]), paired.oracles[j]))
        if not parts or parts[0][1].shape[1] < 2:
            continue
        U = np.concatenate([u for _, u, _ in parts])  # (n_j, k_j, C)
        E = U.mean(axis=0)
        m, pi = E.sum(axis=1), E.sum(axis=0)  # the table's margins, plugged in
        G = interaction_map(m, pi)
        Z = np.zeros((n, G.shape[0]))
        Z[np.concatenate([r for r, _, _ in parts])] = U.reshape(U.shape[0], -1) @ G.T
        blocks.append(Z)
        q0 = np.outer(_simplex(m), _simplex(pi)).ravel()  # the pair distribution under no signal
        null_covs.append(sum(r.size / n * G @ unbiased_onehot_covariance(o, q0) @ G.T for r, _, o in parts))
    if not blocks:
        return np.zeros((n, 0)), np.zeros((0, 0))
    Z = np.concatenate(blocks, axis=1)
    S = Z.T @ Z / n  # between attributes: mean 0 under no signal, so the uncentred second moment
    at = 0
    for V in null_covs:
        S[at : at + V.shape[0], at : at + V.shape[0]] = V
        at += V.shape[0]
    return Z, S


def independence_test(groups: list, X: np.ndarray) -> dict:
    """The fallback's test on paired releases ``X`` (module doc): the score statistic n z̄ᵀ S⁻¹ z̄ of
    the records' ``independence_terms`` (mean z̄, covariance S under no signal), its degrees of
    freedom (the rank of S) and the chi-square p-value."""
    Z, S = independence_terms(groups, X)
    n = Z.shape[0]
    if Z.shape[1] == 0:
        return {"statistic": 0.0, "df": 0, "p_value": 1.0, "z": 0.0}
    # S's between-attribute blocks are empirical, so it can have a small negative eigenvalue: the
    # directions kept are those with positive variance (their number is the degrees of freedom)
    w, V = np.linalg.eigh(S)
    keep = w > 1e-10 * max(w.max(), 1e-300)
    df = int(keep.sum())
    if df == 0:
        return {"statistic": 0.0, "df": 0, "p_value": 1.0, "z": 0.0}
    T = float(n * np.sum((V[:, keep].T @ Z.mean(axis=0)) ** 2 / w[keep]))
    p_value = float(chi2.sf(T, df))
    # the p-value as a normal quantile, from whichever tail is accurate (p rounds to 1 far below df)
    z = norm.isf(max(p_value, 1e-300)) if p_value < 0.5 else norm.ppf(max(chi2.cdf(T, df), 1e-300))
    return {"statistic": T, "df": df, "p_value": p_value, "z": float(z)}


def paired_class_prior(groups: list) -> np.ndarray:
    """The class prior of paired releases: the class margins of the views' maximum-likelihood pair
    tables, averaged over attributes and weighted by each group's records (the intercept-only model)."""
    tot, w = 0.0, 0
    for rm, rows in groups:
        tot, w = tot + rows.size * class_margin(rm.tables), w + rows.size
    return tot / w


def _normalise(p: np.ndarray) -> np.ndarray:
    return p / p.sum()


def _simplex(p: np.ndarray) -> np.ndarray:
    """A debiased frequency vector clipped at 0 and normalised (uniform if nothing is left)."""
    p = np.maximum(p, 0.0)
    return p / p.sum() if p.sum() > 0 else np.full(p.size, 1.0 / p.size)
