"""Spread-EM's fake-client defence robust="margins" (learner spread-robust): on a synthetic paired
pool with output-attack fakes on one attribute it rejects that attribute and trims about the fakes'
number of its records (not the attribute's honest ones) and its accuracy comes back towards the clean
pool's; on an honest pool it drops nothing and is the
plain fit; split releases, the CV and the learner; bad parameters and unsupported uses name their field."""

from __future__ import annotations

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread._paired import class_margin, pair_tables
from fedrr.learners import FitData, FitOptions, get
from fedrr.mechanisms import PairedRecordMechanism, RandomizedResponse, RecordMechanism

F, K = 6, 3
#: the attacked attribute 0 is a weak predictor, as native country on Adult
W = np.array([0.3, 1.5, -1.0, 0.8, 0.5, 0.0])


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, K, size=(n, F))
    y = (rng.random(n) < 1 / (1 + np.exp(-((X - 1) @ W - 0.3)))).astype(int)
    return X, y


def _paired_pools(n_fakes: int = 600):
    """6,000 honest paired releases (ε 4, one pair each) and the same with ``n_fakes`` output-attack
    fakes: each releases the pair (x_0 = 0, y = 1) on attribute 0 (k-RR: the value 0·C + 1)."""
    X, y = _data(6000, 1)
    rm = PairedRecordMechanism([K] * F, 2, 4.0)
    Xt, _ = rm.release(X, y, rng=np.random.default_rng(3))
    fakes = np.full((n_fakes, F), np.nan)
    fakes[:, 0] = 0 * 2 + 1
    Xa = np.vstack([Xt, fakes])
    return rm, Xt, Xa


def _spread(**kw):
    return SpreadLogisticRegression(random_state=0, max_iter=80, **kw)


def test_robust_margins_trims_about_the_fakes_and_recovers_accuracy():
    rm, Xt, Xa = _paired_pools()
    Xte, yte = _data(5000, 2)
    clean = _spread().fit(Xt, None, mechanism=rm).score(Xte, yte)
    attacked = _spread().fit(Xa, None, mechanism=rm).score(Xte, yte)
    est = _spread(robust="margins").fit(Xa, None, mechanism=rm)
    defended = est.score(Xte, yte)
    assert np.flatnonzero(~est.consistent_).tolist() == [0]
    assert est.margin_z_[0] > est.margin_z_critical_ + 5
    # about the 600 fakes are trimmed, not the ~1,600 records that released attribute 0 (the former drop)
    assert 450 < est.n_dropped_ < 800 < int((~np.isnan(Xa[:, 0])).sum())
    assert clean - attacked > 0.03  # the attack does damage (0.757 -> 0.706)
    assert abs(defended - clean) < 0.5 * abs(attacked - clean)  # 0.745: most of it comes back


def test_robust_margins_on_an_honest_pool_drops_nothing_and_is_the_plain_fit():
    rm, Xt, _ = _paired_pools()
    plain = _spread().fit(Xt, None, mechanism=rm)
    est = _spread(robust="margins").fit(Xt, None, mechanism=rm)
    assert est.consistent_.all() and est.n_dropped_ == 0
    assert est.margin_z_.max() < est.margin_z_critical_ and est.margin_z_.max() > 0.1  # the test ran
    np.testing.assert_array_equal(est.coef_, plain.coef_)
    assert plain.consistent_.all() and plain.margin_z_critical_ == np.inf and plain.n_dropped_ == 0


def test_robust_margins_in_the_cv_and_the_learner():
    """The CV runs the defence once on the whole pool (the selection, test and refit see the kept
    records); the learner spread-robust is SpreadLogisticRegressionCV(robust="margins")."""
    rm, _, Xa = _paired_pools()
    cv = SpreadLogisticRegressionCV(Cs=(1.0,), random_state=0, max_iter=40, cv_max_iter=20, robust="margins")
    cv.fit(Xa, None, mechanism=rm)
    assert np.flatnonzero(~cv.consistent_).tolist() == [0] and not cv.fallback_
    assert cv.diagnostics()["robust_dropped"] == [0] and cv.diagnostics()["robust_n_dropped"] == cv.n_dropped_
    est = get("spread-robust").fit(FitData(Xa, np.full(Xa.shape[0], np.nan), rm), FitOptions(spread_max_iter=20))
    assert est.robust == "margins" and np.flatnonzero(~est.consistent_).tolist() == [0]


def test_robust_margins_on_split_releases_drops_the_records_with_their_labels():
    """Split release (label by RR at ε 2, one sampled attribute by RR at ε 2): fakes send attribute
    0 = 0 and label 1. About the fakes' number of the attribute's records go, their label reports with them."""
    X, y = _data(6000, 1)
    rr = RandomizedResponse(K, epsilon=2.0)
    rm = RecordMechanism([rr] * F, RandomizedResponse(2, epsilon=2.0), n_sampled=1)
    Xt, yt = rm.release(X, y, rng=np.random.default_rng(3))
    fakes = np.full((600, F), np.nan)
    fakes[:, 0] = 0
    Xa, ya = np.vstack([Xt, fakes]), np.r_[yt, np.ones(600)]
    est = _spread(robust="margins").fit(Xa, ya, mechanism=rm)
    assert np.flatnonzero(~est.consistent_).tolist() == [0]
    assert 300 < est.n_dropped_ < 800 < int((~np.isnan(Xa[:, 0])).sum())
    Xte, yte = _data(5000, 2)
    assert est.score(Xte, yte) > _spread().fit(Xa, ya, mechanism=rm).score(Xte, yte)


