"""ε of a Gaussian record: per-feature noise added up by basic composition against one joint
analytic Gaussian on the record's L2 sensitivity — the same noise, two accountings.

Setting (Barber 2020 §6.1): MNIST, D = 784 pixels, x̃_i = x_i + N(0, σ²) per pixel (eq 67) with
σ² ∈ {0.5, 0.1}, labels flipped with p_f = 0.2. The paper states no (ε, δ) at all; fedrr reads pixels
as state/255 in [0, 1] (sensitivity 1 per pixel, L2 sensitivity √784 = 28 for the image) and uses
δ = 1e-5 (configs/barber_6_1.toml).

- per-feature: each pixel is an analytic Gaussian mechanism (Balle & Wang 2018, Thm 8) with its σ at
  δ = 1e-5 and sensitivity 1; the record composes them (``RecordMechanism``): ε = 784·ε_pixel,
  δ = 784·1e-5 = 7.84e-3.
- joint: the image is one Gaussian mechanism N(0, σ²I) on [0, 1]^784, L2 sensitivity 28, at
  δ = 1e-5 (Thm 8 with Δ = 28) — and at δ = 7.84e-3, the per-feature record's δ, for a like-for-like
  comparison. The noise is identical in both rows: only the accounting differs.
- label: binary randomised response, ε = ln(0.8/0.2) = 1.386 (δ = 0), added in the record column.

    python simulations/gaussian_accounting.py
"""

from __future__ import annotations

import math

import numpy as np

from fedrr.mechanisms import GaussianMechanism, RandomizedResponse, RecordMechanism

D = 784
DELTA = 1e-5
LABEL_FLIP = 0.2
VARIANCES = (0.5, 0.1)


def accounting(variance: float, n_features: int = D, delta: float = DELTA) -> dict[str, float]:
    """ε of the features of one record with Gaussian noise of this variance on every feature in [0, 1]."""
    sigma = math.sqrt(variance)
    pixel = GaussianMechanism(sigma=sigma, delta=delta)
    per_feature = RecordMechanism(pixel, n_features=n_features)
    box = dict(lower=np.zeros(n_features), upper=np.ones(n_features))
    joint = GaussianMechanism(sigma=sigma, delta=delta, **box)
    joint_same_delta = GaussianMechanism(sigma=sigma, delta=per_feature.delta, **box)
    return {
        "sigma": sigma,
        "eps_pixel": pixel.epsilon,
        "eps_basic": per_feature.epsilon,
        "delta_basic": per_feature.delta,
        "eps_joint": joint.epsilon,
        "eps_joint_same_delta": joint_same_delta.epsilon,
    }


def main() -> int:
    label = RandomizedResponse(2, LABEL_FLIP).epsilon
    print(
        f"Barber §6.1: D = {D} pixels in [0, 1], δ = {DELTA:g} per mechanism, label flip {LABEL_FLIP} (ε {label:.3f})"
    )
    print()
    print("| σ² | σ | ε per pixel | basic composition ε (δ) | joint analytic ε (δ 1e-5) | joint ε at the same δ |")
    print("|---|---|---|---|---|---|")
    for v in VARIANCES:
        a = accounting(v)
        print(
            f"| {v:g} | {a['sigma']:.4f} | {a['eps_pixel']:.4f} | {a['eps_basic']:,.1f} ({a['delta_basic']:.3g}) "
            f"| {a['eps_joint']:,.1f} | {a['eps_joint_same_delta']:,.1f} |"
        )
    print()
    print("Per record (+ label):", end="")
    for v in VARIANCES:
        a = accounting(v)
        print(
            f"  σ² = {v:g}: {a['eps_basic'] + label:,.1f} by basic composition, {a['eps_joint'] + label:,.1f} joint",
            end=";",
        )
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
