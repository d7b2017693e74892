"""Spread-EM over paired releases (``PairedRecordMechanism``): the E-step samples the exact posterior
p(x, y | x̃) ∝ Π_j P(v̂_j | x_j, y) p(x) p_θ(y | x) (checked against enumeration), fits recover the
clean model as ε grows and N grows, and executors agree bit for bit."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import chi2

from fedrr.datasets import make_logistic_discrete, make_logistic_multiclass_discrete
from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression
from fedrr.estimators.spread._design import ColumnLayout, Design
from fedrr.estimators.spread._estep import Shard
from fedrr.estimators.spread._paired import PairedView, pair_tables, paired_view
from fedrr.estimators.spread._priors._factorised import given_prior
from fedrr.estimators.spread._priors._mixture import naive_bayes_prior
from fedrr.mechanisms import CategoricalPrior, PairedRecordMechanism
from fedrr.parallel import SerialExecutor, ThreadExecutor

KS = (2, 3)
PRIOR0 = np.array([[0.3, 0.7, 0.0], [0.5, 0.2, 0.3]])  # zero-padded past column 0's two states
ALL_X = np.array(list(itertools.product(*[range(k) for k in KS])))  # (6, 2) every clean record


def _logp_class(x, coef, b):
    """log p_θ(c | x) for unit-encoded x (n, 2): (n, C), one logit row for two classes."""
    z = (x / (np.array(KS) - 1.0)) @ coef.T + b
    if coef.shape[0] == 1:
        z = np.concatenate([np.zeros((len(x), 1)), z], axis=1)
    return z - logsumexp(z, axis=1, keepdims=True)


def _posterior_enum(mech, xt, coef, b, prior):
    """Exact p(x, c | x̃) over all 6 × C (x, c), by enumeration: Π_j P(v̂_j | x_j, c) p(x) p_θ(c | x)."""
    C = mech.n_classes
    lp = _logp_class(ALL_X, coef, b) + np.sum(np.log(prior[np.arange(2), ALL_X]), axis=1)[:, None]
    for j in range(2):
        if not np.isnan(xt[j]):
            L = mech.pair_log_likelihood(j, np.array([xt[j]]))[0]  # (k_j, C)
            lp = lp + L[ALL_X[:, j]]
    assert lp.shape == (len(ALL_X), C)
    return np.exp(lp - logsumexp(lp))


def _release(mech, seed):
    """One paired release of the record (1, 2, y = 1) (y = 2 for three classes)."""
    y = np.array([min(1 + (mech.n_classes > 2), mech.n_classes - 1)])
    return mech.release(np.array([[1, 2]]), y, rng=np.random.default_rng(seed))[0][0]


CASES = {
    # (oracle, n_sampled, classes, E-step path)
    "rr-m1-compiled": ("rr", 1, 2, "compiled"),
    "rr-m2-compiled": ("rr", 2, 2, "compiled"),
    "oue-m2-compiled": ("oue", 2, 2, "compiled"),
    "olh-m1-compiled": ("olh", 1, 2, "compiled"),
    "rr-m2-numpy": ("rr", 2, 2, "numpy"),
    "rr-m2-naive-bayes": ("rr", 2, 2, "mixture"),
    "rr-m1-3class-compiled": ("rr", 1, 3, "compiled"),
    "oue-m2-3class-numpy": ("oue", 2, 3, "numpy"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_paired_chain_samples_the_exact_posterior(case):
    """A shard's E-step chain on paired releases has p(x | x̃) = Σ_c p(x, c | x̃) as stationary law
    (χ² over the 6 records of n independent chains, level 1e-3) and its responsibilities are exactly
    p(c | x, x̃) ∝ p_θ(c | x) Π_j P(v̂_j | x_j, c) (to float32 inputs); their mean estimates p(c | x̃)
    within 4.5 Monte Carlo standard errors — compiled kernel, numpy path and the naive-Bayes prior's
    exact mixture sampler, RR / OUE / OLH, one or two pairs, two or three classes."""
    oracle, m, C, path = CASES[case]
    mech = PairedRecordMechanism(KS, C, 1.5, n_sampled=m, oracle=oracle)
    xt = _release(mech, seed=3)
    rng = np.random.default_rng(0)
    coef = np.array([[1.5, -2.0]]) if C == 2 else np.array([[0.0, 0.0], [1.5, -2.0], [-1.0, 1.0]])
    b = np.array([0.2]) if C == 2 else np.array([0.0, 0.3, -0.2])
    # a view with non-uniform w (any w is exact; w only shapes the proposal)
    tabs = [rng.dirichlet(np.ones(k * C)).reshape(k, C) for k in KS]
    view = PairedView(mech, tabs)
    design = Design(ColumnLayout.from_mechanism(view), "unit")
    n = 6000  # independent chains for the same release
    X = np.tile(xt, (n, 1))
    shard = Shard(0, view, X, np.full(n, np.nan), design, C, 5, 1)
    assert shard.compiled
    prior = PRIOR0
    if path == "mixture":
        nb = naive_bayes_prior(X, np.zeros(n, np.int64), [(view, np.arange(n))], design.layout)
        prior = None
        shard.set_prior(0, nb)
    else:
        shard.compiled = path == "compiled"
        shard.set_prior(0, given_prior(design.layout, [CategoricalPrior(p[:k]) for p, k in zip(PRIOR0, KS)]))
    for it in range(12):  # burn in: independence sampler, geometric mixing
        out = shard.estep(0, it, coef, b, 1)
    assert 0 < out["accepted"] <= out["proposed"] == n
    states = (shard.state[0].T if shard.compiled and path != "mixture" else shard.state[0]).astype(int)
    if prior is None:  # the naive-Bayes prior's p(x) = Σ_c π_c Π_d p(x_d | c): enumerate it too
        joint = np.exp(nb.log_pi[None, :] + nb.log_p[0].T[ALL_X[:, 0]] + nb.log_p[1].T[ALL_X[:, 1]])  # (6, C_nb)
        logpx = np.log(joint.sum(axis=1))
        lp = _logp_class(ALL_X, coef, b) + logpx[:, None]
        for j in range(2):
            if not np.isnan(xt[j]):
                lp = lp + mech.pair_log_likelihood(j, np.array([xt[j]]))[0][ALL_X[:, j]]
        post = np.exp(lp - logsumexp(lp))
    else:
        post = _posterior_enum(mech, xt, coef, b, prior)
    idx = np.ravel_multi_index(states.T, KS)
    px = post.sum(axis=1)
    counts = np.bincount(idx, minlength=len(ALL_X))
    keep = px * n >= 5
    stat = np.sum((counts[keep] - n * px[keep]) ** 2 / (n * px[keep]))
    assert chi2.sf(stat, keep.sum() - 1) > 1e-3, (counts, n * px)
    np.testing.assert_allclose(out["stats"]["counts"].sum(axis=1), n)
    # responsibilities: p(c | x, x̃) exactly at the kept states
    cond = post / post.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(shard.R[0], cond[idx], rtol=1e-5, atol=1e-7)
    # and their mean is p(c | x̃) within 4.5 standard errors of the mean of n independent chains
    pc = post.sum(axis=0)
    se = shard.R[0].std(axis=0) / np.sqrt(n) + 1e-12
    assert np.all(np.abs(shard.R[0].mean(axis=0) - pc) < 4.5 * se + 1e-9), (shard.R[0].mean(axis=0), pc, se)


def test_importance_e_step_weights_target_the_paired_posterior():
    """Barber §5.1 on paired releases: x ~ ρ, c ~ ∝ exp(Σ_j t_j(x_j, c)), weights ∝ p_θ(c | x) times that
    term's normaliser: with S = 400 draws per record the weighted frequencies of (x, c) match the
    enumeration (self-normalisation bias O(1/S); 200 records of one release: s.e. ≤ 0.002 per cell)."""
    mech = PairedRecordMechanism(KS, 2, 1.5, n_sampled=2, oracle="rr")
    xt = _release(mech, seed=4)
    coef, b = np.array([[1.5, -2.0]]), np.array([0.2])
    view = PairedView(mech)
    design = Design(ColumnLayout.from_mechanism(view), "unit")
    n, S = 200, 400
    shard = Shard(0, view, np.tile(xt, (n, 1)), np.full(n, np.nan), design, 2, 5, 1, mode="importance")
    shard.set_prior(0, given_prior(design.layout, [CategoricalPrior(p[:k]) for p, k in zip(PRIOR0, KS)]))
    shard.estep(0, 0, coef, b, S)
    x = design.decode(ALL_X)
    idx = np.array([np.flatnonzero((x == z).all(axis=1))[0] for z in shard.Z[0]])
    c = shard.R[0].argmax(axis=1)
    got = np.zeros((len(ALL_X), 2))
    np.add.at(got, (idx, c), shard.w[0])
    np.testing.assert_allclose(got / n, _posterior_enum(mech, xt, coef, b, PRIOR0), atol=0.02)


def test_shard_label_term_is_refused_for_paired_releases():
    """Code that would read a per-record label term (record releases' log p(c̃ | c)) fails loudly."""
    mech = PairedRecordMechanism(KS, 2, 1.0)
    Xt, _ = mech.release(np.array([[1, 2]] * 4), np.array([0, 1, 0, 1]), rng=np.random.default_rng(0))
    shard = Shard(0, mech, Xt, np.full(4, np.nan), Design(ColumnLayout.from_states(KS), "unit"), 2, 0, 1)
    with pytest.raises(ValidationError, match="label_terms"):
        shard.yterm  # noqa: B018


def test_pair_tables_are_the_maximum_likelihood_pair_frequencies():
    """At ε = 30 (reports ≈ the pairs) the pair tables are the clean pair frequencies to 1e-3; the
    naive-Bayes view's w_j is their conditional p(y | x_j)."""
    rng = np.random.default_rng(2)
    ds = make_logistic_discrete(4000, KS, np.array([1.0, -1.0]), rng=rng)
    mech = PairedRecordMechanism(KS, 2, 30.0, n_sampled=2)
    Xt, _ = mech.release(ds.X, ds.y, rng=rng)
    for j, t in enumerate(pair_tables(mech, Xt)):
        clean = np.zeros((KS[j], 2))
        np.add.at(clean, (ds.X[:, j], ds.y), 1.0 / len(ds.y))
        np.testing.assert_allclose(t, clean, atol=1e-3)
    view = paired_view(mech, Xt)
    np.testing.assert_allclose(
        np.exp(view.fields[0].mechanism.log_w), view.tables[0] / view.tables[0].sum(1, keepdims=True), atol=2e-3
    )


# ------------------------------------------------------------------------------ consistency
COEF = np.array([2.0, -1.5, 1.0])
KC = (3, 3, 2)


def _data(n, seed):
    return make_logistic_discrete(n, KC, COEF, -0.3, rng=np.random.default_rng(seed))


def _fit(ds, eps, m, seed, prior="learned", **kw):
    mech = PairedRecordMechanism(KC, 2, eps, n_sampled=m)
    Xt, yt = mech.release(ds.X, ds.y, rng=np.random.default_rng(seed + 100))
    # the data's model is linear in s/(k − 1): the clean fit's encoding, pinned
    est = SpreadLogisticRegression(C=np.inf, prior=prior, random_state=seed, **{"encoding": "unit"} | kw)
    return est.fit(Xt, yt, mechanism=mech)


def _clean(ds):
    return SpreadLogisticRegression(C=np.inf).fit(ds.X / (np.array(KC) - 1.0), ds.y)


@pytest.mark.parametrize("m,prior,tol", [(1, "learned", 0.2), (3, "learned", 0.2), (1, "naive-bayes", 0.3)])
def test_paired_fit_recovers_the_clean_fit_at_high_epsilon(m, prior, tol):
    """ε = 20 (pair reports ≈ the pairs): the paired spread fit is within ``tol`` per coordinate of the
    clean logistic fit on the same N = 20,000 records (the parameters' own s.e. at this N, one attribute
    in three sampled, is ≈ 0.06-0.1). The naive-Bayes prior is a *fixed* joint p(x) that is wrong here
    (these features are independent; its mixture makes them dependent through the class), so its fit is
    the MLE under a misspecified prior: measured 7-10 % shrinkage (largest gap 0.22), hence 0.3."""
    ds = _data(20000, 0)
    est, clean = _fit(ds, 20.0, m, 0, prior), _clean(ds)
    gap = np.r_[est.coef_[0] - clean.coef_[0], est.intercept_ - clean.intercept_]
    assert np.max(np.abs(gap)) < tol, (est.coef_, est.intercept_, clean.coef_, clean.intercept_)


def test_paired_error_falls_with_n():
    """ε = 4, one pair per person: the parameter error against the truth falls by ≥ 2× from N = 2,000 to
    N = 32,000 (√16 = 4× for a consistent estimator), mean over 2 seeds."""

    def err(n):
        return np.mean(
            [
                np.linalg.norm(np.r_[f.coef_[0] - COEF, f.intercept_ + 0.3])
                for f in (_fit(_data(n, s), 4.0, 1, s) for s in range(2))
            ]
        )

    small, large = err(2000), err(32000)
    assert large < small / 2, (small, large)


def test_multiclass_paired_fit_recovers_the_clean_fit():
    """Three classes, ε = 20, every pair released: within 0.3 of the clean softmax fit."""
    coef = np.array([[0.0, 0.0, 0.0], [1.5, -1.0, 0.5], [-1.0, 1.5, 1.0]])
    ds = make_logistic_multiclass_discrete(20000, KC, coef, rng=np.random.default_rng(1))
    mech = PairedRecordMechanism(KC, 3, 20.0, n_sampled=3)
    Xt, yt = mech.release(ds.X, ds.y, rng=np.random.default_rng(2))
    est = SpreadLogisticRegression(encoding="unit", C=np.inf, random_state=0).fit(Xt, yt, mechanism=mech)
    clean = SpreadLogisticRegression(encoding="unit", C=np.inf).fit(ds.X / (np.array(KC) - 1.0), ds.y)
    zc = (ALL3 / (np.array(KC) - 1.0)) @ clean.coef_.T + clean.intercept_
    ze = (ALL3 / (np.array(KC) - 1.0)) @ est.coef_.T + est.intercept_
    # compare the models, not the (shift-invariant) parameters: centred logits over every record
    zc, ze = zc - zc.mean(axis=1, keepdims=True), ze - ze.mean(axis=1, keepdims=True)
    assert np.max(np.abs(zc - ze)) < 0.3, (est.coef_, clean.coef_)


ALL3 = np.array(list(itertools.product(*[range(k) for k in KC])))


@pytest.mark.parametrize("e_step", ["mcmc", "importance"])
def test_threads_give_the_serial_result_on_paired_releases(e_step):
    """ThreadExecutor gives the serial result bit for bit on paired releases (as for record releases)."""
    ds = _data(3000, 5)
    mech = PairedRecordMechanism(KC, 2, 2.0, n_sampled=1, oracle="oue")
    Xt, yt = mech.release(ds.X, ds.y, rng=np.random.default_rng(6))
    kw = dict(random_state=4, max_iter=8, shard_size=500, e_step=e_step)
    serial = SpreadLogisticRegression(executor=SerialExecutor(), **kw).fit(Xt, yt, mechanism=mech)
    for ex in (ThreadExecutor(2), None):
        threaded = SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=mech)
        np.testing.assert_array_equal(serial.coef_, threaded.coef_)
        np.testing.assert_array_equal(serial.intercept_, threaded.intercept_)


