"""Attribute sampling in RecordMechanism (n_sampled = m): each client releases m of its F fields,
chosen uniformly without replacement and independently of its data, plus its label.

Pinned: the accounting (ε, δ = sums of the m largest per-field values, + the label's) equals the
largest log-ratio found by enumerating every output of a small discrete record over every pair of
records; the likelihood (released fields + log 1/C(F, m)) sums to one over all outputs and matches
release frequencies (chi-square, fixed seed, level ALPHA); the sampled set is uniform over subsets
and does not depend on the data; n_sampled=None releases bit for bit as before (checksums computed
with the code before attribute sampling existed, commit a6e169d).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    DuchiMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PiecewiseMechanism,
    RandomizedResponse,
    RecordMechanism,
    TransitionMatrix,
    UnaryEncoding,
    mechanism_from_spec,
)

ALPHA = 1e-3


def mixed(n_sampled=None) -> RecordMechanism:
    return RecordMechanism(
        [
            RandomizedResponse(3, epsilon=1.0),
            LaplaceMechanism(2.0, [0.0, 0.0], [1.0, 1.0]),  # one field of width 2
            GaussianMechanism(1.0, 1e-5, 0.0, 1.0),
            UnaryEncoding(4, 0.5),
            PiecewiseMechanism(1.5, 0.0, 1.0),
        ],
        RandomizedResponse(2, epsilon=0.3),
        n_sampled=n_sampled,
    )


def mixed_input(n: int, seed: int = 0):
    g = np.random.default_rng(seed)
    X = np.column_stack([g.integers(0, 3, n), g.uniform(0, 1, (n, 3)), g.integers(0, 4, n), g.uniform(0, 1, n)])
    return X, g.integers(0, 2, n)


# ----------------------------------------------------------------------------- unchanged without sampling
def test_n_sampled_none_releases_bit_for_bit_as_before():
    """Checksums of releases computed with the code before attribute sampling existed (a6e169d): a
    mixed record and a replicated RR record, n_sampled=None and omitted, and the same generator
    state afterwards; the spec has no n_sampled key."""

    def case(**kw):
        rm = RecordMechanism(
            [
                RandomizedResponse(3, epsilon=1.0),
                LaplaceMechanism(2.0, [0.0, 0.0], [1.0, 1.0]),
                GaussianMechanism(1.0, 1e-5, 0.0, 1.0),
            ],
            RandomizedResponse(2, epsilon=0.5),
            **kw,
        )
        g = np.random.default_rng(2024)
        X = np.column_stack([g.integers(0, 3, 50), g.uniform(0, 1, (50, 3))])
        y = g.integers(0, 2, 50)
        rng = np.random.default_rng(7)
        Xt, yt = rm.release(X, y, rng=rng)
        return hashlib.sha256(Xt.tobytes() + yt.tobytes()).hexdigest(), rng.random(), rm

    def case2(**kw):
        rm = RecordMechanism(RandomizedResponse(4, 0.3), RandomizedResponse(2, 0.2), n_features=6, **kw)
        g = np.random.default_rng(1)
        X, y = g.integers(0, 4, (40, 6)), g.integers(0, 2, 40)
        Xt, yt = rm.release(X, y, rng=np.random.default_rng(3))
        return hashlib.sha256(Xt.tobytes() + yt.tobytes()).hexdigest()

    h, after, rm = case()
    assert h == "33dcbca3b1839590e5ad49b3893993dc4b047977740ee73f642a6d7beb91edb5"
    assert case(n_sampled=None)[:2] == (h, after)
    assert case2() == case2(n_sampled=None) == "ec0d959958b585e64851ab6247f102b2c014559ad0da218af78e1b1086eddef5"
    assert "n_sampled" not in rm.to_spec() and "n_sampled" not in rm.epsilon_breakdown()


# ----------------------------------------------------------------------------- accounting
def test_accounting_sums_the_m_largest():
    """Fields (ε): RR 1, Laplace block 2, Gaussian 1 (δ 1e-5), OUE 0.5, PM 1.5; label 0.3. m = 2:
    ε = 2 + 1.5 + 0.3, δ = 1e-5; m = 5 equals the unsampled accounting; m = 1: 2 + 0.3."""
    full = mixed()
    eps = sorted((f.mechanism.epsilon for f in full.fields), reverse=True)
    assert len(full.fields) == 5
    for m in (1, 2, 3, 5):
        rm = mixed(m)
        assert rm.features_epsilon == pytest.approx(sum(eps[:m]), rel=1e-12)
        assert rm.epsilon == pytest.approx(sum(eps[:m]) + 0.3, rel=1e-12)
        assert rm.delta == pytest.approx(1e-5, rel=1e-12)
        b = rm.epsilon_breakdown()
        assert b["n_sampled"] == m and b["n_fields"] == 5 and b["record"] == pytest.approx(rm.epsilon)
    assert mixed(5).epsilon == pytest.approx(full.epsilon, rel=1e-12)
    g = RecordMechanism(GaussianMechanism(1.0, 1e-6, 0.0, 1.0), None, n_features=4, n_sampled=2)
    assert g.epsilon == pytest.approx(2.0) and g.delta == pytest.approx(2e-6)


def small_record(m: int) -> RecordMechanism:
    return RecordMechanism(
        [RandomizedResponse(2, epsilon=0.4), TransitionMatrix.binary(0.1, 0.3), RandomizedResponse(3, epsilon=0.9)],
        RandomizedResponse(2, epsilon=0.2),
        n_sampled=m,
    )


def all_outputs(rm: RecordMechanism):
    """Every (X̃, ỹ) a small discrete record can release: a sampled set, values of its fields, a label."""
    ks = [f.mechanism.k for f in rm.fields]
    rows, labels = [], []
    for S in itertools.combinations(range(len(ks)), rm.n_sampled):
        for vals in itertools.product(*[range(ks[i]) for i in S]):
            for lab in range(rm.label.k):
                row = np.full(len(ks), np.nan)
                row[list(S)] = vals
                rows.append(row)
                labels.append(lab)
    return np.array(rows), np.array(labels)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_likelihood_normalised_and_epsilon_by_enumeration(m):
    """Over every output: exp(log_likelihood) sums to 1 for every clean record; the largest log-ratio
    over outputs and over all pairs of records equals ``epsilon`` (the m-largest sum, tight)."""
    rm = small_record(m)
    Xt, yt = all_outputs(rm)
    records = [np.array(r) for r in itertools.product(range(2), range(2), range(3))]
    L = np.empty((len(Xt), len(records) * 2))
    for j, (r, lab) in enumerate(itertools.product(records, range(2))):
        L[:, j] = rm.log_likelihood(Xt, yt, np.tile(r, (len(Xt), 1)), np.full(len(Xt), lab))
    assert np.allclose(np.exp(L).sum(axis=0), 1.0, atol=1e-12)
    assert float(np.max(L.max(1) - L.min(1))) == pytest.approx(rm.epsilon, abs=1e-12)


def test_release_frequencies_match_likelihood_chisquare():
    """Releases of one record (m = 2) match exp(log_likelihood) over all outputs (chi-square)."""
    rm = small_record(2)
    Xt, yt = all_outputs(rm)
    x, lab = np.array([1, 0, 2]), 1
    probs = np.exp(rm.log_likelihood(Xt, yt, np.tile(x, (len(Xt), 1)), np.full(len(Xt), lab)))
    n = 60_000
    out, ylab = rm.release(np.tile(x, (n, 1)), np.full(n, lab), rng=np.random.default_rng(12))
    key = lambda X, y: [tuple(np.nan_to_num(r, nan=-1).astype(int)) + (int(b),) for r, b in zip(X, y)]  # noqa: E731
    index = {k: i for i, k in enumerate(key(Xt, yt))}
    counts = np.bincount([index[k] for k in key(out, ylab)], minlength=len(Xt))
    assert (n * probs).min() >= 5
    assert stats.chisquare(counts, n * probs).pvalue > ALPHA


def test_sampled_sets_uniform_and_data_independent():
    """The released-field sets are uniform over the C(5, 2) = 10 subsets (chi-square), and with the same
    seed two different data sets get exactly the same sets (the draw comes first and ignores X)."""
    rm = mixed(2)
    X1, y1 = mixed_input(20_000, 1)
    X2, y2 = mixed_input(20_000, 2)
    out1, _ = rm.release(X1, y1, rng=np.random.default_rng(5))
    out2, _ = rm.release(X2, y2, rng=np.random.default_rng(5))
    R1, R2 = rm.released_fields(out1), rm.released_fields(out2)
    assert np.array_equal(R1, R2) and np.all(R1.sum(1) == 2)
    codes = R1 @ (2 ** np.arange(5))
    subsets = [sum(2**i for i in S) for S in itertools.combinations(range(5), 2)]
    counts = np.array([np.sum(codes == c) for c in subsets])
    assert counts.sum() == 20_000 and stats.chisquare(counts).pvalue > ALPHA


def test_released_values_follow_their_field_mechanism():
    """Released RR values (m = 1 of a replicated RR record) follow RR's pmf (chi-square); NaN elsewhere."""
    rr = RandomizedResponse(4, epsilon=1.0)
    rm = RecordMechanism(rr, None, n_features=3, n_sampled=1)
    n = 30_000
    out, _ = rm.release(np.full((n, 3), 2), rng=np.random.default_rng(6))
    rel = ~np.isnan(out)
    assert np.all(rel.sum(1) == 1)
    vals = out[rel].astype(int)
    expected = n * np.exp(rr.log_likelihood(np.arange(4), 2))
    assert stats.chisquare(np.bincount(vals, minlength=4), expected).pvalue > ALPHA


