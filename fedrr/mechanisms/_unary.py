"""Optimized unary encoding, OUE (Wang, Blocki, Li & Jha, "Locally Differentially Private Protocols
for Frequency Estimation", USENIX Security 2017, §4.3).

x ∈ {0, …, k−1} is one-hot encoded in k bits and every bit is perturbed independently: x's own bit
is reported 1 with probability p = 1/2, every other bit with q = 1/(e^ε + 1). Two inputs x ≠ x' differ
in two bits, so ε = ln(p(1 − q)/((1 − p)q)) = ln((1 − q)/q) = ε (the paper's eq. for OUE; checked by
enumerating every output in tests/test_oracles.py).

Release: the k reported bits packed into ONE float holding an exact integer (bit j set ⇔ state j
reported 1), so a record's release stays a float array with one column per attribute. Doubles hold
integers below 2⁵³ exactly, hence k ≤ 52; for larger domains use ``LocalHashing``.

Floating point: p = 1/2 is realised exactly by ``Generator.random() < 0.5``; q is rounded *up* to the
2⁻⁵³ grid (see ``_grid``), which is realised exactly and only lowers ε. ``epsilon`` is the ε of the
rounded q (within 1e-6 relative of the request, in practice within 10⁻¹⁵).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .._validation import check_int, check_rng
from ..errors import ValidationError
from ._base import register
from ._discrete import DiscreteMechanism
from ._grid import as_packed_release, check_epsilon, check_realised_epsilon, grid_up, stated_log1p

#: most states a packed unary release can hold (one exact-integer double: bits 0..51)
MAX_UNARY_STATES = 52


@register
class UnaryEncoding(DiscreteMechanism):
    """Optimized unary encoding (OUE) of a categorical value with k ≤ 52 states at ε."""

    kind = "unary_encoding"

    def __init__(self, k: int, epsilon: float):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
            raise ValidationError("k", f"must be an integer >= 2 and <= {MAX_UNARY_STATES}, got {k!r}")
        if k > MAX_UNARY_STATES:
            raise ValidationError(
                "k",
                f"must be <= {MAX_UNARY_STATES} for unary encoding (its k-bit release is packed into one "
                f"double, exact below 2^53), got {k!r}; use LocalHashing for larger domains",
            )
        self.k = int(k)
        self._epsilon_requested = check_epsilon(epsilon)
        e = math.exp(-self._epsilon_requested)
        self.p = 0.5
        self.q = grid_up(e / (1.0 + e))  # 1/(e^ε + 1), rounded up: exact Bernoulli, ε never increases
        q = Fraction(self.q)  # exact: ε = ln((1 − q)/q) = ln(1 + (1 − 2q)/q)
        self._epsilon = check_realised_epsilon(self._epsilon_requested, stated_log1p((1 - 2 * q) / q), "unary encoding")
        self._weights = 2.0 ** np.arange(self.k)

    @property
    def epsilon(self) -> float:
        """ln(p(1 − q)/((1 − p)q)) of the realised p = 1/2 and q (the exact worst-case log-ratio),
        rounded up (``_grid.stated_log1p``)."""
        return self._epsilon

    # --- client -------------------------------------------------------------------------------
    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        return self.sample_valid(self.validate_input(x), rng)

    def sample_valid(self, xx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        own = np.arange(self.k) == xx[..., None]
        bits = rng.random(xx.shape + (self.k,)) < np.where(own, self.p, self.q)
        # a sum of distinct powers of two below 2^52: every partial sum is exact
        return (bits * self._weights).sum(axis=-1)

    # --- server -------------------------------------------------------------------------------
    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        return as_packed_release(field, x_tilde, 2.0**self.k, f"unary-encoding releases ({self.k} packed bits)")

    def bits(self, x_tilde: Any) -> np.ndarray:
        """(..., k) bool: bit j of each release (state j reported 1)."""
        v = self.validate_release(x_tilde).astype(np.int64)
        return ((v[..., None] >> np.arange(self.k)) & 1).astype(bool)

    def log_likelihood_matrix(self, x_tilde: Any) -> np.ndarray:
        """log p(b | x = s) = log ½ + (ones among bits ≠ s)·log q + (zeros among bits ≠ s)·log(1 − q)."""
        b = self.bits(x_tilde)
        ones_else = b.sum(axis=-1, keepdims=True) - b
        zeros_else = (self.k - 1) - ones_else
        return math.log(self.p) + ones_else * math.log(self.q) + zeros_else * math.log1p(-self.q)

    def unbiased_onehot(self, x_tilde: Any) -> np.ndarray:
        """(b − q)/(p − q): E[b_j | x] = p if j = x else q."""
        return (self.bits(x_tilde) - self.q) / (self.p - self.q)

    def frequency_variance(self, n: int, pi: Any = None) -> np.ndarray:
        """Var of mean_i (b_is − q)/(p − q) over n records drawn from π: b_is ~ Bernoulli(μ_s),
        μ_s = π_s p + (1 − π_s) q, so μ_s(1 − μ_s)/(n (p − q)²). At π_s → 0 this is Wang et al.'s
        Var* = q(1 − q)/(n (p − q)²) = 4e^ε/(n (e^ε − 1)²)."""
        n = check_int("n", n, minimum=1)
        pi = self._pi(pi)
        mu = pi * self.p + (1 - pi) * self.q
        return mu * (1 - mu) / (n * (self.p - self.q) ** 2)

    # --- specs --------------------------------------------------------------------------------
    def to_spec(self) -> dict:
        return {"kind": self.kind, "k": self.k, "epsilon": self._epsilon_requested}

    @classmethod
    def from_spec(cls, spec: dict) -> UnaryEncoding:
        return cls(spec["k"], spec["epsilon"])