@pytest.mark.ray
@pytest.mark.parametrize("split", [True, False])
def test_ray_gives_the_serial_result_on_paired_releases(split):
    """Ray actors holding the shards (each chain on its own actor, or shards spread over 2 actors) give
    the serial fit bit for bit on paired releases, learned prior included."""
    ray = pytest.importorskip("ray")
    from fedrr.parallel import RayExecutor

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this module
    ds = _data(3000, 7)
    mech = PairedRecordMechanism(KC, 2, 2.0, n_sampled=2)
    Xt, yt = mech.release(ds.X, ds.y, rng=np.random.default_rng(8))
    kw = dict(random_state=3, max_iter=6, burn_in=3, shard_size=700)
    serial = SpreadLogisticRegression(executor=SerialExecutor(), **kw).fit(Xt, yt, mechanism=mech)
    if ray.is_initialized():
        ray.shutdown()
    ex = RayExecutor(num_cpus=2, n_actors=2)
    ex.split_chains = split
    try:
        par = SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=mech)
    finally:
        ex.shutdown()
    np.testing.assert_array_equal(par.coef_, serial.coef_)
    np.testing.assert_array_equal(par.intercept_, serial.intercept_)
    np.testing.assert_array_equal(par.prior_["categorical"][0], serial.prior_["categorical"][0])


