"""Debiased category frequencies from the releases of any discrete frequency oracle (Warner 1965;
Barber §3.2; Wang et al., USENIX Security 2017 for unary encoding and local hashing).

Matrix oracles (randomised response, TransitionMatrix), with P[i, j] = p(x̃ = i | x = j), satisfy
E[f̃] = P π. Other oracles are handled through their ``unbiased_onehot`` (inversion) and
``log_likelihood_matrix`` (maximum likelihood). Binary case:
f̃₁ = P₁₀(1 − θ) + P₁₁θ, so θ = (f̃₁ − P₁₀)/(1 − P₁₀ − P₀₁). Barber's eqs (2) and (24) print
"+ P₁₀" (and "+ p"); that is a sign error — the tests check this form against brute force.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import as_float_array
from ..errors import ConvergenceError, ValidationError
from ..mechanisms import DiscreteMechanism, MatrixMechanism

METHODS = ("inversion", "mle")
#: simplex_mle(method="auto"): the certified Newton solver while (rows of A)·k² stays below this, else EM
NEWTON_MAX_WORK = 2**26
_CALLER = "estimate_frequencies(method='mle')"
_CHUNK = 1 << 22  # entries of an (n, k) work array


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
    mechanism: DiscreteMechanism,
    *,
    method: str = "inversion",
    weights: Any = None,
    tol: float = 1e-10,
    max_iter: int = 10_000,
) -> np.ndarray:
    """Estimate the clean distribution π over the k states from one release per person.

    method="inversion": the (weighted) mean of ``unbiased_onehot`` — for matrix oracles P⁻¹ f̃ —
    projected onto the simplex (the unbiased moment estimator when it lies inside).
    method="mle": maximises Σₙ log p(x̃ₙ | π) = Σₙ log Σ_s π_s p(x̃ₙ | s) over the simplex
    (``simplex_mle``). Matrix oracles: the interior inversion when valid, else its Newton method on
    P. Other oracles: the same Newton method on the likelihood matrix of the distinct releases while
    that is small (distinct·k² ≤ NEWTON_MAX_WORK), else its EM; both stop on the certified duality
    gap max_j g_j − 1 ≤ tol (ConvergenceError after max_iter). Releases must be NaN-free.
    """
    if not isinstance(mechanism, DiscreteMechanism):
        raise ValidationError(
            "mechanism",
            "must be a discrete frequency oracle: a RandomizedResponse or TransitionMatrix, or any other "
            f"DiscreteMechanism (UnaryEncoding, LocalHashing), got {type(mechanism).__name__}",
        )
    if method not in METHODS:
        raise ValidationError("method", f"must be one of {METHODS}, got {method!r}")
    xt = mechanism.validate_release(x_tilde, "x_tilde")
    if xt.ndim != 1 or xt.size == 0:
        raise ValidationError("x_tilde", f"must be a non-empty 1-d array of releases, got shape {xt.shape}")
    w = _weights(weights, xt.shape)
    if not isinstance(mechanism, MatrixMechanism):
        if method == "inversion":
            return project_to_simplex(_mean_onehot(mechanism, xt, w))
        return _generic_mle(mechanism, xt, w, tol=tol, max_iter=max_iter)
    k = mechanism.k
    counts = np.bincount(xt, minlength=k).astype(float) if w is None else np.bincount(xt, weights=w, minlength=k)
    f_tilde = counts / counts.sum()
    P = mechanism.matrix
    raw = np.linalg.solve(P, f_tilde)
    if method == "inversion":
        return project_to_simplex(raw)
    if np.all(raw > 0):  # P square and column-stochastic: an interior inversion (Pπ = f̃) is the MLE
        return raw / raw.sum()
    seen = counts > 0  # a release nobody sent adds nothing to the likelihood
    with np.errstate(divide="ignore"):
        loglik = np.log(P[seen])
    return simplex_mle(loglik, counts[seen], tol=tol, max_iter=max_iter, caller=_CALLER)[0]


def _weights(weights: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    if weights is None:
        return None
    w = as_float_array("weights", weights)  # real and finite (complex, NaN, huge ints rejected by name)
    if w.shape != shape or np.any(w < 0):
        raise ValidationError("weights", f"must be finite, >= 0 and of shape {shape}")
    with np.errstate(over="ignore"):
        total = w.sum()
    if not (total > 0 and np.isfinite(total)):
        raise ValidationError("weights", f"must not all be 0 and must have a finite sum, got {total!r}")
    return w


def _mean_onehot(mech: DiscreteMechanism, xt: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """(Weighted) mean of the unbiased one-hot estimates, in chunks of bounded memory."""
    total = np.zeros(mech.k)
    step = max(1, _CHUNK // mech.k)
    for a in range(0, xt.size, step):
        u = mech.unbiased_onehot(xt[a : a + step])
        total += u.sum(axis=0) if w is None else w[a : a + step] @ u
    return total / (xt.size if w is None else w.sum())


def _generic_mle(mech: DiscreteMechanism, xt: np.ndarray, w, *, tol: float, max_iter: int) -> np.ndarray:
    values, inverse = np.unique(xt, return_inverse=True)
    f = np.bincount(inverse.ravel(), weights=w, minlength=values.size)
    L = mech.log_likelihood_matrix(values)
    return simplex_mle(L, f, tol=tol, max_iter=max_iter, method="auto", caller=_CALLER)[0]


def deconvolution_factor(pi: np.ndarray, A: np.ndarray, w: np.ndarray) -> np.ndarray:
    """g = Aᵀ(w / Aπ), the factor of the deconvolution EM's update π ← π ⊙ g / Σ π ⊙ g (the
    gradient of Σ_i w_i log (Aπ)_i; at the MLE g_s ≤ Σw, with equality where π_s > 0). Rows A (n, k)
    of p(x̃_i | s) with weights w (n,) for one π (k,); or, for a batch of distributions π (m, k) that
    one matrix oracle P = A (k, k) released, their released-value counts w (m, k). ``simplex_mle``'s
    EM and spread-EM's learned prior (``_priors._factorised``) take this one update."""
    return (w / (pi @ A.T)) @ A


