"""Exact posteriors p(x | k) of a snapped Laplace release under histogram and Gaussian priors."""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
from scipy.stats import truncnorm

from ._continuous_posteriors import _truncnorm_sample, log1mexp, log_normal_mass
from ._exact_sampling import _LOG_HALF, _cell, log_cell_mass


class SnappedGrid(Protocol):
    """What a snapped posterior reads of its mechanism (SnappingLaplaceMechanism implements it):
    the noise scale λ, the grid spacing Λ and clamp M in normalised units, and the feature's
    midpoint and range Δ. Declared here so the posteriors need not import the mechanism."""

    lam: float
    Lambda: float
    M: int
    mid: float
    range: float

    def log_pmf_index(self, k, z) -> np.ndarray: ...


# ------------------------------------------------------------------------------ posterior
_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)


class SnappedPosterior:
    """p(x | k) ∝ prior(x)·P(k | z(x)) for a piecewise-uniform prior, exact.

    Each prior bin is split at the cell edges a, b of k and at z = ±½ into pieces on which
    P(k | z) is constant (outside the domain, where the input is clamped), e^{(z−a)/λ}·c (left of
    the cell), e^{(b−z)/λ}·c (right of it) or 1 − ½e^{−(z−a)/λ} − ½e^{−(b−z)/λ} (inside); masses
    are closed-form and sampling is exact (inverse CDF, or rejection with acceptance ≥ 0.31 inside).
    Works in normalised units z = (x − mid)/Δ; ``sample``/``logpdf``/``mean`` use the feature's units.
    """

    def __init__(self, mech: SnappedGrid, k: np.ndarray, edges: np.ndarray, probs: np.ndarray):
        self.mech, self.k = mech, k
        lam, Lam, M = mech.lam, mech.Lambda, mech.M
        a, b = _cell(k, Lam, M)
        self.a, self.b = a[..., None, None], b[..., None, None]  # (..., 1, 1)
        t_edges = (edges - mech.mid) / mech.range
        p = t_edges[..., :-1][..., None]  # (..., B, 1)
        q = t_edges[..., 1:][..., None]
        cuts = [np.clip(c, p, q) for c in (np.full_like(p, -0.5), self.a, self.b, np.full_like(p, 0.5))]
        bp = np.sort(np.concatenate(np.broadcast_arrays(p, *cuts, q), axis=-1), axis=-1)  # (..., B, 6)
        self.p, self.q = bp[..., :-1], bp[..., 1:]  # pieces (..., B, 5)
        mid = 0.5 * (self.p + self.q)
        a_, b_ = np.broadcast_to(self.a, mid.shape), np.broadcast_to(self.b, mid.shape)
        self.kind = np.select([mid < -0.5, mid > 0.5, mid <= a_, mid >= b_], [0, 1, 2, 3], 4)  # 4 = inside the cell
        self.log_mass = self._log_piece_mass(a_, b_, lam)  # log ∫_piece P(k|z) dz
        width = (q - p)[..., 0]  # bin widths (normalised)
        log_bin_int = np.logaddexp.reduce(self.log_mass, axis=-1)
        with np.errstate(divide="ignore"):
            lw = np.log(probs) - np.log(width) + log_bin_int
        self._log_norm = np.logaddexp.reduce(lw, axis=-1, keepdims=True)
        self._log_bin = lw - self._log_norm
        with np.errstate(divide="ignore"):
            self._log_density_bin = np.log(probs) - np.log(width)  # prior density in normalised units
        self._t_edges = t_edges

    def _log_piece_mass(self, a, b, lam):
        p, q = self.p, self.q
        d = q - p
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_d = np.log(d)
            c = _LOG_HALF + log1mexp(-(b - a) / lam)  # log of the factor outside the cell (0 tail factor at the ends)
            const_lo = log_d + log_cell_mass(a, b, np.full_like(p, -0.5), lam)
            const_hi = log_d + log_cell_mass(a, b, np.full_like(p, 0.5), lam)
            lm = log1mexp(-d / lam)
            left = c + math.log(lam) + (q - a) / lam + lm  # ∫ e^{(z−a)/λ}: pieces with q ≤ a
            right = c + math.log(lam) + (b - p) / lam + lm  # ∫ e^{(b−z)/λ}: pieces with p ≥ b
            em = -np.expm1(-d / lam)
            ta = np.where(np.isfinite(a), np.exp(-(p - a) / lam) * em, 0.0)
            tb = np.where(np.isfinite(b), np.exp(-(b - q) / lam) * em, 0.0)
            inside = np.log(d - 0.5 * lam * (ta + tb))
            out = np.choose(self.kind, [const_lo, const_hi, left, right, inside])
        return np.where(d > 0, out, -np.inf)

    def bin_proba(self) -> np.ndarray:
        """(..., B): posterior probability that x lies in each prior bin."""
        return np.exp(self._log_bin)

    def logpdf(self, x) -> np.ndarray:
        """log p(x | x̃) in the feature's units."""
        m = self.mech
        z = (np.asarray(x, float) - m.mid) / m.range
        zb = z[..., None]
        te = self._t_edges
        inside = (zb >= te[..., :-1]) & (zb < te[..., 1:])
        log_lik = m.log_pmf_index(self.k, np.clip(z, -0.5, 0.5))[..., None]
        val = np.where(inside, self._log_density_bin + log_lik - self._log_norm, -np.inf)
        return np.max(val, axis=-1) - math.log(m.range)

    def mean(self) -> np.ndarray:
        """E[x | x̃] (16-point Gauss–Legendre on each piece, closed form for exponential pieces)."""
        m = self.mech
        p, q, lam = self.p, self.q, m.lam
        d = q - p
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = d / lam
            small = r < 1e-8
            tail_term = np.where(small, 0.5 * d, d / np.expm1(r))
            mean_left = np.where(small, 0.5 * (p + q), q - lam + tail_term)
            mean_right = np.where(small, 0.5 * (p + q), p + lam - tail_term)
            nodes = 0.5 * (p + q)[..., None] + 0.5 * d[..., None] * _GL_X
            lik = np.exp(m.log_pmf_index(self.k[..., None, None, None], np.clip(nodes, -0.5, 0.5)))
            num = (lik * nodes * _GL_W).sum(-1)
            den = (lik * _GL_W).sum(-1)
            mean_gl = np.where(den > 0, num / den, 0.5 * (p + q))
        piece_mean = np.choose(self.kind, [0.5 * (p + q), 0.5 * (p + q), mean_left, mean_right, mean_gl])
        w = self._piece_weights()
        return m.mid + m.range * np.sum(w * piece_mean, axis=(-1, -2))

    def _piece_weights(self) -> np.ndarray:
        """(..., B, 5): posterior probability of each piece."""
        log_bin_int = np.logaddexp.reduce(self.log_mass, axis=-1, keepdims=True)
        with np.errstate(invalid="ignore"):
            within = np.where(np.isfinite(log_bin_int), np.exp(self.log_mass - log_bin_int), 0.0)
        return within * self.bin_proba()[..., None]

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        base = self.k.shape
        shape = base if size is None else (size,) + base
        w = self._piece_weights()
        nb, npc = w.shape[-2], w.shape[-1]
        flat_w = np.broadcast_to(w.reshape(w.shape[:-2] + (nb * npc,)), shape + (nb * npc,))
        cdf = np.cumsum(flat_w, axis=-1)
        u = rng.random(shape)[..., None] * cdf[..., -1:]
        j = np.minimum((cdf < u).sum(axis=-1), nb * npc - 1)[..., None]

        def pick(arr):
            flat = np.broadcast_to(arr.reshape(arr.shape[:-2] + (nb * npc,)), shape + (nb * npc,))
            return np.take_along_axis(flat, j, axis=-1)[..., 0]

        p, q, kind = pick(self.p), pick(self.q), pick(self.kind)
        a = np.broadcast_to(self.a[..., 0, 0], shape)
        b = np.broadcast_to(self.b[..., 0, 0], shape)
        lam = self.mech.lam
        d = q - p
        v = rng.random(shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            em = np.expm1(-d / lam)
            left = q + lam * np.log1p(v * em)  # density ∝ e^{z/λ} on [p, q]
            right = p - lam * np.log1p(v * em)  # density ∝ e^{−z/λ}
        t = np.where(kind == 2, left, np.where(kind == 3, right, p + v * d))
        todo = np.flatnonzero((kind == 4).ravel())
        tf, pf, df, af, bf = t.ravel(), p.ravel(), d.ravel(), a.ravel(), b.ravel()
        while todo.size:  # rejection inside the cell: accept with P(k | z) ≤ 1 (≥ 0.31 there)
            cand = pf[todo] + rng.random(todo.size) * df[todo]
            acc = rng.random(todo.size) < np.exp(log_cell_mass(af[todo], bf[todo], cand, lam))
            tf[todo[acc]] = cand[acc]
            todo = todo[~acc]
        t = np.clip(tf.reshape(shape), p, q)
        return self.mech.mid + self.mech.range * t


class SnappedGaussianPosterior:
    """p(x | k) ∝ N(x; μ, s²)·P(k | z(x)), exact. In normalised units z the real line splits into
    five pieces — z < −½ and z > ½ (P constant: the input is clamped), [−½, a], [a, b], [b, ½]
    (clipped to [−½, ½]) — on which P(k | z) is constant, c·e^{(z−a)/λ}, 1 − ½e^{−(z−a)/λ} −
    ½e^{−(b−z)/λ}, c·e^{(b−z)/λ}: Gaussian × exponential is a shifted Gaussian (mean μ ± s²/λ), so
    every piece mass is a normal-CDF difference (log-space) and sampling is a truncated normal
    (with rejection, acceptance ≥ 0.31, inside the cell)."""

    _KINDS = np.array([0, 2, 4, 3, 1])  # const below, left of cell, inside, right of cell, const above

    def __init__(self, mech: SnappedGrid, k: np.ndarray, mean: np.ndarray, var: np.ndarray):
        self.mech, self.k = mech, k
        lam = mech.lam
        a, b = _cell(k, mech.Lambda, mech.M)
        mu = np.broadcast_to((mean - mech.mid) / mech.range, k.shape)
        s = np.broadcast_to(np.sqrt(var) / mech.range, k.shape)
        self.a, self.b, self.mu, self.s = a, b, mu, s
        ac, bc = np.clip(a, -0.5, 0.5), np.clip(b, -0.5, 0.5)
        h = np.full(k.shape, 0.5)
        inf = np.full(k.shape, np.inf)
        self.p = np.stack([-inf, -h, ac, bc, h], axis=-1)
        self.q = np.stack([-h, ac, bc, h, inf], axis=-1)
        shift = s**2 / lam
        self.loc = np.stack([mu, mu + shift, mu, mu - shift, mu], axis=-1)  # Gaussian of each piece
        sc = s[..., None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            l0 = log_normal_mass((self.p - mu[..., None]) / sc, (self.q - mu[..., None]) / sc)
            lp = log_normal_mass((self.p - (mu + shift)[..., None]) / sc, (self.q - (mu + shift)[..., None]) / sc)
            lm = log_normal_mass((self.p - (mu - shift)[..., None]) / sc, (self.q - (mu - shift)[..., None]) / sc)
            c = _LOG_HALF + log1mexp(-(b - a) / lam)
            half_var = s**2 / (2 * lam**2)
            below = l0[..., 0] + log_cell_mass(a, b, -h, lam)
            above = l0[..., 4] + log_cell_mass(a, b, h, lam)
            left = c + (mu - a) / lam + half_var + lp[..., 1]
            right = c + (b - mu) / lam + half_var + lm[..., 3]
            t1 = _LOG_HALF + (a - mu) / lam + half_var + lm[..., 2]  # ∫ N·½e^{−(z−a)/λ}
            t2 = _LOG_HALF + (mu - b) / lam + half_var + lp[..., 2]  # ∫ N·½e^{−(b−z)/λ}
            self._inside_terms = (l0[..., 2], t1, t2)
            inside = l0[..., 2] + np.log1p(-np.exp(t1 - l0[..., 2]) - np.exp(t2 - l0[..., 2]))
            lmass = np.stack([below, left, inside, right, above], axis=-1)
        self.log_mass = np.where(self.q > self.p, lmass, -np.inf)
        self._log_norm = np.logaddexp.reduce(self.log_mass, axis=-1)

    def piece_proba(self) -> np.ndarray:
        return np.exp(self.log_mass - self._log_norm[..., None])

    def logpdf(self, x) -> np.ndarray:
        m = self.mech
        z = (np.asarray(x, float) - m.mid) / m.range
        log_prior = -0.5 * ((z - self.mu) / self.s) ** 2 - np.log(self.s) - 0.5 * math.log(2 * math.pi)
        return log_prior + m.log_pmf_index(self.k, np.clip(z, -0.5, 0.5)) - self._log_norm - math.log(m.range)

    def mean(self) -> np.ndarray:
        sc = self.s[..., None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):

            def tmean(loc):
                return truncnorm.mean((self.p - loc) / sc, (self.q - loc) / sc, loc=loc, scale=sc)

            m_loc = tmean(self.loc)
            mu = self.mu[..., None]
            shift = (self.s**2 / self.mech.lam)[..., None]
            l0, t1, t2 = self._inside_terms
            w1, w2 = np.exp(t1 - l0), np.exp(t2 - l0)
            m0 = m_loc[..., 2]
            m_minus = tmean(mu - shift)[..., 2]
            m_plus = tmean(mu + shift)[..., 2]
            inside_mean = (m0 - np.nan_to_num(w1 * m_minus) - np.nan_to_num(w2 * m_plus)) / (1 - w1 - w2)
            piece_mean = np.concatenate([m_loc[..., :2], inside_mean[..., None], m_loc[..., 3:]], axis=-1)
            piece_mean = np.where(np.isfinite(piece_mean), piece_mean, 0.0)
        z = np.sum(self.piece_proba() * piece_mean, axis=-1)
        return self.mech.mid + self.mech.range * z

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        base = self.k.shape
        shape = base if size is None else (size,) + base
        cdf = np.broadcast_to(np.cumsum(self.piece_proba(), axis=-1), shape + (5,))
        u = rng.random(shape)[..., None] * cdf[..., -1:]
        j = np.minimum((cdf < u).sum(axis=-1), 4)[..., None]

        def pick(arr):
            return np.take_along_axis(np.broadcast_to(arr, shape + (5,)), j, axis=-1)[..., 0]

        p, q, loc = pick(self.p), pick(self.q), pick(self.loc)
        s = np.broadcast_to(self.s, shape)
        z = _truncnorm_sample(p, q, loc, s, shape, rng)
        inside = np.flatnonzero((j[..., 0] == 2).ravel())
        if inside.size:
            zf = z.ravel().copy()
            pf, qf, lf, sf = p.ravel(), q.ravel(), loc.ravel(), s.ravel()
            af = np.broadcast_to(self.a, shape).ravel()
            bf = np.broadcast_to(self.b, shape).ravel()
            lam = self.mech.lam
            todo = inside
            while todo.size:  # accept the truncated-normal proposal with probability P(k | z) ≤ 1
                acc = rng.random(todo.size) < np.exp(log_cell_mass(af[todo], bf[todo], zf[todo], lam))
                todo = todo[~acc]
                if todo.size:
                    zf[todo] = _truncnorm_sample(pf[todo], qf[todo], lf[todo], sf[todo], (todo.size,), rng)
            z = zf.reshape(shape)
        return self.mech.mid + self.mech.range * z
