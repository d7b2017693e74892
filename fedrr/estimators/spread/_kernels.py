"""Compiled (numba) E-step of spread-EM for discrete columns released by k-ary randomised response
(or not released at all): one pass per record draws proposals from ρ(x | x̃) (the exact posterior
of each column under the prior), runs the independence-Metropolis chain and accumulates the
prior's counts. Uniforms come from a counter-based SplitMix64 stream keyed by the caller (element i
of a call is the i-th output of SplitMix64 seeded with ``key``), so a draw depends only on (key,
position), never on who runs the shard; the kernel releases the GIL (nogil), so shards run in
threads. (Generating them in the kernel, instead of one numpy array per call, saves a sixth of the
E-step's time and 13 MB of memory traffic per MNIST-size shard call.)

A draw from ρ(x_d | x̃_d) ∝ π_d(x)·(q if x = x̃ else r) takes one uniform. For q ≥ r (flip <
(k−1)/k, the usual case) it is the mixture "x̃ with probability a = (q−r)π(x̃)/(r + (q−r)π(x̃)),
else x ~ π_d", the latter by Walker's alias method: O(1) and branch-free. For q < r the mixture
weights would be negative, so those columns use the guide-table inverse CDF of π_d with x̃'s mass
scaled down (``_draw``). An attribute the client did not release (x̃ = −1) is drawn from π_d.
Logits are sums of table lookups W[r, d, x_d] (any encoding of the states). Also here: exact draws
from the naive-Bayes prior's posterior (``mixture_draw``) and the one-hot decode (``onehot_fill``).
The direct fit's kernels are ``_direct_kernels``."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def rr_tables(probs, q, r):
    """Sampling tables per column d and released value x̃: stay[d, x̃] = a (see module doc),
    jump[d, x̃] = K/(1 − a), and Walker alias tables (P, A) of π_d (probs rows, any scale).
    (``error_model="numpy"``: a division by zero gives inf/NaN instead of a check per division,
    so the per-state loop vectorises; the selects below discard those values, as the branches did.)"""
    D, K = probs.shape
    stay = np.empty((D, K))
    jump = np.empty((D, K))
    P = np.ones((D, K))
    A = np.empty((D, K), np.int32)
    small = np.empty(K, np.int64)
    large = np.empty(K, np.int64)
    sc = np.empty(K)
    for d in range(D):
        tot = 0.0
        for k in range(K):
            tot += probs[d, k]
        qd, rd = q[d], r[d]
        rr = qd >= rd
        for k in range(K):
            A[d, k] = k
            pi = probs[d, k] / tot
            den = rd + (qd - rd) * pi  # 0 only for a state of prior mass 0 in a non-RR column (unused)
            a = (qd - rd) * pi / den
            ok = rr and den > 0.0
            stay[d, k] = a if ok else 0.0
            jump[d, k] = K / (1.0 - a) if ok and a < 1.0 else 0.0
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
        # (the current large bucket's scaled mass stays in a register, written back when it turns
        # small: the same sums in the same order as updating sc[l] in place, without a store and
        # reload per step on the loop's one dependency chain)
        if nl > 0:
            l = large[nl - 1]
            scl = sc[l]
            while ns > 0:
                ns -= 1
                s = small[ns]
                P[d, s] = sc[s]
                A[d, s] = l
                scl = (scl + sc[s]) - 1.0
                if scl < 1.0:
                    sc[l] = scl
                    nl -= 1
                    small[ns] = l
                    ns += 1
                    if nl == 0:
                        break
                    l = large[nl - 1]
                    scl = sc[l]
        # leftovers (rounding) keep P = 1, A = self
    return stay, jump, P, A


_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0


@njit(cache=True, inline="always")
def _uniform(key, i):
    """The i-th output (i ≥ 0) of SplitMix64 seeded with ``key``, as a double in [0, 1) on the 2⁻⁵³
    grid (Steele, Lea & Flood 2014: state key + (i+1)·γ through the 'mix13' finaliser)."""
    z = key + (np.uint64(i) + np.uint64(1)) * _GAMMA
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    z = z ^ (z >> _S31)
    return float(z >> _S11) * _TWO_M53


def uniforms(key: int, start: int, n: int) -> np.ndarray:
    """``_uniform(key, i)`` for i in [start, start + n), in numpy (tests and reference code)."""
    with np.errstate(over="ignore"):
        i = np.arange(start, start + n, dtype=np.uint64) + np.uint64(1)
        z = np.uint64(key) + i * _GAMMA
        z = (z ^ (z >> _S30)) * _M1
        z = (z ^ (z >> _S27)) * _M2
        z = z ^ (z >> _S31)
    return (z >> _S11).astype(np.float64) * _TWO_M53


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
    j = min(max(int(t), 0), K - 1)
    pj = P[d, j]  # both loaded unconditionally: the selects compile without branches
    aj = A[d, j]
    y = j if t - j < pj else aj
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
    key,
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
    pair_cols,
    pair_off,
    pair_tab,
):
    """S steps of one chain for a block of b records (column-major: records innermost).

    ``key`` (uint64) seeds the call's uniforms: proposal (s, d, n) takes ``_uniform(key, (s·D + d)·b
    + n)`` (s < S' = S, or S + 1 to initialise the chain), acceptance (s, n) takes ``_uniform(key,
    S'·D·b + s·b + n)``. xtT (D, b) released states, −1 where not released; stateT (D, b) the
    chain's state (read only); W (Rn, D, K) logit contributions; E (D, K) float32 model input of
    each state (scalar encodings) — if E has no rows, Zt is not written, nor statesT if it has
    none. Outputs: Zt (D, S·b) model inputs of the kept states (column s·b + n), statesT (D, S·b)
    the kept states, Rout (S, b, C) responsibilities, counts (D, K) += kept states / S, new_stateT
    (D, b). Returns the number of accepted proposals. The states (stateT, new_stateT and the
    proposals, which take new_stateT's type) are int16 where k allows: the same values, half the
    memory traffic of int32.

    Columns with ``row_cols[d]`` come from any other discrete oracle: xtT holds the row of ``lik``
    (likelihood p(x̃ | x = s), s < kcol[d]) of the entry's release, and the proposal is drawn from
    ρ(x) ∝ probs[d, x]·lik[row, x] in O(k) (``_draw_rows``).

    Paired releases (``_paired``): record n's label term is yterm[n] plus, for each of its
    released pairs t (``pair_cols[n, t]`` = column d, −1 for none), pair_tab[pair_off[n, t] + x_d·C + c]
    at the state x being scored; ``pair_cols`` with no columns leaves yterm as it is."""
    D, b = xtT.shape
    Sp = S if has_state else S + 1
    K = stay.shape[1]
    C = yterm.shape[1]
    Rn = W.shape[0]
    write_z = E.shape[0] > 0
    write_states = statesT.shape[0] > 0
    props = np.empty((Sp, D, b), new_stateT.dtype)  # int16 where k allows: half the memory traffic
    tt = np.empty(b)  # the moving records' alias coordinates (``q >= r`` columns)
    moved = np.empty(b, np.int64)
    Kf = float(K)
    z = np.empty((Sp, Rn, b))
    zs = np.empty((Rn, b))
    for k in range(Rn):
        z[:, k, :] = intercept[k]
        zs[k, :] = intercept[k]
    for s in range(Sp):
        for d in range(D):
            base = (s * D + d) * b
            xr = xtT[d]
            pr = props[s, d]
            if row_cols[d]:
                for n in range(b):
                    x = xr[n]
                    u = _uniform(key, base + n)
                    pr[n] = _draw_prior(d, u, P, A, K) if x < 0 else _draw_rows(d, x, u, probs, lik, kcol[d])
            elif q[d] >= r[d]:
                # ``_draw_alias`` in two passes: x̃ is kept with probability a (u < a); only the
                # records that move (their index compacted into ``moved``) get the alias-table draw.
                # The same states as one pass, without its unpredictable branch per record. An
                # attribute not released (x̃ = −1) is a draw from π_d: the alias draw with a = 0 and
                # jump K, as ``_draw_prior``.
                st = stay[d]
                jp = jump[d]
                m = 0
                for n in range(b):
                    x = xr[n]
                    u = _uniform(key, base + n)
                    rel = x >= 0
                    xs = x if rel else 0
                    a = st[xs] if rel else 0.0
                    jk = jp[xs] if rel else Kf
                    pr[n] = x
                    tt[m] = (u - a) * jk  # U(0, K) given u >= a
                    moved[m] = n
                    m += u >= a
                Pd = P[d]
                Ad = A[d]
                for i in range(m):
                    t = tt[i]
                    j = min(max(int(t), 0), K - 1)
                    pj = Pd[j]
                    aj = Ad[j]
                    pr[moved[i]] = j if t - j < pj else aj
            else:
                for n in range(b):
                    x = xr[n]
                    u = _uniform(key, base + n)
                    pr[n] = _draw_prior(d, u, P, A, K) if x < 0 else _draw(d, x, u, cdf, guide, q, r, K)
            for k in range(Rn):
                Wkd = W[k, d]
                zk = z[s, k]
                for n in range(b):
                    zk[n] += Wkd[pr[n]]
                if s == 0 and has_state:  # the current states' logits, in the same pass over d
                    zsk = zs[k]
                    sd = stateT[d]
                    for n in range(b):
                        zsk[n] += Wkd[sd[n]]
    # the Metropolis chain per record; src[s, n] = proposal index held after step s (-1: old state)
    src = np.empty((S, b), np.int64)
    off = 0 if has_state else 1
    acc_base = Sp * D * b
    resp = np.empty(C)
    tmp = np.empty(C)
    zn = np.empty(Rn)
    yn = np.empty(C)
    M = pair_cols.shape[1]
    accepted = 0
    for n in range(b):
        cur = -1
        for k in range(Rn):
            zn[k] = zs[k, n] if has_state else z[0, k, n]
        if not has_state:
            cur = 0
        for c in range(C):
            yn[c] = yterm[n, c]
        for t in range(M):
            d = pair_cols[n, t]
            if d >= 0:
                o = pair_off[n, t] + (stateT[d, n] if has_state else props[0, d, n]) * C
                for c in range(C):
                    yn[c] += pair_tab[o + c]
        lg_cur = _log_g(zn, yn, Rn, C, resp)
        for s in range(S):
            for k in range(Rn):
                zn[k] = z[s + off, k, n]
            for c in range(C):
                yn[c] = yterm[n, c]
            for t in range(M):
                d = pair_cols[n, t]
                if d >= 0:
                    o = pair_off[n, t] + props[s + off, d, n] * C
                    for c in range(C):
                        yn[c] += pair_tab[o + c]
            lg_prop = _log_g(zn, yn, Rn, C, tmp)
            if np.log(_uniform(key, acc_base + s * b + n)) < lg_prop - lg_cur:
                accepted += 1
                cur = s + off
                lg_cur = lg_prop
                for c in range(C):
                    resp[c] = tmp[c]
            src[s, n] = cur
            for c in range(C):
                Rout[s, n, c] = resp[c]
    # the kept states, column by column; counts through 4 interleaved integer histograms (runs of
    # one state, such as MNIST's background, would otherwise wait on one memory cell)
    w = 1.0 / S
    cur_d = np.empty(b, new_stateT.dtype)
    hist = np.zeros((4, K), np.int64)
    n4 = b - b % 4
    for d in range(D):
        hist[:] = 0
        if has_state:
            cur_d[:] = stateT[d]
        else:
            cur_d[:] = props[0, d]
        for s in range(S):
            pd = props[s + off, d]
            sr = src[s]
            for n in range(b):
                if sr[n] == s + off:
                    cur_d[n] = pd[n]
            if write_states:
                statesT[d, s * b : (s + 1) * b] = cur_d
            if write_z:
                Ed = E[d]
                zr = Zt[d, s * b : (s + 1) * b]
                for n in range(b):
                    zr[n] = Ed[cur_d[n]]
            for n in range(0, n4, 4):
                hist[0, cur_d[n]] += 1
                hist[1, cur_d[n + 1]] += 1
                hist[2, cur_d[n + 2]] += 1
                hist[3, cur_d[n + 3]] += 1
            for n in range(n4, b):
                hist[0, cur_d[n]] += 1
        for k in range(K):
            counts[d, k] += w * (hist[0, k] + hist[1, k] + hist[2, k] + hist[3, k])
        new_stateT[d] = cur_d
    return accepted


@njit(cache=True, inline="always")
def _excluding(x, u, cdf, guide, k):
    """x' ~ π(x' | x' ≠ x) by inverse CDF on one column's normalised CDF with x's mass cut out, from
    the uniform u: ``RRPosterior._sample_excluding``'s arithmetic (so the same state), its search
    started by the guide table."""
    hi = cdf[x]
    lo = cdf[x - 1] if x > 0 else 0.0
    mass = hi - lo
    rest = 1.0 - mass
    w = u * rest
    if not w < lo:
        w = w + mass
    j = int(w * k)
    s = guide[j if j < k - 1 else k - 1]
    while cdf[s] <= w and s < k - 1:
        s += 1
    return s if rest > 0 else x


@njit(cache=True, nogil=True)
def rr_moves(xt, pi, q, r, u, moved):
    """Which draws of a randomised-response column's posterior leave the released state x̃ (u ≥
    P(x = x̃ | x̃) = π(x̃) q / (π(x̃) q + (1 − π(x̃)) r), the arithmetic of ``_estep._propose_rr``), into
    moved (S, n); their number."""
    S, n = u.shape
    count = 0
    for i in range(n):
        p = pi[xt[i]]
        stay = p * q / (p * q + (1.0 - p) * r)
        for s in range(S):
            m = u[s, i] >= stay
            moved[s, i] = m
            count += m
    return count


@njit(cache=True, nogil=True)
def rr_fill(xt, moved, v, cdf, guide, rows, out):
    """out[s, rows[i]] = x̃_i, or for the moved draws (in row-major order of moved, one uniform of v
    each) a state ≠ x̃_i (``_excluding``): one column of ``_estep._propose_rr``."""
    S, n = moved.shape
    k = cdf.shape[0]
    t = 0
    for s in range(S):
        for i in range(n):
            x = xt[i]
            if moved[s, i]:
                x = _excluding(x, v[t], cdf, guide, k)
                t += 1
            out[s, rows[i]] = x


@njit(cache=True, nogil=True)
def scatter_columns(cols_first, cols, out):
    """out[s, n, cols[j]] = cols_first[j, s, n]: draws made column by column (contiguous per column)
    put into the record-major samples, a block of records at a time (the block stays in cache)."""
    J, S, b = cols_first.shape
    B = 16
    for s in range(S):
        for n0 in range(0, b, B):
            n1 = min(n0 + B, b)
            for j in range(J):
                c = cols[j]
                src = cols_first[j, s]
                for n in range(n0, n1):
                    out[s, n, c] = src[n]


@njit(cache=True, nogil=True)
def logits_from_columns(drawn, W, intercept, out):
    """out[s, n, r] = b_r + Σ_d W[r, d, drawn[d, s, n]] for column-major states (D, S, b): the sums
    of ``logits_lookup``, in the same order over d, read column by column."""
    D, S, b = drawn.shape
    Rn = W.shape[0]
    for k in range(Rn):
        for s in range(S):
            for n in range(b):
                out[s, n, k] = intercept[k]
        for d in range(D):
            Wkd = W[k, d]
            for s in range(S):
                src = drawn[d, s]
                for n in range(b):
                    out[s, n, k] += Wkd[src[n]]


@njit(cache=True, nogil=True)
def logits_lookup(xs, W, intercept, out):
    """z[n, r] = b_r + Σ_d W[r, d, x_nd] for all-discrete states xs (N, D) and the per-state logit
    table W (``Design.logit_table``): the model's logits without decoding x into model inputs."""
    N, D = xs.shape
    Rn = W.shape[0]
    for n in range(N):
        x = xs[n]
        for k in range(Rn):
            acc = intercept[k]
            Wk = W[k]
            for d in range(D):
                acc += Wk[d, int(x[d])]
            out[n, k] = acc


@njit(cache=True, nogil=True)
def mixture_draw(u, cls_cdf, base, kd, relidx, relcdf, out):
    """Draws from a latent-class prior's posterior (``_priors._mixture.MixtureSampler``), by the
    uniforms u (S, n, D + 1): the class is the number of entries of the record's class CDF
    (cls_cdf (n, C)) that are <= u[s, i, 0] (at most C − 1), then state d the number of entries of
    its CDF <= u[s, i, d + 1] (at most kd[d] − 1): relcdf[relidx[d, i], class] (records that
    released d; relidx −1 otherwise) or base[d, class]. The same comparisons as counting in numpy."""
    S, n = u.shape[0], u.shape[1]
    C = cls_cdf.shape[1]
    D = base.shape[0]
    for s in range(S):
        for i in range(n):
            v = u[s, i, 0]
            cnt = 0
            for c in range(C):
                if cls_cdf[i, c] <= v:
                    cnt += 1
            cl = min(cnt, C - 1)
            for d in range(D):
                k = kd[d]
                v = u[s, i, d + 1]
                r = relidx[d, i]
                cnt = 0
                if r >= 0:
                    for j in range(k):
                        if relcdf[r, cl, j] <= v:
                            cnt += 1
                else:
                    for j in range(k):
                        if base[d, cl, j] <= v:
                            cnt += 1
                out[s, i, d] = min(cnt, k - 1)


@njit(cache=True, nogil=True)
def onehot_fill(X, cols, offsets, out):
    """out[i, offsets[j] + s − 1] = 1 for s = X[i, cols[j]] > 0 (``Design.decode``, one-hot)."""
    for i in range(X.shape[0]):
        for j in range(cols.size):
            s = np.int64(X[i, cols[j]])
            if s > 0:
                out[i, offsets[j] + s - 1] = 1.0


@njit(cache=True, nogil=True)
def log_g_lookup(xs, W, intercept, yterm, pair_cols, pair_off, pair_tab, lg, resp):
    """log g(x) = log Σ_c p(c̃ | c) p_θ(c | x) and the responsibilities p(c | x, c̃) of states xs
    (N, b, D) of all-discrete records, into lg (N, b) and resp (N, b, C): the logits are sums of
    table lookups W[r, d, x_d] (``Design.logit_table``), the label term is yterm[n] (b, C) plus,
    for paired releases, each released pair's pair_tab[pair_off[n, t] + x_d·C + c] (as ``rr_chain``).
    The numpy path (decode, product, log-softmax, log-sum-exp) costs about six times as much."""
    N, b, D = xs.shape
    Rn = W.shape[0]
    C = yterm.shape[1]
    M = pair_cols.shape[1]
    zn = np.empty(Rn)
    yn = np.empty(C)
    for i in range(N):
        for n in range(b):
            x = xs[i, n]
            for k in range(Rn):
                acc = intercept[k]
                Wk = W[k]
                for d in range(D):
                    acc += Wk[d, int(x[d])]
                zn[k] = acc
            for c in range(C):
                yn[c] = yterm[n, c]
            for t in range(M):
                d = pair_cols[n, t]
                if d >= 0:
                    o = pair_off[n, t] + int(x[d]) * C
                    for c in range(C):
                        yn[c] += pair_tab[o + c]
            lg[i, n] = _log_g(zn, yn, Rn, C, resp[i, n])
