"""Fake clients (fedrr.fake) and the server's frequency check (fedrr.frequency_check): crafted
releases are valid-looking and maximise the debiased frequency they target, they move it by the
predicted amount, the check's false alarms on honest pools stay under α, it flags the output attack
at 5 % fake clients and it does not flag the input attack (a documented limitation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from fedrr.assembly import build_population
from fedrr.datasets import load
from fedrr.errors import ValidationError
from fedrr.experiment import parse_scenario
from fedrr.fake import FakeClients, crafted_release
from fedrr.frequency_check import check_pool, frequency_check, z_critical
from fedrr.mechanisms import LocalHashing, RandomizedResponse, RecordMechanism, TransitionMatrix, UnaryEncoding
from fedrr.pool import Pool, validate_release_arrays
from fedrr.population import DatasetPopulation, record_mechanism_for
from fedrr.release import offline_release
from fedrr.run_config import RunConfig

ORACLES = [
    RandomizedResponse(5, epsilon=1.0),
    UnaryEncoding(5, 1.0),
    LocalHashing(7, 2.0),
    TransitionMatrix([[0.6, 0.2, 0.1], [0.3, 0.5, 0.2], [0.1, 0.3, 0.7]]),
]


def _every_release(mech) -> np.ndarray:
    if isinstance(mech, UnaryEncoding):
        return np.arange(2**mech.k, dtype=float)
    if isinstance(mech, LocalHashing):
        return np.arange(mech.n_seeds * mech.g, dtype=float)
    return np.arange(mech.k)


@pytest.mark.parametrize("mech", ORACLES, ids=lambda m: type(m).__name__)
def test_crafted_release_is_valid_and_maximises_the_debiased_frequency(mech):
    """Against every release the mechanism can output (enumerated)."""
    U = mech.unbiased_onehot(_every_release(mech))  # (releases, k)
    rng = np.random.default_rng(0)
    for target in range(mech.k):
        x = np.array([crafted_release(mech, target, rng)])
        mech.validate_release(x)
        assert mech.unbiased_onehot(x)[0, target] == pytest.approx(U[:, target].max(), abs=1e-12)


def _mixed_population(fraction: float, attack: str = "output", n_sampled: int | None = None, n: int = 400):
    """Digits 7 vs 9 (64 features, 17 states) released by RR, unary encoding and local hashing in turn."""
    feats = [RandomizedResponse(17, epsilon=1.0), UnaryEncoding(17, 1.0), LocalHashing(17, 1.0)]
    rm = RecordMechanism([feats[j % 3] for j in range(64)], RandomizedResponse(2, epsilon=1.0), n_sampled=n_sampled)
    base = DatasetPopulation("digits_7_vs_9", n, rm, seed=1)
    return base, FakeClients(base, fraction, attack=attack, attribute=1, state=3, label=1)


@pytest.mark.parametrize("attack", ["output", "output-sampled", "input"])
@pytest.mark.parametrize("n_sampled", [None, 2])
def test_fake_releases_pass_the_pools_validation(attack, n_sampled):
    _, pop = _mixed_population(0.2, attack, n_sampled, n=150)
    rel = offline_release(pop, seed=5)
    parts = {"x": rel.x, "y": rel.y, "client_id": rel.client_id, "mechanism_index": rel.mechanism_index}
    valid = validate_release_arrays(parts, json.dumps(list(rel.mechanisms)), 64, set(range(pop.n_clients)))
    assert len(valid.client_id) == pop.n_clients and len(pop.fake_ids()) > 10
    with pytest.raises(ValidationError, match="fake"):
        pop.record(int(pop.fake_ids()[0]))  # a fake client holds no clean record


@pytest.mark.parametrize("column", [1, 0, 2])  # unary encoding (the target), RR and local hashing
def test_the_output_attack_moves_the_debiased_frequency_by_the_predicted_amount(column):
    """Honest clients release the same in both pools (their own generators), so the debiased sum
    moves by exactly n_fake·(gain − honest part): gain = (1 − b)/(a − b) for the target state,
    −b/(a − b) for the others (a crafted unary report sets only the target's bit)."""
    base, pop = _mixed_population(0.1)
    honest, attacked = offline_release(base, seed=3), offline_release(pop, seed=3)
    fake = np.isin(attacked.client_id, pop.fake_ids())
    np.testing.assert_array_equal(honest.x[~fake], attacked.x[~fake])
    mech = base.mechanism(0).fields[column].mechanism
    u_honest = mech.unbiased_onehot(honest.x[:, column])
    u_attacked = mech.unbiased_onehot(attacked.x[:, column])
    n_fake = int(fake.sum())
    if column == 1:  # the attacked column: every fake adds the maximal gain for state 3
        crafted = mech.unbiased_onehot(np.array([crafted_release(mech, 3, np.random.default_rng(0))]))[0]
        predicted = u_honest.sum(0) - u_honest[fake].sum(0) + n_fake * crafted
        np.testing.assert_allclose(u_attacked.sum(0), predicted, atol=1e-9)
        a, b = mech.p, mech.q
        assert crafted[3] == pytest.approx((1 - b) / (a - b)) and np.allclose(np.delete(crafted, 3), -b / (a - b))
    else:  # the other columns: fakes release uniformly drawn states honestly, 1/k each in expectation
        se = np.sqrt(n_fake * mech.frequency_variance(1))
        assert np.all(np.abs(u_attacked[fake].sum(0) - n_fake / mech.k) < 4 * se)


def _adult_honest(n: int):
    ds = load("adult_binned")
    train = np.flatnonzero(~np.asarray(ds.extra["is_test"], bool))[:n]
    rm = record_mechanism_for("oracle", 12, ds.schema.states(), 2, feature_epsilon=2.0, label_epsilon=2.0, n_sampled=1)
    return ds.X[train], ds.y[train], rm


def test_false_alarms_on_honest_pools_stay_under_alpha():
    """200 honest pools of 2,000 Adult clients (label + one sampled attribute at ε 2 each): at α = 0.2
    the family-wise false-alarm rate must be ≤ α; allowed: 3 binomial standard errors above 0.2·200."""
    X, y, rm = _adult_honest(2000)
    rng = np.random.default_rng(2024)
    runs, alpha, flags, z_seen = 200, 0.2, 0, []
    for _ in range(runs):
        Xt, yt = rm.release(X, y, rng=rng)
        c = frequency_check(Xt, yt, rm, alpha=alpha)
        flags += c.flagged
        z_seen.append(max(f.z for f in c.fields))
    assert flags <= alpha * runs + 3 * np.sqrt(runs * alpha * (1 - alpha)), flags
    assert max(z_seen) > -1  # the statistics are not trivially far inside [0, 1]: the test can fail


def _adult_pool(fraction: float, attack: str, seed: int, attribute: int = 0, state: int = 0) -> Pool:
    cfg = RunConfig(
        dataset="adult_binned",
        n_clients=3000,
        mechanism="oracle",
        feature_epsilon=2.0,
        label_epsilon=2.0,
        n_sampled=1,
        fake_fraction=fraction,
        fake_attack=attack,
        fake_attribute=attribute,
        fake_state=state,
        seed=seed,
    )
    return Pool.from_releases([offline_release(build_population(cfg), seed)])


def test_the_check_flags_the_output_attack_at_5_percent():
    """Age bin 0 → '>50K': the fakes over-release the age field (the sampling count flags it);
    native country = US (the common state): its debiased frequency leaves [0, 1] as well."""
    honest = check_pool(_adult_pool(0.0, "output", seed=0))
    assert not honest.flagged
    age = check_pool(_adult_pool(0.05, "output", seed=0))
    assert age.sampling_flagged and "x0 (count)" in age.to_dict()["flagged_fields"]
    us = check_pool(_adult_pool(0.05, "output", seed=0, attribute=11, state=38))
    assert us.frequency_flagged and us.fields[11].flagged and us.fields[11].state == 38


@pytest.mark.parametrize("attack", ["input", "output-sampled"])
def test_releases_distributed_like_honest_ones_are_not_flagged(attack):
    """The documented limitation: a fake record honestly randomised (input manipulation), or crafted
    reports that keep the honest sampling rate, stay inside what the check can tell apart."""
    assert not check_pool(_adult_pool(0.05, attack, seed=0)).flagged


def test_bad_parameters_name_the_field_and_range():
    base, _ = _mixed_population(0.1, n=20)
    for kw, field, text in [
        ({"fraction": 1.0}, "fraction", "[0, 1)"),
        ({"fraction": 0.1, "attack": "both"}, "attack", "output"),
        ({"fraction": 0.1, "attribute": 64}, "attribute", "<= 63"),
        ({"fraction": 0.1, "state": 17}, "state", "<= 16"),
        ({"fraction": 0.1, "label": 2}, "label", "<= 1"),
    ]:
        fraction = kw.pop("fraction")
        with pytest.raises(ValidationError, match=re.escape(text)) as err:
            FakeClients(base, fraction, **kw)
        assert err.value.field == field
    with pytest.raises(ValidationError) as err:
        RunConfig(fake_fraction=1.5)
    assert err.value.field == "fake-fraction" and "[0, 1)" in err.value.message
    with pytest.raises(ValidationError) as err:
        build_population(RunConfig(fake_fraction=0.1, fake_attribute=64))  # digits: 64 features
    assert err.value.field == "fake-attribute" and "<= 63" in err.value.message
    with pytest.raises(ValidationError) as err:
        RunConfig(check_alpha=0.0)
    assert err.value.field == "check-alpha"
    with pytest.raises(ValidationError, match=r"\(0, 1\)") as err:
        z_critical(1.0, 10)
    assert err.value.field == "alpha"
    gaussian = {"privacy": {"mechanism": "gaussian", "feature_epsilon_grid": [1.0], "label_epsilon": 1.0}}
    with pytest.raises(ValidationError) as err:
        parse_scenario({**gaussian, "population": {"fake_fraction": 0.1}})
    assert err.value.field == "population.fake_fraction" and "'rr' or 'oracle'" in err.value.message
    with pytest.raises(ValidationError) as err:
        parse_scenario({"population": {"fake_attack": "x"}})
    assert err.value.field == "population.fake_attack"


def test_honest_quickstart_pools_are_not_flagged_at_pixel_flip_0_987():
    """Regression: with the standard error at the plug-in distribution the check flagged every
    honest quickstart pool at ε per record 1,000 (MNIST, 300 records, 784 pixels of 256 states,
    flip 0.987); at the boundary of the null it flags none."""
    from fedrr.assembly import build_population
    from fedrr.experiment import load_scenario
    from fedrr.frequency_check import check_pool
    from fedrr.pool import Pool
    from fedrr.release import offline_release

    spec = load_scenario(Path(__file__).resolve().parents[1] / "configs" / "quickstart.toml")
    for seed in (500, 508):
        cfg = spec.cells([0])[0].run_config().replace(seed=seed)
        check = check_pool(Pool.from_releases([offline_release(build_population(cfg), cfg.seed)]))
        assert not check.flagged and max(f.z for f in check.fields) < check.z_critical, check.to_dict()[
            "flagged_fields"
        ]
