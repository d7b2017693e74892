"""LDPNaiveBayes on paired releases (Yilmaz, Al-Rubaie & Chang, arXiv:1905.01039, §4): the pair
oracle's frequency estimator is unbiased for P(x_j = s, y = c) (Monte Carlo within Z_TOL = 5 standard
errors of the per-record terms, fixed seeds), negative estimates are clipped and renormalised, and the
noiseless limit is the empirical table of the records that sampled each attribute."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.estimators import LDPNaiveBayes, joint_frequencies
from fedrr.estimators._naive_bayes import check_paired_releases, clip_table
from fedrr.mechanisms import PairedRecordMechanism, RandomizedResponse, RecordMechanism, frequency_oracle

Z_TOL = 5.0


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def population(ks, C, n, seed):
    """n records drawn from a fixed random joint distribution of (x_1..x_F, y), and that distribution."""
    g = rng(seed)
    shape = tuple(ks) + (C,)
    P = g.dirichlet(np.full(int(np.prod(shape)), 0.7)).reshape(shape)
    flat = g.choice(P.size, size=n, p=P.ravel())
    idx = np.unravel_index(flat, shape)
    X = np.column_stack(idx[:-1]).astype(np.int64)
    return X, idx[-1].astype(np.int64), P


@pytest.mark.parametrize("oracle, C", [("rr", 2), ("oue", 2), ("olh", 2), ("auto", 3)])
def test_pair_tables_and_class_prior_are_unbiased(oracle, C):
    """joint_frequencies on paired releases vs the true P(x_j, y), P(y) of the generating distribution:
    every cell within Z_TOL standard errors (the per-record unbiased terms' sample sd / √n_j; for the
    prior, over all records: each record's term is the class margin of its own pair's estimate)."""
    ks = [3, 4]
    X, y, P = population(ks, C, 60_000, seed=1)
    mech = PairedRecordMechanism(ks, C, 1.0, oracle=oracle)
    Xt, yt = mech.release(X, y, rng=rng(2))
    tables, n_rel, freq = joint_frequencies(Xt, yt, mech)
    assert n_rel.sum() == X.shape[0]
    margin_terms = []
    for j in range(2):
        axes = tuple(a for a in range(2) if a != j)
        true = P.sum(axis=axes)  # (k_j, C)
        rows = ~np.isnan(Xt[:, j])
        U = mech.unbiased_pair_table(j, Xt[rows, j])
        se = U.std(axis=0) / math.sqrt(U.shape[0])
        assert np.all(np.abs(tables[j] - true) < Z_TOL * se), (tables[j], true, se)
        margin_terms.append(U.sum(axis=1))
    M = np.concatenate(margin_terms)
    se = M.std(axis=0) / math.sqrt(M.shape[0])
    assert np.all(np.abs(freq - P.sum(axis=(0, 1))) < Z_TOL * se)


def test_noiseless_limit_is_the_empirical_table_of_the_sampled_records():
    """At ε = 40 (RR flips with probability ~1e-17 per report) the pair table of attribute j is the
    empirical (x_j, y) table of the records that sampled j, and the conditionals are Laplace-smoothed
    counts (α = 1)."""
    ks = [3, 5]
    X, y, _ = population(ks, 2, 5_000, seed=3)
    mech = PairedRecordMechanism(ks, 2, 40.0, oracle="rr")
    Xt, yt = mech.release(X, y, rng=rng(4))
    model = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
    for j, k in enumerate(ks):
        rows = ~np.isnan(Xt[:, j])
        counts = np.bincount(X[rows, j] * 2 + y[rows], minlength=2 * k).reshape(k, 2)
        np.testing.assert_allclose(model.joint_[j], counts / rows.sum(), atol=1e-12)
        expect = np.log((counts.T + 1.0) / (counts.sum(axis=0)[:, None] + k))
        np.testing.assert_allclose(model.feature_log_prob_[j], expect, atol=1e-9)
    np.testing.assert_allclose(model.class_prior_, np.bincount(y, minlength=2) / y.size, atol=1e-12)


def test_clip_handles_negative_estimates():
    """At ε 0.3 with 400 clients many debiased cells are negative; "clip" sets them to 0 and renormalises:
    tables and prior on the simplex, conditionals normalised, predictions finite."""
    ks = [6, 8, 3]
    X, y, _ = population(ks, 2, 400, seed=5)
    mech = PairedRecordMechanism(ks, 2, 0.3)
    Xt, yt = mech.release(X, y, rng=rng(6))
    model = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
    assert any(np.any(t < 0) for t in model.joint_unbiased_)
    for t, raw, lp in zip(model.joint_, model.joint_unbiased_, model.feature_log_prob_):
        assert np.all(t >= 0) and t.sum() == pytest.approx(1.0)
        np.testing.assert_allclose(t, clip_table(raw))
        np.testing.assert_allclose(np.logaddexp.reduce(lp, axis=1), 0.0, atol=1e-12)
    assert model.class_prior_.sum() == pytest.approx(1.0) and np.all(model.class_prior_ >= 0)
    assert np.all(np.isfinite(model.predict_log_proba(X)))


def test_clip_table():
    np.testing.assert_allclose(clip_table([[0.5, -0.1], [0.3, 0.3]]), [[0.5 / 1.1, 0], [0.3 / 1.1, 0.3 / 1.1]])
    np.testing.assert_allclose(clip_table([-1.0, -2.0]), [0.5, 0.5])


def test_methods_on_paired_releases():
    """auto = clip on paired releases; projection and mle give tables on the simplex, and the mle tables'
    log-likelihood of the pair reports is at least the clipped tables' (it maximises it)."""
    ks = [4, 3]
    X, y, _ = population(ks, 2, 3_000, seed=7)
    mech = PairedRecordMechanism(ks, 2, 1.0)
    Xt, yt = mech.release(X, y, rng=rng(8))
    auto = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
    clip = LDPNaiveBayes(method="clip").fit(Xt, yt, mechanism=mech)
    for a, b in zip(auto.feature_log_prob_, clip.feature_log_prob_):
        np.testing.assert_array_equal(a, b)
    mle = LDPNaiveBayes(method="mle", tol=1e-10).fit(Xt, yt, mechanism=mech)
    proj = LDPNaiveBayes(method="projection").fit(Xt, yt, mechanism=mech)
    rel = check_paired_releases(Xt, yt, mech)
    for j in range(2):
        L = np.exp(mech.pair_log_likelihood(j, rel.values[j]).reshape(rel.values[j].size, -1))
        for t in (mle.joint_[j], proj.joint_[j]):
            assert np.all(t >= 0) and t.sum() == pytest.approx(1.0)
        ll_mle = np.log(L @ mle.joint_[j].ravel()).sum()
        assert ll_mle >= np.log(L @ clip.joint_[j].ravel()).sum() - 1e-6
        assert ll_mle >= np.log(L @ proj.joint_[j].ravel()).sum() - 1e-6
    assert mle.class_prior_.sum() == pytest.approx(1.0)


