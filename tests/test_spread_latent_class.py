"""Spread-EM's ``prior="latent-class"``: p(x) = Σ_m π_m Π_d p(x_d | m) fitted to the releases by EM
(``latent_class_prior``). Data from a known latent-class model whose label depends on the component,
so attributes co-occur beyond what the label explains: the fit recovers the model's parameters from
paired and from record releases, and spread-EM with it estimates p(y | x) better than with the
naive-Bayes prior, whose components are the classes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread import auto_prior
from fedrr.estimators.spread._design import ColumnLayout
from fedrr.estimators.spread._paired import paired_view
from fedrr.estimators.spread._priors._mixture import latent_class_em, latent_class_prior
from fedrr.mechanisms import LaplaceMechanism, PairedRecordMechanism, RandomizedResponse, RecordMechanism
from fedrr.pool import Pool

K, D, C = 3, 4, 2
PI = np.array([0.55, 0.45])
PY = np.array([0.3, 0.75])  # p(y = 1 | m)
#: p(x_d | m), (D, M, K)
P_TRUE = P = np.array(
    [
        [[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]],
        [[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]],
        [[0.5, 0.4, 0.1], [0.1, 0.4, 0.5]],
        [[0.2, 0.2, 0.6], [0.6, 0.2, 0.2]],
    ]
)


def _sample(seed: int, n: int):
    rng = np.random.default_rng(seed)
    m = (rng.random(n) < PI[1]).astype(int)
    y = (rng.random(n) < PY[m]).astype(int)
    X = np.stack([(rng.random(n)[:, None] > np.cumsum(P[d][m], axis=1)).sum(axis=1) for d in range(D)], axis=1)
    return X, y


def _errors(prior) -> tuple[float, float]:
    """The largest absolute errors of π and of p(x_d | m), under the best matching of components."""
    pi = np.exp(prior.log_pi)
    p = np.array([np.exp(lp) for lp in prior.log_p])
    return min(
        (float(np.abs(pi[list(s)] - PI).max()), float(np.abs(p[:, list(s)] - P).max()))
        for s in itertools.permutations(range(2))
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_the_fit_recovers_a_known_latent_class_model_from_paired_releases(seed):
    """20,000 records, two of four pairs each at ε 4: seeds 0-2 gave errors ≤ 0.009 for π and
    ≤ 0.032 for p(x_d | m) (a cell's standard error here is about 0.01)."""
    X, y = _sample(seed, 20000)
    pm = PairedRecordMechanism([K] * D, C, 8.0, n_sampled=2)
    Xt, _ = pm.release(X, y, rng=np.random.default_rng(100 + seed))
    view = paired_view(pm, Xt)
    layout = ColumnLayout.from_mechanism(view)
    prior = latent_class_prior(
        layout, latent_class_em(Xt, np.zeros(len(y), int), [(view, np.arange(len(y)))], layout, 2, 0)
    )
    e_pi, e_p = _errors(prior)
    assert e_pi < 0.02 and e_p < 0.05, (e_pi, e_p)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_fit_recovers_it_from_record_releases_with_a_label(seed):
    """Every attribute by k-RR at ε 2 and the label by RR at ε 2 (its P(ỹ | c) enters each record's
    likelihood once): seeds 0-2 gave errors ≤ 0.020 for π and ≤ 0.027 for p(x_d | m)."""
    X, y = _sample(seed, 20000)
    rm = RecordMechanism([RandomizedResponse(K, epsilon=2.0)] * D, RandomizedResponse(2, epsilon=2.0))
    Xr, yr = rm.release(X, y, rng=np.random.default_rng(200 + seed))
    layout = ColumnLayout.from_mechanism(rm)
    prior = latent_class_prior(layout, latent_class_em(Xr, yr.astype(int), [(rm, np.arange(len(y)))], layout, 2, 0))
    e_pi, e_p = _errors(prior)
    assert e_pi < 0.04 and e_p < 0.05, (e_pi, e_p)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_label_term_identifies_p_y_given_the_component(seed):
    """p(y | m) from record releases (every attribute by k-RR at ε 2, the label by RR at ε 2): the
    label's P(ỹ | c) enters each record's likelihood once, so the fit recovers PY; without that term
    p(y | m) stays at its random start. Seeds 0-2 gave errors ≤ 0.014 (a cell's standard error ≈ 0.01)."""
    X, y = _sample(seed, 20000)
    rm = RecordMechanism([RandomizedResponse(K, epsilon=2.0)] * D, RandomizedResponse(2, epsilon=2.0))
    Xr, yr = rm.release(X, y, rng=np.random.default_rng(200 + seed))
    log_pi, py, P = latent_class_em(
        Xr, yr.astype(int), [(rm, np.arange(len(y)))], ColumnLayout.from_mechanism(rm), 2, 0
    )
    p = np.array(P)  # (D, M, K)
    s = min(itertools.permutations(range(2)), key=lambda s: np.abs(p[:, list(s)] - P_TRUE).max())
    assert np.abs(py[list(s), 1] - PY).max() < 0.06, py


def test_spread_with_it_estimates_p_y_given_x_better_than_with_the_naive_bayes_prior():
    """The mean absolute error of the fitted p(y = 1 | x) over p(x), 8,000 records, two of four pairs
    at ε 4 each, measured on seeds 0-2: latent-class 0.040-0.043, naive-Bayes 0.052-0.060 (its
    components are the classes, so it misses how attributes co-occur through the component). The
    differences were 0.012-0.017; the bound asks for 0.004, about 2.5 of their standard deviations."""
    grid = np.array(list(itertools.product(range(K), repeat=D)))
    lj = np.log(PI)[None, :] + sum(np.log(P[d][:, grid[:, d]]).T for d in range(D))
    px = np.exp(lj).sum(axis=1)
    true = (np.exp(lj) / px[:, None]) @ PY
    X, y = _sample(0, 8000)
    pm = PairedRecordMechanism([K] * D, C, 8.0, n_sampled=2)
    Xt, _ = pm.release(X, y, rng=np.random.default_rng(100))
    err = {}
    for prior in ("latent-class", "naive-bayes"):
        est = SpreadLogisticRegression(
            C=np.inf, prior=prior, n_latent_classes=2, encoding="onehot", random_state=0, max_iter=60
        )
        err[prior] = float(np.sum(px * np.abs(est.fit(Xt, None, mechanism=pm).predict_proba(grid)[:, 1] - true)))
    assert err["latent-class"] < err["naive-bayes"] - 0.004, err


def test_the_fit_is_reproducible_and_a_cv_fits_it_once_per_fold():
    X, y = _sample(3, 3000)
    pm = PairedRecordMechanism([K] * D, C, 8.0, n_sampled=2)
    Xt, _ = pm.release(X, y, rng=np.random.default_rng(3))
    kw = dict(prior="latent-class", n_latent_classes=3, encoding="onehot", random_state=5, max_iter=8, burn_in=4)
    a = SpreadLogisticRegression(**kw).fit(Xt, None, mechanism=pm)
    b = SpreadLogisticRegression(**kw).fit(Xt, None, mechanism=pm)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    for d in range(D):  # prior_ is the mixture's marginal Σ_m π_m p(x_d | m)
        np.testing.assert_allclose(a.prior_["categorical"][d].sum(), 1.0)
    import fedrr.estimators.spread._prior_setup as est_mod

    calls = []
    real = est_mod.latent_class_em
    try:
        est_mod.latent_class_em = lambda *a, **k: calls.append(1) or real(*a, **k)
        kw = dict(prior="latent-class", n_latent_classes=2, encoding="onehot", random_state=0)
        cv = SpreadLogisticRegressionCV(Cs=(0.1, 1.0), cv=2, cv_max_iter=4, max_iter=8, burn_in=4, fallback=False, **kw)
        cv.fit(Xt, None, mechanism=pm)
    finally:
        est_mod.latent_class_em = real
    assert len(calls) == 3  # one per fold's training releases, one for the refit: not one per candidate
    calls.clear()
    try:
        est_mod.latent_class_em = lambda *a, **k: calls.append(a[-1]) or real(*a, **k)
        kw["random_state"] = None  # each fit draws its own seed: the CV's fits still share one start
        SpreadLogisticRegressionCV(Cs=(0.1, 1.0), cv=2, cv_max_iter=4, max_iter=8, burn_in=4, fallback=False, **kw).fit(
            Xt, None, mechanism=pm
        )
    finally:
        est_mod.latent_class_em = real
    assert len(calls) == 3 and len(set(calls)) == 1, calls


def test_auto_chooses_it_where_records_release_two_or_more_pairs():
    assert auto_prior(PairedRecordMechanism([K] * D, C, 4.0, n_sampled=1)) == "naive-bayes"
    assert auto_prior(PairedRecordMechanism([K] * D, C, 4.0, n_sampled=2)) == "latent-class"
    assert auto_prior([PairedRecordMechanism([K] * D, C, 4.0, n_sampled=3)] * 2) == "latent-class"


def test_refused_where_it_cannot_be_fitted(tmp_path):
    numeric = RecordMechanism([LaplaceMechanism(1.0)] * 2, RandomizedResponse(2, epsilon=1.0))
    Xn, yn = numeric.release(np.random.default_rng(0).random((50, 2)), np.arange(50) % 2, rng=np.random.default_rng(1))
    with pytest.raises(ValidationError, match="discrete columns only") as e:
        SpreadLogisticRegression(prior="latent-class", max_iter=2).fit(Xn, yn, mechanism=numeric)
    assert e.value.field == "prior"
    unlabelled = RecordMechanism([RandomizedResponse(K, epsilon=2.0)] * D, None)
    Xu, _ = unlabelled.release(np.zeros((40, D), int), None, rng=np.random.default_rng(0))
    with pytest.raises(ValidationError, match="released label") as e:
        SpreadLogisticRegression(prior="latent-class", max_iter=2).fit(Xu, np.arange(40) % 2, mechanism=unlabelled)
    assert e.value.field == "prior"
    rm = RecordMechanism([RandomizedResponse(K, epsilon=2.0)] * D, RandomizedResponse(2, epsilon=2.0))
    Xr, yr = rm.release(*_sample(0, 60), rng=np.random.default_rng(0))
    Pool(Xr, yr, np.arange(60), [rm] * 60).save(tmp_path / "p", layout="dir")
    with pytest.raises(ValidationError, match="use fit, not fit_pool"):
        SpreadLogisticRegression(prior="latent-class").fit_pool(tmp_path / "p")
    with pytest.raises(ValidationError) as e:
        SpreadLogisticRegression(prior="latent-class", n_latent_classes=0).fit(Xr, yr, mechanism=rm)
    assert e.value.field == "n_latent_classes"


def test_an_attribute_no_record_released_is_uniform():
    X, y = _sample(4, 3000)
    pm = PairedRecordMechanism([K] * D, C, 8.0, n_sampled=1)
    Xt, _ = pm.release(X, y, rng=np.random.default_rng(4))
    moved = ~np.isnan(Xt[:, 2])
    Xt[moved, 2], Xt[moved, 0] = np.nan, 0.0  # the records that released attribute 2 release attribute 0
    view = paired_view(pm, Xt)
    layout = ColumnLayout.from_mechanism(view)
    prior = latent_class_prior(
        layout, latent_class_em(Xt, np.zeros(len(y), int), [(view, np.arange(len(y)))], layout, 2, 0)
    )
    np.testing.assert_allclose(np.exp(prior.log_p[2]), 1 / K)
    assert not np.allclose(np.exp(prior.log_p[1]), 1 / K)


def _reference_em(blocks, label, ks, M, seed, steps):
    """The latent-class EM written out from its definition on the blocks as ``_lc_blocks`` gives them
    (records in their own order, logs throughout): the reference ``_lc_em``'s runs must equal."""
    n, C = label.shape
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x1C,)))
    log_pi, py = np.full(M, -np.log(M)), rng.dirichlet(np.full(C, 5.0), size=M)
    P = [rng.dirichlet(np.full(k, 5.0), size=M) for k in ks]
    for _ in range(steps):
        logL = log_pi[None, :, None] + np.log(py)[None] + label[:, None, :]  # (n, M, C)
        A = []
        for d, rows, ET in blocks:
            a = np.maximum(np.einsum("ms,isc->imc", P[d], ET), 1e-300)
            logL[rows] += np.log(a)
            A.append(a)
        post = np.exp(logL - logL.max(axis=(1, 2), keepdims=True))
        post /= post.sum(axis=(1, 2), keepdims=True)
        mass = post.sum(axis=0)
        log_pi = np.log(mass.sum(axis=1) / n)
        py = mass / mass.sum(axis=1, keepdims=True)
        counts = [np.zeros_like(p) for p in P]
        for (d, rows, ET), a in zip(blocks, A):
            counts[d] += np.einsum("imc,isc->ms", post[rows] / a, ET)
        P = [c * p + 1e-12 for c, p in zip(counts, P)]
        P = [p / p.sum(axis=1, keepdims=True) for p in P]
    return log_pi, py, P


