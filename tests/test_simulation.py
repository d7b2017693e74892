"""fedrr.experiment: scenario configs (validated with precise errors), resumable sweeps that write
one file per finished cell, record-level ε by the mechanisms' own accounting, reports, and the
``fedrr`` CLI (offline and in a real Flower simulation)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fedrr import ValidationError
from fedrr._names import LEARNERS
from fedrr.assembly import build_population
from fedrr.experiment import load_scenario, parse_scenario, sweep
from fedrr.experiment.cli import main

for _k, _v in {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
    "MPLBACKEND": "Agg",
}.items():
    os.environ.setdefault(_k, _v)

ROOT = Path(__file__).resolve().parents[1]

TINY = """
[scenario]
name = "tiny"
seed = 3
repeats = 2
[population]
dataset = "digits_7_vs_9"
n_clients = 120
n_test_per_class = 30
[privacy]
mechanism = "rr"
feature_flip_grid = [0.1, 0.3]
label_flip = "same"
[learners]
names = ["naive", "spread"]
spread_max_iter = 25
[run]
mode = "offline"
workers = 1
"""


def _write(tmp_path: Path, text: str, name: str = "scenario.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _cell_mtimes(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")}


# ------------------------------------------------------------------------------ sweeps, resume
def test_offline_sweep_writes_everything_and_resumes_without_recomputing(tmp_path, capsys):
    cfg = _write(tmp_path, TINY)
    out = tmp_path / "out"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress", "--workers", "2"]) == 0
    first = capsys.readouterr().out
    assert "4 cell(s) computed, 0 skipped" in first
    rows = _csv(out / "results.csv")
    assert len(rows) == 2 * 2 * 2  # grid points x repeats x learners
    assert Counter((r["cell"], r["learner"]) for r in rows) == Counter(
        {(c.key, n): 1 for c in load_scenario(cfg).cells() for n in ("naive", "spread")}
    )
    for r in rows:
        assert 0.0 <= float(r["accuracy"]) <= 1.0 and float(r["eps_record"]) > 0 and r["n_releases"] == "120"
        assert r["error"] == "" and float(r["seconds"]) >= 0
        assert 0.0 <= float(r["balanced_accuracy"]) <= 1.0 and 0.0 <= float(r["auc"]) <= 1.0
    man = json.loads((out / "manifest.json").read_text())
    assert man["config"]["privacy"]["feature_flip_grid"] == [0.1, 0.3] and man["seed"] == 3
    assert {"fedrr", "flwr", "ray", "numpy", "scikit-learn"} <= set(man["versions"])
    assert man["machine"]["cpu_count"] >= 1 and man["machine"]["python"] and "commit" in man["git"]
    for name in ("accuracy_vs_epsilon.png", "accuracy_vs_epsilon.svg", "summary.md"):
        assert (out / name).stat().st_size > 0
    assert (out / "accuracy_vs_epsilon.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "summary.md").read_text()
    assert "| naive | spread |" in md and "Honest note" in md  # ε per record of 64 flipped pixels is in the hundreds
    assert "Balanced accuracy / AUC" in md
    before = _cell_mtimes(out)
    t0 = time.perf_counter()
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    assert time.perf_counter() - t0 < 20
    assert "0 cell(s) computed, 4 skipped" in capsys.readouterr().out
    assert _cell_mtimes(out) == before  # nothing recomputed
    # show and plot work on the directory alone
    assert main(["show", str(out)]) == 0
    assert "ε per record" in capsys.readouterr().out
    (out / "accuracy_vs_epsilon.svg").unlink()
    assert main(["plot", str(out)]) == 0
    assert (out / "accuracy_vs_epsilon.svg").exists()

    # the same cells on the other parallel backend (that run used Ray tasks): identical results
    other = tmp_path / "processes"
    assert (
        main(["sweep", str(cfg), "--out", str(other), "--no-progress", "--workers", "2", "--parallel", "processes"])
        == 0
    )
    assert "4 cell(s) computed, 0 skipped" in capsys.readouterr().out
    for p in (out / "cells").glob("*.json"):
        a, b = json.loads(p.read_text()), json.loads((other / "cells" / p.name).read_text())
        assert a["learners"].keys() == b["learners"].keys()
        assert {n: e["accuracy"] for n, e in a["learners"].items()} == {
            n: e["accuracy"] for n, e in b["learners"].items()
        }
        assert a["eps"] == b["eps"] and a["fingerprint"] == b["fingerprint"]
    # --repeats 1: only each grid point's first repeat, the same cells as the whole sweep's; the
    # manifest records the count that ran; more repeats than the scenario has is refused
    first = tmp_path / "first"
    assert main(["sweep", str(cfg), "--out", str(first), "--no-progress", "--repeats", "1"]) == 0
    assert "2 cell(s) computed, 0 skipped" in capsys.readouterr().out
    assert sorted(p.name for p in (first / "cells").glob("*.json")) == sorted(k for k in before if "-r000" in k)
    for p in (first / "cells").glob("*.json"):
        a, b = json.loads(p.read_text()), json.loads((out / "cells" / p.name).read_text())
        assert a["fingerprint"] == b["fingerprint"]
        acc = [{n: e["accuracy"] for n, e in c["learners"].items()} for c in (a, b)]
        assert acc[0] == acc[1]
    assert json.loads((first / "manifest.json").read_text())["config"]["scenario"]["repeats"] == 1
    assert main(["reproduce", str(first), "--out", str(tmp_path / "again")]) == 0  # reruns the 2 cells that ran
    assert sorted(p.name for p in (tmp_path / "again" / "cells").glob("*.json")) == sorted(
        p.name for p in (first / "cells").glob("*.json")
    )
    # fewer repeats into a directory whose sweep ran more would drop them from its reports: refused
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress", "--repeats", "1"]) == 2
    assert "holds a sweep of 2 repeats" in capsys.readouterr().err
    assert main(["sweep", str(cfg), "--out", str(tmp_path / "x"), "--no-progress", "--repeats", "3"]) == 2
    assert "--repeats: must be an integer in [1, 2]" in capsys.readouterr().err
    # deleted cells are the only ones recomputed, and with the same result (seeds depend on the cell only)
    victim = sorted(before)[1]
    old = json.loads((out / "cells" / victim).read_text())
    (out / "cells" / victim).unlink()
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    assert "1 cell(s) computed, 3 skipped" in capsys.readouterr().out
    after = _cell_mtimes(out)
    assert {k: v for k, v in after.items() if k != victim} == {k: v for k, v in before.items() if k != victim}
    new = json.loads((out / "cells" / victim).read_text())
    assert new["learners"]["naive"]["accuracy"] == old["learners"]["naive"]["accuracy"]
    assert new["learners"]["spread"]["accuracy"] == old["learners"]["spread"]["accuracy"]  # parallel run == serial run


def test_killed_sweep_rerun_completes_every_cell_exactly_once(tmp_path, capsys):
    cfg = _write(tmp_path, TINY.replace("feature_flip_grid = [0.1, 0.3]", "feature_flip_grid = [0.1, 0.2, 0.3]"))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fedrr.experiment.cli",
            "sweep",
            str(cfg),
            "--out",
            str(out),
            "--no-progress",
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 90
        while not list((out / "cells").glob("*.json")) if (out / "cells").exists() else True:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no cell finished in 90 s"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and anything it started
        proc.wait()
    n_done = len(list((out / "cells").glob("*.json")))
    assert 1 <= n_done < 6
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    assert f"{6 - n_done} cell(s) computed, {n_done} skipped" in capsys.readouterr().out
    keys = sorted(p.stem for p in (out / "cells").glob("*.json"))
    assert keys == sorted(c.key for c in load_scenario(cfg).cells())
    assert not list((out / "cells").glob(".*"))  # no half-written leftovers
    rows = _csv(out / "results.csv")
    assert sorted(Counter((r["cell"], r["learner"]) for r in rows).values()) == [1] * 12


# ------------------------------------------------------------------------ one ε axis, accounting
def _sweep_and_check_accounting(tmp_path, text: str) -> list[dict]:
    cfg = load_scenario(_write(tmp_path, text))
    out = tmp_path / "out"
    res = sweep(cfg, out, workers=1, progress=False, log=lambda s: None)
    assert not res.failed
    from fedrr.experiment import write_reports

    write_reports(out)
    rows = _csv(out / "results.csv")
    assert rows
    for c in cfg.cells():
        pop = build_population(c.run_config())
        mech = pop.mechanism(0)
        for r in (r for r in rows if r["cell"] == c.key):
            assert float(r["eps_record"]) == pytest.approx(mech.epsilon, rel=1e-12)
            assert float(r["delta_record"]) == pytest.approx(mech.delta, rel=1e-12, abs=0)
            bd = mech.epsilon_breakdown()
            assert float(r["eps_features"]) == pytest.approx(bd["features"], rel=1e-12)
            assert float(r["eps_label"]) == pytest.approx(bd["label"], rel=1e-12)
    return rows


def test_record_epsilon_is_the_mechanisms_accounting_rr(tmp_path):
    rows = _sweep_and_check_accounting(
        tmp_path, TINY.replace("repeats = 2", "repeats = 1").replace('names = ["naive", "spread"]', 'names = ["naive"]')
    )
    assert {round(float(r["feature_flip"]), 6) for r in rows} == {0.1, 0.3}


@pytest.mark.parametrize("noise", ["per-feature", "joint"])
def test_record_epsilon_is_the_mechanisms_accounting_gaussian(tmp_path, noise):
    rows = _sweep_and_check_accounting(
        tmp_path,
        f"""
