"""SpreadLogisticRegressionCV (the ``spread`` learner): C chosen on the held-out conditional noisy
likelihood, a reported fallback when the releases hold no signal, and what it stores."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator

from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegressionCV
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
    est = SpreadLogisticRegressionCV(encoding="unit", Cs=(0.01, 1.0), cv=3, cv_max_iter=15, max_iter=30, random_state=0)
    est.fit(Xt, yt, mechanism=RM)
    assert not est.fallback_ and est.estimator_ is not None and est.fallback_reason_ is None
    # C by the held-out log p(c̃ | x̃) on the selection part's folds, not by the joint
    assert est.C_ == max((0.01, 1.0), key=lambda C: est.cond_scores_[C, est.prior_strength_])
    assert set(est.scores_) == set(est.cond_scores_) == {(0.01, 0.1), (1.0, 0.1)}
    # the joint adds log p(x̃) ≤ 0 to the conditional
    assert all(est.scores_[k] < est.cond_scores_[k] for k in est.scores_)
    # the test part: half of the records; the permutation p-value is at its floor 1/(n_perm + 1)
    assert est.gain_["n_test"] == est.gain_["n_selection"] == 750
    assert est.p_value_ == est.gain_["p_value"] == pytest.approx(1 / 2000) and est.p_value_ <= est.alpha
    assert est.gain_["value"] > est.gain_["null_mean"] + 3 * est.gain_["null_sd"] and est.gain_["auc"] > 0.6
    assert est.gain_["mean"] > 0  # the held-out log p(c̃ | x̃) beats the intercept-only model's
    assert est.score(X, y) > 0.7 and np.sign(est.coef_[0]).tolist() == np.sign(THETA0).tolist()
    d = est.diagnostics()
    assert (
        d["fallback"] is False and d["C"] == est.C_ and d["heldout_gain"] == est.gain_ and d["p_value"] == est.p_value_
    )


def test_cv_results_are_scikit_learn_shaped():
    _, _, Xt, yt = _data(600, 0)
    Cs, strengths = (0.01, 1.0, 10.0), (0.1, 1.0)
    est = SpreadLogisticRegressionCV(
        Cs=Cs, prior_strengths=strengths, cv=2, cv_max_iter=5, max_iter=5, n_permutations=99, random_state=0
    ).fit(Xt, yt, mechanism=RM)
    r = est.cv_results_
    n = len(Cs) * len(strengths)
    keys = {"params", "param_C", "param_prior_strength", "split0_test_score", "split1_test_score"}
    keys |= {"mean_test_score", "std_test_score", "rank_test_score", "mean_test_loglik", "mean_test_marginal"}
    assert set(r) == keys | {"heldout_statistic", "heldout_p_value"}
    assert all(len(r[k]) == n for k in r)
    assert r["params"][0] == {"C": 0.01, "prior_strength": 0.1}
    assert sorted(zip(r["param_C"], r["param_prior_strength"])) == sorted((C, a) for C in Cs for a in strengths)
    # the mean is the fold mean weighted by held-out records (folds differ by at most one record)
    np.testing.assert_allclose(r["mean_test_score"], (r["split0_test_score"] + r["split1_test_score"]) / 2, atol=1e-2)
    np.testing.assert_allclose(
        r["mean_test_score"], [est.cond_scores_[C, a] for C, a in zip(r["param_C"], r["param_prior_strength"])]
    )
    assert r["rank_test_score"][np.argmax(r["mean_test_score"])] == 1 and r["rank_test_score"].min() == 1
    # only the chosen candidate is tested, with the decision's p-value
    chosen = r["params"].index({"C": est.C_, "prior_strength": est.prior_strength_})
    assert r["heldout_p_value"][chosen] == est.p_value_ and np.isnan(np.delete(r["heldout_p_value"], chosen)).all()
    assert 1 / 100 <= est.p_value_ <= 1


def test_no_signal_falls_back_to_the_debiased_majority_and_says_so():
    X, y, Xt, yt = _data(900, 1, signal=False)  # labels independent of the record, P(c = 1) = 0.35
    est = SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=15, random_state=0).fit(Xt, yt, mechanism=RM)
    assert est.fallback_ and est.estimator_ is None and est.p_value_ > est.alpha
    assert "permutation p" in est.fallback_reason_ and "intercept-only" in est.fallback_reason_
    assert not est.coef_.any()
    # the intercept is the label frequency debiased through RR(0.1): released π̃ = 0.1 + 0.8 π
    pi_hat = 1 / (1 + np.exp(-est.intercept_[0]))
    se = np.sqrt(0.35 * 0.65 / len(y)) / 0.8
    assert abs(pi_hat - 0.35) < 4 * se, pi_hat
    assert (est.predict(X) == 0).all()
    assert est.fallback_reason_ in est.diagnostics()["convergence"]


def test_without_signal_the_p_value_is_not_small():
    """The decision's level on 20 small no-signal pools, each a fit: kept when p ≤ 0.05, so at most 3
    of 20 (P(more than 3 | 5 %) = 0.016), and the p-values are centred (mean 0.5 ± 3 SE, SE
    sqrt(1/12/20) = 0.065). The exactness itself is checked cheaply on the permutation test below."""
    ps = []
    for seed in range(20):
        _, _, Xt, yt = _data(300, 100 + seed, signal=False)
        est = SpreadLogisticRegressionCV(
            Cs=(1.0,), cv=3, cv_max_iter=8, max_iter=8, n_permutations=199, random_state=seed
        )
        ps.append(est.fit(Xt, yt, mechanism=RM).p_value_)
    ps = np.array(ps)
    assert (ps <= 0.05).sum() <= 3 and abs(ps.mean() - 0.5) < 3 * np.sqrt(1 / 12 / 20), ps


def test_the_permutation_test_is_exact_within_blocks_and_not_across_them():
    """Labels independent of a fixed score, but the label rate differs between two blocks (label
    mechanisms) and so does the score: permuting within blocks keeps the level (P(p ≤ 0.1) = 0.1 ±
    4 SE over 1,000 replications, with p on a grid of 1/100), permuting across them does not."""
    from fedrr.estimators.spread._cv_scores import permutation_test

    rng = np.random.default_rng(0)
    n, reps = 120, 1000
    block = np.r_[np.zeros(n // 2, int), np.ones(n // 2, int)]
    within, across = [], []
    for _ in range(reps):
        codes = (rng.random(n) < np.where(block == 1, 0.8, 0.2)).astype(int)  # label 1 common in block 1
        score = rng.normal(size=n) + 2.0 * block  # block 1 scores high: no signal within a block
        M = np.c_[np.zeros(n), score]  # T = Σ score over records released with label 1
        within.append(permutation_test(M, codes, [np.flatnonzero(block == 0), np.flatnonzero(block == 1)], 99, rng)[1])
        across.append(permutation_test(M, codes, [np.arange(n)], 99, rng)[1])
    within, across = np.array(within), np.array(across)
    se = np.sqrt(0.1 * 0.9 / reps)
    assert abs((within <= 0.1).mean() - 0.1) < 4 * se, (within <= 0.1).mean()
    assert (across <= 0.1).mean() > 0.9  # the mutation a block-blind permutation would be
    # p is (1 + #{T_perm ≥ T_obs})/(n_perm + 1): a constant statistic has p = 1
    assert permutation_test(np.ones((10, 2)), rng.integers(0, 2, 10), [np.arange(10)], 49, rng)[1] == 1.0
    # a released label the model calls impossible (log 0) or a NaN is no evidence for it
    bad = np.c_[np.zeros(10), np.r_[-np.inf, np.zeros(9)]]
    assert permutation_test(bad, np.r_[1, np.zeros(9, int)], [np.arange(10)], 49, rng)[1] == 1.0
    assert permutation_test(np.full((10, 2), np.nan), np.zeros(10, int), [np.arange(10)], 49, rng)[1] == 1.0


@pytest.mark.parametrize("statistic", ["loglik", "accuracy"])
def test_multiclass_is_kept_on_signal(statistic):
    rng = np.random.default_rng(3)
    X = rng.integers(0, K, size=(900, D))
    y = X[:, 0].copy()  # three classes, the label is the first attribute
    rm = RecordMechanism(RandomizedResponse(K, 0.2), RandomizedResponse(3, 0.1), n_features=D)
    Xt, yt = rm.release(X, y, rng=rng)
    est = SpreadLogisticRegressionCV(
        Cs=(1.0,), cv=3, cv_max_iter=15, max_iter=30, test_statistic=statistic, random_state=0
    )
    est.fit(Xt, yt, mechanism=rm)
    assert "auc" not in est.gain_ and est.p_value_ <= est.alpha and est.gain_["mean"] > 0
    assert not est.fallback_ and est.score(X, y) > 0.8
    with pytest.raises(ValidationError) as e:  # the rank statistic is for two classes
        SpreadLogisticRegressionCV(Cs=(1.0,), test_statistic="auc").fit(Xt, yt, mechanism=rm)
    assert e.value.field == "test_statistic"


def test_the_fallback_can_be_switched_off():
    _, _, Xt, yt = _data(900, 1, signal=False)
    est = SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=10, max_iter=10, fallback=False, random_state=0)
    est.fit(Xt, yt, mechanism=RM)
    assert not est.fallback_ and est.estimator_ is not None


@pytest.mark.parametrize(
    "param, value",
    [
        ("Cs", (0.0,)),
        ("cv", 1),
        ("heldout_samples", 0),
        ("fallback", "yes"),
        ("prior_strengths", (-1.0,)),
        ("test_fraction", 1.0),
        ("test_fraction", 0.0),
        ("test_statistic", "z"),
        ("alpha", 0.0),
        ("n_permutations", 0),
        ("selection_size", 1),
        ("selection_size", 2.5),
    ],
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
    _, _, Xt, yt = _data(8, 2)  # 2 to test leave 6 to select: enough for 3 folds, not for 4
    with pytest.raises(ValidationError) as e:
        SpreadLogisticRegressionCV(cv=4, test_fraction=0.25).fit(Xt, yt, mechanism=RM)
    assert e.value.field == "test_fraction"


def test_selection_size_cuts_the_folds_and_nothing_else():
    """At most ``selection_size`` records are cut into the selection's folds; the test and the refit
    read every record; a size A fits in changes nothing (no extra draw: the same fit, bit for bit)."""
    _, _, Xt, yt = _data(1200, 3)
    kw = {"Cs": (0.01, 1.0), "cv": 3, "cv_max_iter": 5, "max_iter": 10, "n_permutations": 99, "random_state": 0}
    whole = SpreadLogisticRegressionCV(selection_size=None, **kw).fit(Xt, yt, mechanism=RM)
    fits = SpreadLogisticRegressionCV(selection_size=600, **kw).fit(Xt, yt, mechanism=RM)
    assert whole.n_selection_fit_ == fits.n_selection_fit_ == 600 == whole.gain_["n_selection"]
    np.testing.assert_array_equal(whole.coef_, fits.coef_)
    assert whole.cond_scores_ == fits.cond_scores_
    cut = SpreadLogisticRegressionCV(selection_size=90, **kw).fit(Xt, yt, mechanism=RM)
    assert cut.n_selection_fit_ == 90 and cut.gain_["n_selection"] == 600 and cut.gain_["n_test"] == 600
    # the chosen C is refitted as chosen, cut or not (scikit-learn's convention: a fixed prior)
    assert cut.C_ == cut.best_params_["C"] and whole.C_ == whole.best_params_["C"]
    assert cut.estimator_.C == cut.C_
    assert cut.cond_scores_ != whole.cond_scores_  # the folds' fits saw other records
    assert cut.estimator_ is not None and cut.estimator_.coef_.shape == whole.coef_.shape
    with pytest.raises(ValidationError) as e:
        SpreadLogisticRegressionCV(selection_size=5, **kw).fit(Xt, yt, mechanism=RM)
    assert e.value.field == "selection_size" and "3 folds need at least 6" in e.value.message


def test_sklearn_estimator_checks():
    """Without a mechanism it is plain logistic regression and passes scikit-learn's checks."""
    results = check_estimator(SpreadLogisticRegressionCV(max_iter=5), on_fail=None)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert not failed, failed


