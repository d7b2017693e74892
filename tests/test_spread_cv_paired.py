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
    """Per attribute the terms' mean is the interaction Ê − (Ê1) π̃ᵀ − m̃ (1ᵀÊ) + (ΣÊ) m̃ π̃ᵀ of the debiased
    pair table in contrast coordinates (m̃, π̃: its margins clipped to the simplex), written out here; the
    statistic is n z̄ᵀ S⁻¹ z̄ on Σ (k_j − 1)(C − 1) degrees of freedom, with the chi-square p-value."""
    from scipy.stats import chi2

    Xt, _, mech = _pool(1200, 5, eps=1.0, classes=3, n_sampled=2)
    groups = [(mech, np.arange(len(Xt)))]
    Z, S = independence_terms(groups, Xt)
    assert Z.shape == (1200, sum((k - 1) * 2 for k in KC)) and S.shape == (Z.shape[1],) * 2
    col = 0
    for j, k in enumerate(KC):
        r = ~np.isnan(Xt[:, j])
        E = mech.unbiased_pair_table(j, Xt[r, j]).mean(axis=0)
        mt, pt = (np.maximum(v, 0) / np.maximum(v, 0).sum() for v in (E.sum(1), E.sum(0)))
        inter = E - np.outer(E.sum(1), pt) - np.outer(mt, E.sum(0)) + E.sum() * np.outer(mt, pt)
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
    assert res["p_chi2"] == pytest.approx(chi2.sf(T, d), rel=1e-8)


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


@pytest.mark.slow
@pytest.mark.parametrize(
    "ks, classes, n_sampled, n",
    [(KC, 2, 1, 600), (KC, 3, 2, 600), ((10,), 2, 1, 333), ((5, 7, 10, 4, 8, 9), 2, 1, 600)],
)
def test_independence_p_values_without_signal(ks, classes, n_sampled, n):
    """Over 300 no-signal pools at ε 1 (two pairs at ε 0.5 each; one OLH attribute of 10 states; six
    OLH attributes, where the chi-square reference kept 0.019-0.024): the bootstrap p-value's rate of
    p ≤ 0.05 lies within 0.05 ± 3 binomial s.e. (4 to 26 of 300) and its mean within 0.5 ± 3 s.e.
    (0.289/√300, plus 0.005 for the draws' granularity). The chi-square p of the same pools in
    OLH's regime kept too few: this is what the bootstrap is for (1,000 pools per setting:
    ``simulations/paired_independence_level.py``, results/spread_fallback_level/independence_bootstrap_*.md)."""
    ps = []
    for s in range(300):
        rng = np.random.default_rng(100 + s)
        ds = make_logistic_multiclass_discrete(n, ks, np.zeros((classes, len(ks))), rng=rng)
        mech = PairedRecordMechanism(ks, classes, 1.0, n_sampled=n_sampled)
        X, _ = mech.release(ds.X, ds.y, rng=rng)
        ps.append(independence_test([(mech, np.arange(n))], X, seed=s)["p_value"])
    ps = np.array(ps)
    kept = int(np.sum(ps <= 0.05))
    assert 4 <= kept <= 26 and abs(ps.mean() - 0.5) < 3 * 0.289 / np.sqrt(300) + 0.005, (kept, ps.mean())
    assert ps.max() > 0.05 and ps.min() < 1  # neither all tiny nor all one


def test_independence_p_value_is_reproducible_from_its_seed():
    """The bootstrap's draws come from ``seed`` alone: the same releases and seed give the same p-value
    (and the same draws), another seed other draws; the statistic does not depend on the seed."""
    Xt, _, mech = _pool(800, 3, signal=False, eps=1.0)
    g = [(mech, np.arange(len(Xt)))]
    a, b, c = (independence_test(g, Xt, seed=s) for s in (5, 5, 6))
    assert a == b and a["statistic"] == c["statistic"] and a["n_boot"] >= 1
    assert (a["p_value"], a["n_boot"]) != (c["p_value"], c["n_boot"])
    assert independence_test(g, Xt, n_boot=0)["p_value"] == a["p_chi2"]


