"""Frequency oracles beyond randomised response: optimized unary encoding (OUE), optimized local
hashing (OLH) and the choice between them (Wang, Blocki, Li & Jha, USENIX Security 2017).

Every probability formula is checked against brute force: the pmf by enumerating every output
(normalisation, ε as the largest log-ratio, the likelihood matrix), OLH's collision probability by
enumerating every (a, b) of the hash family, the release distribution by a chi-square test
(fixed seed, level ALPHA = 1e-3, every expected count >= 5), unbiasedness and variances by Monte
Carlo with tolerances of Z_TOL standard errors (fixed seeds; a correct implementation fails a
single z-check with probability < 1e-4 for a random seed).
"""

from __future__ import annotations

import itertools
import json
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedrr.errors import ValidationError
from fedrr.estimators import estimate_frequencies
from fedrr.mechanisms import (
    LocalHashing,
    RandomizedResponse,
    TransitionMatrix,
    UnaryEncoding,
    frequency_oracle,
    mechanism_from_spec,
    unbiased_onehot_covariance,
)
from fedrr.mechanisms._hashing import collision_probability, is_prime, next_prime
from fedrr.mechanisms._oracles import candidates, rare_value_variance

ALPHA = 1e-3
Z_TOL = 4.0


def all_outputs(mech) -> np.ndarray:
    if isinstance(mech, UnaryEncoding):
        return np.arange(2**mech.k, dtype=float)
    return np.arange(mech.n_seeds * mech.g, dtype=float)


def brute_pmf(mech) -> np.ndarray:
    """P[o, s] = p(output o | x = s) from first principles (not from the class's likelihood)."""
    outs = all_outputs(mech).astype(np.int64)
    k = mech.k
    P = np.empty((outs.size, k))
    if isinstance(mech, UnaryEncoding):
        for o in outs:
            b = [(int(o) >> j) & 1 for j in range(k)]
            for s in range(k):
                pr = 1.0
                for j in range(k):
                    pj = mech.p if j == s else mech.q
                    pr *= pj if b[j] else 1 - pj
                P[o, s] = pr
        return P
    for o in outs:
        seed, y = divmod(int(o), mech.g)
        a, b = 1 + seed // mech.prime, seed % mech.prime
        for s in range(k):
            h = ((a * s + b) % mech.prime) % mech.g
            P[o, s] = (mech.p if h == y else (1 - mech.p) / (mech.g - 1)) / mech.n_seeds
    return P


SMALL = [
    ("oue2_e1", lambda: UnaryEncoding(2, 1.0)),
    ("oue5_e0.5", lambda: UnaryEncoding(5, 0.5)),
    ("oue8_e3", lambda: UnaryEncoding(8, 3.0)),
    ("olh3_e1", lambda: LocalHashing(3, 1.0)),
    ("olh5_e1", lambda: LocalHashing(5, 1.0)),
    ("olh7_e2_g3", lambda: LocalHashing(7, 2.0, g=3)),
    ("olh4_e0.3_g9", lambda: LocalHashing(4, 0.3, g=9)),  # g > P: an injective hash, c = 0
]


@pytest.mark.parametrize("name, make", SMALL, ids=[s[0] for s in SMALL])
def test_pmf_by_enumeration_normalised_epsilon_and_likelihood_matrix(name, make):
    """Over every output: the brute-force pmf sums to 1 for every input; exp(log_likelihood_matrix)
    and exp(log_likelihood) equal it (1e-12); ``epsilon`` is the largest log-ratio over outputs and
    pairs (1e-12) and within 1e-12 of the requested ε (the 2⁻⁵³ grid rounding)."""
    mech = make()
    P = brute_pmf(mech)
    assert np.allclose(P.sum(axis=0), 1.0, atol=1e-12)
    outs = all_outputs(mech)
    L = mech.log_likelihood_matrix(outs)
    assert L.shape == (outs.size, mech.k)
    assert np.allclose(np.exp(L), P, rtol=1e-12, atol=0)
    ll = mech.log_likelihood(outs[:, None], np.arange(mech.k)[None, :])
    assert np.allclose(ll, L, rtol=0, atol=1e-12)
    lp = np.log(P)
    eps = float(np.max(lp.max(axis=1) - lp.min(axis=1)))
    assert mech.epsilon == pytest.approx(eps, abs=1e-12)
    assert abs(mech.epsilon - mech.to_spec()["epsilon"]) <= 1e-12


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0, 12.0])
def test_oue_epsilon_identity(eps):
    """ε = ln(p(1 − q)/((1 − p)q)) with p = ½, q = 1/(e^ε + 1) (Wang et al. §4.3), and the realised q is
    the grid value just above it (never a larger ε)."""
    m = UnaryEncoding(10, eps)
    q = 1 / (math.exp(eps) + 1)
    assert m.p == 0.5 and q <= m.q <= q + 2**-53
    assert math.log(m.p * (1 - m.q) / ((1 - m.p) * m.q)) == pytest.approx(eps, rel=1e-9)
    exact = exact_ln(Fraction(1) - Fraction(m.q)) - exact_ln(Fraction(m.q))  # ln((1 − q)/q), 40 digits
    assert exact <= Decimal(m.epsilon) <= exact * Decimal(1 + 1e-14)  # stated ε: an upper bound, tight
    assert m.epsilon <= eps * (1 + 1e-14)
    h = LocalHashing(30, eps)
    exact = exact_ln(Fraction(h.p) * (h.g - 1)) - exact_ln(1 - Fraction(h.p))
    assert exact <= Decimal(h.epsilon) <= exact * Decimal(1 + 1e-14) and h.epsilon <= eps * (1 + 1e-14)


