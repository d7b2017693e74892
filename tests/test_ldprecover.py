"""LDPRecover (Sun et al., ICDE 2024; ``fedrr.estimators._ldprecover``) checked numerically before it is
trusted: the genuine-frequency estimator is the mixture's exact inverse, the malicious mass is what a
one-item report debiases to, and on a synthetic poisoned k-RR vector with known genuine frequencies and
known fakes the recovered vector moves towards the genuine one (squared error, fixed seeds, a margin of
Z standard errors of the paired difference over pools) while, without attack details, the promoted
items keep their gain. Then ``LDPNaiveBayes(robust="ldprecover")`` on paired releases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.estimators import LDPNaiveBayes
from fedrr.estimators._ldprecover import count_eta, genuine_estimate, ldprecover, malicious_mass
from fedrr.fake import crafted_release
from fedrr.mechanisms import LocalHashing, PairedRecordMechanism, RandomizedResponse, UnaryEncoding

Z = 3.0
K, N_GENUINE, ETA, TARGETS = 64, 50_000, 0.05, np.array([40, 50, 60, 63])
GENUINE = 1.0 / np.arange(1, K + 1)
GENUINE /= GENUINE.sum()  # Zipf(1) over 64 items


def poisoned_pool(eps: float, seed: int):
    """(f̃_Z, f̃_X, f̃_Y, η): N_GENUINE genuine k-RR reports of GENUINE and η·N_GENUINE fakes sending a
    target drawn from TARGETS unperturbed (the maximal gain attack under k-RR), each group debiased."""
    rr, g = RandomizedResponse(K, epsilon=eps), np.random.default_rng(seed)
    m = int(ETA * N_GENUINE)
    fx = rr.unbiased_onehot(rr.release(g.choice(K, N_GENUINE, p=GENUINE), rng=g)).mean(axis=0)
    fy = rr.unbiased_onehot(TARGETS[g.integers(0, TARGETS.size, m)]).mean(axis=0)
    return (N_GENUINE * fx + m * fy) / (N_GENUINE + m), fx, fy, m / N_GENUINE


def test_genuine_estimate_inverts_the_mixture_and_is_unbiased():
    """(1 + η) f̃_Z − η f̃_Y with the fakes' own f̃_Y and η = m/n is the genuine users' estimate f̃_X
    (to rounding), so over pools its mean is the genuine distribution within Z standard errors."""
    est = []
    for seed in range(20):
        fz, fx, fy, eta = poisoned_pool(2.0, seed)
        e = genuine_estimate(fz, fy, eta)
        np.testing.assert_allclose(e, fx, atol=1e-12)
        est.append(e)
    est = np.array(est)
    se = est.std(axis=0, ddof=1) / math.sqrt(est.shape[0])
    assert np.all(np.abs(est.mean(axis=0) - GENUINE) < 4.0 * se + 1e-12)


def test_malicious_mass_is_a_one_item_reports_debiased_sum():
    """k-RR: every report debiases to mass 1; OUE: the one-bit report (fedrr.fake's crafted release)
    debiases to (1 − K q)/(p − q); OLH: a report with support S debiases to (|S| − K b)/(a − b), the
    mass being that at |S| = 1."""
    rr = RandomizedResponse(10, epsilon=1.0)
    assert malicious_mass(rr) == 1.0
    np.testing.assert_allclose(rr.unbiased_onehot(np.arange(10)).sum(axis=1), 1.0)
    ue = UnaryEncoding(12, 1.5)
    one_bit = ue.unbiased_onehot(np.array([crafted_release(ue, 3, np.random.default_rng(0))]))
    assert one_bit.sum() == pytest.approx(malicious_mass(ue), rel=1e-12)
    assert malicious_mass(ue) == pytest.approx((1 - 12 * ue.q) / (ue.p - ue.q))
    lh = LocalHashing(12, 2.0)
    reports = np.array([crafted_release(lh, 5, np.random.default_rng(s)) for s in range(5)])
    U = lh.unbiased_onehot(reports)
    support = np.rint(U * (lh.p - lh.q_star) + lh.q_star).sum(axis=1)  # the items each report supports
    np.testing.assert_allclose(U.sum(axis=1), (support - 12 * lh.q_star) / (lh.p - lh.q_star), rtol=1e-9)
    assert malicious_mass(lh) == pytest.approx((1 - 12 * lh.q_star) / (lh.p - lh.q_star))


def test_recovery_moves_the_poisoned_vector_towards_the_genuine_one():
    """ε 2, 64 items, 5 % fakes promoting 4 items (k-RR maximal gain): over 30 pools the recovered
    vector's squared error to the genuine distribution is below the poisoned vector's by more than Z
    standard errors of the paired difference (measured 0.0021 ± 0.0002 over 40 pools). The promoted
    items keep at least 95 % of their gain (poisoned minus genuine frequency, ~0.50; measured: 0.005 ±
    0.001 of it removed): without attack details the learned malicious mass is spread over every
    positive item, not put on the targets."""
    err, kept = [], []
    for seed in range(30):
        fz, _, _, eta = poisoned_pool(2.0, seed)
        rec = ldprecover(fz, eta, 1.0)
        assert rec.min() >= 0 and rec.sum() == pytest.approx(1.0)
        err.append(((fz - GENUINE) ** 2).sum() - ((rec - GENUINE) ** 2).sum())
        kept.append((rec[TARGETS].sum() - GENUINE[TARGETS].sum()) / (fz[TARGETS].sum() - GENUINE[TARGETS].sum()))
    err, kept = np.array(err), np.array(kept)
    assert err.mean() > Z * err.std(ddof=1) / math.sqrt(err.size)
    assert kept.mean() - Z * kept.std(ddof=1) / math.sqrt(kept.size) > 0.95


def test_count_eta_reads_the_excess_of_reports():
    """η_j = m̂_j/(n_j − m̂_j), m̂_j the count above the median: 0 where the count is at or below it."""
    np.testing.assert_allclose(count_eta(np.array([100, 100, 150, 90])), [0, 0, 50 / 100, 0])


def _paired(seed: int = 0, n: int = 6000):
    g = np.random.default_rng(seed)
    X = np.column_stack([g.integers(0, 3, n), g.integers(0, 4, n), g.integers(0, 3, n)])
    y = (X[:, 0] + g.integers(0, 2, n) > 1).astype(np.int64)
    mech = PairedRecordMechanism([3, 4, 3], 2, 2.0)
    Xt, yt = mech.release(X, y, rng=np.random.default_rng(seed + 1))
    return X, y, Xt, yt, mech


def test_ldp_nb_ldprecover_on_paired_releases():
    """η = 0 leaves the CI step alone: the tables are the projected debiased tables (method
    "projection"); "counts" learns η_j from the sampling counts, k-RR mass 1 per table."""
    X, y, Xt, yt, mech = _paired()
    proj = LDPNaiveBayes(method="projection").fit(Xt, yt, mechanism=mech)
    zero = LDPNaiveBayes(robust="ldprecover", recover_eta=0.0).fit(Xt, yt, mechanism=mech)
    for a, b in zip(zero.joint_, proj.joint_):
        np.testing.assert_allclose(a, b, atol=1e-12)
    est = LDPNaiveBayes(robust="ldprecover").fit(Xt, yt, mechanism=mech)
    np.testing.assert_allclose(est.recover_eta_, count_eta(est.n_released_ * (1 + est.recover_eta_)))
    np.testing.assert_allclose(est.malicious_mass_, 1.0)
    assert all(t.min() >= 0 and t.sum() == pytest.approx(1.0) for t in est.joint_)
    assert est.predict_proba(X[:5]).shape == (5, 2)
    assert LDPNaiveBayes().fit(Xt, yt, mechanism=mech).recover_eta_ is None


def test_ldp_nb_ldprecover_refuses_what_it_cannot_read():
    """Split releases have no pair oracle per table; recover_eta takes "counts" or a number >= 0."""
    from fedrr.mechanisms import RecordMechanism, frequency_oracle

    X, y, Xt, yt, mech = _paired()
    split = RecordMechanism([frequency_oracle(k, 1.0) for k in (3, 4, 3)], RandomizedResponse(2, epsilon=1.0))
    Xs, ys = split.release(X, y, rng=np.random.default_rng(3))
    with pytest.raises(ValidationError, match="robust.*paired releases"):
        LDPNaiveBayes(robust="ldprecover").fit(Xs, ys, mechanism=split)
    for bad in (-0.1, "median"):
        with pytest.raises(ValidationError, match="recover_eta"):
            LDPNaiveBayes(robust="ldprecover", recover_eta=bad).fit(Xt, yt, mechanism=mech)


def test_learner_ldp_nb_ldprecover_reads_paired_releases_only():
    """The registry's learner: paired releases fit (its tables are the estimator's); a split release is
    refused before anything runs, naming the learner."""
    from fedrr import learners
    from fedrr.mechanisms import RecordMechanism, frequency_oracle

    X, y, Xt, yt, mech = _paired()
    est = learners.fit_and_score("ldp-nb-ldprecover", learners.FitData(Xt, yt, mech), (X, y)).estimator
    direct = LDPNaiveBayes(robust="ldprecover").fit(Xt, yt, mechanism=mech)
    for a, b in zip(est.joint_, direct.joint_):
        np.testing.assert_array_equal(a, b)
    split = RecordMechanism([frequency_oracle(k, 1.0) for k in (3, 4, 3)], RandomizedResponse(2, epsilon=1.0))
    with pytest.raises(ValidationError, match="'ldp-nb-ldprecover' needs paired releases"):
        learners.check_accepts(["ldp-nb-ldprecover"], split)
    learners.check_accepts(["ldp-nb-ldprecover"], mech)
