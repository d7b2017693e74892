"""What spread-EM's L2 penalty shrinks toward (``shrink_to``): 0, scikit-learn's ridge, or naive Bayes's
log-odds fitted on the same releases. The penalty and its gradient; the tiny-C limit is the centre
(naive Bayes's model, exactly, under one-hot inputs); EM's fixed point is the brute-force maximiser of
the noisy likelihood minus ‖coef − centre‖²/(2C); "auto" takes naive Bayes exactly where it can be
built (bad values, and releases that cannot give naive Bayes, name ``shrink_to``: tests/test_spread_start.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

from fedrr.estimators import LDPNaiveBayes, SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread._design import ColumnLayout, Design
from fedrr.estimators.spread._mstep import log_class_probs, penalised
from fedrr.estimators.spread._start import naive_bayes_start
from fedrr.mechanisms import (
    CategoricalPrior,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
)

KS = (3, 2, 4, 3)
ALL_X = np.array(list(itertools.product(*[range(k) for k in KS])))


def _records(n: int, C: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, C, n)
    X = np.stack([(rng.integers(0, k, n) + (y if j % 2 == 0 else 0)) % k for j, k in enumerate(KS)], axis=1)
    return X, y


def test_the_penalty_and_its_gradient_are_taken_at_the_centre():
    """loss + λ‖coef − centre‖²/2 and its gradient, against central differences; no centre is 0."""
    rng = np.random.default_rng(0)
    coef, center, gc, gb = rng.normal(size=(2, 5)), rng.normal(size=(2, 5)), rng.normal(size=(2, 5)), rng.normal(size=2)
    lam = 0.7
    loss, g = penalised(1.5, gc, gb, coef, lam, True, center)
    assert loss == pytest.approx(1.5 + 0.5 * lam * np.sum((coef - center) ** 2), rel=1e-14)

    def f(c):
        return 0.5 * lam * np.sum((c.reshape(2, 5) - center) ** 2)

    num = np.array([(f(coef.ravel() + h) - f(coef.ravel() - h)) / 2e-6 for h in np.eye(10) * 1e-6])
    np.testing.assert_allclose(g[:10] - gc.ravel(), num, atol=1e-7)
    np.testing.assert_array_equal(g[10:], gb)
    np.testing.assert_array_equal(
        penalised(1.5, gc, gb, coef, lam, True)[1], penalised(1.5, gc, gb, coef, lam, True, 0 * coef)[1]
    )


@pytest.mark.parametrize("C_classes", [2, 3])
def test_a_tiny_C_gives_the_centre(C_classes):
    """C 1e-6 on paired releases (one-hot inputs): shrunk to naive Bayes, p_θ(c | x) is LDPNaiveBayes's
    (its class prior reweighted) on every clean record of the domain (the data's pull on a coefficient
    is at most n·C = 1.5e-3); shrunk to 0, every coefficient is 0 to the same tolerance."""
    mech = PairedRecordMechanism(KS, C_classes, 2.0)
    X, y = _records(1500, C_classes, 0)
    Xt, yt = mech.release(X, y, rng=np.random.default_rng(1))
    kw = dict(C=1e-6, prior="naive-bayes", encoding="onehot", random_state=0)
    nb_fit = SpreadLogisticRegression(shrink_to="naive-bayes", **kw).fit(Xt, yt, mechanism=mech)
    zero_fit = SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=mech)
    assert (nb_fit.shrink_to_, zero_fit.shrink_to_) == ("naive-bayes", "zero")
    nb = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
    design = Design(ColumnLayout.from_states(KS), "onehot")
    center, _ = naive_bayes_start(nb.class_log_prior_, nb.feature_log_prob_, design)
    np.testing.assert_allclose(nb_fit.coef_, center, atol=3e-3)
    np.testing.assert_allclose(zero_fit.coef_, 0.0, atol=3e-3)
    assert np.abs(center).max() > 0.5  # the two limits differ: the test can tell them apart
    # with the intercept fitted to the same data, the model is naive Bayes's with its class prior
    # reweighted: p(c | x) ∝ p_nb(c | x)·exp(δ_c), δ the intercepts' shift from naive Bayes's
    model = log_class_probs(design.decode(ALL_X).astype(float), nb_fit.coef_, nb_fit.intercept_)
    ref = nb.predict_log_proba(ALL_X)
    _, b_nb = naive_bayes_start(nb.class_log_prior_, nb.feature_log_prob_, design)
    delta = nb_fit.intercept_ - b_nb
    delta = np.concatenate([[0.0], delta]) if C_classes == 2 else delta  # two classes: class 1's log-odds
    expected = ref + delta - np.logaddexp.reduce(ref + delta, axis=1, keepdims=True)
    np.testing.assert_allclose(model, expected, atol=0.01)  # coefficients within 3e-3 of the centre, 4 attributes


# the fixed point: spread's tiny fixture (tests/test_spread.py), three 3-state attributes by RR, RR labels
D, K = 3, 3
PRIOR0 = np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6], [0.4, 0.4, 0.2]])
ALL3 = np.array(list(itertools.product(range(K), repeat=D)))


def _penalised_mle(Xt, yt, rm, center, C):
    """argmax of Σ_n log Σ_{c,x} p(c̃|c) p(x̃|x) p_θ(c|x) p(x) − ‖w − centre‖²/(2C), by enumeration
    (Barber eq 47 with the penalty), inputs s/(k − 1)."""
    P = rm.fields[0].mechanism.matrix
    log_noise = np.sum(np.log(P[Xt[:, None, :], ALL3[None, :, :]]), axis=2)
    log_px = np.sum(np.log(PRIOR0[np.arange(D), ALL3]), axis=1)
    L = np.log(rm.label.matrix)[yt]

    def nll(v):
        z = ALL3 / (K - 1) @ v[:D] + v[D]
        logp_c = np.stack([-np.logaddexp(0, z), -np.logaddexp(0, -z)], axis=1)
        terms = log_noise[:, :, None] + log_px[None, :, None] + logp_c[None] + L[:, None, :]
        return -logsumexp(terms.reshape(len(yt), -1), axis=1).sum() + np.sum((v[:D] - center) ** 2) / (2 * C)

    res = minimize(nll, np.zeros(D + 1), method="BFGS")
    assert np.max(np.abs(res.jac)) < 1e-2, res  # stationary (BFGS may stop on precision loss there)
    return res.x


def test_em_fixed_point_is_the_penalised_mle_at_the_naive_bayes_centre():
    """Spread-EM with shrink_to="naive-bayes" (unit inputs: the centre is naive Bayes's weighted
    least-squares projection) lands on the brute-force maximiser of the penalised noisy likelihood
    at that centre: the mean of 4 seeds within 0.25 per coordinate (4 s.e. of the Monte Carlo
    scatter measured on this fixture, tests/test_spread.py), while the maximiser at 0 is further
    than that from it."""
    rng = np.random.default_rng(11)
    rm = RecordMechanism(RandomizedResponse(K, 0.3), RandomizedResponse(2, 0.2), n_features=D)
    X = np.stack([rng.choice(K, size=4000, p=PRIOR0[d]) for d in range(D)], axis=1)
    p1 = 1 / (1 + np.exp(-(X / (K - 1) @ np.array([2.5, -2.0, 1.5]) - 0.3)))
    y = (rng.random(4000) < p1).astype(int)
    Xt, yt = rm.release(X, y, rng=rng)
    nb = LDPNaiveBayes().fit(Xt, yt, mechanism=rm)
    center = naive_bayes_start(
        nb.class_log_prior_, nb.feature_log_prob_, Design(ColumnLayout.from_states((K,) * D), "unit")
    )[0][0]
    C = 0.002
    want = _penalised_mle(Xt, yt, rm, center, C)
    at_zero = _penalised_mle(Xt, yt, rm, np.zeros(D), C)
    assert np.max(np.abs(want - at_zero)) > 0.5
    kw = dict(C=C, encoding="unit", prior=CategoricalPrior(PRIOR0), shrink_to="naive-bayes")
    fits = [SpreadLogisticRegression(random_state=seed, **kw).fit(Xt, yt, mechanism=rm) for seed in range(4)]
    got = np.mean([np.r_[f.coef_[0], f.intercept_] for f in fits], axis=0)
    assert np.max(np.abs(got - want)) < 0.25, (got, want, at_zero)


def test_auto_shrinks_to_naive_bayes_wherever_it_can_be_built():
    """shrink_to="auto" is naive Bayes wherever it can be built (any encoding, any prior), else 0 (where
    "naive-bayes" cannot be built, with the error it gives: tests/test_spread_start.py)."""
    paired = PairedRecordMechanism(KS, 2, 2.0)
    Pt, pt = paired.release(*_records(200, 2, 0), rng=np.random.default_rng(0))
    kw = dict(max_iter=2, burn_in=1, n_average=1, random_state=0, shrink_to="auto")
    auto = lambda **k: SpreadLogisticRegression(**kw, **k).fit(Pt, pt, mechanism=paired).shrink_to_  # noqa: E731
    assert auto(encoding="onehot") == auto(encoding="unit") == auto(prior="learned") == "naive-bayes"
    assert auto(fit_intercept=False) == "zero"


def test_the_cv_passes_shrink_to_to_its_fits():
    from fedrr.estimators.spread._cv import SHARED

    assert "shrink_to" in SHARED
    assert SpreadLogisticRegressionCV(shrink_to="naive-bayes")._spread(C=2.0).shrink_to == "naive-bayes"