@pytest.mark.parametrize("kind", ["paired", "record"])
def test_the_em_on_contiguous_runs_equals_its_definition(kind):
    """``_lc_em`` reorders the records into runs and multiplies instead of adding logs (issue 47):
    after 25 steps its parameters equal the EM written out from the definition to 1e-10, on paired
    releases of two pairs and on record releases of two sampled attributes with a label."""
    from fedrr.estimators.spread._priors._mixture import _lc_blocks, _lc_em

    X, y = _sample(5, 600)
    if kind == "paired":
        mech = PairedRecordMechanism([K] * D, C, 4.0, n_sampled=2)
    else:
        rr = RandomizedResponse(K, epsilon=1.0)
        mech = RecordMechanism([rr] * D, RandomizedResponse(2, epsilon=1.0), n_sampled=2)
    Xr, yr = mech.release(X, y, rng=np.random.default_rng(9))
    est = SpreadLogisticRegression(encoding="onehot")
    Xv, yi, groups, layout = est._prepare(Xr, None if kind == "paired" else yr, mech, est._params())
    blocks, label = _lc_blocks(Xv, yi, groups, layout)
    got = _lc_em(blocks, label, [K] * D, 3, 4, max_iter=25, tol=-np.inf)
    want = _reference_em(blocks, label, [K] * D, 3, 4, 25)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-10)
    for g, w in zip(got[2], want[2]):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-10)


