"""Mechanism "auto": the release planner's design (``plan_release``) selected by a run config or a
scenario, with the whole record's ε going to it and no label budget (the rules of "paired")."""

from __future__ import annotations

import numpy as np
import pytest

from fedrr.assembly import build_population
from fedrr.datasets import load
from fedrr.errors import ValidationError
from fedrr.experiment import parse_scenario, run_cell
from fedrr.learners import FitData, fit_and_score
from fedrr.mechanisms import PairedRecordMechanism, RecordMechanism
from fedrr.planning import plan_release
from fedrr.pool import Pool
from fedrr.population import DatasetPopulation, record_mechanism_for
from fedrr.release import offline_release
from fedrr.run_config import RunConfig

BASE = {"dataset": "adult_binned", "mechanism": "auto", "feature-epsilon": 1.0, "n-clients": 300, "seed": 3}


@pytest.fixture(scope="module")
def adult_states():
    return [int(k) for k in load("adult_binned").schema.states()]


# ------------------------------------------------------------------------------ record_mechanism_for
@pytest.mark.parametrize("eps", [1.0, 8.0])
def test_auto_is_the_plans_mechanism_on_adults_schema(adult_states, eps):
    ks = adult_states
    mech = record_mechanism_for("auto", len(ks), ks, 2, feature_epsilon=eps, n_records=1000)
    assert mech.to_spec() == plan_release(ks, 2, eps, 1000).mechanism.to_spec()
    assert mech.epsilon == pytest.approx(eps)
    assert record_mechanism_for("auto", len(ks), ks, 2, feature_epsilon=eps, n_records=1000) is mech  # planned once


def test_auto_is_the_planners_default_and_report_can_plan_a_split_release():
    mech = record_mechanism_for("auto", 6, 2, 2, feature_epsilon=16.0, n_records=1000)
    assert mech.to_spec() == plan_release([2] * 6, 2, 16.0, 1000).mechanism.to_spec()
    split = plan_release([2] * 6, 2, 16.0, 1000, dependence="report").mechanism
    assert isinstance(split, RecordMechanism) and split.label is not None


@pytest.mark.parametrize(
    "kw, key",
    [
        ({"label_flip": 0.2}, "label_flip"),
        ({"label_epsilon": 0.5}, "label_epsilon"),
        ({"feature_flip": 0.3, "feature_epsilon": None}, "feature_flip"),
        ({"feature_epsilon": None}, "feature_epsilon"),
        ({"n_sampled": 2}, "n_sampled"),
        ({"n_records": None}, "n_records"),
    ],
)
def test_auto_refuses_label_budgets_and_flips_naming_the_key(kw, key):
    args = {"feature_epsilon": 1.0, "n_records": 100, **kw}
    with pytest.raises(ValidationError) as exc:
        record_mechanism_for("auto", 3, [2, 3, 4], 2, **args)
    assert exc.value.field == key and "auto" in exc.value.message


def test_auto_needs_discrete_features():
    with pytest.raises(ValidationError) as exc:
        record_mechanism_for("auto", 3, None, 2, feature_epsilon=1.0, n_records=100)
    assert exc.value.field == "mechanism" and "discrete" in exc.value.message


# ------------------------------------------------------------------------------ run config (Flower path)
def test_a_run_config_accepts_auto_with_its_record_epsilon_and_plans_once(adult_states):
    cfg = RunConfig.from_flwr(BASE)
    assert cfg.default_budgets() == {} and cfg.budget_notes() == []  # no default label budget: there is none
    pop = build_population(cfg)
    want = plan_release(adult_states, 2, 1.0, 300).mechanism
    assert all(pop.mechanism(i) is pop.mechanism(0) for i in range(50))
    assert pop.mechanism(0).to_spec() == want.to_spec()
    (line,) = pop.describe()["release_plans"]
    assert line.startswith("mechanism auto: planned ") and "ε=1 n=300" in line


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"label-flip": 0.2}, "label-flip"),
        ({"label-epsilon": 1.0}, "label-epsilon"),
        ({"feature-flip": 0.3, "feature-epsilon": ""}, "feature-flip"),
        ({"n-sampled": 2}, "n-sampled"),
    ],
)
def test_a_run_config_refuses_auto_with_a_label_budget(extra, key):
    with pytest.raises(ValidationError) as exc:
        RunConfig.from_flwr({**BASE, **extra})
    assert exc.value.field == key


