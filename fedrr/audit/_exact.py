"""Exact privacy loss of discrete and additive-noise mechanisms at a pair of inputs (the
white-box values an audit's certified bound is compared with)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import check_int, check_open_unit, check_rng
from ..errors import ValidationError
from ..mechanisms import Mechanism, RecordMechanism, analytic_gaussian_epsilon


def _is_record(m: Any) -> bool:
    return isinstance(m, RecordMechanism)


def _is_discrete(m: Any) -> bool:
    return isinstance(m, Mechanism) and hasattr(m, "k") and not hasattr(m, "lower")


def _is_additive(m: Any) -> bool:
    return isinstance(m, Mechanism) and hasattr(m, "lower") and hasattr(m, "upper") and hasattr(m, "noise_family")


def _is_oracle(m: Any) -> bool:
    """A discrete oracle whose releases are not states (unary encoding, local hashing): audited with
    likelihood-ratio threshold sets (duck-typed, so a MisclaimedMechanism wrapper qualifies)."""
    return _is_discrete(m) and not hasattr(m, "matrix") and hasattr(m, "log_likelihood_matrix")


def _is_bounded(m: Any) -> bool:
    """A bounded numeric field with a non-additive release: the Piecewise or Duchi mechanism."""
    return (
        isinstance(m, Mechanism)
        and hasattr(m, "lower")
        and not hasattr(m, "noise_family")
        and (hasattr(m, "release_value") or hasattr(m, "gamma"))
    )


def _log_matrix(mech: Mechanism) -> np.ndarray:
    """log P[o, x] = log p(x̃ = o | x) on the full k × k grid, from ``log_likelihood``."""
    k = int(mech.k)
    states = np.arange(k)
    with np.errstate(divide="ignore"):
        return np.asarray(mech.log_likelihood(states[:, None], states[None, :]), dtype=float)


def exact_discrete_epsilon(mech: Mechanism) -> tuple[float, tuple[int, int, int]]:
    """max over outputs o and every pair of states x, x' of log P(o|x) − log P(o|x'), from the
    mechanism's likelihood; returns (ε, (o, x, x')) with the maximising triple. For pure ε this
    is also the sup over output *sets* (a ratio of sums never exceeds the largest ratio). Oracles whose
    releases are not states are passed on to ``exact_oracle_epsilon``."""
    if _is_oracle(mech):
        return exact_oracle_epsilon(mech)
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
        return float(analytic_gaussian_epsilon(mech.noise_scale, mech.delta, l2))
    return None


def exact_oracle_epsilon(mech: Mechanism) -> tuple[float, tuple[float, int, int]]:
    """max over outputs o and states x, x' of log p(o|x) − log p(o|x') for unary encoding and local
    hashing, from ``log_likelihood_matrix`` on outputs that attain it: unary encoding — every bit
    pattern of the first min(k, 12) bits (its pmf is symmetric in the states, so every pair's worst
    output is among them); local hashing — for seeds 0, 1, … (a = 1, b = seed: H(0) ≠ H(1) when
    b + 1 < P) the buckets y = H_seed(0) and H_seed(1), whose rows contain both likelihood levels.
    Returns (ε, (o, x, x'))."""
    if hasattr(mech, "bits"):
        outs = np.arange(2 ** min(int(mech.k), 12), dtype=float)
    elif hasattr(mech, "n_seeds"):
        n_seed = max(1, min(int(mech.n_seeds), 64, (1 << 22) // (2 * int(mech.k))))
        seeds = np.arange(n_seed)
        ys = np.concatenate([mech.hash(seeds, 0), mech.hash(seeds, min(1, int(mech.k) - 1))])
        outs = (np.concatenate([seeds, seeds]) * mech.g + ys).astype(float)
    else:
        raise ValidationError("mechanism", f"no exact ε for the discrete oracle {type(mech).__name__}")
    L = np.asarray(mech.log_likelihood_matrix(outs), dtype=float)
    gap = L.max(axis=1) - L.min(axis=1)
    o = int(np.argmax(gap))
    return float(gap[o]), (float(outs[o]), int(np.argmax(L[o])), int(np.argmin(L[o])))


def exact_bounded_epsilon(mech: Mechanism, x: Any = None, x_prime: Any = None) -> float:
    """sup over outputs of |log p(x̃|x) − log p(x̃|x')| for the Piecewise or Duchi mechanism (default
    pair: lower, upper). Duchi: its two outputs. Snapped PM: P(cell j | x) is constant in j between the
    breakpoints {i₀, i₀ + 1, i₀ + M, i₀ + M + 1} of each input (i₀ = ⌊grid position⌋), so the ratio is
    constant between the union of both inputs' breakpoints and cell 0: those cells attain the sup."""
    if not _is_bounded(mech):
        raise ValidationError("mechanism", f"must be a Piecewise or Duchi mechanism, got {type(mech).__name__}")
    if x is None and x_prime is None:
        x, x_prime = float(mech.lower[0]), float(mech.upper[0])
    if hasattr(mech, "release_value"):
        M, N = int(mech.resolution), int(mech.n_cells)
        cells = {0, N - 1}
        for v in (x, x_prime):
            i0 = int(np.floor(mech._grid_position(np.asarray(float(v)))))
            cells.update(c for c in (i0, i0 + 1, i0 + M, i0 + M + 1) if 0 <= c < N)
        outs = mech.release_value(np.array(sorted(cells)))
    else:
        outs = np.asarray(mech.values, dtype=float)
    diff = np.asarray(mech.log_likelihood(outs, float(x))) - np.asarray(mech.log_likelihood(outs, float(x_prime)))
    return float(np.max(np.abs(diff)))


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