def exact_ln(r: Fraction) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 40
        return (Decimal(r.numerator) / Decimal(r.denominator)).ln()


def pooled_chisquare(counts: np.ndarray, expected: np.ndarray) -> float:
    """Chi-square p-value with every cell of expected count < 5 pooled into one cell."""
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("name, make", SMALL, ids=[s[0] for s in SMALL])
def test_release_distribution_chisquare(name, make):
    """Releases at two inputs match the brute-force pmf by chi-square (cells of expected count < 5
    pooled)."""
    mech = make()
    P = brute_pmf(mech)
    rng = np.random.default_rng(11)
    n = 40_000
    for x in (0, mech.k - 1):
        out = mech.release(np.full(n, x), rng)
        assert out.dtype == float and np.all(out == np.round(out))
        counts = np.bincount(out.astype(np.int64), minlength=P.shape[0])
        assert counts.size == P.shape[0]
        assert pooled_chisquare(counts, n * P[:, x]) > ALPHA


def per_report_variance(mech) -> tuple[float, float]:
    """Exact variances of one unbiased_onehot entry: (at s = x, at s ≠ x)."""
    if isinstance(mech, UnaryEncoding):
        a, b = mech.p, mech.q
    else:
        a, b = mech.p, mech.q_star
    return a * (1 - a) / (a - b) ** 2, b * (1 - b) / (a - b) ** 2


@pytest.mark.parametrize(
    "make", [lambda: UnaryEncoding(6, 1.0), lambda: LocalHashing(6, 1.0), lambda: LocalHashing(40, 2.0)]
)
def test_unbiased_onehot_is_unbiased_monte_carlo(make):
    """mean of unbiased_onehot over n releases of x = e_x within Z_TOL standard errors (per-entry
    variances from the exact Bernoulli probabilities)."""
    mech = make()
    rng = np.random.default_rng(5)
    n = 200_000
    x = 2
    est = mech.unbiased_onehot(mech.release(np.full(n, x), rng)).mean(axis=0)
    v_own, v_other = per_report_variance(mech)
    se = np.sqrt(np.where(np.arange(mech.k) == x, v_own, v_other) / n)
    z = (est - np.eye(mech.k)[x]) / se
    assert np.max(np.abs(z)) < Z_TOL, z


def test_olh_naive_one_over_g_estimator_is_biased():
    """With the paper's q* = 1/g (an ideal hash) the estimate of a state s ≠ x is biased for this hash
    family: k = 5 (P = 5), g = 4 has c = 1/10, not 1/4, and the bias (q*_exact − 1/g)/(p − 1/g) ≈ −0.2 is
    seen at > 30 standard errors, while the exact constants give |z| < Z_TOL. Shows the Monte-Carlo
    test above has the power to catch a wrong collision probability."""
    mech = LocalHashing(5, 1.0)
    assert mech.collision == Fraction(1, 10)
    rng = np.random.default_rng(6)
    n = 200_000
    xt = mech.release(np.zeros(n, dtype=np.int64), rng)
    hit = mech.unbiased_onehot(xt) * (mech.p - mech.q_star) + mech.q_star  # the indicator 1{H(s) = y}
    naive = (hit - 1 / mech.g) / (mech.p - 1 / mech.g)
    _, v_other = per_report_variance(mech)
    se = math.sqrt(v_other / n)
    assert abs(mech.unbiased_onehot(xt)[:, 3].mean()) / se < Z_TOL
    assert abs(naive[:, 3].mean()) / se > 30


