"""Optimized local hashing, OLH (Wang, Blocki, Li & Jha, USENIX Security 2017, §4.4).

The client draws a hash function uniformly at random (independently of its data), hashes its value
into g buckets, h = H(x) ∈ {0, …, g−1}, and reports h by g-ary randomised response: y = h with
probability p = e^ε/(e^ε + g − 1), otherwise one of the other g − 1 buckets uniformly. OLH takes
g = e^ε + 1 (the variance-optimal real value); here g = ⌊e^ε + ½⌋ + 1 (e^ε rounded half up, plus
one, so g ≥ 2) unless given. ε = ln(p(g − 1)/(1 − p)), the largest log-ratio over outputs: any
output whose seed separates x and x' attains it.

Hash family: H_{a,b}(x) = ((a·x + b) mod P) mod g with P the smallest prime ≥ k, a ∈ {1, …, P−1},
b ∈ {0, …, P−1}; the seed s ∈ {0, …, P(P−1) − 1} gives a = 1 + s div P, b = s mod P. For s ≠ x
(both < k ≤ P) the map (a, b) ↦ (a·x + b, a·s + b) mod P is a bijection onto the pairs of *distinct*
residues, so the collision probability c = P[H(s) = H(x)] = Σ_r n_r(n_r − 1)/(P(P − 1)), n_r the
number of residues u < P with u mod g = r, is the same for every pair but is NOT 1/g (the paper's
value for an ideal hash). Then, for s ≠ x, 1{H(s) = y} is Bernoulli(q*) with
q* = c·p + (1 − c)(1 − p)/(g − 1), and (1{H(s) = y} − q*)/(p − q*) is exactly unbiased for 1{s = x}
(q* = 1/g when c = 1/g, the paper's estimator).

Release: seed·g + y packed in one float holding an exact integer (P(P−1)·g < 2⁵³ is required).
Floating point: p is rounded *down* to the 2⁻⁵³ grid and realised exactly (see ``_grid``); the seed
and the other-bucket shift are exact bounded integers. ``epsilon`` is the ε of the rounded p.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.sparse import csr_matrix

from .._validation import check_broadcast, check_int, check_rng
from ..errors import ValidationError
from ._base import register
from ._discrete import DiscreteMechanism
from ._grid import as_packed_release, check_epsilon, check_realised_epsilon, grid_down, stated_log1p

#: releases seed·g + y must stay exact integers in a double
MAX_PACKED = 2**53


def is_prime(n: int) -> bool:
    """Deterministic Miller–Rabin, exact for n < 3.3·10²⁴ (bases: the first 13 primes)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    if n in small:
        return True
    if any(n % p == 0 for p in small):
        return False
    d, r = n - 1, 0
    while d % 2 == 0:
        d, r = d // 2, r + 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def next_prime(n: int) -> int:
    """Smallest prime ≥ n."""
    n = max(int(n), 2)
    while not is_prime(n):
        n += 1
    return n


def collision_probability(P: int, g: int) -> Fraction:
    """c = P[((a·s + b) mod P) mod g = ((a·x + b) mod P) mod g] for s ≠ x, a ~ U{1..P−1}, b ~ U{0..P−1}:
    Σ_r n_r(n_r − 1)/(P(P − 1)) with n_r = #{u < P : u mod g = r}."""
    q, rem = divmod(P, g)
    pairs = rem * (q + 1) * q + (g - rem) * q * (q - 1)
    return Fraction(pairs, P * (P - 1))


