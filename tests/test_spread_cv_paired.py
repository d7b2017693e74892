"""SpreadLogisticRegressionCV on paired releases: the model's pair tables are the prior's exact
conditional expectations, the independence test is the score statistic of the linearised interaction and
its p-values are uniform under no signal (its level over many pools of the estimator:
simulations/spread_fallback_level.py, results/spread_fallback_level/level_paired.md), the estimator
keeps a model with signal and falls back without, and refuses label-based statistics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import chi2, norm

from fedrr.datasets import make_logistic_discrete, make_logistic_multiclass_discrete
from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread._cv_paired import (
    independence_terms,
    independence_test,
    model_pair_tables,
    paired_class_prior,
)
from fedrr.estimators.spread._paired import paired_view
from fedrr.mechanisms import PairedRecordMechanism

KC = (3, 3, 2)
COEF = np.array([2.0, -1.5, 1.0])


def _pool(n, seed, signal=True, eps=2.0, classes=2, n_sampled=1):
    rng = np.random.default_rng(seed)
    if classes == 2:
        ds = make_logistic_discrete(n, KC, COEF if signal else 0 * COEF, -0.3, rng=rng)
    else:
        coef = np.array([COEF, 0 * COEF, -COEF]) * (1.0 if signal else 0.0)
        ds = make_logistic_multiclass_discrete(n, KC, coef, rng=rng)
    mech = PairedRecordMechanism(KC, classes, eps, n_sampled=n_sampled)
    Xt, yt = mech.release(ds.X, ds.y, rng=rng)
    return Xt, yt, mech


@pytest.mark.parametrize("prior", ["learned", "naive-bayes"])
def test_model_pair_tables_are_the_priors_conditional_expectations(prior):
    """q_j(s, c) = p(x_j = s)·E[p_θ(c | x) | x_j = s], against enumeration of all 18 records under the
    fitted prior (factorised, or the naive-Bayes mixture): Monte Carlo error only (50,000 draws: the
    conditional mean's s.e. is below 0.004, so 0.02 is 5 s.e.)."""
    Xt, yt, mech = _pool(2000, 0)
    est = SpreadLogisticRegression(C=1.0, prior=prior, max_iter=20, random_state=0).fit(Xt, yt, mechanism=mech)
    tables = model_pair_tables(est, n_draws=50_000, seed=1)
    prior_state = est._prior_state
    allx = np.array(list(itertools.product(*[range(k) for k in KC])), float)
    if prior == "naive-bayes":
        lz = prior_state.log_pi[None, :] + sum(prior_state.log_p[d][:, allx[:, d].astype(int)].T for d in range(3))
        px = np.exp(logsumexp(lz, axis=1))
    else:
        px = np.prod([prior_state.disc[d, allx[:, d].astype(int)] for d in range(3)], axis=0)
    pc = np.exp(est.predict_log_proba(allx))
    for j, k in enumerate(KC):
        for s in range(k):
            w = px * (allx[:, j] == s)
            exact_cond = w @ pc / w.sum()
            got_cond = tables[j][s] / tables[j][s].sum()
            np.testing.assert_allclose(got_cond, exact_cond, atol=0.02)
        np.testing.assert_allclose(tables[j].sum(axis=1), prior_state.disc[j, :k] / prior_state.disc[j, :k].sum())


def _contrasts(k):
    Q, _ = np.linalg.qr(np.c_[np.ones(k), np.eye(k)[:, : k - 1]])
    return Q[:, 1:]


def _pool_oracle(n, seed, oracle, eps=1.0, classes=3, n_sampled=1):
    rng = np.random.default_rng(seed)
    ds = make_logistic_multiclass_discrete(n, KC, np.zeros((classes, 3)), rng=rng)
    mech = PairedRecordMechanism(KC, classes, eps, n_sampled=n_sampled, oracle=oracle)
    Xt, _ = mech.release(ds.X, ds.y, rng=rng)
    return Xt, mech


def test_independence_terms_are_the_linearised_interaction_and_the_statistic_is_the_score_form():
    """Per attribute the terms' mean is the interaction Ê − (2 − ΣÊ) m̂ π̂ᵀ of the debiased pair table in
    contrast coordinates, written out here; the statistic is n z̄ᵀ S⁻¹ z̄ on Σ (k_j − 1)(C − 1) degrees of
    freedom, with the chi-square p-value."""
    from scipy.stats import chi2

    Xt, _, mech = _pool(1200, 5, eps=1.0, classes=3, n_sampled=2)
    groups = [(mech, np.arange(len(Xt)))]
    Z, S = independence_terms(groups, Xt)
    assert Z.shape == (1200, sum((k - 1) * 2 for k in KC)) and S.shape == (Z.shape[1],) * 2
    col = 0
    for j, k in enumerate(KC):
        r = ~np.isnan(Xt[:, j])
        E = mech.unbiased_pair_table(j, Xt[r, j]).mean(axis=0)
        inter = E - (2 - E.sum()) * np.outer(E.sum(1), E.sum(0))
        want = (_contrasts(k).T @ inter @ _contrasts(3)).ravel()
        w = (k - 1) * 2
        np.testing.assert_allclose(Z[r, col : col + w].mean(axis=0), want, atol=1e-12)
        assert np.all(Z[~r, col : col + w] == 0)
        col += w
    res = independence_test(groups, Xt)
    n, d = Z.shape
    zbar = Z.mean(axis=0)
    T = n * zbar @ np.linalg.solve(S, zbar)
    assert res["df"] == d and res["statistic"] == pytest.approx(T, rel=1e-8)
    assert res["p_value"] == pytest.approx(chi2.sf(T, d), rel=1e-8)


@pytest.mark.parametrize("oracle", ["rr", "oue", "olh"])
def test_the_null_covariance_is_the_terms_covariance_without_signal(oracle):
    """Within an attribute S is the terms' covariance under no signal, from the oracle's support
    probabilities: against the empirical covariance of 60,000 no-signal records' terms (each entry
    within 5 s.e. of an empirical covariance, s.e. from the terms' fourth moments)."""
    Xt, mech = _pool_oracle(60_000, 9, oracle)
    Z, S = independence_terms([(mech, np.arange(len(Xt)))], Xt)
    emp = Z.T @ Z / len(Z)
    se = np.sqrt(np.maximum((Z[:, :, None] * Z[:, None, :]).var(axis=0) / len(Z), 1e-18))
    assert np.all(np.abs(emp - S) <= 5 * se + 1e-12), np.max(np.abs(emp - S) / (se + 1e-12))


@pytest.mark.parametrize("classes, n_sampled, conservative", [(2, 1, False), (3, 2, True)])
def test_independence_p_values_without_signal(classes, n_sampled, conservative):
    """Over 400 no-signal pools of 600 records at ε 1: the rate of p ≤ 0.05 is at most 0.05 + 3
    binomial s.e. (33 of 400). One pair per record, two classes: also at least 0.05 − 3 s.e. (7) and
    a mean p of 0.5 within 3 s.e. (0.289/√400). Two pairs at ε 0.5 each and three classes are
    conservative at this size, so only the upper bound is claimed (0.012 over 1,000 pools, 0.042 at
    3,000 records: ``simulations/paired_independence_level.py``)."""
    pools = (_pool(600, 100 + s, False, 1.0, classes, n_sampled) for s in range(400))
    ps = np.array([independence_test([(m, np.arange(len(X)))], X)["p_value"] for X, _, m in pools])
    kept = int(np.sum(ps <= 0.05))
    assert kept <= 33, kept
    if not conservative:
        assert kept >= 7 and abs(ps.mean() - 0.5) < 3 * 0.289 / 20, (kept, ps.mean())


def test_independence_test_sees_the_signal():
    Xt, _, mech = _pool(1500, 7, eps=1.0)
    res = independence_test([(mech, np.arange(len(Xt)))], Xt)
    assert res["p_value"] < 1e-3 and res["df"] == sum(k - 1 for k in KC)


@pytest.mark.parametrize("classes", [2, 3])
def test_paired_cv_keeps_a_model_with_signal_and_falls_back_without(classes):
    Xt, yt, mech = _pool(3000, 1, classes=classes)
    est = SpreadLogisticRegressionCV(Cs=(0.1, 1.0), cv_max_iter=10, max_iter=30, random_state=0)
    est.fit(Xt, yt, mechanism=mech)
    assert not est.fallback_ and est.p_value_ < 0.005 and est.fallback_reason_ is None
    assert est.gain_["statistic"] == "independence" and est.gain_["z"] > 2.5
    assert est.gain_["n_selection"] == est.gain_["n_test"] == len(Xt)  # nothing held out
    assert est.p_value_ == independence_test([(mech, np.arange(len(Xt)))], Xt)["p_value"]
    chosen = np.flatnonzero(~np.isnan(est.cv_results_["heldout_p_value"]))
    assert chosen.size == 1 and est.cv_results_["heldout_p_value"][chosen[0]] == est.p_value_
    assert np.all(np.isfinite(est.cv_results_["mean_test_score"]))

    Xt, yt, mech = _pool(3000, 2, signal=False, classes=classes)
    est.fit(Xt, yt, mechanism=mech)
    assert est.fallback_ and est.p_value_ > est.alpha and est.estimator_ is None
    assert "no association between the label and any attribute" in est.fallback_reason_
    # the intercept-only model: the class prior of the pairs' maximum-likelihood tables
    pi = paired_class_prior([(paired_view(mech, Xt), np.arange(len(Xt)))])
    np.testing.assert_allclose(est.predict_proba(np.zeros((1, 3)))[0], pi, atol=1e-9)
    assert np.all(est.coef_ == 0)
    # the test needs no model, so a fallback fits no candidate: the same decision and p-value as
    # with the fallback off (which selects and keeps a model), C_ None and NaN scores
    assert est.C_ is None and est.prior_strength_ is None and est.scores_ == {}
    assert len(est.cv_results_["params"]) == 2 and np.all(np.isnan(est.cv_results_["mean_test_score"]))
    kept = SpreadLogisticRegressionCV(Cs=(0.1, 1.0), cv_max_iter=10, max_iter=30, random_state=0, fallback=False)
    kept.fit(Xt, yt, mechanism=mech)
    assert kept.p_value_ == est.p_value_ and not kept.fallback_ and kept.C_ in (0.1, 1.0)


@pytest.mark.parametrize(
    "field, value", [("scoring", "accuracy"), ("test_statistic", "accuracy"), ("test_statistic", "auc")]
)
def test_paired_cv_refuses_statistics_of_a_released_label(field, value):
    Xt, yt, mech = _pool(200, 3)
    with pytest.raises(ValidationError) as exc:
        SpreadLogisticRegressionCV(**{field: value}).fit(Xt, yt, mechanism=mech)
    assert exc.value.field == field and "paired" in exc.value.message


def test_classification_scores_are_sklearns():
    """The sweeps' scores: accuracy, balanced accuracy and AUC as scikit-learn computes them (two
    classes: AUC of p̂(1 | x); three: one-vs-rest macro)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    from fedrr.learners import classification_scores

    rng = np.random.default_rng(0)
    for C in (2, 3):
        X, y = rng.normal(size=(300, 3)), rng.integers(C, size=300)
        X[:, 0] += y
        est = LogisticRegression().fit(X, y)
        got = classification_scores(est, X, y)
        P = est.predict_proba(X)
        assert got["accuracy"] == est.score(X, y)
        assert got["balanced_accuracy"] == balanced_accuracy_score(y, est.predict(X))
        assert got["auc"] == roc_auc_score(y, P[:, 1] if C == 2 else P, multi_class="ovr")


def test_paired_cv_holds_nothing_out():
    """On paired releases the test needs no model: the selection's folds run over all the releases, so
    ``test_fraction`` changes nothing (the same C, cross-validation scores and p-value)."""
    Xt, yt, mech = _pool(1500, 11)
    kw = dict(Cs=(0.1, 1.0), cv_max_iter=5, max_iter=10, n_chains=1, random_state=3)
    a = SpreadLogisticRegressionCV(test_fraction=0.3, **kw).fit(Xt, yt, mechanism=mech)
    b = SpreadLogisticRegressionCV(test_fraction=0.7, **kw).fit(Xt, yt, mechanism=mech)
    assert (a.C_, a.prior_strength_, a.p_value_) == (b.C_, b.prior_strength_, b.p_value_)
    np.testing.assert_array_equal(a.cv_results_["mean_test_score"], b.cv_results_["mean_test_score"])


def test_a_p_value_of_one_has_a_finite_z():
    """Far below its degrees of freedom the statistic's chi-square tail rounds to 1; z comes from the
    other tail then, finite and negative (it was −inf)."""
    rng = np.random.default_rng(0)
    ks = (30,) * 5
    X = rng.integers(0, 30, size=(400, 5))
    y = rng.integers(0, 2, size=400)
    mech = PairedRecordMechanism(ks, 2, 0.5)
    Xt, _ = mech.release(X, y, rng=rng)
    res = independence_test([(mech, np.arange(400))], Xt)
    assert res["p_value"] > 1 - 1e-12 and np.isfinite(res["z"]) and res["z"] < -3, res
    assert res["z"] == pytest.approx(norm.ppf(chi2.cdf(res["statistic"], res["df"])), rel=1e-12)
    assert chi2.sf(10.0, 145) == 1.0 and np.isfinite(norm.ppf(chi2.cdf(10.0, 145)))  # where isf(p) was −inf