def test_log_likelihood_is_released_fields_plus_pattern_probability():
    """log p = Σ over released fields of their log-likelihood + label's + log(1/C(F, m))."""
    rm = mixed(3)
    X, y = mixed_input(30, 3)
    Xt, yt = rm.release(X, y, rng=np.random.default_rng(4))
    want = np.full(30, -math.log(math.comb(5, 3))) + rm.label.log_likelihood(yt, y)
    R = rm.released_fields(Xt)
    for i, f in enumerate(rm.fields):
        cols = list(f.columns)
        for r in np.flatnonzero(R[:, i]):
            xt, xc = Xt[r, cols], X[r, cols]
            want[r] += float(
                np.sum(f.mechanism.log_likelihood(xt if len(cols) > 1 else xt[0], xc if len(cols) > 1 else xc[0]))
            )
    assert np.allclose(rm.log_likelihood(Xt, yt, X, y), want, atol=1e-12)


# ----------------------------------------------------------------------------- validation and specs
def test_validate_release_errors():
    """NaN only on whole fields, exactly m per row, valid released values, no NaN in the label.
    Fields of ``mixed``: 0 RR (col 0), 1 Laplace block (cols 1–2), 2 Gaussian (3), 3 OUE (4), 4 PM (5)."""
    rm = mixed(1)
    X, y = mixed_input(5)
    Xt = np.full((5, 6), np.nan)
    Xt[:, 0] = [0, 1, 2, 1, 0]  # every row releases field 0 only
    yt = np.array([0, 1, 0, 1, 1])
    Xv, yv = rm.validate_release(Xt, yt)
    assert np.array_equal(np.isnan(Xv), np.isnan(Xt)) and rm.released_fields(Xt)[:, 0].all()
    assert np.all(np.isfinite(rm.log_likelihood(Xt, yt, X, y)))
    cases = []
    two = Xt.copy()
    two[3, 3] = 0.5  # row 3 also releases the Gaussian field
    cases.append((two, yt, "X_tilde", "row 3 releases 2 fields, n_sampled is 1"))
    none = Xt.copy()
    none[2, 0] = np.nan
    cases.append((none, yt, "X_tilde", "row 2 releases 0 fields"))
    half = Xt.copy()
    half[0] = [np.nan, 0.5, np.nan, np.nan, np.nan, np.nan]  # half of the Laplace block
    cases.append((half, yt, "X_tilde", "row 0 withholds part of field 1"))
    bad = Xt.copy()
    bad[4, 0] = 5.0  # RR(3) cannot release 5
    cases.append((bad, yt, "X_tilde", "states"))
    off = np.full((5, 6), np.nan)
    off[:, 5] = 0.123456789  # not a PM grid point
    cases.append((off, yt, "X_tilde", "midpoints"))
    inf = Xt.copy()
    inf[1, 3] = np.inf
    cases.append((inf, yt, "X_tilde", "inf"))
    cases.append((Xt, np.where(np.arange(5) == 0, np.nan, yt), "y_tilde", "NaN"))
    cases.append((Xt.astype(str), yt, "X_tilde", "numbers"))
    cases.append((Xt[:, :5], yt, "X_tilde", "shape"))
    for Xb, yb, field, msg in cases:
        with pytest.raises(ValidationError, match=msg) as e:
            rm.validate_release(Xb, yb)
        assert e.value.field == field
        with pytest.raises(ValidationError):
            rm.log_likelihood(Xb, yb, X, y)