def test_debiased_hits_estimate_the_clean_accuracy_through_an_asymmetric_label_mechanism():
    """E over released labels of h = (P⁻¹)[ĉ, c̃] is 1[c = ĉ] for every (c, ĉ): checked by Monte Carlo
    with an asymmetric 3-state matrix; a transposed inverse is off by far more than the 5-SE bound."""
    from fedrr.estimators.spread._cv_scores import debiased_hits
    from fedrr.mechanisms import TransitionMatrix

    P = np.array([[0.7, 0.1, 0.2], [0.2, 0.6, 0.1], [0.1, 0.3, 0.7]])  # P[c̃, c], columns sum to 1
    rm = RecordMechanism(RandomizedResponse(K, 0.2), TransitionMatrix(P), n_features=D)
    rng = np.random.default_rng(5)
    n = 60_000
    c = rng.integers(0, 3, n)
    decision = rng.integers(0, 3, n)
    c_tilde = rm.label.release(c, rng)
    h = debiased_hits(decision, c_tilde, [rm] * n, 3)
    for a in range(3):
        for b in range(3):
            sel = (c == a) & (decision == b)
            se = h[sel].std() / np.sqrt(sel.sum())
            assert abs(h[sel].mean() - (a == b)) < 5 * se, (a, b, h[sel].mean(), se)
    wrong = np.linalg.inv(P).T[decision, c_tilde]
    assert abs(wrong[(c == 0) & (decision == 1)].mean()) > 0.1  # the mutation the test must catch
    # no label mechanism (public labels): the plain hit
    assert debiased_hits(
        np.array([0, 1]), np.array([0, 0]), [RecordMechanism(RandomizedResponse(K, 0.2), None, n_features=D)] * 2, 2
    ).tolist() == [1.0, 0.0]


