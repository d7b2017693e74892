"""The fake-client defence behind ``LDPNaiveBayes(robust="margins")`` (and spread's ``robust``): a test
of whether every attribute's table gives the same class margin, as attribute sampling makes it for
honest clients (``margin_consistency``), and the fewest reports to drop from a rejected attribute's
table (``margin_trim``)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np


def _reference_margin(per_report: list[np.ndarray]) -> np.ndarray:
    """m̄: the per-class median over the tested attributes (≥ 2 reports) of their class margins."""
    return np.median(np.array([r.mean(axis=0) for r in per_report if r.shape[0] > 1]), axis=0)


def margin_consistency(per_report: list[np.ndarray], alpha: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The cross-attribute consistency test behind ``robust="margins"``. ``per_report[j]`` (n_j, C):
    each report's unbiased contribution to attribute j's class margin P̂_j(c) = Σ_s P̂_j(s, c), whose
    mean is the margin. Honest clients choose which attribute to release independently of their
    data (uniform attribute sampling), so every table estimates the same P(y): m_j = P̂_j(·) differ
    only by sampling noise. Reference: the per-class median over attributes, m̄; statistic
    z_j = max_c |m_j,c − m̄_c| / √(se_j,c² + se_m̄,c²), se_j,c the sample standard deviation of the
    per-report values over √n_j, se_m̄,c² = (π/2)·mean_j se_j,c² / F (the large-sample variance of a
    median). Attribute j is inconsistent when z_j > Φ⁻¹(1 − α/(2FC)) (two-sided, Bonferroni over the
    F attributes and C classes: an honest pool has an attribute rejected with probability ≈ α at most).
    Only attributes with at least 2 reports enter the median and are tested (one report has no
    variance; the others are kept, z 0). Returns (consistent (F,) bool, z (F,), the critical z).
    With fewer than 3 tested attributes, or if every tested one is inconsistent (possible when the
    margins split into two camps, e.g. half the attributes attacked), nothing is dropped: there is
    no majority to hold the others to."""
    C = per_report[0].shape[1]
    F = len(per_report)
    tested = np.array([r.shape[0] > 1 for r in per_report])
    z = np.zeros(F)
    crit = NormalDist().inv_cdf(1.0 - alpha / (2 * F * C))
    keep = np.ones(F, dtype=bool)
    if tested.sum() < 3:
        return keep, z, crit
    rs = [r for r, t in zip(per_report, tested) if t]
    m = np.array([r.mean(axis=0) for r in rs])  # (F', C)
    se2 = np.array([r.var(axis=0, ddof=1) / r.shape[0] for r in rs])
    med = _reference_margin(per_report)
    se2_med = (math.pi / 2) * se2.mean(axis=0) / len(rs)
    with np.errstate(divide="ignore", invalid="ignore"):
        z[tested] = np.nan_to_num(np.abs(m - med) / np.sqrt(se2 + se2_med), nan=0.0).max(axis=1)
    keep = z <= crit
    if not keep[tested].any():
        keep[:] = True
    return keep, z, crit


def margin_trim(per_report: list[np.ndarray], keys: list[np.ndarray], consistent: np.ndarray) -> list[np.ndarray]:
    """The recovery behind ``robust="margins"``, separate from the test (``margin_consistency``
    detects; this decides what to discard): for each rejected attribute j, the fewest reports whose
    removal brings j's class margin back to the reference m̄ (``_reference_margin``), and no others.
    Every report's unbiased margin contribution u_i (``per_report[j]`` rows) is scored along the excess,
    s_i = u_i·d, d = (m_j − m̄)/‖m_j − m̄‖; reports are removed from the highest score down (ties: the
    released value, ``keys[j]``, reported most often first — fakes that all release one crafted value
    make it the most frequent of its score —, then a fixed-seed order) until the kept reports' mean
    along d is at most m̄·d. Returns, per attribute, the indices (into its reports) to discard; empty
    for the consistent ones. Why this bound: removing k reports moves the margin along d by at most
    k·(s_max − m̄·d)/n_j, so k ≥ n_j·Δ_j/(s_max − m̄·d), Δ_j = (m_j − m̄)·d, and taking the largest
    scores first makes k that least number. Fakes at the maximal score (the output attack's crafted
    pair under k-RR) are then removed almost exactly (k ≈ their number plus the honest sampling noise
    of Δ_j); an honest pool, rejected with probability ≤ α, loses the few reports its noise excess needs."""
    out = [np.zeros(0, dtype=np.int64) for _ in per_report]
    if bool(np.all(consistent)):
        return out
    med = _reference_margin(per_report)
    rng = np.random.default_rng(0)
    for j in np.flatnonzero(~np.asarray(consistent, bool)):
        u = per_report[j]
        diff = u.mean(axis=0) - med
        norm = float(np.linalg.norm(diff))
        if norm == 0.0:
            continue
        d = diff / norm
        s = u @ d - float(med @ d)  # each report's excess along d; their sum is n_j Δ_j > 0
        key = np.asarray(keys[j])
        _, inv, counts = np.unique(key, return_inverse=True, return_counts=True, axis=0 if key.ndim == 2 else None)
        order = np.lexsort((rng.permutation(s.size), -counts[inv.ravel()], -np.round(s, 12)))
        need = float(s.sum())
        k = int(np.argmax(np.cumsum(s[order]) >= need * (1 - 1e-12))) + 1  # the first prefix that covers it
        out[j] = np.sort(order[: min(k, s.size)])
    return out
