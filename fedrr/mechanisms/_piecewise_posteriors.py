"""Exact posteriors p(x | x̃) ∝ π(x)·ℓ(x) on [lower, upper] when the likelihood ℓ(x) = p(x̃ | x) is
piecewise linear in x: Duchi et al.'s mechanism (one linear piece) and the snapped Piecewise
Mechanism (two levels joined by one-grid-step linear ramps). Derived here; checked against
quadrature in tests/test_piecewise.py.

* ``HistogramPrior`` (piecewise uniform): on every piece between consecutive likelihood knots and
  prior edges the posterior density is linear, so bin masses are trapezoids and sampling inverts a
  quadratic CDF in closed form.
* ``GaussianPrior``: on a piece where ℓ is constant the posterior is a truncated normal (PM's
  posterior is a mixture of three of them plus two ramps); piece masses use the truncated normal's
  mass and mean (∫(f_u + B(x − u))φ = I₀·(f_u + B(E[X] − u))). Linear pieces are sampled exactly by
  rejection from the piece's truncated normal, accepting with probability ℓ(x)/max ℓ on the piece
  (expected proposals ≤ max ℓ/min ℓ ≤ e^ε). Pieces narrower than 1% of the prior's sd (PM's ramps,
  one grid step ≈ 10⁻¹² wide) get their mass and mean by 16-point Gauss–Legendre quadrature of the
  smooth φ·ℓ (exact to rounding there) and are sampled by uniform proposals accepted with
  φ(x)ℓ(x)/(max φ·max ℓ).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import truncnorm

from ..errors import ValidationError
from ._continuous_posteriors import log_normal_mass, prior_parts


def _interp(x: np.ndarray, knots: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Row-wise linear interpolation: x (R, n) through sorted knots (R, K) with values (R, K)."""
    K = knots.shape[-1]
    idx = np.clip((x[..., :, None] >= knots[..., None, :]).sum(-1) - 1, 0, K - 2)
    x0, x1 = np.take_along_axis(knots, idx, -1), np.take_along_axis(knots, idx + 1, -1)
    f0, f1 = np.take_along_axis(values, idx, -1), np.take_along_axis(values, idx + 1, -1)
    width = x1 - x0
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(width > 0, (x - x0) / np.where(width > 0, width, 1.0), 0.0)
    return f0 + (f1 - f0) * np.clip(frac, 0.0, 1.0)


def _rows(arr: np.ndarray, batch: tuple[int, ...], last: int) -> np.ndarray:
    return np.broadcast_to(arr, batch + (last,)).reshape(-1, last)


