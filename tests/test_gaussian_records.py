"""Gaussian records: one joint block on all features, calibrated by the analytic Gaussian on its L2
sensitivity (the default), against per-feature noise composed by basic composition — the accounting
(Barber §6.1 numbers, Balle & Wang 2018 Thm 8 checked by quadrature), bad input, and the server side
(column marginals, spread-EM, naive, W-DRO, the pool) on block releases."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from fedrr.assembly import dataset_population
from fedrr.errors import ValidationError
from fedrr.estimators import NaiveLogisticRegression, SpreadLogisticRegression
from fedrr.experiment import parse_scenario
from fedrr.mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    RecordMechanism,
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
)
from fedrr.pool import Pool, ReplyRejected, validate_release_arrays
from fedrr.population import DatasetPopulation, record_mechanism_for
from fedrr.release import offline_release
from fedrr.run_config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
#: the accounting of Barber §6.1 lives on this page, as the python block that prints its table
EPSILON_PAGE = ROOT / "docs" / "concepts" / "epsilon.md"


def _accounting_block() -> tuple[dict, str]:
    """Run the page's Gaussian accounting block: (its namespace, what it printed)."""
    code = next(c for c in re.findall(r"```python\n(.*?)```", EPSILON_PAGE.read_text(), re.S) if "def accounting" in c)
    ns: dict = {"__name__": "__docs__"}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, "docs/concepts/epsilon.md", "exec"), ns)
    return ns, out.getvalue()


def accounting(variance: float) -> dict[str, float]:
    return _accounting_block()[0]["accounting"](variance)


# --- accounting ----------------------------------------------------------------------------------
def _delta_by_quadrature(eps: float, sigma: float, sens: float) -> float:
    """δ(ε) = E_{x̃ ~ N(0, σ²)} [(1 − e^{ε − L(x̃)})₊], L(x̃) = ((x̃ − Δ)² − x̃²)/(2σ²) the privacy loss
    along the sensitivity direction (the other coordinates cancel): an independent check of Thm 8."""
    z_star = (sens**2 - 2 * sigma**2 * eps) / (2 * sens * sigma)  # L(σz) > ε  <=>  z < z*

    def f(z):
        loss = (sens**2 - 2 * sigma * z * sens) / (2 * sigma**2)
        return norm.pdf(z) * -math.expm1(eps - loss)

    val, err = integrate.quad(f, z_star - 40, z_star, epsabs=1e-16, epsrel=1e-11, limit=400)
    assert err < 1e-9 * val
    return val


@pytest.mark.parametrize(
    "variance, eps_pixel, basic, joint, joint_same_delta",
    [(0.5, 6.5730, 5153.2, 951.9, 878.7), (0.1, 17.8566, 13999.6, 4296.7, 4133.0)],
)
def test_barber_6_1_basic_composition_against_the_joint_analytic_gaussian(
    variance, eps_pixel, basic, joint, joint_same_delta
):
    """The issue's 5,153 vs 952 (σ² = 0.5, D = 784, pixels in [0, 1], δ = 1e-5), to one decimal."""
    a = accounting(variance)
    assert round(a["eps_pixel"], 4) == eps_pixel
    assert a["eps_basic"] == pytest.approx(784 * a["eps_pixel"], rel=1e-12)
    assert round(a["eps_basic"], 1) == basic and a["delta_basic"] == pytest.approx(784e-5, rel=1e-12)
    assert round(a["eps_joint"], 1) == joint
    assert round(a["eps_joint_same_delta"], 1) == joint_same_delta
    sigma = math.sqrt(variance)
    assert _delta_by_quadrature(a["eps_joint"], sigma, 28.0) == pytest.approx(1e-5, rel=1e-7)
    assert _delta_by_quadrature(a["eps_pixel"], sigma, 1.0) == pytest.approx(1e-5, rel=1e-7)
    assert _delta_by_quadrature(a["eps_joint_same_delta"], sigma, 28.0) == pytest.approx(784e-5, rel=1e-7)


def test_the_page_prints_the_table_it_shows():
    """docs/concepts/epsilon.md's table is what its block prints, to the last digit."""
    _, printed = _accounting_block()
    page = EPSILON_PAGE.read_text()
    rows = [line for line in printed.splitlines() if line.startswith("| ")]
    assert len(rows) == 3 and all(row in page for row in rows), printed
    assert "| 0.5 | 6.5730 | 5,153.2 (0.00784) | 951.9 | 878.7 |" in printed


