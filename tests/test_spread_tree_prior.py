"""``prior="tree"``: a Chow–Liu tree fitted to paired releases of two pairs per record, for the direct
solver (``fedrr.estimators.spread._priors._tree``). Its probabilities, pair margins, draws and cell
weights against enumeration; the two-pair likelihood under it against the exact one written out by
hand; the tree recovered from releases of a known tree; releases it cannot fit refused, naming the
parameter."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import expit

import fedrr.estimators.spread._estimator as estimator_module
from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread._design import ColumnLayout
from fedrr.estimators.spread._direct import TwoPairLikelihood
from fedrr.estimators.spread._paired import PairedView
from fedrr.estimators.spread._priors._tree import TABLE_PSEUDO_COUNT, fixed_tree, pair_tables
from fedrr.mechanisms import PairedRecordMechanism

KS = (3, 4, 2, 3, 2)
PARENT = np.array([-1, 0, 1, 1, 0])  # 0 → 1 → {2, 3}; 0 → 4


def _tree(M: int):
    """A random tree on PARENT: one (M 1) or a mixture of M over the same structure."""
    rng = np.random.default_rng(M)
    log_cond = []
    for v, k in enumerate(KS):
        rows = 1 if PARENT[v] < 0 else KS[PARENT[v]]
        log_cond.append(np.log(rng.dirichlet(np.full(k, 0.7), size=(M, rows))))
    layout = ColumnLayout.from_mechanism(PairedView(PairedRecordMechanism(KS, 2, 4.0, n_sampled=2)))
    return fixed_tree(layout, PARENT, log_cond, log_w=np.log(rng.dirichlet(np.ones(M))))


def _enumerated(tree):
    X = np.array(list(itertools.product(*[range(k) for k in KS])))
    return X, np.exp(tree.log_prob(X))


@pytest.mark.parametrize("M", [1, 3])
def test_probabilities_margins_and_pair_margins_are_the_enumerated_ones(M):
    tree = _tree(M)
    X, p = _enumerated(tree)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    for j, k in itertools.combinations(range(len(KS)), 2):
        want = np.zeros((KS[j], KS[k]))
        np.add.at(want, (X[:, j], X[:, k]), p)
        np.testing.assert_allclose(tree.pair_margin(j, k), want, atol=1e-12)
    for d, k in enumerate(KS):
        np.testing.assert_allclose(tree.disc[d, :k], np.bincount(X[:, d], p, minlength=k), atol=1e-12)


@pytest.mark.parametrize("M", [1, 3])
def test_draws_and_cell_weights_give_the_conditional_expectations(M):
    """200,000 draws: the pair frequencies within 4.5 standard errors of the pair margins, and the
    cell-weighted mean of f(x) = σ(a·x) with the cell set within 0.01 of E[f | x_j = s, x_k = t]."""
    tree = _tree(M)
    X, p = _enumerated(tree)
    n = 200_000
    D = tree.draws(n, np.random.default_rng(1))
    a = np.array([0.8, -0.5, 1.2, 0.3, -1.0])
    for j, k in [(0, 1), (2, 3), (1, 4), (3, 4)]:
        m = tree.pair_margin(j, k)
        freq = np.zeros_like(m)
        np.add.at(freq, (D[:, j], D[:, k]), 1.0 / n)
        assert np.max(np.abs(freq - m) / np.sqrt(m * (1 - m) / n)) < 4.5
        W = tree.cell_weights(D, j, k)
        np.testing.assert_allclose(W.sum(axis=2), m, atol=0.01)
        for s, t in itertools.product(range(KS[j]), range(KS[k])):
            Ds = D.copy()
            Ds[:, j], Ds[:, k] = s, t
            got = W[s, t] @ expit(Ds @ a) / W[s, t].sum()
            at = (X[:, j] == s) & (X[:, k] == t)
            want = p[at] @ expit(X[at] @ a) / p[at].sum()
            assert got == pytest.approx(want, abs=0.01)


def _chain_releases(n: int, seed: int, eps: float):
    """Five attributes on the tree 0 → 1 → {2, 3}, 0 → 4, each child equal to its parent's state
    (mod its size) with probability 0.8, else uniform; a label from a logistic model on 2 and 3."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, len(KS)), np.int64)
    X[:, 0] = rng.integers(0, KS[0], n)
    for v in (1, 2, 3, 4):
        keep = rng.random(n) < 0.8
        X[:, v] = np.where(keep, X[:, PARENT[v]] % KS[v], rng.integers(0, KS[v], n))
    y = (rng.random(n) < expit(1.5 * (X[:, 2] == 1) - 1.0 * (X[:, 3] == 2) - 0.2)).astype(int)
    mech = PairedRecordMechanism(KS, 2, eps, n_sampled=2)
    Xt, yt = mech.release(X, y, rng=rng)
    return Xt, yt, mech


@pytest.mark.parametrize("prior", ["tree", "class-tree"])
def test_the_tree_is_recovered_from_releases_of_a_known_tree(prior):
    """30,000 records, two pairs each at ε 3 per pair: the fitted tree's edges are the true ones
    (also given the class, where the label depends on two leaves)."""
    Xt, yt, mech = _chain_releases(30_000, 0, 6.0)
    est = SpreadLogisticRegression(prior=prior, encoding="onehot", random_state=0, max_iter=2)
    est.fit(Xt, yt, mechanism=mech)
    assert est.solver_ == "direct"
    parent = est.prior_["tree"]["parent"]
    edges = {frozenset((v, int(a))) for v, a in enumerate(parent) if a >= 0}
    assert edges == {frozenset(e) for e in [(0, 1), (1, 2), (1, 3), (0, 4)]}


