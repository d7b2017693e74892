"""A public sample as the server's prior, from a config (issue 46): ``population.public_table`` (public
clean rows coded by the table's declared schema) or ``public_rows`` (a simulation's sample of the
training rows), offered by ``ClientPopulation.public_sample`` to the learner ``spread-public``
(spread's CV with ``EmpiricalPrior`` of the rows); every mistake named at the boundary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedrr.datasets import read_public_rows, read_table
from fedrr.errors import ValidationError
from fedrr.learners import FitData, fit_and_score
from fedrr.mechanisms import EmpiricalPrior
from fedrr.population import DatasetPopulation, TablePopulation, record_mechanism_for
from fedrr.run_config import RunConfig
from tests.test_table_population import SCENARIO, SCHEMA, _csv, _frame


def test_public_rows_are_coded_as_the_tables_records(tmp_path):
    """The same rows read as a table and as a public sample have the same states (domains by index,
    numbers cut at the declared edges, a value on an edge going up); the label and undeclared columns
    are not needed."""
    df = _frame(120, seed=3)
    ds = read_table(df, **SCHEMA)
    public = _csv(df.drop(columns=["buys", "id"]).iloc[::-1], tmp_path / "p.csv")
    np.testing.assert_array_equal(read_public_rows(public, ds), ds.X[::-1])
    np.testing.assert_array_equal(read_public_rows(df, ds), ds.X)  # a DataFrame, label ignored


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda d: d.drop(columns="hours"), "column 'hours' is not in"),
        (
            lambda d: d.assign(region=["mars"] + list(d.region[1:])),
            "row 0 (line 2), column 'region': 'mars' is outside",
        ),
        (
            lambda d: d.astype({"age": object}).assign(age=["old"] + list(d.age[1:])),
            "column 'age': 'old' is not a number",
        ),
        (lambda d: d.iloc[:0], "has no rows"),
    ],
)
def test_a_bad_public_table_is_one_error_naming_it(tmp_path, edit, words):
    ds = read_table(_frame(), **SCHEMA)
    path = _csv(edit(_frame(30, seed=1)), tmp_path / "p.csv")
    with pytest.raises(ValidationError, match="public_table") as exc:
        read_public_rows(path, ds)
    assert words in str(exc.value), str(exc.value)


def _table_population(tmp_path, **kw):
    mech = record_mechanism_for("paired", 4, [4, 4, 3, 2], 2, feature_epsilon=2.0)
    return TablePopulation(_csv(_frame(), tmp_path / "t.csv"), 150, mech, **SCHEMA, n_test_per_class=20, **kw)


def test_a_population_offers_its_public_sample(tmp_path):
    """``public_table``: its rows, coded; ``public_rows``: that many distinct training rows, the same for
    the same seed and others for another; none by default; more than the training rows, or both, refused."""
    public = _frame(40, seed=7)
    pop = _table_population(tmp_path, public_table=_csv(public, tmp_path / "p.csv"))
    np.testing.assert_array_equal(pop.public_sample(), read_table(public, **SCHEMA).X)
    assert pop.describe()["public_sample"] == "40 public rows"
    assert _table_population(tmp_path).public_sample() is None
    a, b = (_table_population(tmp_path, public_rows=25, seed=s).public_sample() for s in (0, 0))
    c = _table_population(tmp_path, public_rows=25, seed=1).public_sample()
    np.testing.assert_array_equal(a, b)
    assert a.shape == (25, 4) and not np.array_equal(a, c)
    train = _table_population(tmp_path, public_rows=25)._data[0]
    rows = [np.flatnonzero((train == r).all(axis=1)) for r in a]
    assert all(r.size for r in rows)  # each a training row
    with pytest.raises(ValidationError, match="public_rows.*at most the 160 training rows"):
        _table_population(tmp_path, public_rows=161)
    with pytest.raises(ValidationError, match="public_rows.*set one"):
        _table_population(tmp_path, public_rows=5, public_table=_csv(public, tmp_path / "p.csv"))
    adult = DatasetPopulation(
        "digits_7_vs_9", 50, record_mechanism_for("rr", 64, 17, 2, feature_flip=0.2, label_flip=0.2), public_rows=9
    )
    assert adult.public_sample().shape == (9, 64) and "public_sample" in adult.describe()


def test_spread_public_fits_with_the_rows_as_its_prior(tmp_path):
    """The learner passes the public rows as ``EmpiricalPrior`` to spread's CV (its fitted prior is their
    joint), and without a public sample it is an error naming the learner, the others unharmed."""
    pop = _table_population(tmp_path, public_rows=60)
    rng = np.random.default_rng(0)
    recs = [pop.record(i) for i in range(pop.n_clients)]
    X = np.stack([r for r, _ in recs])
    y = np.array([c for _, c in recs])
    mech = pop.mechanism(0)
    Xt, yt = mech.release(X, y, rng=rng)
    data = FitData(Xt, yt, mech, public_X=pop.public_sample())
    res = fit_and_score("spread-public", data, pop.test_set())
    assert "error" not in res.entry, res.entry
    prior = res.estimator.estimator_.prior
    assert isinstance(prior, EmpiricalPrior)
    np.testing.assert_array_equal(prior.rows, pop.public_sample())
    res = fit_and_score("spread-public", FitData(Xt, yt, mech), pop.test_set())
    assert "needs a public sample" in res.entry["error"]


def test_config_mistakes_about_a_public_sample_are_named(tmp_path):
    """spread-public without a public sample, public_table without a table, public_rows with a custom
    population: each refused naming its key, in a run config and in a scenario."""
    from fedrr.experiment import parse_scenario

    with pytest.raises(ValidationError, match="learners.*'spread-public' needs a public sample"):
        RunConfig(dataset="adult_binned", mechanism="auto", feature_epsilon=2.0, learners=("spread-public",))
    with pytest.raises(ValidationError, match="public-table.*is a table population's key"):
        RunConfig(dataset="adult_binned", public_table="p.csv")
    with pytest.raises(ValidationError, match="public-rows.*gives its own public_sample"):
        RunConfig(population="tests.test_public_sample:_table_population", public_rows=3)
    RunConfig(dataset="adult_binned", mechanism="auto", feature_epsilon=2.0, learners=("spread-public",), public_rows=9)
    toml = SCENARIO.format(n_clients=150, resample="").replace('["ldp-nb", "majority"]', '["spread-public"]')
    import tomllib

    with pytest.raises(ValidationError, match="learners.names.*needs a public sample"):
        parse_scenario(tomllib.loads(toml))


def test_a_sweep_cell_with_a_public_table(tmp_path):
    """Through a scenario: the public table's path is relative to the scenario file, the cell's
    population says it has the sample, spread-public scores, and the fingerprint follows the file's content."""
    from fedrr.experiment import load_scenario, sweep

    sub = tmp_path / "cfg"
    sub.mkdir()
    _csv(_frame(), sub / "t.csv")
    _csv(_frame(50, seed=9).drop(columns="buys"), sub / "p.csv")
    text = SCENARIO.format(n_clients=150, resample="").replace(
        "n_test_per_class", 'public_table = "p.csv"\nn_test_per_class'
    )
    (sub / "s.toml").write_text(text.replace('["ldp-nb", "majority"]', '["spread-public", "ldp-nb"]'))
    spec = load_scenario(sub / "s.toml")
    assert (
        spec.population.public_table == str(sub / "p.csv") and spec.as_dict()["population"]["public_table"] == "p.csv"
    )
    before = spec.cells()[0].fingerprint()
    res = sweep(spec, tmp_path / "out", workers=1, parallel="processes", progress=False, log=lambda *a: None)
    assert not res.failed
    cell = json.loads(next((tmp_path / "out" / "cells").glob("*.json")).read_text())
    assert cell["population"]["public_sample"] == "50 public rows"
    assert "accuracy" in cell["learners"]["spread-public"], cell["learners"]["spread-public"]
    _csv(_frame(50, seed=10).drop(columns="buys"), sub / "p.csv")
    assert load_scenario(sub / "s.toml").cells()[0].fingerprint() != before
