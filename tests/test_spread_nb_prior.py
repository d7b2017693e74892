"""Spread-EM's ``prior="naive-bayes"``: the joint p(x) = Σ_c p(c) Π_d p(x_d | c) of naive Bayes
fitted on the releases, a fixed latent-class prior with exact posterior draws. Records that release
one sampled attribute show nothing else of how attributes co-occur; this prior keeps what their
common dependence on the label implies."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import chi2

from fedrr.errors import ValidationError
from fedrr.estimators import LDPNaiveBayes, SpreadLogisticRegression
from fedrr.estimators.spread import group_records
from fedrr.estimators.spread._design import ColumnLayout
from fedrr.estimators.spread._priors._mixture import naive_bayes_prior
from fedrr.mechanisms import LaplaceMechanism, RandomizedResponse, RecordMechanism
from fedrr.pool import Pool

K, D = 3, 4
PI = np.array([0.4, 0.6])
#: p(x_d | c), (D, C, K): every attribute depends on the class, so attributes co-occur through it
P = np.array(
    [
        [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]],
        [[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]],
        [[0.5, 0.4, 0.1], [0.1, 0.4, 0.5]],
        [[0.2, 0.2, 0.6], [0.6, 0.2, 0.2]],
    ]
)


def _release(seed: int, n: int, eps: float = 4.0):
    """n records of the naive-Bayes model above, each releasing its label and one sampled attribute."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < PI[1]).astype(int)
    X = np.stack([(rng.random(n)[:, None] > np.cumsum(P[d][y], axis=1)).sum(axis=1) for d in range(D)], axis=1)
    rm = RecordMechanism([RandomizedResponse(K, epsilon=eps)] * D, RandomizedResponse(2, epsilon=eps), n_sampled=1)
    Xt, yt = rm.release(X, y, rng=rng)
    return Xt, yt, rm


def _prior(Xt, yt, rm):
    return naive_bayes_prior(Xt, yt, group_records(rm, len(yt)), ColumnLayout.from_mechanism(rm))


def _enumerated(prior, rm, xt):
    """p(x | x̃) over every x of the domain, and p(x̃), by enumeration: p(x) = Σ_c π_c Π_d p(x_d | c)."""
    grid = np.array(list(itertools.product(range(K), repeat=D)))
    lp = logsumexp(prior.log_pi[None, :] + sum(prior.log_p[d][:, grid[:, d]].T for d in range(D)), axis=1)
    for d, f in enumerate(rm.fields):
        if not np.isnan(xt[d]):
            lp = lp + f.mechanism.log_likelihood_matrix(np.array([int(xt[d])]))[0][grid[:, d]]
    return grid, np.exp(lp - logsumexp(lp)), logsumexp(lp)


@pytest.mark.parametrize("xt", [[2.0, np.nan, np.nan, np.nan], [np.nan, np.nan, np.nan, 0.0]])
def test_draws_are_the_exact_posterior_and_the_marginal_is_exact(xt):
    """Draws for one release against p(x | x̃) enumerated over the 81 records (chi-square at
    0.1 %); the product of the posterior's own marginals, which a factorised prior would draw, is
    rejected by the same test (it has the power to see co-occurrence); log p(x̃) equals the sum."""
    Xt, yt, rm = _release(0, 6000)
    prior = _prior(Xt, yt, rm)
    xt = np.array(xt)
    grid, post, logm = _enumerated(prior, rm, xt)
    n = 20000
    X1 = np.tile(xt, (n, 1))
    draws = prior.draw(rm, X1, ~np.isnan(X1), np.random.default_rng(1).random((1, n, D + 1)))[0].astype(int)
    observed = np.bincount(draws @ K ** np.arange(D)[::-1], minlength=K**D)
    crit = chi2.ppf(0.999, K**D - 1)

    def stat(p):
        keep = p * n >= 5
        e = p[keep] * n * observed[keep].sum() / (p[keep] * n).sum()
        return float(((observed[keep] - e) ** 2 / e).sum())

    assert stat(post) < crit
    marg = [np.bincount(grid[:, d], weights=post, minlength=K) for d in range(D)]
    assert stat(np.prod([marg[d][grid[:, d]] for d in range(D)], axis=0)) > crit  # 8x crit on the first release
    assert prior.log_marginal(rm, xt[None], ~np.isnan(xt[None]))[0] == pytest.approx(logm, rel=1e-12)


