"""Mironov's snapping mechanism: a Laplace release hardened against the floating-point attack.

The attack (Mironov 2012, "On significance of the least significant bits for differential
privacy", CCS'12, §3–4; see ``fedrr.mechanisms.fp_attack``): textbook Laplace sampling
x ⊕ b⊗log(U) in doubles, with U on a 2⁻⁵³ grid, reaches a *sparse, input-dependent* set of
doubles, so the low-order bits of one release can rule out candidate inputs with certainty —
an ∞ privacy loss that the real-number analysis (ε = Δ/b) does not see. numpy's
``Generator.laplace`` is such a sampler, and so is ``LaplaceMechanism.release``.

The fix implemented here is Mironov's snapping mechanism (§5.2) for a sensitivity-1 query:

    f̃(D) = clamp_B( ⌊ clamp_B(f(D)) ⊕ S ⊗ λ ⊗ LN(U*) ⌉_Λ )

* U* uniform over the doubles in (0, 1), each with probability equal to its spacing (exponent
  geometric, 52-bit significand uniform: ``uniform_double``), S a uniform random sign;
* LN a logarithm (see the assumptions below), ⊕ ⊗ IEEE-754 double operations;
* Λ the smallest power of 2 ≥ λ, ⌊·⌉_Λ rounding to the nearest multiple of Λ (exact in
  floating point: v/Λ and k·Λ only change the exponent);
* clamp_B clamping to [−B, B].

Mironov's Theorem (last line of the proof in §5.2): f̃ is ((1 + 12Bη)/λ + 2η)-DP, η the machine
epsilon, which for λ < B < 2⁴⁶λ gives the simplified statement (1/λ + 2⁻⁴⁹B/λ)-DP. (The exact form
is as quoted from the paper's proof by C. Covington, "Snapping mechanism notes", Harvard Privacy
Tools Project, and matches the simplified form since 12η < 2⁻⁴⁹ and 2η < 4ηB/λ; the paper itself
was not available to us.)

How one feature in [lower, upper] is mapped onto that theorem (``SnappingLaplaceMechanism``):

1. normalise: z = clip( (x ⊖ mid) ⊘ Δ, −½, ½ ), mid = lower + (upper − lower)/2, Δ = upper − lower
   (all in doubles). This is a deterministic pre-processing of the input; the clip makes
   |z − z'| ≤ 1 hold *exactly* for any two inputs, so the sensitivity-1 theorem applies without
   any argument about scaling by a non-power-of-2 Δ;
2. B = M·Λ with M = max(2, ⌈(½ + tail·λ)/Λ⌉) (``tail`` = 40 by default): B ≥ ½ so the inner clamp
   never binds, B > λ, and outputs are clamped only when the noise exceeds ~tail·λ
   (probability ≤ e^{−tail}/2 ≈ 2·10⁻¹⁸ at the default);
3. release the grid point k·Λ (|k| ≤ M) decoded to the feature's units as mid ⊕ k⊗(Δ·Λ): a fixed,
   input-independent post-processing of k (its low-order bits are a function of k only).

ε accounting (``snapping_epsilon``, ``calibrate``): with η' = 2⁻⁵² (twice the unit round-off
η = 2⁻⁵³ that Mironov uses, see the LN assumption) the stated guarantee is

    ε_stated = (1 + 12·B·η')/λ + 2η'          (λ, B in normalised units, sensitivity 1)

and λ is chosen so that ε_stated ≤ ε_requested: since B < ½ + (T + 2)λ with T = max(tail, 2),
ε_stated ≤ (1 + 6η')/λ + 12η'(T + 2) + 2η', so

    λ = (1 + 6η') / (ε − 12η'(T + 2) − 2η')

(rounded up to the next double until the exact rational value of ε_stated is ≤ ε). This inflates
λ over the Laplace scale 1/ε by a factor ≈ 1 + 512η'/ε (1 + 1.1·10⁻¹³ at ε = 1). ``epsilon``
reports ε_stated (rounded up), never the requested value. The conditions λ < B < 2⁴⁶λ are checked.

Utility cost: the noise scale is Laplace's, but the output is rounded to a grid of spacing
Λ ∈ [λ, 2λ): the rounding adds at most Λ²/12 < λ²/3 to the variance 2λ² (≤ +17%). Because of the
tiny inflation, λ lies just above a power of 2 whenever ε is a power of 2 (ε = 1, 2, ½, …), which
is the coarse end, Λ ≈ 2λ.

Assumptions, stated honestly:

* LN: Mironov assumes a correctly rounded log (crlibm). We use the C library's ``log`` (glibc's
  has a documented error below 1 ulp; it is what numpy's own samplers call) through
  ``math.log``. A log within 1 ulp has relative error ≤ 2η, which is why η' = 2η is used
  everywhere in the formula — our conservative adaptation, assuming the proof uses only relative
  error bounds of each operation (every bound doubled); it is not a statement of the paper. numpy's
  SIMD ``np.log`` is *not* used: on this AVX-512 machine it differs from the C library's in ~0.3%
  of inputs.
* The randomness (``rng``) is a cryptographically adequate source in deployment (OS entropy); this
  module does not defend against timing side channels (Jin et al. 2022) beyond not branching on x.
* The server-side pmf (``log_likelihood``) is the real-arithmetic pmf of the snapped output: the
  Laplace(z, λ) mass of the rounding cell of k (the end cells get the tails). Mironov's analysis
  bounds the floating-point pmf within a factor e^{±(12Bη'/λ + 2η')} of it (≈ 10⁻¹³).

Only width-1 (scalar) fields are supported; ``harden`` splits a Laplace block of width d into d
snapped scalar fields with ε_j = ε·r_j / max(Δ₁, Σr) (r_j the ranges), so Σε_j ≤ ε.

Not hardened: Gaussian noise (``GaussianMechanism``) has the same class of floating-point
weakness (Jin et al. 2022, "Are we there yet? Timing and floating-point attacks on differential
privacy systems", IEEE S&P); the fix is a discrete Gaussian sampler (Canonne, Kamath & Steinke
2020), which fedrr does not implement. ``harden(..., strict=True)`` refuses such records.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.stats import truncnorm

from .._validation import check_broadcast, check_positive, check_rng
from ..errors import ValidationError
from .base import Mechanism, register
from .continuous_posteriors import _truncnorm_sample, log1mexp, log_normal_mass, prior_parts
from .numeric import GaussianMechanism, LaplaceMechanism, _AdditiveNoise, _bounds
from .record import RecordMechanism

#: η' = 2⁻⁵²: twice the unit round-off 2⁻⁵³ (covers a log with error < 1 ulp, see module doc)
ETA = 2.0**-52
#: default output clamp: B ≈ ½ + tail·λ (normalised units)
DEFAULT_TAIL = 40.0

_LOG_HALF = math.log(0.5)


# ------------------------------------------------------------------------------ sampling
def libm_log(u: Any) -> np.ndarray:
    """Elementwise natural log by the C library (``math.log``): the same function numpy's C
    samplers (``Generator.laplace``) call, unlike the SIMD ``np.log`` ufunc."""
    arr = np.asarray(u, dtype=float)
    flat = arr.ravel().tolist()
    return np.fromiter(map(math.log, flat), dtype=float, count=len(flat)).reshape(arr.shape)


def _bit_length(w: np.ndarray) -> np.ndarray:
    """Exact bit length of uint64 words (0 for 0), via two exact 32-bit halves and frexp."""
    hi = (w >> np.uint64(32)).astype(np.float64)
    lo = (w & np.uint64(0xFFFFFFFF)).astype(np.float64)
    _, e_hi = np.frexp(hi)
    _, e_lo = np.frexp(lo)
    return np.where(hi > 0, 32 + e_hi, e_lo).astype(np.int64)


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)


def uniform_double(rng: np.random.Generator, size: Any = None) -> np.ndarray:
    """Mironov's U*: uniform over the doubles in (0, 1), each double u output with probability
    equal to the length of [u, next double), i.e. U* = (1.m₁…m₅₂)₂ · 2⁻ᵉ with e ~ Geometric(½) on
    {1, 2, …} and a uniform 52-bit significand. Unlike ``rng.random()`` (multiples of 2⁻⁵³) every
    double of (0, 1) with exponent ≥ −1022 is reachable; e is capped at 1022 (probability 2⁻¹⁰²²).
    Vectorised; returns an array of shape ``size`` (a 0-d array for size=None)."""
    check_rng("rng", rng)
    shape = () if size is None else tuple(np.atleast_1d(size).astype(int).tolist())
    n = int(np.prod(shape)) if shape else 1
    # exponent: 1 + number of leading zero bits of a stream of fair bits
    e = np.ones(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        w = _words(rng, todo.size)
        e[todo] += 64 - _bit_length(w)
        todo = todo[w == 0]  # 64 zero bits: keep counting (probability 2⁻⁶⁴)
    e = np.minimum(e, 1022)
    mant = _words(rng, n) >> np.uint64(12)  # 52 uniform bits
    sig = (mant | np.uint64(1 << 52)).astype(np.float64)  # exact: < 2⁵³
    return np.ldexp(sig, -(52 + e)).reshape(shape)


def random_sign(rng: np.random.Generator, size: Any = None) -> np.ndarray:
    """S: ±1.0 with probability ½ each."""
    return rng.integers(0, 2, size=size).astype(float) * 2.0 - 1.0


# ------------------------------------------------------------------------------ accounting
def next_power_of_two(v: float) -> float:
    """Λ: the smallest power of 2 ≥ v (v > 0), exactly."""
    m, e = math.frexp(float(v))
    return float(v) if m == 0.5 else math.ldexp(1.0, e)


def _exact_epsilon(lam: float, bound: float, eta: float) -> Fraction:
    return (1 + 12 * Fraction(bound) * Fraction(eta)) / Fraction(lam) + 2 * Fraction(eta)


def _round_up(q: Fraction) -> float:
    f = float(q)
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def snapping_epsilon(lam: float, bound: float, eta: float = ETA) -> float:
    """Mironov's guarantee for a sensitivity-1 query, (1 + 12·B·η)/λ + 2η, rounded up."""
    return _round_up(_exact_epsilon(lam, bound, eta))


