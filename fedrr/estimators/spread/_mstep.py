"""M-step of spread-EM: L2-penalised (multinomial) logistic regression on weighted samples with
soft targets — Barber eq 60, with the labels summed out exactly (responsibilities R). The math is
here once: the logits and the weighted cross-entropy with its gradient (``logits``, ``soft_ce``;
what each shard sums over its samples, ``Shard.loss_grad``), the penalty (``penalised``) and the
L-BFGS-B call (``lbfgs``). They serve a chain's M-step over a group of shards (``ChainObjective``,
``msteps``) and the exact fit on clean or in-memory samples (``fit_soft_logistic``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ._logexp import log_softmax, logsumexp
from ._runtime import Lockstep, ShardGroup


def log_class_probs(Z: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """log p_θ(c | x) for every class: (..., C). Binary models have one row (class 1 vs 0)."""
    return class_log_softmax(Z @ coef.T + intercept)


def class_log_softmax(z: np.ndarray) -> np.ndarray:
    """log p_θ(c | x) from the logits z (..., Rn): binary models' one logit is class 1's against 0."""
    if z.shape[-1] == 1:
        z = np.concatenate([np.zeros_like(z), z], axis=-1)
    return log_softmax(z, axis=-1)


def logits(Z: np.ndarray, coef: np.ndarray, intercept: np.ndarray) -> np.ndarray:
    """Z θᵀ + b in float64, the product in Z's precision (float32 samples stay float32): (n, Rn)."""
    return (Z @ coef.T.astype(Z.dtype)).astype(np.float64) + intercept


def soft_ce(z: np.ndarray, R: np.ndarray, w: np.ndarray) -> tuple[Any, np.ndarray]:
    """Σ_i w_i CE(R_i, p(·|z_i)) and its gradient with respect to the logits z (n, Rn): binary
    models have one logit row (class 1 vs 0), through the softplus; others the softmax."""
    if z.shape[1] == 1:
        z1, r1 = z[:, 0], R[:, 1]
        sp = np.logaddexp(0, -z1)  # softplus(−z); softplus(z) = softplus(−z) + z and σ(z) = exp(−softplus(−z))
        return np.sum(w * (sp + (1 - r1) * z1)), (w * (np.exp(-sp) - r1))[:, None]
    logp = z - logsumexp(z, axis=1, keepdims=True)
    return -np.sum(w * np.sum(R * logp, axis=1)), w[:, None] * (np.exp(logp) - R)


def penalised(loss, gcoef: np.ndarray, gb: np.ndarray, coef: np.ndarray, lam: float, fit_intercept: bool, center=None):
    """(loss + λ‖coef − center‖²/2, its gradient as one vector: coefficients row-major, then the
    intercepts if fitted) from the unpenalised loss and gradients. ``center`` None: 0 (scikit-learn's
    ridge); else the coefficients the penalty shrinks toward (``shrink_to``)."""
    diff = coef if center is None else coef - center
    loss = loss + 0.5 * lam * np.sum(diff * diff)
    g = [(gcoef + lam * diff).ravel()]
    if fit_intercept:
        g.append(gb)
    return loss, np.concatenate(g)


def lbfgs(fg, v0: np.ndarray, weight: float, max_iter: int, tol: float = 1e-8):
    """L-BFGS-B on ``fg`` (loss and gradient) from ``v0``; the gradient tolerance scales with the
    samples' total ``weight``."""
    from scipy.optimize import minimize  # at first use: a Ray actor that only runs E-steps never loads it

    return minimize(
        fg, v0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": tol * max(1.0, float(weight))}
    )


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
        loss, gz = soft_ce(z, R, w)
        gzT = gz.T.astype(dtype)
        parts = list(pmap(lambda i: gzT[:, bounds[i] : bounds[i + 1]] @ blocks[i], range(len(blocks))))
        gcoef = parts[0].astype(np.float64)
        for part in parts[1:]:  # in block order: the same sum for any number of threads
            gcoef += part
        return penalised(loss, gcoef, gz.sum(axis=0), coef, lam, fit_intercept)

    v0 = np.concatenate([coef0.ravel(), intercept0 if fit_intercept else np.zeros(0)])
    try:
        res = lbfgs(fg, v0, np.sum(w), max_iter, tol)
    finally:
        if pool is not None:
            pool.shutdown()
    coef, b = unpack(res.x)
    return coef.copy(), np.array(b, dtype=float).copy(), float(res.fun)


