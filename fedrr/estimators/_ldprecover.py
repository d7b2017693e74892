"""LDPRecover (Sun, Ye, Hu, Duan, Wo, Xu & Yang, "LDPRecover: Recovering Frequencies from Poisoning
Attacks against Local Differential Privacy", ICDE 2024, arXiv:2403.09351) on one debiased frequency
vector, as ``LDPNaiveBayes(robust="ldprecover")`` applies it to each attribute's (x_j, y) pair table.

The three steps, with the paper's notation (n genuine and m malicious users, η = m/n):

1. genuine-frequency estimator. The poisoned vector is the users' mixture
   f̃_Z = (n f̃_X + m f̃_Y)/(n + m), so f̂_X = (1 + η) f̃_Z − η f̃_Y (``genuine_estimate``: exact when f̃_Y
   is the malicious users' own debiased frequencies: the paper's genuine-frequency estimator);
2. malicious statistics learned from the protocol (its "adaptive attack"): every malicious report
   supports one item, so the malicious frequencies sum to Σ_v f̃_Y(v) = (1 − K·b)/(a − b)
   (``malicious_mass``: a = P(report supports v | x = v), b the same for x ≠ v; 1 for k-RR, whatever
   the report), and, the targets being unknown, that mass is spread evenly over D_1 = {v : f̃_Z(v) > 0}
   (the items the attack can have promoted) and is 0 on D_0 = {v : f̃_Z(v) ≤ 0};
3. constraint inference (CI): the recovered f' minimises Σ_v (f'(v) − f̂_X(v))² subject to
   Σ_v f'(v) = 1 and f'(v) ≥ 0, whose KKT solution is the Euclidean projection onto the simplex
   (``project_to_simplex``).

What was read and what was not: the paper's full text was not readable from this workplace (only its
abstract); steps 1–3 above follow the abstract's three components, the algebra of the mixture (checked
numerically in tests/test_ldprecover.py) and the D_0 / D_1 split and malicious mass of a public
re-implementation (Li et al.'s MDPA code, ``post_process/LDPRecover.py``, whose comments name D_0 and
D_1 "in paper" but whose code divides the mass by the whole domain's size; fedrr follows the D_1
reading), so the paper's equation numbers are not cited here and the D_1 spreading is the least
certain step. LDPRecover* (the paper's variant that adds known attack details, e.g. the
target items, as constraints) is not built: fedrr's defences are compared without attack knowledge.

Mapping onto paired pair tables (the narrowest choice, fedrr's): one vector per attribute j, its
K = k_j·C pair cells debiased by j's pair oracle (k-RR, OUE or OLH at the pair ε: a and b are that
oracle's). The estimator needs η, which the abstract does not say how the server learns (the
re-implementation takes it as an argument); fedrr's server does not know it, so
``LDPNaiveBayes(recover_eta="counts")`` estimates
each table's own ratio from the attribute-sampling counts: honest clients release an attribute at a
rate that does not depend on their data, so the median count over attributes estimates an honest
table's count and m̂_j = max(n_j − median_k n_k, 0) (η_j = m̂_j/(n_j − m̂_j)); fakes at the honest
sampling rate then go unseen (η_j ≈ 0) and an honest pool gets the small η_j of its sampling noise.
A number η ≥ 0 applies one given η (the whole pool's m/n) to every table instead."""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..mechanisms import LocalHashing, MatrixMechanism, UnaryEncoding
from ._frequencies import project_to_simplex


def malicious_mass(oracle) -> float:
    """Σ_v f̃_Y(v): the debiased mass of reports that each support exactly one item, (1 − K·b)/(a − b),
    for the oracle's a = P(supports v | x = v) and b = P(supports v | x ≠ v) on its K values. For k-RR
    (any matrix oracle) every report's debiased one-hot sums to 1, so the mass is 1."""
    if isinstance(oracle, MatrixMechanism):
        return 1.0
    if isinstance(oracle, UnaryEncoding):
        a, b = float(oracle.p), float(oracle.q)
    elif isinstance(oracle, LocalHashing):
        a, b = float(oracle.p), float(oracle.q_star)
    else:
        raise ValidationError(
            "robust",
            f"'ldprecover' needs a k-RR, unary-encoding or local-hashing pair oracle, got {type(oracle).__name__}",
        )
    return (1.0 - oracle.k * b) / (a - b)


def positive_items(f_z: np.ndarray) -> np.ndarray:
    """D_1 = {v : f̃_Z(v) > 0} as a mask (the largest cells if none is positive)."""
    f_z = np.asarray(f_z, float)
    d1 = f_z > 0
    return d1 if d1.any() else f_z == f_z.max()


def learned_malicious(f_z: np.ndarray, mass: float) -> np.ndarray:
    """f̃_Y learned without attack details: ``mass`` spread evenly over D_1 (``positive_items``), 0 on D_0."""
    d1 = positive_items(f_z)
    return np.where(d1, mass / d1.sum(), 0.0)


def genuine_estimate(f_z: np.ndarray, f_y: np.ndarray, eta: float) -> np.ndarray:
    """f̂_X = (1 + η) f̃_Z − η f̃_Y: the genuine users' frequencies from the poisoned ones (step 1)."""
    return (1.0 + eta) * np.asarray(f_z, float) - eta * np.asarray(f_y, float)


def ldprecover(f_z: np.ndarray, eta: float, mass: float) -> np.ndarray:
    """LDPRecover on one poisoned debiased frequency vector (last axis): the genuine estimate with the
    learned malicious frequencies, then the CI step (projection onto the simplex)."""
    f_z = np.asarray(f_z, float)
    return project_to_simplex(genuine_estimate(f_z, learned_malicious(f_z, mass), eta))


def count_eta(n_released: np.ndarray) -> np.ndarray:
    """η_j per attribute from the attribute-sampling counts (module docstring): m̂_j = max(n_j − median, 0),
    η_j = m̂_j/(n_j − m̂_j)."""
    n = np.asarray(n_released, float)
    m = np.maximum(n - np.median(n), 0.0)
    return m / (n - m)


def recover_tables(tables: list[np.ndarray], oracles: list, n_released: np.ndarray, eta) -> tuple:
    """LDPRecover on every attribute's debiased pair table (k_j, C): returns the recovered tables (on the
    simplex), η_j (F,), the malicious mass per table (F,) and |D_1| per table (F,)."""
    etas = count_eta(n_released) if isinstance(eta, str) else np.full(len(tables), float(eta))
    out, masses, support = [], [], []
    for t, o, e in zip(tables, oracles, etas):
        mass = malicious_mass(o)
        out.append(ldprecover(t.ravel(), float(e), mass).reshape(t.shape))
        masses.append(mass)
        support.append(int(positive_items(t.ravel()).sum()))
    return out, etas, np.array(masses), np.array(support)