def _grid_bound(lam: float, Lam: float, tail: float) -> int:
    return max(2, math.ceil((0.5 + tail * lam) / Lam))


def calibrate(epsilon: float, tail: float = DEFAULT_TAIL, eta: float = ETA) -> dict:
    """Normalised parameters of a snapped release whose stated ε is ≤ ``epsilon``:
    {"lam": λ, "Lambda": Λ, "M": M, "bound": B = M·Λ, "epsilon": stated ε}."""
    eps = check_positive("epsilon", epsilon)
    tail = check_positive("tail", tail)
    T = max(tail, 2.0)
    denom = eps - 12 * eta * (T + 2) - 2 * eta
    if not denom > 0:
        raise ValidationError(
            "epsilon",
            f"must exceed {12 * eta * (T + 2) + 2 * eta:.3g} for the snapping mechanism's "
            f"floating-point error terms, got {epsilon!r}",
        )
    lam = (1 + 6 * eta) / denom
    for _ in range(64):
        Lam = next_power_of_two(lam)
        M = _grid_bound(lam, Lam, tail)
        B = M * Lam
        exact = _exact_epsilon(lam, B, eta)
        if exact <= Fraction(eps):
            break
        lam = math.nextafter(lam, math.inf)
    else:  # pragma: no cover - the closed form already satisfies the bound up to rounding
        raise ValidationError("epsilon", f"could not calibrate the snapping mechanism for epsilon={epsilon!r}")
    if not (lam < B < 2.0**46 * lam):
        raise ValidationError(
            "epsilon",
            f"snapping needs λ < B < 2^46·λ (Mironov 2012, Thm 1); got λ={lam:.3g}, "
            f"B={B:.3g} for epsilon={epsilon!r} — epsilon is too large",
        )
    return {"lam": lam, "Lambda": Lam, "M": M, "bound": B, "epsilon": _round_up(exact)}