@pytest.mark.parametrize("P, g", [(2, 2), (5, 4), (7, 3), (11, 4), (13, 13), (5, 9), (17, 5)])
def test_collision_probability_by_enumerating_the_family(P, g):
    """c = Σ n_r(n_r − 1)/(P(P − 1)) equals the fraction of (a, b) ∈ [1, P) × [0, P) with H(s) = H(x), for
    every pair s ≠ x < P (exact rational arithmetic)."""
    c = collision_probability(P, g)
    for s, x in itertools.permutations(range(P), 2):
        hits = sum(((a * s + b) % P) % g == ((a * x + b) % P) % g for a in range(1, P) for b in range(P))
        assert Fraction(hits, P * (P - 1)) == c
    if g < P:
        assert c < Fraction(1, g)  # the family collides less than an ideal hash


def test_primes_and_hash_vectorised():
    """next_prime/is_prime against trial division; the vectorised hash against pure Python."""

    def trial(n):
        return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))

    assert [n for n in range(200) if is_prime(n)] == [n for n in range(200) if trial(n)]
    assert is_prime(2**31 - 1) and not is_prime(2**31 + 1) and next_prime(100) == 101
    mech = LocalHashing(50, 1.5)
    seeds = np.random.default_rng(0).integers(0, mech.n_seeds, 40)
    H = mech.hash(seeds[:, None], np.arange(50))
    for i, sd in enumerate(seeds):
        a, b = 1 + int(sd) // mech.prime, int(sd) % mech.prime
        assert H[i].tolist() == [((a * s + b) % mech.prime) % mech.g for s in range(50)]


