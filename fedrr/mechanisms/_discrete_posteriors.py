"""Exact posteriors p(x | x̃) of discrete oracles under a categorical prior, and the guide-table
inverse-CDF sampler they share with the compiled E-step."""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError


def _broadcast_prior(x_tilde: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Prior rows aligned with the last axis of x̃: (k,) shared or (d, k) with d = x̃.shape[-1]."""
    if probs.ndim == 2 and (x_tilde.ndim == 0 or x_tilde.shape[-1] != probs.shape[0]):
        raise ValidationError("prior", f"has {probs.shape[0]} feature rows but x_tilde has shape {x_tilde.shape}")
    return probs


class DensePosterior:
    """p(x | x̃) ∝ p(x̃ | x) π(x) from the release's likelihood over all k states; O(k) per value."""

    def __init__(self, x_tilde: np.ndarray, prior: np.ndarray, logP: np.ndarray):
        self.x_tilde = x_tilde
        self._set(logP[x_tilde], _broadcast_prior(x_tilde, prior))

    @classmethod
    def from_log_likelihood(cls, loglik: np.ndarray, prior: np.ndarray) -> DensePosterior:
        """From log p(x̃ | x = s) rows (..., k) of any discrete oracle."""
        out = cls.__new__(cls)
        out.x_tilde = loglik[..., 0]
        out._set(loglik, _broadcast_prior(loglik[..., 0], prior))
        return out

    def _set(self, loglik: np.ndarray, prior: np.ndarray) -> None:
        with np.errstate(divide="ignore"):
            lp = loglik + np.log(prior)  # (..., k)
        self._log_proba = lp - np.logaddexp.reduce(lp, axis=-1, keepdims=True)

    def log_proba(self) -> np.ndarray:
        return self._log_proba

    def proba(self) -> np.ndarray:
        return np.exp(self._log_proba)

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        cdf = np.cumsum(self.proba(), axis=-1)
        shape = self.x_tilde.shape if size is None else (size,) + self.x_tilde.shape
        u = rng.random(shape)[..., None] * cdf[..., -1:]
        out = (cdf < u).sum(axis=-1)
        return np.minimum(out, cdf.shape[-1] - 1)


class RRPosterior:
    """Exact posterior of k-ary randomised response under a categorical prior π.

    p(x | x̃) ∝ π(x)·(q if x = x̃ else r), q = 1 − f, r = f/(k − 1). So x = x̃ with probability
    m = π(x̃) q / (π(x̃) q + (1 − π(x̃)) r), and otherwise x ~ π restricted to x ≠ x̃. Sampling
    uses one inverse-CDF search per draw: O(log k), never O(k) per value — the spread-EM
    E-step relies on this for K = 256 and near-degenerate priors.
    """

    def __init__(self, x_tilde: np.ndarray, prior: np.ndarray, keep_prob: float, other_prob: float):
        self.x_tilde = x_tilde
        self.prior = _broadcast_prior(x_tilde, prior)
        self.q, self.r = keep_prob, other_prob
        pi_xt = self._prior_at(x_tilde)
        self.stay_prob = pi_xt * self.q / (pi_xt * self.q + (1.0 - pi_xt) * self.r)

    def _prior_at(self, states: np.ndarray) -> np.ndarray:
        if self.prior.ndim == 1:
            return self.prior[states]
        d = self.prior.shape[0]
        return self.prior[np.arange(d), states]  # broadcasts over leading axes

    def proba(self) -> np.ndarray:
        """Dense (..., k) probabilities — O(k) per value; for tests and small k."""
        k = self.prior.shape[-1]
        onehot = np.arange(k) == self.x_tilde[..., None]
        w = self.prior * np.where(onehot, self.q, self.r)
        return w / w.sum(axis=-1, keepdims=True)

    def log_proba(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.proba())

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        shape = self.x_tilde.shape if size is None else (size,) + self.x_tilde.shape
        out = np.empty(shape, dtype=np.int64)
        out[...] = self.x_tilde
        flat = out.reshape(-1)  # a view: out is C-contiguous
        move = np.flatnonzero(rng.random(shape).reshape(-1) >= np.broadcast_to(self.stay_prob, shape).reshape(-1))
        if move.size:
            # only the values that leave x̃ need an inverse-CDF draw
            d = self.prior.shape[0] if self.prior.ndim == 2 else 1
            feat = move % d if d > 1 else np.zeros(move.size, dtype=np.int64)
            flat[move] = self._sample_excluding(flat[move], feat, rng.random(move.size))
        return out

    def _sample_excluding(self, xt: np.ndarray, feat: np.ndarray, u: np.ndarray) -> np.ndarray:
        """x ~ π(x | x ≠ x̃) by inverse CDF on π with x̃'s mass cut out (guide table: O(1)
        expected per draw). ``xt``, ``feat`` (prior row) and ``u`` are flat, equal length."""
        k = self.prior.shape[-1]
        cdf = self._cdf()
        pos = feat * k + xt
        cdf_flat = cdf.reshape(-1)
        hi_xt = cdf_flat[pos]
        lo_xt = np.where(xt > 0, cdf_flat[pos - 1], 0.0)
        mass_xt = hi_xt - lo_xt
        rest = 1.0 - mass_xt
        v = u * rest
        v = np.where(v < lo_xt, v, v + mass_xt)
        state = inverse_cdf(cdf, feat, v, self._guide())
        # prior all on x̃ (rest == 0): the posterior stays at x̃ anyway
        return np.where(rest > 0, state, xt)

    def _guide(self) -> np.ndarray:
        if not hasattr(self, "_guide_cache"):
            self._guide_cache = guide_table(self._cdf())
        return self._guide_cache

    def _cdf(self) -> np.ndarray:
        if not hasattr(self, "_cdf_cache"):
            cdf = np.cumsum(np.atleast_2d(self.prior), axis=-1)
            self._cdf_cache = cdf / cdf[:, -1:]
        return self._cdf_cache


def guide_table(cdf: np.ndarray) -> np.ndarray:
    """Chen & Asau guide table: G[f, j] = first state s with cdf[f, s] > j/M (M = k buckets), so an
    inverse-CDF draw starts at most a few states before its answer."""
    d, k = cdf.shape
    grid = np.arange(k) / k
    flat = (cdf + 2.0 * np.arange(d)[:, None]).ravel()
    idx = np.searchsorted(flat, (grid[None, :] + 2.0 * np.arange(d)[:, None]).ravel(), side="right")
    return np.minimum(idx.reshape(d, k) - np.arange(d)[:, None] * k, k - 1)


def inverse_cdf(cdf: np.ndarray, feat: np.ndarray, v: np.ndarray, guide: np.ndarray) -> np.ndarray:
    """Smallest state s with cdf[feat, s] > v, per entry: start from the guide table and step
    forward only where needed (expected O(1) steps per draw)."""
    k = cdf.shape[1]
    cdf_flat = cdf.reshape(-1)
    base = feat * k
    s = guide.reshape(-1)[base + np.minimum((v * k).astype(np.int64), k - 1)]
    active = np.flatnonzero(cdf_flat[base + s] <= v)
    while active.size:
        s[active] = np.minimum(s[active] + 1, k - 1)
        sa = s[active]
        still = (cdf_flat[base[active] + sa] <= v[active]) & (sa < k - 1)
        active = active[still]
    return s
