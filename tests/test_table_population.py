"""Your own table as a population (issue 43 item 1, issue 46 item 1): a DataFrame, a CSV or a Parquet
file with a declared schema; one error naming the row and column of a bad cell; bootstrap resampling
to any N only when asked, client i's row a function of (seed, i); a scenario file with a table runs
through `fedrr check` and a sweep whose outputs say "resampled"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedrr.assembly import build_population
from fedrr.datasets import read_table
from fedrr.errors import ValidationError
from fedrr.population import START_DIR_ENV, DatasetPopulation, TablePopulation, bootstrap_row, record_mechanism_for
from fedrr.run_config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
CAT = {"region": ["north", "south", "east", "west"], "smoker": ["no", "yes"]}
EDGES = {"age": [30, 45, 60], "hours": [30.0, 40.0]}
SCHEMA = {"label": "buys", "classes": ["no", "yes"], "categorical": CAT, "edges": EDGES}


def _frame(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 80, n),
            "region": rng.choice(CAT["region"], n),
            "hours": rng.integers(5, 70, n).astype(float),
            "smoker": rng.choice(CAT["smoker"], n, p=[0.8, 0.2]),
            "buys": rng.choice(["no", "yes"], n, p=[0.6, 0.4]),
        }
    )


def _csv(df: pd.DataFrame, path: Path) -> Path:
    df.to_csv(path, index=False)
    return path


# ------------------------------------------------------------------ reading
def test_dataframe_csv_and_parquet_give_the_same_records(tmp_path):
    df = _frame()
    a = read_table(df, **SCHEMA)
    b = read_table(_csv(df, tmp_path / "t.csv"), **SCHEMA)
    df.to_parquet(tmp_path / "t.parquet")
    c = read_table(tmp_path / "t.parquet", **SCHEMA)
    for ds in (b, c):
        np.testing.assert_array_equal(ds.X, a.X)
        np.testing.assert_array_equal(ds.y, a.y)
    # features in the table's column order, undeclared columns left out and named
    assert [f.name for f in a.schema.features] == ["age", "region", "hours", "smoker"]
    assert list(a.schema.states()) == [4, 4, 3, 2] and a.schema.classes == ("no", "yes")
    assert a.extra["unused_columns"] == ["id"]
    np.testing.assert_array_equal(a.y, (df["buys"] == "yes").to_numpy().astype(int))
    np.testing.assert_array_equal(a.X[:, 1], df["region"].map({v: i for i, v in enumerate(CAT["region"])}))


def test_a_value_on_an_edge_goes_up():
    df = pd.DataFrame({"age": [29.9, 30, 44, 45, 60, 99], "buys": ["no", "yes"] * 3})
    ds = read_table(df, label="buys", edges={"age": [30, 45, 60]})
    assert ds.X[:, 0].tolist() == [0, 1, 1, 2, 3, 3]
    assert ds.schema.features[0].edges == (30.0, 45.0, 60.0) and ds.schema.features[0].closed == "left"


@pytest.mark.parametrize(
    "column, value, words",
    [
        ("region", "mars", "'mars' is outside the declared domain"),
        ("buys", None, "missing the label"),
        ("buys", "maybe", "'maybe' is outside the declared domain"),
        ("age", "forty", "'forty' is not a number"),
        ("hours", None, "missing number"),
    ],
)
def test_a_bad_cell_is_one_error_naming_its_row_and_column(tmp_path, column, value, words):
    df = _frame().astype({"age": object, "hours": object})
    df.loc[17, column] = value
    with pytest.raises(ValidationError) as exc:
        read_table(_csv(df, tmp_path / "bad.csv"), **SCHEMA)
    text = str(exc.value)
    assert "row 17 (line 19)" in text and f"column {column!r}" in text and words in text, text
    assert "more bad cell" not in text
    with pytest.raises(ValidationError, match=f"row 17, column '{column}'"):  # a DataFrame: its index label
        read_table(df, **SCHEMA)


def test_the_first_of_several_bad_cells_is_named_with_the_count(tmp_path):
    df = _frame().astype({"age": object})
    df.loc[[40, 9], "age"] = "x"
    df.loc[12, "region"] = "moon"
    with pytest.raises(ValidationError, match=r"row 9 \(line 11\), column 'age'.*\(2 more bad cell"):
        read_table(_csv(df, tmp_path / "bad.csv"), **SCHEMA)


def test_schema_mistakes_are_named():
    df = _frame()
    with pytest.raises(ValidationError, match=r"^categorical\.region: give its domain"):
        read_table(df, label="buys", categorical={"region": None})
    with pytest.raises(ValidationError, match=r"^edges\.age: must be a non-empty list of strictly increasing"):
        read_table(df, label="buys", edges={"age": [45, 30]})
    with pytest.raises(ValidationError, match=r"^edges\.weight: column 'weight' is not in"):
        read_table(df, label="buys", edges={"weight": [1.0]})
    with pytest.raises(ValidationError, match=r"^label: column 'income' is not in"):
        read_table(df, label="income", edges=EDGES)
    with pytest.raises(ValidationError, match=r"^table: must be a .csv / .parquet / .pq file"):
        read_table("data.xlsx", **SCHEMA)


def test_a_domain_is_read_from_the_tables_own_schema_not_its_values(tmp_path):
    df = _frame()
    df["region"] = pd.Categorical(df["region"], categories=["north", "south", "east", "west", "space"])
    df.to_parquet(tmp_path / "t.parquet")
    ds = read_table(tmp_path / "t.parquet", label="buys", categorical={"region": None})
    assert ds.schema.states()[0] == 5  # the declared category "space", which no row has, is a state


def test_classes_left_out_are_read_from_the_label_column_and_said():
    ds = read_table(_frame(), label="buys", edges=EDGES)
    assert ds.schema.classes == ("no", "yes") and not ds.extra["classes_declared"]
    pop = TablePopulation(ds, 50, "paired", epsilon=1.0)
    assert "treated as public" in pop.describe()["classes_from"]


def test_private_quantile_edges_only_when_asked_and_said():
    df = _frame()
    ds = read_table(df, label="buys", edges={"age": "private-quantiles:4"})
    e = ds.extra["private_edges"]["age"]
    np.testing.assert_allclose(e, np.quantile(df["age"].to_numpy(float), [0.25, 0.5, 0.75]))
    assert ds.schema.features[0].edges is None  # not declared public
    pop = TablePopulation(ds, 50, "paired", epsilon=1.0)
    assert "not covered by the release's ε" in pop.describe()["private_edges_note"]


# ------------------------------------------------------------------ the population
def _pop(n_clients, seed=0, **kw):
    return TablePopulation(_frame(), n_clients, "auto", epsilon=1.0, seed=seed, n_test_per_class=10, **SCHEMA, **kw)


def test_no_resampling_unless_asked():
    pop = _pop(180)  # 200 rows, 10 per class held out: 180 training rows
    assert pop.n_train == 180 and pop.resample == "none"
    rows = {tuple(pop.record(i)[0]) + (pop.record(i)[1], pop.row(i)) for i in range(180)}
    assert {pop.row(i) for i in range(180)} == set(range(180)) and len(rows) == 180  # each row once
    assert "resampled" not in pop.describe() and not pop.describe()["rows_reused"]
    with pytest.raises(ValidationError, match=r"^n_clients: must be at most the 180 training rows .* resample"):
        _pop(181)
    assert pop.test_set()[0].shape == (20, 4)


def test_bootstrap_row_is_a_function_of_seed_and_client():
    a, b = _pop(10**6, resample="bootstrap"), _pop(10**6, resample="bootstrap")
    ids = [999_999, 3, 500_000, 0, 77]
    forward = [a.record(i) for i in ids]
    backward = [b.record(i) for i in reversed(ids)][::-1]  # another order, another object: same rows
    for (xa, ya), (xb, yb) in zip(forward, backward):
        np.testing.assert_array_equal(xa, xb)
        assert ya == yb
    assert [a.row(i) for i in ids] == [bootstrap_row(0, i, 180) for i in ids]
    c = _pop(10**6, seed=1, resample="bootstrap")
    assert [c.row(i) for i in range(50)] != [a.row(i) for i in range(50)]
    d = a.describe()
    assert d["resample"] == "bootstrap" and "resampled" in d and "1,000,000 clients" in d["resampled"]


def test_bootstrap_frequencies_match_the_table():
    """Each state's share among N resampled clients is the table's, within 4 binomial standard errors."""
    N = 20_000
    pop = _pop(N, resample="bootstrap")
    X_tr, y_tr, _, _ = pop._data
    recs = [pop.record(i) for i in range(N)]
    X = np.array([r[0] for r in recs])
    y = np.array([r[1] for r in recs])
    for j, k in enumerate(pop.schema.states()):
        for s in range(k):
            p = float(np.mean(X_tr[:, j] == s))
            se = math.sqrt(p * (1 - p) / N)
            assert abs(np.mean(X[:, j] == s) - p) <= 4 * se + 1e-12, (j, s)
    p = float(np.mean(y_tr))
    assert abs(np.mean(y) - p) <= 4 * math.sqrt(p * (1 - p) / N)
    counts = np.bincount([pop.row(i) for i in range(N)], minlength=pop.n_train)
    assert counts.min() > 0  # every row drawn (expected N/180 ≈ 111 times each)


def test_adult_resamples_the_same_way_and_tests_on_its_real_held_out_rows():
    mech = record_mechanism_for("paired", 12, [8, 6, 3, 2, 5, 7, 7, 14, 6, 5, 2, 41], 2, feature_epsilon=1.0)
    pop = DatasetPopulation("adult_binned", 10**6, mech, resample="bootstrap", seed=3)
    assert pop.n_train == 30_162 and pop.test_set()[0].shape == (15_060, 12)
    assert pop.row(999_999) == bootstrap_row(3, 999_999, 30_162)
    X, y, _, _ = pop._data
    x, lab = pop.record(999_999)
    np.testing.assert_array_equal(x, X[pop.row(999_999)])
    assert "resampled" in pop.describe()
    plain = DatasetPopulation("adult_binned", 100, mech)
    assert plain.resample == "none" and "resampled" not in plain.describe()


# ------------------------------------------------------------------ run configs and scenarios
def _flwr(tmp_path, **over):
    _csv(_frame(), tmp_path / "t.csv")
    cfg = {
        "table": "t.csv",
        "label": "buys",
        "classes": json.dumps(["no", "yes"]),
        "categorical": json.dumps(CAT),
        "edges": json.dumps(EDGES),
        "n-test-per-class": 10,
        "mechanism": "auto",
        "feature-epsilon": 1.0,
        "n-clients": 100,
    }
    return RunConfig.from_flwr({**cfg, **over})


def test_a_flower_run_config_builds_a_table_population(tmp_path, monkeypatch):
    monkeypatch.setenv(START_DIR_ENV, str(tmp_path))  # relative paths: to where the run started
    cfg = _flwr(tmp_path)
    assert RunConfig.from_flwr(cfg.to_flwr()) == cfg  # the JSON text keys round-trip
    pop = build_population(cfg)
    assert isinstance(pop, TablePopulation) and list(pop.schema.states()) == [4, 4, 3, 2]
    assert pop.describe()["table"] == str(tmp_path / "t.csv") and pop.release_plans
    with pytest.raises(ValidationError, match=r"^n-clients: must be at most the 180 training rows"):
        build_population(_flwr(tmp_path, **{"n-clients": 500}))
    assert build_population(_flwr(tmp_path, **{"n-clients": 500, "resample": "bootstrap"})).n_clients == 500
    with pytest.raises(ValidationError, match=r"^label: is a table population's key"):
        RunConfig.from_flwr({"label": "buys"})
    with pytest.raises(ValidationError, match=r"^categorical: must be JSON text"):
        _flwr(tmp_path, categorical="{region: north}")
    with pytest.raises(ValidationError, match=r"^mechanism: a table population releases discrete states"):
        _flwr(tmp_path, mechanism="gaussian")


SCENARIO = """
[scenario]
name = "tiny_table"
seed = 0

