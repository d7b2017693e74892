"""PairedRecordMechanism: sampled (attribute, label) pairs released as one value of the product domain
(Yilmaz, Al-Rubaie & Chang, arXiv:1905.01039, §4).

Every probability is checked against brute force: the release pmf by enumerating every output of
small domains (it sums to 1 and equals the product formula written out from first principles), ε as
the largest log-ratio over every output and every pair of records, the release distribution by
Monte Carlo (fixed seeds; each cell's z-score within Z_TOL = 5 standard errors: with ≤ 250 cells a
correct implementation fails with probability < 250·5.8e-7 ≈ 1.5e-4), the unbiased pair table by
Monte Carlo within Z_TOL standard errors of its sample mean. The DP audit certifies the claim and
catches a release that claims half its ε.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from fedrr.audit import DEFAULT_ALPHA, audit_mechanism, audit_paired, samples_needed
from fedrr.errors import ValidationError
from fedrr.mechanisms import (
    LocalHashing,
    PairedRecordMechanism,
    RandomizedResponse,
    UnaryEncoding,
    frequency_oracle,
    mechanism_from_spec,
)
from fedrr.testing.audit_suite import HalfClaimPaired, run_cases, standard_cases

Z_TOL = 5.0


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------- brute force
def oracle_outputs(o) -> np.ndarray:
    if isinstance(o, RandomizedResponse):
        return np.arange(o.k, dtype=float)
    if isinstance(o, UnaryEncoding):
        return np.arange(2**o.k, dtype=float)
    return np.arange(o.n_seeds * o.g, dtype=float)


def oracle_pmf(o, out: int, v: int) -> float:
    """P(report = out | pair value v) from each oracle's definition (not its likelihood code)."""
    if isinstance(o, RandomizedResponse):
        return o.keep_prob if out == v else o.flip_prob / (o.k - 1)
    if isinstance(o, UnaryEncoding):
        pr = 1.0
        for b in range(o.k):
            pb = o.p if b == v else o.q
            pr *= pb if (out >> b) & 1 else 1 - pb
        return pr
    seed, y = divmod(out, o.g)
    a, b = 1 + seed // o.prime, seed % o.prime
    h = ((a * v + b) % o.prime) % o.g
    return (o.p if h == y else (1 - o.p) / (o.g - 1)) / o.n_seeds


def all_releases(mech: PairedRecordMechanism) -> np.ndarray:
    """Every possible X_tilde row: a sampled set S and one output per attribute of S (NaN elsewhere)."""
    rows = []
    for S in itertools.combinations(range(mech.n_features), mech.n_sampled):
        for outs in itertools.product(*(oracle_outputs(mech.oracles[j]) for j in S)):
            r = np.full(mech.n_features, np.nan)
            r[list(S)] = outs
            rows.append(r)
    return np.array(rows)


def all_records(mech: PairedRecordMechanism) -> list[tuple[np.ndarray, int]]:
    xs = itertools.product(*(range(k) for k in mech.n_states))
    return [(np.array(x), c) for x in xs for c in range(mech.n_classes)]


def brute_probability(mech: PairedRecordMechanism, row: np.ndarray, x: np.ndarray, c: int) -> float:
    F, m = mech.n_features, mech.n_sampled
    pr = 1.0 / math.comb(F, m)
    for j in np.flatnonzero(~np.isnan(row)):
        pr *= oracle_pmf(mech.oracles[j], int(row[j]), int(x[j]) * mech.n_classes + c)
    return pr


def likelihood_grid(mech: PairedRecordMechanism, rows: np.ndarray) -> np.ndarray:
    """(n_outputs, n_records) log P(row | record) from the mechanism's log_likelihood."""
    recs = all_records(mech)
    n = rows.shape[0]
    nan = np.full(n, np.nan)
    cols = [mech.log_likelihood(rows, nan, np.broadcast_to(x, (n, x.size)), np.full(n, c)) for x, c in recs]
    return np.column_stack(cols)