[population]
dataset = "digits_7_vs_9"
n_clients = 80
n_test_per_class = 20
[privacy]
mechanism = "gaussian"
gaussian_noise = "{noise}"
feature_epsilon_grid = [0.5, 2.0]
label_epsilon = 1.0
delta = 1e-6
[learners]
names = ["naive"]
""",
    )
    for r in rows:
        if noise == "per-feature":  # ε and δ compose over the 64 pixels
            assert float(r["delta_record"]) == pytest.approx(64 * 1e-6)
            assert float(r["eps_record"]) == pytest.approx(64 * float(r["feature_epsilon"]) + 1.0)
        else:  # one block on all 64 pixels at (ε, δ), calibrated on its L2 sensitivity 8
            assert float(r["delta_record"]) == pytest.approx(1e-6)
            assert float(r["eps_record"]) == pytest.approx(float(r["feature_epsilon"]) + 1.0)


@pytest.mark.parametrize("mechanism", ["rr", "laplace"])
def test_record_budget_split_gives_the_requested_record_epsilon(tmp_path, mechanism):
    rows = _sweep_and_check_accounting(
        tmp_path,
        f"""
[population]
dataset = "digits_7_vs_9"
n_clients = 80
n_test_per_class = 20
[privacy]
mechanism = "{mechanism}"
epsilon_grid = [20.0, 150.0]
split = {{features = 0.8, label = 0.2}}
[learners]
names = ["naive", "clean"]
""",
    )
    for r in rows:
        assert float(r["eps_record"]) == pytest.approx(float(r["requested_eps_record"]), rel=1e-9)
        assert float(r["eps_label"]) == pytest.approx(0.2 * float(r["requested_eps_record"]), rel=1e-9)
        assert float(r["eps_per_feature"]) == pytest.approx(0.8 * float(r["requested_eps_record"]) / 64, rel=1e-9)


# --------------------------------------------------------------------------- invalid configs
BASE = {
    "population": {"dataset": "digits_7_vs_9", "n_clients": 50},
    "privacy": {"mechanism": "rr", "epsilon_grid": [10.0]},
    "learners": {"names": ["naive"]},
}


def _with(**changes):
    import copy

    cfg = copy.deepcopy(BASE)
    for path, value in changes.items():
        sec, _, key = path.partition("__")
        if key:
            if value is _DELETE:
                cfg.setdefault(sec, {}).pop(key, None)
            else:
                cfg.setdefault(sec, {})[key] = value
        else:
            cfg[sec] = value
    return cfg


_DELETE = object()

INVALID = [
    (_with(bogus={"a": 1}), "bogus", "valid sections: scenario, population, privacy, learners, run"),
    (_with(n_clients=5), "n_clients", "belongs in [population]"),
    (_with(privacy__epsilon_grd=[1.0]), "privacy.epsilon_grd", "valid keys in [privacy]: mechanism, label_flip"),
    (_with(privacy__epsilon_grid=[]), "privacy.epsilon_grid", "is empty"),
    (_with(privacy__epsilon_grid=[1.0, -2.0]), "privacy.epsilon_grid", "item 1 must be a real number > 0"),
    (_with(privacy__epsilon_grid=[0.0]), "privacy.epsilon_grid", "item 0 must be a real number > 0, got a number 0.0"),
    (
        _with(privacy__epsilon_grid="1,10"),
        "privacy.epsilon_grid",
        "must be a non-empty list, each item a real number > 0",
    ),
    (
        _with(privacy__epsilon_grid=[1.0, "ten"]),
        "privacy.epsilon_grid",
        "item 1 must be a real number > 0, got a string 'ten'",
    ),
    (_with(privacy__epsilon_grid=[1.0, 1.0]), "privacy.epsilon_grid", "repeated"),
    (_with(privacy__epsilon_grid=_DELETE), "privacy.epsilon_grid", "is missing"),
    (_with(privacy__feature_flip_grid=[0.2]), "privacy.feature_flip_grid", "exactly one swept axis"),
    (_with(population__dataset="cifar10"), "population.dataset", "unknown value 'cifar10'; valid: mnist_7_vs_9"),
    (_with(population__dataset="diabetes"), "population.dataset", "regression dataset"),
    (_with(population__n_clients="many"), "population.n_clients", "an integer in [1, 1e+09] or a non-empty list"),
    (_with(population__n_clients=0), "population.n_clients", "must be an integer in [1, 1e+09], got an integer 0"),
    (_with(population__n_clients=[10, 2.5]), "population.n_clients", "item 1 must be an integer in [1, 1e+09]"),
    (_with(population__dropout=1.0), "population.dropout", "in [0, 1)"),
    (_with(population__population="mypops.Thing"), "population.population", "import path"),
    (_with(population__options={"k": 1}), "population.options", "only for a custom population"),
    (
        _with(learners__names=["spread", "magic"]),
        "learners.names",
        "unknown value 'magic'; valid: " + ", ".join(LEARNERS["classification"][:4]),
    ),
    (_with(learners__names=[]), "learners.names", "is empty"),
    (_with(learners__names=["clean"]), "learners.names", "at least one learner trained on the releases"),
    (_with(learners__names="spread"), "learners.names", "must be a non-empty list"),
    (_with(learners__C=0), "learners.C", "must be a real number > 0"),
    (
        _with(privacy__mechanism="rappor"),
        "privacy.mechanism",
        "unknown value 'rappor'; valid: rr, oracle, gaussian, laplace",
    ),
    (_with(privacy__split={"features": 0.9, "label": 0.2}), "privacy.split", "add up to 1"),
    (_with(privacy__split={"features": 0.9, "labels": 0.1}), "privacy.split", "unknown key(s) ['labels']"),
    (_with(privacy__label_flip=0.1), "privacy.label_flip", "cannot be set with epsilon_grid"),
    (
        _with(privacy__epsilon_grid=_DELETE, privacy__feature_flip_grid=[0.2, 1.5]),
        "privacy.feature_flip_grid",
        "item 1 must be a real number in (0, 1)",
    ),
    (
        _with(privacy__epsilon_grid=_DELETE, privacy__mechanism="gaussian", privacy__feature_flip_grid=[0.2]),
        "privacy.feature_flip_grid",
        "for mechanism 'rr'",
    ),
    (
        _with(privacy__epsilon_grid=_DELETE, privacy__feature_epsilon_grid=[1.0], privacy__label_flip="same"),
        "privacy.label_flip",
        "needs feature_flip_grid",
    ),
    (
        _with(
            privacy__epsilon_grid=_DELETE,
            privacy__feature_epsilon_grid=[1.0],
            privacy__label_flip=0.1,
            privacy__label_epsilon=1.0,
        ),
        "privacy.label_epsilon",
        "not both",
    ),
    (_with(privacy__delta=0.0), "privacy.delta", "must be a real number in (0, 1)"),
    (
        _with(privacy__mechanism="gaussian", learners__names=["naive", "spread-true"]),
        "learners.names",
        "needs discrete features",
    ),
    (_with(run={"mode": "federated"}), "run.mode", "unknown value 'federated'; valid: flower, cohort, offline"),
    (_with(run={"workers": -1}), "run.workers", "must be an integer >= 0"),
    (_with(run={"cohort_size": True}), "run.cohort_size", "must be an integer in [1, 1e+07], got a boolean"),
    (_with(scenario={"repeats": 0}), "scenario.repeats", "must be an integer in [1, 10000], got an integer 0"),
    (_with(scenario={"repeats": 10**9}), "scenario.repeats", "must be an integer in [1, 10000]"),
    (
        _with(scenario={"repeats": 10_000}, population__n_clients=list(range(10, 120, 10))),
        "scenario.repeats",
        "× 11 client counts × 10000 repeats) is over the limit of 100,000",
    ),
    (_with(scenario={"seed": 1.5}), "scenario.seed", "must be an integer >= 0, got a number 1.5"),
    (_with(scenario="x"), "scenario", "must be a table"),
    (_with(scenario={"name": ""}), "scenario.name", "must be a non-empty name"),  # found by tests/test_fuzz.py (slow)
    (_with(scenario={"name": "../elsewhere"}), "scenario.name", "names the default results folder"),
    (
        _with(population__budget_mix={"values": [0.2, 0.4]}),
        "privacy.epsilon_grid",
        "cannot be combined with population.budget_mix",
    ),
    (
        _with(privacy__epsilon_grid=_DELETE, population__budget_mix={"values": []}),
        "population.budget_mix.values",
        "non-empty list",
    ),
    (
        _with(privacy__epsilon_grid=_DELETE, population__budget_mix={"values": [0.2, -1]}),
        "population.budget_mix.values",
        "> 0",
    ),
    (
        _with(privacy__epsilon_grid=_DELETE, population__budget_mix={"values": [0.2, 0.4], "weights": [1]}),
        "population.budget_mix.weights",
        "a list of 2 numbers",
    ),
    (
        _with(privacy__epsilon_grid=_DELETE, population__budget_mix={"values": [0.2], "share": [1]}),
        "population.budget_mix",
        "unknown key(s) ['share']",
    ),
    (
        _with(privacy__epsilon_grid=_DELETE, population__budget_mix={"values": [0.2, 0.4]}),
        "privacy.label_flip",
        "needs the label's budget",
    ),
]


REGRESSION = {
    "scenario": {"name": "reg", "repeats": 2, "seed": 5},
    "population": {"task": "regression", "dataset": "lending_club", "n_clients": 50, "n_test_per_class": 500},
    "privacy": {
        "mechanism": "gaussian",
        "calibration": "farokhi",
        "delta": 1e-2,
        "label_public": True,
        "epsilon_grid": [0.416667, 4.16667],
    },
    "learners": {"names": ["ls", "wdro", "gauss-dro", "mean", "clean"]},
    "run": {"mode": "offline", "workers": 1},
}


def _reg(**changes) -> dict:
    data = json.loads(json.dumps(REGRESSION))
    for path, value in changes.items():
        sec, _, key = path.partition("__")
        if value is _DELETE:
            data[sec].pop(key)
        else:
            data[sec][key] = value
    return data


REGRESSION_INVALID = [
    (_reg(population__dataset="mnist_7_vs_9"), "population.dataset", "needs lending_club, adult or diabetes"),
    (_reg(privacy__mechanism="rr"), "privacy.mechanism", "'gaussian' or 'laplace'"),
    (_reg(privacy__mechanism="laplace"), "privacy.calibration", "'farokhi' is a Gaussian calibration"),
    (_reg(run__mode="flower"), "run.mode", "runs offline"),
    (_reg(learners__names=["ls", "spread"]), "learners.names", "'spread' is not a regression learner"),
    (_reg(learners__names=["clean"]), "learners.names", "at least one learner trained on the releases"),
    (
        _reg(privacy__epsilon_grid=_DELETE, privacy__feature_epsilon_grid=[1.0]),
        "privacy.feature_epsilon_grid",
        "give epsilon_grid",
    ),
    (_reg(privacy__label_public="yes"), "privacy.label_public", "must be true or false"),
    (_reg(population__task="clustering"), "population.task", "unknown value 'clustering'"),
    (_with(learners__names=["ls"]), "learners.names", "'ls' is a regression learner"),
    (_with(privacy__label_public=True), "privacy.label_public", "is for task = 'regression'"),
]


@pytest.mark.parametrize(
    "data,field,fragment",
    INVALID + REGRESSION_INVALID,
    ids=[f"{i:02d}-{f}" for i, (_, f, _) in enumerate(INVALID + REGRESSION_INVALID)],
)
def test_invalid_config_names_the_field_precisely(data, field, fragment):
    with pytest.raises(ValidationError) as ei:
        parse_scenario(data)
    assert ei.value.field == field
    assert fragment in str(ei.value)


def test_budget_mix_puts_two_budgets_in_one_pool(tmp_path):
    """population.budget_mix: clients drawn at two flip probabilities; the cell's ε accounting
    spans both records' ε, exactly as the mechanisms state it."""
    import tomllib

    import tomli_w

    from fedrr.mechanisms import RandomizedResponse

    data = tomllib.loads(TINY)
    del data["privacy"]["feature_flip_grid"]
    data["privacy"]["label_flip"] = 0.2
    data["population"]["budget_mix"] = {"values": [0.15, 0.35], "weights": [1, 1]}
    path = tmp_path / "mix.toml"
    path.write_text(tomli_w.dumps(data))
    cfg = load_scenario(path)
    assert len(cfg.cells()) == cfg.scenario.repeats  # one grid point
    out = tmp_path / "mix"
    assert main(["sweep", str(path), "--out", str(out), "--no-progress"]) == 0
    rec = json.loads(next((out / "cells").glob("*.json")).read_text())
    k, D = 17, 64  # digits: 64 pixels with 17 states, binary label
    eps = [D * RandomizedResponse(k, f).epsilon + RandomizedResponse(2, 0.2).epsilon for f in (0.15, 0.35)]
    assert rec["eps"]["min"] == pytest.approx(min(eps), rel=1e-12) and rec["eps"]["max"] == pytest.approx(
        max(eps), rel=1e-12
    )
    assert min(eps) < rec["eps"]["record"] < max(eps)
    assert all("accuracy" in e for e in rec["learners"].values())
    assert "feature flip mix 0.15 (weight 1), 0.35 (weight 1), label flip 0.2" in (out / "summary.md").read_text()


