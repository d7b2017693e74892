"""Choosing a frequency oracle for a categorical attribute: k-ary randomised response, optimized
unary encoding or optimized local hashing (Wang, Blocki, Li & Jha, USENIX Security 2017, §5).

Wang et al. compare the oracles by Var*, the variance of the frequency estimate of a value whose
true frequency is ≈ 0 (their eq. for Var* per report): RR (e^ε + k − 2)/(e^ε − 1)², OUE and OLH
(with an ideal hash, collision probability 1/g, g = e^ε + 1) 4e^ε/(e^ε − 1)². Hence their rule:
RR when k < 3e^ε + 2, otherwise OUE (or OLH, which has the same variance and a shorter report).

``rule="variance"`` (default) applies the same criterion to the *exact* Var* of the concrete
mechanisms fedrr builds — realised probabilities, integer g, and the exact collision probability
of the ((a·x + b) mod P) mod g family, which is below 1/g — and picks the smallest (ties: RR, then
OUE, then OLH). Because that family collides less often than an ideal hash, OLH's Var* is below
OUE's almost everywhere and below RR's for some k < 3e^ε + 2 (e.g. ε = 1, k = 9: 2.93 vs RR's
3.29, OUE 3.68); tests/test_oracles.py checks the choice against every candidate's
``frequency_variance``. ``rule="wang"`` is the paper's rule verbatim, with OLH instead of OUE when
k > 52 (a unary release is packed into one double).
"""

from __future__ import annotations

import math

from .._validation import check_int, check_positive
from ..errors import ValidationError
from .discrete import MAX_STATES, DiscreteMechanism, RandomizedResponse
from .hashing import LocalHashing
from .unary import MAX_UNARY_STATES, UnaryEncoding

RULES = ("variance", "wang")


def rare_value_variance(mech: DiscreteMechanism) -> float:
    """Exact Var* of one report: the variance of the unbiased frequency estimate of a value with true
    frequency 0, b(1 − b)/(a − b)², a = P(report supports s | x = s), b = the same for x ≠ s."""
    if isinstance(mech, RandomizedResponse):
        a, b = mech.keep_prob, mech.other_prob
    elif isinstance(mech, UnaryEncoding):
        a, b = mech.p, mech.q
    elif isinstance(mech, LocalHashing):
        a, b = mech.p, mech.q_star
    else:
        raise ValidationError(
            "mechanism", f"must be RandomizedResponse, UnaryEncoding or LocalHashing, got {type(mech).__name__}"
        )
    return b * (1 - b) / (a - b) ** 2


def candidates(k: int, epsilon: float) -> list[DiscreteMechanism]:
    """Every oracle that can be built for (k, ε), in tie-break order RR, OUE, OLH."""
    out: list[DiscreteMechanism] = [RandomizedResponse(k, epsilon=epsilon)]
    for make in (lambda: UnaryEncoding(k, epsilon), lambda: LocalHashing(k, epsilon)):
        try:
            out.append(make())
        except ValidationError:  # k > 52 for OUE; ε or k outside what OLH can represent
            pass
    return out


def frequency_oracle(k: int, epsilon: float, *, rule: str = "variance") -> DiscreteMechanism:
    """The frequency oracle for a k-state attribute at ε with the smallest variance for rare values
    (``rule="variance"``), or by Wang et al.'s thresholds (``rule="wang"``); see the module doc."""
    k = check_int("k", k, minimum=2, maximum=MAX_STATES)
    eps = check_positive("epsilon", epsilon)
    if rule not in RULES:
        raise ValidationError("rule", f"must be one of {RULES}, got {rule!r}")
    if rule == "wang":
        if k < 3 * math.exp(eps) + 2:
            return RandomizedResponse(k, epsilon=eps)
        return UnaryEncoding(k, eps) if k <= MAX_UNARY_STATES else LocalHashing(k, eps)
    cands = candidates(k, eps)
    variances = [rare_value_variance(m) for m in cands]
    return cands[min(range(len(cands)), key=lambda i: (variances[i], i))]