# ------------------------------------------------------------------------------ pmf pieces
def _cell(k: np.ndarray, Lam: float, M: int) -> tuple[np.ndarray, np.ndarray]:
    """Rounding cell [a, b] of grid index k (normalised units); the end cells take the tails."""
    k = np.asarray(k, dtype=float)
    a = np.where(k <= -M, -np.inf, (k - 0.5) * Lam)
    b = np.where(k >= M, np.inf, (k + 0.5) * Lam)
    return a, b


def log_cell_mass(a: np.ndarray, b: np.ndarray, z: np.ndarray, lam: float) -> np.ndarray:
    """log P(z + Lap(λ) ∈ [a, b]) for a < b (a may be −inf, b +inf), stable in the tails."""
    a, b, z = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float), np.asarray(z, float))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        width = b - a
        tail_factor = log1mexp(-width / lam)  # log(1 − e^{−(b−a)/λ}); 0 for an infinite cell
        right = _LOG_HALF - (a - z) / lam + tail_factor  # z ≤ a: the cell is right of z
        left = _LOG_HALF - (z - b) / lam + tail_factor  # z ≥ b: the cell is left of z
        ea = np.where(np.isfinite(a), np.exp(-(z - a) / lam), 0.0)
        eb = np.where(np.isfinite(b), np.exp(-(b - z) / lam), 0.0)
        inside = np.log1p(-0.5 * ea - 0.5 * eb)
    return np.where(z <= a, right, np.where(z >= b, left, inside))


