"""``solver="direct"``: spread's penalised likelihood on paired releases of one pair per record (and of
two, when asked), maximised by L-BFGS over the model's pair tables (``fedrr.estimators.spread._direct``).
Its gradient against finite differences; its answer is the brute-force maximiser of the exact penalised
noisy likelihood (every x enumerated by hand); it is at least as high on that objective as spread-EM's
fit; the two-pair likelihood is the exact one written out by hand; releases it cannot fit are refused,
naming ``solver``; the CV passes it to its fits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, logsumexp

from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread._direct import PairLikelihood, TwoPairLikelihood, prior_draws
from fedrr.estimators.spread._paired import PairedView
from fedrr.mechanisms import (
    CategoricalPrior,
    EmpiricalPrior,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
    TripleRecordMechanism,
)

KS = (3, 2, 4, 3)
PRIOR = [np.array(p) for p in ([0.5, 0.3, 0.2], [0.6, 0.4], [0.1, 0.2, 0.3, 0.4], [0.3, 0.3, 0.4])]


def _releases(n: int, classes: int, seed: int, eps: float = 2.0, n_sampled: int = 1):
    rng = np.random.default_rng(seed)
    X = np.stack([rng.choice(k, size=n, p=p) for k, p in zip(KS, PRIOR)], axis=1)
    logit = 1.5 * (X[:, 0] == 2) - 1.0 * X[:, 1] + 0.6 * X[:, 2] - 1.2
    y = (rng.random(n) < expit(logit)).astype(int) if classes == 2 else (X[:, 0] + (rng.random(n) < 0.3)) % classes
    mech = PairedRecordMechanism(KS, classes, eps, n_sampled=n_sampled)
    Xt, yt = mech.release(X, y, rng=rng)
    return Xt, yt, mech


@pytest.mark.parametrize("pairs", [1, 2])
@pytest.mark.parametrize("classes, n_draws", [(2, 512), (3, 512), (2, 40)])
def test_the_gradient_is_the_likelihoods(classes, n_draws, pairs):
    """``PairLikelihood.value_grad`` (one pair per record) and ``TwoPairLikelihood.value_grad`` (two)
    against central differences along random directions, with the prior's 72 states enumerated (512
    draws) or drawn (40)."""
    if pairs == 1:
        Xt, yt, mech = _releases(3000, classes, 0)
        est = SpreadLogisticRegression(encoding="onehot", prior="naive-bayes", solver="direct", max_iter=3)
        est.fit(Xt, yt, mechanism=mech)
        lik = PairLikelihood(
            [(PairedView(mech), np.arange(len(Xt)))], Xt, est.design_, est._prior_state, classes, n_draws, 0
        )
    else:
        lik, est, _, _ = _two_pair_lik(classes, n_draws)
    assert lik.X.shape[0] == (72 if n_draws >= 72 else n_draws)
    rng = np.random.default_rng(1)
    coef, b = rng.normal(size=est.coef_.shape) * 0.5, rng.normal(size=est.intercept_.shape) * 0.5
    _, gc, gb = lik.value_grad(coef, b)
    for _ in range(3):
        dc, db = rng.normal(size=coef.shape), rng.normal(size=b.shape)
        h = 1e-5
        fp = lik.value_grad(coef + h * dc, b + h * db)[0]
        fm = lik.value_grad(coef - h * dc, b - h * db)[0]
        assert (fp - fm) / (2 * h) == pytest.approx(np.sum(gc * dc) + gb @ db, rel=1e-5)


def _exact_objective(Xt, mech, design, coef_b, C, rows=None):
    """−log p(releases) + ‖coef‖²/(2C) by hand: every x of the prior enumerated, p(x) = Π PRIOR[d][x_d],
    or with ``rows`` the share of those public rows equal to x."""
    X = np.array(list(itertools.product(*[range(k) for k in KS])))
    px = np.prod([PRIOR[d][X[:, d]] for d in range(len(KS))], axis=0)
    if rows is not None:
        px = np.array([np.mean(np.all(rows == x, axis=1)) for x in X])
    p_in = design.n_inputs
    coef, b = coef_b[:p_in], coef_b[p_in]
    p1 = expit(design.decode(X).astype(float) @ coef + b)
    loss = 0.5 * coef @ coef / C
    for j, k in enumerate(KS):
        q = np.zeros((k, 2))
        for s in range(k):
            m = X[:, j] == s
            q[s] = [np.sum(px[m] * (1 - p1[m])), np.sum(px[m] * p1[m])]
        v = Xt[~np.isnan(Xt[:, j]), j]
        L = mech.pair_log_likelihood(j, v).reshape(v.size, k, 2)
        loss -= np.sum(logsumexp(L + np.log(q)[None], axis=(1, 2)))
    return loss


def test_the_direct_fit_is_the_brute_force_penalised_mle():
    """On 4 attributes (72 states of x: the draws enumerate them, so the pair tables are exact) with a
    given prior, the direct fit lands on the maximiser of the exact penalised likelihood written out
    by hand (BFGS on finite differences), to 2e-3 per coordinate."""
    Xt, yt, mech = _releases(4000, 2, 3)
    C = 0.5
    kw = dict(C=C, encoding="onehot", prior=[CategoricalPrior(p) for p in PRIOR], random_state=0)
    est = SpreadLogisticRegression(solver="direct", **kw).fit(Xt, yt, mechanism=mech)
    got = np.r_[est.coef_[0], est.intercept_]
    want = minimize(lambda v: _exact_objective(Xt, mech, est.design_, v, C), got + 0.3, method="BFGS").x
    assert est.converged_ and "L-BFGS" in est.convergence_
    assert np.max(np.abs(got - want)) < 2e-3, (got, want)
    # spread-EM maximises the same objective, with Monte Carlo noise: never higher than the direct fit
    em = SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=mech)
    at_em = _exact_objective(Xt, mech, est.design_, np.r_[em.coef_[0], em.intercept_], C)
    assert _exact_objective(Xt, mech, est.design_, got, C) <= at_em + 1e-6


def test_the_direct_fit_with_public_rows_is_the_brute_force_penalised_mle():
    """A prior of public rows whose attributes depend on each other (x_2 follows x_0): the direct fit
    maximises the exact penalised likelihood under the rows' empirical joint, to 2e-3 per coordinate,
    and the joint is what it uses (the same fit under the rows' margins alone lands elsewhere)."""
    Xt, yt, mech = _releases(4000, 2, 3)
    rng = np.random.default_rng(7)
    rows = np.stack([rng.choice(k, size=500, p=p) for k, p in zip(KS, PRIOR)], axis=1)
    rows[:, 2] = np.where(rng.random(500) < 0.7, rows[:, 0], rows[:, 2])  # x_2 copies x_0 in 70 % of rows
    C = 0.5
    kw = dict(C=C, encoding="onehot", solver="auto", random_state=0)
    est = SpreadLogisticRegression(prior=EmpiricalPrior(rows), **kw).fit(Xt, yt, mechanism=mech)
    assert est.solver_ == "direct" and est.converged_
    got = np.r_[est.coef_[0], est.intercept_]
    want = minimize(lambda v: _exact_objective(Xt, mech, est.design_, v, C, rows), got + 0.3, method="BFGS").x
    assert np.max(np.abs(got - want)) < 2e-3, (got, want)
    margins = [CategoricalPrior(np.bincount(rows[:, d], minlength=k) / 500) for d, k in enumerate(KS)]
    fact = SpreadLogisticRegression(prior=margins, **kw).fit(Xt, yt, mechanism=mech)
    assert np.max(np.abs(np.r_[fact.coef_[0], fact.intercept_] - got)) > 0.05


def _exact_two_attribute_objective(Xt, report_lik, design, coef_b, C, rows):
    """−log p(releases) + ‖coef‖²/(2C) by hand for records that released two attributes j < k, under the
    empirical joint of public ``rows``: Σ_{s,t,c} P(report | s, t, c) q_jk(s, t, c) per record, with
    ``report_lik(j, k, row)`` (k_j, k_k, C) its likelihood."""
    X = np.array(list(itertools.product(*[range(k) for k in KS])))
    px = np.array([np.mean(np.all(rows == x, axis=1)) for x in X])
    p_in = design.n_inputs
    coef, b = coef_b[:p_in], coef_b[p_in]
    p1 = expit(design.decode(X).astype(float) @ coef + b)
    loss = 0.5 * coef @ coef / C
    for row in Xt:
        j, k = np.flatnonzero(~np.isnan(row))
        q = np.zeros((KS[j], KS[k], 2))
        np.add.at(q, (X[:, j], X[:, k], 0), px * (1 - p1))
        np.add.at(q, (X[:, j], X[:, k], 1), px * p1)
        loss -= np.log(np.sum(report_lik(j, k, row) * q))
    return loss


@pytest.mark.parametrize("release", ["two pairs", "triple"])
def test_two_attributes_per_record_with_public_rows_is_the_brute_force_penalised_mle(release):
    """Two pairs per record, or one triple, under a prior of public rows whose attributes depend on each
    other: the direct fit maximises the exact penalised likelihood under the rows' empirical joint (each
    pair table's cell the rows in it), to 2e-3 per coordinate."""
    rng = np.random.default_rng(5)
    rows = np.stack([rng.choice(k, size=400, p=p) for k, p in zip(KS, PRIOR)], axis=1)
    rows[:, 2] = np.where(rng.random(400) < 0.7, rows[:, 0], rows[:, 2])  # x_2 copies x_0 in 70 % of rows
    if release == "two pairs":
        Xt, yt, mech = _releases(1500, 2, 4, n_sampled=2)

        def report_lik(j, k, row):
            Lj = np.exp(mech.pair_log_likelihood(j, row[[j]])).reshape(KS[j], 2)
            Lk = np.exp(mech.pair_log_likelihood(k, row[[k]])).reshape(KS[k], 2)
            return Lj[:, None, :] * Lk[None, :, :]
    else:
        mech = TripleRecordMechanism(KS, 2, 2.0)
        X = np.stack([rng.choice(k, size=1500, p=p) for k, p in zip(KS, PRIOR)], axis=1)
        y = (rng.random(1500) < expit(1.5 * (X[:, 0] == 2) - 1.0 * X[:, 1] + 0.6 * X[:, 2] - 1.2)).astype(int)
        Xt, yt = mech.release(X, y, rng=rng)

        def report_lik(j, k, row):
            return np.exp(mech.triple_log_likelihood(j, k, row[[j]]))[0]

    C = 0.5
    kw = dict(C=C, encoding="onehot", solver="direct", prior=EmpiricalPrior(rows), random_state=0)
    est = SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=mech)
    assert est.converged_
    got = np.r_[est.coef_[0], est.intercept_]
    want = minimize(
        lambda v: _exact_two_attribute_objective(Xt, report_lik, est.design_, v, C, rows), got + 0.3, method="BFGS"
    ).x
    assert np.max(np.abs(got - want)) < 2e-3, (got, want)