def test_a_record_whose_product_underflows_goes_through_logarithms():
    """The E-step multiplies factors of at most 1; where a record's product underflows (here every
    component weighs e^-800) it takes logarithms instead, and its log-likelihood is still exact."""
    from fedrr.estimators.spread._priors._mixture import _contiguous_blocks, _lc_blocks, _lc_posterior

    X, y = _sample(6, 50)
    pm = PairedRecordMechanism([K] * D, C, 4.0, n_sampled=2)
    Xt, _ = pm.release(X, y, rng=np.random.default_rng(1))
    est = SpreadLogisticRegression(encoding="onehot")
    Xv, yi, groups, layout = est._prepare(Xt, None, pm, est._params())
    runs, label, _ = _contiguous_blocks(*_lc_blocks(Xv, yi, groups, layout))
    py, P = np.array([[0.3, 0.7], [0.6, 0.4]]), [P_TRUE[d] for d in range(D)]
    post, log_z, _ = _lc_posterior(np.log([0.5, 0.5]), py, P, runs, label, None)
    post_low, log_z_low, _ = _lc_posterior(np.log([0.5, 0.5]) - 800.0, py, P, runs, label, None)
    assert np.isfinite(log_z_low).all()
    np.testing.assert_allclose(log_z_low, log_z - 800.0, rtol=1e-12)
    np.testing.assert_allclose(post_low, post, atol=1e-12)


