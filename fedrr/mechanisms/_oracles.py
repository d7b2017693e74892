"""Choosing a frequency oracle for a categorical attribute: k-ary randomised response, optimized
unary encoding or optimized local hashing (Wang, Blocki, Li & Jha, USENIX Security 2017, §5).

Wang et al. compare the oracles by Var*, the variance of the frequency estimate of a value whose
true frequency is ≈ 0 (their eq. for Var* per report): RR (e^ε + k − 2)/(e^ε − 1)², OUE and OLH
(with an ideal hash, collision probability 1/g, g = e^ε + 1) 4e^ε/(e^ε − 1)². Hence their rule:
RR when k < 3e^ε + 2, otherwise OUE (or OLH, which has the same variance and a shorter report).

``rule="variance"`` (default) applies the same criterion to the *exact* Var* of the concrete
mechanisms fedrr builds — realised probabilities, integer g, and the exact collision probability
of the ((a·x + b) mod P) mod g family, which is below 1/g — and picks the smallest (ties: RR, then
OUE, then OLH). Because that family collides less often than an ideal hash, OLH's Var* is below
OUE's almost everywhere and below RR's for some k < 3e^ε + 2 (e.g. ε = 1, k = 9: 2.93 vs RR's
3.29, OUE 3.68); tests/test_oracles.py checks the choice against every candidate's
``frequency_variance``. ``rule="wang"`` is the paper's rule verbatim, with OLH instead of OUE when
k > 52 (a unary release is packed into one double).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .._validation import check_int, check_positive
from ..errors import ValidationError
from ._discrete import MAX_STATES, DiscreteMechanism, RandomizedResponse
from ._hashing import LocalHashing
from ._unary import MAX_UNARY_STATES, UnaryEncoding

RULES = ("variance", "wang")


def support_probabilities(mech: DiscreteMechanism) -> tuple[float, float, bool]:
    """(a, b, exclusive) of a pure frequency oracle: a = P(report supports s | x = s), b = the same for
    x ≠ s, and whether a report supports exactly one value (RR) or supports values independently
    given x (OUE's bits; OLH's hashes of distinct values, for a pairwise-independent family)."""
    if isinstance(mech, RandomizedResponse):
        return mech.keep_prob, mech.other_prob, True
    if isinstance(mech, UnaryEncoding):
        return mech.p, mech.q, False
    if isinstance(mech, LocalHashing):
        return mech.p, mech.q_star, False
    raise ValidationError(
        "mechanism", f"must be RandomizedResponse, UnaryEncoding or LocalHashing, got {type(mech).__name__}"
    )


def rare_value_variance(mech: DiscreteMechanism) -> float:
    """Exact Var* of one report: the variance of the unbiased frequency estimate of a value with true
    frequency 0, b(1 − b)/(a − b)², a = P(report supports s | x = s), b = the same for x ≠ s."""
    a, b, _ = support_probabilities(mech)
    return b * (1 - b) / (a - b) ** 2


def unbiased_onehot_covariance(mech: DiscreteMechanism, pi) -> np.ndarray:
    """(k, k): the covariance of one report's unbiased one-hot estimate (``unbiased_onehot``,
    (1{supports s} − b)/(a − b)) when x is drawn from ``pi``: (E[1_s 1_t] − b μ_s − b μ_t + b²)/(a − b)²
    − π_s π_t, μ_s = E[1_s]. Given x the support indicators have means a (s = x) or b, and are
    exclusive for RR (E[1_s 1_t] = 0 for s ≠ t) and independent for OUE's bits. OLH's are neither: two
    values are supported together when their hashes collide, and the family's three-way collisions
    are not those of an ideal hash, so E[1_s 1_t] is averaged over the hash seeds: all P(P − 1) of
    them when there are at most 2¹⁶ or P(P − 1)·k² ≤ 2²⁷, else a fixed sample of 2¹⁶ distinct seeds
    (then it is a Monte-Carlo value, its diagonal too). Exact, the diagonal is
    ``frequency_variance(1, pi)``. E[1_s 1_t] is linear in pi, so while seeds × k³ ≤ ``COLLISION_BUDGET``
    (k ≤ 84) the seeds' collision tensors are built once per hash family (0.4 s at k 82) and each pi
    costs k³ (under a millisecond); beyond it each call sums over the seeds, seeds × k²."""
    a, b, exclusive = support_probabilities(mech)
    pi = np.asarray(pi, dtype=float)
    k = pi.size
    if isinstance(mech, LocalHashing):
        M = _hashing_support_moments(mech, pi)
        mu = np.diag(M).copy()
    else:
        mu = b + (a - b) * pi
        # off the diagonal: 0 (RR), or Σ_x π_x P_s(x) P_t(x) = b² + (a − b) b (π_s + π_t) (OUE)
        off = 0.0 if exclusive else b * b + (a - b) * b * (pi[:, None] + pi[None, :])
        M = np.where(np.eye(k, dtype=bool), mu[:, None], off)
    return (M - b * mu[:, None] - b * mu[None, :] + b * b) / (a - b) ** 2 - np.outer(pi, pi)


#: the largest seeds·k³ for which OLH's collision tensors are built and kept (``_hashing_collisions``)
COLLISION_BUDGET = 2**32
_COLLISIONS: dict = {}
_COLLISIONS_LOCK = threading.Lock()  # a CV's fold fits run on threads


def _all_hashing_seeds(mech: LocalHashing) -> bool:
    """Whether ``unbiased_onehot_covariance`` averages over every seed (else a fixed sample of 2¹⁶)."""
    return mech.n_seeds <= 2**16 or mech.n_seeds * mech.k**2 <= 2**27


def _hashing_seeds(mech: LocalHashing) -> np.ndarray:
    """The seeds ``unbiased_onehot_covariance`` averages over: all, or a fixed sample of 2¹⁶."""
    if _all_hashing_seeds(mech):
        return np.arange(mech.n_seeds)
    return np.random.default_rng(0).choice(mech.n_seeds, size=2**16, replace=False)


def onehot_covariance_is_cheap(mech: DiscreteMechanism) -> bool:
    """Whether ``unbiased_onehot_covariance`` costs at most k³ at any pi once its first call has built
    the collision tensors (closed form for RR and OUE; OLH within ``COLLISION_BUDGET``), rather than
    seeds × k² a call."""
    if not isinstance(mech, LocalHashing):
        return True
    n_seeds = mech.n_seeds if _all_hashing_seeds(mech) else 2**16
    return n_seeds * mech.k**3 <= COLLISION_BUDGET


def _hashing_collisions(mech: LocalHashing) -> tuple[np.ndarray, np.ndarray]:
    """(P2, P3): over the seeds, P2[s, t] = P(H(s) = H(t)) and P3[s, t, x] = P(H(s) = H(t) = H(x)),
    built once per hash family (k, g, P) and kept: they make the support moments linear in pi."""
    key = (mech.k, mech.g, mech.prime)
    hit = _COLLISIONS.get(key)
    if hit is None:
        seeds, k = _hashing_seeds(mech), mech.k
        H = mech.hash(seeds[:, None], np.arange(k))  # (S, k)
        P3 = np.empty((k, k, k))
        for s in range(k):
            A = (H == H[:, s : s + 1]).astype(float)  # (S, k): the seeds where t collides with s
            P3[s] = A.T @ A / seeds.size
        hit = (np.diagonal(P3, axis1=1, axis2=2).copy(), P3)  # P2[s, t] = P3[s, t, t]
        with _COLLISIONS_LOCK:
            if len(_COLLISIONS) >= 16:  # at most 16 families of ≤ 84 values (≤ 72 MB)
                _COLLISIONS.pop(next(iter(_COLLISIONS)))
            _COLLISIONS[key] = hit
    return hit


def _hashing_support_moments(mech: LocalHashing, pi: np.ndarray) -> np.ndarray:
    """E[1{H(s) = y} 1{H(t) = y}] of OLH with x ~ pi: for one seed, both are supported iff H(s) = H(t)
    = y, and y = H(s) with probability p·Q + other·(1 − Q), Q the mass of pi hashed into s's bucket.
    Linear in pi: other·P2 + (p − other)·P3 pi over the collision tensors when they are affordable
    (``onehot_covariance_is_cheap``), else summed over the seeds for this pi."""
    k = pi.size
    if onehot_covariance_is_cheap(mech):
        P2, P3 = _hashing_collisions(mech)
        return mech.other * P2 + (mech.p - mech.other) * (P3 @ pi)
    seeds = _hashing_seeds(mech)
    M = np.zeros((k, k))
    step = max(1, 2**22 // (k * k))
    for lo in range(0, seeds.size, step):
        H = mech.hash(seeds[lo : lo + step, None], np.arange(k))  # (S, k)
        Q = np.zeros((H.shape[0], mech.g))
        np.add.at(Q, (np.repeat(np.arange(H.shape[0]), k), H.ravel()), np.tile(pi, H.shape[0]))
        Qs = np.take_along_axis(Q, H, axis=1)  # (S, k): the mass of pi in s's bucket
        W = mech.p * Qs + mech.other * (1.0 - Qs)  # P(y = H(s))
        M += np.einsum("sij,si->ij", (H[:, :, None] == H[:, None, :]).astype(float), W)
    return M / seeds.size


def candidates(k: int, epsilon: float) -> list[DiscreteMechanism]:
    """Every oracle that can be built for (k, ε), in tie-break order RR, OUE, OLH."""
    out: list[DiscreteMechanism] = [RandomizedResponse(k, epsilon=epsilon)]
    for make in (lambda: UnaryEncoding(k, epsilon), lambda: LocalHashing(k, epsilon)):
        try:
            out.append(make())
        except ValidationError:  # k > 52 for OUE; ε or k outside what OLH can represent
            pass
    return out


def frequency_oracle(k: int, epsilon: float, *, rule: str = "variance") -> DiscreteMechanism:
    """The frequency oracle for a k-state attribute at ε with the smallest variance for rare values
    (``rule="variance"``), or by Wang et al.'s thresholds (``rule="wang"``); see the module doc."""
    k = check_int("k", k, minimum=2, maximum=MAX_STATES)
    eps = check_positive("epsilon", epsilon)
    if rule not in RULES:
        raise ValidationError("rule", f"must be one of {RULES}, got {rule!r}")
    if rule == "wang":
        if k < 3 * math.exp(eps) + 2:
            return RandomizedResponse(k, epsilon=eps)
        return UnaryEncoding(k, eps) if k <= MAX_UNARY_STATES else LocalHashing(k, eps)
    cands = candidates(k, eps)
    variances = [rare_value_variance(m) for m in cands]
    return cands[min(range(len(cands)), key=lambda i: (variances[i], i))]
