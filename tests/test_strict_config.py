"""Nothing runs on a privacy budget the user did not ask for (issue 27): in every way a run is
configured, a misspelt key and a budget of 0 are refused before anything runs, naming the key
(and the nearest valid one); two keys for one budget are refused; an unset budget is an absent
key, and a default budget is announced."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from sklearn.base import clone

from fedrr.assembly import build_population
from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression
from fedrr.experiment import parse_scenario
from fedrr.experiment.cli import main as fedrr_main
from fedrr.federation import load_run_config
from fedrr.federation.flwr_cli import check_run_config
from fedrr.population import START_DIR_ENV
from fedrr.run_config import DEFAULTS, RunConfig

REPO = Path(__file__).resolve().parents[1]
TWO_BUDGETS = "fedrr.examples:TwoBudgetSyntheticPopulation"
SCENARIO = {
    "population": {"dataset": "digits_7_vs_9", "n_clients": 40},
    "privacy": {"mechanism": "rr", "feature_flip_grid": [0.3], "label_flip": 0.2},
    "learners": {"names": ["naive"]},
}


def _flat(**changes) -> dict:
    return {"n-clients": 30, "learners": "naive", **changes}


def _scenario(**sections) -> dict:
    out = {k: dict(v) for k, v in SCENARIO.items()}
    for sec, kv in sections.items():
        out.setdefault(sec, {}).update(kv)
    return out


def _app(tmp_path: Path, **config) -> Path:
    """A copy of the app's pyproject with some [tool.flwr.app.config] values replaced."""
    text = (REPO / "pyproject.toml").read_text()
    data = tomllib.loads(text)["tool"]["flwr"]["app"]["config"]
    lines = []
    for line in text.splitlines():
        key = line.split("=")[0].strip()
        if key in config and key in data:
            import json

            lines.append(f"{key} = {json.dumps(config.pop(key))}")
        else:
            lines.append(line)
    (tmp_path / "pyproject.toml").write_text(
        "\n".join(lines).replace("[tool.flwr.app.config]", "[tool.flwr.app.config]\n" + _toml(config))
    )
    return tmp_path


def _toml(extra: dict) -> str:
    import json

    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in extra.items())


# ------------------------------------------------------------------- a misspelt key, every path
def _refused(fn, key: str, nearest: str | None = None) -> ValidationError:
    with pytest.raises(ValidationError) as exc:
        fn()
    assert key in exc.value.field, exc.value
    assert "unknown key" in exc.value.message
    if nearest:
        assert f"did you mean {nearest!r}" in exc.value.message, exc.value.message
    return exc.value


def test_the_issue_example_is_refused_naming_the_key_and_the_nearest_valid_one():
    err = _refused(
        lambda: load_run_config({"n-clients": 30, "feature-epsilonn": 1.0, "n-clinets": 50, "learners": "naive"}),
        "feature-epsilonn",
        "feature-epsilon",
    )
    assert "valid keys" in err.message and "n-clients" in err.message


def test_misspelt_key_in_run_federation_dict():
    _refused(lambda: load_run_config(_flat(**{"n-clinets": 50})), "n-clinets", "n-clients")


def test_misspelt_key_in_a_flower_override(tmp_path):
    _refused(lambda: check_run_config(REPO, {"label-fip": 0.1}), "label-fip", "label-flip")


def test_misspelt_key_in_the_apps_pyproject_config(tmp_path):
    app = _app(tmp_path, **{"feature-epsilom": 1.0})
    _refused(lambda: check_run_config(app, {}), "feature-epsilom", "feature-epsilon")


def test_misspelt_key_in_a_scenario_section():
    bad = _scenario(privacy={"feature_flip_gird": [0.2]})
    _refused(lambda: parse_scenario(bad), "feature_flip_gird", "feature_flip_grid")


def test_misspelt_key_in_population_options():
    sc = _scenario(population={"population": TWO_BUDGETS, "options": {"n_tset": 100}})
    sc["privacy"] = {}
    _refused(lambda: parse_scenario(sc), "population.options.n_tset", "n_test")


