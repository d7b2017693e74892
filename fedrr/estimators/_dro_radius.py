"""Radius of the Wasserstein ambiguity set that contains the clean distribution (Farokhi 2020,
Theorems 2-5), computed from the mechanism that produced the noisy inputs.

ρ = ζ(β) + noise, where

* noise = √E‖w‖₂², the root mean squared Euclidean length of the LDP noise vector w added to
  one record's inputs. The coupling (x + w, y) ↔ (x, y) moves only x, so
  W₁(D, P) ≤ E‖w‖ ≤ √E‖w‖² (proof of Thm 2) and W₂(D, P) ≤ √E‖w‖² (Thm 5).
  E‖w‖² = Σ_j Var(w_j) over the *noisy* coordinates: 2 p_x b² for Laplace(b) noise and
  p_x σ² for Gaussian(σ) noise. With Farokhi's calibration (b = Δ/ε, σ = √(2 ln(1.25/δ)) Δ/ε,
  Δ = range·p_x) this is √(2 p_x) Δ/ε and √(2 ln(1.25/δ) p_x) Δ/ε: the *square-root* form of
  Theorems 2-5 and eq (10). The sentence before eq (10) prints ρ = √(2 log(1.25/δ)) p Δ/ε
  (p outside the root); that is a typo: trace(E[wwᵀ]) grows linearly in the dimension, so its
  square root grows like √p. The paper's p = p_x + p_y also counts the target, which eq (3b)
  leaves unperturbed (ỹ = y); only the p_x noisy coordinates contribute, so we use p_x.
  With fedrr's analytic Gaussian calibration the mechanism's actual σ is used.
* ζ(β): the sampling part of Thm 2 (empirical vs population noisy distribution, confidence
  1 − β). Its constants c₁, c₂ (and the light-tail exponent a of Assumption 1) come from
  Fournier & Guillin via Esfahani & Kuhn (2018, Thm 3.4) and are not explicit, so ζ is 0 unless
  ``zeta_constants=(c1, c2, a)`` is given. ζ = 0 is the paper's own big-data regime (§4,
  "ε ≈ 0") and what its experiments can use. Thm 2's ζ is a bound in the joint (x, y) metric.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validation import check_int, check_open_unit, check_positive
from ..errors import ValidationError
from ..mechanisms import GaussianMechanism, LaplaceMechanism, Mechanism, is_record_mechanism

_ADDITIVE = (LaplaceMechanism, GaussianMechanism)


def _fields(mechanism: Any, n_features: int) -> list[tuple[Mechanism, int, np.ndarray, np.ndarray]]:
    """[(mechanism, number of columns it noises, lower, upper)] covering all n_features inputs."""
    if is_record_mechanism(mechanism):
        if mechanism.uses_label:
            raise ValidationError(
                "mechanism",
                "releases the label (a label mechanism, or inside pairs); Theorems 2-5 cover noise on the inputs only "
                "(eq 3b: the target is released unperturbed)",
            )
        if mechanism.n_features != n_features:
            raise ValidationError("mechanism", f"covers {mechanism.n_features} features but X has {n_features}")
        out = []
        for f in mechanism.fields:
            if not isinstance(f.mechanism, _ADDITIVE):
                raise ValidationError(
                    "mechanism",
                    f"field {f.columns} uses {type(f.mechanism).__name__}; the radius "
                    "is defined for additive Laplace/Gaussian input noise only",
                )
            out.append((f.mechanism, len(f.columns), f.mechanism.lower, f.mechanism.upper))
        return out
    if isinstance(mechanism, _ADDITIVE):
        w = mechanism.width
        if w == n_features:
            return [(mechanism, w, mechanism.lower, mechanism.upper)]
        if w == 1:  # a scalar mechanism applied to every column separately
            return [
                (mechanism, n_features, np.repeat(mechanism.lower, n_features), np.repeat(mechanism.upper, n_features))
            ]
        raise ValidationError(
            "mechanism",
            f"is a block mechanism of width {w} but X has {n_features} features "
            "(use width 1, width n_features, or a RecordMechanism)",
        )
    raise ValidationError(
        "mechanism",
        "must be a LaplaceMechanism, GaussianMechanism or RecordMechanism of those "
        f"(noise on the inputs), got {type(mechanism).__name__}",
    )


def noise_radius(mechanism: Any, n_features: int) -> float:
    """√E‖w‖₂² of the input noise of one record: √(2 p_x)·b (Laplace), √p_x·σ (Gaussian)."""
    n_features = check_int("n_features", n_features, minimum=1)
    return float(math.sqrt(sum(k * m.noise_std**2 for m, k, _, _ in _fields(mechanism, n_features))))


def input_box(mechanism: Any, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """The declared box [lower, upper] of the clean inputs (Assumption 2), one entry per feature."""
    parts = _fields(mechanism, check_int("n_features", n_features, minimum=1))
    lo = np.concatenate([np.broadcast_to(l, (k,)) for _, k, l, _ in parts]).astype(float)
    hi = np.concatenate([np.broadcast_to(h, (k,)) for _, k, _, h in parts]).astype(float)
    return lo, hi


def zeta(beta: float, n_samples: int, dim: int, constants: Any = None) -> float:
    """ζ(β) of Thm 2: (log(c₁/β)/(c₂ n))^{1/max(p,2)} if n ≥ log(c₁/β)/c₂, else (...)^{1/a}.

    ``constants = (c1, c2, a)``; None gives 0 (the constants are not explicit, see module doc).
    ``dim`` is p = p_x + p_y. Thm 2 excludes p = 2 (a log factor appears there); we use the same
    expression at p = 2 for continuity.
    """
    beta = check_open_unit("beta", beta)
    n = check_int("n_samples", n_samples, minimum=1)
    p = check_int("dim", dim, minimum=1)
    if constants is None:
        return 0.0
    try:
        c1, c2, a = (float(c) for c in constants)
    except (TypeError, ValueError):
        raise ValidationError("zeta_constants", f"must be None or a triple (c1, c2, a), got {constants!r}") from None
    check_positive("zeta_constants[c1]", c1)
    check_positive("zeta_constants[c2]", c2)
    if not (a > 1 and math.isfinite(a)):
        raise ValidationError("zeta_constants[a]", f"must be a finite real number > 1 (Assumption 1), got {a!r}")
    log_term = math.log(c1 / beta)
    if log_term <= 0:
        return 0.0
    base = log_term / (c2 * n)
    return float(base ** (1.0 / max(p, 2)) if n >= log_term / c2 else base ** (1.0 / a))


def wasserstein_radius(
    mechanism: Any,
    n_features: int,
    n_samples: int = 1,
    *,
    beta: float = 0.05,
    zeta_constants: Any = None,
    n_targets: int = 1,
) -> tuple[float, dict[str, float]]:
    """ρ = ζ(β) + √E‖w‖² and its parts ``{"zeta": ζ, "noise": √E‖w‖²}`` (Thms 2-4; Thm 5 with ζ → 0)."""
    if mechanism is None:
        raise ValidationError(
            "mechanism",
            "is required to compute rho='auto' (the radius comes from the mechanism "
            "that produced the noisy inputs); pass the mechanism or a numeric rho",
        )
    noise = noise_radius(mechanism, n_features)
    z = zeta(beta, n_samples, n_features + n_targets, zeta_constants)
    return z + noise, {"zeta": z, "noise": noise}