@pytest.mark.parametrize("n_sampled", [1, 2])
def test_independence_bootstrap_draws_at_the_margins_asked(n_sampled):
    """``margins``: given the releases' own clipped margins, the bootstrap is "releases"', draw for draw;
    the maximum-likelihood margins ("ml", the default) are each attribute's ML pair table's, so other
    draws and a valid p-value, also with ``covariance="draw"``; anything else is refused, naming the
    parameter."""
    from fedrr.estimators.spread._cv_paired import _attributes, _null_margins, _simplex, _tables
    from fedrr.estimators.spread._paired import ml_pair_table

    Xt, mech = _pool_oracle(600, 4, "oue", eps=0.5, n_sampled=n_sampled)  # debiased margins outside the simplex
    g = [(mech, np.arange(len(Xt)))]
    tables = [U.mean(axis=0) for U in _tables(_attributes(g, Xt), Xt)]
    sizes = np.array([np.sum(~np.isnan(Xt[:, j])) for j in range(len(KC))], float)
    pi = sum(w * E.sum(axis=0) for w, E in zip(sizes / sizes.sum(), tables))
    own = ([E.sum(axis=1) for E in tables], pi)
    base = independence_test(g, Xt, seed=3, margins="releases", covariance="releases")
    assert independence_test(g, Xt, seed=3, margins=own, covariance="releases") == base
    assert independence_test(g, Xt, seed=3) == independence_test(g, Xt, seed=3, margins="ml", covariance="auto")
    ms, pi_ml = _null_margins(_attributes(g, Xt), tables, Xt, "ml")
    for j, m in enumerate(ms):
        t = ml_pair_table(mech, j, Xt[~np.isnan(Xt[:, j]), j])
        np.testing.assert_allclose(m, t.sum(axis=1), atol=1e-12)
    assert not all(np.allclose(m, _simplex(o), atol=1e-4) for m, o in zip(ms, own[0]))
    np.testing.assert_allclose(pi_ml.sum(), 1.0)
    ml = independence_test(g, Xt, seed=3, margins="ml")
    assert ml["statistic"] == base["statistic"] and 0.01 <= ml["p_value"] <= 1
    drawn = independence_test(g, Xt, seed=3, margins="ml", covariance="draw")  # each draw's S at its margins
    assert drawn["statistic"] == base["statistic"] and 0.01 <= drawn["p_value"] <= 1
    with pytest.raises(ValidationError, match="margins"):
        independence_test(g, Xt, margins="truth")
    with pytest.raises(ValidationError, match="covariance"):
        independence_test(g, Xt, covariance="per-draw")


@pytest.mark.parametrize("oracle", ["rr", "oue", "olh"])
def test_shrunk_margins_remove_half_the_expected_excess_spread(oracle):
    """``margins="ml-shrunk"``: each ML margin m̂ pulled toward uniform u along m̂ − u, by λ² = 1 −
    SHRINK · excess / ‖m̂ − u‖², where the excess is the debiased margin's expected squared error under no
    signal. That excess is checked against the debiased draws' own squared errors (400 draws through
    the mechanism at fixed margins, within 4 standard errors), and the bootstrap draws at exactly the
    shrunk margins (the same p-value as those margins given)."""
    from fedrr.estimators.spread._cv_paired import (
        SHRINK,
        _attributes,
        _margin_excess,
        _null_margins,
        _null_tables,
        _tables,
    )

    Xt, mech = _pool_oracle(600, 4, oracle, eps=0.5, n_sampled=1)
    g = [(mech, np.arange(len(Xt)))]
    attrs = _attributes(g, Xt)
    tables = [U.mean(axis=0) for U in _tables(attrs, Xt)]
    ms, pi = _null_margins(attrs, tables, Xt, "ml")
    shrunk, pi_s = _null_margins(attrs, tables, Xt, "ml-shrunk")
    excess, class_excess = _margin_excess(attrs, ms, pi)
    for m, s, e in zip([*ms, pi], [*shrunk, pi_s], [*excess, class_excess]):
        u = np.full(m.size, 1.0 / m.size)
        lam = np.sqrt(max(0.0, 1 - SHRINK * e / np.sum((m - u) ** 2)))
        np.testing.assert_allclose(s, u + lam * (m - u), atol=1e-12)
        assert 0 <= lam < 1 and np.isclose(s.sum(), 1.0)
    rng = np.random.default_rng(7)
    errors = []
    for _ in range(400):
        draw = _null_tables(attrs, ms, pi, len(Xt), True, rng)
        errors.append([np.sum((E.reshape(m.size, -1).sum(axis=1) - m) ** 2) for E, m in zip(draw, ms)])
    errors = np.array(errors)
    se = errors.std(axis=0, ddof=1) / np.sqrt(len(errors))
    assert np.all(np.abs(errors.mean(axis=0) - excess) < 4 * se), (errors.mean(axis=0), excess, se)
    assert [j for j, _ in attrs] == list(range(len(attrs)))  # every attribute released: given margins index by j
    assert independence_test(g, Xt, seed=3, margins="ml-shrunk") == independence_test(
        g, Xt, seed=3, margins=(shrunk, pi_s)
    )


