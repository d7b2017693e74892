"""Cao, Jia & Gong's maximal gain attack (MGA, USENIX Security 2021) in fedrr.fake: the padded OUE
report carries the honest expected number of ones, every target bit and is a valid release; its
debiased gain is the paper's formula (Monte Carlo, fixed seed, tolerance from the standard error);
the k-RR and OLH reports maximise the targets' debiased frequency over every possible report; the
pool's validation accepts the fakes' releases (split, sampled and paired)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.fake import FakeClients, mga_release, padded_ones
from fedrr.mechanisms import (
    LocalHashing,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
    TransitionMatrix,
    UnaryEncoding,
)
from fedrr.pool import validate_release_arrays
from fedrr.population import DatasetPopulation
from fedrr.release import client_generator, offline_release


def _every_release(mech) -> np.ndarray:
    if isinstance(mech, UnaryEncoding):
        return np.arange(2**mech.k, dtype=float)
    if isinstance(mech, LocalHashing):
        return np.arange(mech.n_seeds * mech.g, dtype=float)
    return np.arange(mech.k)


@pytest.mark.parametrize("k, eps", [(10, 0.5), (20, 1.0), (41, 2.0), (52, 4.0), (4, 4.0)])
def test_padded_oue_report_has_the_honest_number_of_ones(k, eps):
    """l = max(r, ⌊p + (k − 1)q⌋) ones: every target bit, the rest drawn among the other bits, a
    valid OUE release (the packed integer below 2^k)."""
    mech = UnaryEncoding(k, eps)
    honest_mean = mech.p + (k - 1) * mech.q
    rng = np.random.default_rng(7)
    for targets in ([0], [1, 3], [k - 1, 0, 2]):
        r = len(targets)
        l_paper = math.floor(honest_mean)
        assert padded_ones(mech, r) == max(r, l_paper)
        reports = np.array([mga_release(mech, targets, rng) for _ in range(200)])
        mech.validate_release(reports)
        bits = mech.bits(reports)
        assert np.all(bits.sum(axis=1) == max(r, l_paper))
        assert np.all(bits[:, targets])
        if l_paper > r:  # the padding is spread over the non-target bits, not always the same ones
            assert len({tuple(b) for b in bits}) > 1
    # the honest count of ones has mean p + (k − 1)q: the rounding above is within one of it
    honest = mech.bits(mech.release(rng.integers(0, k, 20000), rng)).sum(axis=1)
    se = honest.std() / math.sqrt(honest.size)
    assert abs(honest.mean() - honest_mean) < 4 * se


@pytest.mark.parametrize("k, eps, targets", [(20, 1.0, [3]), (12, 2.0, [0, 5]), (30, 0.5, [2, 7, 11])])
def test_padded_oue_gain_is_the_papers_formula(k, eps, targets):
    """E Δf̂_t = β(g_t − f_t) with g_t = (1 − q)/(p − q) for a target and ((l − r)/(k − r) − q)/(p − q)
    for another state (the padding), β = m/(n + m); summed over the r targets it is CJG's
    G = β(2r·e^ε/(e^ε − 1) − f_T) (Theorem for OUE; p = 1/2, q = 1/(e^ε + 1)), checked against the
    mechanism's realised p, q. Monte Carlo over 400 poisoned pools (n honest + m fakes), the
    honest-only estimate subtracted: tolerance 4 standard errors of the mean, fixed seed."""
    mech = UnaryEncoding(k, eps)
    p, q, r = mech.p, mech.q, len(targets)
    l_pad = padded_ones(mech, r)
    e = math.exp(mech.epsilon)
    assert (1 - q) / (p - q) == pytest.approx(2 * e / (e - 1), rel=1e-9)  # the paper's closed form
    rng = np.random.default_rng(2021)
    pi = rng.dirichlet(np.ones(k))
    n, m, reps = 300, 30, 400
    beta = m / (n + m)
    deltas = np.empty((reps, k))
    for i in range(reps):
        x = rng.choice(k, size=n, p=pi)
        honest = mech.unbiased_onehot(mech.release(x, rng))
        fakes = mech.unbiased_onehot(np.array([mga_release(mech, targets, rng) for _ in range(m)]))
        deltas[i] = np.concatenate([honest, fakes]).mean(axis=0) - honest.mean(axis=0)
    f = pi  # the honest frequencies: E of the honest-only estimate over pools of records drawn from π
    g = np.full(k, ((l_pad - r) / (k - r) - q) / (p - q))
    g[targets] = (1 - q) / (p - q)
    expected = beta * (g - f)
    se = deltas.std(axis=0, ddof=1) / math.sqrt(reps)
    assert np.all(np.abs(deltas.mean(axis=0) - expected) < 4 * se + 1e-12), (deltas.mean(axis=0) - expected) / se
    G_paper = beta * (2 * r * e / (e - 1) - pi[targets].sum())
    assert expected[targets].sum() == pytest.approx(G_paper, rel=1e-9)


@pytest.mark.parametrize(
    "mech",
    [RandomizedResponse(5, epsilon=1.0), TransitionMatrix([[0.6, 0.2, 0.1], [0.3, 0.5, 0.2], [0.1, 0.3, 0.7]]),
     LocalHashing(7, 2.0), LocalHashing(11, 1.0), UnaryEncoding(6, 1.0)],
    ids=lambda m: type(m).__name__,
)  # fmt: skip
def test_padded_mga_krr_and_olh_reports_maximise_the_targets_debiased_frequency(mech):
    """Against every release the mechanism can output (enumerated): Σ_{t∈T} of the debiased one-hot
    of the MGA report is the largest any report gives, for r = 1, 2 and 3 targets (OLH: the best of
    1,000 sampled seeds maps every target to one bucket, which the enumeration shows is attainable)."""
    U = mech.unbiased_onehot(_every_release(mech))  # (releases, k)
    rng = np.random.default_rng(0)
    for targets in ([1], [0, 2], [0, 1, 2]):
        best = U[:, targets].sum(axis=1).max()
        for _ in range(20):
            x = np.array([mga_release(mech, targets, rng)])
            mech.validate_release(x)
            assert mech.unbiased_onehot(x)[0, targets].sum() == pytest.approx(best, abs=1e-12)
    if isinstance(mech, RandomizedResponse):  # k-RR: a target drawn uniformly among T
        drawn = [int(mga_release(mech, [0, 2], rng)) for _ in range(400)]
        assert set(drawn) == {0, 2} and 150 < drawn.count(0) < 250
    if isinstance(mech, LocalHashing):  # OLH: as many targets share the reported bucket as any seed allows
        T = np.array([0, 1, 2])
        H = mech.hash(np.arange(mech.n_seeds)[:, None], T[None, :])
        most = max(int(np.bincount(h).max()) for h in H)  # 1 when g >= P: ((a·x + b) mod P) mod g is injective
        seed, y = mech.split(np.array([mga_release(mech, T, rng)]))
        assert int((mech.hash(seed, T) == y).sum()) == most
        assert most == (1 if mech.g >= mech.prime else 3)


def _mixed_population(fraction: float, attack: str, n_sampled: int | None, n: int = 150):
    """Digits 7 vs 9 (64 features, 17 states) released by RR, unary encoding and local hashing in turn."""
    feats = [RandomizedResponse(17, epsilon=1.0), UnaryEncoding(17, 1.0), LocalHashing(17, 1.0)]
    rm = RecordMechanism([feats[j % 3] for j in range(64)], UnaryEncoding(2, 1.0), n_sampled=n_sampled)
    base = DatasetPopulation("digits_7_vs_9", n, rm, seed=1)
    return FakeClients(base, fraction, attack=attack, attribute=1, state=[3, 5, 8], label=1)


def _accepted(pop) -> int:
    rel = offline_release(pop, seed=5)
    parts = {"x": rel.x, "y": rel.y, "client_id": rel.client_id, "mechanism_index": rel.mechanism_index}
    valid = validate_release_arrays(parts, json.dumps(list(rel.mechanisms)), rel.x.shape[1], set(range(pop.n_clients)))
    return len(valid.client_id)


@pytest.mark.parametrize("attack", ["mga", "mga-sampled"])
@pytest.mark.parametrize("n_sampled", [None, 2])
def test_padded_mga_fakes_pass_the_pools_validation_split_and_sampled(attack, n_sampled):
    pop = _mixed_population(0.2, attack, n_sampled)
    assert _accepted(pop) == pop.n_clients and len(pop.fake_ids()) > 10
    oue = pop.mechanism(0).fields[1].mechanism  # the attacked column: unary encoding at ε 1, 17 states
    assert padded_ones(oue, 3) == 4  # ⌊1/2 + 16q⌋ = 4: one padding bit
    col = pop.mechanism(0).fields[1].columns[0]
    ones = []
    for c in pop.fake_ids()[:15]:
        x, _ = pop.release_record(int(c), client_generator(5, int(c)))
        if not np.isnan(x[col]):
            b = oue.bits(np.array([x[col]]))[0]
            assert b[[3, 5, 8]].all()
            ones.append(int(b.sum()))
    assert ones and set(ones) == {padded_ones(oue, 3)}


@pytest.mark.parametrize("oracle", ["rr", "oue", "olh"])
@pytest.mark.parametrize("attack", ["mga", "mga-sampled"])
def test_padded_mga_fakes_pass_the_pools_validation_paired(oracle, attack):
    """Paired: the targets are the pairs v* = s·C + c through attribute j's pair oracle."""
    mech = PairedRecordMechanism([2, 3, 9], 2, 1.0, oracle=oracle)
    base = DatasetPopulation(_tiny_dataset(), 200, mech, seed=0)
    pop = FakeClients(base, 0.3, attack=attack, attribute=2, state=[3, 4], label=1)
    assert _accepted(pop) == pop.n_clients
    o, T = mech.oracles[2], [3 * 2 + 1, 4 * 2 + 1]
    best = o.unbiased_onehot(_every_release(o))[:, T].sum(axis=1).max() if oracle != "oue" else None
    n_crafted = 0
    for c in pop.fake_ids()[:20]:
        x, y = pop.release_record(int(c), client_generator(0, int(c)))
        assert np.isnan(y) and (~np.isnan(x)).sum() == 1
        if np.isnan(x[2]):
            continue
        n_crafted += 1
        u = o.unbiased_onehot(x[2:3])[0]
        if oracle == "oue":
            assert padded_ones(o, 2) == 5  # ⌊1/2 + 17q⌋ at ε 1: three padding bits
            assert o.bits(x[2:3])[0, T].all() and o.bits(x[2:3])[0].sum() == padded_ones(o, 2)
        else:
            assert u[T].sum() == pytest.approx(best, abs=1e-12)
    assert n_crafted > 0


