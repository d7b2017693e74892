"""Debiased category frequencies from randomised-response releases (Warner 1965; Barber §3.2).

With P[i, j] = p(x̃ = i | x = j), the released frequencies satisfy E[f̃] = P π. Binary case:
f̃₁ = P₁₀(1 − θ) + P₁₁θ, so θ = (f̃₁ − P₁₀)/(1 − P₁₀ − P₀₁). Barber's eqs (2) and (24) print
"+ P₁₀" (and "+ p"); that is a sign error — the tests check this form against brute force.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConvergenceError, ValidationError
from ..mechanisms.discrete import RandomizedResponse, TransitionMatrix

METHODS = ("inversion", "mle")


def project_to_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi et al. 2008), last axis."""
    v = np.asarray(v, float)
    k = v.shape[-1]
    u = -np.sort(-v, axis=-1)
    css = np.cumsum(u, axis=-1) - 1.0
    idx = np.arange(1, k + 1)
    cond = u - css / idx > 0
    rho = k - np.argmax(cond[..., ::-1], axis=-1) - 1
    theta = np.take_along_axis(css, rho[..., None], axis=-1) / (rho[..., None] + 1)
    return np.maximum(v - theta, 0.0)


def warner_estimate(f1_tilde: float, p10: float, p01: float) -> float:
    """θ̂ = (f̃₁ − P₁₀)/(1 − P₁₀ − P₀₁): unbiased, may fall outside [0, 1] at small N."""
    denom = 1.0 - p10 - p01
    if abs(denom) < 1e-12:
        raise ValidationError("p10", "P10 + P01 = 1 makes the binary noise non-invertible")
    return (f1_tilde - p10) / denom


def estimate_frequencies(
    x_tilde: Any,
    mechanism: RandomizedResponse | TransitionMatrix,
    *,
    method: str = "inversion",
    weights: Any = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
) -> np.ndarray:
    """Estimate the clean distribution π over the k states from one release per person.

    method="inversion": π̂ = P⁻¹ f̃ projected onto the simplex (the unbiased moment estimator
    when it lies inside). method="mle": maximises Σₙ log (Pπ)[x̃ₙ] by EM,
    π ← π ⊙ Pᵀ(f̃ / Pπ), which stays on the simplex and equals the inversion estimate whenever
    that one is a valid distribution.
    """
    if not isinstance(mechanism, (RandomizedResponse, TransitionMatrix)):
        raise ValidationError(
            "mechanism", f"must be a RandomizedResponse or TransitionMatrix, got {type(mechanism).__name__}"
        )
    if method not in METHODS:
        raise ValidationError("method", f"must be one of {METHODS}, got {method!r}")
    xt = mechanism.validate_release(x_tilde, "x_tilde")
    if xt.ndim != 1 or xt.size == 0:
        raise ValidationError("x_tilde", f"must be a non-empty 1-d array of released states, got shape {xt.shape}")
    k = mechanism.k
    if weights is None:
        counts = np.bincount(xt, minlength=k).astype(float)
    else:
        w = np.asarray(weights, float)
        if w.shape != xt.shape or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValidationError("weights", f"must be finite, >= 0 and of shape {xt.shape}")
        counts = np.bincount(xt, weights=w, minlength=k)
    f_tilde = counts / counts.sum()
    P = mechanism.matrix
    if method == "inversion":
        return project_to_simplex(np.linalg.solve(P, f_tilde))
    return _simplex_mle(f_tilde, P, tol=tol, max_iter=max_iter)


def _simplex_mle(f: np.ndarray, P: np.ndarray, *, tol: float, max_iter: int) -> np.ndarray:
    """argmax Σ f_i log (Pπ)_i over the simplex. Interior inversion ⇒ it is the MLE (Pπ = f). Otherwise a
    log-barrier Newton method on {1ᵀπ = 1}; stops on the certified duality gap max_j g_j − 1 ≤ tol,
    g = Pᵀ(f / Pπ) (L(π*) − L(π) ≤ max_j g_j − 1 by concavity)."""
    k = P.shape[1]
    raw = np.linalg.solve(P, f)
    if np.all(raw > 0):
        return raw / raw.sum()
    pos = f > 0
    pi, t, ones = np.full(k, 1.0 / k), 1.0, np.ones(k)
    obj = lambda p, t: t * float(f[pos] @ np.log((P @ p)[pos])) + float(np.sum(np.log(p)))
    for _ in range(max_iter):
        q = P @ pi
        g = P.T @ (f / q)
        grad = t * g + 1.0 / pi
        Hb = t * (P * (f / q**2)[:, None]).T @ P + np.diag(1.0 / pi**2)
        Hg, H1 = np.linalg.solve(Hb, grad), np.linalg.solve(Hb, ones)
        step = Hg - (ones @ Hg) / (ones @ H1) * H1
        s, neg = 1.0, step < 0
        if neg.any():
            s = min(1.0, 0.99 * float(np.min(-pi[neg] / step[neg])))
        o0 = obj(pi, t)
        while s > 1e-14 and obj(pi + s * step, t) < o0 + 0.25 * s * float(grad @ step):
            s *= 0.5
        pi = pi + s * step
        if step @ Hb @ step < 1e-10:  # centred for this t: barrier gap k/t
            out = np.maximum(pi, 0.0)
            out /= out.sum()
            if np.max(P.T @ (f / (P @ out))) - 1.0 <= tol:
                return out
            t *= 20.0
    raise ConvergenceError(
        f"estimate_frequencies(method='mle') did not converge in max_iter={max_iter} iterations (tol={tol})"
    )
