"""Per-report moments of the frequency oracles (k-RR, OUE, OLH): what one report's debiased
indicators contribute to the variance of a pair-table cell or of the class prior. The formulas and
their derivation are in ``_planner``'s module doc ("Variance formulas"); the tests check each against
Monte Carlo."""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..mechanisms import DiscreteMechanism, LocalHashing, RandomizedResponse, UnaryEncoding

#: OLH class-prior moments are enumerated over every seed when n_seeds·k_j·C ≤ this (k_j·C ≲ 370)
_OLH_ENUMERATION = 5 * 10**7


def support_probabilities(oracle: DiscreteMechanism) -> tuple[float, float]:
    """(α, β): P(the report supports u | v) for u = v and for u ≠ v (RR keep/other, OUE p/q, OLH p/q*)."""
    if isinstance(oracle, RandomizedResponse):
        return oracle.keep_prob, oracle.other_prob
    if isinstance(oracle, UnaryEncoding):
        return oracle.p, oracle.q
    if isinstance(oracle, LocalHashing):
        return oracle.p, oracle.q_star
    raise ValidationError(
        "oracle", f"must be RandomizedResponse, UnaryEncoding or LocalHashing, got {type(oracle).__name__}"
    )


def debiased_second_moments(oracle: DiscreteMechanism) -> tuple[float, float]:
    """(g₀, g₁): E[û_u² | v] for u ≠ v and u = v, û_u = (b_u − β)/(α − β) the debiased indicator."""
    a, b = support_probabilities(oracle)
    d2 = (a - b) ** 2
    return b * (1 - b) / d2, 1.0 + a * (1 - a) / d2


def paired_cell_variance(oracle: DiscreteMechanism, table: np.ndarray) -> np.ndarray:
    """(k, C): the variance of ONE paired report's unbiased estimate of each cell P(x_j = s, y = c),
    records drawn from ``table`` (k, C); the pair (s, c) is the oracle's value s·C + c."""
    g0, g1 = debiased_second_moments(oracle)
    return g0 + (g1 - g0) * table - table**2


def split_cell_variance(attribute: DiscreteMechanism, label: DiscreteMechanism, table: np.ndarray) -> np.ndarray:
    """(k, C): the variance of ONE split report's unbiased estimate û_A[s]·û_L[c] of P(x_j = s, y = c)
    (the joint debiasing of the attribute's and the label's reports), records drawn from ``table``."""
    k, C = table.shape
    a0, a1 = debiased_second_moments(attribute)
    l0, l1 = debiased_second_moments(label)
    GA = np.full((k, k), a0) + (a1 - a0) * np.eye(k)
    GL = np.full((C, C), l0) + (l1 - l0) * np.eye(C)
    return GA @ table @ GL.T - table**2


def label_prior_variance(label: DiscreteMechanism, rho: np.ndarray) -> np.ndarray:
    """(C,): the variance of one label report's unbiased estimate of each P(y = c), classes from ρ."""
    g0, g1 = debiased_second_moments(label)
    return g0 + (g1 - g0) * rho - rho**2


def paired_column_second_moment(oracle: DiscreteMechanism, table: np.ndarray) -> tuple[np.ndarray, bool]:
    """(C,) E[Z_c²] with Z_c = Σ_s û_{(s,c)} one paired report's estimate of P(y = c), records drawn from
    ``table`` (k, C); and whether it is exact (False: OLH beyond the enumeration limit)."""
    k, C = table.shape
    a, b = support_probabilities(oracle)
    g0, g1 = debiased_second_moments(oracle)
    pi = table.reshape(-1)  # pair value v = s·C + c
    K = pi.size
    col = np.arange(K) % C  # the class of each pair value
    in_col = col[None, :] == np.arange(C)[:, None]  # (C, K): v in column c
    # Σ_{u∈S_c} E[b_u | v] = kβ + (α − β)·1{v ∈ S_c}
    first = k * b + (a - b) * in_col
    B2, exact = _cross_support(oracle, k, C, a, b)  # (C, K): E[Σ_{u≠w ∈ S_c} b_u b_w | v]
    cross = (B2 - 2 * b * (k - 1) * first + k * (k - 1) * b * b) / (a - b) ** 2
    diag = k * g0 + (g1 - g0) * in_col
    return (diag + cross) @ pi, exact