def _tiny_dataset():
    from fedrr.datasets import Dataset, FeatureSpec, Schema

    rng = np.random.default_rng(1)
    n = 4000
    X = np.stack([rng.integers(0, k, n) for k in (2, 3, 9)], axis=1)
    y = (X[:, 0] ^ (rng.random(n) < 0.2)).astype(np.int64)
    feats = tuple(FeatureSpec(f"a{j}", "discrete", k) for j, k in enumerate((2, 3, 9)))
    return Dataset(X, y, Schema(feats, classes=(0, 1)))


def test_padded_mga_bad_targets_name_the_field_and_range():
    base = _mixed_population(0.1, "mga", None).base
    for kw, text in [
        ({"attack": "output", "state": [1, 2]}, "targets one state"),
        ({"attack": "mga", "state": [1, 1]}, "distinct"),
        ({"attack": "mga", "state": [1, 17]}, "<= 16"),
        ({"attack": "mga", "state": []}, "distinct"),
        ({"attack": "mga", "state": "3"}, "sequence"),
    ]:
        with pytest.raises(ValidationError, match=text) as err:
            FakeClients(base, 0.1, **kw)
        assert err.value.field == "state"
    with pytest.raises(ValidationError, match=r"\[0, 4\]") as err:
        mga_release(RandomizedResponse(5, epsilon=1.0), [5], np.random.default_rng(0))
    assert err.value.field == "targets"