SMALL = [
    ("rr m1", lambda: PairedRecordMechanism([2, 3], 2, 1.0, oracle="rr")),
    ("rr m2 C3", lambda: PairedRecordMechanism([2, 2], 3, 1.5, n_sampled=2, oracle="rr")),
    ("oue m1", lambda: PairedRecordMechanism([2, 3], 2, 1.0, oracle="oue")),
    ("oue m2", lambda: PairedRecordMechanism([2, 2], 2, 2.0, n_sampled=2, oracle="oue")),
    ("olh m1", lambda: PairedRecordMechanism([2, 3], 2, 1.0, oracle="olh")),
    ("olh m2", lambda: PairedRecordMechanism([2, 2], 2, 2.0, n_sampled=2, oracle="olh")),
    ("mixed m1", lambda: PairedRecordMechanism([2, 3, 2], 2, 1.0, oracle=["rr", "olh", "oue"])),
]


@pytest.mark.parametrize("name, make", SMALL, ids=[s[0] for s in SMALL])
def test_pmf_sums_to_one_and_matches_brute_force(name, make):
    mech = make()
    rows = all_releases(mech)
    L = likelihood_grid(mech, rows)
    P = np.exp(L)
    np.testing.assert_allclose(P.sum(axis=0), 1.0, rtol=0, atol=1e-12)
    recs = all_records(mech)
    pick = np.random.default_rng(0).choice(rows.shape[0], size=min(rows.shape[0], 300), replace=False)
    for i in pick:
        for r, (x, c) in enumerate(recs):
            assert P[i, r] == pytest.approx(brute_probability(mech, rows[i], x, c), rel=1e-12)


@pytest.mark.parametrize("name, make", SMALL, ids=[s[0] for s in SMALL])
def test_epsilon_is_the_worst_ratio_over_all_neighbouring_records(name, make):
    """ε = max over outputs and over every pair of records (x, y), (x', y') of the log-ratio: ≤ the claim
    everywhere, attained (tight) by some pair — records with different labels differ in every pair."""
    mech = make()
    L = likelihood_grid(mech, all_releases(mech))
    worst = float(np.max(L.max(axis=1) - L.min(axis=1)))
    assert worst <= mech.epsilon + 1e-12
    assert worst == pytest.approx(mech.epsilon, abs=1e-9)
    assert mech.epsilon == pytest.approx(mech.epsilon_requested, rel=1e-6)
    recs = all_records(mech)
    i0 = next(i for i, (x, c) in enumerate(recs) if c == 0 and not x.any())
    i1 = next(i for i, (x, c) in enumerate(recs) if c == 1 and x.all())
    assert float(np.max(L[:, i0] - L[:, i1])) == pytest.approx(mech.epsilon, abs=1e-9)


MC = [
    ("rr m1", lambda: PairedRecordMechanism([2, 3], 2, 1.0, oracle="rr"), 200_000),
    ("rr m2 C3", lambda: PairedRecordMechanism([2, 2], 3, 1.5, n_sampled=2, oracle="rr"), 200_000),
    ("oue m1", lambda: PairedRecordMechanism([2, 3], 2, 1.0, oracle="oue"), 400_000),
    ("olh m1", lambda: PairedRecordMechanism([2, 2], 2, 1.0, oracle="olh"), 400_000),
]


@pytest.mark.parametrize("name, make, n", MC, ids=[s[0] for s in MC])
def test_release_frequencies_match_the_likelihood(name, make, n):
    """Monte Carlo: the count of every output of n releases of one record is within Z_TOL binomial
    standard errors of n·P(output | record) from ``log_likelihood`` (and no impossible output appears)."""
    mech = make()
    rows = all_releases(mech)
    x, c = np.array([1] + [0] * (mech.n_features - 1)), 1
    L = mech.log_likelihood(rows, np.full(rows.shape[0], np.nan), np.broadcast_to(x, rows.shape), np.full(len(rows), c))
    p = np.exp(L)
    Xt, yt = mech.release(np.broadcast_to(x, (n, x.size)), np.full(n, c), rng=rng(7))
    assert np.all(np.isnan(yt))
    key = lambda a: [tuple(r) for r in np.where(np.isnan(a), -1.0, a)]  # noqa: E731
    index = {k: i for i, k in enumerate(key(rows))}
    seen, counts = np.unique(np.where(np.isnan(Xt), -1.0, Xt), axis=0, return_counts=True)
    observed = np.zeros(rows.shape[0])
    for r, cnt in zip(key(seen), counts):
        observed[index[r]] = cnt  # KeyError: an output outside the enumeration
    z = (observed - n * p) / np.sqrt(n * p * (1 - p))
    assert np.max(np.abs(z)) < Z_TOL, (np.max(np.abs(z)), np.argmax(np.abs(z)))