def clip_table(table: np.ndarray) -> np.ndarray:
    """Negative entries set to 0, then renormalised to sum 1 (uniform if nothing positive is left)."""
    t = np.maximum(np.asarray(table, float), 0.0)
    total = t.sum()
    return t / total if total > 0 else np.full(t.shape, 1.0 / t.size)


def simplex_mle(
    loglik: np.ndarray,
    weights: np.ndarray,
    start: np.ndarray | None = None,
    *,
    tol: float,
    max_iter: int,
    method: str = "newton",
    caller: str = "simplex_mle",
) -> tuple[np.ndarray, int]:
    """argmax_π L(π) = Σ_i w_i log (Aπ)_i over the simplex, A = exp(loglik) up to a per-row scale (which
    does not move the argmax), w normalised, from ``start`` (default uniform; strictly inside).

    method="newton": EM is far too slow at small ε (a flat likelihood), so a log-barrier Newton method
    on {1ᵀπ = 1}, in variables scaled by π (well conditioned however close π gets to the boundary);
    its step solves a (k+1)² system over all rows, (rows)·k² work. "em": π ← π ⊙ g, for k too large
    for that. "auto": Newton while (rows)·k² ≤ NEWTON_MAX_WORK, else EM. Both stop on the certified
    gap max_s g_s − 1 ≤ tol, g = Aᵀ(w / Aπ): by concavity L(π*) − L(π) ≤ that gap, a bound on the
    shortfall of the mean log-likelihood per row. Returns (π, steps); ConvergenceError naming
    ``caller`` after max_iter steps."""
    A = np.exp(loglik - loglik.max(axis=1, keepdims=True))
    w = weights / weights.sum()
    K = A.shape[1]
    pi = np.full(K, 1.0 / K) if start is None else np.asarray(start, float).copy()
    if method not in ("newton", "em", "auto"):
        raise ValidationError("method", f"must be 'newton', 'em' or 'auto', got {method!r}")
    if method == "auto":
        method = "newton" if A.shape[0] * K**2 <= NEWTON_MAX_WORK else "em"
    if method == "em":
        for it in range(max_iter):
            g = deconvolution_factor(pi, A, w)
            if np.max(g) - 1.0 <= tol:
                return pi, it
            pi = pi * g
            pi /= pi.sum()
        raise ConvergenceError(f"{caller}: gap above tol={tol} after max_iter={max_iter} EM iterations")
    t = 1.0
    for it in range(max_iter):
        q = A @ pi
        g = A.T @ (w / q)
        if g.max() - 1.0 <= tol:
            return pi / pi.sum(), it
        # Newton step in scaled variables step = π ⊙ d (the barrier Hessian becomes I + ..., well
        # conditioned however close π gets to the boundary), from the KKT system of 1ᵀstep = 0
        B = A * pi
        KKT = np.zeros((K + 1, K + 1))
        KKT[:K, :K] = t * (B * (w / q**2)[:, None]).T @ B + np.eye(K)
        KKT[:K, K] = KKT[K, :K] = pi
        d = np.linalg.solve(KKT, np.append(t * pi * g + 1.0, 0.0))[:K]
        step = pi * d
        s, neg = 1.0, d < 0
        if neg.any():
            s = min(1.0, 0.99 * float(np.min(-1.0 / d[neg])))
        dq, slope = (A @ step) / q, 0.25 * float((t * pi * g + 1.0) @ d)
        # Armijo on the barrier's increase, computed from ratios: its value is ~t, its change tiny
        while s > 1e-14 and t * float(w @ np.log1p(s * dq)) + float(np.sum(np.log1p(s * d))) < s * slope:
            s *= 0.5
        pi = pi + s * step
        pi /= pi.sum()  # no drift off the simplex from rounding
        if slope < 1e-6 or s <= 1e-14:  # (nearly) centred for this t, where the gap is about K / t: tighten
            t *= 20.0
    raise ConvergenceError(f"{caller}: gap above tol={tol} after max_iter={max_iter} Newton steps")