@pytest.mark.parametrize(
    "make",
    [lambda: RandomizedResponse(6, epsilon=1.0), lambda: UnaryEncoding(6, 1.0), lambda: LocalHashing(6, 1.0)],
)
def test_unbiased_onehot_covariance_monte_carlo(make):
    """unbiased_onehot_covariance(π) is the covariance of one report's unbiased_onehot over records
    drawn from π: every entry within Z_TOL s.e. of 400,000 reports' (s.e. from the products' sample
    variance); its diagonal is frequency_variance(1, π). OLH's off-diagonal entries are not an ideal
    hash's: the seeds are averaged exactly."""
    mech = make()
    pi = np.array([0.35, 0.25, 0.2, 0.1, 0.1, 0.0])
    rng = np.random.default_rng(10)
    N = 400_000
    u = mech.unbiased_onehot(mech.release(rng.choice(6, size=N, p=pi), rng)) - pi
    prod = u[:, :, None] * u[:, None, :]
    emp, se = prod.mean(axis=0), prod.std(axis=0) / np.sqrt(N)
    V = unbiased_onehot_covariance(mech, pi)
    assert np.max(np.abs(emp - V) / np.maximum(se, 1e-12)) < Z_TOL
    np.testing.assert_allclose(np.diag(V), mech.frequency_variance(1, pi), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("k, eps", [(6, 0.5), (30, 4.0), (82, 1.0)])
def test_olh_covariance_by_collision_tensors_equals_the_sum_over_seeds(monkeypatch, k, eps):
    """OLH's support moments are linear in π: through the hash family's collision tensors (built once)
    they equal the sum over every seed at each π to 1e-13; beyond the tensors' budget the sum is taken
    (``onehot_covariance_is_cheap`` says which)."""
    from fedrr.mechanisms import _oracles, onehot_covariance_is_cheap

    mech = LocalHashing(k, eps)
    rng = np.random.default_rng(k)
    pis = [rng.dirichlet(np.ones(k)) for _ in range(3)]
    assert onehot_covariance_is_cheap(mech) and onehot_covariance_is_cheap(RandomizedResponse(k, epsilon=eps))
    fast = [unbiased_onehot_covariance(mech, pi) for pi in pis]
    monkeypatch.setattr(_oracles, "COLLISION_BUDGET", 0)
    assert not onehot_covariance_is_cheap(mech)
    for pi, V in zip(pis, fast):
        np.testing.assert_allclose(V, unbiased_onehot_covariance(mech, pi), rtol=0, atol=1e-13 * np.abs(V).max())


@pytest.mark.parametrize("make", [lambda: UnaryEncoding(4, 1.0), lambda: LocalHashing(4, 1.0)])
def test_frequency_variance_monte_carlo(make):
    """frequency_variance(1, π)[s] equals the empirical variance of one report's unbiased_onehot
    entry over records drawn from π (z-test with the sample variance's standard error from the
    fourth moment); frequency_variance(n) = frequency_variance(1)/n."""
    mech = make()
    pi = np.array([0.5, 0.3, 0.2, 0.0])
    rng = np.random.default_rng(9)
    N = 400_000
    x = rng.choice(4, size=N, p=pi)
    u = mech.unbiased_onehot(mech.release(x, rng))
    v = mech.frequency_variance(1, pi)
    d = u - u.mean(axis=0)
    emp = (d**2).mean(axis=0)
    se = np.sqrt(((d**4).mean(axis=0) - emp**2) / N)
    assert np.max(np.abs(emp - v) / se) < Z_TOL
    assert np.allclose(mech.frequency_variance(50, pi), v / 50, rtol=1e-14)


def test_oue_bits_round_trip_and_decode():
    """bits() unpacks what release packed: bit x is set about half the time, and decode returns a
    state whose bit is set (the lowest) or 0 when no bit is set."""
    mech = UnaryEncoding(7, 2.0)
    rng = np.random.default_rng(1)
    out = mech.release(np.full((300, 2), 3), rng)
    b = mech.bits(out)
    assert b.shape == (300, 2, 7) and b.dtype == bool
    assert np.array_equal((b * 2.0 ** np.arange(7)).sum(-1), out)
    d = mech.decode(out)
    assert np.all(np.where(b.any(-1), b[np.arange(300)[:, None], np.arange(2)[None, :], d], d == 0))


def test_discrete_posterior_of_oracles_matches_enumeration():
    """The generic exact posterior p(x | x̃) ∝ π(x) p(x̃ | x) of OUE and OLH equals enumeration."""
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    for mech in (UnaryEncoding(4, 1.0), LocalHashing(4, 1.0)):
        P = brute_pmf(mech)
        outs = all_outputs(mech)[:: max(1, len(P) // 50)]
        post = mech.posterior(outs, pi).proba()
        want = P[outs.astype(int)] * pi
        assert np.allclose(post, want / want.sum(1, keepdims=True), atol=1e-12)


# ----------------------------------------------------------------------------- validation and specs
@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: UnaryEncoding(53, 1.0), "k"),
        (lambda: UnaryEncoding(1, 1.0), "k"),
        (lambda: UnaryEncoding(True, 1.0), "k"),
        (lambda: UnaryEncoding(4, 0.0), "epsilon"),
        (lambda: UnaryEncoding(4, math.nan), "epsilon"),
        (lambda: UnaryEncoding(4, 31.0), "epsilon"),
        (lambda: UnaryEncoding(4, 1e-17), "epsilon"),  # q rounds to 1/2: no ε left
        (lambda: LocalHashing(1, 1.0), "k"),
        (lambda: LocalHashing(4, 1.0, g=1), "g"),
        (lambda: LocalHashing(4, 1.0, g=2.0), "g"),
        (lambda: LocalHashing(10**8, 1.0), "k"),  # P(P−1)g ≥ 2^53
        (lambda: LocalHashing(1000, 1.0, g=10**10), "g"),
        (lambda: LocalHashing(4, "1"), "epsilon"),
    ],
)
def test_constructor_validation(call, field):
    with pytest.raises(ValidationError) as e:
        call()
    assert e.value.field == field


def test_oue_k_above_52_points_to_local_hashing():
    with pytest.raises(ValidationError, match="LocalHashing"):
        UnaryEncoding(60, 1.0)


@pytest.mark.parametrize(
    "mech, bad",
    [
        (UnaryEncoding(4, 1.0), [16.0]),
        (UnaryEncoding(4, 1.0), [-1.0]),
        (UnaryEncoding(4, 1.0), [1.5]),
        (UnaryEncoding(4, 1.0), [math.nan]),
        (UnaryEncoding(4, 1.0), [True]),
        (UnaryEncoding(4, 1.0), ["3"]),
        (LocalHashing(5, 1.0), [20.0 * 4]),  # n_seeds·g = 80 is one past the last release
        (LocalHashing(5, 1.0), [math.inf]),
        (LocalHashing(5, 1.0), [[1.0, 2.5]]),
    ],
)
def test_validate_release_rejects_impossible_releases(mech, bad):
    with pytest.raises(ValidationError) as e:
        mech.validate_release(bad)
    assert e.value.field == "x_tilde"
    with pytest.raises(ValidationError):
        mech.log_likelihood_matrix(bad)


