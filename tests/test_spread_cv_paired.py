"""SpreadLogisticRegressionCV on paired releases: the model's pair tables are the prior's exact
conditional expectations, the association test is centred and scaled under no signal (its level over
many pools: simulations/spread_fallback_level.py, results/spread_fallback_level/level_paired.md), the
estimator keeps a model with signal and falls back without, and refuses label-based statistics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from fedrr.datasets import make_logistic_discrete, make_logistic_multiclass_discrete
from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread_cv_paired import (
    association_test,
    attribute_statistics,
    attribute_weights,
    model_pair_tables,
    paired_class_prior,
)
from fedrr.estimators.spread_paired import paired_view
from fedrr.mechanisms import PairedRecordMechanism

KC = (3, 3, 2)
COEF = np.array([2.0, -1.5, 1.0])


def _pool(n, seed, signal=True, eps=2.0, classes=2):
    rng = np.random.default_rng(seed)
    if classes == 2:
        ds = make_logistic_discrete(n, KC, COEF if signal else 0 * COEF, -0.3, rng=rng)
    else:
        coef = np.array([COEF, 0 * COEF, -COEF]) * (1.0 if signal else 0.0)
        ds = make_logistic_multiclass_discrete(n, KC, coef, rng=rng)
    mech = PairedRecordMechanism(KC, classes, eps)
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


def test_association_statistic_is_the_formula_and_standard_normal_without_signal():
    """With fixed tables (independent of the pools), over 400 no-signal pools of 1,500 records: T is
    Σ_j n_j Σ a_j (Ê_j − m̂_j π̂_j) computed directly, and z has mean 0 ± 0.15 and sd 1 ± 0.1 (3 s.e.
    of a mean and an sd of 400 standard normals)."""
    rng = np.random.default_rng(3)
    tables = [rng.dirichlet(np.ones(k * 2)).reshape(k, 2) for k in KC]
    zs = []
    for seed in range(400):
        Xt, _, mech = _pool(1500, 100 + seed, signal=False, eps=1.0)
        res = association_test(tables, [(mech, np.arange(len(Xt)))], Xt)
        zs.append(res["z"])
        if seed == 0:  # the formula, written out
            from fedrr.mechanisms.oracles import rare_value_variance

            T = 0.0
            for j in range(3):
                r = ~np.isnan(Xt[:, j])
                E = mech.unbiased_pair_table(j, Xt[r, j]).mean(axis=0)
                q = tables[j] / tables[j].sum()
                a = (q - np.outer(q.sum(1), q.sum(0))) / (rare_value_variance(mech.oracles[j]) + q)
                T += r.sum() * np.sum(a * (E - np.outer(E.sum(1), E.sum(0))))
            assert res["statistic"] == pytest.approx(T, rel=1e-9, abs=1e-9)
    zs = np.array(zs)
    assert abs(zs.mean()) < 0.15 and 0.9 < zs.std() < 1.1, (zs.mean(), zs.std())


def test_attribute_weights_are_held_out_z_over_sd_and_scale_the_statistic():
    """``attribute_weights`` is max(z_j, 0)/s_j of the folds' per-attribute statistics (0 for an attribute whose
    association did not hold out, or that nothing released); ``association_test`` with weights sums
    w_j·T_j, its z does not change when every weight is scaled, and weights all 0 give p = 1."""
    stats = np.array([[6.0, 4.0, 100.0], [-3.0, 9.0, 100.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(attribute_weights(stats), [3.0 / np.sqrt(0.04), 0.0, 0.0])
    rng = np.random.default_rng(4)
    tables = [rng.dirichlet(np.ones(k * 2)).reshape(k, 2) for k in KC]
    Xt, _, mech = _pool(900, 7, eps=1.0)
    groups = [(mech, np.arange(len(Xt)))]
    parts = attribute_statistics(tables, groups, Xt)
    assert parts[:, 2].sum() == len(Xt)  # one pair per record
    w = np.array([0.5, 2.0, 0.0])
    res = association_test(tables, groups, Xt, weights=w)
    assert res["statistic"] == pytest.approx(w @ parts[:, 0], rel=1e-9)
    assert association_test(tables, groups, Xt, weights=7 * w)["z"] == pytest.approx(res["z"], rel=1e-9)
    assert association_test(tables, groups, Xt)["statistic"] == pytest.approx(parts[:, 0].sum(), rel=1e-9)
    none = association_test(tables, groups, Xt, weights=np.zeros(3))
    assert none["p_value"] == 1.0 and none["z"] == 0.0


@pytest.mark.parametrize("classes", [2, 3])
def test_paired_cv_keeps_a_model_with_signal_and_falls_back_without(classes):
    Xt, yt, mech = _pool(3000, 1, classes=classes)
    est = SpreadLogisticRegressionCV(Cs=(0.1, 1.0), cv_max_iter=10, max_iter=30, random_state=0)
    est.fit(Xt, yt, mechanism=mech)
    # z 3.05 / 3.27 with the folds' weights (3.31 / 3.40 with every attribute at weight 1: weighing by
    # noisy held-out z costs a little here, where all three attributes carry signal)
    assert not est.fallback_ and est.p_value_ < 0.005 and est.fallback_reason_ is None
    assert est.gain_["statistic"] == "association" and est.gain_["z"] > 2.5
    assert sum(w > 0 for w in est.gain_["attribute_weights"]) >= 2  # the folds saw the signal attributes
    chosen = np.flatnonzero(~np.isnan(est.cv_results_["heldout_p_value"]))
    assert chosen.size == 1 and est.cv_results_["heldout_p_value"][chosen[0]] == est.p_value_
    assert np.all(np.isfinite(est.cv_results_["mean_test_score"]))

    Xt, yt, mech = _pool(3000, 2, signal=False, classes=classes)
    est.fit(Xt, yt, mechanism=mech)
    assert est.fallback_ and est.p_value_ > est.alpha and est.estimator_ is None
    assert "normal-approximation p" in est.fallback_reason_
    # the intercept-only model: the class prior of the pairs' maximum-likelihood tables
    pi = paired_class_prior([(paired_view(mech, Xt), np.arange(len(Xt)))])
    np.testing.assert_allclose(est.predict_proba(np.zeros((1, 3)))[0], pi, atol=1e-9)
    assert np.all(est.coef_ == 0)


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


def test_the_attribute_weights_do_not_see_the_test_part():
    """The weights come from the selection part A only: replacing every release of the test part B
    (the estimator's own split, seeded by random_state) leaves C, the weights and the per-attribute
    held-out z as they were, while the test's statistic changes."""
    Xt, yt, mech = _pool(1500, 11)
    kw = dict(Cs=(0.1, 1.0), cv_max_iter=5, max_iter=10, n_chains=1, random_state=3)
    a = SpreadLogisticRegressionCV(**kw).fit(Xt, yt, mechanism=mech)
    n = Xt.shape[0]
    order = np.random.default_rng(np.random.SeedSequence(3, spawn_key=(7919,))).permutation(n)
    test = order[: int(round(a.test_fraction * n))]  # the estimator's part B
    other, _, _ = _pool(1500, 12)  # other records, other noise
    Xb = Xt.copy()
    Xb[test] = other[test]
    b = SpreadLogisticRegressionCV(**kw).fit(Xb, yt, mechanism=mech)
    assert (a.C_, a.prior_strength_) == (b.C_, b.prior_strength_)
    assert a.gain_["attribute_weights"] == b.gain_["attribute_weights"]
    assert a.gain_["attribute_z"] == b.gain_["attribute_z"]
    assert a.gain_["z"] != b.gain_["z"]
