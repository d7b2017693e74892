"""M-step of spread-EM: L2-penalised (multinomial) logistic regression on weighted samples with
soft targets — Barber eq 60, with the labels summed out exactly (responsibilities R)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_softmax, logsumexp


def log_class_probs(Z: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """log p_θ(c | x) for every class: (..., C). Binary models have one row (class 1 vs 0)."""
    z = Z @ coef.T + intercept
    if coef.shape[0] == 1:
        z = np.concatenate([np.zeros_like(z), z], axis=-1)
    return log_softmax(z, axis=-1)


#: blocks are merged until each holds at least this many values: thread hand-offs cost ~10 µs, so
#: thousands of tiny blocks (few features, many records) would be slower than one big product
MIN_BLOCK_VALUES = 1 << 21


def _merge_small_blocks(blocks: list[np.ndarray], dtype) -> list[np.ndarray]:
    """Consecutive blocks joined into chunks of >= MIN_BLOCK_VALUES values. The chunking depends on
    the block shapes only (never on the number of threads), so sums keep the same order."""
    out, run, size = [], [], 0
    for B in blocks:
        run.append(B)
        size += B.size
        if size >= MIN_BLOCK_VALUES:
            out.append(run[0] if len(run) == 1 else np.concatenate(run).astype(dtype, copy=False))
            run, size = [], 0
    if run:
        out.append(run[0] if len(run) == 1 else np.concatenate(run).astype(dtype, copy=False))
    return out


def fit_soft_logistic(
    Z,
    R: np.ndarray,
    w: np.ndarray,
    coef0: np.ndarray,
    intercept0: np.ndarray,
    C: float,
    fit_intercept: bool = True,
    max_iter: int = 100,
    tol: float = 1e-8,
    n_threads: int = 1,
):
    """argmin Σ_i w_i CE(R_i, p_θ(·|Z_i)) + ‖coef‖²/(2C): sklearn's LogisticRegression objective
    with soft labels. Returns (coef, intercept, objective).

    Z is an (n, d) array or a list of row blocks (float32 blocks stay float32: no upcast copy).
    The products run block by block, on ``n_threads`` threads; the block sums are added in block
    order, so the result does not depend on ``n_threads``."""
    n_rows, d = coef0.shape
    binary = n_rows == 1
    lam = 0.0 if not np.isfinite(C) else 1.0 / C

    def unpack(v):
        coef = v[: n_rows * d].reshape(n_rows, d)
        b = v[n_rows * d :] if fit_intercept else np.zeros(n_rows)
        return coef, b

    blocks = [np.asarray(B) for B in Z] if isinstance(Z, (list, tuple)) else [np.asarray(Z)]
    blocks = [B if B.dtype in (np.float32, np.float64) else B.astype(np.float64) for B in blocks if B.shape[0]] or [
        np.zeros((0, d))
    ]
    dtype = np.result_type(*blocks) if blocks else np.float64
    blocks = _merge_small_blocks(blocks, dtype)
    bounds = np.cumsum([0] + [B.shape[0] for B in blocks])
    pool = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 and len(blocks) > 1 else None
    pmap = pool.map if pool is not None else map

    def fg(v):
        coef, b = unpack(v)
        cT = coef.T.astype(dtype)
        z = np.concatenate(list(pmap(lambda B: B @ cT, blocks))).astype(np.float64) + b
        if binary:
            z1 = z[:, 0]
            r1 = R[:, 1]
            sp = np.logaddexp(0, -z1)  # softplus(−z); softplus(z) = softplus(−z) + z and σ(z) = exp(−softplus(−z))
            loss = np.sum(w * (sp + (1 - r1) * z1))
            gz = (w * (np.exp(-sp) - r1))[:, None]
        else:
            lse = logsumexp(z, axis=1, keepdims=True)
            logp = z - lse
            loss = -np.sum(w * np.sum(R * logp, axis=1))
            gz = w[:, None] * (np.exp(logp) - R)
        gzT = gz.T.astype(dtype)
        parts = list(pmap(lambda i: gzT[:, bounds[i] : bounds[i + 1]] @ blocks[i], range(len(blocks))))
        gcoef = parts[0].astype(np.float64)
        for part in parts[1:]:  # in block order: the same sum for any number of threads
            gcoef += part
        gcoef += lam * coef
        loss += 0.5 * lam * np.sum(coef * coef)
        g = [gcoef.ravel()]
        if fit_intercept:
            g.append(gz.sum(axis=0))
        return loss, np.concatenate(g)

    v0 = np.concatenate([coef0.ravel(), intercept0 if fit_intercept else np.zeros(0)])
    try:
        res = minimize(
            fg, v0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": tol * max(1.0, float(np.sum(w)))}
        )
    finally:
        if pool is not None:
            pool.shutdown()
    coef, b = unpack(res.x)
    return coef.copy(), np.array(b, dtype=float).copy(), float(res.fun)