def _counting_draw(sampler, u):
    """The draw as numpy counts: the class, then each state, is the number of its CDF's entries
    <= the uniform (at most k − 1)."""
    cls = np.minimum((sampler.cls[None] <= u[..., :1]).sum(axis=-1), sampler.cls.shape[1] - 1)
    out = np.empty((u.shape[0], sampler.cls.shape[0], len(sampler.base)))
    for d, base in enumerate(sampler.base):
        c = base[cls]
        if d in sampler.rel:
            rows, cdf = sampler.rel[d]
            c[:, rows] = cdf[np.arange(rows.size)[None, :], cls[:, rows]]
        out[..., d] = np.minimum((c <= u[..., d + 1 : d + 2]).sum(axis=-1), c.shape[-1] - 1)
    return out


def test_the_compiled_draw_counts_exactly_as_numpy():
    """Attributes of 2, 5 and 9 states (the kernel pads the CDFs to 9), two sampled per record,
    uniforms including the CDFs' own values (ties count as <=): every draw equal."""
    rng = np.random.default_rng(5)
    ks, n = [2, 5, 9], 3000
    y = rng.integers(0, 2, n)
    X = np.stack([(rng.integers(0, k, n) + y) % k for k in ks], axis=1)
    rm = RecordMechanism(
        [RandomizedResponse(k, epsilon=2.0) for k in ks], RandomizedResponse(2, epsilon=2.0), n_sampled=2
    )
    Xt, yt = rm.release(X, y, rng=rng)
    prior = naive_bayes_prior(Xt, yt, group_records(rm, n), ColumnLayout.from_mechanism(rm))
    sampler = prior.sampler(rm, Xt, ~np.isnan(Xt))
    u = rng.random((4, n, len(ks) + 1))
    u[0, :, 0] = sampler.cls[:, 0]  # a uniform equal to a CDF value
    u[1, :, 1] = sampler.base[0][0, 0]
    np.testing.assert_array_equal(sampler.draw(u), _counting_draw(sampler, u))


def test_a_naive_bayes_prior_fits_what_a_factorised_prior_cannot():
    """Data from a naive-Bayes model, one sampled attribute per record: the true p(c = 1 | x) is
    known, and logistic regression on one-hot inputs contains it. The mean absolute error of the
    fitted p(c = 1 | x) over p(x), measured on seeds 0-2: naive-Bayes prior 0.019-0.030 at
    n = 4,000 (0.016-0.021 at 16,000: it shrinks with n), factorised learned prior 0.062-0.070
    (0.060-0.063 at 16,000: a bias, it does not). The bounds sit about three seed-to-seed standard
    deviations (≈0.005) from each side."""
    grid = np.array(list(itertools.product(range(K), repeat=D)))
    lj = np.log(PI)[None, :] + sum(np.log(P[d][:, grid[:, d]]).T for d in range(D))
    px = np.exp(lj).sum(axis=1)
    true = np.exp(lj[:, 1]) / px
    Xt, yt, rm = _release(0, 4000)
    err = {}
    for prior in ("naive-bayes", "learned"):
        est = SpreadLogisticRegression(C=np.inf, prior=prior, encoding="onehot", random_state=0, max_iter=60)
        est.fit(Xt, yt, mechanism=rm)
        err[prior] = float(np.sum(px * np.abs(est.predict_proba(grid)[:, 1] - true)))
    assert err["naive-bayes"] < 0.045, err
    assert err["learned"] > 0.05, err


