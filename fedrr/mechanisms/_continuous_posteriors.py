"""Exact posteriors p(x | x̃) for additive Gaussian or Laplace noise under factorised Gaussian
or histogram (piecewise-uniform) priors, vectorised over values and computed in log-space.

Gaussian noise + Gaussian prior is Barber eqs 68–69; the others are derived here and checked
against quadrature in tests/test_posteriors.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import expit, log_ndtr
from scipy.stats import truncnorm

from ..errors import ValidationError
from ._priors import GaussianPrior, HistogramPrior

_LOG_HALF = np.log(0.5)


def log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 − eˣ) for x ≤ 0, accurate at both ends (Mächler 2012)."""
    x = np.asarray(x, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -np.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def log_normal_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Φ(b) − Φ(a)) for a ≤ b, using the upper tail when both are positive."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    flip = a > 0
    hi = np.where(flip, log_ndtr(-a), log_ndtr(b))
    lo = np.where(flip, log_ndtr(-b), log_ndtr(a))
    return hi + log1mexp(lo - hi)


def log_laplace_mass(lo: np.ndarray, hi: np.ndarray, centre: np.ndarray, b: float) -> np.ndarray:
    """log ∫_lo^hi (1/2b) e^{−|x − centre|/b} dx, stable far in the tails."""
    l = (lo - centre) / b
    r = (hi - centre) / b
    width = r - l
    with np.errstate(divide="ignore", invalid="ignore"):
        right = _LOG_HALF - l + log1mexp(-width)  # bin entirely right of centre
        left = _LOG_HALF + r + log1mexp(-width)  # bin entirely left of centre
        across = np.log(-0.5 * np.expm1(-np.maximum(r, 0)) - 0.5 * np.expm1(np.minimum(l, 0)))
    return np.where(l >= 0, right, np.where(r <= 0, left, across))


def _truncnorm_sample(lo, hi, loc, scale, shape, rng):
    a = (lo - loc) / scale
    b = (hi - loc) / scale
    return truncnorm.rvs(
        np.broadcast_to(a, shape),
        np.broadcast_to(b, shape),
        loc=np.broadcast_to(loc, shape),
        scale=np.broadcast_to(scale, shape),
        size=shape,
        random_state=rng,
    )


def _trunclaplace_sample(lo, hi, centre, b, u):
    """Inverse-CDF draw from Laplace(centre, b) truncated to [lo, hi], per tail case."""
    lo, hi, centre, u = np.broadcast_arrays(lo, hi, centre, u)
    w = (hi - lo) / b
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        right = lo - b * np.log1p(u * np.expm1(-w))
        left = hi + b * np.log1p(u * np.expm1(-w))

        def F(x):
            return np.where(x < centre, 0.5 * np.exp((x - centre) / b), 1.0 - 0.5 * np.exp(-(x - centre) / b))

        v = F(lo) + u * (F(hi) - F(lo))
        across = np.where(v < 0.5, centre + b * np.log(2 * v), centre - b * np.log(2 * (1 - v)))
    out = np.where(lo >= centre, right, np.where(hi <= centre, left, across))
    return np.clip(out, lo, hi)


def _param(field: str, value: np.ndarray, x_tilde: np.ndarray) -> np.ndarray:
    """Prior parameters per feature, aligned with the last axis of x̃."""
    if value.ndim == 0:
        return value
    if x_tilde.ndim == 0 or x_tilde.shape[-1] != value.shape[0]:
        raise ValidationError(field, f"has {value.shape[0]} per-feature entries but x_tilde has shape {x_tilde.shape}")
    return value