class LinearPiecesPosterior:
    """Posterior of a scalar field whose likelihood is linear between ``knots`` (..., K): the first and
    last knots are the domain [lower, upper], ``values`` ∝ ℓ at the knots (> 0)."""

    def __init__(self, x_tilde: np.ndarray, knots: np.ndarray, values: np.ndarray, prior: Any):
        self.x_tilde = x_tilde
        self.batch = tuple(x_tilde.shape)
        self.knots = knots.reshape(-1, knots.shape[-1])
        self.values = values.reshape(-1, values.shape[-1])
        kind, a, b = prior_parts(prior, x_tilde)
        self.kind = kind
        if kind == "histogram":
            self._init_histogram(a, b)
        else:
            self._init_gaussian(a, b)
        total = np.logaddexp.reduce(self._log_mass, axis=-1, keepdims=True)
        if not np.all(np.isfinite(total)):
            raise ValidationError("prior", "puts no mass on the mechanism's domain [lower, upper]")
        self._log_z = total
        self.piece_proba = np.exp(self._log_mass - total)

    # --- construction -------------------------------------------------------------------------
    def _init_histogram(self, edges: np.ndarray, probs: np.ndarray) -> None:
        B = probs.shape[-1]
        self.edges = _rows(edges, self.batch, B + 1)
        self.probs = _rows(probs, self.batch, B)
        lo, hi = self.knots[:, :1], self.knots[:, -1:]
        pts = np.concatenate([self.knots, np.clip(self.edges, lo, hi)], axis=-1)
        is_edge = np.concatenate([np.zeros_like(self.knots, bool), np.ones_like(self.edges, bool)], axis=-1)
        order = np.argsort(pts, axis=-1, kind="stable")
        self.pts = np.take_along_axis(pts, order, -1)
        self.f = _interp(self.pts, self.knots, self.values)
        # prior bin of the piece [pts[m], pts[m+1]]: edges at or before pts[m], minus one
        self.bins = np.cumsum(np.take_along_axis(is_edge, order, -1), axis=-1)[:, :-1] - 1
        inside = (self.bins >= 0) & (self.bins < B)
        b = np.clip(self.bins, 0, B - 1)
        width = np.diff(self.edges, axis=-1)
        dens = np.where(inside, np.take_along_axis(self.probs / width, b, -1), 0.0)
        u, v = self.pts[:, :-1], self.pts[:, 1:]
        with np.errstate(divide="ignore"):
            self._log_mass = np.log(dens * (v - u) * 0.5 * (self.f[:, :-1] + self.f[:, 1:]))

    def _init_gaussian(self, mean: np.ndarray, var: np.ndarray) -> None:
        self.mu = np.broadcast_to(mean, self.batch).reshape(-1, 1)
        self.s = np.sqrt(np.broadcast_to(var, self.batch)).reshape(-1, 1)
        self.pts, self.f = self.knots, self.values
        u, v = self.pts[:, :-1], self.pts[:, 1:]
        fu, fv = self.f[:, :-1], self.f[:, 1:]
        self._alpha, self._beta = (u - self.mu) / self.s, (v - self.mu) / self.s
        mu, s = np.broadcast_to(self.mu, u.shape), np.broadcast_to(self.s, u.shape)
        pos = v > u
        #: pieces much narrower than the prior's sd (PM's ramps): moments by Gauss–Legendre (below)
        self._narrow = pos & (v - u < _NARROW * s)
        wide = pos & ~self._narrow
        m, var_p = np.zeros_like(u), np.zeros_like(u)
        if wide.any():
            mm, vv = truncnorm.stats(self._alpha[wide], self._beta[wide], loc=mu[wide], scale=s[wide], moments="mv")
            m[wide], var_p[wide] = np.clip(mm, u[wide], v[wide]), np.maximum(vv, 0.0)
        slope = np.where(pos, (fv - fu) / np.where(pos, v - u, 1.0), 0.0)
        e_lin = np.clip(fu + slope * (m - u), np.minimum(fu, fv), np.maximum(fu, fv))  # E[ℓ(X)], X on the piece
        self._log_mass = np.full(u.shape, -np.inf)
        self._piece_mean = u.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            log_i0 = log_normal_mass(self._alpha[wide], self._beta[wide])
            self._log_mass[wide] = log_i0 + np.log(e_lin[wide])
            # E[X ℓ(X)]/E[ℓ(X)] on the piece, moments about u: u + (f_u E[X − u] + B E[(X − u)²])/E[ℓ]
            d = m - u
            self._piece_mean[wide] = (u + (fu * d + slope * (var_p + d * d)) / e_lin)[wide]
        if self._narrow.any():
            nu, nv, nfu, nfv = u[self._narrow], v[self._narrow], fu[self._narrow], fv[self._narrow]
            y = _GL_NODES[None, :]
            x = nu[:, None] + (nv - nu)[:, None] * y
            lw = (
                np.log(_GL_WEIGHTS)[None, :]
                + _log_phi(x, mu[self._narrow][:, None], s[self._narrow][:, None])
                + np.log(nfu[:, None] + (nfv - nfu)[:, None] * y)
            )
            total = np.logaddexp.reduce(lw, axis=-1)
            self._log_mass[self._narrow] = np.log(nv - nu) + total
            self._piece_mean[self._narrow] = nu + (nv - nu) * (np.exp(lw - total[:, None]) * y).sum(-1)
        self._piece_mean = np.clip(self._piece_mean, u, v)

    # --- queries ------------------------------------------------------------------------------
    def bin_proba(self) -> np.ndarray:
        """(..., B): posterior probability of each prior bin (histogram priors only)."""
        if self.kind != "histogram":
            raise ValidationError("prior", "bin_proba needs a HistogramPrior")
        R, B = self.probs.shape
        ok = (self.bins >= 0) & (self.bins < B)
        flat = (np.arange(R)[:, None] * B + np.clip(self.bins, 0, B - 1))[ok]
        out = np.bincount(flat, weights=self.piece_proba[ok], minlength=R * B)
        return out.reshape(self.batch + (B,))

    def mean(self) -> np.ndarray:
        if self.kind == "histogram":
            u, v = self.pts[:, :-1], self.pts[:, 1:]
            fu, fv = self.f[:, :-1], self.f[:, 1:]
            piece_mean = u + (v - u) * (fu + 2 * fv) / (3 * (fu + fv))
        else:
            piece_mean = self._piece_mean
        return (self.piece_proba * piece_mean).sum(-1).reshape(self.batch)

    def logpdf(self, x: Any) -> np.ndarray:
        """log p(x | x̃) (−inf outside [lower, upper] and where the prior has no mass); x broadcasts
        against x̃."""
        x = np.asarray(x, float)
        try:
            shape = np.broadcast_shapes(x.shape, self.batch)
        except ValueError:
            raise ValidationError("x", f"shape {x.shape} does not broadcast against x_tilde's {self.batch}") from None

        def per_value(arr: np.ndarray) -> np.ndarray:  # (R, m) -> (N, m), one row per value of x
            return np.broadcast_to(arr.reshape(self.batch + arr.shape[-1:]), shape + arr.shape[-1:]).reshape(
                -1, arr.shape[-1]
            )

        xr = np.broadcast_to(x, shape).reshape(-1, 1)
        knots = per_value(self.knots)
        lik = _interp(xr, knots, per_value(self.values))
        with np.errstate(divide="ignore"):
            if self.kind == "histogram":
                edges, probs = per_value(self.edges), per_value(self.probs)
                B = probs.shape[-1]
                b = (xr >= edges).sum(-1, keepdims=True) - 1
                inside = (b >= 0) & (b < B) & (xr <= edges[:, -1:])
                dens = np.take_along_axis(probs / np.diff(edges, axis=-1), np.clip(b, 0, B - 1), -1)
                log_prior = np.log(np.where(inside, dens, 0.0))
            else:
                mu, s = per_value(self.mu), per_value(self.s)
                log_prior = -0.5 * ((xr - mu) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
            ok = (xr >= knots[:, :1]) & (xr <= knots[:, -1:])
            out = np.where(ok, log_prior + np.log(lik) - per_value(self._log_z), -np.inf)
        return out.reshape(shape)

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        shape = self.batch if size is None else (size,) + self.batch
        R = self.knots.shape[0]
        rows = np.broadcast_to(np.arange(R).reshape(self.batch), shape).reshape(-1)
        cdf = np.cumsum(self.piece_proba, axis=-1)[rows]
        u = rng.random(rows.size)[:, None] * cdf[:, -1:]
        piece = np.minimum((cdf < u).sum(-1), cdf.shape[-1] - 1)
        lo, hi = self.pts[rows, piece], self.pts[rows, piece + 1]
        fu, fv = self.f[rows, piece], self.f[rows, piece + 1]
        if self.kind == "histogram":
            U = rng.random(rows.size)
            A = 0.5 * (fu + fv)
            w = 2 * U * A / (fu + np.sqrt(np.maximum(fu**2 + 2 * (fv - fu) * U * A, 0.0)))
            out = lo + np.clip(w, 0.0, 1.0) * (hi - lo)
        else:
            out = self._sample_gaussian(rng, rows, piece, lo, hi, fu, fv)
        return np.clip(out, lo, hi).reshape(shape)

    def _sample_gaussian(self, rng, rows, piece, lo, hi, fu, fv) -> np.ndarray:
        """Exact rejection per piece: wide pieces propose from the truncated normal and accept with
        ℓ(x)/max ℓ; narrow ones propose uniformly and accept with φ(x)ℓ(x)/(max φ · max ℓ)."""
        a, b = self._alpha[rows, piece], self._beta[rows, piece]
        mu, s = self.mu[rows, 0], self.s[rows, 0]
        narrow = self._narrow[rows, piece]
        out = np.empty(rows.size)
        todo = np.arange(rows.size)
        while todo.size:
            nar = narrow[todo]
            x = np.empty(todo.size)
            w = ~nar
            if w.any():
                tw = todo[w]
                x[w] = truncnorm.rvs(a[tw], b[tw], loc=mu[tw], scale=s[tw], size=tw.size, random_state=rng)
            if nar.any():
                tn = todo[nar]
                x[nar] = lo[tn] + (hi[tn] - lo[tn]) * rng.random(tn.size)
            t = todo
            x = np.clip(x, lo[t], hi[t])
            width = hi[t] - lo[t]
            frac = np.where(width > 0, (x - lo[t]) / np.where(width > 0, width, 1.0), 0.0)
            ratio = (fu[t] + (fv[t] - fu[t]) * frac) / np.maximum(fu[t], fv[t])
            peak = np.clip(mu[t], lo[t], hi[t])
            ratio = np.where(nar, ratio * np.exp(_log_phi(x, mu[t], s[t]) - _log_phi(peak, mu[t], s[t])), ratio)
            accept = rng.random(t.size) <= ratio
            out[t[accept]] = x[accept]
            todo = t[~accept]
        return out


_NARROW = 1e-2
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)
_GL_NODES, _GL_WEIGHTS = (_GL_NODES + 1) / 2, _GL_WEIGHTS / 2  # on [0, 1]


def _log_phi(x, mu, s):
    return -0.5 * ((x - mu) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