@pytest.mark.parametrize("release", ["two pairs", "triple"])
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("n_draws", [512, 64])
def test_a_prior_of_rows_takes_each_rows_own_cell(release, classes, n_draws, monkeypatch):
    """Under a prior of rows, ``TwoPairLikelihood`` by each distinct row's own cell (``_rows_value_grad``)
    has the value and gradient of the cells' weights over every (s, t, row) (the path of other priors),
    to 1e-10 relative, on its releases and on others (``with_releases``), with every row or fewer draws
    than rows; and its gradient is its value's (central differences)."""
    rng = np.random.default_rng(8)
    rows = np.stack([rng.choice(k, size=300, p=p) for k, p in zip(KS, PRIOR)], axis=1)
    rows[:, 2] = np.where(rng.random(300) < 0.7, rows[:, 0], rows[:, 2])
    rows = rows[rows[:, 1] == 0]  # a state no row holds: its cells have no mass
    if release == "two pairs":
        Xt, yt, mech = _releases(1500, classes, 4, n_sampled=2)
    else:
        mech = TripleRecordMechanism(KS, classes, 2.0)
        X = np.stack([rng.choice(k, size=1500, p=p) for k, p in zip(KS, PRIOR)], axis=1)
        Xt, yt = mech.release(X, (X[:, 0] + (rng.random(1500) < 0.3)) % classes, rng=rng)
    est = SpreadLogisticRegression(encoding="onehot", prior=EmpiricalPrior(rows), solver="direct", max_iter=3)
    est.fit(Xt, yt, mechanism=mech)
    groups = [(PairedView(mech) if release == "two pairs" else mech, np.arange(len(Xt)))]
    lik = TwoPairLikelihood(groups, Xt, est.design_, est._prior_state, classes, n_draws, 0)
    drawn = rows.shape[0] if n_draws >= rows.shape[0] else n_draws  # fewer draws: rows drawn with replacement
    assert lik.by_row and lik.X.shape[0] < drawn  # each distinct row once
    coef, b = rng.normal(size=est.coef_.shape) * 0.7, rng.normal(size=est.intercept_.shape) * 0.7
    got = lik.value_grad(coef, b)
    monkeypatch.setattr(TwoPairLikelihood, "ROWS_OWN_CELL", False)
    cells = TwoPairLikelihood(groups, Xt, est.design_, est._prior_state, classes, n_draws, 0)
    assert not cells.by_row and cells.X.shape[0] == drawn
    held = [(g[0], np.arange(500)) for g in groups]  # a CV's held-out fold: the same prior, other releases
    for a, c in ((lik, cells), (lik.with_releases(held, Xt[:500]), cells.with_releases(held, Xt[:500]))):
        got, want = a.value_grad(coef, b), c.value_grad(coef, b)
        assert got[0] == pytest.approx(want[0], rel=1e-10)
        for g, w in zip(got[1:], want[1:]):
            assert np.max(np.abs(g - w)) <= 1e-10 * np.max(np.abs(w))
    got = lik.value_grad(coef, b)
    dc, db = rng.normal(size=coef.shape), rng.normal(size=b.shape)
    h = 1e-5
    fd = (lik.value_grad(coef + h * dc, b + h * db)[0] - lik.value_grad(coef - h * dc, b - h * db)[0]) / (2 * h)
    assert fd == pytest.approx(np.sum(got[1] * dc) + got[2] @ db, rel=1e-5)


