"""Mironov's floating-point attack on naive Laplace sampling, as an exact *reachability* test.

Mironov (2012, "On significance of the least significant bits for differential privacy", CCS'12)
observed that a Laplace sampler computed in doubles from a uniform U on a finite grid reaches only
a sparse set of doubles, and that the set reached from input x differs from the one reached from
x'. A release y for which no sampler state gives fl(x' + noise) = y proves the input was not x'
— a certain exclusion, i.e. an unbounded privacy loss, whatever ε the real-number analysis claims.

The distinguisher here is exact for numpy's ``Generator.laplace`` (hence ``LaplaceMechanism``):

    numpy/random/src/distributions/distributions.c, random_laplace:
        U = next_double()                       # (next_uint64 >> 11) · 2⁻⁵³, i.e. k·2⁻⁵³
        U ≥ 0.5:       loc − scale·log(2.0 − U − U)
        0 < U < 0.5:   loc + scale·log(U + U)   (U = 0 is redrawn)

``numpy_laplace_noise`` replays that arithmetic bit for bit (with the C library's log, as the C
code does; numpy's SIMD ``np.log`` ufunc differs in ~0.3% of inputs). On each branch the released
value fl(x + noise(k)) is non-decreasing in the 53-bit integer k, so "is y reachable from x'?" is a
binary search over k (plus a ±2 window, in case the C log is not monotone somewhere) — ~53 log
evaluations per release, no brute force. The same search decides reachability for the reference
textbook sampler x + S·b·log(U), U = k·2⁻⁵³ (``sampler="textbook"``) and for the snapping
mechanism's own sampler (``snapping_reachable``: search over the bit patterns of U* for each sign).

``exclusion_rate`` measures the fraction of releases from x0 that exclude x1 (soundness is checked
at the same time: a release is never declared unreachable from its true input); ``attack_cells``
measures it for numpy's, the textbook and the snapping sampler over a table of (ε, x0, x1)
(``simulations/fp_laplace_attack.py`` writes that table).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import beta

from .._validation import as_float_array, check_int, check_positive, check_rng
from ..errors import ValidationError
from ..mechanisms import LaplaceMechanism, SnappingLaplaceMechanism, libm_log

TWO53 = 2**53
TWO52 = 2**52
_INV53 = 1.0 / 9007199254740992.0  # numpy's next_double scaling, 2⁻⁵³
SAMPLERS = ("numpy", "textbook")


# ------------------------------------------------------------------------------ samplers
def numpy_laplace_noise(k: Any, scale: float) -> np.ndarray:
    """numpy ``Generator.laplace(0.0, scale)`` for the 53-bit integers k = next_uint64 >> 11 (k ≥ 1),
    replayed operation by operation in IEEE doubles."""
    k = np.asarray(k, dtype=np.int64)
    u = k.astype(np.float64) * _INV53
    hi = u >= 0.5
    arg = np.where(hi, 2.0 - u - u, u + u)
    lg = libm_log(np.where(arg > 0, arg, 1.0))
    return np.where(hi, 0.0 - scale * lg, 0.0 + scale * lg)


def textbook_laplace_noise(k: Any, sign: Any, scale: float) -> np.ndarray:
    """The reference sampler S·(b·log(U)) with U = k·2⁻⁵³ (1 ≤ k < 2⁵³) and S = ±1."""
    u = np.asarray(k, dtype=np.int64).astype(np.float64) * _INV53
    return np.asarray(sign, float) * (scale * libm_log(u))


def textbook_laplace(x: Any, scale: float, rng: np.random.Generator) -> np.ndarray:
    """x + S·b·log(U), U uniform on the 2⁻⁵³ grid: the textbook inverse-CDF Laplace release."""
    check_rng("rng", rng)
    xx = as_float_array("x", x)
    k = rng.integers(1, TWO53, size=xx.shape)
    s = rng.integers(0, 2, size=xx.shape) * 2.0 - 1.0
    return xx + textbook_laplace_noise(k, s, check_positive("scale", scale))


# ------------------------------------------------------------------------------ search
def _reachable_monotone(
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray], target: np.ndarray, lo: int, hi: int, window: int = 2
) -> np.ndarray:
    """For each i: is there an integer k in [lo, hi] with fn(k, i) == target[i]? fn(·, i) must be
    non-decreasing in k. Vectorised binary search for the first k with fn(k) ≥ target, then an
    exact check of that k and its ±window neighbours."""
    n = target.shape[0]
    idx = np.arange(n)
    L = np.full(n, lo, dtype=np.int64)
    H = np.full(n, hi + 1, dtype=np.int64)  # H = hi + 1 means "none found"
    while True:
        act = np.flatnonzero(L < H)
        if act.size == 0:
            break
        mid = L[act] + (H[act] - L[act]) // 2
        ge = fn(mid, idx[act]) >= target[act]
        H[act] = np.where(ge, mid, H[act])
        L[act] = np.where(ge, L[act], mid + 1)
    found = np.zeros(n, dtype=bool)
    for off in range(-window, window + 1):
        k = L + off
        ok = (k >= lo) & (k <= hi) & ~found
        sel = np.flatnonzero(ok)
        if sel.size:
            found[sel] = fn(k[sel], sel) == target[sel]
    return found


def laplace_reachable(y: Any, x: Any, scale: float, sampler: str = "numpy") -> np.ndarray:
    """Boolean array: could the release y have been produced from input x by the floating-point
    Laplace sampler (``"numpy"``: numpy's Generator.laplace as used by LaplaceMechanism.release;
    ``"textbook"``: x + S·b·log(k·2⁻⁵³))? False is a proof that the input was not x."""
    if sampler not in SAMPLERS:
        raise ValidationError("sampler", f"must be one of {SAMPLERS}, got {sampler!r}")
    scale = check_positive("scale", scale)
    yy, xx = np.broadcast_arrays(as_float_array("y", y), as_float_array("x", x))
    shape = yy.shape
    yf, xf = yy.ravel().astype(float), xx.ravel().astype(float)
    if sampler == "numpy":
        branches = [  # (k range, noise(k)) — both non-decreasing in k
            (1, TWO52 - 1, lambda k: numpy_laplace_noise(k, scale)),
            (TWO52, TWO53 - 1, lambda k: numpy_laplace_noise(k, scale)),
        ]
    else:
        branches = [
            (1, TWO53 - 1, lambda k: textbook_laplace_noise(k, 1.0, scale)),  # b·log(U) ≤ 0, increasing
            (1, TWO53 - 1, lambda k: textbook_laplace_noise(TWO53 - k, -1.0, scale)),  # −b·log(U), U = 1 − j·2⁻⁵³
        ]
    out = np.zeros(yf.shape[0], dtype=bool)
    for lo, hi, noise in branches:
        todo = np.flatnonzero(~out)
        if todo.size == 0:
            break

        def fn(k, i, noise=noise, todo=todo):
            return xf[todo[i]] + noise(k)

        out[todo] = _reachable_monotone(fn, yf[todo], lo, hi)
    return out.reshape(shape)


# smallest and largest bit patterns of U* (uniform_double): [2⁻¹⁰²², 1 − 2⁻⁵³]
_U_LO = int(np.float64(2.0**-1022).view(np.int64))
_U_HI = int(np.float64(1.0 - 2.0**-53).view(np.int64))


def snapping_reachable(mech: SnappingLaplaceMechanism, y: Any, x: Any) -> np.ndarray:
    """Boolean array: could the snapped release y come from input x, searching the mechanism's
    actual floating-point sampler over every (S, U*) — U* indexed by its bit pattern (positive
    doubles are ordered like their bit patterns, so the index k is monotone in U*)."""
    if not isinstance(mech, SnappingLaplaceMechanism):
        raise ValidationError("mech", f"must be a SnappingLaplaceMechanism, got {type(mech).__name__}")
    target = mech.index(y)
    z = mech.normalise(mech.validate_input(x))
    target, z = np.broadcast_arrays(target, z)
    shape = target.shape
    tf, zf = target.ravel().astype(np.int64), z.ravel().astype(float)

    def grid_index(zv, noise):
        return np.clip(np.rint((zv + noise) / mech.Lambda), -mech.M, mech.M).astype(np.int64)

    def u_of(bits):
        return np.asarray(bits, dtype=np.int64).view(np.float64)

    branches = [  # S = +1: λ·LN(u) increases with u; S = −1: reverse the order of u
        lambda k: 1.0 * (mech.lam * libm_log(u_of(k))),
        lambda k: -1.0 * (mech.lam * libm_log(u_of(_U_HI + _U_LO - k))),
    ]
    out = np.zeros(tf.shape[0], dtype=bool)
    for noise in branches:
        todo = np.flatnonzero(~out)
        if todo.size == 0:
            break

        def fn(k, i, noise=noise, todo=todo):
            return grid_index(zf[todo[i]], noise(k))

        out[todo] = _reachable_monotone(fn, tf[todo], _U_LO, _U_HI)
    return out.reshape(shape)


# ------------------------------------------------------------------------------ measurement
def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Exact two-sided (1 − α) binomial confidence interval for k successes in n trials."""
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def exclusion_rate(
    mechanism: Any,
    x0: float,
    x1: float,
    n: int,
    rng: np.random.Generator,
    *,
    sampler: str = "numpy",
    alpha: float = 0.05,
) -> dict:
    """Release x0 n times and count the releases that *prove* the input was not x1.

    ``mechanism``: a width-1 LaplaceMechanism (attacked through numpy's sampler, or through the
    textbook sampler with ``sampler="textbook"``) or a SnappingLaplaceMechanism (searched over
    its own sampler). Returns n, excluded, rate, its Clopper–Pearson (1 − α) CI and
    ``false_exclusions`` — releases declared unreachable from their true input x0 (must be 0)."""
    n = check_int("n", n, minimum=1)
    check_rng("rng", rng)
    xs0 = np.full(n, float(x0))
    if isinstance(mechanism, SnappingLaplaceMechanism):
        y = mechanism.release(xs0, rng)
        from_x1 = snapping_reachable(mechanism, y, float(x1))
        from_x0 = snapping_reachable(mechanism, y, float(x0))
    elif isinstance(mechanism, LaplaceMechanism):
        if mechanism.width != 1:
            raise ValidationError("mechanism", "the attack is implemented for width-1 LaplaceMechanism")
        mechanism.validate_input(np.array([x0, x1]))
        if sampler == "numpy":
            y = mechanism.release(xs0, rng)
        else:
            y = textbook_laplace(xs0, mechanism.scale, rng)
        from_x1 = laplace_reachable(y, float(x1), mechanism.scale, sampler)
        from_x0 = laplace_reachable(y, float(x0), mechanism.scale, sampler)
    else:
        raise ValidationError(
            "mechanism", f"must be a LaplaceMechanism or SnappingLaplaceMechanism, got {type(mechanism).__name__}"
        )
    excluded = int(np.sum(~from_x1))
    lo, hi = clopper_pearson(excluded, n, alpha)
    return {
        "n": n,
        "excluded": excluded,
        "rate": excluded / n,
        "ci": (lo, hi),
        "false_exclusions": int(np.sum(~from_x0)),
        "releases": y,
    }


