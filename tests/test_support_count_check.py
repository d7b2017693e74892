"""The aggregate support-count test (fedrr.frequency_check.support_count_check, issue 45 item 3): the
honest law of supported values per report is right (OUE by its formula against enumeration, OLH
against simulation), the test holds its level on honest pools, and it flags 10 % padded MGA fakes that
the frequency check does not see."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.fake import mga_release, padded_ones
from fedrr.frequency_check import (
    frequency_check,
    support_count_check,
    support_count_distribution,
    support_counts,
)
from fedrr.mechanisms import LocalHashing, RandomizedResponse, RecordMechanism, UnaryEncoding


def test_unary_law_is_the_enumerated_one():
    """Bernoulli(p) + Binomial(k − 1, q) against P(bits | x) summed over all 2^k outputs."""
    m = UnaryEncoding(6, 1.0)
    D = support_count_distribution(m)
    bits = np.array(list(itertools.product([0, 1], repeat=m.k)), dtype=bool)
    for x in range(m.k):
        prob = np.where(bits[:, x], m.p, 1 - m.p) * np.prod(np.where(np.delete(bits, x, axis=1), m.q, 1 - m.q), axis=1)
        np.testing.assert_allclose(np.bincount(bits.sum(1), weights=prob, minlength=m.k + 1), D[x], atol=1e-14)


@pytest.mark.parametrize("k, eps", [(41, 2.0), (20, 1.0)])  # k = P: one law for every x; P − k = 3: it varies
def test_hashing_law_matches_simulation(k, eps):
    m = LocalHashing(k, eps)
    D = support_count_distribution(m)
    np.testing.assert_allclose(D.sum(axis=1), 1.0)
    rng = np.random.default_rng(3)
    n = 100_000
    x = rng.integers(0, k, n)
    emp = np.bincount(support_counts(m, m.release(x, rng)), minlength=k + 1)
    th = np.bincount(x, minlength=k) @ D
    sd = np.sqrt(th * (1 - th / n)) + 1e-9
    assert np.all(np.abs(emp - th) < 4.5 * sd + 1e-6)
    if k == 41:
        assert np.ptp(D, axis=0).max() < 1e-12 and set(np.flatnonzero(D[0] > 0)) == {5, 6}


@pytest.mark.parametrize("mech", [UnaryEncoding(16, 1.0), LocalHashing(20, 1.0)], ids=["OUE", "OLH"])
def test_level_on_honest_pools(mech):
    """200 honest pools of 2,000 reports (skewed π: OLH's law depends on x here, the plug-in mixture is
    used) at α = 0.2: flags within 3 binomial standard errors of 0.2·200, on both sides."""
    rm = RecordMechanism([mech], RandomizedResponse(2, epsilon=1.0))
    rng = np.random.default_rng(45)
    pi = np.full(mech.k, 0.1 / (mech.k - 1))
    pi[2] = 0.9
    runs, alpha, n = 200, 0.2, 2000
    flags = 0
    for _ in range(runs):
        col = mech.release(rng.choice(mech.k, size=n, p=pi), rng)
        flags += support_count_check(np.asarray(col, float)[:, None], np.zeros(n, int), rm, alpha=alpha).flagged
    assert abs(flags - alpha * runs) <= 3 * np.sqrt(runs * alpha * (1 - alpha)), flags


def test_flags_ten_percent_padded_fakes_the_frequency_check_misses():
    """OUE k 41, ε 2, 5,000 reports, 10 % MGA fakes padded to ⌊p + (k − 1)q⌋ = 5 ones on state 0."""
    mech = UnaryEncoding(41, 2.0)
    rm = RecordMechanism([mech], RandomizedResponse(2, epsilon=2.0))
    rng = np.random.default_rng(7)
    n = 5000
    X = np.asarray(mech.release(rng.integers(0, mech.k, n), rng), float)[:, None]
    y = rng.integers(0, 2, n)
    assert not support_count_check(X, y, rm, alpha=0.01).flagged
    X[:500, 0] = [mga_release(mech, [0], rng) for _ in range(500)]
    assert padded_ones(mech) == 5 and np.all(support_counts(mech, X[:500, 0]) == 5)
    res = support_count_check(X, y, rm, alpha=0.01)
    assert res.flagged and res.fields[0].p_value < 1e-8 and res.to_dict()["flagged_fields"] == ["x0"]
    assert not frequency_check(X, y, rm, alpha=0.01).frequency_flagged  # per state, the fakes stay inside [0, 1]


def test_bad_input_names_the_field():
    rm = RecordMechanism([UnaryEncoding(5, 1.0)], RandomizedResponse(2, epsilon=1.0))
    X = np.zeros((200, 1))
    with pytest.raises(ValidationError, match=r"\(0, 1\)") as err:
        support_count_check(X, np.zeros(200), rm, alpha=1.0)
    assert err.value.field == "alpha"
    with pytest.raises(ValidationError) as err:
        support_count_distribution(RandomizedResponse(3, epsilon=1.0))
    assert err.value.field == "mechanism"
    big = LocalHashing(2000, 1.0)  # ~4·10^6 seeds × 2,000 states: not enumerated, the field is skipped
    with pytest.raises(ValidationError, match="n_seeds"):
        support_count_distribution(big)
    rm_big = RecordMechanism([big], RandomizedResponse(2, epsilon=1.0))
    Xb = np.asarray(big.release(np.zeros(200, int), np.random.default_rng(0)), float)[:, None]
    assert support_count_check(Xb, np.zeros(200, int), rm_big).skipped == ("x0",)
