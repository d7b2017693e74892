"""Empirical DP audit (fedrr.audit) of the new mechanisms: unary encoding, local hashing, the
Piecewise and Duchi mechanisms, and records with attribute sampling.

As in tests/test_audit.py: an honest mechanism fails only with probability ≤ α = 1e-6 (union bound);
sample sizes come from ``samples_needed`` for the optimal test set of each mechanism (written out
below), so that the honest audit certifies ≥ FRAC of its ε and a mechanism claiming half its ε is
caught, each with probability ≥ 1 − 1e-3 at the computed n. A "passes" test that fails means a
leak (or a broken union bound); a "fails" test that passes means the audit lost its power.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedrr.audit import (
    DEFAULT_ALPHA,
    audit_mechanism,
    audit_record,
    exact_bounded_epsilon,
    exact_oracle_epsilon,
    samples_needed,
)
from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    DuchiMechanism,
    LaplaceMechanism,
    LocalHashing,
    PiecewiseMechanism,
    RandomizedResponse,
    RecordMechanism,
    UnaryEncoding,
)
from fedrr.testing.misclaimed import MisclaimedMechanism, undercalibrated

ALPHA = DEFAULT_ALPHA
N_THRESHOLD_INTERVALS = 4 * (2 * 24 + 4)
FRAC = 0.8


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def with_pilot(n_certify: int, pilot_fraction: float = 0.1) -> int:
    return int(math.ceil(n_certify / (1 - pilot_fraction))) + 2


def optimal_set(mech) -> tuple[float, float]:
    """(P(S | x), P(S | x')) of the set S = {LLR = ε} that attains ε, for the default audit pair."""
    if isinstance(mech, UnaryEncoding):  # bit x set, bit x' clear
        return mech.p * (1 - mech.q), mech.q * (1 - mech.p)
    if isinstance(mech, LocalHashing):  # y = H(x) ≠ H(x')
        c = float(mech.collision)
        return mech.p * (1 - c), (1 - c) * mech.other
    if isinstance(mech, PiecewiseMechanism):  # the centre cells of x = upper, outer cells for lower
        L, M = mech.n_outer, mech.resolution
        return L / (L + M), M * M / ((L + M) * L)
    g = mech.gamma  # Duchi: x̃ = +B
    return (1 + g) / 2, (1 - g) / 2


HONEST = [
    ("oue5_e1", lambda: UnaryEncoding(5, 1.0)),
    ("oue52_e3", lambda: UnaryEncoding(52, 3.0)),
    ("olh20_e1", lambda: LocalHashing(20, 1.0)),
    ("olh1000_e2", lambda: LocalHashing(1000, 2.0)),
    ("pm_e1", lambda: PiecewiseMechanism(1.0, 0.0, 1.0)),
    ("pm_e4_coarse", lambda: PiecewiseMechanism(4.0, -2.0, 5.0, resolution=7)),
    ("duchi_e0.5", lambda: DuchiMechanism(0.5, 0.0, 10.0)),
    ("duchi_e3", lambda: DuchiMechanism(3.0)),
]


@pytest.mark.parametrize("name, make", HONEST, ids=[h[0] for h in HONEST])
def test_exact_epsilon_equals_claim(name, make):
    """The audit's exact ε (from the likelihood, not the claim) equals ``epsilon`` to 1e-9, and the
    optimal set's probability ratio is e^ε."""
    mech = make()
    if isinstance(mech, (UnaryEncoding, LocalHashing)):
        exact = exact_oracle_epsilon(mech)[0]
    else:
        exact = exact_bounded_epsilon(mech)
    assert exact == pytest.approx(mech.epsilon, abs=1e-9)
    p, q = optimal_set(mech)
    assert math.log(p / q) == pytest.approx(mech.epsilon, abs=1e-9)


def test_exact_bounded_epsilon_for_interior_pairs_matches_enumeration():
    """For a coarse PM and two interior inputs, exact_bounded_epsilon's breakpoint cells give the same
    sup as enumerating every cell; Duchi's equals ln((1 + γt)/(1 + γt')) in closed form."""
    pm = PiecewiseMechanism(2.0, 0.0, 1.0, resolution=5)
    cells = pm.release_value(np.arange(pm.n_cells))
    for x, xp in [(0.1, 0.35), (0.5, 0.52), (0.0, 0.9), (0.77, 0.2)]:
        brute = float(np.max(np.abs(pm.log_likelihood(cells, x) - pm.log_likelihood(cells, xp))))
        assert exact_bounded_epsilon(pm, x, xp) == pytest.approx(brute, abs=1e-12)
    d = DuchiMechanism(1.0, 0.0, 1.0)
    t, tp = 2 * 0.3 - 1, 2 * 0.8 - 1
    want = max(
        abs(math.log((1 + d.gamma * t) / (1 + d.gamma * tp))), abs(math.log((1 - d.gamma * t) / (1 - d.gamma * tp)))
    )
    assert exact_bounded_epsilon(d, 0.3, 0.8) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("name, make", HONEST, ids=[h[0] for h in HONEST])
def test_honest_passes_and_half_claim_fails(name, make):
    """n from samples_needed for FRAC·ε on the optimal set: the honest mechanism passes with
    ε̂ ∈ [FRAC·ε, ε] and exact = claimed; the same mechanism claiming ε/2 fails at the same n."""
    mech = make()
    p, q = optimal_set(mech)
    n_cert = samples_needed(p, q, FRAC * mech.epsilon, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA, miss=1e-3)
    n = with_pilot(n_cert)
    assert n < 200_000, "test design: keep the default run fast"
    res = audit_mechanism(mech, n_samples=n, rng=rng(1), alpha=ALPHA)
    assert res.passed and FRAC * mech.epsilon <= res.epsilon_lower_bound <= mech.epsilon, res.summary()
    assert res.exact_matches_claim and res.exact_epsilon == pytest.approx(mech.epsilon, abs=1e-9)
    liar = MisclaimedMechanism(mech, 0.5)
    bad = audit_mechanism(liar, n_samples=n, rng=rng(2), alpha=ALPHA)
    assert not bad.passed and bad.epsilon_lower_bound > liar.epsilon, bad.summary()


@pytest.mark.parametrize("name, make", HONEST, ids=[h[0] for h in HONEST])
def test_undercalibrated_fails(name, make):
    """The mechanism built at 2ε but claiming ε (``undercalibrated``): exact ε = 2ε' (from the likelihood),
    and the audit certifies > ε at n from samples_needed for 1.05ε on its optimal set."""
    mech = make()
    bad = undercalibrated(mech)
    assert bad.epsilon == mech.epsilon
    p, q = optimal_set(bad)
    n = with_pilot(samples_needed(p, q, 1.05 * mech.epsilon, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA, miss=1e-3))
    assert n < 200_000
    res = audit_mechanism(bad, n_samples=n, rng=rng(7), alpha=ALPHA)
    assert res.exact_epsilon > 1.5 * mech.epsilon and not res.exact_matches_claim
    assert not res.passed and res.epsilon_lower_bound > mech.epsilon, res.summary()


# ----------------------------------------------------------------------------- records with sampling
def sampled_record(m: int) -> RecordMechanism:
    return RecordMechanism(
        [RandomizedResponse(2, epsilon=2.0), UnaryEncoding(3, 0.3), DuchiMechanism(0.3), PiecewiseMechanism(0.3)],
        RandomizedResponse(2, epsilon=0.3),
        n_sampled=m,
    )


class AverageAccounting(RecordMechanism):
    """A record that (wrongly) charges the m sampled fields their *average* ε instead of the m largest."""

    @property
    def features_epsilon(self) -> float:
        eps = [f.mechanism.epsilon for f in self.fields]
        return self.n_sampled * sum(eps) / len(eps)


def test_sampled_record_passes_and_average_accounting_fails():
    """Fields ε (2, 0.3, 0.3, 0.3), label 0.3, m = 1: exact = 2.3 = claimed (the largest field + label);
    ε̂ ≥ FRAC·2.3 with n from samples_needed for the set {worst field sampled, both it and the label
    match} (probability ¼·P_keep(ε=2)·P_keep(0.3) vs ¼·P_flip·P_flip); the same record claiming the
    average field ε (0.725 + 0.3) fails at that n."""
    rec = sampled_record(1)
    assert rec.epsilon == pytest.approx(2.3, abs=1e-9)
    f, lab = rec.fields[0].mechanism, rec.label
    p = 0.25 * f.keep_prob * lab.keep_prob
    q = 0.25 * f.other_prob * lab.other_prob
    n = with_pilot(samples_needed(p, q, FRAC * 2.3, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA, miss=1e-3))
    assert n < 300_000
    res = audit_record(rec, n_samples=n, rng=rng(4), alpha=ALPHA)
    assert res.exact_epsilon == pytest.approx(2.3, abs=1e-9)
    assert res.passed and FRAC * 2.3 <= res.epsilon_lower_bound <= 2.3, res.summary()
    avg = AverageAccounting([fl.mechanism for fl in rec.fields], rec.label, n_sampled=1)
    assert avg.epsilon == pytest.approx(0.725 + 0.3, abs=1e-9)
    bad = audit_mechanism(avg, n_samples=n, rng=rng(5), alpha=ALPHA)
    assert not bad.passed and bad.exact_epsilon == pytest.approx(2.3, abs=1e-9), bad.summary()


def test_sampled_record_with_misclaimed_oracle_fails():
    """A sampled record (m = 2 of 3) whose OUE field claims half its ε: claimed 1 + 0.5 + label 0.5 = 2,
    truly 1 + 1 + 0.5 = 2.5 (exact); the record audit certifies > 2 (n from samples_needed for 2.1)."""
    oue = UnaryEncoding(4, 1.0)
    rec = RecordMechanism(
        [RandomizedResponse(2, epsilon=1.0), MisclaimedMechanism(oue, 0.5), LaplaceMechanism(0.2)],
        RandomizedResponse(2, epsilon=0.5),
        n_sampled=2,
    )
    assert rec.epsilon == pytest.approx(2.0, abs=1e-9)
    rr, lab = rec.fields[0].mechanism, rec.label
    po, qo = optimal_set(oue)
    p = (1 / 3) * rr.keep_prob * po * lab.keep_prob
    q = (1 / 3) * rr.other_prob * qo * lab.other_prob
    n = with_pilot(samples_needed(p, q, 2.1, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA, miss=1e-3))
    assert n < 300_000
    res = audit_record(rec, n_samples=n, rng=rng(6), alpha=ALPHA)
    assert res.exact_epsilon == pytest.approx(2.5, abs=1e-9)
    assert not res.passed and res.epsilon_lower_bound > 2.0, res.summary()


def test_audit_argument_checks_for_new_mechanisms():
    """Oracles need the LLR statistic and two distinct valid states; PM/Duchi inputs must be in bounds."""
    for kwargs, field in [
        (dict(statistic="projection"), "statistic"),
        (dict(inputs=[1, 1]), "inputs"),
        (dict(inputs=[0, 9]), "inputs[1]"),
        (dict(inputs=3), "inputs"),
    ]:
        with pytest.raises(ValidationError) as e:
            audit_mechanism(UnaryEncoding(4, 1.0), n_samples=1000, rng=rng(0), **kwargs)
        assert e.value.field == field
    with pytest.raises(ValidationError) as e:
        audit_mechanism(PiecewiseMechanism(1.0), n_samples=1000, rng=rng(0), inputs=[0.0, 2.0])
    assert e.value.field == "inputs[1]"
    res = audit_mechanism(DuchiMechanism(1.0), n_samples=2000, rng=rng(0), inputs=[-0.5, 0.5])
    assert res.exact_epsilon == pytest.approx(exact_bounded_epsilon(DuchiMechanism(1.0), -0.5, 0.5))


# ----------------------------------------------------------------------------- slow: many ε and k
SLOW_GRID = [("oue", k, eps) for k in (3, 20, 52) for eps in (0.25, 1.0, 4.0)] + [
    ("olh", k, eps) for k in (5, 300) for eps in (0.25, 1.0, 4.0)
]


@pytest.mark.slow
@pytest.mark.parametrize("kind, k, eps", SLOW_GRID)
def test_slow_oracle_grid(kind, k, eps):
    """OUE/OLH over k and ε ∈ {0.25, 1, 4}: honest passes with ε̂ ≥ FRAC·ε, half-claim fails."""
    mech = UnaryEncoding(k, eps) if kind == "oue" else LocalHashing(k, eps)
    p, q = optimal_set(mech)
    n = with_pilot(samples_needed(p, q, FRAC * eps, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA, miss=1e-3))
    res = audit_mechanism(mech, n_samples=n, rng=rng(100 + k), alpha=ALPHA)
    assert res.passed and res.epsilon_lower_bound >= FRAC * mech.epsilon, res.summary()
    assert not audit_mechanism(MisclaimedMechanism(mech, 0.5), n_samples=n, rng=rng(200 + k), alpha=ALPHA).passed


@pytest.mark.slow
@pytest.mark.parametrize("eps", [0.1, 0.5, 2.0, 8.0])
@pytest.mark.parametrize("cls", [PiecewiseMechanism, DuchiMechanism])
def test_slow_numeric_grid(cls, eps):
    """PM and Duchi over ε ∈ {0.1, 0.5, 2, 8}: honest passes with ε̂ ≥ FRAC·ε, half-claim fails."""
    mech = cls(eps, -3.0, 7.0)
    p, q = optimal_set(mech)
    n = with_pilot(samples_needed(p, q, FRAC * eps, n_intervals=N_THRESHOLD_INTERVALS, alpha=ALPHA, miss=1e-3))
    res = audit_mechanism(mech, n_samples=n, rng=rng(300), alpha=ALPHA)
    assert res.passed and res.epsilon_lower_bound >= FRAC * mech.epsilon, res.summary()
    assert not audit_mechanism(MisclaimedMechanism(mech, 0.5), n_samples=n, rng=rng(301), alpha=ALPHA).passed
