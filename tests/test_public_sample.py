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
from fedrr.learners import FitData, FitOptions, fit_and_score
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
    """The learner passes the public rows as ``EmpiricalPrior`` to spread's CV, smoothed by
    ``public_smoothing`` pseudo-rows (default 1,000; 0 the rows alone, another fit), and without a public
    sample it is an error naming the learner, the others unharmed."""
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
    assert isinstance(prior, EmpiricalPrior) and prior.smoothing == FitOptions().public_smoothing == 1000
    np.testing.assert_array_equal(prior.rows, pop.public_sample())
    raw = fit_and_score("spread-public", data, pop.test_set(), FitOptions(public_smoothing=0))
    assert raw.estimator.estimator_.prior.smoothing == 0
    Xte = pop.test_set()[0]
    assert np.max(np.abs(raw.estimator.predict_proba(Xte) - res.estimator.predict_proba(Xte))) > 1e-6
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
    text = text.replace('mechanism = "auto"', 'mechanism = "paired"')  # spread-public takes pairs, not triples
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


# ------------------------------------------------------------------ smoothing toward the releases' naive Bayes
def _paired_releases(n: int = 3000, seed: int = 0):
    from tests.test_spread_direct import _releases

    return _releases(n, 2, seed)


def test_smoothing_adds_pseudo_rows_drawn_from_the_releases_naive_bayes():
    """``EmpiricalPrior(rows, smoothing=α)``: the M rows, then α rows drawn from ``prior="naive-bayes"``'s
    joint of the same releases: over 200,000 pseudo-rows each attribute's margin, and one attribute
    pair's table, are the mixture's Σ_c π_c p(x_j | c) p(x_k | c) within 5 binomial standard errors; the
    same seed draws the same rows, α 0 is the rows alone."""
    from fedrr.estimators.spread._estimator import SpreadLogisticRegression as Est
    from fedrr.estimators.spread._prior_setup import smoothed_rows
    from fedrr.estimators.spread._priors._mixture import naive_bayes_prior

    Xt, yt, mech = _paired_releases()
    est = Est(encoding="onehot")
    Xv, yi, groups, layout = est._prepare(Xt, yt, mech, est.get_params())
    rows = np.zeros((5, 4), np.int64)
    alpha = 200_000
    out = smoothed_rows(EmpiricalPrior(rows, smoothing=alpha), layout, (Xv, yi, groups), seed=3)
    np.testing.assert_array_equal(out.rows[:5], rows)
    assert out.rows.shape == (5 + alpha, 4) and out.smoothing == 0
    again = smoothed_rows(EmpiricalPrior(rows, smoothing=alpha), layout, (Xv, yi, groups), seed=3)
    np.testing.assert_array_equal(again.rows, out.rows)
    raw = EmpiricalPrior(rows)
    assert smoothed_rows(raw, layout, (Xv, yi, groups), seed=3) is raw
    nb = naive_bayes_prior(Xv, yi, groups, layout)
    pi, p = np.exp(nb.log_pi), [np.exp(lp) for lp in nb.log_p]
    pseudo = out.rows[5:]
    for j, k in enumerate((3, 2, 4, 3)):
        want = pi @ p[j]
        got = np.bincount(pseudo[:, j], minlength=k) / alpha
        assert np.all(np.abs(got - want) <= 5 * np.sqrt(want * (1 - want) / alpha)), (j, got, want)
    want = np.einsum("c,cs,ct->st", pi, p[0], p[2]).ravel()
    got = np.bincount(pseudo[:, 0] * 4 + pseudo[:, 2], minlength=12) / alpha
    assert np.all(np.abs(got - want) <= 5 * np.sqrt(want * (1 - want) / alpha)), (got, want)


def test_a_smoothed_prior_is_the_fit_of_its_rows_and_pseudo_rows():
    """The fit with ``smoothing=α`` is the fit whose prior is the rows and those α pseudo-rows given
    whole (coefficients equal), and differs from the rows alone; smoothing outside the integers >= 0 is
    refused naming ``prior.smoothing``."""
    from fedrr.estimators import SpreadLogisticRegression
    from fedrr.estimators.spread._prior_setup import smoothed_rows

    Xt, yt, mech = _paired_releases(4000, 1)
    rng = np.random.default_rng(5)
    rows = np.stack([rng.integers(0, k, 300) for k in (3, 2, 4, 3)], axis=1)
    kw = dict(C=0.5, encoding="onehot", random_state=2)
    smooth = SpreadLogisticRegression(prior=EmpiricalPrior(rows, smoothing=700), **kw).fit(Xt, yt, mechanism=mech)
    assert smooth.solver_ == "direct"
    Xv, yi, groups, layout = smooth._prepare(Xt, yt, mech, smooth.get_params())
    from fedrr.estimators.spread._estimator import seed_from

    whole = smoothed_rows(EmpiricalPrior(rows, smoothing=700), layout, (Xv, yi, groups), seed_from(2))
    given = SpreadLogisticRegression(prior=EmpiricalPrior(whole.rows), **kw).fit(Xt, yt, mechanism=mech)
    np.testing.assert_allclose(smooth.coef_, given.coef_, rtol=0, atol=1e-12)
    raw = SpreadLogisticRegression(prior=EmpiricalPrior(rows), **kw).fit(Xt, yt, mechanism=mech)
    assert np.max(np.abs(raw.coef_ - smooth.coef_)) > 0.02
    for bad in (-1, 2.5, True):
        with pytest.raises(ValidationError, match="prior.smoothing"):
            EmpiricalPrior(rows, smoothing=bad)