@pytest.mark.parametrize(
    "oracle, budget, same_as",
    [("oue", None, "draw"), ("rr", None, "draw"), ("olh", None, "draw"), ("olh", 0, "releases")],
)
def test_independence_covariance_auto_recomputes_what_is_cheap(monkeypatch, oracle, budget, same_as):
    """``covariance="auto"`` (the default): a draw's S is at the draw's own margins (as "draw") where
    the covariance is cheap: closed form for randomised response and OUE, OLH's through its collision
    tensors; an OLH attribute beyond their budget (here a budget of 0) keeps the releases' (as
    "releases"), whose per-draw covariance would cost seeds × k²; the p-value follows."""
    from fedrr.estimators.spread._cv_paired import _attributes, _costly, _null_cov, _null_tables, _tables, _terms
    from fedrr.mechanisms import _oracles

    if budget is not None:
        monkeypatch.setattr(_oracles, "COLLISION_BUDGET", budget)
    Xt, mech = _pool_oracle(600, 4, oracle, eps=0.5, n_sampled=1)
    g = [(mech, np.arange(len(Xt)))]
    assert independence_test(g, Xt, seed=3) == independence_test(g, Xt, seed=3, covariance=same_as)
    attrs = _attributes(g, Xt)
    tables = _tables(attrs, Xt)
    n = len(Xt)
    covs = _terms(attrs, tables, n)[3]  # at the releases' margins
    kept = [_null_cov(_costly(parts)[0], n, U.mean(0).sum(1), U.mean(0).sum(0)) for (_, parts), U in zip(attrs, tables)]
    draw = _null_tables(attrs, [np.full(k, 1 / k) for k in KC], np.full(3, 1 / 3), n, True, np.random.default_rng(0))
    S = {"auto": _terms(attrs, draw, n, None, True, kept)[2], "draw": _terms(attrs, draw, n, None, True)[2]}
    S["releases"] = _terms(attrs, draw, n, covs, True)[2]
    other = {"draw": "releases", "releases": "draw"}[same_as]
    np.testing.assert_allclose(S["auto"], S[same_as], rtol=1e-12, atol=1e-15)
    assert np.abs(S["auto"] - S[other]).max() > 1e-3 * np.abs(S[other]).max()


@pytest.mark.parametrize("oracle, size", [("rr", 300), ("oue", 300), ("olh", 40), ("olh", 3000)])
def test_null_draws_have_the_oracles_mean_and_covariance(oracle, size):
    """The bootstrap draws a table's mean one-hot estimate from the oracle's report counts (OLH: from
    the reports themselves below as many reports as hash seeds, 110 here, from counts per seed above):
    over 4,000 draws its mean is q and its covariance the oracle's ``unbiased_onehot_covariance``(q)/size
    (means within 5 s.e.; each variance within 5 s.e. of a sample variance, √(2/4000) relative)."""
    from fedrr.estimators.spread._cv_paired import _null_mean
    from fedrr.mechanisms import unbiased_onehot_covariance

    mech = PairedRecordMechanism(KC, 3, 1.0, oracle=oracle)
    o = mech.oracles[0]  # 9 pair values
    q = np.random.default_rng(0).dirichlet(np.ones(o.k))
    rng = np.random.default_rng(1)
    D = np.array([_null_mean(o, q, size, rng) for _ in range(4000)])
    V = unbiased_onehot_covariance(o, q) / size
    se = np.sqrt(np.diag(V) / 4000)
    assert np.all(np.abs(D.mean(axis=0) - q) < 5 * se), np.max(np.abs(D.mean(axis=0) - q) / se)
    np.testing.assert_allclose(D.var(axis=0), np.diag(V), rtol=5 * np.sqrt(2 / 4000))


