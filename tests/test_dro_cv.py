"""WassersteinDROLogisticRegressionCV: each score is its fold's held-out likelihood of the released
labels under the model composed with the label mechanism (recomputed by hand), ρ_max is where the
fit becomes intercept-only, every executor gives the same scores, it beats the paper's radius where
that radius leaves nothing to learn, scikit-learn's checks pass, and bad input raises precise errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from fedrr.errors import ValidationError
from fedrr.estimators import WassersteinDROLogisticRegression, WassersteinDROLogisticRegressionCV
from fedrr.learners import FitData, FitOptions, fit_and_score
from fedrr.mechanisms import GaussianMechanism, RandomizedResponse, RecordMechanism, TransitionMatrix
from fedrr.parallel import ThreadExecutor

W = np.array([6.0, -6.0, 4.0, -4.0, 2.0])


def _clean(rng, n):
    X = rng.uniform(0, 1, size=(n, W.size))
    return X, (rng.random(n) < 1 / (1 + np.exp(-(X - 0.5) @ W))).astype(int)


def _released(seed=0, n=600, sigma_eps=4.0, label=None):
    rng = np.random.default_rng(seed)
    X, y = _clean(rng, n)
    g = GaussianMechanism(sigma_eps, 1e-3, np.zeros(W.size), np.ones(W.size))
    label = label if label is not None else RandomizedResponse(2, 0.2)
    return g.release(X, rng), label.release(y, rng), g, label


def test_each_score_is_the_folds_heldout_likelihood_of_the_released_labels():
    # asymmetric label flips, so that a transposed matrix would change the numbers
    tm = TransitionMatrix.binary(p10=0.1, p01=0.3)
    Xt, yt, _, _ = _released(label=tm)
    m = WassersteinDROLogisticRegressionCV(rhos=[0.0, 0.01], cv=3, label_mechanism=tm, random_state=7).fit(Xt, yt)
    folds = list(StratifiedKFold(3, shuffle=True, random_state=7).split(Xt, yt))
    for i, rho in enumerate(m.rhos_):
        for k, (train, test) in enumerate(folds):
            est = WassersteinDROLogisticRegression(rho=rho).fit(Xt[train], yt[train])
            p1 = est.predict_proba(Xt[test])[:, 1]
            # p(ỹ = 1 | x̃) = p10 (1 − p1) + (1 − p01) p1
            q1 = 0.1 * (1 - p1) + 0.7 * p1
            want = np.mean(np.where(yt[test] == 1, np.log(q1), np.log(1 - q1)))
            assert m.scores_[i, k] == pytest.approx(want, abs=1e-9)
    assert m.se_scores_ == pytest.approx(m.scores_.std(axis=1, ddof=1) / math.sqrt(3))
    assert m.rho_ == m.rhos_[np.argmax(m.scores_.mean(axis=1))]
    np.testing.assert_array_equal(m.coef_, WassersteinDROLogisticRegression(rho=m.rho_).fit(Xt, yt).coef_)


def test_without_a_label_mechanism_the_score_is_the_plain_log_likelihood():
    Xt, yt, _, _ = _released()
    m = WassersteinDROLogisticRegressionCV(rhos=[0.0], cv=2, random_state=0).fit(Xt, yt)
    train, test = next(iter(StratifiedKFold(2, shuffle=True, random_state=0).split(Xt, yt)))
    p = WassersteinDROLogisticRegression(rho=0.0).fit(Xt[train], yt[train]).predict_proba(Xt[test])
    assert m.scores_[0, 0] == pytest.approx(np.mean(np.log(p[np.arange(len(test)), yt[test]])), abs=1e-9)


def test_rho_max_is_the_smallest_radius_whose_fit_is_intercept_only():
    Xt, yt, _, _ = _released(n=400, sigma_eps=20.0)
    yt = yt * (np.arange(400) % 3 == 0)  # a quarter or so positive: the best intercept is far from 0
    m = WassersteinDROLogisticRegressionCV(rhos=[0.0], cv=2).fit(Xt, yt)
    above = WassersteinDROLogisticRegression(rho=1.01 * m.rho_max_).fit(Xt, yt)
    below = WassersteinDROLogisticRegression(rho=0.9 * m.rho_max_).fit(Xt, yt)
    assert np.max(np.abs(above.coef_)) < 1e-6
    assert np.linalg.norm(below.coef_) > 1e-3
    assert above.intercept_[0] == pytest.approx(math.log(yt.mean() / (1 - yt.mean())), abs=1e-5)


def test_threads_give_the_same_scores_as_serial():
    Xt, yt, _, rr = _released(n=300)
    kw = {"rhos": 3, "cv": 3, "label_mechanism": rr}
    a = WassersteinDROLogisticRegressionCV(**kw).fit(Xt, yt)
    b = WassersteinDROLogisticRegressionCV(**kw, executor=ThreadExecutor(2)).fit(Xt, yt)
    np.testing.assert_array_equal(a.scores_, b.scores_)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_where_the_papers_radius_leaves_the_intercept_it_finds_a_model():
    # Gaussian noise σ = 1.84 on inputs in [0, 1] (ε 4, δ 1e-3 per record): the paper's radius is
    # 44 times ρ_max, its fit predicts one class; the grid includes it, and the CV chooses below ρ_max
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Xt, yt, g, rr = _released(seed=1, n=2000)
        m = WassersteinDROLogisticRegressionCV(rhos=4, label_mechanism=rr, mechanism=g).fit(Xt, yt)
    assert m.rho_auto_ in m.rhos_ and m.rho_auto_ > m.rho_max_
    assert not m.intercept_only_ and m.rho_ < m.rho_max_
    top = int(np.flatnonzero(m.rhos_ == m.rho_auto_)[0])
    gain = m.scores_[m.best_index_] - m.scores_[top]  # per fold: the same held-out records
    assert gain.mean() > 3 * gain.std(ddof=1) / math.sqrt(len(gain))
    rng = np.random.default_rng(99)
    Xte, yte = _clean(rng, 20_000)
    acc = m.score(g.release(Xte, rng), yte)
    majority = max(yte.mean(), 1 - yte.mean())
    assert acc - majority > 4 * math.sqrt(0.25 / len(yte))


def test_the_learner_uses_the_records_label_mechanism_and_reports_its_radius():
    Xt, yt, g, rr = _released(n=300)
    rm = RecordMechanism(g, rr)
    out = fit_and_score("wdro-cv", FitData(Xt, yt, mechanism=rm), (Xt, yt), FitOptions(executor=None))
    est = out.estimator
    assert est.label_mechanism is rr and out.entry["rho"] == est.rho_
    mixed = [rm, RecordMechanism(g, RandomizedResponse(2, 0.3))] * 150
    assert fit_and_score("wdro-cv", FitData(Xt, yt, mechanism=mixed), None).estimator.label_mechanism is None


@parametrize_with_checks([WassersteinDROLogisticRegressionCV(rhos=[0.0, 0.01], cv=2)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"rhos": 0}, "rhos"),
        ({"rhos": []}, "rhos"),
        ({"rhos": [0.1, -0.1]}, "rhos"),
        ({"rhos": [0.1, float("nan")]}, "rhos"),
        ({"cv": 1}, "cv"),
        ({"cv": 1000}, "cv"),
        ({"label_mechanism": RandomizedResponse(3, 0.2)}, "label_mechanism"),
        ({"executor": object()}, "executor"),
        ({"solver": ""}, "solver"),
    ],
)
def test_bad_parameters_name_the_field(kw, field):
    Xt, yt, _, _ = _released(n=100)
    with pytest.raises(ValidationError) as e:
        WassersteinDROLogisticRegressionCV(**kw).fit(Xt, yt)
    assert e.value.field == field


def test_labels_must_be_the_mechanisms_states_and_binary():
    Xt, yt, _, rr = _released(n=100)
    with pytest.raises(ValidationError, match="states 0 and 1") as e:
        WassersteinDROLogisticRegressionCV(label_mechanism=rr, cv=2).fit(Xt, yt + 1)
    assert e.value.field == "y"
    with pytest.raises(ValidationError, match="Only binary classification") as e:
        WassersteinDROLogisticRegressionCV(cv=2).fit(Xt, np.arange(100) % 3)
    assert e.value.field == "y"