def test_an_auto_run_needs_its_record_epsilon():
    with pytest.raises(ValidationError) as exc:
        build_population(RunConfig.from_flwr({**BASE, "feature-epsilon": ""}))
    assert exc.value.field == "feature-epsilon" and "whole release" in exc.value.message


# ------------------------------------------------------------------------------ scenarios and cells
def _scenario(**privacy):
    return {
        "population": {"dataset": "adult_binned", "n_clients": 400},
        "privacy": {"mechanism": "auto", "epsilon_grid": [1.0, 8.0], **privacy},
        "learners": {"names": ["ldp-nb", "majority"]},
    }


@pytest.mark.parametrize(
    "privacy, key",
    [
        ({"split": {"features": 0.5, "label": 0.5}}, "privacy.split"),
        ({"label_epsilon": 0.5}, "privacy.label_epsilon"),
        ({"label_flip": 0.2}, "privacy.label_flip"),
        ({"n_sampled": 2}, "privacy.n_sampled"),
        ({"epsilon_grid": None, "feature_epsilon_grid": [1.0]}, "privacy.feature_epsilon_grid"),
    ],
)
def test_an_auto_scenario_refuses_keys_it_would_not_use(privacy, key):
    data = _scenario(**privacy)
    data["privacy"] = {k: v for k, v in data["privacy"].items() if v is not None}
    with pytest.raises(ValidationError) as exc:
        parse_scenario(data)
    assert exc.value.field == key and "auto" in exc.value.message


def test_an_auto_cell_gives_the_whole_record_epsilon_to_the_planned_release(tmp_path, adult_states):
    spec = parse_scenario(_scenario())
    assert spec.notes == ()
    cell = spec.cells()[1]
    p = cell.privacy()
    assert (p.feature_epsilon, p.label_epsilon, p.label_flip, p.requested_eps_record) == (8.0, None, None, 8.0)
    cfg = cell.run_config()
    assert cfg.mechanism == "auto" and cfg.feature_epsilon == 8.0 and cfg.n_sampled == 0
    rec = run_cell(cell, tmp_path)
    assert rec["eps"]["record"] == pytest.approx(rec["params"]["requested_eps_record"]) == pytest.approx(8.0)
    planned = plan_release(adult_states, 2, 8.0, 400)
    (line,) = rec["population"]["release_plans"]
    assert repr(planned.mechanism) in line and "auto" in rec["params"]["text"]
    assert all("error" not in e for e in rec["learners"].values()), rec["learners"]


def test_a_planned_split_release_is_learned_end_to_end():
    """A small synthetic schema where the planner picks a split release (label at a share of ε): it
    releases, pools with its record ε equal to the asked one, and the learners fit it."""
    from fedrr.datasets import Dataset, FeatureSpec, Schema

    rng = np.random.default_rng(2)
    n = 3000
    X = rng.integers(0, 2, (n, 6))
    y = (X[:, 0] ^ (rng.random(n) < 0.1)).astype(np.int64)
    ds = Dataset(X, y, Schema(tuple(FeatureSpec(f"a{j}", "discrete", 2) for j in range(6)), classes=(0, 1)))
    mech = plan_release([2] * 6, 2, 16.0, 1000, dependence="report").mechanism  # the variance ranking's pick
    assert not isinstance(mech, PairedRecordMechanism)
    pop = DatasetPopulation(ds, 1000, mech, seed=0)
    pool = Pool.from_releases([offline_release(pop, 1)])
    assert pool.accounting()["record"] == pytest.approx(16.0)
    # y = x_0 with 10 % flipped: the Bayes accuracy is 0.9 and the majority class ≈ 0.5, so > 0.7 means
    # the fit used x_0 (a learner that ignored it scores 0.5 ± 0.05 on these test rows)
    for name in ("naive", "ldp-nb"):
        res = fit_and_score(name, FitData(pool.X, pool.y, pool.mechanism_arg()), pop.test_set())
        assert "error" not in res.entry and res.entry["accuracy"] > 0.7, res.entry