def test_joint_record_states_the_analytic_epsilon_and_buys_less_noise():
    D, eps, lab, delta = 64, 2.7, 0.3, 1e-6
    rm = record_mechanism_for("gaussian", D, None, 2, feature_epsilon=eps, label_epsilon=lab, delta=delta)
    (field,) = rm.fields
    blk = field.mechanism
    assert field.columns == tuple(range(D)) and blk.width == D
    assert rm.epsilon == eps + RandomizedResponse(2, epsilon=lab).epsilon and rm.features_epsilon == eps
    assert rm.delta == delta
    assert blk.sensitivity == 8.0 and blk.sigma == analytic_gaussian_sigma(eps, delta, 8.0)
    assert analytic_gaussian_delta(eps, blk.sigma, 8.0) == pytest.approx(delta, rel=1e-8)
    assert _delta_by_quadrature(eps, blk.sigma, 8.0) == pytest.approx(delta, rel=1e-6)
    per = record_mechanism_for(
        "gaussian", D, None, 2, feature_epsilon=eps / D, label_epsilon=lab, delta=delta, gaussian_noise="per-feature"
    )
    assert len(per.fields) == D and per.epsilon == pytest.approx(rm.epsilon, rel=1e-12)
    assert per.delta == pytest.approx(D * delta, rel=1e-12)
    assert blk.sigma < per.fields[0].mechanism.sigma / 4  # the same stated ε buys > 4x less noise jointly
    assert (
        RecordMechanism.from_spec(rm.to_spec()) == rm and RecordMechanism.from_spec(rm.to_spec()).epsilon == rm.epsilon
    )


def test_record_budget_split_gives_the_joint_block_the_features_share():
    data = {
        "population": {"dataset": "digits_7_vs_9", "n_clients": 30, "n_test_per_class": 5},
        "privacy": {"mechanism": "gaussian", "epsilon_grid": [4.0], "split": {"features": 0.75, "label": 0.25}},
        "learners": {"names": ["naive"]},
    }
    (cell,) = parse_scenario(data).cells()
    assert cell.privacy().feature_epsilon == 3.0 and cell.privacy().label_epsilon == 1.0
    rm = dataset_population(cell.run_config()).mechanism(0)
    assert len(rm.fields) == 1 and rm.epsilon == pytest.approx(4.0, rel=1e-12) and rm.delta == 1e-5
    data["privacy"]["gaussian_noise"] = "per-feature"
    (cell,) = parse_scenario(data).cells()
    rm = dataset_population(cell.run_config()).mechanism(0)
    assert len(rm.fields) == 64 and cell.privacy().feature_epsilon == pytest.approx(3.0 / 64, rel=1e-12)
    assert rm.epsilon == pytest.approx(4.0, rel=1e-12) and rm.delta == pytest.approx(64e-5, rel=1e-12)


# --- bad input -----------------------------------------------------------------------------------
@contextmanager
def _raises(field: str, *words: str):
    with pytest.raises(ValidationError) as info:
        yield
    assert info.value.field == field, info.value
    for w in words:
        assert w in info.value.message, info.value.message


def test_bad_gaussian_noise_and_sampling_are_rejected_by_name():
    kw = dict(feature_epsilon=1.0, label_flip=0.2)
    with _raises("gaussian_noise", "'joint'", "'per-feature'"):
        record_mechanism_for("gaussian", 4, None, 2, gaussian_noise="block", **kw)
    with _raises("n_sampled", "'per-feature'"):
        record_mechanism_for("gaussian", 4, None, 2, n_sampled=2, **kw)
    assert record_mechanism_for("gaussian", 4, None, 2, n_sampled=2, gaussian_noise="per-feature", **kw).n_sampled == 2
    with _raises("gaussian-noise", "joint", "per-feature"):
        RunConfig(gaussian_noise="block")
    with _raises("n-sampled", "gaussian-noise", "'per-feature'"):
        RunConfig(mechanism="gaussian", n_sampled=3)
    assert RunConfig(mechanism="gaussian", n_sampled=3, gaussian_noise="per-feature").n_sampled == 3
    assert RunConfig(mechanism="rr", n_sampled=3).gaussian_noise == "joint"  # ignored by other families
    assert RunConfig.from_flwr({"gaussian-noise": "per-feature"}).gaussian_noise == "per-feature"
    base = {"population": {"dataset": "digits_7_vs_9"}, "learners": {"names": ["naive"]}}
    bad = [
        ({"mechanism": "rr", "epsilon_grid": [5.0], "gaussian_noise": "per-feature"}, "privacy.gaussian_noise", "rr"),
        ({"mechanism": "gaussian", "epsilon_grid": [5.0], "n_sampled": 2}, "privacy.n_sampled", "gaussian_noise"),
        ({"mechanism": "gaussian", "epsilon_grid": [5.0], "gaussian_noise": "both"}, "privacy.gaussian_noise", "joint"),
    ]
    for priv, field, word in bad:
        with _raises(field, word):
            parse_scenario({**base, "privacy": priv})
    reg = {
        "population": {"dataset": "diabetes", "task": "regression"},
        "privacy": {"mechanism": "gaussian", "epsilon_grid": [5.0], "gaussian_noise": "per-feature"},
        "learners": {"names": ["ls"]},
    }
    with _raises("privacy.gaussian_noise", "one block"):
        parse_scenario(reg)


def test_marginal_rejects_a_bad_column():
    blk = GaussianMechanism(1.0, 1e-5, np.zeros(3), np.ones(3))
    for j in (-1, 3, 1.0, True):
        with _raises("j", "[0, 2]"):
            blk.marginal(j)


