"""Mechanisms that lie about their ε (for audits that must fail): ``MisclaimedMechanism`` states a
fraction of its inner mechanism's ε; ``undercalibrated`` halves the noise's sensitivity (Laplace,
Gaussian) or builds the mechanism at ε/factor while claiming ε (oracles, Piecewise, Duchi)."""

from __future__ import annotations

from .._validation import check_positive
from ..errors import ValidationError
from ..mechanisms import Mechanism, analytic_gaussian_sigma, laplace_scale


class MisclaimedMechanism(Mechanism):
    """Wraps a mechanism and *claims* ``claim_factor`` × its true ε (and its δ) while releasing
    exactly as the wrapped one. Exists only to show that the audit catches a false privacy
    claim (claim_factor < 1); never use it on real data. Not registered: no spec round trip."""

    kind = "misclaimed"

    def __init__(self, inner: Mechanism, claim_factor: float = 0.5):
        if not isinstance(inner, Mechanism):
            raise ValidationError("inner", f"must be a Mechanism, got {type(inner).__name__}")
        self._inner = inner
        self.claim_factor = check_positive("claim_factor", claim_factor)

    def __getattr__(self, name: str):  # k, lower, upper, noise_family, noise_scale, sigma, matrix, ...
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        return getattr(self._inner, name)

    @property
    def epsilon(self) -> float:
        return self.claim_factor * self._inner.epsilon

    @property
    def delta(self) -> float:
        return self._inner.delta

    @property
    def width(self) -> int:
        return self._inner.width

    def release(self, x, rng):
        return self._inner.release(x, rng)

    def log_likelihood(self, x_tilde, x):
        return self._inner.log_likelihood(x_tilde, x)

    def posterior(self, x_tilde, prior):
        return self._inner.posterior(x_tilde, prior)

    def validate_input(self, x, field: str = "x"):
        return self._inner.validate_input(x, field)

    def validate_release(self, x_tilde, field: str = "x_tilde"):
        return self._inner.validate_release(x_tilde, field)

    def to_spec(self) -> dict:
        return {"kind": self.kind, "claim_factor": self.claim_factor, "inner": self._inner.to_spec()}

    def __repr__(self) -> str:
        return f"MisclaimedMechanism({self._inner!r}, claim_factor={self.claim_factor:g})"


def undercalibrated(mech: Mechanism, factor: float = 0.5) -> Mechanism:
    """A deliberately mis-calibrated copy of a mechanism that still states the original ε.

    Laplace, analytic Gaussian: noise set for a sensitivity ``factor`` times the box's. Unary
    encoding, local hashing (same g), Piecewise (default resolution), Duchi: the mechanism built at
    ε/factor. The mechanism classes refuse such objects; this bypass exists only to show that the
    audit bites."""
    import copy

    from ..mechanisms import (
        DuchiMechanism,
        GaussianMechanism,
        LaplaceMechanism,
        LocalHashing,
        PiecewiseMechanism,
        UnaryEncoding,
    )

    check_positive("factor", factor)
    if isinstance(mech, (UnaryEncoding, LocalHashing, PiecewiseMechanism, DuchiMechanism)):
        spec = mech.to_spec()
        spec["epsilon"] = spec["epsilon"] / factor
        if isinstance(mech, PiecewiseMechanism):  # the default resolution of the new ε
            bad = PiecewiseMechanism(spec["epsilon"], spec["lower"], spec["upper"])
        else:
            bad = type(mech).from_spec(spec)
        bad._epsilon = mech.epsilon  # claims the original ε
        return bad
    bad = copy.copy(mech)
    if isinstance(mech, LaplaceMechanism):
        bad.sensitivity = mech.sensitivity * factor
        bad.scale = laplace_scale(mech.epsilon, bad.sensitivity)
    elif isinstance(mech, GaussianMechanism) and mech.calibration == "analytic":
        bad.sensitivity = mech.sensitivity * factor
        bad.sigma = analytic_gaussian_sigma(mech.epsilon, mech.delta, bad.sensitivity)
    else:
        raise ValidationError(
            "mech",
            "must be a Laplace, analytic Gaussian, UnaryEncoding, LocalHashing, Piecewise or Duchi "
            f"mechanism, got {mech!r}",
        )
    return bad