def test_regression_sweep_reports_mse_the_exact_epsilon_and_a_public_label(tmp_path):
    """Farokhi's setting as a config: ε per record is the larger of the nominal (grid) ε and the
    exact ε of the Thm-1 noise, the label is flagged public, learners are scored by test MSE, and
    the mean predictor's MSE is recomputed here from the same seed and split."""
    import tomli_w

    from fedrr.experiment._regression import load_regression_data
    from fedrr.mechanisms import GaussianMechanism

    path = tmp_path / "reg.toml"
    path.write_text(tomli_w.dumps(REGRESSION))
    out = tmp_path / "reg"
    assert main(["sweep", str(path), "--out", str(out), "--no-progress"]) == 0
    rows = _csv(out / "results.csv")
    assert len(rows) == 2 * 2 * 5 and {r["metric"] for r in rows} == {"mse"} and all(r["error"] == "" for r in rows)
    for r in rows:
        nominal = float(r["requested_eps_record"])
        exact = GaussianMechanism(nominal, 1e-2, np.zeros(24), np.ones(24), calibration="farokhi").epsilon_exact
        assert exact < nominal  # p_x = 24: the paper's calibration is conservative here
        assert float(r["eps_record"]) == pytest.approx(nominal, rel=1e-12) and float(r["delta_record"]) == 1e-2
        assert r["eps_label"] == "" and float(r["mse"]) > 0
    # the mean predictor's MSE from the cell's own split: the rows are the released training targets (public here)
    X, y = load_regression_data("lending_club")
    cfg = load_scenario(path)
    c = cfg.cells()[0]

    ss_split, _ = np.random.SeedSequence(c.seed).spawn(2)
    idx = np.random.default_rng(ss_split).permutation(len(y))
    mean_mse = float(np.mean((y[idx[:50]].mean() - y[idx[50:550]]) ** 2))
    row = next(r for r in rows if r["cell"] == c.key and r["learner"] == "mean")
    assert float(row["mse"]) == pytest.approx(mean_mse, rel=1e-12)
    md = (out / "summary.md").read_text()
    assert "test MSE" in md and "The label is public" in md and "epsilon_exact" in md
    assert (out / "mse_vs_epsilon.png").exists() and not (out / "accuracy_vs_epsilon.png").exists()