def test_per_record_paired_mechanisms_equal_the_shared_one_and_mixed_budgets_work():
    """A per-record list of one paired mechanism gives the shared mechanism's fit bit for bit; a pool of
    two budgets (ε 10 and 20 per person) fits, each group with its own pair tables, within 0.2 of the
    clean fit."""
    ds = _data(6000, 9)
    mech = PairedRecordMechanism(KC, 2, 20.0, n_sampled=3)
    Xt, yt = mech.release(ds.X, ds.y, rng=np.random.default_rng(10))
    kw = dict(C=np.inf, random_state=1, max_iter=30)
    shared = SpreadLogisticRegression(encoding="unit", **kw).fit(Xt, yt, mechanism=mech)
    listed = SpreadLogisticRegression(encoding="unit", **kw).fit(Xt, yt, mechanism=[mech] * len(yt))
    np.testing.assert_array_equal(shared.coef_, listed.coef_)
    low = PairedRecordMechanism(KC, 2, 10.0, n_sampled=3)
    half = np.arange(len(yt)) % 2 == 0
    Xl, _ = low.release(ds.X[half], ds.y[half], rng=np.random.default_rng(11))
    Xm = Xt.copy()
    Xm[half] = Xl
    mixed = SpreadLogisticRegression(encoding="unit", C=np.inf, random_state=1).fit(
        Xm, yt, mechanism=[low if h else mech for h in half]
    )
    clean = _clean(ds)
    gap = np.r_[mixed.coef_[0] - clean.coef_[0], mixed.intercept_ - clean.intercept_]
    assert np.max(np.abs(gap)) < 0.2, (mixed.coef_, clean.coef_)