@pytest.mark.parametrize("k, eps, r", [(5, 1.0, 1), (12, 2.0, 3), (30, 0.5, 2)])
def test_padded_mga_krr_gain_is_the_papers_formula(k, eps, r):
    """k-RR: a fake's expected debiased contribution, its report drawn uniformly from T, summed over T
    is 1 + (k − r)/(e^ε − 1) (CJG's G = β(1 − f_T) + β(k − r)/(e^ε − 1)); each target gets
    (1/r − q)/(p − q). Exact, from the mechanism's inverse."""
    mech = RandomizedResponse(k, epsilon=eps)
    T = list(range(r))
    U = mech.unbiased_onehot(np.arange(k))  # (report, state)
    per_fake = U[T].mean(axis=0)  # the report is a uniformly drawn target
    p, q = mech.matrix[0, 0], mech.matrix[1, 0]
    e = math.exp(mech.epsilon)
    assert per_fake[T].sum() == pytest.approx(1 + (k - r) / (e - 1), rel=1e-9)
    np.testing.assert_allclose(per_fake[T], (1 / r - q) / (p - q), rtol=1e-9)
    # and mga_release sends exactly that: a target, uniformly over T (each count within 4 s.e.)
    n = 2000
    reports = np.array([mga_release(mech, T, np.random.default_rng([k, r, i])) for i in range(n)])
    assert set(reports.tolist()) <= set(T)
    counts = np.bincount(reports, minlength=k)[T]
    assert np.all(np.abs(counts - n / r) <= 4 * np.sqrt(n * (1 / r) * (1 - 1 / r)) + 1e-9)