def test_the_fit_is_reproducible_and_reports_the_mixture_marginals():
    Xt, yt, rm = _release(1, 1500)
    kw = dict(prior="naive-bayes", encoding="onehot", random_state=3, max_iter=8, burn_in=4)
    a = SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=rm)
    b = SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=rm)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    nb = LDPNaiveBayes().fit(Xt, yt, mechanism=rm)
    pc = nb.class_prior_ / nb.class_prior_.sum()
    for d in range(D):  # the prior is fixed: prior_ is Σ_c p(c) p(x_d | c)
        np.testing.assert_allclose(a.prior_["categorical"][d], pc @ np.exp(nb.feature_log_prob_[d]), rtol=1e-12)


def test_an_attribute_no_record_released_is_uniform():
    """A small pool (or a cross-validation fold) where no record released attribute 2: its
    p(x_2 | c) is uniform, and the other attributes' are as before."""
    Xt, yt, rm = _release(4, 3000)
    full = _prior(Xt, yt, rm)
    Xt[:, 2] = np.nan
    Xt[np.isnan(Xt).all(axis=1), 0] = 0.0  # the records that released only attribute 2 now release attribute 0
    part = _prior(Xt, yt, rm)
    np.testing.assert_allclose(np.exp(part.log_p[2]), 1 / K)
    np.testing.assert_array_equal(part.log_p[3], full.log_p[3])
    assert not np.allclose(np.exp(full.log_p[2]), 1 / K)
    with pytest.raises(ValidationError, match="no record released any attribute"):
        _prior(np.full_like(Xt, np.nan), yt, rm)


def test_refused_where_naive_bayes_cannot_be_fitted(tmp_path):
    Xt, yt, rm = _release(2, 400)
    other = RecordMechanism([RandomizedResponse(K, epsilon=2.0)] * D, RandomizedResponse(2, epsilon=2.0), n_sampled=1)
    est = SpreadLogisticRegression(prior="naive-bayes", max_iter=2)
    with pytest.raises(ValidationError, match="no budget mix") as e:
        est.fit(Xt, yt, mechanism=[rm] * 200 + [other] * 200)
    assert e.value.field == "prior"
    numeric = RecordMechanism([LaplaceMechanism(1.0)] * 2, RandomizedResponse(2, epsilon=1.0))
    Xn, yn = numeric.release(np.random.default_rng(0).random((50, 2)), np.arange(50) % 2, rng=np.random.default_rng(1))
    with pytest.raises(ValidationError, match="naive-bayes") as e:
        est.fit(Xn, yn, mechanism=numeric)
    assert e.value.field == "prior"
    unlabelled = RecordMechanism([RandomizedResponse(K, epsilon=2.0)] * D, None)
    Xu, _ = unlabelled.release(np.zeros((40, D), int), None, rng=np.random.default_rng(0))
    with pytest.raises(ValidationError, match="naive-bayes") as e:
        est.fit(Xu, np.arange(40) % 2, mechanism=unlabelled)
    assert e.value.field == "prior"
    Pool(Xt, yt, np.arange(len(yt)), [rm] * len(yt)).save(tmp_path / "p", layout="dir")
    with pytest.raises(ValidationError, match="use fit, not fit_pool"):
        est.fit_pool(tmp_path / "p")
    with pytest.raises(ValidationError, match="naive-bayes"):
        SpreadLogisticRegression(prior="naive_bayes").fit(Xt, yt, mechanism=rm)


def test_the_spread_learners_use_it_for_records_that_release_sampled_attributes():
    from fedrr.learners import release_prior

    rr = RandomizedResponse(K, epsilon=2.0)
    assert release_prior(_release(0, 10)[2]) == "naive-bayes"
    assert release_prior(RecordMechanism([rr] * D, RandomizedResponse(2, epsilon=1.0))) == "learned"  # whole records
    assert release_prior([_release(0, 10)[2], _release(0, 10, eps=1.0)[2]]) == "learned"  # a budget mix
    assert release_prior([_release(0, 10)[2]] * 2) == "naive-bayes"  # one mechanism for every record
    assert release_prior(RecordMechanism([rr] * D, None, n_sampled=1)) == "learned"  # no label oracle
    numeric = RecordMechanism([LaplaceMechanism(1.0)] * 2, RandomizedResponse(2, epsilon=1.0), n_sampled=1)
    assert release_prior(numeric) == "learned"
