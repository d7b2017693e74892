"""Bernoulli probabilities that numpy's uniform doubles realise *exactly* (the floating-point lesson
of Mironov 2012, CCS'12, applied to coin flips).

``Generator.random`` returns U = m·2⁻⁵³ for m uniform on {0, …, 2⁵³ − 1} (numpy's ``next_double``:
the top 53 bits of one 64-bit word), so P(U < c) = c *exactly* when c lies on the grid 2⁻⁵³ℤ ∩ [0, 1],
and ⌈c·2⁵³⌉·2⁻⁵³ otherwise. ``Generator.integers`` draws bounded integers exactly uniformly
(Lemire's method with rejection). The oracles of this package (unary encoding, local hashing,
Duchi's mechanism) round every privacy-relevant probability to that grid, in the direction that
never increases ε, and state the ε of the rounded value: the stated ε is the ε of the code that
runs, assuming only that the generator's 64-bit words are uniform.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..errors import ValidationError

#: scale of the uniform-double grid
GRID_SCALE = 2.0**53
#: the realised ε may differ from the requested one by at most this relative amount (else rejected)
MAX_REL_EPSILON_LOSS = 1e-6
#: largest ε the oracles accept (beyond it probabilities like 1/(e^ε + 1) fall below the 2⁻⁵³ grid)
MAX_EPSILON = 30.0


def grid_down(p: float, scale: float = GRID_SCALE) -> float:
    """Largest multiple of 1/scale that is ≤ p (exact: scale is a power of 2)."""
    return math.floor(p * scale) / scale


def grid_up(p: float, scale: float = GRID_SCALE) -> float:
    """Smallest multiple of 1/scale that is ≥ p."""
    return math.ceil(p * scale) / scale


def stated_log1p(r: Fraction) -> float:
    """An upper bound on ln(1 + r) for an exact rational r > −1, within 2⁻⁵⁰ relative: float(r) is
    correctly rounded (2⁻⁵³ relative, which moves log1p by at most as much), the C library's log1p
    is within 1 ulp; the result is inflated by 2⁻⁵⁰ to cover both. Every oracle states its ε this way
    from the exact ratio of its realised probabilities, so the stated ε is never below the true one."""
    return math.log1p(float(r)) * (1.0 + 2.0**-50)


def check_realised_epsilon(requested: float, realised: float, what: str) -> float:
    """The (stated) ε of the rounded probabilities must be within MAX_REL_EPSILON_LOSS below the
    requested one (and above it by no more than the 2⁻⁵⁰ of ``stated_log1p``); otherwise the requested
    ε is outside the representable range."""
    if not (0.0 < realised <= requested * (1 + 1e-14)) or requested - realised > MAX_REL_EPSILON_LOSS * requested:
        raise ValidationError(
            "epsilon",
            f"{requested!r} cannot be realised exactly by {what}: rounding its probabilities to the "
            f"2^-53 grid of uniform doubles gives ε = {realised!r} (more than {MAX_REL_EPSILON_LOSS:g} "
            "relative below the request); use a larger ε or one <= "
            f"{MAX_EPSILON:g}",
        )
    return realised


def check_epsilon(value: object) -> float:
    """A finite ε in (0, MAX_EPSILON]."""
    from .._validation import check_positive

    eps = check_positive("epsilon", value)
    if eps > MAX_EPSILON:
        raise ValidationError("epsilon", f"must be a real number in (0, {MAX_EPSILON:g}], got {value!r}")
    return eps


def as_packed_release(field: str, value: object, upper: float, what: str):
    """A float array of exact integers in [0, upper) (a packed oracle release); bools rejected."""
    import numpy as np

    from .._validation import as_array, as_float_array, first_true

    raw = as_array(field, value, "must be an array of packed releases (integers stored as floats)")
    if raw.dtype.kind == "b":
        raise ValidationError(field, f"must hold {what} (integers in [0, {upper:.0f})), got booleans")
    arr = as_float_array(field, raw)
    bad = (arr != np.floor(arr)) | (arr < 0) | (arr >= upper)
    if (idx := first_true(bad)) is not None:
        raise ValidationError(field, f"must hold {what}: integers in [0, {upper:.0f}); got {arr[idx]!r} at index {idx}")
    return arr
