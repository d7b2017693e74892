"""Mironov's snapping mechanism: a Laplace release hardened against the floating-point attack.

The attack (Mironov 2012, "On significance of the least significant bits for differential
privacy", CCS'12, §3–4; see ``fedrr.audit.attack_cells``): textbook Laplace sampling
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
from typing import Any

import numpy as np

from .._validation import check_broadcast, check_positive, check_rng, first_true
from ..errors import ValidationError
from ._base import Mechanism, box_spec, register
from ._continuous_posteriors import prior_parts
from ._exact_sampling import (
    DEFAULT_TAIL,
    _cell,
    calibrate,
    libm_log,
    log_cell_mass,
    random_sign,
    uniform_double,
)
from ._numeric import GaussianMechanism, LaplaceMechanism, _AdditiveNoise, _bounds
from ._record import RecordMechanism
from ._snapped_posteriors import SnappedGaussianPosterior, SnappedPosterior


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
                "bounds; use one mechanism per feature (see fedrr.mechanisms.harden)",
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
        if (idx := first_true(bad)) is not None:
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
        return box_spec(self, self._requested, self.lower.tolist(), self.upper.tolist(), tail=self.tail)

    @classmethod
    def from_spec(cls, spec: dict) -> SnappingLaplaceMechanism:
        return cls(spec["epsilon"], spec["lower"], spec["upper"], tail=spec.get("tail", DEFAULT_TAIL))


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
    ``strict=True`` they are refused. Idempotent; a record with no Laplace field is returned as is, and
    so is a ``PairedRecordMechanism`` (its pair oracles are discrete, with exactly realised coins)."""
    from ._paired import PairedRecordMechanism

    if isinstance(mechanism, PairedRecordMechanism):
        return mechanism
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