def test_regression_with_a_private_label_splits_the_record_budget(tmp_path):
    """label_public = false: the record budget is split between the Laplace input block and
    Laplace noise on the target; the reported ε per record is their sum = the requested one."""
    import tomli_w

    data = _reg(
        privacy__mechanism="laplace",
        privacy__calibration="analytic",
        privacy__label_public=False,
        privacy__split={"features": 0.8, "label": 0.2},
        learners__names=["ls", "wdro", "mean"],
    )
    data["scenario"]["repeats"] = 1
    path = tmp_path / "reg.toml"
    path.write_text(tomli_w.dumps(data))
    out = tmp_path / "reg"
    assert main(["sweep", str(path), "--out", str(out), "--no-progress"]) == 0
    rows = _csv(out / "results.csv")
    assert len(rows) == 2 * 3 and all(r["error"] == "" for r in rows)
    for r in rows:
        req = float(r["requested_eps_record"])
        assert float(r["eps_record"]) == pytest.approx(req, rel=1e-12)
        assert float(r["eps_features"]) == pytest.approx(0.8 * req, rel=1e-12) and float(
            r["eps_label"]
        ) == pytest.approx(0.2 * req, rel=1e-12)
    assert "The label is public" not in (out / "summary.md").read_text()


def test_at_least_fifteen_distinct_invalid_configs():
    assert len(INVALID) >= 15 and len({f + m for _, f, m in INVALID}) == len(INVALID)