@pytest.mark.parametrize("prior", ["rows", "mixture"])
def test_local_hashing_triples_read_as_hits_give_the_dense_likelihood(prior):
    """Local hashing's reports as their hits (``HitMatrix``: two values, the high one where a cell's hash
    is the report) give ``TwoPairLikelihood`` the value and gradient of the dense matrix, to 1e-12
    relative, under a prior of rows and under naive Bayes's mixture; the hits are the dense matrix's."""
    from fedrr.estimators.spread._pair_reports import HitMatrix, stack_reports

    rng = np.random.default_rng(11)
    mech = TripleRecordMechanism(KS, 3, 2.0, oracle="olh")
    X = np.stack([rng.choice(k, size=2000, p=p) for k, p in zip(KS, PRIOR)], axis=1)
    Xt, yt = mech.release(X, (X[:, 0] + (rng.random(2000) < 0.3)) % 3, rng=rng)
    kw = dict(prior=EmpiricalPrior(X[:300])) if prior == "rows" else dict(prior="naive-bayes")
    est = SpreadLogisticRegression(encoding="onehot", solver="direct", max_iter=3, **kw).fit(Xt, yt, mechanism=mech)
    lik = TwoPairLikelihood([(mech, np.arange(len(Xt)))], Xt, est.design_, est._prior_state, 3, 512, 0)
    assert all(isinstance(L, HitMatrix) for _, L in lik.units.values())
    coef, b = rng.normal(size=est.coef_.shape) * 0.7, rng.normal(size=est.intercept_.shape) * 0.7
    got = lik.value_grad(coef, b)
    for (j, k), (cnt, L) in lik.units.items():
        reports = np.unique(Xt[~np.isnan(Xt[:, j]) & ~np.isnan(Xt[:, k]), j])
        dense = np.exp(mech.triple_log_likelihood(j, k, reports)).reshape(reports.size, -1)
        assert np.allclose(L.toarray(), dense, rtol=1e-14, atol=0)
        r = rng.random(cnt.size)
        assert np.allclose(L.T @ r, dense.T @ r, rtol=1e-12) and np.allclose(L @ dense[0], dense @ dense[0], rtol=1e-12)
        lik.units[(j, k)] = (cnt, dense)
    want = lik.value_grad(coef, b)
    assert got[0] == pytest.approx(want[0], rel=1e-12)
    for g, w in zip(got[1:], want[1:]):
        assert np.max(np.abs(g - w)) <= 1e-12 * np.max(np.abs(w))
    L = next(iter(lik.units.values()))[1]
    hits = HitMatrix(*mech.oracle_of(0, 1).likelihood_hits(Xt[~np.isnan(Xt[:, 0]) & ~np.isnan(Xt[:, 1]), 0][:5]))
    assert np.array_equal(stack_reports(hits, hits).toarray(), np.vstack([hits.toarray()] * 2))
    assert np.array_equal(stack_reports(hits, L[:2]), np.vstack([hits.toarray(), L[:2]]))


