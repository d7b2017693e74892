"""Held-out scores of spread-EM's cross-validation (``SpreadLogisticRegressionCV``), computed from
the releases alone: the noisy log-likelihood of a fitted model composed with the known mechanism,
the intercept-only model's, the clean accuracy of the model's decisions estimated without bias
through the label mechanism, and the fallback's permutation test on held-out releases."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import rankdata
from sklearn.exceptions import ConvergenceWarning

from ...errors import ValidationError
from ...mechanisms import DiscreteMechanism
from ._estep import Shard
from ._estimator import SpreadLogisticRegression
from ._logexp import logsumexp
from ._pool import group_records


def heldout_loglik(
    est: SpreadLogisticRegression, X: np.ndarray, y: np.ndarray, mechs: list, S: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(log p(x̃, c̃), log p(c̃ | x̃), p̂(c | x̃)) per held-out record under a fitted spread-EM model
    and its prior; the last is the model's clean-class probability averaged over x ~ p(x | x̃)."""
    full, cond = np.empty(len(y)), np.empty(len(y))
    proba = np.empty((len(y), len(est.classes_)))
    for rm, rows in group_records(_mechanism_arg(mechs), len(y)):
        shard = Shard(0, rm, X[rows], y[rows], est.design_, len(est.classes_), seed, 1)
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))
        drawn = shard._propose_columns(rng, est._prior_state, S)  # randomised response: never scattered
        if drawn is not None:
            lp = shard._log_class_probs_columns(drawn, est.coef_, est.intercept_)  # (S, b, C)
        else:
            lp = shard._log_class_probs(shard._propose(rng, est._prior_state, S), est.coef_, est.intercept_)
        lg = logsumexp(lp + shard.yterm, axis=-1)  # log g(x) = log Σ_c p(c̃ | c) p_θ(c | x), as Shard._log_g
        cond[rows] = logsumexp(lg, axis=0) - np.log(S)
        full[rows] = cond[rows] + est._prior_state.log_marginal(rm, shard.X, shard.released)
        proba[rows] = np.exp(lp).mean(axis=0)
    return full, cond, proba


def _null_loglik(X_tr, y_tr, X_te, y_te, mech_tr, mech_te, C: int) -> np.ndarray:
    """log p(c̃ | x̃) = log Σ_c p(c̃ | c) π_c of the intercept-only model fitted on the training folds."""
    pi = class_freqs(y_tr, group_records(_mechanism_arg(mech_tr), len(y_tr)), C)
    out = np.empty(len(y_te))
    for rm, rows in group_records(_mechanism_arg(mech_te), len(y_te)):
        L = (
            rm.label.log_likelihood_matrix(y_te[rows])
            if rm.label is not None
            else np.where(np.arange(C) == y_te[rows][:, None], 0.0, -np.inf)
        )
        out[rows] = logsumexp(L + np.log(np.maximum(pi, 1e-300)), axis=1)
    return out


def class_freqs(y: np.ndarray, groups, C: int, iters: int = 500) -> np.ndarray:
    """Class frequencies debiased through each record's label mechanism: EM on the simplex, until no
    frequency moves by 1e-10 or ``iters`` steps (a ConvergenceWarning when it stopped there with a
    step above 1e-6)."""
    Ls = []
    for rm, rows in groups:
        lab = rm.label
        if lab is None:
            Ls.append(np.where(np.arange(C) == y[rows][:, None], 1.0, 0.0))
        elif isinstance(lab, DiscreteMechanism):
            Ls.append(np.exp(lab.log_likelihood_matrix(y[rows])))
    L = np.concatenate(Ls)
    pi, step = np.full(C, 1.0 / C), np.inf
    for _ in range(iters):
        post = L * pi
        new = (post / post.sum(axis=1, keepdims=True)).mean(axis=0)
        step = np.max(np.abs(new - pi))
        if step < 1e-10:
            return new
        pi = new
    if step > 1e-6:  # still moving: not near the answer (creeping at the simplex's edge is quiet)
        warnings.warn(
            f"class frequencies: EM stopped at {iters} iterations, its last step {step:.1e}",
            ConvergenceWarning,
            stacklevel=2,
        )
    return pi


def debiased_hits(decision: np.ndarray, y: np.ndarray, mechs: list, C: int) -> np.ndarray:
    """Per held-out record, an unbiased estimate of 1[decision = clean label] from its released
    label: h = (P⁻¹)[ĉ, c̃] with P[c̃, c] = p(c̃ | c) its label mechanism's matrix, since
    Σ_c̃ P[c̃, c]·(P⁻¹)[ĉ, c̃] = 1[c = ĉ]. Their mean estimates the decisions' clean accuracy; with one
    symmetric flip p it is (agreement − p)/(1 − 2p), so it ranks models as their agreement with the
    released labels does. Needs label mechanisms given by an invertible matrix (randomised response)."""
    out = np.empty(len(y))
    for rm, rows in group_records(_mechanism_arg(mechs), len(y)):
        lab = rm.label
        if lab is None:
            out[rows] = decision[rows] == y[rows]
            continue
        try:
            P = np.asarray(lab.matrix, dtype=float)
        except (AttributeError, NotImplementedError):
            raise ValidationError(
                "scoring", f"'accuracy' needs label mechanisms given by a matrix (randomised response), got {lab!r}"
            ) from None
        if P.shape != (C, C):
            raise ValidationError("scoring", f"'accuracy' needs a {C}-state label mechanism, got {P.shape[0]} states")
        out[rows] = np.linalg.inv(P)[decision[rows], y[rows]]
    return out


