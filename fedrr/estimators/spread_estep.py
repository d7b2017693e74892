"""E-step of spread-EM, one shard of records per task (a top-level function so Ray can run it).

mode="mcmc" (fedrr's default): a persistent independence-Metropolis chain per record whose
proposal is ρ(x | x̃) ∝ p(x̃ | x) p(x) (Barber eq 58) and whose stationary law is the exact
posterior p(x | x̃, c̃) ∝ ρ(x | x̃) g(x), g(x) = Σ_c p(c̃ | c) p_θ(c | x): accept x' with
probability min(1, g(x')/g(x)). Labels are summed out exactly (responsibilities). The samples
are unbiased for the E-step expectations, so the EM fixed point does not move with S.

mode="importance": Barber §5.1 as printed — S fresh draws c ~ ρ(c | c̃), x ~ ρ(x | x̃), self-
normalised weights ∝ p_θ(c | x) (eq 59). Biased at finite S (see shared/research-notes.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp
from threadpoolctl import ThreadpoolController

from ..mechanisms.discrete import RandomizedResponse, _DiscreteMechanism
from .spread_mstep import log_class_probs


def _propose(task: dict, rng: np.random.Generator, S: int) -> np.ndarray:
    """S draws per record from the product of per-feature posteriors ρ(x | x̃): raw (S, b, D)
    (discrete columns hold state indices). O(b·D·S) for randomised response."""
    rm, Xt, prior = task["rm"], task["X_tilde"], task["prior"]
    out = np.empty((S,) + Xt.shape)
    for mech, cols in rm.groups():
        post = mech.posterior(
            Xt[:, cols] if not isinstance(mech, _DiscreteMechanism) else Xt[:, cols].astype(np.int64),
            prior.for_group(mech, cols),
        )
        out[:, :, cols] = np.asarray(post.sample(rng, S)).reshape(S, Xt.shape[0], len(cols))
    return out


def input_scale(task: dict) -> np.ndarray:
    """Per-column factor from raw values to model inputs: 1/(k−1) for discrete columns under the
    "unit" encoding, else 1. Logits use coef·scale on raw values, so no decoded copy is made."""
    layout = task["layout"]
    scale = np.ones(layout.n_features)
    if task["encoding"] == "unit":
        d = layout.discrete
        scale[d] = 1.0 / (layout.k[d] - 1.0)
    return scale


def _label_terms(task: dict, logp: np.ndarray) -> np.ndarray:
    """log p(c̃ | c) + log p_θ(c | x) for every class c: (..., C)."""
    yt = task["y_tilde"]
    L = task["label_logP"]
    if L is None:  # clean labels: p(c̃ | c) is the identity
        C = logp.shape[-1]
        return np.where(np.arange(C) == yt[..., None], logp, -np.inf)
    return logp + L[yt]


def _sufficient_stats(task: dict, raw: np.ndarray, w: np.ndarray) -> dict:
    """Weighted statistics for the prior update (Barber eq 65 and its numeric analogues)."""
    layout, prior = task["layout"], task["prior"]
    D = layout.n_features
    flat_raw = raw.reshape(-1, D)
    flat_w = w.reshape(-1)
    stats: dict[str, Any] = {}
    disc = np.flatnonzero(layout.discrete)
    if disc.size:
        kmax = prior.disc.shape[1]
        st = flat_raw[:, disc].astype(np.int64) + np.arange(disc.size) * kmax
        counts = np.bincount(st.ravel(), weights=np.repeat(flat_w, disc.size), minlength=disc.size * kmax)
        stats["counts"] = counts.reshape(disc.size, kmax)
    num = np.flatnonzero(~layout.discrete)
    if num.size:
        x = flat_raw[:, num]
        stats["s0"] = flat_w.sum()
        stats["s1"] = flat_w @ x
        stats["s2"] = flat_w @ (x * x)
        if prior.numeric_kind == "histogram":
            edges = prior.edges[num]
            B = edges.shape[1] - 1
            h = np.zeros((num.size, B))
            for i in range(num.size):
                b = np.clip(np.searchsorted(edges[i], x[:, i], side="right") - 1, 0, B - 1)
                h[i] = np.bincount(b, weights=flat_w, minlength=B)
            stats["hist"] = h
    return stats


_BLAS: ThreadpoolController | None = None


def _one_blas_thread():
    """threadpool_limits(1, "blas") with the library scan done once per process (it costs ~4 ms,
    more than a small shard's E-step)."""
    global _BLAS
    if _BLAS is None:
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def estep_task(task: dict) -> dict:
    """Run the E-step on one shard; returns samples Z (b·S, D), responsibilities R, weights w,
    prior statistics and the new chain state."""
    with _one_blas_thread():
        return _estep(task)


def _estep(task: dict) -> dict:
    if task["mode"] == "mcmc" and _all_rr(task["rm"]):
        return _estep_rr_compiled(task)
    rng = np.random.default_rng(task["seed"])
    S = task["n_samples"]
    scale = input_scale(task)
    coef, intercept = task["coef"] * scale, task["intercept"]
    b = task["X_tilde"].shape[0]
    if task["mode"] == "mcmc":
        props = _propose(task, rng, S + (1 if task["state"] is None else 0))
        if task["state"] is None:
            state, props = props[0], props[1:]
        else:
            state = task["state"]
        logp_cur = log_class_probs(state, coef, intercept)
        lg_cur = logsumexp(_label_terms(task, logp_cur), axis=-1)
        kept = np.empty((S,) + state.shape)
        accepted = 0
        for s in range(S):
            logp_prop = log_class_probs(props[s], coef, intercept)
            lg_prop = logsumexp(_label_terms(task, logp_prop), axis=-1)
            acc = np.log(rng.random(b)) < lg_prop - lg_cur
            accepted += int(acc.sum())
            state = np.where(acc[:, None], props[s], state)
            lg_cur = np.where(acc, lg_prop, lg_cur)
            kept[s] = state
        terms = _label_terms(task, log_class_probs(kept, coef, intercept))
        R = np.exp(terms - logsumexp(terms, axis=-1, keepdims=True))
        w = np.full((S, b), 1.0 / S)
        new_state = state
    else:
        kept = _propose(task, rng, S)
        logp = log_class_probs(kept, coef, intercept)  # (S, b, C)
        C = logp.shape[-1]
        L = task["label_logP"]
        if L is None:
            c = np.broadcast_to(task["y_tilde"], (S, b))
        else:  # ρ(c | c̃) ∝ p(c̃ | c) (eq 58)
            rho = np.exp(L[task["y_tilde"]] - logsumexp(L[task["y_tilde"]], axis=-1, keepdims=True))
            cdf = np.cumsum(rho, axis=-1)
            c = np.minimum((cdf[None] < rng.random((S, b, 1))).sum(-1), C - 1)
        logw = np.take_along_axis(logp, c[..., None], axis=-1)[..., 0]  # log p_θ(c_s | x_s) (eq 59)
        w = np.exp(logw - logsumexp(logw, axis=0, keepdims=True))
        R = np.eye(C)[c]
        accepted = 0
        new_state = None
    return {
        "Z": (kept.reshape(S * b, -1).astype(np.float32) * scale.astype(np.float32)),
        "R": R.reshape(S * b, -1),
        "w": w.reshape(-1),
        "stats": _sufficient_stats(task, kept, w),
        "state": new_state,
        "accepted": accepted,
        "proposed": S * b,
    }


def _all_rr(rm) -> bool:
    return all(isinstance(m, RandomizedResponse) for m, _ in rm.groups())


def _estep_rr_compiled(task: dict) -> dict:
    """mode="mcmc" for all-randomised-response records through the compiled kernel; the same
    chain as the numpy path (exact RR posterior proposals, independence Metropolis). The chain
    state is kept feature-major, (D, b) int32, and handed back as its (b, D) transpose (a view)."""
    from ..mechanisms.discrete import guide_table
    from .spread_kernels import rr_mcmc_shard, rr_tables

    rng = np.random.default_rng(task["seed"])
    rm, Xt, prior = task["rm"], task["X_tilde"], task["prior"]
    S = task["n_samples"]
    b, D = Xt.shape
    K = prior.disc.shape[1]
    q = np.empty(D)
    r = np.empty(D)
    for mech, cols in rm.groups():
        q[cols], r[cols] = mech.keep_prob, mech.other_prob
    stay, jump, P, A = rr_tables(prior.disc, q, r)
    if np.all(q >= r):  # the inverse-CDF tables are only read for columns with q < r
        cdf, guide = np.zeros((0, K)), np.zeros((0, K), np.int64)
    else:
        cdf = np.cumsum(prior.disc, axis=1)
        cdf /= cdf[:, -1:]
        guide = guide_table(cdf)
    scale = input_scale(task)
    coef = task["coef"] * scale
    L = task["label_logP"]
    C = L.shape[0] if L is not None else task["n_classes"]
    if L is None:
        yterm = np.where(np.arange(C) == task["y_tilde"][:, None], 0.0, -np.inf)
    else:
        yterm = np.ascontiguousarray(L[task["y_tilde"]])
    has_state = task["state"] is not None
    # read only (Ray hands task arrays over read-only): no copy when it is this kernel's own state
    stateT = np.ascontiguousarray(task["state"].T, dtype=np.int32) if has_state else np.zeros((0, 0), np.int32)
    Zt = np.empty((D, S * b), np.float32)
    R = np.empty((S, b, C))
    counts = np.zeros((D, K))
    new_stateT = np.empty((D, b), np.int32)
    accepted = rr_mcmc_shard(
        rng,
        np.ascontiguousarray(Xt.T, dtype=np.int32),
        yterm,
        stateT,
        has_state,
        S,
        stay,
        jump,
        P,
        A,
        cdf,
        guide,
        q,
        r,
        np.ascontiguousarray(coef, dtype=float),
        np.asarray(task["intercept"], float),
        scale.astype(np.float32),
        Zt,
        R,
        counts,
        new_stateT,
    )
    # Z = Zt.T: (S·b, D), rows ordered (s, n) like the numpy path; Fortran-ordered, not copied
    return {
        "Z": Zt.T,
        "R": R.reshape(S * b, C),
        "w": np.full(S * b, 1.0 / S),
        "stats": {"counts": counts},
        "state": new_stateT.T,
        "accepted": int(accepted),
        "proposed": S * b,
    }