[population]
table = "t.csv"
label = "buys"
classes = ["no", "yes"]
categorical = {{ region = ["north", "south", "east", "west"], smoker = ["no", "yes"] }}
edges = {{ age = [30, 45, 60], hours = [30, 40] }}
n_test_per_class = 20
n_clients = {n_clients}
{resample}

[privacy]
mechanism = "auto"
epsilon_grid = [4]

[learners]
names = ["ldp-nb", "majority"]

[run]
mode = "offline"
"""


def _scenario(tmp_path, n_clients=150, resample="", df=None):
    sub = tmp_path / "cfg"
    sub.mkdir(exist_ok=True)
    _csv(_frame() if df is None else df, sub / "t.csv")
    path = sub / "s.toml"
    path.write_text(SCENARIO.format(n_clients=n_clients, resample=resample))
    return path


def test_check_names_a_bad_cell_and_refuses_more_clients_than_rows(tmp_path, monkeypatch, capsys):
    from fedrr.experiment.cli import main

    monkeypatch.chdir(tmp_path)  # the table is found relative to the scenario file, not here
    assert main(["check", str(_scenario(tmp_path))]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["check", str(_scenario(tmp_path, n_clients=500))]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error: population.n_clients: must be at most the 160 training rows" in err[0]
    df = _frame().astype({"hours": object})
    df.loc[5, "hours"] = "lots"
    assert main(["check", str(_scenario(tmp_path, df=df))]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "t.csv row 5 (line 7), column 'hours': 'lots' is not a number" in err[0], err


def test_a_sweep_of_a_resampled_table_says_so(tmp_path, capsys):
    from fedrr.experiment import load_scenario, sweep

    spec = load_scenario(_scenario(tmp_path, n_clients=400, resample='resample = "bootstrap"'))
    assert any("resampled" in n for n in spec.notes)
    out = tmp_path / "out"
    res = sweep(spec, out, workers=1, parallel="processes", progress=False, log=print)
    assert not res.failed
    printed = capsys.readouterr().out
    assert "population.resample = 'bootstrap'" in printed and "N 400 (resampled):" in printed, printed
    cell = json.loads(next((out / "cells").glob("*.json")).read_text())
    assert cell["population"]["resample"] == "bootstrap" and "resampled" in cell["population"]
    assert cell["n_releases"] == 400 and "ldp-nb" in cell["learners"] and "accuracy" in cell["learners"]["ldp-nb"]
    from fedrr.experiment._summary import summary_markdown  # what `fedrr sweep` writes to summary.md

    assert "(resampled: bootstrap" in summary_markdown(out)
    man = json.loads((out / "manifest.json").read_text())
    assert "bootstrap" in json.dumps(man)


def test_the_tutorials_table_and_scenario(tmp_path, monkeypatch, capsys):
    """configs/data/survey*.csv are what their documented script writes, and configs/my_table.toml
    passes `fedrr check` from any working directory (its paths are relative to the file)."""
    import runpy
    import shutil

    from fedrr.experiment.cli import main

    data = ROOT / "configs" / "data"
    shutil.copy(data / "make_survey.py", tmp_path / "make_survey.py")
    runpy.run_path(str(tmp_path / "make_survey.py"), run_name="__main__")
    for name in ("survey.csv", "survey_test.csv"):
        assert (tmp_path / name).read_bytes() == (data / name).read_bytes(), name
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(ROOT / "configs" / "my_table.toml")]) == 0
    assert "OK — scenario 'my_table'" in capsys.readouterr().out


def test_a_table_scenarios_schema_is_what_the_planner_reads(tmp_path):
    from fedrr.experiment import load_scenario
    from fedrr.experiment._cells import scenario_schema
    from fedrr.population import planned_release

    spec = load_scenario(_scenario(tmp_path))
    schema = scenario_schema(spec)
    assert list(schema.states()) == [4, 4, 3, 2] and schema.classes == ("no", "yes")
    cell = spec.cells()[0]
    pop = build_population(cell.run_config())
    plan = planned_release(schema.states(), schema.n_classes, 4.0, cell.n_clients)
    assert pop.mechanism(0) is plan.mechanism  # the population releases the design the planner picks


def test_a_manifest_keeps_the_table_path_relative_to_the_scenario_file(tmp_path, monkeypatch):
    """A results directory's config names the table as the scenario file does, so it reads again from
    another checkout (``fedrr show``, ``fedrr reproduce``) as long as the file sits beside the config."""
    from fedrr.experiment import load_scenario, parse_scenario

    spec = load_scenario(_scenario(tmp_path))
    assert spec.population.table == str(tmp_path / "cfg" / "t.csv")
    assert spec.as_dict()["population"]["table"] == "t.csv"
    monkeypatch.chdir(tmp_path)
    again = parse_scenario(spec.as_dict(), path="cfg/s.toml")
    assert again == spec and again.cells()[0].fingerprint() == spec.cells()[0].fingerprint()


def test_a_cells_fingerprint_follows_the_tables_content(tmp_path):
    """A finished cell is reused only for the same rows: editing the table changes the fingerprint."""
    from fedrr.experiment import load_scenario

    path = _scenario(tmp_path)
    before = load_scenario(path).cells()[0].fingerprint()
    assert load_scenario(path).cells()[0].fingerprint() == before
    df = _frame()
    df.loc[0, "buys"] = "yes" if df.loc[0, "buys"] == "no" else "no"
    _csv(df, tmp_path / "cfg" / "t.csv")
    assert load_scenario(path).cells()[0].fingerprint() != before


@pytest.mark.parametrize(
    "privacy",
    [
        'mechanism = "rr"\nepsilon_grid = [4]',
        'mechanism = "oracle"\nfeature_epsilon_grid = [1]\nlabel_epsilon = 1',
        'mechanism = "paired"\nepsilon_grid = [2]\nn_sampled = 2',
        'mechanism = "auto"\nepsilon_grid = [2]',
    ],
)
def test_every_discrete_mechanism_family_releases_a_table_record(tmp_path, privacy):
    from fedrr.experiment import load_scenario

    path = _scenario(tmp_path)
    path.write_text(path.read_text().replace('mechanism = "auto"\nepsilon_grid = [4]', privacy))
    cell = load_scenario(path).cells()[0]
    pop = build_population(cell.run_config())
    assert isinstance(pop, TablePopulation) and pop.mechanism(0).n_features == 4
    xt, yt = pop.release_record(0, np.random.default_rng(0))
    assert pop.mechanism(0).epsilon > 0 and yt is not None and len(np.atleast_1d(xt)) >= 1


@pytest.mark.flower
@pytest.mark.integration
def test_the_flower_wrapper_runs_a_resampled_table(tmp_path, app_copy):
    """`python -m fedrr.federation.flwr_cli` with a table in Flower's flat run config (its schema as JSON
    text, its path relative to where the run starts): 300 bootstrap clients from 180 rows, in cohorts."""
    import os
    import subprocess
    import sys

    from fedrr.federation.flwr_cli import QUIET_ENV

    _csv(_frame(), tmp_path / "t.csv")
    results = tmp_path / "results"
    override = (
        f"table='t.csv' label='buys' categorical='{json.dumps(CAT)}' edges='{json.dumps(EDGES)}' "
        "n-test-per-class=10 mechanism='auto' feature-epsilon=4.0 n-clients=300 resample='bootstrap' "
        f"run-mode='cohort' cohort-size=150 learners='ldp-nb,majority' results-dir='{results}' run-name='table'"
    )
    cmd = [sys.executable, "-m", "fedrr.federation.flwr_cli", str(app_copy), "--flwr-home", str(tmp_path / "home")]
    cmd += ["--json", "--timeout", "400", "--run-config", override]
    proc = subprocess.run(
        cmd, cwd=tmp_path, env={**os.environ, **QUIET_ENV}, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["survivors"] == []
    metrics = json.loads((results / "table" / "metrics.json").read_text())
    assert metrics["status"] == "done" and metrics["n_releases"] == 300
    assert metrics["population"]["table"] == str(tmp_path / "t.csv") and "resampled" in metrics["population"]
    assert "[fedrr] rows resampled: bootstrap: 300 clients" in proc.stdout + proc.stderr


def test_resample_is_refused_where_nothing_would_resample(tmp_path):
    from fedrr.experiment import parse_scenario

    with pytest.raises(ValidationError, match=r"^resample: is the built-in population's; fedrr.examples:"):
        RunConfig(population="fedrr.examples:TwoBudgetSyntheticPopulation", resample="bootstrap")
    regression = {
        "population": {"task": "regression", "dataset": "diabetes", "resample": "bootstrap"},
        "privacy": {"mechanism": "gaussian", "epsilon_grid": [1.0]},
        "learners": {"names": ["ls"]},
    }
    with pytest.raises(ValidationError, match=r"^population.resample: is not available for task = 'regression'"):
        parse_scenario(regression)


def test_an_empty_column_name_is_named_as_the_key():
    """A table key whose column name is empty is refused naming the key itself (the fuzz test's case:
    ``categorical = {"" = 0}`` once named a field "categorical.")."""
    with pytest.raises(ValidationError, match=r"^categorical: its column names must be non-empty"):
        RunConfig(categorical={"": 0})
    with pytest.raises(ValidationError, match=r"^edges: its column names must be non-empty"):
        RunConfig(edges={" ": [1.0]})
