"""Discrete mechanisms (RandomizedResponse, TransitionMatrix): the sampler matches the likelihood,
and the stated ε is the exact worst-case likelihood ratio.

Statistical level: every goodness-of-fit test below is a chi-square test run with a fixed seed and
must give p > ALPHA = 1e-3 (i.e. a correct sampler fails it with probability 1e-3 for a random seed;
with the fixed seed the outcome is deterministic). Cells are chosen so every expected count is
>= 5, the usual validity condition of the chi-square approximation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedrr.mechanisms import RandomizedResponse, TransitionMatrix, mechanism_from_spec

ALPHA = 1e-3


def likelihood_matrix(mech) -> np.ndarray:
    """L[i, j] = exp(log p(x̃ = i | x = j)) computed only through the public log_likelihood."""
    k = mech.k
    i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    return np.exp(mech.log_likelihood(i, j))


def brute_force_epsilon(mech) -> float:
    """ln max_{i, j, j'} P[i, j] / P[i, j'] by explicit enumeration of all (i, j, j') triples."""
    k = mech.k
    states = np.arange(k)
    best = -np.inf
    for i in range(k):  # loop over the released state keeps memory at O(k^2) for k = 256
        row = mech.log_likelihood(np.full(k, i), states)  # log P[i, j] for all j
        best = max(best, float(np.max(row[:, None] - row[None, :])))
    return best


def chisquare_release(mech, x: int, n: int, rng) -> float:
    """p-value of the chi-square GOF of n releases of the clean value x against exp(log_likelihood)."""
    out = mech.release(np.full(n, x), rng)
    k = mech.k
    probs = np.exp(mech.log_likelihood(np.arange(k), np.full(k, x)))
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    expected = n * probs
    assert expected.min() >= 5, "test design: every expected cell count must be >= 5"
    observed = np.bincount(out, minlength=k)
    assert observed.shape == (k,), "release produced a state outside {0..k-1}"
    return stats.chisquare(observed, expected).pvalue


# --- 1. empirical release distribution == exp(log_likelihood) ------------------------------------


@pytest.mark.parametrize(
    "k, epsilon, xs, n",
    [
        (2, 1.0, [0, 1], 20_000),
        (3, 0.5, [0, 1, 2], 20_000),
        (17, 2.0, [0, 8, 16], 40_000),
        (256, 3.0, [0, 1, 128, 255], 250_000),  # r = 1/(e^3 + 255) ≈ 3.6e-3 -> ≈ 909 expected per other cell
    ],
)
def test_rr_release_matches_log_likelihood(k, epsilon, xs, n):
    rng = np.random.default_rng(1000 + k)
    mech = RandomizedResponse(k, epsilon=epsilon)
    for x in xs:
        p = chisquare_release(mech, x, n, rng)
        assert p > ALPHA, f"k={k}, x={x}: chi-square p={p:.2e}"


@pytest.mark.parametrize("k, flip_prob", [(2, 0.8), (3, 0.9), (5, 0.95)])
def test_rr_release_matches_log_likelihood_when_flip_prob_above_uniform(k, flip_prob):
    # f > (k-1)/k: the report is *less* likely to be the truth than any other value; still valid RR.
    rng = np.random.default_rng(7 + k)
    mech = RandomizedResponse(k, flip_prob)
    for x in range(k):
        p = chisquare_release(mech, x, 20_000, rng)
        assert p > ALPHA, f"k={k}, x={x}: chi-square p={p:.2e}"


ASYM_3x3 = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6]])


@pytest.mark.parametrize(
    "mech",
    [
        TransitionMatrix.binary(0.1, 0.3),
        TransitionMatrix.binary(0.35, 0.05),
        TransitionMatrix(ASYM_3x3),
        TransitionMatrix(ASYM_3x3.T / ASYM_3x3.T.sum(axis=0)),
    ],
    ids=["binary_p10=.1_p01=.3", "binary_p10=.35_p01=.05", "3x3", "3x3_T"],
)
def test_transition_matrix_release_matches_log_likelihood(mech):
    rng = np.random.default_rng(11)
    for x in range(mech.k):
        p = chisquare_release(mech, x, 30_000, rng)
        assert p > ALPHA, f"x={x}: chi-square p={p:.2e}"