def test_accuracy_scoring_chooses_c_by_the_estimated_clean_accuracy():
    X, y, Xt, yt = _data(1500, 0)
    est = SpreadLogisticRegressionCV(
        Cs=(0.001, 1.0), cv=3, cv_max_iter=15, max_iter=30, scoring="accuracy", random_state=0
    ).fit(Xt, yt, mechanism=RM)
    acc = est.accuracy_scores_
    assert set(acc) == {(0.001, 0.1), (1.0, 0.1)}
    assert est.C_ == max((0.001, 1.0), key=lambda C: acc[C, 0.1])
    # a clean-label accuracy of decisions taken from the released records x̃ (0.68 here; the refit
    # decides from clean records, 0.75): above chance, at most 1
    assert 0.55 < acc[est.C_, 0.1] <= 1.0 and not est.fallback_
    # the loglik default leaves it empty; a bad value names the field
    assert (
        SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=5, max_iter=5, random_state=0)
        .fit(Xt[:300], yt[:300], mechanism=RM)
        .accuracy_scores_
        == {}
    )
    with pytest.raises(ValidationError, match="scoring") as e:
        SpreadLogisticRegressionCV(scoring="auc").fit(Xt[:100], yt[:100], mechanism=RM)
    assert e.value.field == "scoring"