DATASET_POP = '''
from fedrr.examples import TwoBudgetSyntheticPopulation


class DatasetPopulation(TwoBudgetSyntheticPopulation):
    """A custom population that takes a dataset of its own (not one of fedrr's built-in names)."""

    def __init__(self, dataset: str, n_clients: int = 1000, seed: int = 0):
        super().__init__(n_clients, seed)
        self.dataset = dataset
'''


def test_a_custom_population_takes_its_own_dataset_name(tmp_path, monkeypatch):
    (tmp_path / "pop_with_dataset.py").write_text(DATASET_POP)
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_run_config({"population": "pop_with_dataset:DatasetPopulation", "dataset": "my-sensor-logs"})
    assert cfg.dataset == "my-sensor-logs"
    assert RunConfig.from_flwr(cfg.to_flwr()) == cfg
    assert build_population(cfg.replace(n_clients=10)).dataset == "my-sensor-logs"
    # a custom population without a dataset parameter is not handed one: the built-in names still hold
    _unknown_dataset(lambda: load_run_config({"population": TWO_BUDGETS, "dataset": "my-sensor-logs"}))


def _unknown_dataset(fn) -> None:
    with pytest.raises(ValidationError) as exc:
        fn()
    assert exc.value.field == "dataset", exc.value
    assert "'my-sensor-logs'" in exc.value.message and "digits_7_vs_9" in exc.value.message, exc.value.message


def test_the_built_in_population_refuses_an_unknown_dataset_naming_the_key():
    _unknown_dataset(lambda: load_run_config({"dataset": "my-sensor-logs"}))
    _unknown_dataset(lambda: RunConfig(dataset="my-sensor-logs"))


def test_misspelt_extra_of_a_custom_population_in_a_flat_config():
    _refused(lambda: load_run_config({"population": TWO_BUDGETS, "n-tset": 100}), "n-tset", "n-test")
    cfg = load_run_config({"population": TWO_BUDGETS, "n-test": 100, "n-clients": 10})  # its real parameter
    assert build_population(cfg).test_set()[0].shape[0] == 100


def test_misspelt_estimator_parameter_is_refused_by_scikit_learns_own_rule():
    with pytest.raises(ValueError, match="Invalid parameter 'max_iterr'"):
        SpreadLogisticRegression().set_params(max_iterr=5)
    with pytest.raises(TypeError, match="max_iterr"):
        SpreadLogisticRegression(max_iterr=5)
    assert clone(SpreadLogisticRegression(max_iter=5)).max_iter == 5


# ------------------------------------------------------------------- a budget of 0, every path
def _zero_refused(fn, key: str) -> None:
    with pytest.raises(ValidationError) as exc:
        fn()
    assert key in exc.value.field, exc.value
    assert "0" in exc.value.message


@pytest.mark.parametrize("key", ["feature-epsilon", "feature-flip", "label-flip", "label-epsilon"])
def test_zero_budget_in_run_federation_dict(key):
    _zero_refused(lambda: load_run_config(_flat(**{key: 0})), key)
    _zero_refused(lambda: load_run_config(_flat(**{key: 0.0})), key)


def test_zero_budget_in_a_flower_override_and_in_pyproject(tmp_path):
    _zero_refused(lambda: check_run_config(REPO, {"feature-epsilon": 0.0}), "feature-epsilon")
    app = _app(tmp_path, **{"feature-epsilon": 0.0})
    _zero_refused(lambda: check_run_config(app, {}), "feature-epsilon")


def test_zero_budget_in_a_scenario():
    _zero_refused(
        lambda: parse_scenario(_scenario(privacy={"feature_flip_grid": None, "feature_epsilon_grid": [0.0]})),
        "privacy.feature_epsilon_grid",
    )
    _zero_refused(lambda: parse_scenario(_scenario(privacy={"label_flip": 0.0})), "privacy.label_flip")


def test_zero_budget_in_a_typed_run_config():
    with pytest.raises(ValidationError, match="never by 0") as exc:
        RunConfig(feature_epsilon=0.0)
    assert exc.value.field == "feature-epsilon"