def test_attribute_sampling_is_uniform_and_data_independent():
    """Each m-subset of the F attributes is sampled with probability 1/C(F, m), whatever the record."""
    for m in (1, 2):
        mech = PairedRecordMechanism([2, 3, 4], 2, 1.0, n_sampled=m)
        n = 60_000
        for x, c in (([0, 0, 0], 0), ([1, 2, 3], 1)):
            Xt, _ = mech.release(np.tile(x, (n, 1)), np.full(n, c), rng=rng(11 + m))
            released = ~np.isnan(Xt)
            assert np.all(released.sum(axis=1) == m)
            subsets = list(itertools.combinations(range(3), m))
            p = 1 / len(subsets)
            for S in subsets:
                hits = np.all(released[:, list(S)], axis=1).sum()
                assert abs(hits - n * p) < Z_TOL * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("oracle", ["rr", "oue", "olh"])
def test_unbiased_pair_table_is_unbiased(oracle):
    """Monte Carlo: the mean of ``unbiased_pair_table`` over the records that released j equals the
    one-hot table of (x_j, y) within Z_TOL standard errors (the sample standard error per cell)."""
    mech = PairedRecordMechanism([3, 4], 2, 1.0, oracle=oracle)
    n = 200_000
    x, c = np.array([2, 1]), 1
    Xt, _ = mech.release(np.tile(x, (n, 1)), np.full(n, c), rng=rng(21))
    for j in range(2):
        rows = ~np.isnan(Xt[:, j])
        U = mech.unbiased_pair_table(j, Xt[rows, j])  # (n_j, k_j, C)
        assert U.shape == (rows.sum(), mech.n_states[j], 2)
        target = np.zeros((mech.n_states[j], 2))
        target[x[j], c] = 1.0
        se = U.std(axis=0) / math.sqrt(U.shape[0])
        assert np.all(np.abs(U.mean(axis=0) - target) < Z_TOL * se), (U.mean(axis=0), target)


def test_pair_log_likelihood_is_the_likelihood_table():
    """pair_log_likelihood(j, x̃_j)[s, c] + log(1/C(F, m)) = log_likelihood of the record with x_j = s, y = c
    (other attributes do not enter); pair_log_likelihoods groups the rows per attribute."""
    mech = PairedRecordMechanism([2, 3, 5], 3, 1.0)
    X = rng(1).integers(0, [2, 3, 5], size=(50, 3))
    y = rng(2).integers(0, 3, size=50)
    Xt, yt = mech.release(X, y, rng=rng(3))
    groups = mech.pair_log_likelihoods(Xt)
    assert sorted(np.concatenate([r for r, _ in groups]).tolist()) == list(range(50))
    log_pi = -math.log(3)
    for j, (rows, T) in enumerate(groups):
        assert T.shape == (rows.size, mech.n_states[j], 3)
        for i_local, i in enumerate(rows[:5]):
            for s in range(mech.n_states[j]):
                for c in range(3):
                    Xc = X[i].copy()
                    Xc[j] = s
                    ll = mech.log_likelihood(Xt[i : i + 1], yt[i : i + 1], Xc[None], [c])[0]
                    assert T[i_local, s, c] + log_pi == pytest.approx(ll, abs=1e-12)


# ----------------------------------------------------------------------------- contract
def test_auto_picks_the_least_variance_oracle_per_attribute():
    for eps in (0.5, 1.0, 2.0, 4.0):
        for m in (1, 2):
            ks = [2, 7, 16, 41]
            mech = PairedRecordMechanism(ks, 2, eps, n_sampled=m)
            for k, o in zip(ks, mech.oracles):
                assert o == frequency_oracle(2 * k, eps / m)
    # at ε 1 a 41-state attribute's 82 pairs go to OLH (OUE is limited to 52 values), a binary one's to RR
    mech = PairedRecordMechanism([2, 41], 2, 1.0)
    assert isinstance(mech.oracles[0], RandomizedResponse) and isinstance(mech.oracles[1], LocalHashing)