def test_specs_round_trip_and_default_g():
    """Specs rebuild equal mechanisms through JSON; g = ⌊e^ε + ½⌋ + 1 by default (≥ 2)."""
    for mech in (UnaryEncoding(9, 0.7), LocalHashing(100, 2.5), LocalHashing(7, 0.2, g=5)):
        again = mechanism_from_spec(json.loads(json.dumps(mech.to_spec())))
        assert again == mech and again.epsilon == mech.epsilon
        x = np.arange(mech.k)
        assert np.array_equal(mech.release(x, np.random.default_rng(3)), again.release(x, np.random.default_rng(3)))
    for eps, g in [(0.1, 2), (0.4, 2), (0.45, 3), (1.0, 4), (2.0, 8), (np.log(2.5), 4)]:
        assert LocalHashing(10, eps).g == g
    assert UnaryEncoding(4, 1.0) != UnaryEncoding(4, 1.1) and LocalHashing(4, 1.0) != LocalHashing(4, 1.0, g=3)


# ----------------------------------------------------------------------------- oracle choice
def rare_variance_public(mech) -> float:
    """Var* through the public frequency_variance: the variance at state 1 when π puts all mass on 0."""
    pi = np.zeros(mech.k)
    pi[0] = 1.0
    return float(mech.frequency_variance(1, pi)[1])


KS = (2, 3, 5, 8, 10, 11, 20, 24, 25, 40, 52, 53, 80, 200)
GRID = [(k, eps) for eps in (0.25, 0.5, 1.0, 2.0, 3.0, 4.0) for k in KS]


@pytest.mark.parametrize("k, eps", GRID)
def test_variance_rule_picks_the_smallest_frequency_variance(k, eps):
    """frequency_oracle(k, ε) has the smallest public frequency_variance of a rare value among every
    oracle that can be built (RR, OUE when k ≤ 52, OLH); rare_value_variance equals it (1e-10)."""
    chosen = frequency_oracle(k, eps)
    cands = candidates(k, eps)
    v = [rare_variance_public(m) for m in cands]
    assert [rare_value_variance(m) for m in cands] == pytest.approx(v, rel=1e-10)
    assert rare_variance_public(chosen) <= min(v) * (1 + 1e-12)
    assert chosen in cands and chosen.epsilon <= eps * (1 + 1e-14)


@pytest.mark.parametrize("k, eps", GRID)
def test_wang_rule_thresholds_and_rr_versus_oue(k, eps):
    """rule="wang": RR iff k < 3e^ε + 2, else OUE (k ≤ 52) or OLH. Between RR and OUE — the pair the
    paper's threshold compares — it is exactly the smaller frequency_variance, and Wang's closed
    forms Var*_RR = (e^ε + k − 2)/(e^ε − 1)², Var*_OUE = 4e^ε/(e^ε − 1)² hold (1e-9)."""
    m = frequency_oracle(k, eps, rule="wang")
    rr = RandomizedResponse(k, epsilon=eps)
    e = math.exp(eps)
    assert rare_variance_public(rr) == pytest.approx((e + k - 2) / (e - 1) ** 2, rel=1e-9)
    if k < 3 * e + 2:
        assert isinstance(m, RandomizedResponse)
    elif k <= 52:
        assert isinstance(m, UnaryEncoding)
        assert rare_variance_public(m) == pytest.approx(4 * e / (e - 1) ** 2, rel=1e-9)
    else:
        assert isinstance(m, LocalHashing)
    if k <= 52:
        oue = UnaryEncoding(k, eps)
        assert (rare_variance_public(rr) < rare_variance_public(oue)) == (k < 3 * e + 2)


def test_oracle_choice_validation_and_large_domains():
    """Bad arguments are named; a huge domain gets RR or OLH, whichever has the smaller Var*."""
    for call, field in [
        (lambda: frequency_oracle(1, 1.0), "k"),
        (lambda: frequency_oracle(5, -1.0), "epsilon"),
        (lambda: frequency_oracle(5, 1.0, rule="best"), "rule"),
    ]:
        with pytest.raises(ValidationError) as e:
            call()
        assert e.value.field == field
    assert isinstance(frequency_oracle(10**6, 1.0), LocalHashing)
    assert isinstance(frequency_oracle(10**6, 40.0), RandomizedResponse)  # beyond OLH's ε range