@pytest.mark.parametrize("classes", [2, 3])
def test_paired_cv_keeps_a_model_with_signal_and_falls_back_without(classes):
    Xt, yt, mech = _pool(3000, 1, classes=classes)
    est = SpreadLogisticRegressionCV(Cs=(0.1, 1.0), cv_max_iter=10, max_iter=30, random_state=0, fallback=True)
    est.fit(Xt, yt, mechanism=mech)
    assert not est.fallback_ and est.p_value_ == 1 / 100 and est.fallback_reason_ is None  # every draw below T
    assert est.gain_["statistic"] == "independence" and est.gain_["p_chi2"] < 0.005
    assert est.gain_["n_boot"] == 99 and est.gain_["z"] == pytest.approx(norm.isf(0.01))
    assert est.gain_["n_selection"] == est.gain_["n_test"] == len(Xt)  # nothing held out
    assert est.p_value_ == independence_test([(mech, np.arange(len(Xt)))], Xt, seed=0)["p_value"]
    chosen = np.flatnonzero(~np.isnan(est.cv_results_["heldout_p_value"]))
    assert chosen.size == 1 and est.cv_results_["heldout_p_value"][chosen[0]] == est.p_value_
    assert np.all(np.isfinite(est.cv_results_["mean_test_score"]))

    # a no-signal pool (seed 3: p 0.59 and 0.53; a calibrated test keeps 5 % of such pools, seed 2's
    # two-class pool among them at p 0.04, which the conservative chi-square reference dropped at 0.10)
    Xt, yt, mech = _pool(3000, 3, signal=False, classes=classes)
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
    # the default on paired releases ("auto") is False: the test reported, the model kept
    auto = SpreadLogisticRegressionCV(Cs=(0.1, 1.0), cv_max_iter=10, max_iter=30, random_state=0).fit(Xt, yt, mech)
    assert auto.fallback == "auto" and not auto.fallback_ and auto.p_value_ == est.p_value_
    np.testing.assert_array_equal(auto.coef_, kept.coef_)


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


def test_a_p_value_of_one_has_a_finite_z(monkeypatch):
    """Far below its degrees of freedom the statistic's chi-square tail rounds to 1; z comes from the
    other tail then, finite and negative (it was −inf). (Pools of 30-state attributes at ε 0.5 did
    this before the linear map moved to the simplex margins; terms with a tiny mean do it now.) A
    bootstrap p-value of 1 has the finite z of B/(B + 1)."""
    import fedrr.estimators.spread._cv_paired as cv_paired

    rng = np.random.default_rng(0)
    Z = 0.01 * rng.standard_normal((400, 145))
    monkeypatch.setattr(cv_paired, "_terms", lambda *a, **k: (Z, Z.mean(axis=0), np.eye(145), []))
    monkeypatch.setattr(cv_paired, "_one_pair_each", lambda attrs: False)
    res = cv_paired.independence_test([], np.zeros((400, 5)), n_boot=0)
    assert res["p_value"] > 1 - 1e-12 and np.isfinite(res["z"]) and res["z"] < -3, res
    assert res["z"] == pytest.approx(norm.ppf(chi2.cdf(res["statistic"], res["df"])), rel=1e-12)
    assert chi2.sf(10.0, 145) == 1.0 and np.isfinite(norm.ppf(chi2.cdf(10.0, 145)))  # where isf(p) was −inf
    res = cv_paired.independence_test([], np.zeros((400, 5)), n_boot=9)  # every draw's T exceeds this one
    assert res["p_value"] == 1.0 and res["z"] == pytest.approx(norm.isf(0.9))


def test_ml_pair_tables_are_kept_by_content():
    """``ml_pair_table`` keeps its last tables by content: the same reports give the same table without
    solving again (a fit's view and the test share it), a copy each time; other reports another table."""
    from fedrr.estimators.spread import _paired

    Xt, mech = _pool_oracle(900, 4, "oue", eps=1.0)
    v = Xt[~np.isnan(Xt[:, 0]), 0]
    a = _paired.ml_pair_table(mech, 0, v)
    calls = []
    real = _paired.simplex_mle
    _paired.simplex_mle = lambda *args, **kw: calls.append(1) or real(*args, **kw)
    try:
        b = _paired.ml_pair_table(mech, 0, v.copy())
        a[0, 0] = -1.0  # the caller's copy: the kept table is unchanged
        c = _paired.ml_pair_table(mech, 0, v)
        d = _paired.ml_pair_table(mech, 0, v[:-1])
    finally:
        _paired.simplex_mle = real
    assert calls == [1]  # only the other reports were solved
    np.testing.assert_array_equal(b, c)
    assert b[0, 0] >= 0 and not np.array_equal(b, d)