def test_pair_tables_of_an_unreleased_attribute_keep_the_class_margin():
    """An attribute no record released: uniform over its states, with the released tables' class
    margin, so the class prior averaged over the tables is the released attributes' alone."""
    rm, Xt, _ = _paired_pools()
    kept = np.isnan(Xt[:, 0])
    tabs = pair_tables(rm, Xt[kept])
    np.testing.assert_allclose(tabs[0].sum(axis=0), class_margin(tabs[1:]), rtol=1e-12)
    np.testing.assert_allclose(tabs[0], np.tile(tabs[0][0], (K, 1)))
    np.testing.assert_allclose(class_margin(tabs), class_margin(tabs[1:]), rtol=1e-12)


@pytest.mark.parametrize(
    "kw, field, text",
    [
        ({"robust": "median"}, "robust", "valid: none, margins"),
        ({"robust_alpha": 0.0}, "robust_alpha", "(0, 1)"),
        ({"robust_alpha": 1.5}, "robust_alpha", "(0, 1)"),
    ],
)
@pytest.mark.parametrize("cls", [SpreadLogisticRegression, SpreadLogisticRegressionCV])
def test_robust_bad_parameters_name_the_field(cls, kw, field, text):
    rm = PairedRecordMechanism([K] * F, 2, 4.0)
    est = cls(**kw)
    assert est.get_params()[field] == kw[field]  # stored unchanged, validated at fit
    with pytest.raises(ValidationError) as err:
        est.fit(np.zeros((8, F)), None, mechanism=rm)
    assert err.value.field == field and text in err.value.message


def test_robust_margins_refuses_a_budget_mix_and_fit_pool(tmp_path):
    rm, _, Xa = _paired_pools(60)
    other = PairedRecordMechanism([K] * F, 2, 2.0)
    mix = [rm if i % 2 else other for i in range(Xa.shape[0])]
    with pytest.raises(ValidationError) as err:
        _spread(robust="margins").fit(Xa, None, mechanism=mix)
    assert err.value.field == "robust" and "one record mechanism" in err.value.message
    with pytest.raises(ValidationError) as err:
        _spread(robust="margins").fit_pool(tmp_path)
    assert err.value.field == "robust" and "fit_pool" in err.value.message


def test_the_cv_drop_reads_the_selection_part_only():
    """Split releases (issue 45 item 4): the CV draws its split first and the consistency test reads
    selection part A only, so test part B's released labels cannot move the drop and the permutation
    test on B stays exact: B's labels permuted, the same attribute is rejected with the same z and the
    same records dropped; the z is the test on A's records, and on the whole pool it would move."""
    from fedrr.estimators import LDPNaiveBayes
    from fedrr.estimators.spread._cv_fallback import heldout_mask, split_rng

    X, y = _data(3000, 1)
    rm = RecordMechanism([RandomizedResponse(K, epsilon=2.0)] * F, RandomizedResponse(2, epsilon=2.0), n_sampled=1)
    Xt, yt = rm.release(X, y, rng=np.random.default_rng(3))
    fakes = np.full((300, F), np.nan)
    fakes[:, 0] = 0
    Xa, ya = np.vstack([Xt, fakes]), np.r_[yt, np.ones(300)]
    held = heldout_mask(len(ya), 0.5, split_rng(0))
    yb = ya.copy()
    yb[held] = np.random.default_rng(5).permutation(ya[held])
    kw = {"Cs": (1.0,), "cv": 2, "random_state": 0, "max_iter": 10, "cv_max_iter": 10, "n_permutations": 19}
    fits = [SpreadLogisticRegressionCV(robust="margins", **kw).fit(Xa, lab, mechanism=rm) for lab in (ya, yb)]
    a, b = fits
    assert np.flatnonzero(~a.consistent_).tolist() == [0] and 0 < a.n_dropped_ < int((~np.isnan(Xa[:, 0])).sum())
    np.testing.assert_array_equal(a.consistent_, b.consistent_)
    np.testing.assert_array_equal(a.margin_z_, b.margin_z_)
    assert a.n_dropped_ == b.n_dropped_ and a.gain_["n_test"] == b.gain_["n_test"]
    on_a = LDPNaiveBayes(method="clip", robust="margins").fit(Xa[~held], ya[~held], mechanism=rm)
    np.testing.assert_allclose(a.margin_z_, on_a.margin_z_, rtol=1e-12)
    whole = [LDPNaiveBayes(method="clip", robust="margins").fit(Xa, lab, mechanism=rm).margin_z_ for lab in (ya, yb)]
    assert np.abs(whole[0] - whole[1]).max() > 1e-3  # the whole pool's test would have moved