def test_binary_transition_matrix_convention():
    # P10 = p(x̃=1 | x=0), P01 = p(x̃=0 | x=1) (Barber §3.2): read back through log_likelihood.
    m = TransitionMatrix.binary(0.1, 0.3)
    assert math.exp(m.log_likelihood(1, 0)) == pytest.approx(0.1, abs=1e-15)
    assert math.exp(m.log_likelihood(0, 1)) == pytest.approx(0.3, abs=1e-15)
    assert math.exp(m.log_likelihood(0, 0)) == pytest.approx(0.9, abs=1e-15)
    assert math.exp(m.log_likelihood(1, 1)) == pytest.approx(0.7, abs=1e-15)


def test_transition_matrix_release_of_rr_matrix_is_the_same_distribution():
    # The general sampler with RR's matrix must give RR's distribution (chi-square two-sample, level 1e-3).
    k, n = 6, 30_000
    rr = RandomizedResponse(k, epsilon=1.0)
    tm = TransitionMatrix(rr.matrix)
    rng = np.random.default_rng(5)
    a = np.bincount(rr.release(np.full(n, 2), rng), minlength=k)
    b = np.bincount(tm.release(np.full(n, 2), rng), minlength=k)
    p = stats.chi2_contingency(np.vstack([a, b]))[1]
    assert p > ALPHA