def _mechanism_arg(mechs: list):
    """One mechanism if every record has the same, else the list (``group_records``' argument)."""
    first = mechs[0]
    return first if all(m is first for m in mechs) else list(mechs)


# ----------------------------------------------------------------------------- the fallback's test
def label_terms(statistic: str, proba: np.ndarray, y: np.ndarray, mechs: list, C: int) -> tuple[np.ndarray, np.ndarray]:
    """(M, codes) with M[i, u] record i's term in the test statistic were its released label
    ``values[u]`` and codes[i] the index u of its own released label: the statistic is
    T = Σᵢ M[i, codes[i]], and a permutation of the released labels moves only ``codes``.

    ``proba`` holds p̂(c | x̃ᵢ), the fixed model's clean-class probabilities. The terms:
    "loglik", log p(c̃ = u | x̃ᵢ) = log Σ_c p(u | c) p̂(c | x̃ᵢ) (the held-out likelihood of the model
    composed with the label mechanism); "accuracy", the unbiased estimate (P⁻¹)[ĉᵢ, u] of the hit
    1[ĉᵢ = cᵢ] of the decision ĉᵢ = argmax p̂(c | x̃ᵢ) (``debiased_hits``); "auc" (two classes), the
    rank of p̂(1 | x̃ᵢ) among the records where u = 1, so that T is the Mann–Whitney rank sum."""
    values, codes = np.unique(y, return_inverse=True)
    n, U = len(y), len(values)
    M = np.empty((n, U))
    if statistic == "auc":
        M[:] = rankdata(proba[:, 1])[:, None] * (values == 1)[None, :]
        return M, codes
    decision = proba.argmax(axis=1)
    for rm, rows in group_records(_mechanism_arg(mechs), n):
        if statistic == "accuracy":
            for u, v in enumerate(values):
                M[rows, u] = debiased_hits(decision[rows], np.full(rows.size, v), [rm] * rows.size, C)
            continue
        L = (
            rm.label.log_likelihood_matrix(values)
            if rm.label is not None
            else np.where(np.arange(C) == values[:, None], 0.0, -np.inf)
        )  # (U, C): log p(c̃ = values[u] | c)
        with np.errstate(divide="ignore"):
            M[rows] = logsumexp(L[None, :, :] + np.log(proba[rows])[:, None, :], axis=2)
    return M, codes


def permutation_test(
    M: np.ndarray, codes: np.ndarray, blocks: list[np.ndarray], n_perm: int, rng: np.random.Generator
) -> tuple[float, float, np.ndarray]:
    """(T_obs, p, T_perm): the one-sided permutation test that T = Σᵢ M[i, codes[i]] is larger than
    with the released labels permuted among the records of each block (records whose labels share a
    mechanism). p = (1 + #{T_perm ≥ T_obs})/(n_perm + 1) is exact (P(p ≤ α) ≤ α) whenever the codes are
    exchangeable within blocks given M, i.e. the released labels are independent of everything M
    depends on. Ties count against the model (a tolerance absorbs the summation order's rounding)."""
    t_obs = float(sum(M[rows, codes[rows]].sum() for rows in blocks))
    t_perm = np.zeros(n_perm)
    step = max(1, min(n_perm, 2**22 // max(1, M.shape[0])))  # bounded memory: step × n indices at a time
    for start in range(0, n_perm, step):
        m = min(step, n_perm - start)
        for rows in blocks:
            perm = rng.permuted(np.broadcast_to(codes[rows], (m, rows.size)), axis=1)
            t_perm[start : start + m] += M[rows[None, :], perm].sum(axis=1)
    if not np.isfinite(t_obs):  # -inf (a released label the model calls impossible) or NaN: no evidence
        return t_obs, 1.0, t_perm
    tol = 1e-9 * (1.0 + abs(t_obs))
    p = (1.0 + float(np.sum(t_perm >= t_obs - tol))) / (n_perm + 1.0)
    return t_obs, p, t_perm


def label_blocks(mechs: list) -> list[np.ndarray]:
    """Row indices grouped by label mechanism (its spec): the blocks a permutation test permutes within."""
    keys: dict[str, list[int]] = {}
    for rm, rows in group_records(_mechanism_arg(mechs), len(mechs)):
        key = "public" if rm.label is None else repr(rm.label.to_spec())
        keys.setdefault(key, []).extend(rows.tolist())
    return [np.sort(np.asarray(r)) for r in keys.values()]