def test_split_releases_keep_todays_estimator():
    """method="auto" on a split RecordMechanism is exactly today's default ("mle")."""
    ks = [3, 4]
    X, y, _ = population(ks, 2, 2_000, seed=9)
    rm = RecordMechanism([frequency_oracle(k, 0.5) for k in ks], RandomizedResponse(2, epsilon=0.5), n_sampled=1)
    Xt, yt = rm.release(X, y, rng=rng(10))
    a = LDPNaiveBayes().fit(Xt, yt, mechanism=rm)
    b = LDPNaiveBayes(method="mle").fit(Xt, yt, mechanism=rm)
    for u, v in zip(a.feature_log_prob_, b.feature_log_prob_):
        np.testing.assert_array_equal(u, v)
    c = LDPNaiveBayes(method="clip").fit(Xt, yt, mechanism=rm)
    assert all(np.all(t >= 0) for t in c.joint_)


def test_paired_release_validation():
    mech = PairedRecordMechanism([2, 3], 2, 1.0, oracle="rr")
    Xt = np.array([[1.0, np.nan], [0.0, np.nan]])
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes().fit(Xt, np.full(2, np.nan), mechanism=mech)
    assert e.value.field == "X_tilde" and "attribute 1" in str(e.value)
    Xt = np.array([[1.0, np.nan], [np.nan, 2.0]])
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes().fit(Xt, np.array([0, 1]), mechanism=mech)
    assert e.value.field == "y_tilde"
    with pytest.raises(ValidationError) as e:
        LDPNaiveBayes(method="paper").fit(Xt, np.full(2, np.nan), mechanism=mech)
    assert e.value.field == "method"


def test_adult_paired_release_script_quick(tmp_path):
    """simulations/adult_paired.py --part release --quick runs end to end and writes its table with its command."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "simulations" / "adult_paired.py"),
            "--part",
            "release",
            "--quick",
            "--out",
            str(out),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("summary.md", "results.csv"):
        assert "python simulations/adult_paired.py --part release" in (out / name).read_text()
    assert "| 4 | paired |" in (out / "summary.md").read_text()
