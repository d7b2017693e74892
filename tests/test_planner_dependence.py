"""The planner's dependence term (fedrr/planning/_co_occurrence.py): the variance of one person's
estimate of a three-way cell P(x_j, x_k, y), exact for randomised response and checked by Monte
Carlo for OUE, and the ranking it gives: one attribute per person until n identifies the
attributes' co-occurrence, then two or more."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedrr.mechanisms import RandomizedResponse, UnaryEncoding
from fedrr.planning import DEPENDENCE_TARGET, plan_release
from fedrr.planning import _co_occurrence as CO

KJ, KK, C = 3, 4, 2


def _pi3(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).dirichlet(np.ones(KJ * KK * C)).reshape(KJ, KK, C)


def _rr_second(o: RandomizedResponse) -> np.ndarray:
    """E[û_u² | v] for every (u, v): Σ_r P(r | v)·(P⁻¹)[u, r]²."""
    U = np.linalg.inv(o.matrix)  # U[u, r]
    return (U**2) @ o.matrix


def test_paired_three_way_variance_is_exact_for_randomised_response():
    oj, ok = RandomizedResponse(KJ * C, epsilon=0.9), RandomizedResponse(KK * C, epsilon=1.7)
    pi3 = _pi3(0)
    Gj, Gk = _rr_second(oj), _rr_second(ok)  # pair values s·C + c
    want = np.empty_like(pi3)
    for s in range(KJ):
        for t in range(KK):
            for c in range(C):
                # Σ over the truth (x, x', y) of π·E[û_j(s, c)² | (x, y)]·E[û_k(t, c)² | (x', y)]
                e = sum(
                    pi3[x, xx, y] * Gj[s * C + c, x * C + y] * Gk[t * C + c, xx * C + y]
                    for x in range(KJ)
                    for xx in range(KK)
                    for y in range(C)
                )
                want[s, t, c] = e - pi3[s, t, c] ** 2
    np.testing.assert_allclose(CO.paired_three_way_variance(oj, ok, pi3), want, rtol=1e-10)


def test_split_three_way_variance_is_exact_for_randomised_response():
    oj, ok, lab = RandomizedResponse(KJ, epsilon=0.8), RandomizedResponse(KK, epsilon=1.1), RandomizedResponse(C, 0.6)
    pi3 = _pi3(1)
    Gj, Gk, Gl = _rr_second(oj), _rr_second(ok), _rr_second(lab)
    second = np.einsum("xzy,sx,tz,cy->stc", pi3, Gj, Gk, Gl)
    np.testing.assert_allclose(CO.split_three_way_variance(oj, ok, lab, pi3), second - pi3**2, rtol=1e-10)


def test_paired_three_way_variance_matches_monte_carlo_for_unary_encoding():
    oj, ok = UnaryEncoding(KJ * C, 1.0), UnaryEncoding(KK * C, 1.5)
    pi3 = _pi3(2)
    rng = np.random.default_rng(3)
    n = 200_000
    cell = rng.choice(pi3.size, size=n, p=pi3.ravel())
    x, xx, y = np.unravel_index(cell, pi3.shape)
    uj = oj.unbiased_onehot(oj.release(x * C + y, rng)).reshape(n, KJ, C)
    uk = ok.unbiased_onehot(ok.release(xx * C + y, rng)).reshape(n, KK, C)
    est = uj[:, :, None, :] * uk[:, None, :, :]  # (n, s, t, c): û_j(s, c)·û_k(t, c)
    np.testing.assert_allclose(est.mean(axis=0), pi3, atol=6 * np.sqrt(est.var(axis=0).max() / n))  # unbiased
    var = est.var(axis=0)
    # the sample variance's relative standard error is √((κ − 1)/n), κ the estimate's kurtosis: 0.5-0.55 %
    # in every cell here (measured on these draws), so 2 % is four of it
    np.testing.assert_allclose(var, CO.paired_three_way_variance(oj, ok, pi3), rtol=0.02)


def test_co_occurrence_error_falls_as_one_over_root_n_and_is_infinite_for_one_attribute():
    ks = [3, 5, 2]
    oracles = [RandomizedResponse(k * C, epsilon=2.0) for k in ks]
    tables = [np.full((k, C), 1 / (k * C)) for k in ks]
    assert CO.co_occurrence_error(oracles, tables, 1, 10_000) == math.inf
    r1, r4 = (CO.co_occurrence_error(oracles, tables, 2, n) for n in (10_000, 40_000))
    assert r4 == pytest.approx(r1 / 2, rel=1e-12)
    # all three attributes per person: every pair is seen by everyone, 3× the people of m = 2 (share 1/3)
    assert CO.co_occurrence_error(oracles, tables, 3, 10_000) < r1


def test_the_plan_switches_to_the_triple_once_n_identifies_the_dependence():
    """Adult's attribute sizes at ε 2: by the pair tables' variance alone the plan is one pair at every n;
    with dependence="prefer" it keeps that plan while the three-way tables are too noisy and switches
    to the design that estimates them best, the triple, once n allows, and says so."""
    ks = [8, 6, 3, 2, 5, 7, 7, 14, 6, 5, 2, 41]
    plans = {n: plan_release(ks, 2, 2.0, n, dependence="prefer") for n in (30_000, 10**7)}
    report = {n: plan_release(ks, 2, 2.0, n, dependence="report") for n in plans}  # the variance ranking
    assert {p.best.name() for p in report.values()} == {"paired, m=1"}  # n does not change it
    assert "Dependence identified" not in report[10**7].describe()  # it reports: m = 1 identifies nothing
    assert report[10**7].dependence_design_.identifies_dependence
    small, big = plans[30_000], plans[10**7]
    assert small.best.name() == "paired, m=1" and not small.best.identifies_dependence
    assert big.best.identifies_dependence and big.best.design == "triple"
    assert all(c.design != "triple" or not c.identifies_dependence for c in small.candidates)
    r = small.dependence_design_.co_occurrence_error
    assert big.best.co_occurrence_error <= DEPENDENCE_TARGET < r
    # r ∝ 1/√n: the people it needs, closed form, and the plan at that n identifies it
    need = small.n_needed_for_dependence_
    assert need == math.ceil(30_000 * (r / DEPENDENCE_TARGET) ** 2)
    assert plan_release(ks, 2, 2.0, need, dependence="prefer").best.identifies_dependence
    assert not plan_release(ks, 2, 2.0, int(need * 0.9), dependence="prefer").best.identifies_dependence
    assert "Dependence identified" in big.describe() and "Dependence not identified" in small.describe()


def test_dependence_is_validated():
    from fedrr.errors import ValidationError

    with pytest.raises(ValidationError) as e:
        plan_release([3, 4], 2, 1.0, 1000, dependence="always")
    assert e.value.field == "dependence"