@pytest.mark.parametrize(
    "changes,field,fragment",
    [
        (
            {"privacy__mechanism": "rr", "population__dataset": "breast_cancer"},
            "privacy.mechanism",
            "needs a dataset of discrete features",
        ),
        ({"population__n_test_per_class": 500}, "population.n_test_per_class", "leaves no training rows"),
        ({"privacy__epsilon_grid": [1e-9]}, "privacy.epsilon_grid", "too small"),
        # found by test_fuzz's slow run: the population named its run-config key, not the scenario's
        ({"privacy__n_sampled": 5000}, "privacy.n_sampled", "must be at most the"),
    ],
)
def test_errors_that_need_the_dataset_are_caught_before_running(tmp_path, capsys, changes, field, fragment):
    import tomli_w

    p = tmp_path / "bad.toml"
    p.write_text(tomli_w.dumps(_with(**changes)))
    assert main(["check", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"fedrr: error: {field}: ") and fragment in err


def test_cli_bad_config_prints_one_line_and_exits_2(tmp_path, capsys):
    p = _write(tmp_path, TINY.replace("feature_flip_grid = [0.1, 0.3]", "feature_flip_grid = []"))
    assert main(["sweep", str(p), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "fedrr: error: privacy.feature_flip_grid: is empty; give at least one value "
        "(a non-empty list, each item a real number in (0, 1))\n"
    )
    assert not (tmp_path / "o").exists()
    p2 = _write(tmp_path, "[scenario\nname = 1", "broken.toml")
    assert main(["check", str(p2)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fedrr: error: config: ") and "not valid TOML" in err and err.count("\n") == 1
    assert main(["run", str(_write(tmp_path, TINY, "ok.toml")), "--epsilon", "0.25"]) == 2
    assert "0.25 is not a value of privacy.feature_flip_grid (0.1, 0.3)" in capsys.readouterr().err
    assert main(["show", str(tmp_path)]) == 2


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--help"])
    assert ei.value.code == 0
    text = capsys.readouterr().out
    assert "fedrr sweep configs/quickstart.toml" in text and "resumes" in text


def _shipped_configs() -> list[str]:
    """Every shipped scenario, relative to configs/ without ".toml": "quickstart", "paper/barber_6_1", ..."""
    return sorted(str(p.relative_to(ROOT / "configs").with_suffix("")) for p in (ROOT / "configs").rglob("*.toml"))


@pytest.mark.parametrize("name", _shipped_configs())
def test_shipped_configs_are_valid(name):
    cfg = load_scenario(ROOT / "configs" / f"{name}.toml")
    assert cfg.cells()


def test_paper_configs_name_their_command_and_results():
    """A paper reproduction is a config in configs/paper/ whose comment names the command that made
    its committed results, and whose default output is that results folder."""
    papers = [n for n in _shipped_configs() if n.startswith("paper/")]
    assert len(papers) >= 6
    for name in papers:
        stem = name.split("/", 1)[1]
        text = (ROOT / "configs" / f"{name}.toml").read_text()
        assert f"fedrr sweep configs/{name}.toml --out results/{name}" in text, name
        assert load_scenario(ROOT / "configs" / f"{name}.toml").scenario.out == f"results/paper/{stem}"


# ---------------------------------------------------------------------------- Flower, end to end
def test_reduced_quickstart_in_flower_mode_through_the_cli(tmp_path, capsys):
    text = (ROOT / "configs" / "quickstart.toml").read_text()
    text = (
        text.replace("n_clients = 300 ", "n_clients = 30 ")
        .replace("n_test_per_class = 100", "n_test_per_class = 20")
        .replace("epsilon_grid = [1000, 3000, 10000]", "epsilon_grid = [10000]")
        .replace("repeats = 2 ", "repeats = 1 ")
    )
    assert 'mode = "flower"' in text and "n_clients = 30 " in text and "repeats = 1 " in text
    cfg = _write(tmp_path, text)
    out = tmp_path / "qs"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    rows = _csv(out / "results.csv")
    assert sorted(r["learner"] for r in rows) == ["clean", "naive", "spread"]
    for r in rows:
        assert r["mode"] == "flower" and r["n_releases"] == "30" and r["error"] == ""
        assert float(r["eps_record"]) == pytest.approx(10000, rel=1e-9)
        assert 0.0 <= float(r["accuracy"]) <= 1.0
    # a Flower cell keeps the learners' diagnostics: whether spread fell back reaches results.csv
    assert next(r for r in rows if r["learner"] == "spread")["fell_back"] in ("True", "False")
    assert (out / "runs" / "g000-n00-r000" / "metrics.json").exists()  # the Flower server's own record
    assert (out / "accuracy_vs_epsilon.png").exists() and (out / "summary.md").exists()


def test_a_flower_sweeps_cells_share_one_ray_instance_shut_down_at_the_end(tmp_path, monkeypatch):
    """Flower's backend starts Ray for a simulation unless it runs, and stops it after: a sweep's
    Flower cells start it once (``_compat.ray_kept_up``), and the sweep leaves it stopped."""
    import ray

    text = (
        (ROOT / "configs" / "quickstart.toml")
        .read_text()
        .replace("n_clients = 300 ", "n_clients = 24 ")
        .replace("n_test_per_class = 100", "n_test_per_class = 10")
        .replace("epsilon_grid = [1000, 3000, 10000]", "epsilon_grid = [10000]")
        .replace('names = ["spread", "naive", "clean"]', 'names = ["naive", "clean"]')
    )
    assert "repeats = 2 " in text and "n_clients = 24 " in text
    starts, actors = [], []
    real_init = ray.init
    monkeypatch.setattr(ray, "init", lambda *a, **k: starts.append(1) or real_init(*a, **k))
    from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend
    from flwr.simulation.ray_transport.ray_actor import BasicActorPool

    real_add = BasicActorPool.add_actors_to_pool
    monkeypatch.setattr(BasicActorPool, "add_actors_to_pool", lambda self, n: actors.append(n) or real_add(self, n))
    original = RayBackend.terminate, RayBackend.build
    assert not ray.is_initialized()
    res = sweep(parse_scenario(__import__("tomllib").loads(text)), tmp_path / "qs", progress=False, log=lambda s: None)
    assert sorted(res.computed) == ["g000-n00-r000", "g000-n00-r001"] and not res.failed
    assert len(starts) == 1 and not ray.is_initialized()
    assert len(actors) == 1  # the second cell ran on the first cell's ClientApp actors
    assert (RayBackend.terminate, RayBackend.build) == original  # Flower's own, restored
    # and answered as fresh ones: every figure equals the same cells' offline run (the same releases)
    offline = text.replace('mode = "flower"', 'mode = "offline"\nworkers = 1')
    sweep(parse_scenario(__import__("tomllib").loads(offline)), tmp_path / "off", progress=False, log=lambda s: None)

    def figures(out):
        recs = {p.stem: json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))}
        return {(k, n): r["learners"][n]["accuracy"] for k, r in recs.items() for n in r["learners"]}

    assert len(figures(tmp_path / "qs")) == 4 and figures(tmp_path / "qs") == figures(tmp_path / "off")


def _backend():
    """A Flower Ray backend with its ClientApp actors built, as a simulation starts (inside
    ``ray_kept_up``: on the last simulation's kept actors when they fit)."""
    from flwr.server.superlink.fleet.vce.backend.raybackend import RayBackend

    from fedrr.federation import backend_config

    backend = RayBackend(backend_config(1.0))
    backend.build(lambda: None)
    return backend


def _dead(actor, within: float = 60.0) -> bool:
    """Whether a killed actor is reported dead within ``within`` seconds (ray.kill only asks); a
    slow answer is not taken for death."""
    import ray

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return True
        except ray.exceptions.GetTimeoutError:
            continue
        time.sleep(0.1)
    return False


def test_ray_kept_up_keeps_live_clientapp_actors_only():
    """The next simulation runs on the last one's ClientApp actors, unless one of them died (Flower
    puts a dead actor back in its pool after its error): then every actor is new."""
    import ray
    from flwr.simulation.ray_transport.ray_actor import BasicActorPool

    from fedrr.federation import ray_kept_up

    started = []
    real_add = BasicActorPool.add_actors_to_pool

    def add(self, n):
        started.append(n)
        real_add(self, n)

    BasicActorPool.add_actors_to_pool = add
    try:
        with ray_kept_up():
            first = _backend()
            actors = list(first.pool.pool)
            first.terminate()
            second = _backend()
            assert started == [first.pool.actors_capacity] and list(second.pool.pool) == actors  # reused
            ray.kill(actors[0])
            assert _dead(actors[0])  # ray.kill is asynchronous: a call may still be served before it
            second.terminate()
            third = _backend()
            assert len(started) == 2 and not set(third.pool.pool) & set(actors)  # all new
            third.terminate()
        assert not ray.is_initialized()
    finally:
        BasicActorPool.add_actors_to_pool = real_add


def test_ray_kept_up_in_a_running_ray_kills_its_kept_actors_and_leaves_ray_up():
    """Inside a Ray that was up before the block, the kept ClientApp actors serve the next
    simulation and are killed when the block ends; that Ray stays up, with no actor of the block's
    left holding its CPUs."""
    import ray

    from fedrr.federation import ray_kept_up
    from fedrr.parallel import ray_alive

    assert not ray.is_initialized()
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        with ray_kept_up():
            first = _backend()
            actors = list(first.pool.pool)
            first.terminate()
            assert ray_alive(actors)  # kept for the next simulation
            second = _backend()
            assert list(second.pool.pool) == actors
            second.terminate()
        assert ray.is_initialized() and all(_dead(a) for a in actors)
        deadline = time.monotonic() + 30  # a dead actor's CPUs come back to the node asynchronously
        while ray.available_resources().get("CPU") != 2.0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ray.available_resources().get("CPU") == 2.0
    finally:
        ray.shutdown()


def test_ray_kept_up_restarts_only_the_ray_it_started():
    """After a failed cell the sweep calls the block's restart: it shuts down a Ray the block started
    (the next cell starts a fresh one) and leaves a Ray that was up before the block."""
    import ray

    from fedrr.federation import ray_kept_up

    assert not ray.is_initialized()
    with ray_kept_up() as restart:
        ray.init(num_cpus=1, include_dashboard=False)
        restart()
        assert not ray.is_initialized()
    ray.init(num_cpus=1, include_dashboard=False)
    try:
        with ray_kept_up() as restart:
            restart()
            assert ray.is_initialized()
        assert ray.is_initialized()
    finally:
        ray.shutdown()


# ------------------------------------------------------------- every shipped config, reduced
GRID_KEYS_ = ("epsilon_grid", "feature_flip_grid", "feature_epsilon_grid")


def _reduced(data: dict) -> dict:
    """The same scenario, small: one grid point, one repeat, few clients, short EM."""
    data = json.loads(json.dumps(data))
    data.setdefault("scenario", {})["repeats"] = 1
    pop = data.setdefault("population", {})
    n = pop.get("n_clients", 100)
    pop["n_clients"] = 60 if not isinstance(n, list) else [60, 120]
    for key in GRID_KEYS_:
        if key in data.get("privacy", {}):
            data["privacy"][key] = data["privacy"][key][-1:]
    data.setdefault("learners", {})["spread_max_iter"] = 15
    if data.get("run", {}).get("mode") == "cohort":
        data["run"]["cohort_size"] = 30
    return data


def test_every_shipped_config_has_a_reduced_end_to_end_test():
    # quickstart: test_reduced_quickstart_in_flower_mode_through_the_cli
    assert set(_shipped_configs()) == {"quickstart"} | set(SHIPPED_REDUCED)


def test_barber_6_1_config_has_the_papers_noise_variances():
    """The §6.1 config sets ε per pixel; the analytic Gaussian it builds must have σ² = 0.5 and 0.1."""
    cfg = load_scenario(ROOT / "configs" / "paper" / "barber_6_1.toml")
    variances = []
    for g in range(len(cfg.grid)):
        pop = build_population(cfg.cells([g])[0].run_config())
        rm = pop.mechanism(0)
        assert rm.label.flip_prob == pytest.approx(0.2)
        variances.append(rm.fields[0].mechanism.sigma ** 2)
    assert variances == pytest.approx([0.5, 0.1], rel=1e-9)


SHIPPED_REDUCED = [
    "adult",
    "adult_m2",
    "adult_paired",
    "adult_planned",
    "adult_scale",
    "paper/barber_6_1",
    "paper/barber_fig3_digits",
    "paper/barber_fig3_mnist",
    "paper/farokhi_fig1_lending_club",
    "paper/farokhi_fig2_adult",
    "paper/farokhi_sweep_adult",
    "paper/farokhi_sweep_adult_analytic",
    "paper/farokhi_sweep_lending_club",
    "paper/farokhi_sweep_lending_club_analytic",
    "paper/farokhi_wdro_adult",
    "scaling",
    "spread_cv_mnist",
    "spread_cv_mnist_records",
    "my_table",
]


@pytest.mark.parametrize("name", SHIPPED_REDUCED)
def test_each_shipped_config_runs_end_to_end_reduced(name, tmp_path):
    import tomllib

    import tomli_w

    src = ROOT / "configs" / f"{name}.toml"
    data = _reduced(tomllib.loads(src.read_text()))
    for key in ("table", "test_table"):  # a table's path is relative to its scenario file: keep it found
        if key in data["population"]:
            data["population"][key] = str((src.parent / data["population"][key]).resolve())
    stem = name.rsplit("/", 1)[-1]
    path = tmp_path / f"{stem}.toml"
    path.write_text(tomli_w.dumps(data))
    assert main(["sweep", str(path), "--out", str(tmp_path / stem), "--no-progress"]) == 0
    rows = _csv(tmp_path / stem / "results.csv")
    learners = set(data["learners"]["names"])
    assert {r["learner"] for r in rows} == learners
    metric = "mse" if data["population"].get("task") == "regression" else "accuracy"
    assert all(r["error"] == "" and r["metric"] == metric and 0.0 <= float(r[metric]) <= 1.0 for r in rows), rows
    assert (tmp_path / stem / f"{metric}_vs_epsilon.png").exists() and (tmp_path / stem / "summary.md").exists()


def test_a_crlf_config_loads_as_its_lf_twin_and_a_lone_cr_is_refused(tmp_path):
    """Windows line ends are TOML; a lone carriage return is not (text mode once read it as a newline)."""
    lf = load_scenario(_write(tmp_path, TINY, "lf.toml"))
    crlf = load_scenario(_write_bytes(tmp_path / "crlf.toml", TINY.replace("\n", "\r\n").encode()))
    assert crlf.as_dict() == lf.as_dict() and crlf.text == lf.text
    bad = _write_bytes(tmp_path / "cr.toml", TINY.replace("\n", "\r", 3).encode())
    with pytest.raises(ValidationError) as e:
        load_scenario(bad)
    assert e.value.field == "config" and "not valid TOML" in str(e.value)


def _write_bytes(path: Path, raw: bytes) -> Path:
    path.write_bytes(raw)
    return path