def test_draws_enumerate_small_state_spaces_exactly():
    """With the states' product within the draws, every x appears once and W_j's rows are p(x_{-j} | x_j = s)."""
    from fedrr.estimators.spread._priors._mixture import MixtureSpreadPrior

    est = SpreadLogisticRegression(encoding="onehot", prior="naive-bayes", solver="direct", max_iter=2, random_state=0)
    Xt, yt, mech = _releases(2000, 2, 5)
    prior = est.fit(Xt, yt, mechanism=mech)._prior_state
    assert isinstance(prior, MixtureSpreadPrior)
    X, W = prior_draws(prior, np.array(KS), 1000, np.random.default_rng(0), exact=True)
    assert X.shape == (72, 4) and len({tuple(r) for r in X}) == 72
    joint = np.exp(logsumexp(prior.log_pi[None] + sum(prior.log_p[d][:, X[:, d]].T for d in range(4)), axis=1))
    for j, k in enumerate(KS):
        for s in range(
            k
        ):  # Σ_n W_j[s, n] f(x_n with x_j = s) = E[f | x_j = s]: W_j[s] is p(x_{-j} | s) spread over x_j
            Xs = X.copy()
            Xs[:, j] = s
            f = Xs @ np.arange(1, 5)
            m = X[:, j] == s
            want = np.sum(joint[m] * f[m]) / joint[m].sum()
            assert W[j][s] @ f == pytest.approx(want, rel=1e-10)