# ------------------------------------------------------------------------- the attack table
#: (ε, x0, x1) cells attacked by ``attack_cells``, domain [0, 1]; 0.3 and nextafter(0.3) differ in the last bit
STANDARD_CELLS = (
    (0.5, 0.0, 1.0),
    (1.0, 0.0, 1.0),
    (1.0, 1.0, 0.0),
    (1.0, 0.25, 0.75),
    (1.0, 0.3, float(np.nextafter(0.3, 1.0))),
    (2.0, 0.0, 1.0),
    (4.0, 0.1, 0.9),
)
#: the samplers attacked in each cell: LaplaceMechanism (numpy), the textbook sampler, snapping
SAMPLER_NAMES = ("numpy Laplace", "textbook Laplace", "snapping")


def attack_cells(cells: Any = STANDARD_CELLS, n: int = 20_000, seed: int = 0, progress: Any = None) -> list[dict]:
    """``exclusion_rate`` of every sampler at every (ε, x0, x1) cell: a LaplaceMechanism(ε, 0, 1)
    through numpy's and through the textbook sampler, and a SnappingLaplaceMechanism at the same
    requested ε. Cell c, sampler s draws from SeedSequence(seed, spawn_key=(c, s)). One row per
    (cell, sampler): epsilon, x0, x1, sampler, n, excluded, rate, ci_low, ci_high,
    false_exclusions, stated_epsilon (the mechanism's own ε), seconds."""
    import time

    rows = []
    for c, (eps, x0, x1) in enumerate(cells):
        for s, sampler in enumerate(SAMPLER_NAMES):
            rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(c, s)))
            if sampler == "snapping":
                mech, kw = SnappingLaplaceMechanism(eps, 0.0, 1.0), {}
            else:
                mech, kw = LaplaceMechanism(eps, 0.0, 1.0), {"sampler": sampler.split()[0]}
            t = time.perf_counter()
            r = exclusion_rate(mech, x0, x1, n, rng, **kw)
            rows.append(
                {
                    "epsilon": eps,
                    "x0": x0,
                    "x1": x1,
                    "sampler": sampler,
                    "n": n,
                    "excluded": r["excluded"],
                    "rate": r["rate"],
                    "ci_low": r["ci"][0],
                    "ci_high": r["ci"][1],
                    "false_exclusions": r["false_exclusions"],
                    "stated_epsilon": mech.epsilon,
                    "seconds": round(time.perf_counter() - t, 2),
                }
            )
            if progress is not None:
                progress(
                    f"ε={eps:<4} x0={x0!r:<6} x1={x1!r:<21} {sampler:<17} excluded {r['excluded']:>6}/{n} "
                    f"= {r['rate']:.4f} [{r['ci'][0]:.4f}, {r['ci'][1]:.4f}]  false={r['false_exclusions']}"
                )
    return rows
