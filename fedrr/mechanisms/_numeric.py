"""Additive-noise mechanisms for bounded numeric features: Laplace (ε-LDP) and Gaussian
((ε, δ)-LDP). One mechanism covers a block of ``width`` features in a box [lower, upper]
and is calibrated to the block's sensitivity (L1 for Laplace, L2 for Gaussian)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import as_float_array, check_broadcast, check_open_unit, check_positive, check_rng, first_true
from ..errors import ValidationError
from . import _calibration as cal
from ._base import Mechanism, box_spec, register
from ._continuous_posteriors import posterior_for

GAUSSIAN_CALIBRATIONS = ("analytic", "classic", "farokhi")
#: a release this many noise standard deviations outside [lower, upper] has probability 0 in double
#: precision (already beyond ~40 for Gaussian, ~530 for Laplace noise): no honest client sends one.
#: The posteriors stay exact far beyond those (tests go to 10⁴); releases like 1e300, whose squares
#: overflow the estimators' moments, are rejected
MAX_NOISE_SDS = 1e6


def _at_least_diameter(sensitivity: float, diameter: float, norm: str) -> float:
    """A given sensitivity must cover the box: in local DP any two values in [lower, upper] are
    neighbours, so a smaller one would state a smaller ε than the noise gives (found by fedrr.audit)."""
    if sensitivity < diameter * (1 - 1e-12):
        raise ValidationError(
            "sensitivity",
            f"must be >= {diameter:.6g}, the {norm} diameter of the box [lower, upper] (in local "
            f"DP any two values of the box are neighbours; a smaller one understates ε), got {sensitivity!r}",
        )
    return sensitivity


def _bounds(lower: Any, upper: Any) -> tuple[np.ndarray, np.ndarray]:
    lo = as_float_array("lower", lower, ndim=(0, 1))
    hi = as_float_array("upper", upper, ndim=(0, 1))
    if lo.size == 0 or hi.size == 0:
        raise ValidationError(
            "lower" if lo.size == 0 else "upper", "must give at least one bound (a number, or one per feature)"
        )
    try:
        lo, hi = np.broadcast_arrays(np.atleast_1d(lo), np.atleast_1d(hi))
    except ValueError:
        raise ValidationError(
            "upper", f"must have as many entries as lower (or one), got {hi.size} and {lo.size}"
        ) from None
    if np.any(hi <= lo):
        raise ValidationError("upper", f"must be > lower for every feature (lower={lo.tolist()}, upper={hi.tolist()})")
    with np.errstate(over="ignore"):
        span = hi - lo
        if not (np.all(np.isfinite(span)) and np.isfinite(np.sum(span)) and np.isfinite(np.sum(span**2))):
            raise ValidationError(
                "upper", "the box [lower, upper] is too wide: its size (the sensitivity) overflows double precision"
            )
    return lo.astype(float).copy(), hi.astype(float).copy()


class _AdditiveNoise(Mechanism):
    lower: np.ndarray
    upper: np.ndarray

    @property
    def width(self) -> int:
        return int(self.lower.shape[0])

    def _shape_ok(self, arr: np.ndarray, field: str) -> np.ndarray:
        w = self.width
        if w == 1 and arr.ndim >= 0 and (arr.ndim == 0 or arr.shape[-1] != 1):
            return arr  # scalar field: any shape, elementwise
        if arr.ndim == 0 or arr.shape[-1] != w:
            raise ValidationError(
                field, f"last axis must have length {w} (the mechanism's block width), got shape {arr.shape}"
            )
        return arr

    def validate_input(self, x: Any, field: str = "x") -> np.ndarray:
        arr = self._shape_ok(as_float_array(field, x), field)
        lo, hi = self._lo_hi(arr)
        bad = (arr < lo) | (arr > hi)
        if (idx := first_true(bad)) is not None:
            raise ValidationError(
                field,
                f"values must lie in the declared bounds [lower, upper]; got {float(arr[idx])} at index {idx} outside "
                f"[{float(np.broadcast_to(lo, arr.shape)[idx])}, {float(np.broadcast_to(hi, arr.shape)[idx])}]",
            )
        return arr

    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        arr = self._shape_ok(as_float_array(field, x_tilde), field)
        lo, hi = self._lo_hi(arr)
        slack = MAX_NOISE_SDS * self.noise_std
        far = (arr < lo - slack) | (arr > hi + slack)
        if (idx := first_true(far)) is not None:
            raise ValidationError(
                field,
                f"values must lie within {MAX_NOISE_SDS:g} noise standard deviations ({slack:.3g}) of the "
                f"bounds [lower, upper]; got {float(arr[idx])} at index {idx}: "
                "no release of this mechanism is that far",
            )
        return arr

    def _lo_hi(self, arr: np.ndarray):
        if self.width == 1:
            return self.lower[0], self.upper[0]
        return self.lower, self.upper

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise added to each coordinate."""
        raise NotImplementedError

    def marginal(self, j: int) -> Mechanism:
        """Column ``j`` of the block as a width-1 mechanism: the noise is i.i.d. across coordinates, so
        x̃_j = x_j + w_j with the block's own scale, and under a factorised prior the posterior of x_j
        given x̃ is the width-1 posterior given x̃_j. Built from the block's spec with column j's bounds
        and the block's sensitivity, so the scale is computed exactly as the block's (bit-identical)
        and the stated ε, δ are the block's (one column is post-processing of the block release)."""
        if self.width == 1:
            return self
        if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not 0 <= j < self.width:
            raise ValidationError("j", f"must be a column index in [0, {self.width - 1}], got {j!r}")
        spec = self.to_spec()
        spec.update(lower=[float(self.lower[j])], upper=[float(self.upper[j])])
        return type(self).from_spec(spec)

    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        xx = self.validate_input(x)
        return xx + self._noise(rng, xx.shape)

    def posterior(self, x_tilde: Any, prior: Any):
        xt = self.validate_release(x_tilde)
        return posterior_for(self.noise_family, self.noise_scale, xt, prior)


