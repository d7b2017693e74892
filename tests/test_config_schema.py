"""The one config schema (``fedrr._config_schema``, issue 30): a key both paths have (a scenario
section and Flower's flat run config) has one default and one range, is set from either, reaches a
sweep cell's run config unchanged, and is refused out of range by both, naming the key and the range."""

from __future__ import annotations

import dataclasses

import pytest

from fedrr import _config_schema as schema
from fedrr.assembly import fit_options
from fedrr.errors import ValidationError
from fedrr.experiment import parse_scenario
from fedrr.experiment._sections import SECTIONS
from fedrr.run_config import DEFAULT_COHORT_SIZE, RunConfig


def _scenario(**sections) -> dict:
    data = {"privacy": {"epsilon_grid": [2.0]}, "learners": {"names": ["naive"]}}
    for sec, kv in sections.items():
        data.setdefault(sec, {}).update(kv)
    return data


def test_every_key_is_declared_once_and_both_paths_read_it():
    run_fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    for k in schema.KEYS:
        assert k.concern in schema.CONCERNS and k.doc
        if k.flwr is not None:
            f = run_fields[k.name]
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # a table: a factory
            assert f.metadata["key"] is k and default == k.default and f.metadata["constraints"] == k.constraints
        if k.scenario:
            sec = {f.name: f for f in dataclasses.fields(SECTIONS[k.section])}
            f = sec[k.name]
            assert f.metadata["key"] is k and f.metadata["doc"] == k.doc
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            assert default == k.scenario_default()
        else:  # a key of one path says why, and a derived one from which scenario key
            assert k.only, k.name
    # every scenario key that Flower's run config also has is a key of the schema (no second declaration)
    for sec, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            k = schema.BY_NAME.get(f.name)
            if k is not None and k.from_scenario != f"{sec}.{f.name}":  # scenario.seed: the cells' seeds' source
                assert f.metadata.get("key") is k, f"[{sec}] {f.name} declared twice"


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("learners", "ldp_sgd_mechanism", "duchi"),
        ("learners", "ldp_sgd_n_sampled", 2),
        ("learners", "ldp_sgd_clip", 0.5),
        ("learners", "ldp_sgd_groups", 3),
        ("learners", "ldp_sgd_learning_rate", 0.1),
        ("learners", "ldp_sgd_fallback", "none"),
        ("learners", "wdro_max_iter", 500),
        ("learners", "spread_max_iter", 17),
        ("run", "check_alpha", 0.05),
        ("population", "fake_targets", 2),
    ],
)
def test_a_scenario_key_reaches_the_cells_run_config(section, key, value):
    spec = parse_scenario(_scenario(**{section: {key: value}}))
    rc = spec.cells()[0].run_config()
    assert getattr(rc, key) == value
    assert RunConfig.from_flwr({key.replace("_", "-"): value}).__getattribute__(key) == value


def test_the_ldp_sgd_keys_reach_the_sweeps_ldp_sgd_learner():
    spec = parse_scenario(_scenario(learners={"ldp_sgd_clip": 0.5, "ldp_sgd_fallback": "none", "ldp_sgd_groups": 4}))
    opts = fit_options(spec.cells()[0].run_config(executor="serial"))
    assert opts.ldp_sgd["clip"] == 0.5 and opts.ldp_sgd["fallback"] is False and opts.ldp_sgd["groups"] == 4
    assert fit_options(RunConfig()).ldp_sgd == {
        "mechanism": "piecewise",
        "n_sampled": None,
        "clip": 1.0,
        "groups": None,
        "learning_rate": None,
        "C": 1.0,
        "fallback": True,
    }  # the estimator's own defaults: a scenario that leaves the keys out fits as before