def test_budget_mixes_are_permuted_within_their_label_mechanisms():
    """Records with two label mechanisms: the test's blocks are the two mechanisms' records (so a
    model that tells the blocks apart from x̃ gains nothing under "no signal"), and a clear signal
    is still kept."""
    from fedrr.estimators.spread._cv_scores import label_blocks

    X, y, Xt, yt = _data(1200, 4)
    rm2 = RecordMechanism(RandomizedResponse(K, 0.3), RandomizedResponse(2, 0.25), n_features=D)
    mechs = [RM if i % 3 else rm2 for i in range(len(y))]
    Xt2, yt2 = rm2.release(X, y, rng=np.random.default_rng(5))
    use2 = np.arange(len(y)) % 3 == 0
    Xt, yt = np.where(use2[:, None], Xt2, Xt), np.where(use2, yt2, yt)
    blocks = label_blocks(mechs)
    assert sorted(b.size for b in blocks) == [400, 800] and set(blocks[0]).isdisjoint(blocks[1])
    est = SpreadLogisticRegressionCV(Cs=(1.0,), cv=3, cv_max_iter=10, max_iter=20, random_state=0)
    est.fit(Xt, yt, mechanism=mechs)
    assert not est.fallback_ and est.p_value_ <= est.alpha and est.score(X, y) > 0.7