def test_paired_input_is_checked():
    """A label report where a paired release has none, and a pool mixing paired and record mechanisms,
    are refused before any work."""
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    mech = PairedRecordMechanism(KC, 2, 4.0)
    ds = _data(200, 1)
    Xt, yt = mech.release(ds.X, ds.y, rng=np.random.default_rng(0))
    with pytest.raises(ValidationError, match="y_tilde"):
        SpreadLogisticRegression().fit(Xt, ds.y.astype(float), mechanism=mech)
    rm = RecordMechanism(RandomizedResponse(3, 0.2), None, n_features=3)
    with pytest.raises(ValidationError, match="mixes paired and record"):
        SpreadLogisticRegression().fit(Xt, yt, mechanism=[mech] * 100 + [rm] * 100)


@pytest.mark.parametrize("encoding", ["onehot", "unit", "index"])
@pytest.mark.parametrize("release", ["paired-m2", "paired-3class", "record-rr", "record-clean-label"])
def test_compiled_log_g_equals_the_numpy_composition(encoding, release):
    """The E-step's log g(x) and responsibilities from table lookups (``log_g_lookup``, used when every
    column is discrete) equal decode → product → log-softmax → label term → log-sum-exp, to rounding."""
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    rng = np.random.default_rng(1)
    ks = (2, 3, 5)
    C = 3 if release == "paired-3class" else 2
    n = 200
    X = np.column_stack([rng.integers(0, k, n) for k in ks])
    y = rng.integers(0, C, n)
    if release.startswith("paired"):
        mech = PairedRecordMechanism(ks, C, 2.0, n_sampled=2 if release == "paired-m2" else 1, oracle="rr")
        Xt, yt = mech.release(X, y, rng=rng)
        view = paired_view(mech, Xt)
        rm = view
    else:
        label = RandomizedResponse(C, flip_prob=0.2) if release == "record-rr" else None
        rm = RecordMechanism([RandomizedResponse(k, flip_prob=0.3) for k in ks], label)
        Xt, yt = rm.release(X, y if label else None, rng=rng)
        yt = yt if label else y
    design = Design(ColumnLayout.from_mechanism(rm), encoding)
    shard = Shard(0, rm, Xt, yt, design, C, 5, 1)
    Rn = 1 if C == 2 else C
    coef = rng.normal(size=(Rn, design.n_inputs))
    b = rng.normal(size=Rn)
    xs = np.stack([np.column_stack([rng.integers(0, k, n) for k in ks]) for _ in range(3)]).astype(float)
    lg, resp = shard._log_g(xs, coef, b)
    lg0, resp0 = shard._log_g_numpy(xs, coef, b)
    np.testing.assert_allclose(lg, lg0, rtol=1e-6, atol=1e-6)  # the same float32 state inputs; other sum order
    np.testing.assert_allclose(resp, resp0, rtol=1e-6, atol=1e-7)
    assert lg.shape == (3, n) and resp.shape == (3, n, C)
    lp, lp0 = shard._log_class_probs(xs, coef, b), shard._log_class_probs_decoded(xs, coef, b)
    np.testing.assert_allclose(lp, lp0, rtol=1e-6, atol=1e-6)  # the held-out scores' lookup path
    assert lp.shape == (3, n, C)
