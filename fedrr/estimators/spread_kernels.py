"""Compiled (numba) E-step of spread-EM for discrete columns released by k-ary randomised response
(or not released at all): one pass per record draws proposals from ρ(x | x̃) (the exact posterior
of each column under the prior), runs the independence-Metropolis chain and accumulates the
prior's counts. Uniforms are drawn by the caller (one numpy call each), so the kernel has no random
state of its own; it releases the GIL (nogil), so shards run in threads.

A draw from ρ(x_d | x̃_d) ∝ π_d(x)·(q if x = x̃ else r) takes one uniform. For q ≥ r (flip <
(k−1)/k, the usual case) it is the mixture "x̃ with probability a = (q−r)π(x̃)/(r + (q−r)π(x̃)),
else x ~ π_d", the latter by Walker's alias method: O(1) and branch-free. For q < r the mixture
weights would be negative, so those columns use the guide-table inverse CDF of π_d with x̃'s mass
scaled down (``_draw``). An attribute the client did not release (x̃ = −1) is drawn from π_d.
Logits are sums of table lookups W[r, d, x_d] (any encoding of the states)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def rr_tables(probs, q, r):
    """Sampling tables per column d and released value x̃: stay[d, x̃] = a (see module doc),
    jump[d, x̃] = K/(1 − a), and Walker alias tables (P, A) of π_d (probs rows, any scale)."""
    D, K = probs.shape
    stay = np.zeros((D, K))
    jump = np.zeros((D, K))
    P = np.ones((D, K))
    A = np.empty((D, K), np.int32)
    small = np.empty(K, np.int64)
    large = np.empty(K, np.int64)
    sc = np.empty(K)
    for d in range(D):
        tot = 0.0
        for k in range(K):
            tot += probs[d, k]
        for k in range(K):
            A[d, k] = k
            pi = probs[d, k] / tot
            den = r[d] + (q[d] - r[d]) * pi  # 0 only for a state of prior mass 0 in a non-RR column (unused)
            if q[d] >= r[d] and den > 0.0:
                a = (q[d] - r[d]) * pi / den
                stay[d, k] = a
                jump[d, k] = K / (1.0 - a) if a < 1.0 else 0.0
        # Vose's alias construction: bucket k holds k with probability P[d, k], else A[d, k]
        ns = 0
        nl = 0
        for k in range(K):
            sc[k] = probs[d, k] * K / tot
            if sc[k] < 1.0:
                small[ns] = k
                ns += 1
            else:
                large[nl] = k
                nl += 1
        while ns > 0 and nl > 0:
            ns -= 1
            s = small[ns]
            l = large[nl - 1]
            P[d, s] = sc[s]
            A[d, s] = l
            sc[l] = (sc[l] + sc[s]) - 1.0
            if sc[l] < 1.0:
                nl -= 1
                small[ns] = l
                ns += 1
        # leftovers (rounding) keep P = 1, A = self
    return stay, jump, P, A


@njit(cache=True, inline="always")
def _draw_prior(d, u, P, A, K):
    """x ~ π_d from one uniform (alias method)."""
    t = u * K
    j = int(t)
    if j > K - 1:
        j = K - 1
    return j if t - j < P[d, j] else A[d, j]


@njit(cache=True, inline="always")
def _draw_alias(d, x, u, stay, jump, P, A, K):
    """One draw from ρ(x_d | x̃_d = x) for a q ≥ r column, from one uniform u (see module doc)."""
    a = stay[d, x]
    t = (u - a) * jump[d, x]  # U(0, K) given u >= a
    j = int(t)
    if j < 0:
        j = 0
    elif j > K - 1:
        j = K - 1
    y = j if t - j < P[d, j] else A[d, j]
    return x if u < a else y


@njit(cache=True, inline="always")
def _draw(d, x, u, cdf, guide, q, r, K):
    """One draw from p(x_d | x̃_d = x) ∝ π_d(x')·(q if x' = x else r), from one uniform u."""
    hi = cdf[d, x]
    lo = cdf[d, x - 1] if x > 0 else 0.0
    pix = hi - lo
    stay = pix * q[d] / (pix * q[d] + (1.0 - pix) * r[d])
    if u < stay:
        return x
    rest = 1.0 - pix
    if rest <= 0.0:
        return x
    v = (u - stay) / (1.0 - stay) * rest  # a fresh U(0, rest) given u >= stay
    if v >= lo:
        v += pix  # skip x's own mass
    j = int(v * K)
    if j > K - 1:
        j = K - 1
    # the answer lies in [guide[j], guide[j+1]]: a few linear steps, then bisection (a
    # near-degenerate prior packs many states into one bucket)
    lo_s = guide[d, j]
    hi_s = guide[d, j + 1] if j + 1 < K else K - 1
    for _ in range(4):
        if lo_s >= hi_s or cdf[d, lo_s] > v:
            return lo_s
        lo_s += 1
    while lo_s < hi_s:
        mid = (lo_s + hi_s) >> 1
        if cdf[d, mid] <= v:
            lo_s = mid + 1
        else:
            hi_s = mid
    return lo_s


@njit(cache=True, inline="always")
def _draw_rows(d, row, u, probs, lik, kd):
    """One draw from ρ(x_d) ∝ π_d(x)·L[row, x] (any discrete oracle: the release's likelihood row)."""
    tot = 0.0
    for s in range(kd):
        tot += probs[d, s] * lik[row, s]
    v = u * tot
    acc = 0.0
    for s in range(kd):
        acc += probs[d, s] * lik[row, s]
        if acc > v:
            return s
    return kd - 1


@njit(cache=True, inline="always")
def _log_g(z, yterm_n, Rn, C, out):
    """log Σ_c p(c̃|c) p_θ(c|x) and the responsibilities p(c | x, c̃) into ``out``."""
    m = -np.inf
    for c in range(C):
        if Rn == 1:  # binary models have one logit row (class 1 vs 0)
            zc = z[0] if c == 1 else 0.0
        else:
            zc = z[c]
        out[c] = zc
        if zc > m:
            m = zc
    lse = 0.0
    for c in range(C):
        lse += np.exp(out[c] - m)
    lse = m + np.log(lse)
    m2 = -np.inf
    for c in range(C):
        out[c] = yterm_n[c] + out[c] - lse
        if out[c] > m2:
            m2 = out[c]
    tot = 0.0
    for c in range(C):
        tot += np.exp(out[c] - m2)
    lg = m2 + np.log(tot)
    for c in range(C):
        out[c] = np.exp(out[c] - lg)
    return lg


@njit(cache=True, nogil=True)
def rr_chain(
    U,
    U_acc,
    xtT,
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
    W,
    intercept,
    E,
    Zt,
    Rout,
    counts,
    new_stateT,
    statesT,
    row_cols,
    probs,
    lik,
    kcol,
):
    """S steps of one chain for a block of b records (column-major: records innermost).

    U (S', D, b) uniforms for the proposals (S' = S, or S + 1 to initialise the chain) and U_acc
    (S, b) for the acceptances, drawn by the caller in one numpy call each; xtT (D, b)
    released states, −1 where not released; stateT (D, b) the chain's state (read only);
    W (Rn, D, K) logit contributions; E (D, K) float32 model input of each state (scalar
    encodings) — if E has no rows, Zt is not written, nor statesT if it has none. Outputs: Zt
    (D, S·b) model inputs of the kept states (column s·b + n), statesT (D, S·b) the kept states, Rout (S, b, C)
    responsibilities, counts (D, K) += kept states / S, new_stateT (D, b). Returns the number of
    accepted proposals.

    Columns with ``row_cols[d]`` come from any other discrete oracle: xtT holds the row of ``lik``
    (likelihood p(x̃ | x = s), s < kcol[d]) of the entry's release, and the proposal is drawn from
    ρ(x) ∝ probs[d, x]·lik[row, x] in O(k) (``_draw_rows``)."""
    D, b = xtT.shape
    Sp = S if has_state else S + 1
    K = stay.shape[1]
    C = yterm.shape[1]
    Rn = W.shape[0]
    write_z = E.shape[0] > 0
    write_states = statesT.shape[0] > 0
    props = np.empty((Sp, D, b), np.int32)
    z = np.empty((Sp, Rn, b))
    zs = np.empty((Rn, b))
    for k in range(Rn):
        z[:, k, :] = intercept[k]
        zs[k, :] = intercept[k]
    for s in range(Sp):
        for d in range(D):
            u = U[s, d]
            if row_cols[d]:
                for n in range(b):
                    x = xtT[d, n]
                    props[s, d, n] = (
                        _draw_prior(d, u[n], P, A, K) if x < 0 else _draw_rows(d, x, u[n], probs, lik, kcol[d])
                    )
            elif q[d] >= r[d]:
                for n in range(b):
                    x = xtT[d, n]
                    props[s, d, n] = (
                        _draw_prior(d, u[n], P, A, K) if x < 0 else _draw_alias(d, x, u[n], stay, jump, P, A, K)
                    )
            else:
                for n in range(b):
                    x = xtT[d, n]
                    props[s, d, n] = _draw_prior(d, u[n], P, A, K) if x < 0 else _draw(d, x, u[n], cdf, guide, q, r, K)
            for k in range(Rn):
                for n in range(b):
                    z[s, k, n] += W[k, d, props[s, d, n]]
    if has_state:
        for d in range(D):
            for k in range(Rn):
                for n in range(b):
                    zs[k, n] += W[k, d, stateT[d, n]]
    u_acc = U_acc
    # the Metropolis chain per record; src[s, n] = proposal index held after step s (-1: old state)
    src = np.empty((S, b), np.int64)
    off = 0 if has_state else 1
    resp = np.empty(C)
    tmp = np.empty(C)
    zn = np.empty(Rn)
    accepted = 0
    for n in range(b):
        cur = -1
        for k in range(Rn):
            zn[k] = zs[k, n] if has_state else z[0, k, n]
        if not has_state:
            cur = 0
        lg_cur = _log_g(zn, yterm[n], Rn, C, resp)
        for s in range(S):
            for k in range(Rn):
                zn[k] = z[s + off, k, n]
            lg_prop = _log_g(zn, yterm[n], Rn, C, tmp)
            if np.log(u_acc[s, n]) < lg_prop - lg_cur:
                accepted += 1
                cur = s + off
                lg_cur = lg_prop
                for c in range(C):
                    resp[c] = tmp[c]
            src[s, n] = cur
            for c in range(C):
                Rout[s, n, c] = resp[c]
    w = 1.0 / S
    for d in range(D):
        for n in range(b):
            v = stateT[d, n] if has_state else 0
            for s in range(S):
                j = src[s, n]
                if j >= 0:
                    v = props[j, d, n]
                if write_states:
                    statesT[d, s * b + n] = v
                if write_z:
                    Zt[d, s * b + n] = E[d, v]
                counts[d, v] += w
            new_stateT[d, n] = v
    return accepted