def test_candidates_of_a_fold_share_one_prior_center_and_give_the_same_fit(monkeypatch):
    """The learned prior's center depends on the releases only: one ``marginal_mle_prior`` per fold,
    the test part and the refit (not one per candidate), and the fit is the one computed without sharing."""
    import fedrr.estimators.spread._estimator as spread
    import fedrr.estimators.spread._prior_setup as setup

    X, y, Xt, yt = _data(600, 3)
    kw = dict(Cs=(0.01, 0.1, 1.0), cv=3, cv_max_iter=8, max_iter=16, prior="learned", random_state=0)
    calls = []
    real = setup.marginal_mle_prior
    monkeypatch.setattr(setup, "marginal_mle_prior", lambda *a, **k: calls.append(1) or real(*a, **k))
    shared = SpreadLogisticRegressionCV(**kw).fit(Xt, yt, mechanism=RM)
    assert len(calls) == 3 + 2  # the folds, the selection part's tested fit, the refit on all

    real_fit = spread.SpreadLogisticRegression._fit

    def alone(self, X, y, mechanism, memo):  # every fit computes its own center
        return real_fit(self, X, y, mechanism, None)

    monkeypatch.setattr(spread.SpreadLogisticRegression, "_fit", alone)
    calls.clear()
    own = SpreadLogisticRegressionCV(**kw).fit(Xt, yt, mechanism=RM)
    assert len(calls) == 3 * 3 + 2
    assert own.C_ == shared.C_ and own.scores_ == shared.scores_ and own.p_value_ == shared.p_value_
    np.testing.assert_array_equal(own.coef_, shared.coef_)
    np.testing.assert_array_equal(own.intercept_, shared.intercept_)