@register
class LaplaceMechanism(_AdditiveNoise):
    """x̃ = x + Lap(b)^width with b = Δ₁/ε; Δ₁ = Σ (upper − lower) over the block unless given.
    Farokhi's calibration Δ = (x̄ − x̲)·p_x is this L1 sensitivity for equal ranges."""

    kind = "laplace"
    noise_family = "laplace"

    def __init__(self, epsilon: float, lower: Any = 0.0, upper: Any = 1.0, *, sensitivity: float | None = None):
        self._epsilon = check_positive("epsilon", epsilon)
        self.lower, self.upper = _bounds(lower, upper)
        l1 = cal.l1_sensitivity(self.lower, self.upper)
        self.sensitivity = (
            l1 if sensitivity is None else _at_least_diameter(check_positive("sensitivity", sensitivity), l1, "L1")
        )
        self.scale = cal.laplace_scale(self._epsilon, self.sensitivity)

    @property
    def epsilon(self) -> float:
        return self._epsilon

    @property
    def noise_scale(self) -> float:
        return self.scale

    @property
    def noise_std(self) -> float:
        return math.sqrt(2.0) * self.scale

    def _noise(self, rng, shape):
        return rng.laplace(0.0, self.scale, size=shape)

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        xt = self.validate_release(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", xt)
        return -np.abs(xt - xx) / self.scale - math.log(2.0 * self.scale)

    def to_spec(self) -> dict:
        return box_spec(self, self._epsilon, self.lower.tolist(), self.upper.tolist(), sensitivity=self.sensitivity)

    @classmethod
    def from_spec(cls, spec: dict) -> LaplaceMechanism:
        return cls(spec["epsilon"], spec["lower"], spec["upper"], sensitivity=spec["sensitivity"])


@register
class GaussianMechanism(_AdditiveNoise):
    """x̃ = x + N(0, σ²I) on a block of features.

    calibration="analytic" (default): the analytic Gaussian mechanism (Balle & Wang 2018) with
    L2 sensitivity ‖upper − lower‖₂ — valid for every ε > 0.
    calibration="classic": σ = √(2 ln(1.25/δ))·Δ₂/ε, only valid for ε < 1 (rejected otherwise).
    calibration="farokhi": Farokhi 2020's σ = √(2 ln(1.25/δ))·Δ/ε with Δ = Σ(upper − lower)
    = (x̄ − x̲)·p_x, applied at any ε, for reproduction; ``epsilon_exact`` is the true ε of that
    noise, and ``epsilon`` the larger of it and the nominal value (a valid guarantee either way).
    Alternatively give ``sigma`` instead of ``epsilon``: ε is then the exact analytic one.
    """

    kind = "gaussian"
    noise_family = "gaussian"

    def __init__(
        self,
        epsilon: float | None = None,
        delta: float = 1e-5,
        lower: Any = 0.0,
        upper: Any = 1.0,
        *,
        calibration: str = "analytic",
        sensitivity: float | None = None,
        sigma: float | None = None,
    ):
        if calibration not in GAUSSIAN_CALIBRATIONS:
            raise ValidationError("calibration", f"must be one of {GAUSSIAN_CALIBRATIONS}, got {calibration!r}")
        if (epsilon is None) == (sigma is None):
            raise ValidationError("epsilon", "give exactly one of epsilon or sigma")
        self._delta = check_open_unit("delta", delta)
        self.lower, self.upper = _bounds(lower, upper)
        self.calibration = calibration
        if sensitivity is not None:
            self.sensitivity = _at_least_diameter(
                check_positive("sensitivity", sensitivity), cal.l2_sensitivity(self.lower, self.upper), "L2"
            )
        elif calibration == "farokhi":
            self.sensitivity = cal.l1_sensitivity(self.lower, self.upper)
        else:
            self.sensitivity = cal.l2_sensitivity(self.lower, self.upper)
        if sigma is not None:
            if calibration != "analytic":
                raise ValidationError("sigma", "giving sigma directly is only supported with calibration='analytic'")
            self.sigma = check_positive("sigma", sigma)
            self._epsilon = cal.analytic_gaussian_epsilon(self.sigma, self._delta, self.sensitivity)
            if self._epsilon <= 0:
                raise ValidationError("sigma", f"is so large that ε rounds to 0 (sigma={sigma})")
            self._sigma_given = True
            return
        self._sigma_given = False
        self._epsilon = check_positive("epsilon", epsilon)
        if calibration == "analytic":
            self.sigma = cal.analytic_gaussian_sigma(self._epsilon, self._delta, self.sensitivity)
        else:
            if calibration == "classic" and self._epsilon >= 1:
                raise ValidationError(
                    "epsilon",
                    f"must be in (0, 1) for the classic Gaussian calibration, got {epsilon}; "
                    "use calibration='analytic'",
                )
            self.sigma = cal.classic_gaussian_sigma(self._epsilon, self._delta, self.sensitivity)
            if calibration == "farokhi":
                try:  # ``epsilon`` reports the exact ε of this noise: it must exist
                    _ = self.epsilon_exact
                except ValidationError:
                    raise ValidationError(
                        "epsilon",
                        f"is too large for the Farokhi calibration: its noise (sigma = {self.sigma:.3g}) "
                        f"has an exact ε beyond 1e300, got {epsilon!r}",
                    ) from None

    @property
    def epsilon(self) -> float:
        """The ε this release guarantees at δ. Farokhi's calibration states a nominal ε that can be
        below the true one for narrow blocks at large ε (width 1 from ε ≈ 8-16); then the exact ε
        is reported instead, so the record's accounting never understates the loss."""
        if self.calibration == "farokhi":
            return max(self._epsilon, self.epsilon_exact)
        return self._epsilon

    @property
    def delta(self) -> float:
        return self._delta

    @property
    def epsilon_exact(self) -> float:
        """The exact (analytic) ε of this noise level at δ for L2 sensitivity ‖upper − lower‖₂."""
        return cal.analytic_gaussian_epsilon(self.sigma, self._delta, cal.l2_sensitivity(self.lower, self.upper))

    @property
    def noise_scale(self) -> float:
        return self.sigma

    @property
    def noise_std(self) -> float:
        return self.sigma

    def _noise(self, rng, shape):
        return rng.normal(0.0, self.sigma, size=shape)

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        xt = self.validate_release(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", xt)
        return -0.5 * ((xt - xx) / self.sigma) ** 2 - math.log(self.sigma) - 0.5 * math.log(2 * math.pi)

    def to_spec(self) -> dict:
        spec = {
            "kind": self.kind,
            "delta": self._delta,
            "lower": self.lower.tolist(),
            "upper": self.upper.tolist(),
            "calibration": self.calibration,
            "sensitivity": self.sensitivity,
        }
        if self._sigma_given:
            spec["sigma"] = self.sigma
        else:
            spec["epsilon"] = self._epsilon
        return spec

    @classmethod
    def from_spec(cls, spec: dict) -> GaussianMechanism:
        return cls(
            spec.get("epsilon"),
            spec["delta"],
            spec["lower"],
            spec["upper"],
            calibration=spec["calibration"],
            sensitivity=spec["sensitivity"],
            sigma=spec.get("sigma"),
        )