@pytest.mark.parametrize("prior", ["tree", "class-tree"])
def test_the_two_pair_likelihood_under_a_tree_is_the_exact_one(prior):
    """Every x enumerated: −log Π_i Σ_x Σ_c p(x) p_θ(c | x) P(v_ij | x_j, c) P(v_ik | x_k, c) by hand
    under the fitted tree, to 1e-9 relative."""
    Xt, yt, mech = _chain_releases(1500, 2, 4.0)
    est = SpreadLogisticRegression(prior=prior, encoding="onehot", random_state=0, max_iter=2)
    est.fit(Xt, yt, mechanism=mech)
    lik = TwoPairLikelihood([(PairedView(mech), np.arange(len(Xt)))], Xt, est.design_, est._prior_state, 2, 512, 0)
    X, px = _enumerated(est._prior_state)
    rng = np.random.default_rng(3)
    coef, b = rng.normal(size=est.coef_.shape) * 0.7, rng.normal(size=est.intercept_.shape) * 0.7
    p1 = expit(est.design_.decode(X).astype(float) @ coef[0] + b[0])
    pxc = np.stack([px * (1 - p1), px * p1], axis=1)
    want = 0.0
    for row in Xt:
        j, k = np.flatnonzero(~np.isnan(row))
        Lj = np.exp(mech.pair_log_likelihood(j, row[j : j + 1]))[0]
        Lk = np.exp(mech.pair_log_likelihood(k, row[k : k + 1]))[0]
        want -= np.log(np.sum(pxc * Lj[X[:, j]] * Lk[X[:, k]]))
    assert lik.value_grad(coef, b)[0] == pytest.approx(want, rel=1e-9)


def test_releases_the_tree_cannot_fit_are_refused_naming_the_parameter():
    Xt, yt, mech = _chain_releases(400, 1, 4.0)
    with pytest.raises(ValidationError, match="solver.*'em' does not fit prior='tree'"):
        SpreadLogisticRegression(prior="tree", solver="em").fit(Xt, yt, mechanism=mech)
    one = PairedRecordMechanism(KS, 2, 4.0, n_sampled=1)
    X1, y1 = one.release(np.zeros((400, len(KS)), np.int64), np.zeros(400, int), rng=np.random.default_rng(0))
    with pytest.raises(ValidationError, match="prior.*'tree' needs releases of two attributes per record"):
        SpreadLogisticRegression(prior="tree").fit(X1, y1, mechanism=one)


def test_pair_table_em_reaches_the_penalised_maximum():
    """SQUAREM's pair table satisfies the penalised likelihood's fixed point (Lagrange: q ⊙ ∇ = (N + a) q),
    and scores at least plain EM run for 5,000 steps from the same start, on reports of one pair at ε 1."""
    rng = np.random.default_rng(5)
    mech = PairedRecordMechanism((4, 3), 2, 2.0, n_sampled=2)
    q_true = rng.dirichlet(np.ones(24)).reshape(4, 3, 2)
    cells = rng.choice(24, size=3000, p=q_true.ravel())
    X, y = np.stack([cells // 6, (cells // 2) % 3], axis=1), cells % 2
    Xt, _ = mech.release(X, y, rng=rng)
    rm = PairedView(mech, [np.full((4, 2), 0.125), np.full((3, 2), 1 / 6)])
    pairs, cnt = np.unique(Xt[:, :2], axis=0, return_counts=True)
    Lj, Lk = (np.exp(rm.paired.pair_log_likelihood(d, pairs[:, d])) for d in (0, 1))
    units, start = {(0, 1): (cnt.astype(float), Lj, Lk)}, {(0, 1): np.full((4, 3, 2), 1 / 24)}
    q = pair_tables(units, start)[(0, 1)].ravel()
    L = (Lj[:, :, None, :] * Lk[:, None, :, :]).reshape(cnt.size, -1)
    N, a, q0 = cnt.sum(), TABLE_PSEUDO_COUNT * 24, start[(0, 1)].ravel()

    def objective(q):
        return cnt @ np.log(L @ q) + a * q0 @ np.log(q)

    grad = L.T @ (cnt / (L @ q)) + a * q0 / q
    np.testing.assert_allclose(q * grad, (N + a) * q, rtol=1e-5, atol=1e-3)  # reached: 3e-7 and 3e-5
    plain = q0.copy()
    for _ in range(5000):
        plain = (plain * (L.T @ (cnt / (L @ plain))) + a * q0) / (N + a)
    assert objective(q) >= objective(plain) - 1e-6
    assert np.abs(q - plain).max() < 1e-3


def test_a_cv_builds_each_folds_likelihood_once_for_all_its_cs(monkeypatch):
    """The CV's fits on one fold share the tree and its two-pair likelihood across the Cs: 3 folds × 2 Cs
    build 3 likelihoods for the selection (and one for the refit on all releases), and the refit's
    numbers are those of a lone fit at its C."""
    built = []
    original = estimator_module.pair_likelihood

    def counted(*args, **kwargs):
        built.append(args[1].shape[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(estimator_module, "pair_likelihood", counted)
    Xt, yt, mech = _chain_releases(1500, 4, 6.0)
    kw = {"Cs": [0.1, 1.0], "cv": 3, "prior": "tree", "solver": "direct", "encoding": "onehot", "random_state": 0}
    cv = SpreadLogisticRegressionCV(**kw).fit(Xt, yt, mechanism=mech)
    selection = [n for n in built if n < 1500]
    assert len(selection) == 3  # one per fold (6 without the sharing)
    lone = SpreadLogisticRegression(C=cv.C_, prior="tree", encoding="onehot", random_state=0)
    lone.fit(Xt, yt, mechanism=mech)  # builds its own: the refit's numbers are a lone fit's
    np.testing.assert_array_equal(cv.estimator_.coef_, lone.coef_)
