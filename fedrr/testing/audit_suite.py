"""fedrr's audit suite: every mechanism fedrr ships, audited with ``audit_mechanism`` at sample
sizes chosen so an honest claim is certified close to its ε, plus deliberately mis-calibrated
mechanisms (``fedrr.testing.misclaimed``) that the same audit must FAIL — the negative controls
that show the audit has power.

Cases (``standard_cases``) and sample sizes:

* RR k ∈ {2, 10, 256} at ε ∈ {0.5, 1, 4}, and k = 256 at the MNIST pixel flips 0.1 and 0.4:
  n per sampled state = ``samples_needed`` for ε̂ ≥ 0.9ε with probability ≥ 1 − 1e-6, capped at
  ``rr_cap``; every state is sampled for k ≤ 16, the exact worst pair for k = 256;
* Laplace (width 1, width 5), Gaussian analytic (width 1, width 5, ε = 4), classic, Farokhi:
  2·10⁶ draws per input (10⁷ for Gaussian rows; 10 % pilot to choose the threshold sets);
* records: 3 binary RR features + RR label; RR(4) + Laplace + RR label; 16 binary "pixels" +
  label; RR + Laplace block + Gaussian + label (δ > 0: no exact value); 2·10⁶ draws per record.
* paired releases (``PairedRecordMechanism``): 3 attributes (k 2, 3, 4; C = 2) with one sampled pair
  by RR, OUE and OLH at ε 1, and two sampled pairs (ε/2 each) by "auto"; 2·10⁶ draws per record; the
  negative control ``HalfClaimPaired`` claims half the ε of an honest paired release and must FAIL.
* triple releases (``TripleRecordMechanism``): the same attributes, one (attribute, attribute, label)
  triple by RR and by OLH at ε 1; the negative control ``HalfClaimTriple`` must FAIL.
  A 784-pixel MNIST record is not audited jointly: its claimed ε = 785·ε_pixel is far above what a
  sampled audit can certify (≈ log n), so the informative checks are the per-field audits and the
  exact composition, which the small records confirm.

``quick`` uses 10× fewer draws for the continuous and record cases (a smoke test).
``run_cases`` audits each case with its own generator, SeedSequence(seed, spawn_key=(i,)), and
reports whether the outcome is the expected one."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..audit import DEFAULT_ALPHA, audit_mechanism, samples_needed
from ..errors import FedrrError
from ..mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
    TransitionMatrix,
    TripleRecordMechanism,
)


class HalfClaimPaired(PairedRecordMechanism):
    """A paired release that claims half its true ε (a negative control for the audit; never use it)."""

    @property
    def epsilon(self) -> float:
        return 0.5 * super().epsilon


class HalfClaimTriple(TripleRecordMechanism):
    """A triple release that claims half its true ε (a negative control for the audit; never use it)."""

    @property
    def epsilon(self) -> float:
        return 0.5 * super().epsilon


@dataclass(frozen=True)
class AuditCase:
    """One audit of the suite: what is audited, with how many draws per input, and whether it
    must PASS (an honest claim) or FAIL (a negative control)."""

    group: str
    name: str
    mechanism: object
    n_samples: int
    expect_pass: bool
    note: str = ""


def rr_samples(mech: RandomizedResponse, frac: float, alpha: float, cap: int) -> int:
    """Draws per sampled state for the audit of ``mech`` to certify ε̂ ≥ frac·ε with probability
    ≥ 1 − 1e-6 (``samples_needed``; every state sampled for k ≤ 16, else the worst pair), at most
    ``cap`` (also when no n below ``samples_needed``'s limit would do)."""
    m = mech.k if mech.k <= 16 else 2
    try:
        n = samples_needed(
            mech.keep_prob, mech.other_prob, frac * mech.epsilon, n_intervals=2 * mech.k * m, alpha=alpha
        )
    except FedrrError:  # target not certifiable below n_max
        n = cap
    return int(min(n, cap))


def standard_cases(quick: bool = False, alpha: float = DEFAULT_ALPHA, rr_cap: int = 10_000_000) -> list[AuditCase]:
    """The suite (see the module docstring), in report order."""
    from .misclaimed import MisclaimedMechanism, undercalibrated

    s = 0.1 if quick else 1.0
    n_cont, n_gauss, n_rec = int(s * 2_000_000), int(s * 10_000_000), int(s * 2_000_000)
    C = AuditCase
    cases = []
    for k in (2, 10, 256):
        for eps in (0.5, 1.0, 4.0):
            m = RandomizedResponse(k, epsilon=eps)
            cases.append(C("discrete", f"RR k={k} ε={eps:g}", m, rr_samples(m, 0.9, alpha, rr_cap), True))
    for flip in (0.1, 0.4):
        m = RandomizedResponse(256, flip)
        cases.append(C("discrete", f"RR k=256 flip={flip} (MNIST pixel)", m, rr_samples(m, 0.9, alpha, rr_cap), True))
    cases.append(
        C("discrete", "TransitionMatrix binary p10=0.1 p01=0.3", TransitionMatrix.binary(0.1, 0.3), 200_000, True)
    )

    cases += [
        C("additive", "Laplace ε=1 [0,1]", LaplaceMechanism(1.0, 0.0, 1.0), n_cont, True),
        C("additive", "Laplace ε=4 [0,1]", LaplaceMechanism(4.0, 0.0, 1.0), n_cont, True),
        C("additive", "Laplace ε=1 block width 5 [0,1]^5", LaplaceMechanism(1.0, [0.0] * 5, [1.0] * 5), n_cont, True),
        C(
            "additive",
            "Gaussian analytic ε=1 δ=1e-5 [0,1]",
            GaussianMechanism(1.0, 1e-5, 0.0, 1.0),
            n_gauss,
            True,
            "(ε,δ) test: P(S|x) − δ must beat e^ε P(S|x') on tail sets of mass ~1e-3, so ε̂ stays below ε at feasible n",
        ),
        C(
            "additive",
            "Gaussian analytic ε=1 δ=1e-5 block width 5",
            GaussianMechanism(1.0, 1e-5, [0.0] * 5, [1.0] * 5),
            n_gauss,
            True,
        ),
        C("additive", "Gaussian analytic ε=4 δ=1e-5 [0,1]", GaussianMechanism(4.0, 1e-5, 0.0, 1.0), n_gauss, True),
        C(
            "additive",
            "Gaussian classic ε=0.5 δ=1e-5 [0,1]",
            GaussianMechanism(0.5, 1e-5, 0.0, 1.0, calibration="classic"),
            n_gauss,
            True,
            "classic bound is conservative: exact ε < claimed",
        ),
        C(
            "additive",
            "Gaussian farokhi ε=1 δ=1e-5 [0,1]",
            GaussianMechanism(1.0, 1e-5, 0.0, 1.0, calibration="farokhi"),
            n_gauss,
            True,
        ),
    ]
    far8 = GaussianMechanism(8.0, 0.1, 0.0, 1.0, calibration="farokhi")
    cases += [
        C(
            "additive",
            "Gaussian farokhi ε=8 δ=0.1 [0,1] (states its exact ε)",
            far8,
            n_gauss,
            True,
            "fixed after this audit: `epsilon` is now max(nominal 8, exact 10.05)",
        ),
        C(
            "miscalibrated",
            "Gaussian farokhi ε=8 δ=0.1 claiming the nominal 8",
            MisclaimedMechanism(far8, 8.0 / far8.epsilon),
            n_gauss,
            False,
            "FINDING: Farokhi's σ is a nominal ε outside ε<1; exact ε = 10.05 > 8",
        ),
    ]

    f05, f01 = RandomizedResponse(2, epsilon=0.5), RandomizedResponse(2, epsilon=0.1)
    mixed = RecordMechanism(
        [
            RandomizedResponse(3, epsilon=1.0),
            LaplaceMechanism(1.0, [0.0] * 3, [1.0] * 3),
            GaussianMechanism(1.0, 1e-5, 0.0, 1.0),
        ],
        RandomizedResponse(2, epsilon=1.0),
    )
    cases += [
        C("record", "record: 3 RR(2, ε=0.5) + RR label ε=0.5", RecordMechanism(f05, f05, n_features=3), n_rec, True),
        C(
            "record",
            "record: RR(4, ε=0.5) + Laplace ε=0.5 + RR label ε=0.5",
            RecordMechanism([RandomizedResponse(4, epsilon=0.5), LaplaceMechanism(0.5, 0.0, 1.0)], f05),
            n_rec,
            True,
        ),
        C(
            "record",
            "record: 16 binary pixels RR ε=0.1 + label ε=0.1",
            RecordMechanism(f01, f01, n_features=16),
            n_rec,
            True,
            "small stand-in for the 784-pixel record",
        ),
        C(
            "record",
            "record: RR(3, ε=1) + Laplace block w3 ε=1 + Gaussian ε=1 δ=1e-5 + RR label ε=1",
            mixed,
            n_rec,
            True,
            "δ > 0: no exact record ε",
        ),
    ]

    for oracle in ("rr", "oue", "olh"):
        m = PairedRecordMechanism([2, 3, 4], 2, 1.0, oracle=oracle)
        cases.append(C("paired", f"paired: k (2, 3, 4), C=2, one pair by {oracle} ε=1", m, n_rec, True))
    cases.append(
        C(
            "paired",
            "paired: k (2, 3, 4), C=2, two pairs ε=2 (auto oracles, ε/2 each)",
            PairedRecordMechanism([2, 3, 4], 2, 2.0, n_sampled=2),
            n_rec,
            True,
        )
    )
    for oracle in ("rr", "olh"):
        m = TripleRecordMechanism([2, 3, 4], 2, 1.0, oracle=oracle)
        cases.append(C("triple", f"triple: k (2, 3, 4), C=2, one triple by {oracle} ε=1", m, n_rec, True))
    cases += [
        C(
            "miscalibrated",
            "paired: one pair by rr ε=1 claiming 0.5",
            HalfClaimPaired([2, 3, 4], 2, 1.0, oracle="rr"),
            n_rec,
            False,
        ),
        C(
            "miscalibrated",
            "triple: one triple by rr ε=1 claiming 0.5",
            HalfClaimTriple([2, 3, 4], 2, 1.0, oracle="rr"),
            n_rec,
            False,
        ),
        C(
            "miscalibrated",
            "RR k=2 ε=1 claiming 0.5",
            MisclaimedMechanism(RandomizedResponse(2, epsilon=1.0), 0.5),
            20_000,
            False,
        ),
        C(
            "miscalibrated",
            "RR k=10 ε=2 claiming 1",
            MisclaimedMechanism(RandomizedResponse(10, epsilon=2.0), 0.5),
            20_000,
            False,
        ),
        C(
            "miscalibrated",
            "Laplace ε=1 with sensitivity=Δ/2 (b halved)",
            undercalibrated(LaplaceMechanism(1.0, 0.0, 1.0)),
            n_cont,
            False,
            "FINDING: was accepted by the constructor; now refused (sensitivity below the box diameter)",
        ),
        C(
            "miscalibrated",
            "Laplace block w5 ε=1 claiming 0.5",
            MisclaimedMechanism(LaplaceMechanism(1.0, [0.0] * 5, [1.0] * 5), 0.5),
            n_cont,
            False,
        ),
        C(
            "miscalibrated",
            "Gaussian ε=1 δ=1e-5 with sensitivity=Δ/2",
            undercalibrated(GaussianMechanism(1.0, 1e-5, 0.0, 1.0)),
            n_gauss,
            False,
            "FINDING: was accepted by the constructor; now refused (sensitivity below the box diameter)",
        ),
        C(
            "miscalibrated",
            "record: 3 RR + label, one feature claiming half",
            RecordMechanism([f05, f05, MisclaimedMechanism(f05, 0.5)], f05),
            n_rec,
            False,
            "record claims 1.75, true 2",
        ),
    ]
    return cases


def run_cases(
    cases: list[AuditCase], seed: int = 0, alpha: float = DEFAULT_ALPHA, progress: Callable[[str], None] | None = None
) -> list[dict]:
    """Audit every case (case i with SeedSequence(seed, spawn_key=(i,))). One row per case:
    ``AuditResult.to_row()`` plus group, expected / result (PASS or FAIL), as_expected, ratio
    (ε̂ / claimed ε), seconds and note."""
    rows = []
    for i, c in enumerate(cases):
        t0 = time.perf_counter()
        rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(i,)))
        res = audit_mechanism(c.mechanism, n_samples=c.n_samples, rng=rng, alpha=alpha, label=c.name)
        sec = time.perf_counter() - t0
        ok = res.passed == c.expect_pass
        row = res.to_row()
        row.update(
            group=c.group,
            expected="PASS" if c.expect_pass else "FAIL",
            result="PASS" if res.passed else "FAIL",
            as_expected=ok,
            ratio=res.epsilon_lower_bound / res.claimed_epsilon,
            seconds=round(sec, 2),
            note=c.note,
        )
        rows.append(row)
        if progress is not None:
            progress(f"{'ok ' if ok else 'UNEXPECTED'} {res.summary()} [{sec:.1f}s]")
    return rows