# --- column marginals ----------------------------------------------------------------------------
def test_column_groups_split_blocks_into_exact_marginals():
    blk = GaussianMechanism(1.5, 1e-6, [0.0, -1.0, 0.0], [1.0, 1.0, 1.0])
    rm = RecordMechanism(blk, RandomizedResponse(2, 0.1))
    groups = rm.column_groups()
    assert [c.tolist() for _, c in groups] == [[0, 2], [1]]
    for (m, _cols), (lo, hi) in zip(groups, [(0.0, 1.0), (-1.0, 1.0)]):
        assert m.width == 1 and m.sigma == blk.sigma and m.delta == blk.delta  # bit-identical noise
        assert (float(m.lower[0]), float(m.upper[0])) == (lo, hi)
        assert m.epsilon == pytest.approx(blk.epsilon, rel=1e-9)  # one column is post-processing of the block
        assert GaussianMechanism.from_spec(m.to_spec()) == m
    by_sigma = GaussianMechanism(sigma=0.4, delta=1e-5, lower=np.zeros(4), upper=np.ones(4))
    assert by_sigma.marginal(2).sigma == 0.4 and by_sigma.marginal(2).epsilon == pytest.approx(by_sigma.epsilon)
    lap = LaplaceMechanism(2.0, np.zeros(5), np.ones(5))
    assert lap.marginal(4).scale == lap.scale and lap.marginal(4).width == 1
    scalar = RecordMechanism(RandomizedResponse(3, 0.2), n_features=4)
    assert [(m, c.tolist()) for m, c in scalar.column_groups()] == [(m, c.tolist()) for m, c in scalar.groups()]
    assert scalar.fields[0].mechanism.marginal(0) is scalar.fields[0].mechanism


# --- server side on block releases --------------------------------------------------------------
def _releases(rm, n=240, seed=0):
    rng = np.random.default_rng(seed)
    D = rm.n_features
    X = rng.uniform(0, 1, (n, D))
    y = (X @ np.linspace(-2, 2, D) + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return rm.release(X, y, rng=np.random.default_rng(seed + 1))


@pytest.mark.parametrize("family", ["gaussian", "laplace"])
def test_spread_em_on_a_block_equals_spread_em_on_its_per_column_marginals(family):
    D, lab = 4, RandomizedResponse(2, 0.1)
    if family == "gaussian":
        blk = GaussianMechanism(6.0, 1e-5, np.zeros(D), np.ones(D))
        per = GaussianMechanism(sigma=blk.sigma, delta=1e-5)
    else:
        blk = LaplaceMechanism(8.0, np.zeros(D), np.ones(D))
        per = LaplaceMechanism(8.0, 0.0, 1.0, sensitivity=float(D))  # the same scale D/ε, bit for bit
        assert per.scale == blk.scale
    joint, cols = RecordMechanism(blk, lab), RecordMechanism(per, lab, n_features=D)
    Xt, yt = _releases(joint)
    fits = []
    for rm in (joint, cols):
        s = SpreadLogisticRegression(random_state=0, max_iter=8).fit(Xt, yt, mechanism=rm)
        nv = NaiveLogisticRegression().fit(Xt, yt, mechanism=rm)
        fits.append((s.coef_, s.intercept_, nv.coef_))
    for a, b in zip(*fits):
        np.testing.assert_array_equal(a, b)


def test_joint_gaussian_population_through_the_pool_and_every_learner():
    from fedrr.learners import FitData, FitOptions, fit_and_score

    rm = record_mechanism_for("gaussian", 64, None, 2, feature_epsilon=40.0, label_epsilon=3.0)
    pop = DatasetPopulation("digits_7_vs_9", 60, rm, features="unit", n_test_per_class=10, seed=1)
    rel = offline_release(pop, seed=2)
    parts = {"x": rel.x, "y": rel.y, "client_id": rel.client_id, "mechanism_index": rel.mechanism_index}
    again = validate_release_arrays(parts, json.dumps(list(rel.mechanisms)), 64)
    pool = Pool.from_releases([again])
    assert pool.mechanism_arg() == rm
    acc = pool.accounting()
    assert acc["record"] == pytest.approx(43.0, rel=1e-12) and acc["delta"] == 1e-5 and acc["features"] == 40.0
    bad = dict(parts, x=np.where(np.arange(64) == 5, 1e300, rel.x))
    with pytest.raises(ReplyRejected, match="out_of_domain"):
        validate_release_arrays(bad, json.dumps(list(rel.mechanisms)), 64)
    data = FitData(pool.X, pool.y, pool.mechanism_arg())
    opts = FitOptions(C=1.0, random_state=0, spread_max_iter=5)
    for name in ("spread", "naive", "wdro", "majority"):
        entry = fit_and_score(name, data, pop.test_set(), opts).entry
        assert "error" not in entry and 0 <= entry["accuracy"] <= 1, (name, entry)