def test_validate_input_rejects_nan_and_constructor_checks():
    rm = mixed(2)
    X, y = mixed_input(3)
    X[1, 2] = np.nan
    with pytest.raises(ValidationError) as e:
        rm.release(X, y, rng=np.random.default_rng(0))
    assert e.value.field == "X"
    for m in (0, 6, 2.0, True, "2"):
        with pytest.raises(ValidationError) as e:
            mixed(m)
        assert e.value.field == "n_sampled"
    with pytest.raises(ValidationError) as e:
        RecordMechanism(RandomizedResponse(2, 0.1), None, n_features=3).released_fields([[0, np.nan, 1]])
    assert e.value.field == "X_tilde"
    assert RecordMechanism(RandomizedResponse(2, 0.1), None, n_features=3).released_fields([[0, 1, 1]]).all()


def test_spec_round_trip_with_sampling():
    """Specs carry n_sampled (JSON round trip, equality, identical releases); a bad n_sampled in a spec is
    named; sampled and unsampled records differ."""
    for rm in (mixed(2), RecordMechanism(DuchiMechanism(1.0), None, n_features=4, n_sampled=3)):
        again = mechanism_from_spec(json.loads(json.dumps(rm.to_spec())))
        assert again == rm and again.n_sampled == rm.n_sampled and again.epsilon == rm.epsilon
        X = mixed_input(6)[0] if rm.label is not None else np.full((6, 4), 0.25)
        y = mixed_input(6)[1] if rm.label is not None else None
        a = rm.release(X, y, rng=np.random.default_rng(1))[0]
        b = again.release(X, y, rng=np.random.default_rng(1))[0]
        assert np.array_equal(a, b, equal_nan=True)
    assert mixed(2) != mixed(3) != mixed()
    spec = mixed(2).to_spec()
    spec["n_sampled"] = 9
    with pytest.raises(ValidationError) as e:
        mechanism_from_spec(spec)
    assert e.value.field == "n_sampled"
    assert "n_sampled=2" in repr(mixed(2))