def test_releases_the_direct_solver_cannot_fit_are_refused_naming_it(tmp_path):
    kw = dict(solver="direct", encoding="onehot", max_iter=3)
    Xt, yt, three = _releases(600, 2, 1, n_sampled=3)
    with pytest.raises(ValidationError, match="solver.*one or two pairs per record"):
        SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=three)
    Xt, yt, one = _releases(600, 2, 1)
    with pytest.raises(ValidationError, match="solver.*fixed prior"):
        SpreadLogisticRegression(prior="learned", **kw).fit(Xt, yt, mechanism=one)
    rm = RecordMechanism(RandomizedResponse(3, 0.2), RandomizedResponse(2, 0.1), n_features=2)
    rng = np.random.default_rng(0)
    Xs, ys = rm.release(rng.integers(0, 3, (300, 2)), rng.integers(0, 2, 300), rng=rng)
    with pytest.raises(ValidationError, match="solver.*paired releases"):
        SpreadLogisticRegression(**kw).fit(Xs, ys, mechanism=rm)
    with pytest.raises(ValidationError, match="solver"):
        SpreadLogisticRegression(solver="newton").fit(Xt, yt, mechanism=one)
    with pytest.raises(ValidationError, match="solver.*fit_pool"):
        SpreadLogisticRegression(**kw).fit_pool(tmp_path)


def test_auto_is_direct_where_it_applies_else_em():
    kw = dict(solver="auto", encoding="onehot", max_iter=3, burn_in=1, n_average=1, random_state=0)
    Xt, yt, one = _releases(600, 2, 1)
    assert SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=one).solver_ == "direct"
    assert SpreadLogisticRegression(**kw, prior="learned").fit(Xt, yt, mechanism=one).solver_ == "em"
    Xt, yt, two = _releases(600, 2, 1, n_sampled=2)
    assert SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=two).solver_ == "em"
    rng = np.random.default_rng(0)
    clean = SpreadLogisticRegression(solver="direct").fit(rng.normal(size=(50, 2)), rng.integers(0, 2, 50))
    assert clean.solver_ == "clean"  # no mechanism: plain logistic regression (with a warning)


