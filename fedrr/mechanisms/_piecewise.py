"""Bounded numeric attributes: the Piecewise Mechanism (Wang, Xiao, Yang, Zhao, Hui, Shin, Shin & Yu,
"Collecting and Analyzing Multidimensional Data with Local Differential Privacy", ICDE 2019,
Algorithm 2, §III-B) and Duchi, Jordan & Wainwright's one-dimensional mechanism (JASA 2018; as
stated in Wang et al. §III-A). Both map x ∈ [lower, upper] to t = (x − mid)/half ∈ [−1, 1], release
an unbiased t̃ and report it in the data's units, x̃ = mid + half·t̃, so E[x̃ | x] = x.

Floating point (Mironov 2012, CCS'12): sampling a continuous value in doubles leaks the input through
the low-order bits of the result, so neither mechanism samples one.

* PM is snapped to a grid on which its pmf is exact and realised with exact integer draws. Take
  e^{ε'/2} = L/M rational (M = ``resolution``, L = ⌊M·e^{ε/2}⌋, ε' = 2 ln(L/M) ≤ ε). Then
  C = (L + M)/(L − M), and on t's grid t_i = −1 + 2i/L the interval [l(t_i), r(t_i)] of Algorithm 2
  is exactly M of the N = L + M output cells of width w = 2/(L − M), namely cells i, …, i + M − 1.
  The client rounds t to t_i or t_{i+1} at random (unbiasedly), draws "centre" with probability
  L/(L + M) = e^{ε'/2}/(e^{ε'/2} + 1) by an exact integer draw, then a uniform centre cell (M of them)
  or a uniform other cell (L of them), and releases the cell's midpoint. This is *exactly*
  Algorithm 2 at ε' followed by rounding t̃ to the midpoint of its cell (a post-processing), and the
  pmf ratio of any cell between any two grid inputs is 1 or (L/M)² = e^{ε'}; the randomised rounding
  of t only mixes grid inputs, so its floating-point error cannot raise ε. ``epsilon`` states ε'
  (rounded up); the only assumption is a uniform 64-bit generator.
* Duchi's mechanism reports +B with probability ½ + γt/2 (γ = (e^ε − 1)/(e^ε + 1), B = 1/γ). γ is
  rounded down to the 2⁻⁵² grid and the probability clipped to [(1 − γ)/2, (1 + γ)/2], both on the
  2⁻⁵³ grid, so ``rng.random() < p`` realises a probability in that interval exactly: the ratio of
  any output's probabilities is ≤ (1 + γ)/(1 − γ) = e^{ε'} whatever the rounding in between. That
  rounding (of t = (x − mid)/half, of γt, of ½ + γt/2, and the 2⁻⁵³ grid of the draw) moves the
  realised probability by < 2⁻⁵¹ from ½ + γt/2: a bias of < 2⁻⁵⁰·B in t̃, none in privacy.

Security note. The guarantees above are for the distribution of the output given the input, assuming
the generator's 64-bit words are uniform and independent (in deployment: a cryptographically adequate
source). Not covered: timing side channels (Jin et al., IEEE S&P 2022) — the draws do not branch on x,
but numpy's bounded-integer rejection loops take data-independent yet variable time — and any use of
the server-side ``posterior`` samplers (scipy's truncated normal) as a client-side release.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .._validation import as_float_array, check_broadcast, check_int, check_rng, first_true
from ..errors import ValidationError
from ._base import Mechanism, box_spec, register
from ._grid import check_epsilon, check_realised_epsilon, grid_down, stated_log1p
from ._piecewise_posteriors import LinearPiecesPosterior

#: output cells at least 2¹² ulps wide, and cell indices exact in a double
_MIN_CELL_ULPS = 2.0**-40
_MAX_CELLS = 2**52


def _scalar(field: str, value: Any) -> float:
    arr = as_float_array(field, value, ndim=(0, 1))
    if arr.size != 1:
        raise ValidationError(field, f"must be one number (a scalar field), got shape {arr.shape}")
    return float(arr.reshape(()))


class _BoundedScalar(Mechanism):
    """A scalar field on [lower, upper] released as mid + half·t̃ with t̃ unbiased for t."""

    lower: np.ndarray
    upper: np.ndarray

    def _set_bounds(self, lower: Any, upper: Any, reach: float) -> None:
        lo, hi = _scalar("lower", lower), _scalar("upper", upper)
        if not hi > lo:
            raise ValidationError("upper", f"must be > lower, got lower={lo!r}, upper={hi!r}")
        self.lower, self.upper = np.array([lo]), np.array([hi])
        self.mid, self.half = lo / 2 + hi / 2, hi / 2 - lo / 2
        self._max_abs = abs(self.mid) + reach * self.half
        if not (self.half > 0 and math.isfinite(self._max_abs)):
            raise ValidationError(
                "upper", f"the releases mid ± {reach:.4g}·half of [{lo!r}, {hi!r}] overflow double precision"
            )

    def validate_input(self, x: Any, field: str = "x") -> np.ndarray:
        arr = as_float_array(field, x)
        bad = (arr < self.lower[0]) | (arr > self.upper[0])
        if (idx := first_true(bad)) is not None:
            raise ValidationError(
                field, f"values must lie in [{self.lower[0]!r}, {self.upper[0]!r}]; got {arr[idx]!r} at index {idx}"
            )
        return arr

    def _t(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mid) / self.half, -1.0, 1.0)

    def _bounds_spec(self) -> dict:
        return {"lower": float(self.lower[0]), "upper": float(self.upper[0])}

    def posterior(self, x_tilde: Any, prior: Any) -> LinearPiecesPosterior:
        """Exact p(x | x̃) under a ``HistogramPrior`` or ``GaussianPrior`` (see piecewise_posteriors)."""
        xt = self.validate_release(x_tilde)
        knots, values = self._likelihood_knots(xt)
        return LinearPiecesPosterior(xt, knots, values, prior)


@register
class PiecewiseMechanism(_BoundedScalar):
    """Wang et al.'s Piecewise Mechanism on [lower, upper], snapped to an exact grid (module doc).

    ``resolution`` = M, the number of output cells in the high-probability interval; default
    ⌊2⁴¹·half/(max|x̃|·(e^{ε/2} − 1))⌋ (cells ≥ 2¹² ulps of the largest release), which keeps
    ε' within 10⁻⁶ relative of ε. ``noise_std`` is the *worst-case* sd of x̃ − x (at x = lower or
    upper): half·√(1/(ρ − 1) + (ρ + 3)/(3(ρ − 1)²) − w²/12), ρ = e^{ε'/2}, w = 2/(L − M) (Wang et
    al.'s Var[t̃ | t = ±1] minus the rounding to cell midpoints)."""

    kind = "piecewise"

    def __init__(self, epsilon: float, lower: Any = -1.0, upper: Any = 1.0, *, resolution: int | None = None):
        eps = check_epsilon(epsilon)
        rho = math.exp(eps / 2)
        self._set_bounds(lower, upper, (rho + 1) / (rho - 1) if rho > 1 else math.inf)
        cap = 2.0 / _MIN_CELL_ULPS * (self.half / self._max_abs)  # most cells of width ≥ 2^-40·max|x̃|
        if resolution is None:
            M = max(1, min(math.floor(cap / (rho - 1)), math.floor(_MAX_CELLS / (rho + 1))))
        else:
            M = check_int("resolution", resolution, minimum=1, maximum=_MAX_CELLS)
        L = math.floor(M * rho)
        while L > M and 2 * math.log(L / M) > eps:  # ρ' = L/M ≤ e^{ε/2} in spite of rounding
            L -= 1
        if L <= M or L + M > _MAX_CELLS or L - M > cap:
            raise ValidationError(
                "resolution" if resolution is not None else "epsilon",
                f"gives {L} outer and {M} centre cells for ε = {eps!r}: need L > M (e^(ε/2)·M ≥ M + 1), "
                f"L + M ≤ 2^52 and L − M ≤ {cap:.3g} (cells at least 2^12 ulps of the releases)",
            )
        self._epsilon_requested, self.resolution, self.n_outer, self.n_cells = eps, M, L, L + M
        realised = 2 * stated_log1p(Fraction(L - M, M))
        self._epsilon = (
            check_realised_epsilon(eps, realised, "the piecewise mechanism") if resolution is None else realised
        )
        if self._epsilon > eps * (1 + 1e-14):  # pragma: no cover - the loop above prevents it
            raise ValidationError("resolution", f"realises ε' = {self._epsilon!r} > ε = {eps!r}")
        self.rho = L / M
        self.C = (L + M) / (L - M)
        if not math.isfinite(abs(self.mid) + self.C * self.half):
            raise ValidationError("upper", f"the releases mid ± {self.C:.4g}·half overflow double precision")
        self.cell_width = 2.0 / (L - M)  # in t units
        self._log_p_outer = math.log(M) - math.log(L + M) - math.log(L)  # P(cell | t) outside [l, r]
        self._log_ratio = 2 * (math.log(L) - math.log(M))

    @property
    def epsilon(self) -> float:
        """ε' = 2 ln(L/M), the exact pmf ratio of the snapped mechanism (rounded up)."""
        return self._epsilon

    @property
    def noise_std(self) -> float:
        r = self.rho
        return self.half * math.sqrt(1 / (r - 1) + (r + 3) / (3 * (r - 1) ** 2) - self.cell_width**2 / 12)

    def release_value(self, j: Any) -> np.ndarray:
        """x̃ of output cell j: mid + half·(2j + 1 − N)/(L − M) (the cell's midpoint in t)."""
        j = np.asarray(j, dtype=np.int64)
        return self.mid + self.half * ((2 * j + 1 - self.n_cells).astype(float) / (self.n_outer - self.resolution))

    def _grid_position(self, x: np.ndarray) -> np.ndarray:
        """s = (t + 1)·L/2 ∈ [0, L]: the input's position on t's grid, in grid steps."""
        return np.clip((self._t(x) + 1.0) * (self.n_outer / 2.0), 0.0, float(self.n_outer))

    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        xx = self.validate_input(x)
        L, M = self.n_outer, self.resolution
        s = self._grid_position(xx)
        i0 = np.floor(s)
        i = np.minimum(i0 + (rng.random(xx.shape) < s - i0), L).astype(np.int64)  # unbiased rounding
        centre = rng.integers(0, L + M, size=xx.shape) < L  # P = L/(L + M) exactly
        j_centre = i + rng.integers(0, M, size=xx.shape)
        j_other = rng.integers(0, L, size=xx.shape)
        j = np.where(centre, j_centre, np.where(j_other < i, j_other, j_other + M))
        return self.release_value(j)

    def cell(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        """Output cell index of each release (validated: releases are cell midpoints)."""
        arr = as_float_array(field, x_tilde)
        N, D = self.n_cells, self.n_outer - self.resolution
        with np.errstate(over="ignore", invalid="ignore"):
            pos = ((arr - self.mid) / self.half * D + (N - 1)) / 2
        j = np.clip(np.round(np.nan_to_num(pos, nan=-1.0)), 0, N - 1).astype(np.int64)
        v, tol = self.release_value(j), 2.0**-4 * self.cell_width * self.half
        off = ~((arr >= v - tol) & (arr <= v + tol))  # no arr − v: it may overflow
        if (idx := first_true(off)) is not None:
            raise ValidationError(
                field,
                f"piecewise-mechanism releases are the midpoints of {N} cells in "
                f"[{self.mid - self.C * self.half!r}, {self.mid + self.C * self.half!r}]; got {arr[idx]!r} at "
                f"index {idx}",
            )
        return j

    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        arr = as_float_array(field, x_tilde)
        self.cell(arr, field)
        return arr

    def _h(self, s: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Weight of the centre level in p(cell j | s): 1 inside, 0 outside, linear over one grid step."""
        return np.clip(np.minimum(s - (j - self.resolution), (j + 1) - s), 0.0, 1.0)

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        """log density of x̃ at x: log(P(cell | x)/(w·half)); P = p_o(1 + (ρ² − 1)h), p_o = M/((L + M)L)."""
        j = self.cell(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", j)
        h = self._h(self._grid_position(xx), j)
        log_p = self._log_p_outer + np.log1p(np.expm1(self._log_ratio) * h)
        return log_p - math.log(self.cell_width * self.half)

    def _likelihood_knots(self, xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        j = self.cell(xt).astype(float)[..., None]
        M, L = self.resolution, self.n_outer
        s = np.clip(np.concatenate([j - M, j - M + 1, j, j + 1], axis=-1), 0.0, float(L))
        s = np.concatenate([np.zeros_like(j), s, np.full_like(j, float(L))], axis=-1)
        knots = np.clip(self.mid + self.half * (2.0 * s / L - 1.0), self.lower[0], self.upper[0])
        knots[..., 0], knots[..., -1] = self.lower[0], self.upper[0]
        return knots, 1.0 + np.expm1(self._log_ratio) * self._h(s, j)

    def to_spec(self) -> dict:
        return box_spec(self, self._epsilon_requested, **self._bounds_spec(), resolution=self.resolution)

    @classmethod
    def from_spec(cls, spec: dict) -> PiecewiseMechanism:
        return cls(spec["epsilon"], spec["lower"], spec["upper"], resolution=spec["resolution"])


@register
class DuchiMechanism(_BoundedScalar):
    """Duchi et al.'s mechanism on [lower, upper]: x̃ ∈ {mid − half·B, mid + half·B}, B = 1/γ,
    P(+ | t) = ½ + γt/2 (module doc for the exact γ). ``noise_std`` is the worst-case sd of x̃ − x,
    half·B (at t = 0: Var[t̃ | t] = B² − t²)."""

    kind = "duchi"

    def __init__(self, epsilon: float, lower: Any = -1.0, upper: Any = 1.0):
        eps = check_epsilon(epsilon)
        self.gamma = grid_down(math.tanh(eps / 2), 2.0**52)  # (e^ε − 1)/(e^ε + 1), on the 2^-52 grid
        g = Fraction(self.gamma)
        realised = stated_log1p(2 * g / (1 - g)) if g > 0 else 0.0  # ln((1 + γ)/(1 − γ))
        self._epsilon = check_realised_epsilon(eps, realised, "Duchi et al.'s mechanism")
        self._epsilon_requested = eps
        self.B = 1.0 / self.gamma
        self._set_bounds(lower, upper, self.B)
        self.values = np.array([self.mid - self.half * self.B, self.mid + self.half * self.B])
        self._p_lo, self._p_hi = (1 - self.gamma) / 2, (1 + self.gamma) / 2  # exact on the 2^-53 grid

    @property
    def epsilon(self) -> float:
        """ε' = ln((1 + γ)/(1 − γ)) of the realised γ (rounded up)."""
        return self._epsilon

    @property
    def noise_std(self) -> float:
        return self.half * self.B

    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        xx = self.validate_input(x)
        p_plus = np.clip(0.5 + 0.5 * self.gamma * self._t(xx), self._p_lo, self._p_hi)
        return np.where(rng.random(xx.shape) < p_plus, self.values[1], self.values[0])

    def sign(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        """+1 / −1 for each release (validated: it must be one of the two values, to 10⁻¹² relative)."""
        arr = as_float_array(field, x_tilde)
        tol = 1e-12 * (abs(self.mid) + self.half * self.B)
        lo, hi = self.values
        plus, minus = (arr >= hi - tol) & (arr <= hi + tol), (arr >= lo - tol) & (arr <= lo + tol)
        bad = ~(plus | minus)
        if (idx := first_true(bad)) is not None:
            raise ValidationError(
                field,
                f"Duchi releases are exactly {self.values[0]!r} or {self.values[1]!r}; got {arr[idx]!r} at index {idx}",
            )
        return np.where(plus, 1, -1)

    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        arr = as_float_array(field, x_tilde)
        self.sign(arr, field)
        return arr

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        """log P(x̃ | x) = log(½ ± γt/2) (a pmf over the two values)."""
        sg = self.sign(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", sg)
        return np.log(0.5 + 0.5 * self.gamma * sg * self._t(xx))

    def _likelihood_knots(self, xt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sg = self.sign(xt).astype(float)[..., None]
        knots = np.broadcast_to(np.array([self.lower[0], self.upper[0]]), sg.shape[:-1] + (2,)).copy()
        return knots, 0.5 + 0.5 * self.gamma * sg * np.array([-1.0, 1.0])

    def to_spec(self) -> dict:
        return box_spec(self, self._epsilon_requested, **self._bounds_spec())

    @classmethod
    def from_spec(cls, spec: dict) -> DuchiMechanism:
        return cls(spec["epsilon"], spec["lower"], spec["upper"])