class GaussianGaussianPosterior:
    """Gaussian noise σ² and prior N(μ, s²): N(b/a, 1/a), a = 1/σ² + 1/s², b = x̃/σ² + μ/s² (Barber eqs 68–69)."""

    def __init__(self, x_tilde, mu, var, sigma):
        self.x_tilde = x_tilde
        a = 1.0 / sigma**2 + 1.0 / var
        self.loc = (x_tilde / sigma**2 + mu / var) / a
        self.var = np.broadcast_to(1.0 / a, self.loc.shape)

    def mean(self):
        return self.loc

    def logpdf(self, x):
        return -0.5 * (x - self.loc) ** 2 / self.var - 0.5 * np.log(2 * np.pi * self.var)

    def sample(self, rng, size=None):
        shape = self.loc.shape if size is None else (size,) + self.loc.shape
        return self.loc + np.sqrt(self.var) * rng.standard_normal(shape)


class LaplaceGaussianPosterior:
    """Laplace noise b and prior N(μ, s²): a two-piece mixture of truncated normals,
    N(μ + s²/b, s²) on x < x̃ and N(μ − s²/b, s²) on x > x̃."""

    def __init__(self, x_tilde, mu, var, b):
        self.x_tilde, self.mu, self.b = x_tilde, mu, b
        self.s = np.sqrt(var)
        self.m_left = mu + var / b
        self.m_right = mu - var / b
        log_wl = (mu - x_tilde) / b + log_ndtr((x_tilde - self.m_left) / self.s)
        log_wr = (x_tilde - mu) / b + log_ndtr((self.m_right - x_tilde) / self.s)
        self.p_left = expit(log_wl - log_wr)
        self._log_z = var / (2 * b**2) + np.logaddexp(log_wl, log_wr)

    def logpdf(self, x):
        log_prior = -0.5 * ((x - self.mu) / self.s) ** 2 - np.log(self.s) - 0.5 * np.log(2 * np.pi)
        return log_prior - np.abs(x - self.x_tilde) / self.b - self._log_z

    def mean(self):
        left = truncnorm.mean(-np.inf, (self.x_tilde - self.m_left) / self.s, loc=self.m_left, scale=self.s)
        right = truncnorm.mean((self.x_tilde - self.m_right) / self.s, np.inf, loc=self.m_right, scale=self.s)
        return self.p_left * left + (1 - self.p_left) * right

    def sample(self, rng, size=None):
        shape = np.shape(self.x_tilde) if size is None else (size,) + np.shape(self.x_tilde)
        go_left = rng.random(shape) < self.p_left
        left = _truncnorm_sample(-np.inf, self.x_tilde, self.m_left, self.s, shape, rng)
        right = _truncnorm_sample(self.x_tilde, np.inf, self.m_right, self.s, shape, rng)
        return np.where(go_left, left, right)


