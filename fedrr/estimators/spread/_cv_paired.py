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
records, and the test is the score statistic T = n z̄ᵀ S⁻¹ z̄ of their mean z̄. S is their covariance
under no signal: within an attribute it is exact given the margins, from the oracle's support
probabilities (``unbiased_onehot_covariance`` at the product of the margins); between two attributes
(records that release several pairs) it is the terms' empirical second moment. The empirical
covariance instead (Hotelling's T², F reference) kept 7.7 % at alpha 0.05 on no-signal pools of 400
records at ε 2 and 11.8 % at ε 4 (results/spread_fallback_level/independence_direct.md): with a few
records per cell it underestimates the noise of rare cells.

Its p-value: a parametric bootstrap through the mechanism. T's chi-square reference on rank(S)
degrees of freedom (``p_chi2``) is close where every cell has many reports, but the margins are
estimated from the same reports, and in OLH's regime (ε ≤ 1, few reports per cell, many states) that
pulls T below the reference: it kept 0.024 and 0.019 at alpha 0.05 on 1,000 no-signal pools (one
10-state attribute, 333 reports; six of 4-10 states, 2,000; ε 1; git 5dec6d0), and 0.028 and 0.030
with the linear map at the margins clipped to the simplex (as now). So T is referred to its own
distribution under no signal at the margins the releases estimate: every record keeps the
attribute(s) it released (the design's sampling, independent of the data), draws its label from the
pooled class margin π̂ and each released attribute from m̂_j, the margins of each attribute's
maximum-likelihood pair table, independently, and releases the pairs through their oracles; each draw
recomputes the tables, their margins, the linear map, each attribute's one-hot covariance at the
draw's margins and T, so T_b is computed as T is. The covariance is closed form for randomised
response and OUE, and for OLH linear in the margins through the hash family's collision tensors,
built once (0.4 s at 82 pair values; ``onehot_covariance_is_cheap``); only an OLH attribute beyond
84 pair values keeps its covariance at the releases' margins, where each one would cost seeds × k².
Keeping OLH's at the releases' margins everywhere (the default on 2026-12-03 before f257c7f) left
the test at 0.024 and 0.027 at ε 4 with 600 records (see the diagnostics page). Until
2026-12-03 the draws took the debiased margins clipped to the simplex, which are more spread out
than the truth, and every covariance at the releases' margins: 10 of issue 45's 72 grid settings
kept below 0.035 at alpha 0.05
(results/spread_fallback_level/independence_margins.md). p = (1 + #{T_b ≥ T})/(B + 1) over B = ``N_BOOT``
draws, stopped once ``N_EXCEED`` draws reach T (then p = h/l: Besag & Clifford 1991, a valid p-value
that saves the draws when the null is clearly not rejected); the draws come from the caller's
``seed``. With one pair per record a table's mean is drawn from the oracle's report counts, at a
cost free of n (``_null_mean``); with several the reports are drawn, the label shared by a record's
pairs. Its cost on Adult-like releases at 10⁶ records (12 attributes of 2-41 states, one pair per
record, ε 1, all 99 draws): 6 s after the fit's view has solved the maximum-likelihood tables, which
``ml_pair_table`` keeps (T alone: 3 s). Its level, over issue 45's grid (RR, OUE, OLH × ε 0.5, 1, 4 ×
1 or 2 pairs × 2 or 3 classes × 600 or 5,000 records; 1,000 no-signal pools each;
results/spread_fallback_level/independence_grid.md, with its commands and 95 % Clopper–Pearson
intervals; OLH's rows rerun at f257c7f): at alpha 0.05 it keeps 0.031-0.065, pooled 4.65 % (the
chi-square reference 2.4 %); 4 of the 72 settings fall below 0.035, where an exact test would put
0.7 (and 1.7 outside the band on either side): RR at ε 0.5 (one pair, 600 records: 0.031), OUE at
ε 0.5 (one pair, 5,000: 0.034) and OLH with two pairs and 600 records (0.031 at ε 0.5, 0.032 at ε 1).
The test uses every record's reports and no model, so nothing is held out for it: the selection's
folds run over all the releases.

Why not a direction from a fitted model. The former test (git 586430b) fitted the chosen model on
half the releases (A), took its predicted association as a direction and tested it on the other
half (B), each attribute weighted by how its association held out in A's folds. Its level was 0.040
[0.029, 0.054] at alpha 0.05, but it saw half the data through a noisy direction: on Adult paired ε 1
it dropped seed 1 at p 0.055 while the model beat the majority class by 2.3 points. T on all the
releases gave p ≤ 0.004 on all five seeds at ε 1 by the chi-square reference
(``results/spread_fallback_level/adult_paired``; the bootstrap's smallest p is 0.01).
Its price is degrees of freedom: a signal in one attribute of many is diluted (at ε 0.5 it keeps
0 of 5 fits where the directed test kept 1, a model 0.0002 above the majority class).

What it guarantees, and what not. Under no signal the bootstrap p-value is exact for the model it
draws from (labels independent of the attributes at margins m̂, π̂, attributes independent of each
other); the releases' margins are estimates, and with several pairs per record dependent attributes
are drawn independently (S's empirical between-attribute blocks studentise T for it), so the level
is measured, not claimed (above; the estimator's: ``simulations/spread_fallback_level.py --part
level --only paired:2``). It tests "the releases carry an association between the label and some
attribute", not "the fitted model beats the intercept-only one": a model kept on a weak association
may still predict no better than the majority class (the selection's held-out likelihood then
chooses a strong penalty). The smallest p-value is 1/(B + 1) = 0.01: the test decides at alpha ≥
0.01, and ``z`` (the p-value as a normal quantile) is at most 2.33 for it; ``p_chi2`` keeps the
reference's finer tail for the reader."""

from __future__ import annotations

import functools

import numpy as np
from scipy.stats import chi2, norm
from threadpoolctl import threadpool_limits

from ...errors import ValidationError
from ...mechanisms import (
    LocalHashing,
    MatrixMechanism,
    UnaryEncoding,
    onehot_covariance_is_cheap,
    unbiased_onehot_covariance,
)
from ._direct import normalise, prior_draws, prior_margin
from ._logexp import logsumexp
from ._mstep import log_class_probs
from ._paired import PairedView, class_margin, ml_pair_table

#: draws from the prior per (attribute, state) for the model's pair tables
N_DRAWS = 1024


def model_pair_tables(est, n_draws: int = N_DRAWS, seed: int = 0) -> list[np.ndarray]:
    """Per attribute j the fitted model's pair table q_j(s, c) = p(x_j = s)·E[p_θ(c | x) | x_j = s]
    (k_j, C), the expectation over the fitted prior's x given x_j = s on ``prior_draws``: exact
    conditional weights for a mixture (p(z | x_j = s) ∝ π_z p(s | z)) or a joint prior (its rows with
    x_j = s), the other attributes drawn independently of x_j for a factorised prior."""
    prior, design = est._prior_state, est.design_
    ks = np.asarray(design.layout.k, np.int64)
    D, C = ks.size, len(est.classes_)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(104729,)))
    X, W = prior_draws(prior, ks, n_draws, rng)
    out = []
    for j, k in enumerate(ks):
        Xj = np.repeat(X[None], k, axis=0)  # (k, n, D): every draw with x_j set to s
        Xj[:, :, j] = np.arange(k)[:, None]
        pr = np.exp(log_class_probs(design.decode(Xj.reshape(-1, D)), est.coef_, est.intercept_)).reshape(k, -1, C)
        out.append(prior_margin(prior, j, k)[:, None] * np.einsum("sn,snc->sc", W[j], pr))
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


@functools.lru_cache(maxsize=256)
def _contrasts(k: int) -> np.ndarray:
    """(k, k − 1): an orthonormal basis of the vectors that sum to 0 (a doubly centred k × C table has
    (k − 1)(C − 1) coordinates in the products of two such bases)."""
    Q, _ = np.linalg.qr(np.c_[np.ones(k), np.eye(k)[:, : k - 1]])
    Q = Q[:, 1:k]
    Q.flags.writeable = False
    return Q


def interaction_map(m: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """((k − 1)(C − 1), k·C): the linear map from a report's unbiased one-hot estimate ê (flattened
    (s, c)) to its term u = ê − (ê 1) πᵀ − m (1ᵀ ê) + (1ᵀ ê 1) m πᵀ in contrast coordinates: the
    linearisation of the interaction Ê − m̂ π̂ᵀ at the margins (m, π) (module doc). As
    u = (I − m 1ᵀ) ê (I − 1 πᵀ), the map on row-major vectors is a Kronecker product."""
    k, C = m.size, pi.size
    left = _contrasts(k).T @ (np.eye(k) - np.outer(m, np.ones(k)))
    right = (np.eye(C) - np.outer(np.ones(C), pi)) @ _contrasts(C)
    return np.kron(left, right.T)


def _attributes(groups: list, X: np.ndarray) -> list:
    """Per attribute with released pairs: (j, [(rows, paired mechanism, its oracle of j)])."""
    out = []
    for j in range(X.shape[1]):
        parts = []
        for rm, rows in groups:
            paired = rm.paired if isinstance(rm, PairedView) else rm
            r = rows[~np.isnan(X[rows, j])]
            if r.size:
                parts.append((r, paired, paired.oracles[j]))
        if parts and parts[0][1].n_classes >= 2:
            out.append((j, parts))
    return out


def _tables(attrs: list, X: np.ndarray) -> list[np.ndarray]:
    """Per attribute of ``attrs`` its reports' unbiased one-hot pair estimates (n_j, k_j, C)."""
    return [np.concatenate([pm.unbiased_pair_table(j, X[r, j]) for r, pm, _ in parts]) for j, parts in attrs]


def _null_cov(parts: list, n: int, m: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """(k_j·C, k_j·C): a record's unbiased one-hot covariance under no signal at the margins (m, π)
    clipped to the simplex, averaged over the records (0 for one that did not release j)."""
    q0 = np.outer(_simplex(m), _simplex(pi)).ravel()  # the pair distribution under no signal
    k = m.size * pi.size
    return sum((r.size / n * unbiased_onehot_covariance(o, q0) for r, _, o in parts), np.zeros((k, k)))


def _costly(parts: list) -> tuple[list, list]:
    """``parts`` split into those whose oracle's one-hot covariance costs seeds × k² at each margin
    (OLH beyond its collision tensors' budget, ``onehot_covariance_is_cheap``) and the others."""
    return [pt for pt in parts if not onehot_covariance_is_cheap(pt[2])], [
        pt for pt in parts if onehot_covariance_is_cheap(pt[2])
    ]


def _terms(attrs: list, tables: list, n: int, covs: list | None = None, single: bool | None = None, kept=None):
    """The records' terms (n, Σ_j (k_j − 1)(C − 1)) (None when every record released one pair: then
    the blocks never share a record), their mean and their covariance S under no signal. ``covs``: the
    one-hot covariances per attribute to use (``_null_cov``), else computed at the tables' margins;
    ``kept``: per attribute the covariance of its costly parts to use (``_costly``), the other parts'
    computed at the tables' margins."""
    rows = [np.concatenate([r for r, _, _ in parts]) for _, parts in attrs]
    if single is None:
        single = _one_pair_each(attrs)
    means, blocks, null_covs, raw = [], [], [], []
    for (_, parts), r, U in zip(attrs, rows, tables):
        E = U.mean(axis=0)
        m, pi = E.sum(axis=1), E.sum(axis=0)  # the table's margins, plugged in
        G = interaction_map(_simplex(m), _simplex(pi))
        if covs is not None:
            V = covs[len(raw)]
        elif kept is not None:
            V = kept[len(raw)] + _null_cov(_costly(parts)[1], n, m, pi)
        else:
            V = _null_cov(parts, n, m, pi)
        raw.append(V)
        means.append(r.size / n * (G @ E.ravel()))
        null_covs.append(G @ V @ G.T)
        if not single:
            Z = np.zeros((n, G.shape[0]))
            Z[r] = U.reshape(U.shape[0], -1) @ G.T
            blocks.append(Z)
    if not means:
        return np.zeros((n, 0)), np.zeros(0), np.zeros((0, 0)), raw
    zbar = np.concatenate(means)
    Z = np.concatenate(blocks, axis=1) if blocks else None
    # between attributes: mean 0 under no signal, so the uncentred second moment (0 with one pair each)
    S = Z.T @ Z / n if Z is not None else np.zeros((zbar.size, zbar.size))
    at = 0
    for V in null_covs:
        S[at : at + V.shape[0], at : at + V.shape[0]] = V
        at += V.shape[0]
    return Z, zbar, S, raw


def independence_terms(groups: list, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record its terms of the independence test (module doc), stacked over the attributes (0
    where it released nothing), (n, Σ_j (k_j − 1)(C − 1)); and their covariance per record under no
    signal, averaged over the records: per attribute from its oracles' ``unbiased_onehot_covariance``
    at the product of the table's margins (clipped to the simplex), between two attributes (records
    releasing several pairs) the terms' empirical second moment."""
    n = X.shape[0]
    attrs = _attributes(groups, X)
    tables = _tables(attrs, X)
    Z, _, S, _ = _terms(attrs, tables, n)
    if Z is None:  # one pair per record: the blocks, built here for the reader
        Z = np.zeros((n, S.shape[0]))
        at = 0
        for (_, parts), U in zip(attrs, tables):
            E = U.mean(axis=0)
            G = interaction_map(_simplex(E.sum(axis=1)), _simplex(E.sum(axis=0)))
            Z[np.concatenate([r for r, _, _ in parts]), at : at + G.shape[0]] = U.reshape(U.shape[0], -1) @ G.T
            at += G.shape[0]
    return Z, S


def _one_pair_each(attrs: list) -> bool:
    """Whether no record released two of the attributes (then S has no between-attribute blocks)."""
    rows = [r for _, parts in attrs for r, _, _ in parts]
    return not rows or sum(r.size for r in rows) == np.unique(np.concatenate(rows)).size


def _score(n: int, zbar: np.ndarray, S: np.ndarray, sizes: list | None = None) -> tuple[float, int]:
    """T = n z̄ᵀ S⁻¹ z̄ on S's directions of positive variance, and their number (the df). ``sizes``:
    S is block diagonal in blocks of these sizes (one pair per record), each block taken alone."""
    if zbar.size == 0:
        return 0.0, 0
    if sizes is not None:
        cuts = np.cumsum([0, *sizes])
        parts = [_score(n, zbar[a:b], S[a:b, a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        return float(sum(t for t, _ in parts)), int(sum(d for _, d in parts))
    # S's between-attribute blocks are empirical, so it can have a small negative eigenvalue: the
    # directions kept are those with positive variance (their number is the degrees of freedom)
    w, V = np.linalg.eigh(S)
    keep = w > 1e-10 * max(w.max(), 1e-300)
    df = int(keep.sum())
    if df == 0:
        return 0.0, 0
    return float(n * np.sum((V[:, keep].T @ zbar) ** 2 / w[keep])), df


#: bootstrap draws at most, and the exceedances after which the draws stop (Besag & Clifford 1991)
N_BOOT, N_EXCEED = 99, 10


def independence_test(
    groups: list,
    X: np.ndarray,
    *,
    seed: int = 0,
    n_boot: int = N_BOOT,
    margins="ml",
    covariance: str = "auto",
) -> dict:
    """The fallback's test on paired releases ``X`` (module doc): the score statistic T = n z̄ᵀ S⁻¹ z̄
    of the records' ``independence_terms``, its degrees of freedom (the rank of S), and its p-value by
    a parametric bootstrap through the mechanism at the releases' margins (``seed`` makes it
    reproducible; ``n_boot`` draws at most, 0 for the chi-square reference alone, ``p_chi2``).
    ``margins``: what the bootstrap draws from: "ml" (the default: the margins of each attribute's
    maximum-likelihood pair table), "releases" (the pair tables' debiased margins clipped to the
    simplex, which are more spread out than the truth and made the test conservative), or given (a
    list of every attribute's state probabilities, the class probabilities): a diagnostic with the
    true margins of a simulation (``simulations/paired_independence_level.py --margins``), or
    "ml-shrunk" (a refuted candidate, kept as a diagnostic): the ML margins pulled toward uniform by
    half the debiased margins' expected excess spread (``_shrink``). The ML margins have almost none
    of that excess, so it over-shrinks and the test keeps 0.071 where "ml" keeps 0.050 on the same
    pools (results/spread_fallback_level/README.md).
    ``covariance``: each draw's S within an attribute at the releases' margins ("releases"), at the
    draw's own, as T's is at the releases' ("draw": T_b computed as T is), or "auto" (the default):
    at the draw's own wherever that is cheap (``onehot_covariance_is_cheap``: all but OLH beyond 84
    pair values), at the releases' for the rest (each would cost seeds × k² a draw). At ε 4 and 600
    records the draw's own is what keeps OLH's level at 0.05 (module doc)."""
    if isinstance(margins, str) and margins not in ("releases", "ml", "ml-shrunk"):
        allowed = "'releases', 'ml', 'ml-shrunk' or (attribute margins, class margin)"
        raise ValidationError("margins", f"must be {allowed}, got {margins!r}")
    if covariance not in ("auto", "releases", "draw"):
        raise ValidationError("covariance", f"must be 'auto', 'releases' or 'draw', got {covariance!r}")
    n = X.shape[0]
    attrs = _attributes(groups, X)
    tables = _tables(attrs, X)
    single = _one_pair_each(attrs)
    kept = None
    if covariance == "auto":  # costly OLH parts at the releases' margins, kept for every draw
        kept = []
        for (_, parts), U in zip(attrs, tables):
            E = U.mean(axis=0)
            kept.append(_null_cov(_costly(parts)[0], n, E.sum(axis=1), E.sum(axis=0)))
    _, zbar, S, covs = _terms(attrs, tables, n, single=single, kept=kept)
    sizes = [(pm.n_states[j] - 1) * (pm.n_classes - 1) for j, ((_, pm, _), *_) in attrs] if single else None
    T, df = _score(n, zbar, S, sizes)
    if df == 0:
        return {"statistic": 0.0, "df": 0, "p_value": 1.0, "p_chi2": 1.0, "z": 0.0, "n_boot": 0}
    p_chi2 = float(chi2.sf(T, df))
    p_value, drawn = p_chi2, 0
    if n_boot > 0:
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(45,)))
        ms, pi = _null_margins(attrs, [U.mean(axis=0) for U in tables], X, margins)
        exceed = 0
        with threadpool_limits(limits=1, user_api="blas"):  # small matrices: threaded BLAS was ~40x slower
            # sequential: stop at N_EXCEED draws reaching T, then p = h / l (Besag & Clifford 1991)
            while drawn < n_boot and exceed < N_EXCEED:
                draw = _null_tables(attrs, ms, pi, n, single, rng)
                fixed = covs if covariance == "releases" else None
                Tb, _ = _score(n, *_terms(attrs, draw, n, fixed, single, kept)[1:3], sizes)
                exceed, drawn = exceed + (Tb >= T), drawn + 1
        p_value = exceed / drawn if exceed == N_EXCEED else (1 + exceed) / (n_boot + 1)
    # the p-value as a normal quantile, from whichever tail is accurate (p rounds to 1 far below df)
    if n_boot > 0:  # (a bootstrap p-value can be 1: its z is capped at that of B/(B + 1))
        z = norm.isf(min(p_value, n_boot / (n_boot + 1)))
    else:
        z = norm.isf(max(p_value, 1e-300)) if p_value < 0.5 else norm.ppf(max(chi2.cdf(T, df), 1e-300))
    return {"statistic": T, "df": df, "p_value": float(p_value), "p_chi2": p_chi2, "z": float(z), "n_boot": drawn}


def _null_margins(attrs: list, means: list, X: np.ndarray, margins) -> tuple[list[np.ndarray], np.ndarray]:
    """The margins the bootstrap draws from (``independence_test``'s ``margins``): per attribute of
    ``attrs`` its state probabilities, and the class probabilities pooled over the attributes'
    tables (weighted by their records)."""
    sizes = _sizes(attrs)
    if not isinstance(margins, str):  # given: every attribute's, and the class margin
        return [_simplex(np.asarray(margins[0][j], float)) for j, _ in attrs], _simplex(np.asarray(margins[1], float))
    if margins in ("ml", "ml-shrunk"):  # each part's maximum-likelihood pair table, its records' share
        tables = [sum(r.size * ml_pair_table(pm, j, X[r, j]) for r, pm, _ in parts) for j, parts in attrs]
        tables = [t / s for t, s in zip(tables, sizes)]
    else:
        tables = means
    w = sizes / sizes.sum()
    pi = _simplex(sum(wj * E.sum(axis=0) for wj, E in zip(w, tables)))
    ms = [_simplex(E.sum(axis=1)) for E in tables]
    if margins != "ml-shrunk":
        return ms, pi
    excess, class_excess = _margin_excess(attrs, ms, pi)
    return [_shrink(m, e) for m, e in zip(ms, excess)], _shrink(pi, class_excess)


def _sizes(attrs: list) -> np.ndarray:
    """Per attribute of ``attrs`` the number of records that released it."""
    return np.array([sum(r.size for r, _, _ in parts) for _, parts in attrs], float)


def _margin_excess(attrs: list, ms: list, pi: np.ndarray) -> tuple[list[float], float]:
    """The expected squared error of each attribute's debiased margin and of the pooled class margin
    under no signal at (``ms``, ``pi``): the trace of the estimate's covariance (the class margin's
    as if the attributes' reports were independent, as they are with one pair per record)."""
    sizes = _sizes(attrs)
    excess, class_excess = [], 0.0
    for (_, parts), m, wj, nj in zip(attrs, ms, sizes / sizes.sum(), sizes):
        V = _null_cov(parts, int(nj), m, pi).reshape(m.size, pi.size, m.size, pi.size)
        excess.append(float(np.trace(V.sum(axis=(1, 3)))) / nj)
        class_excess += wj**2 * float(np.trace(V.sum(axis=(0, 2)))) / nj
    return excess, class_excess


#: the share of the debiased margins' expected excess squared spread that ``_shrink`` removes
SHRINK = 0.5


def _shrink(m: np.ndarray, excess: float) -> np.ndarray:
    """``m`` pulled toward uniform u: u + λ (m − u) with λ² = max(0, 1 − SHRINK · excess / ‖m − u‖²).
    A debiased margin m̃ has E‖m̃ − u‖² = ‖m_true − u‖² + ``excess``; the ML margins this is applied
    to do not (their excess spread was −0.07 to 0.10 of ``excess`` over 40 pools, RR at ε 0.5), which
    is why the candidate over-shrinks (``independence_test``'s ``margins="ml-shrunk"``)."""
    u = np.full(m.size, 1.0 / m.size)
    d2 = float(np.sum((m - u) ** 2))
    if d2 <= 0:
        return m
    return u + np.sqrt(max(0.0, 1.0 - SHRINK * excess / d2)) * (m - u)


def _null_tables(attrs: list, ms: list, pi: np.ndarray, n: int, single: bool, rng: np.random.Generator) -> list:
    """One draw of the releases under no signal, through the mechanism: every record keeps the
    attributes it released; its label is drawn from the class margin ``pi`` and each released
    attribute from that attribute's margin in ``ms`` (``_null_margins``), independently, and the pair
    goes through the attribute's oracle. Returns the draw's unbiased one-hot pair estimates per
    attribute, as ``_tables``; with one pair per record only their mean (1, k_j, C) matters, and it is
    drawn from the oracle's report counts (``_null_mean``)."""
    c = None if single else rng.choice(pi.size, size=n, p=pi)
    out = []
    for (j, parts), m in zip(attrs, ms):
        draws = []
        for r, pm, o in parts:
            if single:  # the records' pairs are independent draws from m πᵀ
                draws.append(r.size * _null_mean(o, np.outer(m, pi).ravel(), r.size, rng).reshape(1, m.size, pi.size))
            else:
                v = rng.choice(m.size, size=r.size, p=m) * pi.size + c[r]
                draws.append(pm.unbiased_pair_table(j, o.sample_valid(v, rng)))
        out.append(np.concatenate(draws) if not single else sum(draws) / sum(r.size for r, _, _ in parts))
    return out


def _null_mean(o, q: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """The mean unbiased one-hot estimate of ``size`` reports of oracle ``o`` whose values are drawn
    from ``q``, drawn from the distribution of the reports' counts (exact, at a cost free of size):
    randomised response's output counts are multinomial; OUE's bits are binomial given the values'
    counts; OLH's reports spread over the seeds, then over the buckets given the seed."""
    if isinstance(o, MatrixMechanism):
        counts = rng.multinomial(size, normalise(np.maximum(o.matrix @ q, 0.0)))
        return counts @ o.unbiased_onehot(np.arange(o.matrix.shape[0])) / size
    if isinstance(o, UnaryEncoding):
        N = rng.multinomial(size, q)
        bits = rng.binomial(N, o.p) + rng.binomial(size - N, o.q)
        return (bits / size - o.q) / (o.p - o.q)
    if isinstance(o, LocalHashing) and o.n_seeds * o.k <= 2**22:
        H = _hash_table(o)  # (seeds, k)
        if size < o.n_seeds:  # fewer reports than seeds: the reports themselves (as ``sample_valid``)
            seed = rng.integers(0, o.n_seeds, size=size)
            h = H[seed, rng.choice(q.size, size=size, p=q)]
            shift = rng.integers(1, o.g, size=size) if o.g > 2 else 1
            y = np.where(rng.random(size) < o.p, h, (h + shift) % o.g)
            return ((H[seed] == y[:, None]).mean(axis=0) - o.q_star) / (o.p - o.q_star)
        per_seed = rng.multinomial(size, np.full(o.n_seeds, 1.0 / o.n_seeds))
        cells = (np.arange(o.n_seeds)[:, None] * o.g + H).ravel()  # the mass of q hashed into each bucket
        Q = np.bincount(cells, np.tile(q, o.n_seeds), minlength=o.n_seeds * o.g).reshape(o.n_seeds, o.g)
        N = rng.multinomial(per_seed, _normalise_rows(o.other + (o.p - o.other) * Q))  # (seeds, g) reports
        support = np.take_along_axis(N, H, axis=1).sum(axis=0)  # reports supporting each value
        return (support / size - o.q_star) / (o.p - o.q_star)
    # a hash family too large to tabulate: the reports themselves
    return o.unbiased_onehot(o.sample_valid(rng.choice(q.size, size=size, p=q), rng)).mean(axis=0)


@functools.lru_cache(maxsize=16)
def _hash_table(o) -> np.ndarray:
    """(seeds, k): every seed's hash of every value of an OLH oracle (its whole family)."""
    H = o.hash(np.arange(o.n_seeds)[:, None], np.arange(o.k))
    H.flags.writeable = False
    return H


def _normalise_rows(P: np.ndarray) -> np.ndarray:
    P = np.maximum(P, 0.0)
    return P / P.sum(axis=1, keepdims=True)


def paired_class_prior(groups: list) -> np.ndarray:
    """The class prior of paired releases: the class margins of the views' maximum-likelihood pair
    tables, averaged over attributes and weighted by each group's records (the intercept-only model)."""
    tot, w = 0.0, 0
    for rm, rows in groups:
        tot, w = tot + rows.size * class_margin(rm.tables), w + rows.size
    return tot / w


def _simplex(p: np.ndarray) -> np.ndarray:
    """A debiased frequency vector clipped at 0 and normalised (uniform if nothing is left)."""
    p = np.maximum(p, 0.0)
    return p / p.sum() if p.sum() > 0 else np.full(p.size, 1.0 / p.size)