def test_spec_round_trip_equality_and_hash():
    for mech in (
        PairedRecordMechanism([2, 3, 41], 2, 1.0),
        PairedRecordMechanism([4, 5], 3, 2.0, n_sampled=2, oracle="oue"),
        PairedRecordMechanism([2, 3], 2, 0.5, oracle=["olh", "rr"]),
    ):
        spec = json.loads(json.dumps(mech.to_spec()))
        back = mechanism_from_spec(spec)
        assert isinstance(back, PairedRecordMechanism) and back == mech and hash(back) == hash(mech)
        assert back.epsilon == mech.epsilon and back.oracles == mech.oracles
    auto = PairedRecordMechanism([2, 41], 2, 1.0)
    assert auto == PairedRecordMechanism([2, 41], 2, 1.0, oracle=["rr", "olh"])
    assert auto != PairedRecordMechanism([2, 41], 2, 1.0, oracle="olh")
    assert auto != PairedRecordMechanism([2, 41], 2, 2.0)


def test_epsilon_and_breakdown():
    mech = PairedRecordMechanism([2, 3, 4], 2, 3.0, n_sampled=3, oracle="rr")
    assert mech.delta == 0.0
    assert mech.epsilon == pytest.approx(3.0, abs=1e-12)
    b = mech.epsilon_breakdown()
    assert b["record"] == b["features"] == mech.epsilon and b["label"] == 0.0
    assert b["n_sampled"] == 3 and b["n_fields"] == 3
    np.testing.assert_allclose(b["per_pair"], 1.0, atol=1e-12)


def test_release_is_reproducible_and_needs_a_generator():
    mech = PairedRecordMechanism([2, 3, 41], 2, 1.0)
    X = rng(0).integers(0, [2, 3, 41], size=(100, 3))
    y = rng(1).integers(0, 2, size=100)
    a, _ = mech.release(X, y, rng=rng(5))
    b, _ = mech.release(X, y, rng=rng(5))
    np.testing.assert_array_equal(a, b)
    mech.validate_release(a)
    with pytest.raises(ValidationError) as e:
        mech.release(X, y, rng=5)
    assert e.value.field == "rng"


def _bad_release():
    mech = PairedRecordMechanism([2, 3], 2, 1.0, oracle="rr")
    ok = np.array([[1.0, np.nan], [np.nan, 5.0]])
    mech.validate_release(ok, np.full(2, np.nan))
    mech.validate_release(ok, None)
    return mech, ok


@pytest.mark.parametrize(
    "make_call, field, words",
    [
        (lambda m, ok: m.validate_release(np.array([[4.0, np.nan]])), "X_tilde", "column 0"),  # RR on 4 values
        (lambda m, ok: m.validate_release(np.array([[np.nan, 6.0]])), "X_tilde", "column 1"),  # 6 ∉ [0, 6)
        (lambda m, ok: m.validate_release(np.array([[0.5, np.nan]])), "X_tilde", "column 0"),
        (lambda m, ok: m.validate_release(np.array([[1.0, 2.0]])), "X_tilde", "releases 2 attributes"),
        (lambda m, ok: m.validate_release(np.array([[np.nan, np.nan]])), "X_tilde", "releases 0 attributes"),
        (lambda m, ok: m.validate_release(np.array([[np.inf, np.nan]])), "X_tilde", "inf"),
        (lambda m, ok: m.validate_release(np.ones((2, 3))), "X_tilde", "shape"),
        (lambda m, ok: m.validate_release(ok, np.array([0.0, np.nan])), "y_tilde", "NaN"),
        (lambda m, ok: m.validate_release(ok, np.zeros(2, dtype=int)), "y_tilde", "NaN"),
        (lambda m, ok: m.validate_release(ok, np.full(3, np.nan)), "y_tilde", "shape"),
        (lambda m, ok: m.release([[2, 0]], [0], rng=rng(0)), "X", "{0, ..., 1}"),
        (lambda m, ok: m.release([[1, 0]], [2], rng=rng(0)), "y", "{0, ..., 1}"),
        (lambda m, ok: m.release([[1, 0]], None, rng=rng(0)), "y", "required"),
        (lambda m, ok: m.log_likelihood(ok, None, [[1, 0]], [0]), "X", "one clean record per release"),
        (lambda m, ok: m.pair_log_likelihood(2, [0.0]), "j", "<= 1"),
    ],
)
def test_validation_errors_name_the_field(make_call, field, words):
    mech, ok = _bad_release()
    with pytest.raises(ValidationError) as e:
        make_call(mech, ok)
    assert e.value.field == field and words in str(e.value), str(e.value)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"n_states": 3}, "n_states"),
        ({"n_states": []}, "n_states"),
        ({"n_states": [2, 1]}, "n_states[1]"),
        ({"n_states": [2, 2.5]}, "n_states[1]"),
        ({"n_classes": 1}, "n_classes"),
        ({"epsilon": None}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"n_sampled": 3}, "n_sampled"),
        ({"n_sampled": 0}, "n_sampled"),
        ({"oracle": "laplace"}, "oracle"),
        ({"oracle": ["rr"]}, "oracle"),
        ({"n_states": [2, 30], "oracle": "oue"}, "oracle"),  # 60 pairs > 52 unary bits
    ],
)
def test_constructor_rejects(kwargs, field):
    args = {"n_states": [2, 3], "n_classes": 2, "epsilon": 1.0} | kwargs
    with pytest.raises(ValidationError) as e:
        PairedRecordMechanism(args.pop("n_states"), args.pop("n_classes"), args.pop("epsilon"), **args)
    assert e.value.field == field, str(e.value)