class HistogramPosterior:
    """Noise (Gaussian σ or Laplace b) and a piecewise-uniform prior: the posterior is the prior's
    bins reweighted by the noise mass in each bin, then the noise density truncated to the bin."""

    def __init__(self, family: str, scale: float, x_tilde, edges, probs):
        self.family, self.scale, self.x_tilde = family, scale, x_tilde
        xt = x_tilde[..., None]
        self.lo = edges[..., :-1]
        self.hi = edges[..., 1:]
        widths = self.hi - self.lo
        with np.errstate(divide="ignore"):
            log_density = np.log(probs) - np.log(widths)
        if family == "gaussian":
            log_mass = log_normal_mass((self.lo - xt) / scale, (self.hi - xt) / scale)
        else:
            log_mass = log_laplace_mass(self.lo, self.hi, xt, scale)
        lw = log_density + log_mass
        self._log_norm = np.logaddexp.reduce(lw, axis=-1, keepdims=True)
        self._log_bin = lw - self._log_norm
        self._log_density = np.broadcast_to(log_density, lw.shape)

    def bin_proba(self) -> np.ndarray:
        """(..., B): posterior probability that x lies in each prior bin."""
        return np.exp(self._log_bin)

    def logpdf(self, x):
        x = np.asarray(x, float)
        xb = x[..., None]
        inside = (xb >= self.lo) & (xb < self.hi)
        if self.family == "gaussian":
            log_noise = (
                -0.5 * ((xb - self.x_tilde[..., None]) / self.scale) ** 2 - np.log(self.scale) - 0.5 * np.log(2 * np.pi)
            )
        else:
            log_noise = -np.abs(xb - self.x_tilde[..., None]) / self.scale - np.log(2 * self.scale)
        val = np.where(inside, self._log_density + log_noise - self._log_norm, -np.inf)
        return np.max(val, axis=-1)

    def mean(self) -> np.ndarray:
        """E[x | x̃]: each prior bin's truncated-noise mean, weighted by the bin's posterior probability."""
        centre = self.x_tilde[..., None]
        if self.family == "gaussian":
            a, b = (self.lo - centre) / self.scale, (self.hi - centre) / self.scale
            within = truncnorm.mean(a, b, loc=centre, scale=self.scale)
        else:
            within = _trunclaplace_mean(self.lo, self.hi, centre, self.scale)
        p = self.bin_proba()
        return np.where(p > 0, p * within, 0.0).sum(axis=-1)

    def sample(self, rng, size=None):
        base = self.x_tilde.shape
        shape = base if size is None else (size,) + base
        cdf = np.cumsum(self.bin_proba(), axis=-1)
        u = rng.random(shape)[..., None] * cdf[..., -1:]
        bins = np.minimum((cdf < u).sum(axis=-1), cdf.shape[-1] - 1)
        lo = np.take_along_axis(np.broadcast_to(self.lo, shape + self.lo.shape[-1:]), bins[..., None], axis=-1)[..., 0]
        hi = np.take_along_axis(np.broadcast_to(self.hi, shape + self.hi.shape[-1:]), bins[..., None], axis=-1)[..., 0]
        centre = np.broadcast_to(self.x_tilde, shape)
        if self.family == "gaussian":
            return _truncnorm_sample(lo, hi, centre, self.scale, shape, rng)
        return _trunclaplace_sample(lo, hi, centre, self.scale, rng.random(shape))


def _trunclaplace_mean(lo, hi, centre, b):
    """E[x] of Laplace(centre, b) truncated to [lo, hi], per tail case (t = (x − centre)/b): a bin on one
    side of the centre has mean u + 1 − d/(eᵈ − 1) in t (u its near edge's |t|, d its width); a bin
    around it, the two one-sided parts' moments over their masses."""
    p, q = (lo - centre) / b, (hi - centre) / b
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        d = q - p
        right = p + 1 - d / np.expm1(d)
        left = q - 1 + d / np.expm1(d)
        qp, pn = np.maximum(q, 0.0), np.maximum(-p, 0.0)
        mass = -np.expm1(-qp) - np.expm1(-pn)
        moment = (1 - (qp + 1) * np.exp(-qp)) - (1 - (pn + 1) * np.exp(-pn))
        t = np.where(p >= 0, right, np.where(q <= 0, left, moment / mass))
    return centre + b * t


def prior_parts(prior: Any, x_tilde: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    """("gaussian", mean, var) or ("histogram", edges, probs) of a numeric prior, its per-feature
    entries checked against the last axis of x̃ (shared by every numeric mechanism's posterior)."""
    if isinstance(prior, GaussianPrior):
        return "gaussian", _param("prior.mean", prior.mean, x_tilde), _param("prior.var", prior.var, x_tilde)
    if isinstance(prior, HistogramPrior):
        edges, probs = prior.edges, prior.probs
        if edges.ndim == 2:
            _param("prior.edges", edges[:, 0], x_tilde)
        if probs.ndim == 2:
            _param("prior.probs", probs[:, 0], x_tilde)
        return "histogram", edges, probs
    raise ValidationError(
        "prior", f"must be a GaussianPrior or HistogramPrior for numeric noise, got {type(prior).__name__}"
    )


def posterior_for(family: str, scale: float, x_tilde: np.ndarray, prior: Any):
    """Dispatch on (noise family, prior type)."""
    kind, a, b = prior_parts(prior, x_tilde)
    if kind == "histogram":
        return HistogramPosterior(family, scale, x_tilde, a, b)
    if family == "gaussian":
        return GaussianGaussianPosterior(x_tilde, a, b, scale)
    return LaplaceGaussianPosterior(x_tilde, a, b, scale)
