"""RecordMechanism: privacy accounting by basic composition, field routing, release shapes, specs.

Statistical checks (column routing) use chi-square / KS tests with a fixed seed at level 1e-3.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    RecordMechanism,
    TransitionMatrix,
    mechanism_from_spec,
)

ALPHA = 1e-3


# --- accounting ----------------------------------------------------------------------------------


def test_replicated_scalar_mechanism_composes_over_features_plus_label():
    feat = RandomizedResponse(3, epsilon=0.7)
    lab = RandomizedResponse(2, epsilon=1.1)
    rec = RecordMechanism(feat, lab, n_features=5)
    assert len(rec.fields) == 5 and all(f.mechanism is feat for f in rec.fields)
    assert rec.features_epsilon == pytest.approx(5 * 0.7, rel=1e-12)
    assert rec.epsilon == pytest.approx(5 * 0.7 + 1.1, rel=1e-12)
    assert rec.delta == 0.0
    assert rec.epsilon_breakdown() == pytest.approx({"features": 3.5, "label": 1.1, "record": 4.6}, rel=1e-12)


def test_replicated_gaussian_deltas_add():
    g = GaussianMechanism(0.5, 1e-6, 0.0, 1.0)
    rec = RecordMechanism(g, TransitionMatrix.binary(0.1, 0.2), n_features=4)
    assert rec.epsilon == pytest.approx(4 * 0.5 + math.log(0.8 / 0.1), rel=1e-12)  # TM: max(0.9/0.2, 0.8/0.1)
    assert rec.delta == pytest.approx(4e-6, rel=1e-12)


def test_block_gaussian_counted_once():
    g = GaussianMechanism(1.0, 1e-5, [0.0] * 3, [1.0] * 3)
    rec = RecordMechanism(g, RandomizedResponse(2, epsilon=0.5))
    assert rec.n_features == 3 and len(rec.fields) == 1 and rec.fields[0].columns == (0, 1, 2)
    assert rec.epsilon == pytest.approx(1.5, rel=1e-12)
    assert rec.delta == pytest.approx(1e-5, rel=1e-12)
    # explicit n_features equal to the block width is the same thing
    assert RecordMechanism(g, n_features=3).epsilon == pytest.approx(1.0)
    with pytest.raises(ValidationError) as ei:
        RecordMechanism(g, n_features=5)
    assert ei.value.field == "features"


def mixed_record():
    fields = [
        RandomizedResponse(3, epsilon=0.4),  # col 0
        LaplaceMechanism(1.0, [0.0, -1.0], [1.0, 1.0]),  # cols 1, 2 (block)
        GaussianMechanism(0.8, 1e-6, -2.0, 2.0),  # col 3
        TransitionMatrix([[0.5, 0.25, 0.125], [0.25, 0.5, 0.375], [0.25, 0.25, 0.5]]),  # col 4
        # (columns sum to exactly 1.0 in binary; see test_transition_matrix_spec_round_trip_is_exact)
        RandomizedResponse(3, epsilon=0.4),  # col 5 (same as col 0)
        RandomizedResponse(5, epsilon=2.0),  # col 6
        GaussianMechanism(sigma=0.7, delta=1e-5, lower=[0.0] * 2, upper=[1.0] * 2),  # cols 7, 8 (block)
    ]
    label = TransitionMatrix.binary(0.15, 0.05)
    return RecordMechanism(fields, label), fields, label


def test_mixed_fields_compose():
    rec, fields, label = mixed_record()
    assert rec.n_features == 9
    assert [f.columns for f in rec.fields] == [(0,), (1, 2), (3,), (4,), (5,), (6,), (7, 8)]
    assert rec.features_epsilon == pytest.approx(sum(m.epsilon for m in fields), rel=1e-12)
    assert rec.epsilon == pytest.approx(sum(m.epsilon for m in fields) + label.epsilon, rel=1e-12)
    assert rec.delta == pytest.approx(1e-6 + 1e-5, rel=1e-12)
    assert rec.mechanism_for(2) is fields[1] and rec.mechanism_for(8) is fields[6]
    # identical scalar mechanisms are grouped for vectorised work, blocks stay whole
    groups = {tuple(c.tolist()) for _, c in rec.groups()}
    assert (0, 5) in groups and (1, 2) in groups and (7, 8) in groups
    with pytest.raises(ValidationError) as ei:
        rec.mechanism_for(9)
    assert ei.value.field == "column"


def test_no_label():
    rec = RecordMechanism(RandomizedResponse(2, 0.2), n_features=3)
    assert rec.label is None
    assert rec.epsilon == pytest.approx(3 * math.log(4), rel=1e-12)
    Xt, yt = rec.release(np.zeros((4, 3), int), rng=np.random.default_rng(0))
    assert yt is None and Xt.shape == (4, 3)


# --- release -------------------------------------------------------------------------------------


def make_mixed_data(n, rng):
    X = np.column_stack(
        [
            rng.integers(0, 3, n),
            rng.random(n),
            -1 + 2 * rng.random(n),
            -2 + 4 * rng.random(n),
            rng.integers(0, 3, n),
            rng.integers(0, 3, n),
            rng.integers(0, 5, n),
            rng.random(n),
            rng.random(n),
        ]
    )
    y = rng.integers(0, 2, n)
    return X, y


def test_release_shapes_dtypes_and_column_routing():
    rec, fields, label = mixed_record()
    rng = np.random.default_rng(0)
    n = 20_000
    X, y = make_mixed_data(n, rng)
    X[:, [0, 4, 5]] = 1  # fixed discrete inputs for chi-square
    X[:, 6] = 4
    y[:] = 1
    Xt, yt = rec.release(X, y, rng=rng)
    assert Xt.shape == (n, 9) and Xt.dtype == np.float64  # mixed record -> float
    assert yt.shape == (n,) and yt.dtype.kind in "iu"
    # discrete columns: chi-square against their own mechanism's likelihood
    for col, mech, x in [(0, fields[0], 1), (4, fields[3], 1), (5, fields[4], 1), (6, fields[5], 4)]:
        vals = Xt[:, col]
        assert np.all(vals == np.round(vals))
        probs = np.exp(mech.log_likelihood(np.arange(mech.k), np.full(mech.k, x)))
        p = stats.chisquare(np.bincount(vals.astype(int), minlength=mech.k), n * probs).pvalue
        assert p > ALPHA, f"column {col}: χ² p={p:.2e}"
    probs = np.exp(label.log_likelihood(np.arange(2), np.ones(2, int)))
    assert stats.chisquare(np.bincount(yt, minlength=2), n * probs).pvalue > ALPHA
    # numeric columns: KS of the noise against the right field's noise law
    for cols, dist in [
        ((1, 2), stats.laplace(scale=fields[1].scale)),
        ((3,), stats.norm(scale=fields[2].sigma)),
        ((7, 8), stats.norm(scale=0.7)),
    ]:
        for c in cols:
            p = stats.kstest(Xt[:, c] - X[:, c], dist.cdf).pvalue
            assert p > ALPHA, f"column {c}: KS p={p:.2e}"


def test_all_discrete_record_releases_integers_and_one_record_vector():
    rec = RecordMechanism([RandomizedResponse(4, 0.3), TransitionMatrix.binary(0.2, 0.1)], RandomizedResponse(3, 0.5))
    rng = np.random.default_rng(1)
    Xt, yt = rec.release(np.array([[3, 1], [0, 0]]), np.array([2, 0]), rng=rng)
    assert Xt.dtype == np.int64 and Xt.shape == (2, 2) and yt.shape == (2,)
    assert Xt[:, 0].max() < 4 and Xt[:, 1].max() < 2 and yt.max() < 3
    # a single record given as a 1-d vector is treated as one row
    Xt1, yt1 = rec.release(np.array([3, 1]), np.array([2]), rng=rng)
    assert Xt1.shape == (1, 2) and yt1.shape == (1,)


def test_release_is_reproducible_from_the_seed():
    rec, _, _ = mixed_record()
    X, y = make_mixed_data(50, np.random.default_rng(5))
    a = rec.release(X, y, rng=np.random.default_rng(9))
    b = rec.release(X, y, rng=np.random.default_rng(9))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# --- log-likelihood ------------------------------------------------------------------------------


def test_log_likelihood_is_sum_of_field_log_likelihoods():
    rec, fields, label = mixed_record()
    rng = np.random.default_rng(2)
    X, y = make_mixed_data(40, rng)
    Xt, yt = rec.release(X, y, rng=rng)
    got = rec.log_likelihood(Xt, yt, X, y)
    by_hand = np.zeros(40)
    for f in rec.fields:
        c = list(f.columns)
        xt_, x_ = (Xt[:, c], X[:, c]) if len(c) > 1 else (Xt[:, c[0]], X[:, c[0]])
        by_hand += np.asarray(f.mechanism.log_likelihood(xt_, x_)).reshape(40, -1).sum(axis=1)
    by_hand += label.log_likelihood(yt, y)
    np.testing.assert_allclose(got, by_hand, rtol=1e-13, atol=1e-12)
    assert got.shape == (40,)


def test_replicated_log_likelihood_equals_product_over_columns():
    m = RandomizedResponse(3, 0.25)
    rec = RecordMechanism(m, m, n_features=2)
    X, y = np.array([[0, 1], [2, 2]]), np.array([1, 0])
    Xt, yt = np.array([[0, 0], [1, 2]]), np.array([1, 2])
    keep, other = math.log(0.75), math.log(0.125)
    np.testing.assert_allclose(
        rec.log_likelihood(Xt, yt, X, y), [keep + other + keep, other + keep + other], rtol=1e-14
    )


# --- specs ---------------------------------------------------------------------------------------

ALL_MECHANISMS = {
    "rr_k2": RandomizedResponse(2, 0.25),
    "rr_k256_eps": RandomizedResponse(256, epsilon=3.3),
    "rr_flip_above": RandomizedResponse(3, 0.9),
    "tm_binary": TransitionMatrix.binary(0.1, 0.3),
    "tm_3x3_exact_sums": TransitionMatrix([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]]),
    "laplace": LaplaceMechanism(1.5, -1.0, 2.0),
    "laplace_block": LaplaceMechanism(0.5, [0.0, 1.0], [1.0, 4.0]),
    "laplace_sens": LaplaceMechanism(0.5, 0.0, 1.0, sensitivity=1.3),
    "gauss_analytic": GaussianMechanism(2.0, 1e-6, 0.0, 1.0),
    "gauss_classic": GaussianMechanism(0.5, 1e-5, [0.0] * 3, [1.0] * 3, calibration="classic"),
    "gauss_farokhi": GaussianMechanism(4.0, 1e-5, [0.0] * 3, [2.0] * 3, calibration="farokhi"),
    "gauss_sigma": GaussianMechanism(sigma=1.3, delta=1e-5, lower=-1.0, upper=1.0),
    "gauss_sens": GaussianMechanism(1.0, 1e-5, 0.0, 1.0, sensitivity=2.0),
    "record_replicated": RecordMechanism(RandomizedResponse(4, 0.3), RandomizedResponse(2, 0.2), n_features=6),
    "record_replicated_gauss": RecordMechanism(GaussianMechanism(1.0, 1e-5), n_features=3),
    "record_block": RecordMechanism(GaussianMechanism(1.0, 1e-5, [0.0] * 3, [1.0] * 3)),
    "record_single": RecordMechanism(LaplaceMechanism(1.0), None, n_features=1),
    "record_mixed": mixed_record()[0],
}


@pytest.mark.parametrize("name", list(ALL_MECHANISMS))
def test_spec_round_trip_through_json(name):
    m = ALL_MECHANISMS[name]
    spec = m.to_spec()
    text = json.dumps(spec)  # must be JSON-serialisable (no numpy scalars / arrays)
    back = mechanism_from_spec(json.loads(text))
    assert type(back) is type(m)
    assert back == m and hash(back) == hash(m)
    assert back.to_spec() == spec
    assert json.dumps(back.to_spec()) == text
    assert back.epsilon == m.epsilon and back.delta == m.delta
    for attr in ("sigma", "scale", "flip_prob", "sensitivity", "n_features"):
        if hasattr(m, attr):
            assert getattr(back, attr) == getattr(m, attr), attr
    if hasattr(m, "matrix"):
        assert np.array_equal(back.matrix, m.matrix)


def test_spec_round_trip_gives_identical_likelihoods_and_releases():
    rec = mixed_record()[0]
    back = mechanism_from_spec(json.loads(json.dumps(rec.to_spec())))
    rng = np.random.default_rng(3)
    X, y = make_mixed_data(30, rng)
    a = rec.release(X, y, rng=np.random.default_rng(4))
    b = back.release(X, y, rng=np.random.default_rng(4))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    np.testing.assert_array_equal(rec.log_likelihood(*a, X, y), back.log_likelihood(*b, X, y))


def test_different_mechanisms_are_not_equal():
    assert RandomizedResponse(2, 0.25) != RandomizedResponse(2, 0.26)
    assert RandomizedResponse(2, 0.25) != TransitionMatrix.binary(0.25, 0.25)
    assert RecordMechanism(RandomizedResponse(2, 0.2), n_features=2) != RecordMechanism(
        RandomizedResponse(2, 0.2), n_features=3
    )
    assert GaussianMechanism(1.0, 1e-5) != GaussianMechanism(1.0, 1e-5, calibration="farokhi")