def test_from_spec_rejects_a_missing_or_inconsistent_entry():
    spec = PairedRecordMechanism([2, 3], 2, 1.0).to_spec()
    assert spec["n_features"] == 2  # what a pool checks a spec's width by, as for RecordMechanism
    with pytest.raises(ValidationError) as e:
        mechanism_from_spec(spec | {"n_features": 3})
    assert e.value.field == "spec.n_features"
    del spec["n_sampled"]
    with pytest.raises(ValidationError) as e:
        mechanism_from_spec(spec)
    assert e.value.field == "spec.n_sampled"


# ----------------------------------------------------------------------------- DP audit
N_THRESHOLD_INTERVALS = 4 * (2 * 24 + 4)


def test_audit_certifies_the_claim_and_catches_half_a_claim():
    """One pair by RR (k 2, 3, 4; C 2; ε 1): on the default records every pair differs, the set
    {LLR = ε} has P(S | r) = keep, P(S | r') = other; n from samples_needed certifies ≥ 0.8ε with
    probability ≥ 1 − 1e-3, and the same release claiming ε/2 fails at that n."""
    mech = PairedRecordMechanism([2, 3, 4], 2, 1.0, oracle="rr")
    o = mech.oracles[0]
    n = samples_needed(
        o.keep_prob, o.other_prob, 0.8, n_intervals=N_THRESHOLD_INTERVALS, alpha=DEFAULT_ALPHA, miss=1e-3
    )
    n = int(math.ceil(n / 0.9)) + 2
    res = audit_mechanism(mech, n_samples=n, rng=rng(31))
    assert res.passed and res.exact_epsilon == pytest.approx(1.0, abs=1e-9)
    assert 0.8 <= res.epsilon_lower_bound <= 1.0, res.summary()
    bad = audit_paired(HalfClaimPaired([2, 3, 4], 2, 1.0, oracle="rr"), n_samples=n, rng=rng(32))
    assert not bad.passed and bad.exact_epsilon == pytest.approx(1.0, abs=1e-9), bad.summary()


def test_audit_rejects_bad_pairs():
    mech = PairedRecordMechanism([2, 3], 2, 1.0)
    with pytest.raises(ValidationError) as e:
        audit_paired(mech, n_samples=100, rng=rng(0), pair=(([0, 0], 0), ([0, 0], 0)))
    assert e.value.field == "pair"
    with pytest.raises(ValidationError) as e:
        audit_paired(mech, n_samples=100, rng=rng(0), pair=(([0, 3], 0), ([0, 0], 1)))
    assert e.value.field == "pair[0]"


def test_audit_suite_covers_paired_releases():
    cases = [c for c in standard_cases(quick=True) if "paired" in c.name]
    assert len(cases) == 5 and sum(not c.expect_pass for c in cases) == 1
    rows = run_cases(cases, seed=3)
    assert all(r["as_expected"] for r in rows), [r["result"] for r in rows]


def test_attributes_with_equal_domains_share_one_oracle():
    """A million-attribute spec builds one oracle per distinct (k_j·C, oracle) (a spec cannot make the
    server build a million oracles)."""
    mech = PairedRecordMechanism([2, 3] * 500_000, 2, 1.0)
    assert mech.oracles[0] is mech.oracles[2] and mech.oracles[1] is mech.oracles[3]
    assert len({id(o) for o in mech.oracles}) == 2


def test_harden_keeps_a_paired_release():
    """``harden`` (what a client applies to the mechanism it is sent) returns a paired release as is."""
    from fedrr.mechanisms import harden

    mech = PairedRecordMechanism([2, 3], 2, 1.0)
    assert harden(mech) is mech and harden(mech, strict=True) is mech
