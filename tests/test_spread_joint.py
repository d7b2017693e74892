"""Spread-EM with a joint prior: the empirical distribution of public clean rows
(``EmpiricalPrior``). The E-step's chain samples the exact posterior over the public rows, the
held-out marginal is exact, and bad rows are refused at the boundary."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression
from fedrr.estimators.spread._design import ColumnLayout, Design
from fedrr.estimators.spread._estep import Shard
from fedrr.estimators.spread._priors._joint import joint_prior
from fedrr.mechanisms import EmpiricalPrior, RandomizedResponse, RecordMechanism, UnaryEncoding

K = 3
ROWS = np.array([[0, 0, 1], [0, 0, 1], [2, 2, 0], [2, 1, 0], [1, 1, 1], [0, 2, 2], [2, 2, 0], [1, 0, 2]])
RM = RecordMechanism(
    [RandomizedResponse(K, 0.3), UnaryEncoding(K, 1.0), RandomizedResponse(K, 0.4)],
    RandomizedResponse(2, 0.2),
    n_sampled=2,
)


def _posterior(xt, ct, w, b):
    """p(row | x̃, c̃) over the distinct public rows, by enumeration: p(x) = multiplicity / M."""
    distinct, mult = np.unique(ROWS, axis=0, return_counts=True)
    lp = np.log(mult / len(ROWS))
    for j, f in enumerate(RM.fields):
        if not np.isnan(xt[j]):
            lp = lp + f.mechanism.log_likelihood_matrix(np.array([int(xt[j])]))[0][distinct[:, j]]
    z = (distinct / (K - 1)) @ w + b
    p1 = 1 / (1 + np.exp(-z))
    L = RM.label.matrix[ct]
    lp = lp + np.log(L[0] * (1 - p1) + L[1] * p1)
    p = np.exp(lp - lp.max())
    return distinct, p / p.sum()


@pytest.mark.parametrize("xt", [[2.0, np.nan, 1.0], [np.nan, 0b101, 0.0]])
def test_chain_samples_the_exact_posterior_over_the_public_rows(xt):
    """With a joint prior the chain's stationary law is p(x | x̃, c̃) over the public rows (the
    unreleased attribute imputed with the released one's co-occurrence, not independently)."""
    xt = np.array(xt)
    ct, w, b = 1, np.array([1.5, -2.0, 0.7]), 0.2
    RM.validate_release(xt[None], np.array([ct]))
    design = Design(ColumnLayout.from_mechanism(RM), "unit")
    n = 6000
    shard = Shard(0, RM, np.tile(xt, (n, 1)), np.full(n, ct), design, 2, 5, 1)
    shard.set_prior(0, joint_prior(design.layout, EmpiricalPrior(ROWS)))
    for it in range(8):
        out = shard.estep(0, it, w[None], np.array([b]), 1)
    assert 0 < out["accepted"] <= out["proposed"] == n
    distinct, px = _posterior(xt, ct, w, b)
    state = np.asarray(shard.state[0]).astype(int)
    assert {tuple(s) for s in state} <= {tuple(r) for r in distinct}  # only public rows
    counts = np.array([np.all(state == r, axis=1).sum() for r in distinct])
    keep = px * n >= 5
    stat = np.sum((counts[keep] - n * px[keep]) ** 2 / (n * px[keep]))
    assert chi2.sf(stat, keep.sum() - 1) > 1e-3, (counts, n * px)


def test_held_out_marginal_is_exact():
    """Per record, against the sum over public rows; repeated releases (computed once per
    pattern) come back in their records' order."""
    prior = joint_prior(ColumnLayout.from_mechanism(RM), EmpiricalPrior(ROWS))
    X = np.array(
        [[2.0, np.nan, 1.0], [np.nan, 0b011, 0.0], [0.0, np.nan, 1.0], [2.0, np.nan, 1.0], [np.nan, 0b011, 0.0]]
    )
    released = ~np.isnan(X)
    got = prior.log_marginal(RM, X, released)
    for i, x in enumerate(X):
        p = 0.0
        for row in ROWS:
            lik = 1.0
            for j, f in enumerate(RM.fields):
                if released[i, j]:
                    lik *= np.exp(f.mechanism.log_likelihood_matrix(np.array([int(x[j])]))[0][row[j]])
            p += lik / len(ROWS)
        assert got[i] == pytest.approx(np.log(p), rel=1e-12)


def test_bad_public_rows_are_refused():
    with pytest.raises(ValidationError, match="prior.rows"):
        EmpiricalPrior(np.array([[0, 1, -1]]))
    with pytest.raises(ValidationError, match="prior.rows"):
        EmpiricalPrior(np.array([[0, 1.5, 1]]))
    with pytest.raises(ValidationError, match="prior.rows"):
        EmpiricalPrior(np.array([[0, np.nan, 1]]))
    with pytest.raises(ValidationError, match="prior.rows"):
        EmpiricalPrior(np.array([0, 1, 1]))
    layout = ColumnLayout.from_mechanism(RM)
    with pytest.raises(ValidationError, match="3 columns"):
        joint_prior(layout, EmpiricalPrior(ROWS[:, :2]))
    with pytest.raises(ValidationError, match=r"column 1 holds states outside \[0, 2\]"):
        joint_prior(layout, EmpiricalPrior(np.array([[0, 3, 1]])))


def test_a_fit_with_public_rows_keeps_them_as_its_prior(small_rr_release):
    """The prior is fixed: the fitted marginals are the public rows' own frequencies."""
    Xt, yt, rm = small_rr_release
    rows = np.random.default_rng(0).integers(0, 4, size=(50, 5))
    est = SpreadLogisticRegression(prior=EmpiricalPrior(rows), random_state=0, max_iter=6, burn_in=3)
    est.fit(Xt, yt, mechanism=rm)
    assert np.all(np.isfinite(est.coef_))
    for j in range(5):
        np.testing.assert_allclose(est.prior_["categorical"][j], np.bincount(rows[:, j], minlength=4) / 50)


def test_kept_and_blockwise_pattern_cdfs_draw_the_same_rows(monkeypatch):
    """The pattern CDFs a shard keeps for the fit, and those it builds per call 512 records at a
    time when keeping them would take too much memory, give the same draws for the same seed."""
    from fedrr.estimators.spread._priors._joint import PatternSampler

    rng = np.random.default_rng(3)
    X = rng.integers(0, K, size=(1500, 3)).astype(float)
    yt = rng.integers(0, 2, 1500)
    Xt, yt = RM.release(X.astype(int), yt, rng=rng)
    design = Design(ColumnLayout.from_mechanism(RM), "unit")
    prior = joint_prior(design.layout, EmpiricalPrior(ROWS))
    draws = []
    for big in (False, True):
        if big:
            monkeypatch.setattr(PatternSampler, "size", staticmethod(lambda X, released, n_rows: 2**40))
        shard = Shard(0, RM, Xt, yt, design, 2, 5, 1)
        draws.append(shard._propose(np.random.default_rng(9), prior, 3))
        assert (shard._joint is None) == big
    np.testing.assert_array_equal(draws[0], draws[1])