def _cross_support(oracle: DiscreteMechanism, k: int, C: int, a: float, b: float) -> tuple[np.ndarray, bool]:
    K = k * C
    in_col = (np.arange(K) % C)[None, :] == np.arange(C)[:, None]
    if isinstance(oracle, RandomizedResponse):  # one value is reported: b_u b_w = 0 for u ≠ w
        return np.zeros((C, K)), True
    if isinstance(oracle, UnaryEncoding):  # independent bits: (Σ μ_u)² − Σ μ_u²
        s1 = k * b + (a - b) * in_col
        s2 = k * b * b + (a * a - b * b) * in_col
        return s1**2 - s2, True
    # OLH: Σ_{u≠w∈S} b_u b_w = N(Y)² − N(Y), N(y) = #{u ∈ S: H(u) = y}; given the seed and v,
    # Y = H(v) with probability p, else each other bucket with probability `other`.
    o: LocalHashing = oracle  # type: ignore[assignment]
    p, other, g = o.p, o.other, o.g
    exact = o.n_seeds * K <= _OLH_ENUMERATION
    if exact:
        seeds_all = np.arange(o.n_seeds)
    else:  # a fixed uniform subset of the seeds: an unbiased estimate of the seed average
        size = max(1000, _OLH_ENUMERATION // K)
        seeds_all = np.sort(np.random.default_rng(0).choice(o.n_seeds, size=min(size, o.n_seeds), replace=False))
    acc = np.zeros((C, K))
    states = np.arange(K)
    chunk = max(1, 2 * 10**6 // K)
    for start in range(0, seeds_all.size, chunk):
        seeds = seeds_all[start : start + chunk]
        h = o.hash(seeds[:, None], states[None, :])  # (B, K)
        B = seeds.size
        rows = np.arange(B)[:, None]
        for cc in range(C):
            hS = h[:, cc::C]  # the k values of column c: v = s·C + c
            N = np.bincount((hS + g * rows).ravel(), minlength=B * g).reshape(B, g)
            sumN2 = (N.astype(float) ** 2).sum(axis=1)
            Nv = N[rows, h].astype(float)  # (B, K): N(H(v))
            acc[cc] += (other * (sumN2 - k))[:, None].sum(axis=0) + (p - other) * (Nv**2 - Nv).sum(axis=0)
    return acc / seeds_all.size, exact


#: OLH set-sum moments (``set_sums_second_moments``) average every seed when n_seeds·K ≤ this, else a
#: fixed uniform subset of the seeds this budget affords (at least ``_OLH_MIN_SEEDS``)
_OLH_SET_ENUMERATION = 4 * 10**5
_OLH_MIN_SEEDS = 128


def set_sums_second_moments(oracle: DiscreteMechanism, pi: np.ndarray, families: list) -> tuple[list, bool]:
    """Per family of disjoint value sets (``families``: each a (K,) array naming every value's set), the
    (n_sets,) second moments E[Z_S²] of one report's set sums Z_S = Σ_{u∈S} û_u, values v ~ ``pi`` (K,);
    and whether they are exact (False: an OLH seed subset). As ``paired_column_second_moment`` for any
    sets: E Z_S² = Σ_v π_v [|S| g₀ + (g₁ − g₀)·1{v ∈ S}] + (E B₂ − 2β(|S| − 1)(|S|β + (α − β)π(S))
    + |S|(|S| − 1)β²)/(α − β)², B₂ = Σ_{u≠w∈S} b_u b_w: 0 for RR, OUE's independent bits in closed
    form, and for OLH, seed by seed, other·Σ_y f(y) + (p − other)·Σ_y f(y)Π(y) with f(y) = N_S(y)² − N_S(y),
    N_S(y) the values of S hashed to y and Π(y) the mass of π hashed to y."""
    a, b = support_probabilities(oracle)
    g0, g1 = debiased_second_moments(oracle)
    K = pi.size
    sizes = [np.bincount(f, minlength=int(f.max()) + 1).astype(float) for f in families]
    mass = [np.bincount(f, weights=pi, minlength=s.size) for f, s in zip(families, sizes)]
    exact = True
    if isinstance(oracle, RandomizedResponse):
        B2 = [np.zeros_like(s) for s in sizes]
    elif isinstance(oracle, UnaryEncoding):  # (Σ μ_u)² − Σ μ_u² given v, averaged over v ~ π
        B2 = [
            (1 - m) * (s * b) ** 2 + m * (s * b + a - b) ** 2 - (s * b * b + (a * a - b * b) * m)
            for s, m in zip(sizes, mass)
        ]
    else:
        o: LocalHashing = oracle  # type: ignore[assignment]
        if o.n_seeds * K <= _OLH_SET_ENUMERATION:
            seeds = np.arange(o.n_seeds)
        else:  # a fixed uniform subset of the seeds: an unbiased estimate of the seed average
            size = min(o.n_seeds, max(_OLH_MIN_SEEDS, _OLH_SET_ENUMERATION // K))
            seeds = np.sort(np.random.default_rng(0).choice(o.n_seeds, size=size, replace=False))
            exact = False
        h = o.hash(seeds[:, None], np.arange(K)[None, :])  # (B, K)
        B, g = seeds.size, o.g
        rows = np.arange(B)[:, None]
        Pi = np.bincount((h + g * rows).ravel(), weights=np.broadcast_to(pi, h.shape).ravel(), minlength=B * g)
        Pi = Pi.reshape(B, g)
        B2 = []
        for f, s in zip(families, sizes):
            N = np.bincount(((rows * s.size + f[None, :]) * g + h).ravel(), minlength=B * s.size * g)
            N = N.reshape(B, s.size, g).astype(float)
            fy = N * N - N
            B2.append((o.other * fy.sum(axis=2) + (o.p - o.other) * np.einsum("bsg,bg->bs", fy, Pi)).mean(axis=0))
    out = []
    for s, m, b2 in zip(sizes, mass, B2):
        diag = s * g0 + (g1 - g0) * m
        out.append(diag + (b2 - 2 * b * (s - 1) * (s * b + (a - b) * m) + s * (s - 1) * b * b) / (a - b) ** 2)
    return out, exact