@register
class LocalHashing(DiscreteMechanism):
    """Optimized local hashing (OLH) of a categorical value with k states at ε (g buckets)."""

    kind = "local_hashing"

    def __init__(self, k: int, epsilon: float, *, g: int | None = None):
        self.k = check_int("k", k, minimum=2, maximum=MAX_PACKED)
        self._epsilon_requested = eps = check_epsilon(epsilon)
        self.g = math.floor(math.exp(eps) + 0.5) + 1 if g is None else check_int("g", g, minimum=2, maximum=MAX_PACKED)
        self.prime = next_prime(self.k) if self.k < 2**27 else 0
        if self.prime == 0 or self.prime * (self.prime - 1) * self.g >= MAX_PACKED:
            raise ValidationError(
                "k" if g is None else "g",
                f"k = {self.k} and g = {self.g} are too large together: the release seed·g + y needs "
                f"P(P−1)·g < 2^53 (P the smallest prime >= k); use a smaller g (or a coarser domain)",
            )
        self.n_seeds = self.prime * (self.prime - 1)
        # p = e^ε/(e^ε + g − 1), rounded down to the grid: exact Bernoulli, ε never increases
        self.p = grid_down(1.0 / (1.0 + (self.g - 1) * math.exp(-eps)))
        self.other = (1.0 - self.p) / (self.g - 1)
        pf = Fraction(self.p)  # exact: ε = ln(p(g − 1)/(1 − p)) = ln(1 + (p·g − 1)/(1 − p))
        realised = stated_log1p((pf * self.g - 1) / (1 - pf)) if pf * self.g > 1 else 0.0
        self._epsilon = check_realised_epsilon(eps, realised, f"local hashing with g = {self.g}")
        self.collision = collision_probability(self.prime, self.g)
        c = float(self.collision)
        #: P(1{H(s) = y} = 1 | x ≠ s), averaged over seeds and the randomised response
        self.q_star = c * self.p + (1.0 - c) * self.other

    @property
    def epsilon(self) -> float:
        """ln(p(g − 1)/(1 − p)) of the realised p: the exact worst-case log-ratio over outputs, rounded
        up (``_grid.stated_log1p``)."""
        return self._epsilon

    # --- hashing ------------------------------------------------------------------------------
    def hash(self, seed: np.ndarray, states: np.ndarray) -> np.ndarray:
        """H_seed(states) = ((a·x + b) mod P) mod g, a = 1 + seed div P, b = seed mod P (broadcast)."""
        seed = np.asarray(seed, dtype=np.int64)
        a, b = 1 + seed // self.prime, seed % self.prime
        return ((a * np.asarray(states, dtype=np.int64) + b) % self.prime) % self.g

    def split(self, x_tilde: Any, field: str = "x_tilde") -> tuple[np.ndarray, np.ndarray]:
        """(seed, y) of each packed release."""
        v = self.validate_release(x_tilde, field).astype(np.int64)
        return v // self.g, v % self.g

    # --- client -------------------------------------------------------------------------------
    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        return self.sample_valid(self.validate_input(x), rng)

    def sample_valid(self, xx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        seed = rng.integers(0, self.n_seeds, size=xx.shape)
        h = self.hash(seed, xx)
        keep = rng.random(xx.shape) < self.p
        shift = rng.integers(1, self.g, size=xx.shape) if self.g > 2 else np.ones(xx.shape, dtype=np.int64)
        y = np.where(keep, h, (h + shift) % self.g)
        return (seed * self.g + y).astype(float)

    # --- server -------------------------------------------------------------------------------
    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        return as_packed_release(field, x_tilde, float(self.n_seeds * self.g), "local-hashing releases seed·g + y")

    def _support(self, x_tilde: Any) -> np.ndarray:
        """(..., k) bool: H_seed(s) = y for every state s."""
        seed, y = self.split(x_tilde)
        return self.hash(seed[..., None], np.arange(self.k)) == y[..., None]

    def log_likelihood_matrix(self, x_tilde: Any) -> np.ndarray:
        """log p(seed, y | x = s) = −log(P(P−1)) + log p if H_seed(s) = y, else + log((1 − p)/(g − 1))."""
        hit = self._support(x_tilde)
        return np.where(hit, math.log(self.p), math.log(self.other)) - math.log(self.n_seeds)

    def likelihood_hits(self, x_tilde: Any) -> tuple[csr_matrix, float, float]:
        """``log_likelihood_matrix`` exponentiated, as (S, low, high): p(seed, y | x = s) = low + (high − low)·S
        with S (m, k) the sparse 0/1 matrix of the states each report's hash maps to its y, about k/g a
        report where the dense matrix holds k. What a server's likelihood of many reports reads."""
        hit = self._support(x_tilde).reshape(-1, self.k)
        cols = np.nonzero(hit)[1].astype(np.int32)
        indptr = np.concatenate([[0], np.cumsum(hit.sum(axis=1))]).astype(np.int64)
        S = csr_matrix((np.ones(cols.size), cols, indptr), shape=hit.shape)
        return S, self.other / self.n_seeds, self.p / self.n_seeds

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        """log p(x̃ | x) elementwise, hashing only x (O(1) per pair, not O(k) like the matrix)."""
        seed, y = self.split(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", seed)
        hit = self.hash(seed, xx) == y
        return np.where(hit, math.log(self.p), math.log(self.other)) - math.log(self.n_seeds)

    def unbiased_onehot(self, x_tilde: Any) -> np.ndarray:
        """(1{H(s) = y} − q*)/(p − q*): E[·| x] = 1 if s = x (probability p) else 0 (probability q*)."""
        return (self._support(x_tilde) - self.q_star) / (self.p - self.q_star)

    def frequency_variance(self, n: int, pi: Any = None) -> np.ndarray:
        """1{H(s) = y} ~ Bernoulli(μ_s), μ_s = π_s p + (1 − π_s) q*, over records drawn from π:
        Var = μ_s(1 − μ_s)/(n (p − q*)²) (Wang et al.'s q*(1−q*)/(n(p−q*)²) at π_s → 0, q* = 1/g)."""
        n = check_int("n", n, minimum=1)
        pi = self._pi(pi)
        mu = pi * self.p + (1 - pi) * self.q_star
        return mu * (1 - mu) / (n * (self.p - self.q_star) ** 2)

    # --- specs --------------------------------------------------------------------------------
    def to_spec(self) -> dict:
        return {"kind": self.kind, "k": self.k, "epsilon": self._epsilon_requested, "g": self.g}

    @classmethod
    def from_spec(cls, spec: dict) -> LocalHashing:
        return cls(spec["k"], spec["epsilon"], g=spec["g"])