@pytest.mark.parametrize(
    "scenario, flwr, message",
    [
        ({"learners": {"spread_max_iter": 10**6 + 1}}, {"spread-max-iter": 10**6 + 1}, "in [1, 1e+06]"),
        ({"run": {"mode": "cohort", "cohort_size": 10**7 + 1}}, {"cohort-size": 10**7 + 1}, "in [1, 1e+07]"),
        ({"population": {"n_clients": 10**9 + 1}}, {"n-clients": 10**9 + 1}, "in [1, 1e+09]"),
        ({"privacy": {"n_sampled": -1}}, {"n-sampled": -1}, "in [0, 1e+06]"),
        ({"learners": {"ldp_sgd_clip": 0}}, {"ldp-sgd-clip": 0}, "> 0"),
    ],
)
def test_one_range_refused_by_both_paths_naming_the_key(scenario, flwr, message):
    (sec, kv), (fkey, _) = next(iter(scenario.items())), next(iter(flwr.items()))
    key = next(k for k in kv if k != "mode")
    with pytest.raises(ValidationError) as e:
        parse_scenario(_scenario(**scenario))
    assert e.value.field == f"{sec}.{key}" and message in e.value.message
    with pytest.raises(ValidationError) as e:
        RunConfig.from_flwr({"run-mode": "cohort", **flwr} if fkey == "cohort-size" else flwr)
    assert e.value.field == fkey and message in e.value.message


def test_a_mistyped_learners_key_is_refused_naming_the_nearest():
    with pytest.raises(ValidationError, match="did you mean 'ldp_sgd_clip'"):
        parse_scenario(_scenario(learners={"ldp_sgd_clp": 0.5}))
    with pytest.raises(ValidationError, match="did you mean 'ldp-sgd-clip'"):
        RunConfig.from_flwr({"ldp-sgd-clp": 0.5})


def test_cohort_size_unset_is_one_per_node_or_the_cohort_default():
    """One declaration (unset), read the same way by both paths: one client per node in node mode,
    DEFAULT_COHORT_SIZE per node in cohort mode."""
    assert RunConfig().cohort_size == 1 and RunConfig.from_flwr({"cohort-size": ""}).cohort_size == 1
    assert RunConfig(run_mode="cohort").cohort_size == DEFAULT_COHORT_SIZE == 1000
    cohort = parse_scenario(_scenario(run={"mode": "cohort"})).cells()[0].run_config()
    assert (cohort.run_mode, cohort.cohort_size) == ("cohort", DEFAULT_COHORT_SIZE)
    flower = parse_scenario(_scenario(run={"mode": "flower"})).cells()[0].run_config()
    assert (flower.run_mode, flower.cohort_size) == ("node", 1)
    # read in cohort mode only: the manifest of an earlier sweep lists cohort_size = 1000 with any mode,
    # and `fedrr show` parses it again
    old = parse_scenario(_scenario(run={"mode": "offline", "cohort_size": 1000})).cells()[0].run_config()
    assert (old.run_mode, old.cohort_size) == ("node", 1)
    with pytest.raises(ValidationError, match="must be 1 in run-mode 'node'"):
        RunConfig.from_flwr({"cohort-size": 50})


def test_n_sampled_zero_means_all_in_both_paths():
    unset, zero = (parse_scenario(_scenario(privacy=p)).cells()[0] for p in ({}, {"n_sampled": 0}))
    assert unset.run_config() == zero.run_config() and unset.fingerprint() == zero.fingerprint()
    assert zero.run_config().n_sampled == 0 == RunConfig().n_sampled


def test_a_cell_gives_every_run_config_key_a_scenario_does_not_have():
    """A key of the run config only is derived by the cell, or stays at its default (a deployment's
    key, the protocol) — never silently copied from somewhere else."""
    cell = parse_scenario(_scenario()).cells()[0]
    at_default = {"accept_mechanisms", "max_record_epsilon", "protocol", "results_dir"}
    only_run = {k.name for k in schema.run_keys() if not k.scenario}
    assert only_run <= set(cell.derived()) | at_default
    rc = cell.run_config()
    assert all(getattr(rc, k) == schema.BY_NAME[k].default for k in at_default - {"results_dir"})