# ------------------------------------------------------------------- budgets set twice or badly
@pytest.mark.parametrize(
    "cfg, key",
    [
        ({"feature-flip": 0.3, "feature-epsilon": 1.0}, "feature-epsilon"),
        ({"label-flip": 0.2, "label-epsilon": 1.0}, "label-epsilon"),
        ({"budget-mix": "0.2:1,0.4:1", "feature-flip": 0.3}, "feature-flip"),
        ({"mechanism": "laplace", "dataset": "breast_cancer", "feature-flip": 0.3}, "feature-flip"),
    ],
)
def test_two_keys_for_one_budget_are_refused(cfg, key):
    with pytest.raises(ValidationError) as exc:
        load_run_config(_flat(**cfg))
    assert exc.value.field == key


def test_a_flip_that_makes_the_noise_non_invertible_is_refused_naming_its_key():
    with pytest.raises(ValidationError) as exc:
        build_population(load_run_config(_flat(**{"label-flip": 0.5})))
    assert exc.value.field == "label-flip" and "not invertible" in exc.value.message
    with pytest.raises(ValidationError) as exc:
        load_run_config(_flat(**{"feature-flip": 1.0}))
    assert exc.value.field == "feature-flip"


def test_a_budget_a_custom_population_would_ignore_is_refused():
    with pytest.raises(ValidationError, match="sets its own budgets") as exc:
        load_run_config({"population": TWO_BUDGETS, "feature-epsilon": 1.0})
    assert exc.value.field == "feature-epsilon"


# ------------------------------------------------------------------- unset and announced defaults
def test_unset_is_an_absent_key_and_the_default_is_announced():
    cfg = load_run_config(_flat())
    assert cfg.feature_flip is None and cfg.feature_epsilon is None
    assert cfg.default_budgets() == {"feature-flip": 0.3, "label-flip": 0.2}
    assert len(cfg.budget_notes()) == 2 and "feature-flip not set" in cfg.budget_notes()[0]
    pop = build_population(cfg)
    assert pop.mechanism(0) == build_population(load_run_config(_flat(**{"feature-flip": 0.3}))).mechanism(0)
    set_both = load_run_config(_flat(**{"feature-epsilon": 1.0, "label-epsilon": 1.0}))
    assert set_both.budget_notes() == [] and set_both.default_budgets() == {}
    assert build_population(set_both).mechanism(0).epsilon == pytest.approx(64 * 1.0 + 1.0, rel=1e-6)
    # a Flower config file declares every key: "" is its "unset", and it round-trips
    assert DEFAULTS["feature-epsilon"] == "" and RunConfig.from_flwr(cfg.to_flwr()) == cfg
    assert load_run_config(_flat(**{"feature-epsilon": ""})) == cfg


def test_a_custom_population_gets_no_default_budget():
    cfg = load_run_config({"population": TWO_BUDGETS, "n-clients": 10})
    assert cfg.budget_notes() == []


def test_a_scenario_announces_the_label_budget_it_filled_in():
    spec = parse_scenario(_scenario(privacy={"label_flip": None}))
    assert any("label_flip not set" in n for n in spec.notes)
    assert parse_scenario(_scenario()).notes == ()


@pytest.mark.flower
def test_the_server_log_and_metrics_state_the_budget_asked_and_realised(tmp_path, capsys):
    import json

    from fedrr.federation import run_federation

    cfg = _flat(**{"n-clients": 20, "min-valid": 20, "feature-epsilon": 2.0, "results-dir": str(tmp_path)})
    run_federation({**cfg, "run-name": "budget"})
    out = capsys.readouterr()
    metrics = json.loads((tmp_path / "budget" / "metrics.json").read_text())
    assert metrics["status"] == "done"
    b = metrics["budget"]
    assert b["asked"]["feature-epsilon"] == 2.0 and b["asked"]["feature-flip"] is None
    assert b["defaults_used"] == {"label-flip": 0.2}
    assert b["record_epsilon_realised"]["max"] == pytest.approx(b["record_epsilon_of_mechanisms"][0])
    text = out.out + out.err
    assert "label-flip not set: using the default" in text
    assert "record ε realised" in text


# ------------------------------------------------------------------- populations import everywhere
POP_MODULE = '''
from fedrr.examples import TwoBudgetSyntheticPopulation


class LocalPopulation(TwoBudgetSyntheticPopulation):
    """A population defined in a module of the working directory."""
'''