def test_the_cv_passes_the_solver_to_its_fits():
    Xt, yt, mech = _releases(3000, 2, 2)
    cv = SpreadLogisticRegressionCV(Cs=(0.1, 1.0), solver="direct", random_state=0).fit(Xt, yt, mechanism=mech)
    assert cv._spread(C=2.0).solver == "direct"
    assert not cv.fallback_ and "L-BFGS" in cv.estimator_.convergence_
    assert np.all(np.isfinite(cv.cv_results_["mean_test_score"]))


def test_the_sweeps_spread_learner_takes_the_solver_from_the_config():
    """``[learners] spread_solver`` ("direct", "em"; default "auto") reaches the spread learner's
    estimator (``FitOptions``)."""
    from fedrr.learners import FitData, FitOptions, get

    Xt, yt, mech = _releases(3000, 2, 2)
    est = get("spread").fit(FitData(Xt, yt, mech), FitOptions(spread_solver="direct", encoding="onehot"))
    assert est.solver == "direct" and "L-BFGS" in est.estimator_.convergence_
    est = get("spread").fit(FitData(Xt, yt, mech), FitOptions(spread_solver="em", encoding="onehot"))
    assert est.solver == "em" and "L-BFGS" not in est.estimator_.convergence_
    assert get("spread").fit(FitData(Xt, yt, mech), FitOptions(encoding="onehot")).solver == "auto"  # the default


def test_the_cv_folds_take_the_direct_budget_exactly_where_they_run_direct():
    """The CV's fold fits get ``max_iter`` when they run the direct solver ("auto": where it applies),
    else ``cv_max_iter`` (EM's selection budget)."""
    from fedrr.estimators.spread._cv_tasks import _direct_folds

    one, two = PairedView(_releases(50, 2, 0)[2]), PairedView(_releases(50, 2, 0, n_sampled=2)[2])
    cv = SpreadLogisticRegressionCV
    assert _direct_folds(cv(solver="auto"), [one, one, None]) and _direct_folds(cv(solver="direct"), [two])
    assert not _direct_folds(cv(solver="auto"), [one, two]) and not _direct_folds(cv(solver="em"), [one])
    assert not _direct_folds(cv(solver="auto", prior="learned"), [one])


def _two_pair_lik(classes: int, n_draws: int, prior="naive-bayes", seed: int = 0):
    Xt, yt, mech = _releases(2000, classes, seed, n_sampled=2)
    est = SpreadLogisticRegression(encoding="onehot", prior=prior, solver="direct", max_iter=3, random_state=0)
    est.fit(Xt, yt, mechanism=mech)
    groups = [(PairedView(mech), np.arange(len(Xt)))]
    return TwoPairLikelihood(groups, Xt, est.design_, est._prior_state, classes, n_draws, 0), est, Xt, mech


@pytest.mark.parametrize("prior", ["given", "naive-bayes"])
def test_the_two_pair_likelihood_is_the_exact_one(prior):
    """Every x enumerated: −log Π_i Σ_x Σ_c p(x) p_θ(c | x) P(v_ij | x_j, c) P(v_ik | x_k, c) by hand,
    under a given factorised prior and under the naive-Bayes mixture, to 1e-9 relative."""
    kw = [CategoricalPrior(p) for p in PRIOR] if prior == "given" else prior
    lik, est, Xt, mech = _two_pair_lik(2, 512, kw, seed=4)
    X = np.array(list(itertools.product(*[range(k) for k in KS])))
    if prior == "given":
        px = np.prod([PRIOR[d][X[:, d]] for d in range(len(KS))], axis=0)
    else:
        pr = est._prior_state
        px = np.exp(logsumexp(pr.log_pi[None] + sum(pr.log_p[d][:, X[:, d]].T for d in range(4)), axis=1))
    rng = np.random.default_rng(3)
    coef, b = rng.normal(size=est.coef_.shape) * 0.7, rng.normal(size=est.intercept_.shape) * 0.7
    p1 = expit(est.design_.decode(X).astype(float) @ coef[0] + b[0])
    pxc = np.stack([px * (1 - p1), px * p1], axis=1)  # p(x, c)
    want = 0.0
    for row in Xt:
        j, k = np.flatnonzero(~np.isnan(row))
        Lj = np.exp(mech.pair_log_likelihood(j, row[j : j + 1]))[0]  # (k_j, C)
        Lk = np.exp(mech.pair_log_likelihood(k, row[k : k + 1]))[0]
        want -= np.log(np.sum(pxc * Lj[X[:, j]] * Lk[X[:, k]]))
    assert lik.n == len(Xt)
    assert lik.value_grad(coef, b)[0] == pytest.approx(want, rel=1e-9)


