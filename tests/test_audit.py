"""Empirical DP audit (fedrr.audit): real mechanisms pass, mis-calibrated ones fail.

What is pinned, and what can make a test fail:

* Clopper–Pearson bounds: exact one-sided coverage ≥ 1 − level (binomial sums, no sampling);
  a wrong Beta quantile or an off-by-one in its parameters fails this.
* exact losses: every discrete mechanism's max_{o,x,x'} log P(o|x)/P(o|x') equals its claimed ε
  to 1e-9; Laplace's ‖x − x'‖₁/b equals ε; the analytic Gaussian's exact ε at δ equals ε.
* audits: a correctly calibrated mechanism fails only with probability ≤ α = 1e-6 (the union
  bound); with the fixed seeds below a failure of a "passes" test means the mechanism leaks more
  than it claims (or the audit's union bound is broken). "fails" tests use sample sizes computed
  by ``samples_needed`` so that a mechanism leaking its true ε is caught with probability
  ≥ 1 − 1e-6 (discrete) — a "fails" test that passes means the audit lost its power.

Fast tests run in a few seconds in total; the big-n audits (many ε and k, width-d blocks,
Farokhi's nominal calibration, an empirical false-alarm rate) take about 40 s and run in the
default suite too, so CI runs every audit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedrr.audit import (
    DEFAULT_ALPHA,
    AuditResult,
    audit_mechanism,
    audit_record,
    clopper_pearson,
    exact_additive_epsilon,
    exact_discrete_epsilon,
    max_certifiable_epsilon,
    samples_needed,
)
from fedrr.errors import ValidationError
from fedrr.mechanisms import GaussianMechanism, LaplaceMechanism, RandomizedResponse, RecordMechanism, TransitionMatrix
from fedrr.testing.misclaimed import MisclaimedMechanism, undercalibrated

ALPHA = DEFAULT_ALPHA  # 1e-6 overall false-alarm probability of every audit below
N_THRESHOLD_INTERVALS = 4 * (2 * 24 + 4)  # upper bound on the intervals of a threshold-set audit


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def with_pilot(n_certify: int, pilot_fraction: float = 0.1) -> int:
    """Total draws per input so that n_certify of them remain after the pilot."""
    return int(math.ceil(n_certify / (1 - pilot_fraction))) + 2


# ----------------------------------------------------------------------------- Clopper–Pearson
@pytest.mark.parametrize("n, level", [(20, 0.05), (200, 1e-3), (1000, 1e-6)])
def test_clopper_pearson_exact_coverage(n, level):
    """P(lower > p) ≤ level and P(upper < p) ≤ level, computed exactly over Binomial(n, p) for a
    grid of p. Fails if the Beta quantiles (or their parameters) are wrong."""
    counts = np.arange(n + 1)
    lo, hi = clopper_pearson(counts, n, level)
    assert np.all(np.diff(lo) > 0) and np.all(np.diff(hi) > 0)
    for p in np.linspace(0.001, 0.999, 97):
        pmf = stats.binom.pmf(counts, n, p)
        assert pmf[lo > p].sum() <= level * (1 + 1e-9)
        assert pmf[hi < p].sum() <= level * (1 + 1e-9)


def test_clopper_pearson_edges_and_validation():
    """c = 0 gives lower 0, c = n gives upper 1 (the closed forms are α^(1/n) and 1 − α^(1/n));
    counts outside [0, n] or a level outside (0, 1) raise ValidationError."""
    lo, hi = clopper_pearson([0, 10], 10, 0.01)
    assert lo[0] == 0.0 and hi[1] == 1.0
    assert hi[0] == pytest.approx(1 - 0.01 ** (1 / 10), rel=1e-12)
    assert lo[1] == pytest.approx(0.01 ** (1 / 10), rel=1e-12)
    with pytest.raises(ValidationError) as e:
        clopper_pearson([11], 10, 0.01)
    assert e.value.field == "count"
    with pytest.raises(ValidationError) as e:
        clopper_pearson([1], 10, 1.5)
    assert e.value.field == "level"


# ----------------------------------------------------------------------------- exact losses
DISCRETE = [
    ("rr2_e0.1", lambda: RandomizedResponse(2, epsilon=0.1)),
    ("rr2_e1", lambda: RandomizedResponse(2, epsilon=1.0)),
    ("rr3_flip0.4", lambda: RandomizedResponse(3, 0.4)),
    ("rr10_e4", lambda: RandomizedResponse(10, epsilon=4.0)),
    ("rr256_e1", lambda: RandomizedResponse(256, epsilon=1.0)),
    ("rr2_anti", lambda: RandomizedResponse(2, 0.8)),  # flips more often than not: ε = ln 4
    ("tm_binary", lambda: TransitionMatrix.binary(0.1, 0.3)),
    ("tm_random5", lambda: TransitionMatrix(rng(3).dirichlet(np.full(5, 2.0), size=5).T + 0.0)),
]


@pytest.mark.parametrize("name, make", DISCRETE, ids=[d[0] for d in DISCRETE])
def test_exact_discrete_loss_equals_claimed_epsilon(name, make):
    """max over every pair of states and output of log P(o|x) − log P(o|x') (from log_likelihood on
    the k × k grid) equals the mechanism's ``epsilon`` to 1e-9. Fails if ``epsilon`` and the
    likelihood disagree (an under- or over-stated claim)."""
    mech = make()
    exact, (o, x, xp) = exact_discrete_epsilon(mech)
    assert abs(exact - mech.epsilon) <= 1e-9
    P = np.exp(np.asarray(mech.log_likelihood(np.arange(mech.k)[:, None], np.arange(mech.k)[None, :])))
    assert math.log(P[o, x] / P[o, xp]) == pytest.approx(exact, abs=1e-12)


def test_exact_additive_losses():
    """Laplace: ‖lower − upper‖₁/b equals ε (width 1 and a block of 3); the analytic Gaussian's exact
    ε at its δ equals ε to 1e-9 (relative); the classic calibration is conservative (exact < ε);
    a Laplace given sensitivity Δ/2 truly has 2ε. Fails if a calibration formula changes."""
    assert exact_additive_epsilon(LaplaceMechanism(1.3, 0.0, 1.0)) == pytest.approx(1.3, abs=1e-9)
    assert exact_additive_epsilon(LaplaceMechanism(2.0, [0.0, -1.0, 2.0], [1.0, 1.0, 5.0])) == pytest.approx(
        2.0, abs=1e-9
    )
    for eps in (0.3, 1.0, 4.0):
        g = GaussianMechanism(eps, 1e-5, [0.0, 0.0], [1.0, 2.0])
        assert exact_additive_epsilon(g) == pytest.approx(eps, rel=1e-9)
    assert exact_additive_epsilon(GaussianMechanism(0.5, 1e-5, 0.0, 1.0, calibration="classic")) < 0.5
    assert exact_additive_epsilon(undercalibrated(LaplaceMechanism(1.0, 0.0, 1.0))) == pytest.approx(2.0, abs=1e-9)


# ----------------------------------------------------------------------------- discrete audits
@pytest.mark.parametrize(
    "make, n",
    [
        (lambda: RandomizedResponse(2, epsilon=1.0), 20_000),
        (lambda: RandomizedResponse(4, epsilon=2.0), 20_000),
        (lambda: RandomizedResponse(10, 0.5), 20_000),
        (lambda: TransitionMatrix.binary(0.1, 0.3), 20_000),
        (lambda: RandomizedResponse(256, epsilon=3.0), 50_000),  # k > 16: the exact worst pair is sampled
    ],
    ids=["rr2", "rr4", "rr10", "tm_binary", "rr256"],
)
def test_discrete_audit_passes(make, n):
    """A real discrete mechanism: certified ε̂ ≤ claimed ε, exact = claimed, and the witness is a
    pair of distinct states with an output set. Fails (w.p. ≤ α) only if the mechanism's
    ``release`` leaks more than its ``epsilon``."""
    mech = make()
    res = audit_mechanism(mech, n_samples=n, rng=rng(11), alpha=ALPHA)
    assert isinstance(res, AuditResult)
    assert res.passed and res.epsilon_lower_bound <= mech.epsilon
    assert res.exact_epsilon == pytest.approx(mech.epsilon, abs=1e-9) and res.exact_matches_claim
    assert res.epsilon_lower_bound > 0.5 * mech.epsilon  # the bound is informative, not vacuous
    w = res.witness
    assert w.x != w.x_prime and w.n == n and 0 < w.p_lower and w.q_upper < 1
    k = mech.k
    m = k if k <= 16 else 2
    assert res.n_intervals == 2 * k * m


def test_rr_lower_bound_approaches_epsilon():
    """RR k = 2, ε = 1: n is computed by ``samples_needed`` (exact Clopper–Pearson at α/8, counts at
    their 1e-6 pessimistic binomial quantiles) so that ε̂ ≥ 0.8ε with probability ≥ 1 − 1e-6;
    then ε̂ ∈ [0.8, 1]. A larger n (for 0.9ε) gives a tighter bound. Fails if the audit is less
    powerful than its own sample-size calculation or if RR leaks more than ε."""
    mech = RandomizedResponse(2, epsilon=1.0)
    bounds = []
    for frac in (0.8, 0.9):
        n = samples_needed(mech.keep_prob, mech.other_prob, frac * mech.epsilon, n_intervals=8, alpha=ALPHA, miss=1e-6)
        assert 5_000 < n < 100_000  # 12 328 and 50 272 at the time of writing
        res = audit_mechanism(mech, n_samples=n, rng=rng(5), alpha=ALPHA)
        assert frac * mech.epsilon <= res.epsilon_lower_bound <= mech.epsilon
        bounds.append(res.epsilon_lower_bound)
    assert bounds[1] > bounds[0]


def test_misclaimed_rr_fails():
    """An RR that claims half its ε (true 1, claimed 0.5): with n from ``samples_needed`` (ε̂ > 0.5
    w.p. ≥ 1 − 1e-6) the audit FAILS it, and its exact loss exceeds the claim. The same n and α
    pass the honest mechanism. Fails if the audit cannot catch a 2× under-statement."""
    true = RandomizedResponse(2, epsilon=1.0)
    liar = MisclaimedMechanism(true, claim_factor=0.5)
    n = samples_needed(true.keep_prob, true.other_prob, liar.epsilon + 1e-9, n_intervals=8, alpha=ALPHA, miss=1e-6)
    bad = audit_mechanism(liar, n_samples=n, rng=rng(7), alpha=ALPHA)
    assert not bad.passed and bad.epsilon_lower_bound > liar.epsilon
    assert bad.exact_epsilon == pytest.approx(1.0, abs=1e-9) and bad.exact_matches_claim is False
    good = audit_mechanism(true, n_samples=n, rng=rng(7), alpha=ALPHA)
    assert good.passed


def test_misclaimed_k_ary_and_transition_matrix_fail():
    """Under-claimed k = 5 RR (ε 2 claimed as 1) and an asymmetric binary TransitionMatrix claimed at
    60% of its ε both fail at n = 20 000 per state (samples_needed ≪ 20 000 for both)."""
    for inner, factor in ((RandomizedResponse(5, epsilon=2.0), 0.5), (TransitionMatrix.binary(0.05, 0.3), 0.6)):
        res = audit_mechanism(MisclaimedMechanism(inner, factor), n_samples=20_000, rng=rng(8), alpha=ALPHA)
        assert not res.passed, res.summary()


def test_discrete_witness_brackets_true_probabilities():
    """The witness's certified bounds contain the true transition probabilities:
    p_lower ≤ P(o | x) and q_upper ≥ P(o | x') (k = 5 RR, every state sampled). Fails if the
    counts are attributed to the wrong output/input or the interval is on the wrong side."""
    mech = RandomizedResponse(5, epsilon=1.5)
    res = audit_mechanism(mech, n_samples=30_000, rng=rng(12), alpha=ALPHA)
    w = res.witness
    P = mech.matrix
    assert w.p_lower <= P[w.output, w.x] and w.q_upper >= P[w.output, w.x_prime]
    assert abs(w.count / w.n - P[w.output, w.x]) < 0.02 and abs(w.count_prime / w.n - P[w.output, w.x_prime]) < 0.02


def test_claims_above_max_certifiable_cannot_fail():
    """The audit's ceiling: with n draws no ε̂ exceeds max_certifiable_epsilon(n) ≈ log(n / log(m/α)),
    so an RR of true ε = 12 claiming 6 passes at n = 1 000 (ceiling ≈ 4.1) and fails at n = 10⁶.
    Pins the documented limitation that a PASS above the ceiling says nothing."""
    liar = MisclaimedMechanism(RandomizedResponse(2, epsilon=12.0), 0.5)
    small = audit_mechanism(liar, n_samples=1_000, rng=rng(13), alpha=ALPHA)
    assert small.passed and small.epsilon_lower_bound <= small.max_certifiable < liar.epsilon
    assert small.max_certifiable == pytest.approx(max_certifiable_epsilon(1_000, n_intervals=8, alpha=ALPHA))
    big = audit_mechanism(liar, n_samples=1_000_000, rng=rng(13), alpha=ALPHA)
    assert not big.passed and big.max_certifiable > 6.0


# ----------------------------------------------------------------------------- continuous audits
def test_laplace_witness_brackets_noise_cdf():
    """Laplace ε = 1 on [0, 1], LLR sets: the witness set S is x̃ on one side of c = (1 − t·b)/2; its
    true probabilities from the Laplace CDF lie inside the certified bounds, and the exact sup of
    the log-ratio (x̃ ≤ 0 vs x̃ ≥ 1) is ε. Fails if set counting, tie handling or direction is wrong."""
    mech = LaplaceMechanism(1.0, 0.0, 1.0)
    b = mech.scale
    F = stats.laplace(scale=b).cdf
    for seed in (24, 25, 26):
        w = audit_mechanism(mech, n_samples=100_000, rng=rng(seed), alpha=ALPHA).witness
        c = (1.0 - w.threshold * b) / 2.0
        if w.direction == "+":  # x = 0 is the numerator, S = {x̃ ≤ c}
            assert w.x == 0.0
            p, q = F(c), F(c - 1.0)
        else:  # x = 1 is the numerator, S = {x̃ ≥ c}
            assert w.x == 1.0
            p, q = 1.0 - F(c - 1.0), 1.0 - F(c)
        assert w.p_lower <= p and w.q_upper >= q
        assert math.log(p / q) <= mech.epsilon + 1e-12


@pytest.mark.parametrize("statistic", ["llr", "projection"])
def test_laplace_audit_passes(statistic):
    """Laplace ε = 1 on [0, 1] (and a block of 3 features for the LLR): ε̂ ≤ 1 and ≥ 0.8 at 200 000
    draws (samples_needed gives ~107 000 certifying draws for 0.9 on the optimal set
    {x̃ ≤ lower}); exact = 1. Fails if Laplace noise is too small for its ε or if the pilot's
    thresholds miss the optimal set."""
    mech = LaplaceMechanism(1.0, 0.0, 1.0)
    res = audit_mechanism(mech, n_samples=200_000, rng=rng(21), alpha=ALPHA, statistic=statistic)
    assert res.passed and 0.8 <= res.epsilon_lower_bound <= 1.0, res.summary()
    assert res.exact_epsilon == pytest.approx(1.0, abs=1e-9)
    assert res.n_certify == 180_000 and res.n_intervals <= N_THRESHOLD_INTERVALS
    if statistic == "llr":
        block = LaplaceMechanism(2.0, [0.0, -1.0, 2.0], [1.0, 1.0, 5.0])
        rb = audit_mechanism(block, n_samples=100_000, rng=rng(22), alpha=ALPHA)
        assert rb.passed and rb.epsilon_lower_bound > 1.0, rb.summary()
        assert rb.exact_epsilon == pytest.approx(2.0, abs=1e-9)


def test_laplace_half_sensitivity_fails():
    """LaplaceMechanism(1, 0, 1, sensitivity=0.5) uses b = Δ/2 on a box of diameter 1: true ε = 2,
    claimed 1. With n from samples_needed for the set {x̃ ≤ lower} (p = 1/2, q = e^-2/2) the audit
    fails it; the honest mechanism passes with the same n. Fails if the audit loses power."""
    n_cert = samples_needed(0.5, 0.5 * math.exp(-2.0), 1.0 + 1e-9, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA)
    n = with_pilot(n_cert)
    bad = audit_mechanism(undercalibrated(LaplaceMechanism(1.0, 0.0, 1.0)), n_samples=n, rng=rng(23), alpha=ALPHA)
    assert not bad.passed and bad.epsilon_lower_bound > 1.0 and bad.exact_epsilon == pytest.approx(2.0)
    assert audit_mechanism(LaplaceMechanism(1.0, 0.0, 1.0), n_samples=n, rng=rng(23), alpha=ALPHA).passed


def test_gaussian_analytic_passes():
    """Analytic Gaussian ε = 1, δ = 1e-5 on [0, 1]: the (ε, δ) test certifies
    P(S|x) − δ > e^ε̂ P(S|x'); ε̂ ≤ 1 (it is well below 1 at this n: the optimal set has mass
    ~1.6e-4) and > 0.3; exact ε at δ equals 1. Fails if σ is too small for (ε, δ)."""
    mech = GaussianMechanism(1.0, 1e-5, 0.0, 1.0)
    res = audit_mechanism(mech, n_samples=300_000, rng=rng(31), alpha=ALPHA)
    assert res.passed and 0.3 < res.epsilon_lower_bound <= 1.0, res.summary()
    assert res.claimed_delta == 1e-5 and res.exact_epsilon == pytest.approx(1.0, rel=1e-9)


def test_gaussian_half_sensitivity_fails():
    """Gaussian claiming (1, 1e-5) with σ calibrated for Δ/2 (true ε at δ = 1e-5 is 2.15): n from
    samples_needed minimised over threshold sets {x̃ < −t} (≈ 260 000 certifying draws), ×1.3 for
    the pilot grid's spacing; the audit fails it. Fails if the (ε, δ) test loses power."""
    mech = undercalibrated(GaussianMechanism(1.0, 1e-5, 0.0, 1.0))
    s = mech.sigma
    n_cert = min(
        samples_needed(
            stats.norm.sf(t / s),
            stats.norm.sf((t + 1) / s),
            1.0 + 1e-9,
            n_intervals=N_THRESHOLD_INTERVALS,
            alpha=ALPHA,
            delta=1e-5,
            miss=1e-3,
        )
        for t in np.linspace(2.5, 5.0, 11)
    )
    assert n_cert < 400_000
    res = audit_mechanism(mech, n_samples=with_pilot(int(1.3 * n_cert)), rng=rng(32), alpha=ALPHA)
    assert not res.passed and res.epsilon_lower_bound > 1.0, res.summary()
    assert res.exact_epsilon == pytest.approx(mech.epsilon_exact, rel=1e-9) and res.exact_epsilon > 2.0


# ----------------------------------------------------------------------------- records
def test_record_rr_passes_and_approaches():
    """3 binary RR features + RR label, ε = 0.5 each (record ε = 2 by basic composition), records
    that differ in every field: exact record loss = 2 = record.epsilon; ε̂ ≤ 2, and ≥ 0.8·2 with
    n from samples_needed for the all-fields-match set (p = q⁴, q' = r⁴). Fails if composition
    under-counts or the joint LLR test loses power."""
    f = RandomizedResponse(2, epsilon=0.5)
    rec = RecordMechanism(f, RandomizedResponse(2, epsilon=0.5), n_features=3)
    q, r = f.keep_prob, f.other_prob
    n_cert = samples_needed(q**4, r**4, 0.8 * rec.epsilon, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA)
    res = audit_record(rec, n_samples=with_pilot(n_cert), rng=rng(41), alpha=ALPHA)
    assert res.exact_epsilon == pytest.approx(rec.epsilon, abs=1e-9)
    assert res.passed and 0.8 * rec.epsilon <= res.epsilon_lower_bound <= rec.epsilon, res.summary()
    X, y = res.witness.x
    Xp, yp = res.witness.x_prime
    assert np.all(X != Xp) and y != yp  # neighbours differ in every field


def test_record_mixed_passes():
    """RR(k=4) + Laplace feature + RR label (ε 0.5 each, record ε 1.5); also via audit_mechanism.
    exact = 1.5; ε̂ ∈ (1, 1.5]. Fails if a field's release leaks more than its ε."""
    rec = RecordMechanism(
        [RandomizedResponse(4, epsilon=0.5), LaplaceMechanism(0.5, 0.0, 1.0)], RandomizedResponse(2, epsilon=0.5)
    )
    res = audit_mechanism(rec, n_samples=100_000, rng=rng(42), alpha=ALPHA)
    assert res.exact_epsilon == pytest.approx(1.5, abs=1e-9)
    assert res.passed and 1.0 < res.epsilon_lower_bound <= 1.5, res.summary()


def test_record_with_misclaimed_field_fails():
    """The same 3+1 RR record with one feature's mechanism claiming half its ε: record claims
    1.75, truly 2 (exact); the joint audit fails it at the n that certifies ≥ 0.9·2 = 1.8."""
    f = RandomizedResponse(2, epsilon=0.5)
    rec = RecordMechanism([f, f, MisclaimedMechanism(f, 0.5)], RandomizedResponse(2, epsilon=0.5))
    assert rec.epsilon == pytest.approx(1.75)
    q, r = f.keep_prob, f.other_prob
    n_cert = samples_needed(q**4, r**4, 1.8, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA, miss=1e-3)
    res = audit_record(rec, n_samples=with_pilot(n_cert), rng=rng(43), alpha=ALPHA)
    assert res.exact_epsilon == pytest.approx(2.0, abs=1e-9)
    assert not res.passed and res.epsilon_lower_bound > 1.75, res.summary()


# ----------------------------------------------------------------------------- API
def test_same_seed_same_result_and_wrapper_delegates():
    """Audits are functions of the generator: the same seed gives the same result. The wrapper
    releases exactly like its inner mechanism (same seed, same values) and claims factor × ε."""
    mech = LaplaceMechanism(1.0, 0.0, 1.0)
    a = audit_mechanism(mech, n_samples=5_000, rng=rng(1))
    b = audit_mechanism(mech, n_samples=5_000, rng=rng(1))
    assert a == b
    inner = RandomizedResponse(3, epsilon=1.0)
    liar = MisclaimedMechanism(inner, 0.25)
    x = np.arange(30) % 3
    assert np.array_equal(liar.release(x, rng(2)), inner.release(x, rng(2)))
    assert liar.epsilon == pytest.approx(0.25) and liar.k == 3 and "claim_factor=0.25" in repr(liar)
    row = a.to_row()
    assert row["passed"] is True and row["claimed_epsilon"] == 1.0 and "LLR" in row["witness"]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(n_samples=10), "n_samples"),
        (dict(n_samples=1000.0), "n_samples"),
        (dict(rng=np.random.RandomState(0)), "rng"),
        (dict(rng=0), "rng"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=1.0), "alpha"),
        (dict(statistic="max"), "statistic"),
        (dict(pilot_fraction=1.0), "pilot_fraction"),
        (dict(inputs=[0.0, 0.0]), "inputs"),
        (dict(inputs=[0.0, 2.0]), "inputs[1]"),
        (dict(inputs=0.5), "inputs"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_validation_errors(kwargs, field):
    """Bad arguments raise ValidationError naming the field (not a numpy error deep inside)."""
    args = dict(n_samples=1000, rng=rng(0))
    args.update(kwargs)
    with pytest.raises(ValidationError) as e:
        audit_mechanism(LaplaceMechanism(1.0, 0.0, 1.0), **args)
    assert e.value.field == field


def test_validation_errors_other_entry_points():
    """Discrete inputs must be ≥ 2 valid states; unsupported objects and impossible sample-size
    targets are rejected."""
    rr = RandomizedResponse(3, 0.3)
    with pytest.raises(ValidationError) as e:
        audit_mechanism(rr, n_samples=100, rng=rng(0), inputs=[1, 1])
    assert e.value.field == "inputs"
    with pytest.raises(ValidationError) as e:
        audit_mechanism(rr, n_samples=100, rng=rng(0), inputs=[0, 3])
    assert e.value.field == "inputs"
    with pytest.raises(ValidationError) as e:
        audit_mechanism(object(), n_samples=100, rng=rng(0))
    assert e.value.field == "mechanism"
    with pytest.raises(ValidationError) as e:
        audit_record(rr, n_samples=100, rng=rng(0))
    assert e.value.field == "record"
    rec = RecordMechanism(rr, None, n_features=2)
    with pytest.raises(ValidationError) as e:
        audit_record(rec, n_samples=100, rng=rng(0), pair=(([0, 1], None), ([0, 1], None)))
    assert e.value.field == "pair"
    with pytest.raises(ValidationError) as e:
        audit_record(rec, n_samples=100, rng=rng(0), pair=(([0, 5], None), ([0, 1], None)))
    assert e.value.field == "pair[0]"
    with pytest.raises(ValidationError) as e:
        samples_needed(0.5, 0.25, math.log(2), n_intervals=1)  # the population ratio itself: never certified
    assert e.value.field == "target"


# --------------------------------------------------------------------------------- big-n audits
RR_GRID = [(k, eps) for k in (2, 10, 256) for eps in (0.25, 1.0, 4.0)]


@pytest.mark.parametrize("k, eps", RR_GRID, ids=[f"k{k}_e{e}" for k, e in RR_GRID])
def test_big_rr_grid_tight(k, eps):
    """RR for k ∈ {2, 10, 256}, ε ∈ {0.25, 1, 4}: with n = samples_needed(0.8ε) (0.6ε for k = 256,
    ε = 0.25, whose 0.8ε needs 4·10⁷ draws per state) ε̂ lands in [frac·ε, ε]; the mechanism
    claiming half its ε fails at the same n. Fails on a leak or a loss of power."""
    mech = RandomizedResponse(k, epsilon=eps)
    m = k if k <= 16 else 2
    frac = 0.6 if (k, eps) == (256, 0.25) else 0.8
    n = samples_needed(mech.keep_prob, mech.other_prob, frac * eps, n_intervals=2 * k * m, alpha=ALPHA)
    res = audit_mechanism(mech, n_samples=n, rng=rng(100 + k), alpha=ALPHA)
    assert res.passed and frac * eps <= res.epsilon_lower_bound <= eps, res.summary()
    bad = audit_mechanism(MisclaimedMechanism(mech, 0.5), n_samples=n, rng=rng(200 + k), alpha=ALPHA)
    assert not bad.passed, bad.summary()


BLOCKS = [
    ("laplace_w5", lambda: LaplaceMechanism(1.0, [0.0] * 5, [1.0] * 5), 1_000_000, 0.8),
    ("laplace_w10_e4", lambda: LaplaceMechanism(4.0, [0.0] * 10, [1.0] * 10), 1_000_000, 0.65),
    ("gauss_w5", lambda: GaussianMechanism(1.0, 1e-5, [0.0] * 5, [1.0] * 5), 3_000_000, 0.5),
    ("gauss_w10_e4", lambda: GaussianMechanism(4.0, 1e-6, [0.0] * 10, [2.0] * 10), 3_000_000, 0.5),
    ("gauss_classic_e0.5", lambda: GaussianMechanism(0.5, 1e-5, 0.0, 1.0, calibration="classic"), 3_000_000, 0.3),
]


@pytest.mark.parametrize("name, make, n, frac", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_big_width_d_blocks(name, make, n, frac):
    """Blocks of width d audited at the corners lower/upper (they attain the L1 and L2 sensitivity):
    ε̂ ∈ [frac·ε, ε] (frac is 0.8 for Laplace, 0.65 for width 10 at ε = 4, whose extreme set
    {x̃ ≤ lower} has mass 2⁻¹⁰ and e⁻⁴·2⁻¹⁰ ≈ 2·10⁻⁵ — ε̂ ≈ 0.78ε over
    seeds; the Gaussian (ε, δ) test at δ ≤ 1e-5 is weaker —
    ε̂ ≈ 0.6ε at 3·10⁶ draws — and the classic calibration is conservative); the same noise
    claiming half its *exact* ε fails. Fails on a block mis-calibration or a loss of power."""
    mech = make()
    res = audit_mechanism(mech, n_samples=n, rng=rng(300), alpha=ALPHA)
    assert res.passed and frac * mech.epsilon <= res.epsilon_lower_bound <= mech.epsilon, res.summary()
    assert res.exact_matches_claim
    liar = MisclaimedMechanism(mech, 0.5 * res.exact_epsilon / mech.epsilon)  # classic: exact 0.353 < nominal 0.5
    bad = audit_mechanism(liar, n_samples=n, rng=rng(301), alpha=ALPHA)
    assert not bad.passed, bad.summary()


def test_big_farokhi_nominal_epsilon_is_caught():
    """Farokhi's calibration σ = √(2 ln(1.25/δ))Δ/ε outside ε < 1 is a *nominal* guarantee: at
    ε = 8, δ = 0.1 its exact ε is 10.05, and the audit certifies ε̂ > 8, i.e. catches the nominal
    claim. Since this finding GaussianMechanism states max(nominal, exact), which passes. ε = 1,
    δ = 1e-5 (conservative) passes."""
    far = GaussianMechanism(8.0, 0.1, 0.0, 1.0, calibration="farokhi")
    assert far.epsilon == far.epsilon_exact > 10
    res = audit_mechanism(MisclaimedMechanism(far, 8.0 / far.epsilon), n_samples=2_000_000, rng=rng(400), alpha=ALPHA)
    assert res.claimed_epsilon == pytest.approx(8.0) and res.exact_epsilon > 10
    assert not res.passed and res.epsilon_lower_bound > 8.0, res.summary()
    assert audit_mechanism(far, n_samples=2_000_000, rng=rng(400), alpha=ALPHA).passed
    ok = audit_mechanism(
        GaussianMechanism(1.0, 1e-5, 0.0, 1.0, calibration="farokhi"), n_samples=2_000_000, rng=rng(401), alpha=ALPHA
    )
    assert ok.passed


def test_big_records_bigger():
    """A 10-feature RR record + label (ε 0.2 each, record ε 2.2) and a record mixing RR, a Laplace
    block of 3 and a Gaussian feature (so record δ = 1e-5 > 0 and no exact value): both pass; the
    pure one certifies ≥ 0.6 of its ε at 2·10⁶ draws."""
    f = RandomizedResponse(2, epsilon=0.2)
    rec = RecordMechanism(f, RandomizedResponse(2, epsilon=0.2), n_features=10)
    res = audit_record(rec, n_samples=2_000_000, rng=rng(500), alpha=ALPHA)
    assert res.exact_epsilon == pytest.approx(2.2, abs=1e-9)
    assert res.passed and res.epsilon_lower_bound >= 0.6 * 2.2, res.summary()
    mixed = RecordMechanism(
        [
            RandomizedResponse(3, epsilon=1.0),
            LaplaceMechanism(1.0, [0.0] * 3, [1.0] * 3),
            GaussianMechanism(1.0, 1e-5, 0.0, 1.0),
        ],
        RandomizedResponse(2, epsilon=1.0),
    )
    rm = audit_record(mixed, n_samples=1_000_000, rng=rng(501), alpha=ALPHA)
    assert rm.exact_epsilon is None and rm.claimed_delta == pytest.approx(1e-5)
    assert rm.passed and rm.epsilon_lower_bound > 1.0, rm.summary()


def test_big_false_alarm_rate_at_most_alpha():
    """The stated false-alarm rate is an upper bound: 400 audits of honest RR (k = 2, ε = 1) at
    α = 0.2 with n = 500 fail at most as often as Binomial(400, 0.2)'s 1e-6 upper quantile
    allows (in fact Bonferroni makes them fail far less often). Fails if the union bound or the
    Clopper–Pearson level is wrong (e.g. two-sided/one-sided confusion)."""
    mech = RandomizedResponse(2, epsilon=1.0)
    g = rng(600)
    fails = sum(not audit_mechanism(mech, n_samples=500, rng=g, alpha=0.2).passed for _ in range(400))
    assert fails <= stats.binom.isf(1e-6, 400, 0.2)


def test_audit_script_quick_smoke(tmp_path):
    """simulations/audit_mechanisms.py --quick runs end to end (seconds) and writes the markdown and
    CSV tables with one row per audited case of fedrr.testing.audit_suite. Fails if the script or the result
    schema breaks."""
    import csv
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "simulations" / "audit_mechanisms.py"
    spec = importlib.util.spec_from_file_location("audit_mechanisms_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--quick", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "audit.md").read_text()
    assert "| group | mechanism | claimed ε |" in md and "Witnesses" in md
    with open(tmp_path / "audit.csv") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    from fedrr.testing.audit_suite import standard_cases

    assert len(rows) == len(standard_cases(True, ALPHA, 10_000_000))
    honest = [r for r in rows if r["expected"] == "PASS"]
    assert honest and all(r["result"] == "PASS" for r in honest)  # real mechanisms pass even at --quick sizes