def _local_scenario(tmp_path: Path, mode: str = "offline", repeats: int = 1, n: int = 40) -> Path:
    (tmp_path / "my_local_pop.py").write_text(POP_MODULE)
    cfg = tmp_path / "local.toml"
    cfg.write_text(
        f"""
[scenario]
repeats = {repeats}
[population]
population = "my_local_pop:LocalPopulation"
n_clients = {n}
options = {{ n_test = 200 }}
[learners]
names = ["naive"]
[run]
mode = "{mode}"
min_valid = 10
"""
    )
    return cfg


def _fedrr(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (START_DIR_ENV, "PYTHONPATH")}
    exe = Path(sys.executable).parent / "fedrr"
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_population_in_the_working_directory_runs_in_a_one_cell_serial_sweep(tmp_path):
    cfg = _local_scenario(tmp_path)
    res = _fedrr(["sweep", str(cfg), "--out", "out", "--workers", "1", "--no-progress"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "1 cell(s) computed" in res.stdout


def test_a_population_in_the_working_directory_runs_in_worker_processes(tmp_path):
    cfg = _local_scenario(tmp_path, repeats=2)
    res = _fedrr(
        ["sweep", str(cfg), "--out", "out", "--workers", "2", "--parallel", "processes", "--no-progress"], tmp_path
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "2 cell(s) computed" in res.stdout


@pytest.mark.flower
def test_a_population_in_the_working_directory_runs_in_flower_mode(tmp_path):
    cfg = _local_scenario(tmp_path, mode="flower", n=20)
    res = _fedrr(["sweep", str(cfg), "--out", "out", "--no-progress"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "1 cell(s) computed" in res.stdout


def test_check_fails_on_an_unimportable_population(tmp_path, capsys):
    cfg = _local_scenario(tmp_path)
    (tmp_path / "my_local_pop.py").write_text("import no_such_dependency_anywhere\n")
    res = _fedrr(["check", str(cfg)], tmp_path)
    assert res.returncode == 2
    assert "population.population" in res.stderr and "no_such_dependency_anywhere" in res.stderr
    (tmp_path / "my_local_pop.py").write_text(POP_MODULE)
    ok = _fedrr(["check", str(cfg)], tmp_path)
    assert ok.returncode == 0 and "OK" in ok.stdout, ok.stderr


def test_check_fails_on_a_population_that_does_not_build(tmp_path):
    cfg = _local_scenario(tmp_path)
    (tmp_path / "my_local_pop.py").write_text(
        POP_MODULE + "\n    def mechanism(self, client_id):\n        raise RuntimeError('no budget table')\n"
    )
    res = _fedrr(["check", str(cfg)], tmp_path)
    assert res.returncode == 2 and "no budget table" in res.stderr, res.stderr


# ------------------------------------------------------------------- defaults that do not hurt
def test_sweep_without_out_refuses_to_overwrite_tracked_results(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "configs" / "demo.toml"
    cfg.parent.mkdir()
    cfg.write_text(
        '[population]\ndataset = "digits_7_vs_9"\nn_clients = 40\n[privacy]\nfeature_flip_grid = [0.3]\n'
        'label_flip = 0.2\n[learners]\nnames = ["naive"]\n'
    )
    (tmp_path / "results" / "demo").mkdir(parents=True)
    (tmp_path / "results" / "demo" / "summary.md").write_text("committed\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    assert fedrr_main(["sweep", str(cfg), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "committed results" in err
    assert (tmp_path / "results" / "demo" / "summary.md").read_text() == "committed\n"


def test_ldp_sgd_takes_no_default_budget():
    cfg = load_run_config({"protocol": "ldp-sgd", "learners": "naive", "n-clients": 10})
    assert cfg.budget_notes() == []
    with pytest.raises(ValidationError, match="takes no default budget") as exc:
        build_population(cfg)
    assert exc.value.field == "feature-epsilon"


@pytest.mark.parametrize("value", [[0], [[1, "a"]], [(1, 2, 3)], 7])
def test_a_budget_mix_that_is_not_value_weight_pairs_is_refused_naming_it(value):
    """Found by tests/test_fuzz.py (Hypothesis: budget-mix = [0] raised a TypeError from the unpacking)."""
    from fedrr.run_config import RunConfig

    with pytest.raises(ValidationError) as exc:
        RunConfig.from_flwr({"budget-mix": value})
    assert exc.value.field == "budget-mix"