# ----------------------------------------------------------------------------- frequency estimation
def test_generic_inversion_equals_the_matrix_path_for_rr_and_tm():
    """The oracle-generic inversion (mean of unbiased_onehot) equals today's P⁻¹f̃ for matrix oracles."""
    from fedrr.estimators import project_to_simplex
    from fedrr.estimators._frequencies import _mean_onehot

    rng = np.random.default_rng(13)
    for mech in (RandomizedResponse(6, epsilon=1.0), TransitionMatrix(rng.dirichlet(np.full(4, 3.0), 4).T)):
        xt = mech.release(rng.integers(0, mech.k, 5000), rng)
        w = rng.uniform(0, 2, 5000)
        for ww in (None, w):
            generic = project_to_simplex(_mean_onehot(mech, xt, ww))
            assert np.allclose(generic, estimate_frequencies(xt, mech, weights=ww), atol=1e-12, rtol=0)


PI6 = np.array([0.3, 0.25, 0.2, 0.15, 0.1, 0.0])


@pytest.mark.parametrize("make", [lambda: UnaryEncoding(6, 1.0), lambda: LocalHashing(6, 1.0)])
def test_estimate_frequencies_for_oue_and_olh(make):
    """inversion: within Z_TOL sd (from frequency_variance) of π; weights = repeats; mle: on the simplex,
    certified duality gap ≤ 1e-9, likelihood ≥ the inversion estimate's and 200 random points'; the
    Newton and EM solvers agree (1e-6)."""
    import fedrr.estimators._frequencies as fq

    mech = make()
    rng = np.random.default_rng(14)
    n = 40_000
    xt = mech.release(rng.choice(6, size=n, p=PI6), rng)
    inv = estimate_frequencies(xt, mech)
    assert np.all(np.abs(inv - PI6) < Z_TOL * np.sqrt(mech.frequency_variance(n, PI6)) + 1e-12)
    idx = rng.integers(0, n, 300)
    w = rng.integers(1, 4, 300)
    assert np.allclose(
        estimate_frequencies(xt[idx], mech, weights=w), estimate_frequencies(np.repeat(xt[idx], w), mech), atol=1e-12
    )
    mle = estimate_frequencies(xt, mech, method="mle")
    assert np.all(mle >= 0) and mle.sum() == pytest.approx(1.0, abs=1e-12)
    values, inverse = np.unique(xt, return_inverse=True)
    f = np.bincount(inverse, minlength=values.size) / n
    A = np.exp(mech.log_likelihood_matrix(values))
    loglik = lambda p: float(f @ np.log(A @ p))  # noqa: E731
    assert np.max(A.T @ (f / (A @ mle))) - 1 <= 1e-9
    assert loglik(mle) >= loglik(inv) - 1e-12
    assert all(loglik(mle) >= loglik(p) for p in rng.dirichlet(np.ones(6), 200))
    old = fq.NEWTON_MAX_WORK
    try:
        fq.NEWTON_MAX_WORK = 0
        em = estimate_frequencies(xt, mech, method="mle", tol=1e-9, max_iter=200_000)
    finally:
        fq.NEWTON_MAX_WORK = old
    assert np.allclose(em, mle, atol=1e-4) and loglik(em) >= loglik(mle) - 1e-9


def test_estimate_frequencies_rejects_bad_input():
    mech = UnaryEncoding(4, 1.0)
    for call, field in [
        (lambda: estimate_frequencies([1.0, np.nan], mech), "x_tilde"),
        (lambda: estimate_frequencies([1.0, 2.5], mech), "x_tilde"),
        (lambda: estimate_frequencies([], mech), "x_tilde"),
        (lambda: estimate_frequencies([1.0, 2.0], mech, weights=[0, 0]), "weights"),
        (lambda: estimate_frequencies([1.0, 2.0], mech, weights=[1.0]), "weights"),
        (lambda: estimate_frequencies([1.0, 2.0], mech, method="em"), "method"),
        (lambda: estimate_frequencies([1.0], object()), "mechanism"),
    ]:
        with pytest.raises(ValidationError) as e:
            call()
        assert e.value.field == field