class ChainObjective:
    """The penalised complete-data objective of one chain over the group's shards. ``known``: the
    unpenalised sums at one θ that the E-step already evaluated (``Shard.estep``'s ``fit``), used
    instead of a round trip; ``lockstep``: where the other evaluations go (batched with the other
    chains' M-steps, ``shards.Lockstep``), else straight to the group. ``center``: the (rows, d)
    coefficients the penalty shrinks toward (None: 0)."""

    def __init__(
        self,
        group: ShardGroup,
        chain: int,
        rows: int,
        d: int,
        C: float,
        fit_intercept: bool,
        center: np.ndarray | None = None,
    ):
        self.group, self.chain, self.rows, self.d, self.C = group, chain, rows, d, C
        self.lam = 0.0 if not np.isfinite(C) else 1.0 / C
        self.fit_intercept = fit_intercept
        self.center = center
        self.known: tuple | None = None  # (θ, (loss, grad coef, grad intercept), total weight)
        self.lockstep = None

    def know(self, theta: np.ndarray, estep: dict) -> None:
        self.known = (theta.copy(), estep["fit"], estep["weight"])

    def _loss_grad(self, v: np.ndarray, coef: np.ndarray, b: np.ndarray) -> tuple:
        if self.known is not None and np.array_equal(v, self.known[0]):
            return self.known[1]
        if self.lockstep is not None:
            return self.lockstep.ask(self.chain, self.chain, coef, b)
        return self.group.reduce("loss_grad", self.chain, coef, b)

    def unpack(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        coef = v[: self.rows * self.d].reshape(self.rows, self.d)
        b = v[self.rows * self.d :] if self.fit_intercept else np.zeros(self.rows)
        return coef, b

    def pack(self, coef: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([coef.ravel(), b if self.fit_intercept else np.zeros(0)])

    def fg(self, v: np.ndarray) -> tuple[float, np.ndarray]:
        coef, b = self.unpack(v)
        loss, gc, gb = self._loss_grad(v, coef, b)
        return penalised(loss, gc, gb, coef, self.lam, self.fit_intercept, self.center)

    def mstep(self, v0: np.ndarray, max_iter: int):
        weight = self.known[2] if self.known is not None else self.group.reduce("n_samples_weight", self.chain)
        return lbfgs(self.fg, v0, weight, max_iter)


def _local_mstep(block, chain: int, rows: int, d: int, C: float, fit_intercept: bool, center, known, v0, max_iter: int):
    """One chain's M-step where its shards are (``RayShards.run_each``: an actor holding all of them)."""
    p = ChainObjective(block, chain, rows, d, C, fit_intercept, center)
    p.known = known
    return p.mstep(v0, max_iter).x


def msteps(group: ShardGroup, probs: list[ChainObjective], theta: list[np.ndarray], max_iter: int) -> list[np.ndarray]:
    """Every chain's M-step from its θ -> the new θs. Where one actor holds each chain's shards, on
    that actor (no round trip per gradient); else, with several chains, run together so that each
    of their gradient evaluations is one batched call on the group (``Lockstep``). Same numbers."""
    if group.solo_chains:
        jobs = [
            (p.chain, (p.chain, p.rows, p.d, p.C, p.fit_intercept, p.center, p.known, theta[p.chain], max_iter))
            for p in probs
        ]
        return group.run_each(_local_mstep, jobs)
    if len(probs) == 1:
        return [probs[0].mstep(theta[0], max_iter).x]
    lock = Lockstep(group, "loss_grad")
    for p in probs:
        p.lockstep = lock
    try:
        return [r.x for r in lock.run([lambda c=c: probs[c].mstep(theta[c], max_iter) for c in range(len(probs))])]
    finally:
        for p in probs:
            p.lockstep = None
