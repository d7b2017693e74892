"""SpreadLogisticRegressionCV (the ``spread`` learner): C chosen on the held-out conditional noisy
likelihood, a reported fallback when the releases hold no signal, and what it stores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import mannwhitneyu, norm
from sklearn.utils.estimator_checks import check_estimator

from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegressionCV
from fedrr.estimators.spread_cv_scores import _rank_test
from fedrr.mechanisms import RandomizedResponse, RecordMechanism

D, K = 3, 3
THETA0 = np.array([2.5, -2.0, 1.5])
RM = RecordMechanism(RandomizedResponse(K, 0.2), RandomizedResponse(2, 0.1), n_features=D)


def _data(n, seed, signal=True):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, K, size=(n, D))
    p1 = 1 / (1 + np.exp(-(X / (K - 1) @ THETA0 - 0.3))) if signal else np.full(n, 0.35)
    y = (rng.random(n) < p1).astype(int)
    Xt, yt = RM.release(X, y, rng=rng)
    return X, y, Xt, yt


def test_signal_is_found_and_c_is_the_best_held_out_conditional():
    X, y, Xt, yt = _data(1500, 0)
    est = SpreadLogisticRegressionCV(Cs=(0.01, 1.0), cv=3, cv_max_iter=15, max_iter=30, random_state=0)
    est.fit(Xt, yt, mechanism=RM)
    assert not est.fallback_ and est.estimator_ is not None
    # C by the held-out log p(c̃ | x̃), not by the joint
    assert est.C_ == max((0.01, 1.0), key=lambda C: est.cond_scores_[C, est.prior_strength_])
    assert set(est.scores_) == set(est.cond_scores_) == {(0.01, 0.1), (1.0, 0.1)}
    # the joint adds log p(x̃) ≤ 0 to the conditional
    assert all(est.scores_[k] < est.cond_scores_[k] for k in est.scores_)
    # two Cs tried: the one-sided 2.5 % threshold, Bonferroni-corrected
    assert est.gain_["z"] == pytest.approx(norm.ppf(1 - 0.025 / 2))
    # two classes: the rank test decides; the held-out scores rank the released labels
    assert est.gain_["z_auc"] > est.gain_["z"] and est.gain_["auc"] > 0.6
    assert est.score(X, y) > 0.7 and np.sign(est.coef_[0]).tolist() == np.sign(THETA0).tolist()
    d = est.diagnostics()
    assert d["fallback"] is False and d["C"] == est.C_ and d["heldout_gain"] == est.gain_


def test_no_signal_falls_back_to_the_debiased_majority_and_says_so():
    X, y, Xt, yt = _data(900, 1, signal=False)  # labels independent of the record, P(c = 1) = 0.35
    est = SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=15, random_state=0).fit(Xt, yt, mechanism=RM)
    assert est.fallback_ and est.estimator_ is None
    assert est.gain_["z"] == pytest.approx(1.959964, abs=1e-6)
    assert est.gain_["z_auc"] <= est.gain_["z"]
    assert not est.coef_.any()
    # the intercept is the label frequency debiased through RR(0.1): released π̃ = 0.1 + 0.8 π
    pi_hat = 1 / (1 + np.exp(-est.intercept_[0]))
    se = np.sqrt(0.35 * 0.65 / len(y)) / 0.8
    assert abs(pi_hat - 0.35) < 4 * se, pi_hat
    assert (est.predict(X) == 0).all()
    assert "fell back" in est.diagnostics()["convergence"]


def test_without_signal_the_fallback_is_the_rule():
    """The rank test's level: with labels independent of the records a model gets through at most
    2.5 % of the time (one C); P(more than 3 of 20 | 2.5 %) = 0.0016."""
    passed = 0
    for seed in range(20):
        _, _, Xt, yt = _data(300, 100 + seed, signal=False)
        est = SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=8, max_iter=8, random_state=seed)
        passed += not est.fit(Xt, yt, mechanism=RM).fallback_
    assert passed <= 3, passed


def test_multiclass_uses_the_likelihood_gain():
    rng = np.random.default_rng(3)
    X = rng.integers(0, K, size=(900, D))
    y = X[:, 0].copy()  # three classes, the label is the first attribute
    rm = RecordMechanism(RandomizedResponse(K, 0.2), RandomizedResponse(3, 0.1), n_features=D)
    Xt, yt = rm.release(X, y, rng=rng)
    est = SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=15, max_iter=30, random_state=0)
    est.fit(Xt, yt, mechanism=rm)
    assert "auc" not in est.gain_ and est.gain_["mean"] > est.gain_["z"] * est.gain_["se"]
    assert not est.fallback_ and est.score(X, y) > 0.8


def test_the_fallback_can_be_switched_off():
    _, _, Xt, yt = _data(900, 1, signal=False)
    est = SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=10, max_iter=10, fallback=False, random_state=0)
    est.fit(Xt, yt, mechanism=RM)
    assert not est.fallback_ and est.estimator_ is not None


@pytest.mark.parametrize(
    "param, value",
    [("Cs", (0.0,)), ("cv", 1), ("heldout_samples", 0), ("fallback", "yes"), ("prior_strengths", (-1.0,))],
)
def test_bad_parameters_name_the_parameter(param, value):
    _, _, Xt, yt = _data(60, 2)
    with pytest.raises(ValidationError) as e:
        SpreadLogisticRegressionCV(**{param: value}).fit(Xt, yt, mechanism=RM)
    assert e.value.field == param


def test_too_few_records_for_the_folds():
    _, _, Xt, yt = _data(5, 2)
    with pytest.raises(ValidationError) as e:
        SpreadLogisticRegressionCV(cv=3).fit(Xt, yt, mechanism=RM)
    assert e.value.field == "cv"


def test_sklearn_estimator_checks():
    """Without a mechanism it is plain logistic regression and passes scikit-learn's checks."""
    results = check_estimator(SpreadLogisticRegressionCV(max_iter=5), on_fail=None)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert not failed, failed


def test_the_rank_test_is_scipys_mann_whitney_within_a_fold_and_stratified_across_folds():
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 20, 200).astype(float), rng.integers(0, 2, 200)  # many ties
    auc, z = _rank_test(s, y, np.zeros(200, int))
    ref = mannwhitneyu(s[y == 1], s[y == 0], alternative="greater", method="asymptotic", use_continuity=False)
    assert auc == pytest.approx(ref.statistic / ((y == 1).sum() * (y == 0).sum())) and z == pytest.approx(
        norm.isf(ref.pvalue)
    )
    # no signal, but each fold's scores are shifted by its training folds' label rate, as a fitted
    # intercept is (a fold rich in 1s trains on fewer): pooled, the folds bias z downwards;
    # stratified, z stays centred (sd 1)
    pooled, strat = [], []
    for _ in range(400):
        y = rng.integers(0, 2, 300)
        fold = rng.permutation(300) % 3
        shift = np.array([y[fold != f].mean() for f in range(3)])
        s = 0.01 * rng.random(300) + shift[fold]
        pooled.append(_rank_test(s, y, np.zeros(300, int))[1])
        strat.append(_rank_test(s, y, fold)[1])
    assert np.mean(pooled) < -0.5 and abs(np.mean(strat)) < 3 / np.sqrt(400), (np.mean(pooled), np.mean(strat))
    assert _rank_test(np.ones(10), np.r_[np.ones(5), np.zeros(5)].astype(int), np.zeros(10, int)) == (0.5, 0.0)