def test_class_freqs_says_when_it_stops_at_its_iteration_cap():
    """The debiased class frequencies' EM stops at ``iters`` with a ConvergenceWarning when it is still
    moving, not silently (issue 30); where it converges it says nothing."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from fedrr.estimators.spread._cv_scores import class_freqs

    rm = RecordMechanism([RandomizedResponse(2, epsilon=1.0)], RandomizedResponse(2, epsilon=0.01))
    y = np.random.default_rng(0).integers(0, 2, 1000)
    with pytest.warns(ConvergenceWarning, match="stopped at 5 iterations"):
        class_freqs(y, [(rm, np.arange(1000))], 2, iters=5)
    easy = RecordMechanism([RandomizedResponse(2, epsilon=1.0)], RandomizedResponse(2, epsilon=3.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        pi = class_freqs(y, [(easy, np.arange(1000))], 2)
    assert abs(pi.sum() - 1) < 1e-12


def test_the_cv_declares_the_estimators_parameters_with_its_defaults_and_passes_them_on():
    """scikit-learn reads parameters from ``__init__``'s signature, so the CV repeats
    SpreadLogisticRegression's: each with the estimator's default, every one passed to the fits
    (``SHARED``) or used by the CV itself (``OWN``), and only C and the prior strength (which the
    CV chooses) missing; a non-default value set on the CV reaches every fit."""
    import inspect

    from fedrr.estimators import SpreadLogisticRegression
    from fedrr.estimators.spread._cv import OWN, SHARED

    cv = inspect.signature(SpreadLogisticRegressionCV).parameters
    est = inspect.signature(SpreadLogisticRegression).parameters
    both = set(cv) & set(est)
    assert {k for k in both if cv[k].default != est[k].default} == set()
    assert set(est) - set(cv) == {"C", "prior_strength"}
    assert set(SHARED) | set(OWN) == both and not set(SHARED) & set(OWN)
    changed = {"n_bins": 7, "tol": 0.5, "relaxation": 1.2, "n_latent_classes": 3, "encoding": "onehot"}
    fit = SpreadLogisticRegressionCV(**changed, random_state=4)._spread(C=2.0)
    assert {k: getattr(fit, k) for k in changed} == changed and fit.C == 2.0 and fit.random_state == 4


def _paired_releases(n: int, seed: int, eps: float = 1.0):
    from fedrr.mechanisms import PairedRecordMechanism

    ks = (3, 2, 4, 3)
    rng = np.random.default_rng(seed)
    X = np.stack([rng.integers(0, k, n) for k in ks], axis=1)
    y = (rng.random(n) < 1 / (1 + np.exp(-(1.5 * (X[:, 0] == 2) - X[:, 1] + 0.4 * X[:, 2] - 0.8)))).astype(int)
    mech = PairedRecordMechanism(ks, 2, eps)
    return (*mech.release(X, y, rng=rng), mech)


def test_selection_2se_takes_the_weakest_penalty_within_two_standard_errors():
    """selection "best" takes the highest mean fold score; "2se" the largest C whose mean is within two
    standard errors (of the per-fold differences) of the best's; "auto" is "2se" on paired releases
    under the releases' own prior, "best" under public rows and on split ones; a bad value names ``selection``."""
    from fedrr.estimators.spread._cv_select import within_2se

    w = np.full(3, 1 / 3)
    assert within_2se(np.array([1.0, 1.0, 1.0]), np.array([0.9, 1.05, 0.95]), w)  # 0.033 against 2 × 0.044
    assert not within_2se(np.array([1.0, 1.1, 1.2]), np.array([0.9, 1.0, 1.1]), w)  # 0.1 in every fold
    Xt, yt, mech = _paired_releases(3000, 3)
    Cs = (0.01, 0.1, 1.0, 10.0)
    fits = {
        s: SpreadLogisticRegressionCV(Cs=Cs, selection=s, fallback=False, random_state=0).fit(Xt, yt, mechanism=mech)
        for s in ("best", "2se", "auto")
    }
    r = fits["best"].cv_results_
    folds = np.array([r[f"split{f}_test_score"] for f in range(3)]).T  # (C, fold)
    mean = r["mean_test_score"]
    b = int(np.argmax(mean))
    assert fits["best"].C_ == Cs[b] and fits["best"].selection_ == "best"
    within = [C for i, C in enumerate(Cs) if mean[b] - mean[i] <= 2 * (folds[b] - folds[i]).std(ddof=1) / np.sqrt(3)]
    assert fits["2se"].C_ == max(within) and fits["2se"].selection_ == "2se"
    assert fits["2se"].C_ > fits["best"].C_  # on these releases the rules differ: the test can tell them apart
    assert fits["auto"].C_ == fits["2se"].C_ and fits["auto"].selection_ == "2se"
    assert fits["2se"].estimator_.C == fits["2se"].C_
    # a prior of public rows: "auto" is "best" on the same releases (the rules differ here, above)
    from fedrr.mechanisms import EmpiricalPrior

    rng = np.random.default_rng(7)
    rows = np.stack([rng.integers(0, k, 400) for k in (3, 2, 4, 3)], axis=1)
    public = {
        s: SpreadLogisticRegressionCV(Cs=Cs, selection=s, prior=EmpiricalPrior(rows), fallback=False, random_state=0)
        for s in ("best", "auto")
    }
    public = {s: est.fit(Xt, yt, mechanism=mech) for s, est in public.items()}
    assert public["auto"].selection_ == "best" and public["auto"].C_ == public["best"].C_
    _, _, Xs, ys = _data(600, 0)
    split = SpreadLogisticRegressionCV(
        Cs=(0.01, 1.0), cv=2, cv_max_iter=5, max_iter=5, n_permutations=99, random_state=0
    )
    assert split.fit(Xs, ys, mechanism=RM).selection_ == "best"
    with pytest.raises(ValidationError) as e:
        SpreadLogisticRegressionCV(selection="1se").fit(Xt, yt, mechanism=mech)
    assert e.value.field == "selection"
