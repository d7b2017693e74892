"""Compiled (numba) kernels of the direct fit's likelihood of two attributes per record
(``_direct.TwoPairLikelihood``): a binary model's joint tables of two attributes and their gradient over
a prior's draws (``two_pair_table``, ``two_pair_grad``), and under a prior of rows every pair's table
and its gradient's gather (``rows_tables``, ``rows_gather``). Spread-EM's E-step kernels are ``_kernels``."""

from __future__ import annotations

from numba import njit

#: the two-pair kernels' sums run in any order (SIMD lanes), and a division by zero is not checked: the
#: draws' loop vectorises (half the time of the scalar loop, its division being the cost)
_TWO_PAIR = dict(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "contract"})


@njit(inline="always", cache=True)
def _cell(Wa, Wb, cj, ck, s, t):
    """Cell (s, t)'s weight factors (Wa and Wb broadcast on a length-1 axis) and e^{−ℓ}'s state part."""
    return Wa[s % Wa.shape[0], t % Wa.shape[1]], Wb[s % Wb.shape[0], t % Wb.shape[1]], cj[s] * ck[t]


@njit(**_TWO_PAIR)
def two_pair_table(eb, cj, ck, scale, Wa, Wb, q):
    """A binary model's joint table q (k_j, k_k, 2) of two attributes, q[s, t, c] = Σ_n Wm[s, t, n]
    p(c | ℓ_stn), with the cell weights Wm = scale[s, t] Wa[s, t, n] Wb[s, t, n] (Wa and Wb broadcast
    on a length-1 axis) and e^{−ℓ_stn} = eb[n] cj[s] ck[t]: one exp per draw and per state, not per
    entry (the caller keeps the product within exp's range)."""
    for s in range(scale.shape[0]):
        for t in range(scale.shape[1]):
            wa, wb, c = _cell(Wa, Wb, cj, ck, s, t)
            q0 = 0.0
            q1 = 0.0
            for i in range(eb.size):
                e = eb[i] * c
                wr = wa[i] * wb[i] / (1.0 + e)  # w p(1 | ℓ)
                q1 += wr
                q0 += wr * e  # w p(0 | ℓ) without 1 − p's cancellation
            q[s, t, 0] = scale[s, t] * q0
            q[s, t, 1] = scale[s, t] * q1


@njit(**_TWO_PAIR)
def two_pair_grad(eb, cj, ck, scale, Wa, Wb, g, gj, gk, a):
    """``two_pair_table``'s gradient from g (k_j, k_k) = d loss / d q[s, t, 1] − d loss / d q[s, t, 0]:
    with h = Wm p(1 − p) = d q[s, t, 1] / d ℓ_stn, adds Σ_{t,n} g h to gj[s], Σ_{s,n} g h to gk[t] and
    Σ_{s,t} g h to a[n] (the draws' logits), without the (k_j, k_k, n) array."""
    for s in range(scale.shape[0]):
        for t in range(scale.shape[1]):
            wa, wb, c = _cell(Wa, Wb, cj, ck, s, t)
            gst = g[s, t] * scale[s, t]
            acc = 0.0
            for i in range(eb.size):
                e = eb[i] * c
                r = 1.0 / (1.0 + e)
                h = wa[i] * wb[i] * e * r * r
                acc += h
                a[i] += gst * h
            gj[s] += gst * acc
            gk[t] += gst * acc


@njit(cache=True, nogil=True)
def rows_tables(XT, pairs, ks, offsets, P, q):
    """Every pair's table under a prior of rows: q[o_p + x_j·k_k + x_k] += P[i] for each row i (XT (D,
    rows) its states, pairs (p, 2) the (j, k) released, o_p = offsets[p] past the previous pairs' cells;
    q (all pairs' cells, C), P (rows, C) the rows' class probabilities)."""
    for p in range(pairs.shape[0]):
        j, k = pairs[p, 0], pairs[p, 1]
        kk, o = ks[k], offsets[p]
        for i in range(XT.shape[1]):
            c = o + XT[j, i] * kk + XT[k, i]
            for r in range(P.shape[1]):
                q[c, r] += P[i, r]


@njit(cache=True, nogil=True)
def rows_gather(XT, pairs, ks, offsets, G, a):
    """``rows_tables``' adjoint: a[i] += Σ_p G[o_p + x_j·k_k + x_k] (a (rows, C), G (all pairs' cells, C))."""
    for p in range(pairs.shape[0]):
        j, k = pairs[p, 0], pairs[p, 1]
        kk, o = ks[k], offsets[p]
        for i in range(XT.shape[1]):
            c = o + XT[j, i] * kk + XT[k, i]
            for r in range(G.shape[1]):
                a[i, r] += G[c, r]