def test_rr_matrix_is_column_stochastic_and_equals_log_likelihood():
    for k, f in [(2, 0.2), (5, 0.3), (17, 0.99), (256, 0.5)]:
        m = RandomizedResponse(k, f)
        P = m.matrix
        np.testing.assert_allclose(P.sum(axis=0), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(likelihood_matrix(m), P, rtol=1e-14, atol=0)
        assert P[0, 0] == pytest.approx(1 - f, rel=1e-15)
        assert P[1, 0] == pytest.approx(f / (k - 1), rel=1e-15)


def test_release_shape_dtype_and_determinism():
    x = np.array([[0, 1, 2], [2, 2, 0]])
    for mech in [RandomizedResponse(3, epsilon=1.0), TransitionMatrix(ASYM_3x3)]:
        a = mech.release(x, np.random.default_rng(3))
        b = mech.release(x, np.random.default_rng(3))
        assert a.shape == x.shape and a.dtype.kind in "iu"
        assert np.array_equal(a, b), "same seed must give the same release"
        assert a.min() >= 0 and a.max() < 3
        # integer-valued floats are accepted as states
        c = mech.release(x.astype(float), np.random.default_rng(3))
        assert np.array_equal(a, c)
        # scalar in, scalar-shaped out
        assert np.shape(mech.release(1, np.random.default_rng(0))) == ()


def test_rr_release_actually_randomises_and_never_reports_truth_when_flip_prob_near_one():
    # f = 1 - 1e-12: P(truth reported) = 1e-12 per draw, so P(any of 10_000) ≈ 1e-8; and all 3 other
    # values must appear (P(one missing) ≈ 3·(2/3)^10000 ≈ 0).
    m = RandomizedResponse(4, 1 - 1e-12)
    out = m.release(np.zeros(10_000, int), np.random.default_rng(0))
    assert not np.any(out == 0)
    assert set(np.unique(out)) == {1, 2, 3}


# --- 2. stated ε is the exact max likelihood ratio ----------------------------------------------


@pytest.mark.parametrize("k", [2, 3, 17, 256])
@pytest.mark.parametrize("epsilon", [0.01, 0.5, 1.0, 3.0, 10.0])
def test_rr_from_epsilon_states_exact_ratio_and_round_trips(k, epsilon):
    m = RandomizedResponse(k, epsilon=epsilon)
    assert m.epsilon == pytest.approx(epsilon, rel=1e-12)
    assert brute_force_epsilon(m) == pytest.approx(epsilon, rel=1e-12)
    assert m.flip_prob == pytest.approx((k - 1) / (math.exp(epsilon) + k - 1), rel=1e-13)
    # flip_prob -> ε -> flip_prob round trip
    back = RandomizedResponse(k, flip_prob=m.flip_prob)
    assert back.epsilon == pytest.approx(epsilon, rel=1e-12)
    again = RandomizedResponse(k, epsilon=back.epsilon)
    assert again.flip_prob == pytest.approx(m.flip_prob, rel=1e-12)


@pytest.mark.parametrize(
    "k, f",
    [(2, 0.1), (2, 0.49), (2, 0.51), (2, 0.9), (3, 0.2), (3, 0.9), (17, 0.5), (17, 0.99), (256, 0.01), (256, 0.9999)],
)
def test_rr_from_flip_prob_epsilon_is_brute_force_ratio(k, f):
    # includes f > (k-1)/k, where the kept value is the *least* likely report: ε = ln(r/q) then.
    m = RandomizedResponse(k, f)
    expected = abs(math.log((1 - f) * (k - 1) / f))
    assert m.epsilon == pytest.approx(expected, rel=1e-12)
    assert brute_force_epsilon(m) == pytest.approx(m.epsilon, rel=1e-12, abs=1e-15)


def test_rr_flip_prob_above_uniform_has_the_mirror_epsilon():
    # k=2: f and 1-f give the same ε (relabelling the report).
    for f in [0.05, 0.2, 0.4]:
        assert RandomizedResponse(2, f).epsilon == pytest.approx(RandomizedResponse(2, 1 - f).epsilon, rel=1e-12)


@pytest.mark.parametrize(
    "P",
    [
        [[0.9, 0.3], [0.1, 0.7]],
        [[0.65, 0.05], [0.35, 0.95]],
        ASYM_3x3.tolist(),
        [[0.5, 0.2, 0.1, 0.1], [0.2, 0.5, 0.2, 0.1], [0.2, 0.2, 0.6, 0.2], [0.1, 0.1, 0.1, 0.6]],
    ],
)
def test_transition_matrix_epsilon_is_brute_force_ratio(P):
    m = TransitionMatrix(P)
    Pa = np.asarray(P)
    by_hand = max(
        math.log(Pa[i, j] / Pa[i, jj]) for i in range(len(Pa)) for j in range(len(Pa)) for jj in range(len(Pa))
    )
    assert m.epsilon == pytest.approx(by_hand, rel=1e-12)
    assert brute_force_epsilon(m) == pytest.approx(by_hand, rel=1e-12)


def test_asymmetric_binary_epsilon_is_the_larger_row_ratio():
    # P10=0.1, P01=0.3: row x̃=0: 0.9/0.3 = 3; row x̃=1: 0.7/0.1 = 7 -> ε = ln 7, not ln 3.
    assert TransitionMatrix.binary(0.1, 0.3).epsilon == pytest.approx(math.log(7.0), rel=1e-14)


def test_rr_and_its_transition_matrix_agree():
    for k, eps in [(2, 0.7), (5, 2.0), (17, 0.3)]:
        rr = RandomizedResponse(k, epsilon=eps)
        tm = TransitionMatrix(rr.matrix)
        assert tm.epsilon == pytest.approx(rr.epsilon, rel=1e-12)
        i, j = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
        np.testing.assert_allclose(tm.log_likelihood(i, j), rr.log_likelihood(i, j), rtol=0, atol=1e-13)


def test_log_likelihood_broadcasts():
    m = RandomizedResponse(4, 0.3)
    ll = m.log_likelihood(np.arange(4)[:, None], np.arange(4)[None, :])
    assert ll.shape == (4, 4)
    assert np.allclose(np.diag(ll), math.log(0.7)) and ll[0, 1] == pytest.approx(math.log(0.1))


# --- spec round trip (exact) ---------------------------------------------------------------------


def test_rr_spec_round_trip_is_exact():
    for m in [RandomizedResponse(2, 0.25), RandomizedResponse(256, epsilon=3.3), RandomizedResponse(3, 0.9)]:
        back = mechanism_from_spec(m.to_spec())
        assert back == m and back.flip_prob == m.flip_prob and back.epsilon == m.epsilon


def test_transition_matrix_spec_round_trip_is_exact():
    """BUG (pinned): TransitionMatrix.__init__ divides by the column sums, so a matrix whose columns
    sum to 1 ± 1 ulp (0.7 + 0.2 + 0.1 == 0.9999999999999999) changes by an ulp on every
    to_spec -> from_spec pass, and the rebuilt mechanism is != the original."""
    m = TransitionMatrix(ASYM_3x3)
    back = mechanism_from_spec(m.to_spec())
    assert back.to_spec() == m.to_spec()
    assert back == m