def test_the_held_out_score_equals_its_definition():
    """``_lc_record_loglik`` (the chooser's held-out score, on the EM's runs) is each record's
    log Σ_{m,c} π_m p(c | m) P(ỹ | c) Π_d Σ_s p(s | m) P(x̃_d | s, c), written out, to 1e-12."""
    from fedrr.estimators.spread._logexp import logsumexp
    from fedrr.estimators.spread._priors._mixture import _lc_blocks, _lc_em, _lc_record_loglik

    X, y = _sample(8, 400)
    rr = RandomizedResponse(K, epsilon=1.0)
    mech = RecordMechanism([rr] * D, RandomizedResponse(2, epsilon=1.0), n_sampled=2)
    Xr, yr = mech.release(X, y, rng=np.random.default_rng(3))
    est = SpreadLogisticRegression(encoding="onehot")
    Xv, yi, groups, layout = est._prepare(Xr, yr, mech, est._params())
    blocks, label = _lc_blocks(Xv, yi, groups, layout)
    log_pi, py, P = fit = _lc_em(blocks, label, [K] * D, 3, 1, max_iter=10, tol=-np.inf)
    logL = log_pi[None, :, None] + np.log(py)[None] + label[:, None, :]
    for d, rows, ET in blocks:
        logL[rows] += np.log(np.einsum("ms,isc->imc", P[d], ET))
    want = logsumexp(logL.reshape(len(label), -1), axis=1)
    np.testing.assert_allclose(_lc_record_loglik(fit, blocks, label), want, rtol=0, atol=1e-12)
