"""Exact privacy loss of discrete and additive-noise mechanisms at a pair of inputs (the
white-box values an audit's certified bound is compared with)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_int, check_open_unit, check_rng
from ..errors import ValidationError
from ..mechanisms import calibration as cal
from ..mechanisms.base import Mechanism
from ..mechanisms.record import RecordMechanism


def _is_record(m: Any) -> bool:
    return isinstance(m, RecordMechanism)


def _is_discrete(m: Any) -> bool:
    return isinstance(m, Mechanism) and hasattr(m, "k") and not hasattr(m, "lower")


def _is_additive(m: Any) -> bool:
    return isinstance(m, Mechanism) and hasattr(m, "lower") and hasattr(m, "upper") and hasattr(m, "noise_family")


def _log_matrix(mech: Mechanism) -> np.ndarray:
    """log P[o, x] = log p(x̃ = o | x) on the full k × k grid, from ``log_likelihood``."""
    k = int(mech.k)
    states = np.arange(k)
    with np.errstate(divide="ignore"):
        return np.asarray(mech.log_likelihood(states[:, None], states[None, :]), dtype=float)


def exact_discrete_epsilon(mech: Mechanism) -> tuple[float, tuple[int, int, int]]:
    """max over outputs o and every pair of states x, x' of log P(o|x) − log P(o|x'), from the
    mechanism's likelihood; returns (ε, (o, x, x')) with the maximising triple. For pure ε this
    is also the sup over output *sets* (a ratio of sums never exceeds the largest ratio)."""
    if not _is_discrete(mech):
        raise ValidationError(
            "mechanism", f"must be a discrete mechanism with states 0..k-1, got {type(mech).__name__}"
        )
    logP = _log_matrix(mech)
    hi, lo = logP.max(axis=1), logP.min(axis=1)
    with np.errstate(invalid="ignore"):
        gap = hi - lo
    o = int(np.nanargmax(gap))
    return float(gap[o]), (o, int(np.argmax(logP[o])), int(np.argmin(logP[o])))


def _default_pair(mech: Mechanism) -> tuple[Any, Any]:
    lo, hi = np.asarray(mech.lower, dtype=float), np.asarray(mech.upper, dtype=float)
    if mech.width == 1:
        return float(lo[0]), float(hi[0])
    return lo.copy(), hi.copy()


def exact_additive_epsilon(mech: Mechanism, x: Any = None, x_prime: Any = None) -> float | None:
    """True ε of an additive-noise mechanism on the pair (x, x') (default: the box corners lower,
    upper) at its claimed δ: Laplace ‖x − x'‖₁/b; Gaussian the analytic-Gaussian ε for
    Δ = ‖x − x'‖₂ at δ. None for an unknown noise family."""
    if not _is_additive(mech):
        raise ValidationError(
            "mechanism", f"must be an additive-noise mechanism (Laplace/Gaussian), got {type(mech).__name__}"
        )
    if x is None and x_prime is None:
        x, x_prime = _default_pair(mech)
    diff = np.atleast_1d(np.asarray(x, float) - np.asarray(x_prime, float))
    family = mech.noise_family
    if family == "laplace":
        return float(np.abs(diff).sum() / mech.noise_scale)
    if family == "gaussian":
        l2 = float(np.sqrt(np.sum(diff**2)))
        if l2 == 0:
            return 0.0
        return float(cal.analytic_gaussian_epsilon(mech.noise_scale, mech.delta, l2))
    return None


# ----------------------------------------------------------------------------- argument checks
def _check_common(n_samples: Any, rng: Any, alpha: Any) -> tuple[int, np.random.Generator, float]:
    n = check_int("n_samples", n_samples, minimum=20)
    return n, check_rng("rng", rng), check_open_unit("alpha", alpha)


def _label(mech: Any, label: str | None) -> str:
    if label is not None:
        if not isinstance(label, str):
            raise ValidationError("label", f"must be a string or None, got {type(label).__name__}")
        return label
    return repr(mech)


# ----------------------------------------------------------------------------- discrete audit