def test_two_pairs_fit_directly_only_when_asked():
    """ "auto" keeps spread-EM for two pairs per record; "direct" fits them by L-BFGS, converged, and
    lands near spread-EM's answer on the same releases (EM's Monte Carlo noise apart)."""
    Xt, yt, two = _releases(4000, 2, 6, n_sampled=2)
    kw = dict(encoding="onehot", prior="naive-bayes", random_state=0)
    auto = SpreadLogisticRegression(max_iter=3, burn_in=1, n_average=1, **kw).fit(Xt, yt, mechanism=two)
    assert auto.solver_ == "em"
    direct = SpreadLogisticRegression(solver="direct", **kw).fit(Xt, yt, mechanism=two)
    assert direct.solver_ == "direct" and direct.converged_ and "L-BFGS" in direct.convergence_
    em = SpreadLogisticRegression(solver="em", max_iter=300, **kw).fit(Xt, yt, mechanism=two)
    assert np.corrcoef(direct.coef_[0], em.coef_[0])[0, 1] > 0.95


def test_one_pair_per_record_identifies_logistic_regression_given_the_joint():
    """Why a prior that knows how attributes co-occur is what one pair per record lacks: with the prior
    the records' own joint (public rows equal to them) and every record's every pair reported without
    noise (RR at ε 40), the likelihood's stationary point is where E[σ(θ·z) | x_j = s] matches each
    pair table, which are logistic regression's score equations for one-hot inputs. So the direct fit
    (C large) predicts as clean logistic regression on the same records, to 1e-3 on all 72 states
    (measured 1.1e-4; under the rows' margins alone 0.22)."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(11)
    n = 3000
    X = np.stack([rng.choice(k, size=n, p=p) for k, p in zip(KS, PRIOR)], axis=1)
    X[:, 2] = np.where(rng.random(n) < 0.5, X[:, 0], X[:, 2])  # attributes that co-occur
    y = (rng.random(n) < expit(1.5 * (X[:, 0] == 2) - 1.0 * X[:, 1] + 0.6 * X[:, 2] - 1.2)).astype(int)
    mech = PairedRecordMechanism(KS, 2, 40.0, n_sampled=1)
    Xt = np.full((n * len(KS), len(KS)), np.nan)  # each record releases each pair once: report x_j·C + y
    for j in range(len(KS)):
        Xt[j * n : (j + 1) * n, j] = X[:, j] * 2 + y
    yt = np.full(Xt.shape[0], np.nan)
    C = 1e4
    est = SpreadLogisticRegression(C=C, encoding="onehot", prior=EmpiricalPrior(X), solver="direct", max_iter=2000)
    est.fit(Xt, yt, mechanism=mech)
    states = np.array(list(itertools.product(*[range(k) for k in KS])))
    lr = LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(est.design_.decode(X).astype(float), y)
    want = lr.predict_proba(est.design_.decode(states).astype(float))[:, 1]
    assert np.max(np.abs(est.predict_proba(states)[:, 1] - want)) < 1e-3
    # the same releases with the rows' margins as a factorised prior: another model
    margins = [CategoricalPrior(np.bincount(X[:, d], minlength=k) / n) for d, k in enumerate(KS)]
    fact = SpreadLogisticRegression(C=C, encoding="onehot", prior=margins, solver="direct", max_iter=2000)
    fact.fit(Xt, yt, mechanism=mech)
    assert np.max(np.abs(fact.predict_proba(states)[:, 1] - want)) > 0.02