# ------------------------------------------------------------------------------ mechanism
@register
class SnappingLaplaceMechanism(_AdditiveNoise):
    """Mironov's snapping mechanism for one bounded numeric feature in [lower, upper].

    ``epsilon`` is the guarantee the release has (Mironov's bound, ≤ the requested ε given here,
    see the module docstring for the formula); ``requested_epsilon`` is what was asked for.
    The release is one of 2M+1 fixed values mid + k·step (k = −M..M, step = Δ·Λ): the noisy
    value snapped to a grid of spacing Λ·(upper − lower) ∈ [λ, 2λ)·Δ, clamped to ±B.
    ``log_likelihood`` is the exact (real-arithmetic) log pmf of k; ``posterior`` is exact for
    HistogramPrior and GaussianPrior priors (closed-form masses, exact sampling).
    """

    kind = "snapping_laplace"
    noise_family = "snapped_laplace"

    def __init__(self, epsilon: float, lower: Any = 0.0, upper: Any = 1.0, *, tail: float = DEFAULT_TAIL):
        self._requested = check_positive("epsilon", epsilon)
        self.tail = check_positive("tail", tail)
        self.lower, self.upper = _bounds(lower, upper)
        if self.lower.shape[0] != 1:
            raise ValidationError(
                "lower",
                f"SnappingLaplaceMechanism covers one feature (width 1), got {self.lower.shape[0]} "
                "bounds; use one mechanism per feature (see fedrr.mechanisms.snapping.harden)",
            )
        lo, hi = float(self.lower[0]), float(self.upper[0])
        self.range = hi - lo  # Δ (double)
        if not math.isfinite(self.range):
            raise ValidationError("upper", f"upper − lower must be finite, got {hi} − {lo}")
        self.mid = lo + 0.5 * self.range
        cal = calibrate(self._requested, self.tail)
        self.lam, self.Lambda, self.M, self.bound = cal["lam"], cal["Lambda"], cal["M"], cal["bound"]
        self._epsilon = cal["epsilon"]
        self.step = self.range * self.Lambda
        # decode(k) = mid ⊕ k⊗step is off by ≤ 2⁻⁵²(|mid| + M·step); it inverts exactly (and is
        # increasing) when that is far below step/2: require |mid|/step + M ≤ 2⁴⁸, and check the ends
        ks = np.array(sorted({-self.M, -self.M + 1, -1, 0, 1, self.M - 1, self.M}))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            grid = self._decode(ks)
            exact = (
                math.isfinite(self.step)
                and self.step > 0
                and abs(self.mid) / self.step + self.M <= 2.0**48
                and np.all(np.isfinite(grid))
                and np.array_equal(self._index_of(grid), ks)
            )
        if not (exact and np.all(np.diff(grid) > 0)):
            raise ValidationError(
                "upper",
                f"the bounds [{lo}, {hi}] are too narrow for their magnitude: the snapped grid "
                "cannot be represented exactly in doubles",
            )

    # --- accounting -------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """Stated guarantee (1 + 12·B·η')/λ + 2η' of one release, ≤ ``requested_epsilon``."""
        return self._epsilon

    @property
    def requested_epsilon(self) -> float:
        return self._requested

    @property
    def noise_scale(self) -> float:
        """Laplace scale before snapping, in the feature's units: Δ·λ."""
        return self.range * self.lam

    @property
    def noise_std(self) -> float:
        """Approximate std of x̃ − x: √(2λ² + Λ²/12)·Δ (rounding treated as uniform, clamping ignored)."""
        return self.range * math.sqrt(2 * self.lam**2 + self.Lambda**2 / 12.0)

    @property
    def support(self) -> np.ndarray:
        """The 2M+1 values a release can take, in increasing order (the same for every input)."""
        return self._decode(np.arange(-self.M, self.M + 1))

    # --- maps -------------------------------------------------------------------------------
    def normalise(self, x: np.ndarray) -> np.ndarray:
        """z = clip((x − mid)/Δ, −½, ½) in doubles: the sensitivity-1 query the theorem is about."""
        return np.clip((np.asarray(x, float) - self.mid) / self.range, -0.5, 0.5)

    def _decode(self, k: np.ndarray) -> np.ndarray:
        return self.mid + np.asarray(k, dtype=float) * self.step

    def _index_of(self, y: np.ndarray) -> np.ndarray:
        return np.rint((np.asarray(y, float) - self.mid) / self.step).astype(np.int64)

    def index(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        """Grid index k of released values (validated: each must be exactly a support value)."""
        xt = super().validate_release(x_tilde, field)
        k = self._index_of(xt)
        bad = (np.abs(k) > self.M) | (self._decode(k) != xt)
        if np.any(bad):
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValidationError(
                field,
                f"a snapped release must be one of the {2 * self.M + 1} grid values mid + k·{self.step!r} "
                f"(|k| ≤ {self.M}); got {float(xt[idx])!r} at index {idx}",
            )
        return k

    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        return self._decode(self.index(x_tilde, field))

    # --- client side ------------------------------------------------------------------------
    def snap_index(self, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The snapping mechanism on normalised inputs z ∈ [−½, ½]: the grid index k."""
        z = np.asarray(z, float)
        u = uniform_double(rng, z.shape)
        s = random_sign(rng, z.shape)
        noise = s * (self.lam * libm_log(u))  # S ⊗ λ ⊗ LN(U*): the sign flip is exact
        v = z + noise  # clamp_B(z) = z since |z| ≤ ½ ≤ B
        return np.clip(np.rint(v / self.Lambda), -self.M, self.M).astype(np.int64)  # exact: Λ is a power of 2

    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        check_rng("rng", rng)
        xx = self.validate_input(x)
        return self._decode(self.snap_index(self.normalise(xx), rng))

    # --- server side ------------------------------------------------------------------------
    def log_pmf_index(self, k: Any, z: Any) -> np.ndarray:
        """log P(k | z): the Laplace(z, λ) mass of k's rounding cell (normalised units)."""
        a, b = _cell(np.asarray(k), self.Lambda, self.M)
        return log_cell_mass(a, b, z, self.lam)

    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        """log P(x̃ | x): a log *probability* (the release is discrete), elementwise/broadcast."""
        k = self.index(x_tilde)
        xx = self.validate_input(x)
        check_broadcast("x", xx, "x_tilde", k)
        return self.log_pmf_index(k, self.normalise(xx))

    def posterior(self, x_tilde: Any, prior: Any):
        """Exact p(x | x̃) ∝ prior(x)·P(k | z(x)) (P constant outside [lower, upper], where the
        input is clamped): ``SnappedPosterior`` for a HistogramPrior, ``SnappedGaussianPosterior``
        for a GaussianPrior."""
        k = self.index(x_tilde)
        kind, a, b = prior_parts(prior, k)
        if kind == "gaussian":
            return SnappedGaussianPosterior(self, k, np.asarray(a, float), np.asarray(b, float))
        return SnappedPosterior(self, k, a, b)

    # --- specs ------------------------------------------------------------------------------
    def to_spec(self) -> dict:
        return {
            "kind": self.kind,
            "epsilon": self._requested,
            "lower": self.lower.tolist(),
            "upper": self.upper.tolist(),
            "tail": self.tail,
        }

    @classmethod
    def from_spec(cls, spec: dict) -> SnappingLaplaceMechanism:
        return cls(spec["epsilon"], spec["lower"], spec["upper"], tail=spec.get("tail", DEFAULT_TAIL))


# ------------------------------------------------------------------------------ posterior
_GL_X, _GL_W = np.polynomial.legendre.leggauss(16)


class SnappedPosterior:
    """p(x | k) ∝ prior(x)·P(k | z(x)) for a piecewise-uniform prior, exact.

    Each prior bin is split at the cell edges a, b of k and at z = ±½ into pieces on which
    P(k | z) is constant (outside the domain, where the input is clamped), e^{(z−a)/λ}·c (left of
    the cell), e^{(b−z)/λ}·c (right of it) or 1 − ½e^{−(z−a)/λ} − ½e^{−(b−z)/λ} (inside); masses
    are closed-form and sampling is exact (inverse CDF, or rejection with acceptance ≥ 0.31 inside).
    Works in normalised units z = (x − mid)/Δ; ``sample``/``logpdf``/``mean`` use the feature's units.
    """

    def __init__(self, mech: SnappingLaplaceMechanism, k: np.ndarray, edges: np.ndarray, probs: np.ndarray):
        self.mech, self.k = mech, k
        lam, Lam, M = mech.lam, mech.Lambda, mech.M
        a, b = _cell(k, Lam, M)
        self.a, self.b = a[..., None, None], b[..., None, None]  # (..., 1, 1)
        t_edges = (edges - mech.mid) / mech.range
        p = t_edges[..., :-1][..., None]  # (..., B, 1)
        q = t_edges[..., 1:][..., None]
        cuts = [np.clip(c, p, q) for c in (np.full_like(p, -0.5), self.a, self.b, np.full_like(p, 0.5))]
        bp = np.sort(np.concatenate(np.broadcast_arrays(p, *cuts, q), axis=-1), axis=-1)  # (..., B, 6)
        self.p, self.q = bp[..., :-1], bp[..., 1:]  # pieces (..., B, 5)
        mid = 0.5 * (self.p + self.q)
        a_, b_ = np.broadcast_to(self.a, mid.shape), np.broadcast_to(self.b, mid.shape)
        self.kind = np.select([mid < -0.5, mid > 0.5, mid <= a_, mid >= b_], [0, 1, 2, 3], 4)  # 4 = inside the cell
        self.log_mass = self._log_piece_mass(a_, b_, lam)  # log ∫_piece P(k|z) dz
        width = (q - p)[..., 0]  # bin widths (normalised)
        log_bin_int = np.logaddexp.reduce(self.log_mass, axis=-1)
        with np.errstate(divide="ignore"):
            lw = np.log(probs) - np.log(width) + log_bin_int
        self._log_norm = np.logaddexp.reduce(lw, axis=-1, keepdims=True)
        self._log_bin = lw - self._log_norm
        with np.errstate(divide="ignore"):
            self._log_density_bin = np.log(probs) - np.log(width)  # prior density in normalised units
        self._t_edges = t_edges

    def _log_piece_mass(self, a, b, lam):
        p, q = self.p, self.q
        d = q - p
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_d = np.log(d)
            c = _LOG_HALF + log1mexp(-(b - a) / lam)  # log of the factor outside the cell (0 tail factor at the ends)
            const_lo = log_d + log_cell_mass(a, b, np.full_like(p, -0.5), lam)
            const_hi = log_d + log_cell_mass(a, b, np.full_like(p, 0.5), lam)
            lm = log1mexp(-d / lam)
            left = c + math.log(lam) + (q - a) / lam + lm  # ∫ e^{(z−a)/λ}: pieces with q ≤ a
            right = c + math.log(lam) + (b - p) / lam + lm  # ∫ e^{(b−z)/λ}: pieces with p ≥ b
            em = -np.expm1(-d / lam)
            ta = np.where(np.isfinite(a), np.exp(-(p - a) / lam) * em, 0.0)
            tb = np.where(np.isfinite(b), np.exp(-(b - q) / lam) * em, 0.0)
            inside = np.log(d - 0.5 * lam * (ta + tb))
            out = np.choose(self.kind, [const_lo, const_hi, left, right, inside])
        return np.where(d > 0, out, -np.inf)

    def bin_proba(self) -> np.ndarray:
        """(..., B): posterior probability that x lies in each prior bin."""
        return np.exp(self._log_bin)

    def logpdf(self, x) -> np.ndarray:
        """log p(x | x̃) in the feature's units."""
        m = self.mech
        z = (np.asarray(x, float) - m.mid) / m.range
        zb = z[..., None]
        te = self._t_edges
        inside = (zb >= te[..., :-1]) & (zb < te[..., 1:])
        log_lik = m.log_pmf_index(self.k, np.clip(z, -0.5, 0.5))[..., None]
        val = np.where(inside, self._log_density_bin + log_lik - self._log_norm, -np.inf)
        return np.max(val, axis=-1) - math.log(m.range)

    def mean(self) -> np.ndarray:
        """E[x | x̃] (16-point Gauss–Legendre on each piece, closed form for exponential pieces)."""
        m = self.mech
        p, q, lam = self.p, self.q, m.lam
        d = q - p
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = d / lam
            small = r < 1e-8
            tail_term = np.where(small, 0.5 * d, d / np.expm1(r))
            mean_left = np.where(small, 0.5 * (p + q), q - lam + tail_term)
            mean_right = np.where(small, 0.5 * (p + q), p + lam - tail_term)
            nodes = 0.5 * (p + q)[..., None] + 0.5 * d[..., None] * _GL_X
            lik = np.exp(m.log_pmf_index(self.k[..., None, None, None], np.clip(nodes, -0.5, 0.5)))
            num = (lik * nodes * _GL_W).sum(-1)
            den = (lik * _GL_W).sum(-1)
            mean_gl = np.where(den > 0, num / den, 0.5 * (p + q))
        piece_mean = np.choose(self.kind, [0.5 * (p + q), 0.5 * (p + q), mean_left, mean_right, mean_gl])
        w = self._piece_weights()
        return m.mid + m.range * np.sum(w * piece_mean, axis=(-1, -2))

    def _piece_weights(self) -> np.ndarray:
        """(..., B, 5): posterior probability of each piece."""
        log_bin_int = np.logaddexp.reduce(self.log_mass, axis=-1, keepdims=True)
        with np.errstate(invalid="ignore"):
            within = np.where(np.isfinite(log_bin_int), np.exp(self.log_mass - log_bin_int), 0.0)
        return within * self.bin_proba()[..., None]

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        base = self.k.shape
        shape = base if size is None else (size,) + base
        w = self._piece_weights()
        nb, npc = w.shape[-2], w.shape[-1]
        flat_w = np.broadcast_to(w.reshape(w.shape[:-2] + (nb * npc,)), shape + (nb * npc,))
        cdf = np.cumsum(flat_w, axis=-1)
        u = rng.random(shape)[..., None] * cdf[..., -1:]
        j = np.minimum((cdf < u).sum(axis=-1), nb * npc - 1)[..., None]

        def pick(arr):
            flat = np.broadcast_to(arr.reshape(arr.shape[:-2] + (nb * npc,)), shape + (nb * npc,))
            return np.take_along_axis(flat, j, axis=-1)[..., 0]

        p, q, kind = pick(self.p), pick(self.q), pick(self.kind)
        a = np.broadcast_to(self.a[..., 0, 0], shape)
        b = np.broadcast_to(self.b[..., 0, 0], shape)
        lam = self.mech.lam
        d = q - p
        v = rng.random(shape)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            em = np.expm1(-d / lam)
            left = q + lam * np.log1p(v * em)  # density ∝ e^{z/λ} on [p, q]
            right = p - lam * np.log1p(v * em)  # density ∝ e^{−z/λ}
        t = np.where(kind == 2, left, np.where(kind == 3, right, p + v * d))
        todo = np.flatnonzero((kind == 4).ravel())
        tf, pf, df, af, bf = t.ravel(), p.ravel(), d.ravel(), a.ravel(), b.ravel()
        while todo.size:  # rejection inside the cell: accept with P(k | z) ≤ 1 (≥ 0.31 there)
            cand = pf[todo] + rng.random(todo.size) * df[todo]
            acc = rng.random(todo.size) < np.exp(log_cell_mass(af[todo], bf[todo], cand, lam))
            tf[todo[acc]] = cand[acc]
            todo = todo[~acc]
        t = np.clip(tf.reshape(shape), p, q)
        return self.mech.mid + self.mech.range * t


class SnappedGaussianPosterior:
    """p(x | k) ∝ N(x; μ, s²)·P(k | z(x)), exact. In normalised units z the real line splits into
    five pieces — z < −½ and z > ½ (P constant: the input is clamped), [−½, a], [a, b], [b, ½]
    (clipped to [−½, ½]) — on which P(k | z) is constant, c·e^{(z−a)/λ}, 1 − ½e^{−(z−a)/λ} −
    ½e^{−(b−z)/λ}, c·e^{(b−z)/λ}: Gaussian × exponential is a shifted Gaussian (mean μ ± s²/λ), so
    every piece mass is a normal-CDF difference (log-space) and sampling is a truncated normal
    (with rejection, acceptance ≥ 0.31, inside the cell)."""

    _KINDS = np.array([0, 2, 4, 3, 1])  # const below, left of cell, inside, right of cell, const above

    def __init__(self, mech: SnappingLaplaceMechanism, k: np.ndarray, mean: np.ndarray, var: np.ndarray):
        self.mech, self.k = mech, k
        lam = mech.lam
        a, b = _cell(k, mech.Lambda, mech.M)
        mu = np.broadcast_to((mean - mech.mid) / mech.range, k.shape)
        s = np.broadcast_to(np.sqrt(var) / mech.range, k.shape)
        self.a, self.b, self.mu, self.s = a, b, mu, s
        ac, bc = np.clip(a, -0.5, 0.5), np.clip(b, -0.5, 0.5)
        h = np.full(k.shape, 0.5)
        inf = np.full(k.shape, np.inf)
        self.p = np.stack([-inf, -h, ac, bc, h], axis=-1)
        self.q = np.stack([-h, ac, bc, h, inf], axis=-1)
        shift = s**2 / lam
        self.loc = np.stack([mu, mu + shift, mu, mu - shift, mu], axis=-1)  # Gaussian of each piece
        sc = s[..., None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            l0 = log_normal_mass((self.p - mu[..., None]) / sc, (self.q - mu[..., None]) / sc)
            lp = log_normal_mass((self.p - (mu + shift)[..., None]) / sc, (self.q - (mu + shift)[..., None]) / sc)
            lm = log_normal_mass((self.p - (mu - shift)[..., None]) / sc, (self.q - (mu - shift)[..., None]) / sc)
            c = _LOG_HALF + log1mexp(-(b - a) / lam)
            half_var = s**2 / (2 * lam**2)
            below = l0[..., 0] + log_cell_mass(a, b, -h, lam)
            above = l0[..., 4] + log_cell_mass(a, b, h, lam)
            left = c + (mu - a) / lam + half_var + lp[..., 1]
            right = c + (b - mu) / lam + half_var + lm[..., 3]
            t1 = _LOG_HALF + (a - mu) / lam + half_var + lm[..., 2]  # ∫ N·½e^{−(z−a)/λ}
            t2 = _LOG_HALF + (mu - b) / lam + half_var + lp[..., 2]  # ∫ N·½e^{−(b−z)/λ}
            self._inside_terms = (l0[..., 2], t1, t2)
            inside = l0[..., 2] + np.log1p(-np.exp(t1 - l0[..., 2]) - np.exp(t2 - l0[..., 2]))
            lmass = np.stack([below, left, inside, right, above], axis=-1)
        self.log_mass = np.where(self.q > self.p, lmass, -np.inf)
        self._log_norm = np.logaddexp.reduce(self.log_mass, axis=-1)

    def piece_proba(self) -> np.ndarray:
        return np.exp(self.log_mass - self._log_norm[..., None])

    def logpdf(self, x) -> np.ndarray:
        m = self.mech
        z = (np.asarray(x, float) - m.mid) / m.range
        log_prior = -0.5 * ((z - self.mu) / self.s) ** 2 - np.log(self.s) - 0.5 * math.log(2 * math.pi)
        return log_prior + m.log_pmf_index(self.k, np.clip(z, -0.5, 0.5)) - self._log_norm - math.log(m.range)

    def mean(self) -> np.ndarray:
        sc = self.s[..., None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):

            def tmean(loc):
                return truncnorm.mean((self.p - loc) / sc, (self.q - loc) / sc, loc=loc, scale=sc)

            m_loc = tmean(self.loc)
            mu = self.mu[..., None]
            shift = (self.s**2 / self.mech.lam)[..., None]
            l0, t1, t2 = self._inside_terms
            w1, w2 = np.exp(t1 - l0), np.exp(t2 - l0)
            m0 = m_loc[..., 2]
            m_minus = tmean(mu - shift)[..., 2]
            m_plus = tmean(mu + shift)[..., 2]
            inside_mean = (m0 - np.nan_to_num(w1 * m_minus) - np.nan_to_num(w2 * m_plus)) / (1 - w1 - w2)
            piece_mean = np.concatenate([m_loc[..., :2], inside_mean[..., None], m_loc[..., 3:]], axis=-1)
            piece_mean = np.where(np.isfinite(piece_mean), piece_mean, 0.0)
        z = np.sum(self.piece_proba() * piece_mean, axis=-1)
        return self.mech.mid + self.mech.range * z

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        base = self.k.shape
        shape = base if size is None else (size,) + base
        cdf = np.broadcast_to(np.cumsum(self.piece_proba(), axis=-1), shape + (5,))
        u = rng.random(shape)[..., None] * cdf[..., -1:]
        j = np.minimum((cdf < u).sum(axis=-1), 4)[..., None]
        pick = lambda arr: np.take_along_axis(np.broadcast_to(arr, shape + (5,)), j, axis=-1)[..., 0]
        p, q, loc = pick(self.p), pick(self.q), pick(self.loc)
        s = np.broadcast_to(self.s, shape)
        z = _truncnorm_sample(p, q, loc, s, shape, rng)
        inside = np.flatnonzero((j[..., 0] == 2).ravel())
        if inside.size:
            zf = z.ravel().copy()
            pf, qf, lf, sf = p.ravel(), q.ravel(), loc.ravel(), s.ravel()
            af = np.broadcast_to(self.a, shape).ravel()
            bf = np.broadcast_to(self.b, shape).ravel()
            lam = self.mech.lam
            todo = inside
            while todo.size:  # accept the truncated-normal proposal with probability P(k | z) ≤ 1
                acc = rng.random(todo.size) < np.exp(log_cell_mass(af[todo], bf[todo], zf[todo], lam))
                todo = todo[~acc]
                if todo.size:
                    zf[todo] = _truncnorm_sample(pf[todo], qf[todo], lf[todo], sf[todo], (todo.size,), rng)
            z = zf.reshape(shape)
        return self.mech.mid + self.mech.range * z


# ------------------------------------------------------------------------------ hardening
def _snap_laplace(mech: LaplaceMechanism) -> list[Mechanism]:
    """A width-d LaplaceMechanism as d snapped scalar fields with Σ stated ε ≤ mech.epsilon:
    coordinate j gets ε_j = ε·r_j / max(Δ₁, Σr) (its share of the L1 budget at the same noise)."""
    r = mech.upper - mech.lower
    denom = max(float(mech.sensitivity), float(r.sum()))
    return [
        SnappingLaplaceMechanism(mech.epsilon * float(r[j]) / denom, float(mech.lower[j]), float(mech.upper[j]))
        for j in range(mech.width)
    ]


def harden(mechanism: RecordMechanism, *, strict: bool = False) -> RecordMechanism:
    """The same record mechanism with every LaplaceMechanism field (features and label) replaced by
    SnappingLaplaceMechanism fields whose stated ε add up to at most the original's, so the
    record's ε never grows (a width-d Laplace block becomes d scalar fields). Other fields are kept;
    GaussianMechanism fields are *not* hardened (no discrete Gaussian in fedrr) — with
    ``strict=True`` they are refused. Idempotent; a record with no Laplace field is returned as is."""
    if not isinstance(mechanism, RecordMechanism):
        raise ValidationError("mechanism", f"must be a RecordMechanism, got {type(mechanism).__name__}")
    fields = [f.mechanism for f in mechanism.fields]
    if strict:
        weak = [type(m).__name__ for m in fields + [mechanism.label] if isinstance(m, GaussianMechanism)]
        if weak:
            raise ValidationError(
                "mechanism",
                f"has fields with no floating-point-hardened sampler: {sorted(set(weak))} "
                "(Gaussian noise; use Laplace fields, which are snapped, or RR)",
            )
    if not any(isinstance(m, LaplaceMechanism) for m in fields + [mechanism.label]):
        return mechanism  # nothing to harden (already snapped, or RR/Gaussian only)
    label = mechanism.label
    if isinstance(label, LaplaceMechanism):
        label = _snap_laplace(label)[0]
    if mechanism._replicated and isinstance(fields[0], LaplaceMechanism):
        return RecordMechanism(_snap_laplace(fields[0])[0], label, n_features=mechanism.n_features)
    if mechanism._replicated:
        return RecordMechanism(fields[0], label, n_features=mechanism.n_features)
    new: list[Mechanism] = []
    for m in fields:
        new.extend(_snap_laplace(m) if isinstance(m, LaplaceMechanism) else [m])
    return RecordMechanism(new, label, n_features=mechanism.n_features)
