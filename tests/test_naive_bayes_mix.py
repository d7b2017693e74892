"""LDPNaiveBayes on a budget mix (``_naive_bayes_mix``): records released through different
mechanisms of one design, each group debiased as one mechanism is and the groups pooled by inverse
variance. The pooling is exact where it must be (two groups of one spec give the one-mechanism fit),
unbiased on a real mix (Monte Carlo within Z_TOL standard errors), and refused where it cannot apply."""

from __future__ import annotations

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.estimators import LDPNaiveBayes
from fedrr.mechanisms import PairedRecordMechanism, RandomizedResponse, RecordMechanism, frequency_oracle

Z_TOL = 5.0
KS, C = (3, 4, 2), 2


def _population(n: int, seed: int):
    g = np.random.default_rng(seed)
    shape = KS + (C,)
    P = g.dirichlet(np.full(int(np.prod(shape)), 0.7)).reshape(shape)
    idx = np.unravel_index(g.choice(P.size, size=n, p=P.ravel()), shape)
    return np.column_stack(idx[:-1]).astype(np.int64), idx[-1].astype(np.int64), P


def _paired(eps: float) -> PairedRecordMechanism:
    return PairedRecordMechanism(list(KS), C, eps)


def _split(eps: float) -> RecordMechanism:
    label = RandomizedResponse(C, epsilon=eps / 2)
    return RecordMechanism([frequency_oracle(k, eps / 2) for k in KS], label, n_sampled=1)


@pytest.mark.parametrize("method", ["clip", "projection", "mle"])
def test_two_groups_of_one_spec_give_the_one_mechanism_fit_paired(method):
    X, y, _ = _population(3000, 0)
    a, b = _paired(2.0), _paired(2.0)  # equal specs, distinct objects: weights ∝ n_g, the plain mean
    Xt, yt = a.release(X, y, rng=np.random.default_rng(1))
    one = LDPNaiveBayes(method=method).fit(Xt, yt, mechanism=a)
    mix = LDPNaiveBayes(method=method).fit(Xt, yt, mechanism=[a] * 1000 + [b] * 2000)
    for t1, t2 in zip(one.joint_unbiased_, mix.joint_unbiased_):
        np.testing.assert_allclose(t2, t1, atol=1e-12)
    for t1, t2 in zip(one.joint_, mix.joint_):
        np.testing.assert_allclose(t2, t1, atol=1e-6 if method == "mle" else 1e-12)
    np.testing.assert_array_equal(mix.n_released_, one.n_released_)


def test_two_groups_of_one_spec_give_the_one_mechanism_fit_split():
    X, y, _ = _population(3000, 2)
    a, b = _split(2.0), _split(2.0)
    Xt, yt = a.release(X, y, rng=np.random.default_rng(3))
    one = LDPNaiveBayes(method="projection").fit(Xt, yt, mechanism=a)
    mix = LDPNaiveBayes(method="projection").fit(Xt, yt, mechanism=[a] * 1500 + [b] * 1500)
    for t1, t2 in zip(one.joint_unbiased_, mix.joint_unbiased_):
        np.testing.assert_allclose(t2, t1, atol=1e-12)
    np.testing.assert_allclose(mix.class_prior_unbiased_, one.class_prior_unbiased_, atol=1e-12)


def test_a_group_that_misses_a_column_still_pools_split():
    """A group of one record (one sampled attribute: the others unreleased in that group) is checked
    with its empty columns kept (``check_releases(allow_empty=True)``), and with equal specs the pool
    is still the one-mechanism fit."""
    X, y, _ = _population(3000, 10)
    a, b = _split(2.0), _split(2.0)
    Xt, yt = a.release(X, y, rng=np.random.default_rng(11))
    assert np.isnan(Xt[0]).sum() == len(KS) - 1
    one = LDPNaiveBayes(method="projection").fit(Xt, yt, mechanism=a)
    mix = LDPNaiveBayes(method="projection").fit(Xt, yt, mechanism=[a] + [b] * 2999)
    for t1, t2 in zip(one.joint_unbiased_, mix.joint_unbiased_):
        np.testing.assert_allclose(t2, t1, atol=1e-12)
    np.testing.assert_array_equal(mix.n_released_, one.n_released_)
    bad = Xt.copy()
    bad[0, np.flatnonzero(~np.isnan(Xt[0]))] = 99  # a value outside the oracle's range, in the small group
    with pytest.raises(ValidationError, match="column"):
        LDPNaiveBayes(method="projection").fit(bad, yt, mechanism=[a] + [b] * 2999)


def test_a_real_mix_is_unbiased_and_weighs_the_precise_group_more():
    """Budgets 0.5 and 4 per person, 40,000 records, one pair each: every pooled cell within Z_TOL
    standard errors of the true P(x_j, y) (the standard error from the weights and each group's
    per-report sample variance); the pooled table is closer to the truth than the ε 0.5 group's alone."""
    X, y, P = _population(40000, 4)
    lo, hi = _paired(0.5), _paired(4.0)
    mech = np.array([lo, hi], dtype=object)[np.random.default_rng(5).integers(0, 2, X.shape[0])]
    Xt = np.full(X.shape, np.nan)
    for m in (lo, hi):
        rows = np.flatnonzero(mech == m)
        Xt[rows] = m.release(X[rows], y[rows], rng=np.random.default_rng(6 if m is lo else 7))[0]
    mix = LDPNaiveBayes().fit(Xt, None, mechanism=list(mech))
    rows_lo = np.flatnonzero(mech == lo)
    alone = LDPNaiveBayes().fit(Xt[rows_lo], None, mechanism=lo)
    from fedrr.mechanisms import rare_value_variance

    for j in range(len(KS)):
        truth = P.sum(axis=tuple(d for d in range(len(KS)) if d != j))
        num, var, den = 0.0, 0.0, 0.0
        for m in (lo, hi):
            r = np.flatnonzero(mech == m)
            v = Xt[r, j][~np.isnan(Xt[r, j])]
            U = m.unbiased_pair_table(j, v)
            w = v.size / rare_value_variance(m.oracles[j])
            num, den = num + w * U.mean(axis=0), den + w
            var = var + w**2 * U.var(axis=0, ddof=1) / v.size
        se = np.sqrt(var) / den
        np.testing.assert_allclose(mix.joint_unbiased_[j], num / den, atol=1e-12)
        assert np.all(np.abs(mix.joint_unbiased_[j] - truth) < Z_TOL * se), (j, mix.joint_unbiased_[j] - truth, se)
        err_mix = np.abs(mix.joint_unbiased_[j] - truth).sum()
        err_lo = np.abs(alone.joint_unbiased_[j] - truth).sum()
        assert err_mix < err_lo, (j, err_mix, err_lo)


def test_a_mix_is_refused_where_it_cannot_be_pooled():
    X, y, _ = _population(200, 8)
    a, b = _paired(1.0), _paired(2.0)
    Xt, _ = a.release(X, y, rng=np.random.default_rng(9))
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes(robust="margins").fit(Xt, None, mechanism=[a] * 100 + [b] * 100)
    assert e.value.field == "robust"
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes().fit(Xt, None, mechanism=[a] * 100 + [PairedRecordMechanism([3, 4, 3], C, 1.0)] * 100)
    assert e.value.field == "mechanism" and "share attributes" in str(e.value)
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes().fit(Xt, None, mechanism=[a] * 100 + [_split(1.0)] * 100)
    assert e.value.field == "mechanism" and "all paired or all split" in str(e.value)
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes().fit(Xt, None, mechanism=[a, b])
    assert e.value.field == "mechanism" and "one per record" in str(e.value)