def test_padded_mga_olh_gain_when_every_target_shares_the_bucket():
    """OLH: when a seed maps all r targets to one bucket (possible here: g = 4 < P = 11), each
    target's debiased value is (1 − q*)/(p − q*), fedrr's exact q* (CJG's ideal-hash value uses 1/g)."""
    mech = LocalHashing(11, 1.0)
    assert mech.g < mech.prime
    rng = np.random.default_rng(3)
    T = [0, 4, 7]
    u = mech.unbiased_onehot(np.array([mga_release(mech, T, rng) for _ in range(50)]))
    np.testing.assert_allclose(u[:, T], (1 - mech.q_star) / (mech.p - mech.q_star), rtol=1e-12)


def test_padded_mga_targets_from_the_run_config():
    """fake-targets r: the states fake-state .. fake-state + r − 1; errors name fake-targets."""
    from fedrr.assembly import build_population
    from fedrr.experiment import parse_scenario
    from fedrr.run_config import RunConfig

    cfg = {"dataset": "adult_binned", "mechanism": "paired", "feature-epsilon": 4.0, "n-clients": 200}
    cfg.update({"fake-fraction": 0.1, "fake-attack": "mga", "fake-attribute": 7, "fake-state": 2, "fake-targets": 3})
    pop = build_population(RunConfig.from_flwr(cfg))
    assert pop.states == (2, 3, 4) and pop.describe()["fake_clients"]["state"] == [2, 3, 4]
    for bad, text in [({"fake-targets": 13}, "<= 13"), ({"fake-attack": "output"}, "targets one state")]:
        with pytest.raises(ValidationError, match=text) as err:
            build_population(RunConfig.from_flwr({**cfg, **bad}))
        assert err.value.field == "fake-targets"
    with pytest.raises(ValidationError) as err:
        RunConfig.from_flwr({**cfg, "fake-targets": 0})
    assert err.value.field == "fake-targets"
    spec = parse_scenario({"population": {"fake_targets": 2}, "privacy": {"epsilon_grid": [1.0]}})
    assert spec.population.fake_targets == 2
