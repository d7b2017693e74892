"""Randomised response on categorical values (Warner 1965; Barber §3, §6).

Convention: P[i, j] = p(x̃ = i | x = j), so P is column-stochastic. Valid spread noise
(Barber §2) needs P square, strictly positive and invertible; its LDP guarantee is
ε = ln max_{i, j, j'} P[i, j] / P[i, j'].
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import as_float_array, as_state_array, check_broadcast, check_int, check_positive, check_rng
from ..errors import ValidationError
from ._base import Mechanism, register
from ._discrete_posteriors import DensePosterior, RRPosterior, guide_table, inverse_cdf  # noqa: F401
from ._priors import CategoricalPrior

_MAX_CONDITION = 1e10
#: most states a categorical field may have: states are int64 and a release computes (x + shift) mod k
MAX_STATES = 2**62


def _as_categorical_prior(prior: Any, k: int) -> np.ndarray:
    if prior is None or (isinstance(prior, str) and prior == "flat"):
        return np.full(k, 1.0 / k)
    probs = prior.probs if isinstance(prior, CategoricalPrior) else CategoricalPrior(prior).probs
    if probs.shape[-1] != k:
        raise ValidationError("prior", f"must have {k} states to match the mechanism, got {probs.shape[-1]}")
    return probs


class DiscreteMechanism(Mechanism):
    """A local randomiser of one categorical value x ∈ {0, …, k−1}: a frequency oracle.

    Beyond the Mechanism contract, every discrete oracle (randomised response, unary encoding,
    local hashing) offers what the server's estimators need, whatever its release looks like:

    * ``log_likelihood_matrix(x̃)`` (..., k): log p(x̃ | x = s) for every clean state s — the
      exact likelihood that spread-EM's posterior and maximum-likelihood frequencies use;
    * ``unbiased_onehot(x̃)`` (..., k): an unbiased estimate of the one-hot vector of x
      (E[·| x] = e_x), so that the mean over reports is an unbiased frequency estimate and the
      product of two independent fields' estimates is unbiased for their joint indicator;
    * ``decode(x̃)`` (...,): a point guess of x from x̃ alone (what a naive learner uses);
    * ``frequency_variance(n, pi)`` (k,): the exact variance of the unbiased frequency estimate of
      each state from n reports of records drawn from π (uniform if not given).
    """

    k: int

    def validate_input(self, x: Any, field: str = "x") -> np.ndarray:
        return as_state_array(field, x, self.k)

    def log_likelihood_matrix(self, x_tilde: Any) -> np.ndarray:
        raise NotImplementedError

    def unbiased_onehot(self, x_tilde: Any) -> np.ndarray:
        raise NotImplementedError

    def decode(self, x_tilde: Any) -> np.ndarray:
        """argmax_s p(x̃ | x = s), ties to the lowest state."""
        return np.argmax(self.log_likelihood_matrix(x_tilde), axis=-1)

    def frequency_variance(self, n: int, pi: Any = None) -> np.ndarray:
        raise NotImplementedError

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        xx = self.validate_input(x)
        L = self.log_likelihood_matrix(x_tilde)  # (..., k)
        shape = check_broadcast("x", xx, "x_tilde", np.empty(L.shape[:-1]))
        L = np.broadcast_to(L, shape + (self.k,))
        return np.take_along_axis(L, np.broadcast_to(xx, shape)[..., None], axis=-1)[..., 0]

    def posterior(self, x_tilde: Any, prior: Any = "flat") -> DensePosterior:
        """Exact p(x | x̃) ∝ p(x̃ | x) π(x), O(k) per value."""
        probs = _as_categorical_prior(prior, self.k)
        return DensePosterior.from_log_likelihood(self.log_likelihood_matrix(x_tilde), probs)

    def _pi(self, pi: Any) -> np.ndarray:
        if pi is None:
            return np.full(self.k, 1.0 / self.k)
        return _as_categorical_prior(pi, self.k).reshape(self.k)


class MatrixMechanism(DiscreteMechanism):
    """A discrete oracle whose release is one state x̃ ∈ {0, …, k−1}, given by a column-stochastic
    matrix P[x̃, x] = p(x̃ | x) (randomised response and its asymmetric variants)."""

    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        return as_state_array(field, x_tilde, self.k)

    @property
    def matrix(self) -> np.ndarray:
        raise NotImplementedError

    @property
    def epsilon(self) -> float:
        logP = np.log(self.matrix)
        return float(np.max(logP.max(axis=1) - logP.min(axis=1)))

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        xt = self.validate_release(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", xt)
        return np.log(self.matrix)[xt, xx]

    def log_likelihood_matrix(self, x_tilde: Any) -> np.ndarray:
        return np.log(self.matrix)[self.validate_release(x_tilde)]

    def unbiased_onehot(self, x_tilde: Any) -> np.ndarray:
        """P⁻¹ e_x̃: E[P⁻¹ e_x̃ | x] = P⁻¹ P e_x = e_x."""
        return self._inverse().T[self.validate_release(x_tilde)]

    def frequency_variance(self, n: int, pi: Any = None) -> np.ndarray:
        """Var of mean_i (P⁻¹ e_x̃ᵢ)[s] = (E[(P⁻¹e_x̃)[s]²] − π_s²)/n with x̃ ~ Pπ."""
        pi = self._pi(pi)
        U = self._inverse()  # U[s, x̃]
        second = (U**2) @ (self.matrix @ pi)
        return (second - pi**2) / float(n)

    def _inverse(self) -> np.ndarray:
        if not hasattr(self, "_inv_cache"):
            self._inv_cache = np.linalg.inv(self.matrix)
        return self._inv_cache


#: kept for code written against the earlier name
_DiscreteMechanism = DiscreteMechanism


@register
class TransitionMatrix(MatrixMechanism):
    """General k-ary randomised response given by a column-stochastic matrix P[x̃, x]
    (e.g. asymmetric label flips P10 ≠ P01)."""

    kind = "transition_matrix"

    def __init__(self, P: Any):
        M = as_float_array("P", P, ndim=2)
        if M.shape[0] != M.shape[1]:
            raise ValidationError("P", f"must be square (k x k), got shape {M.shape}")
        if M.shape[0] < 2:
            raise ValidationError("P", "needs k >= 2 states")
        if np.any(M <= 0):
            raise ValidationError("P", "entries must be strictly positive (0 < P[i, j]); a zero entry makes ε infinite")
        colsum = M.sum(axis=0)
        if np.any(np.abs(colsum - 1) > 1e-9):
            raise ValidationError(
                "P", f"must be column-stochastic: each column P[:, j] = p(x̃ | x = j) sums to 1, got sums {colsum}"
            )
        cond = np.linalg.cond(M)
        if not np.isfinite(cond) or cond > _MAX_CONDITION:
            raise ValidationError(
                "P",
                f"must be invertible (condition number <= {_MAX_CONDITION:g}, got {cond:.3g}); "
                "the noise would destroy the data",
            )
        self._P_given = M.copy()
        self._P = M / colsum
        self._P.setflags(write=False)
        self.k = M.shape[0]

    @classmethod
    def binary(cls, p10: float, p01: float) -> TransitionMatrix:
        """Binary flips: p10 = p(x̃=1 | x=0), p01 = p(x̃=0 | x=1) (Barber §3.2's P10, P01)."""
        return cls([[1 - p10, p01], [p10, 1 - p01]])

    @property
    def matrix(self) -> np.ndarray:
        return self._P

    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        return self.sample_valid(self.validate_input(x), rng)

    def sample_valid(self, xx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        cdf = np.cumsum(self._P, axis=0).T  # cdf[j] = CDF of x̃ given x = j
        u = rng.random(xx.shape)
        out = (cdf[xx] < u[..., None]).sum(axis=-1)
        return np.minimum(out, self.k - 1)

    def posterior(self, x_tilde: Any, prior: Any = "flat") -> DensePosterior:
        xt = self.validate_release(x_tilde)
        probs = _as_categorical_prior(prior, self.k)
        return DensePosterior(xt, probs, np.log(self._P))

    def to_spec(self) -> dict:
        return {"kind": self.kind, "P": self._P_given.tolist()}

    @classmethod
    def from_spec(cls, spec: dict) -> TransitionMatrix:
        return cls(spec["P"])


@register
class RandomizedResponse(MatrixMechanism):
    """k-ary randomised response: keep the value with probability 1 − flip_prob, otherwise
    report one of the other k − 1 values uniformly (k = 2: Warner's). Give exactly one of
    ``flip_prob`` or ``epsilon``; ε = ln((1 − f)(k − 1) / f) for f < (k − 1)/k."""

    kind = "randomized_response"

    def __init__(self, k: int, flip_prob: float | None = None, *, epsilon: float | None = None):
        self.k = check_int("k", k, minimum=2, maximum=MAX_STATES)
        if (flip_prob is None) == (epsilon is None):
            raise ValidationError("flip_prob", "give exactly one of flip_prob or epsilon")
        if epsilon is not None:
            eps = check_positive("epsilon", epsilon)
            # f = (k-1) / (e^ε + k - 1), computed stably for large ε
            flip_prob = float((self.k - 1) * math.exp(-eps) / (1.0 + (self.k - 1) * math.exp(-eps)))
            if flip_prob <= 0.0 or flip_prob / (self.k - 1) <= 0.0:
                raise ValidationError("epsilon", f"is too large to represent as a flip probability (got {eps})")
            if abs(flip_prob - (self.k - 1) / self.k) < 1e-9:
                raise ValidationError("epsilon", f"is too small: the noise would be numerically uniform (got {eps})")
        if isinstance(flip_prob, (str, bytes)):
            raise ValidationError("flip_prob", f"must be a real number in (0, 1), got {flip_prob!r}")
        try:
            f = float(flip_prob)
        except (TypeError, ValueError, OverflowError):
            raise ValidationError("flip_prob", f"must be a real number in (0, 1), got {flip_prob!r}") from None
        if not (0.0 < f < 1.0):
            raise ValidationError(
                "flip_prob",
                f"must be in the open interval (0, 1) excluding (k-1)/k = {(self.k - 1) / self.k:.6g}, "
                f"got {flip_prob!r}",
            )
        if abs(f - (self.k - 1) / self.k) < 1e-9:
            raise ValidationError(
                "flip_prob",
                f"= (k-1)/k = {(self.k - 1) / self.k:.6g} makes every report uniform: the noise is not invertible",
            )
        if f / (self.k - 1) <= 0.0:
            raise ValidationError(
                "flip_prob",
                f"is too small for k = {self.k}: flip_prob/(k-1), the probability of each other value, "
                f"is 0 in double precision (ε would be infinite), got {flip_prob!r}",
            )
        self.flip_prob = f

    @property
    def keep_prob(self) -> float:
        return 1.0 - self.flip_prob

    @property
    def other_prob(self) -> float:
        """p(x̃ = i | x = j) for i ≠ j."""
        return self.flip_prob / (self.k - 1)

    @property
    def epsilon(self) -> float:
        return abs(math.log(self.keep_prob) - math.log(self.other_prob))

    @property
    def matrix(self) -> np.ndarray:
        P = np.full((self.k, self.k), self.other_prob)
        np.fill_diagonal(P, self.keep_prob)
        return P

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        xt = self.validate_release(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", xt)
        return np.where(xt == xx, math.log(self.keep_prob), math.log(self.other_prob))

    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        return self.sample_valid(self.validate_input(x), rng)

    def sample_valid(self, xx: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        flip = rng.random(xx.shape) < self.flip_prob
        shift = rng.integers(1, self.k, size=xx.shape)
        return np.where(flip, (xx + shift) % self.k, xx)

    def posterior(self, x_tilde: Any, prior: Any = "flat") -> RRPosterior:
        xt = self.validate_release(x_tilde)
        probs = _as_categorical_prior(prior, self.k)
        return RRPosterior(xt, probs, self.keep_prob, self.other_prob)

    def to_spec(self) -> dict:
        return {"kind": self.kind, "k": self.k, "flip_prob": self.flip_prob}

    @classmethod
    def from_spec(cls, spec: dict) -> RandomizedResponse:
        return cls(spec["k"], flip_prob=spec["flip_prob"])
