"""Every mistake named before anything runs (issue 43): the Flower wrapper, ``fedrr check`` and the
sweep refuse, with one line naming the key (and the population and client), what would otherwise
fail later or silently; estimators never read releases as clean data without saying so; fallbacks
are said on every live score line; a learner keeps its colour and marker in every plot.

The wrapper's tests fail before ``flwr`` starts (no Flower process, no FLWR_HOME written): they run
in-process, on an app directory holding only the app's pyproject.toml."""

from __future__ import annotations

import dataclasses
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from fedrr import learners
from fedrr.errors import CleanDataWarning, ValidationError
from fedrr.experiment import cli
from fedrr.federation import flwr_cli

REPO = Path(__file__).resolve().parents[1]

#: small custom populations of the kinds users get wrong: records narrower than their mechanism,
#: no clients at all, and one with its own option (n_test) that the app's config table lacks
POPS = '''
from fedrr.examples import TwoBudgetSyntheticPopulation
from fedrr.mechanisms import RandomizedResponse, RecordMechanism


class SurveyPopulation(TwoBudgetSyntheticPopulation):
    """Its own option n_test: valid for fedrr, not a key of the app's [tool.flwr.app.config]."""


class WrongWidth(TwoBudgetSyntheticPopulation):
    """Records of 3 features, a mechanism for 4."""

    def record(self, client_id):
        x, y = super().record(client_id)
        return x[:3], y

    def mechanism(self, client_id):
        self.check_client(client_id)
        return RecordMechanism(RandomizedResponse(4, 0.2), RandomizedResponse(2, 0.2), n_features=4)


class NarrowTest(TwoBudgetSyntheticPopulation):
    """A test set of 4 columns for records of 5."""

    def test_set(self):
        X, y = super().test_set()
        return X[:, :4], y


class Empty(TwoBudgetSyntheticPopulation):
    """No clients."""

    @property
    def n_clients(self):
        return 0
'''
MODULE = "fedrr_mistake_pops"


@pytest.fixture
def pops(tmp_path, monkeypatch):
    """The populations above as a module in the start directory (tmp_path), as a user's would be."""
    (tmp_path / f"{MODULE}.py").write_text(POPS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.fixture
def app(tmp_path):
    """The Flower app's pyproject.toml alone: all the wrapper reads before flwr starts."""
    d = tmp_path / "app"
    d.mkdir()
    shutil.copy2(REPO / "pyproject.toml", d / "pyproject.toml")
    return d


def _wrapper(app: Path, config: str, capsys) -> tuple[int, str]:
    home = app.parent / "flwr-home"
    rc = flwr_cli.main([str(app), "--flwr-home", str(home), "-c", config])
    err = capsys.readouterr().err
    assert not home.exists(), "flwr was started"  # refused before any connection was written
    return rc, err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_wrapper_wrong_width(pops, app, capsys):
    rc, err = _wrapper(app, f"population='{MODULE}:WrongWidth' n-clients=30 learners='naive'", capsys)
    assert rc == 2
    line = _one_line(err)
    assert f"population: {MODULE}:WrongWidth, client 0's record: X: must have shape (n_records, 4), got (1, 3)" in line


def test_wrapper_empty_population(pops, app, capsys):
    rc, err = _wrapper(app, f"population='{MODULE}:Empty' n-clients=30 learners='naive'", capsys)
    assert rc == 2
    assert f"population: {MODULE}:Empty has no clients (n_clients = 0)" in _one_line(err)


def test_wrapper_custom_option(pops, app, capsys):
    """Flower would answer only "[code: 15] Invalid run configuration."; the wrapper names the key
    and the way out."""
    rc, err = _wrapper(app, f"population='{MODULE}:SurveyPopulation' n-clients=30 n-test=300", capsys)
    assert rc == 2
    line = _one_line(err)
    assert f"n-test: {MODULE}:SurveyPopulation's option is not in [tool.flwr.app.config]" in line
    assert "add a line 'n-test = <default>'" in line
    # declared in the app's table, the same option passes the wrapper's checks
    (app / "pyproject.toml").write_text(
        (app / "pyproject.toml").read_text().replace('run-name = ""', 'run-name = ""\nn-test = 2000')
    )
    cfg = flwr_cli.check_run_config(app, {"population": f"{MODULE}:SurveyPopulation", "n-clients": 30, "n-test": 300})
    assert cfg.extras == {"n-test": 300}


def test_wrapper_unquoted_string(app, capsys):
    rc, err = _wrapper(app, "n-clients=abc", capsys)
    assert rc == 2
    assert "n-clients: abc is not a TOML value: quote strings" in _one_line(err)
    rc, err = _wrapper(app, "n-clients='abc'", capsys)  # quoted: the run config's own check
    assert rc == 2
    assert "n-clients: must be an integer" in _one_line(err)


def test_wrapper_refuses_a_learner_the_mechanisms_do_not_suit(app, capsys):
    rc, err = _wrapper(app, "budget-mix='0.2:1,0.4:1' label-flip=0.2 learners='ldp-nb-robust'", capsys)
    assert rc == 2
    assert "learners: 'ldp-nb-robust' needs one record mechanism for every client" in _one_line(err)


# ------------------------------------------------------------------------------- fedrr check
def _scenario(path: Path, population: str, learners_: str = '["naive"]') -> Path:
    path.write_text(
        f'[scenario]\nname = "{path.stem}"\n[population]\n{population}\n'
        f'[learners]\nnames = {learners_}\n[run]\nmode = "offline"\nworkers = 1\n'
    )
    return path


def _check(path: Path, capsys) -> tuple[int, str]:
    rc = cli.main(["check", str(path)])
    return rc, capsys.readouterr().err


def test_check_wrong_width(pops, capsys):
    p = _scenario(pops / "ww.toml", f'population = "{MODULE}:WrongWidth"\nn_clients = 50\noptions = {{ n_test = 100 }}')
    rc, err = _check(p, capsys)
    assert rc == 2
    line = _one_line(err)
    assert f"population.population: {MODULE}:WrongWidth, client 0's record: X: must have shape" in line


def test_check_test_set_width(pops, capsys):
    p = _scenario(pops / "nt.toml", f'population = "{MODULE}:NarrowTest"\nn_clients = 50')
    rc, err = _check(p, capsys)
    assert rc == 2
    assert f"{MODULE}:NarrowTest's test_set() must be (X (n, 5), y (n,)), got X (2000, 4)" in _one_line(err)


def test_check_empty_population(pops, capsys):
    p = _scenario(pops / "empty.toml", f'population = "{MODULE}:Empty"\nn_clients = 50')
    rc, err = _check(p, capsys)
    assert rc == 2
    assert f"population.population: {MODULE}:Empty has no clients" in _one_line(err)


def test_check_custom_option(pops, capsys):
    """A custom population's own option passes ``fedrr check`` (options travel as extras); a
    misspelt one is named."""
    p = _scenario(
        pops / "ok.toml", f'population = "{MODULE}:SurveyPopulation"\nn_clients = 50\noptions = {{ n_test = 100 }}'
    )
    assert cli.main(["check", str(p)]) == 0
    p = _scenario(
        pops / "typo.toml", f'population = "{MODULE}:SurveyPopulation"\nn_clients = 50\noptions = {{ n_tset = 100 }}'
    )
    rc, err = _check(p, capsys)
    assert rc == 2
    assert "n_tset" in _one_line(err)


MIX = """dataset = "digits_7_vs_9"
n_clients = 120
n_test_per_class = 30
budget_mix = { values = [0.15, 0.35], weights = [1, 1] }
[privacy]
mechanism = "rr"
label_flip = 0.2"""


def test_check_learner_mechanism(tmp_path, capsys):
    """ldp-nb-robust on a population of two budgets: refused by check, before a sweep would run it
    (ldp-nb itself pools the budgets' groups)."""
    p = _scenario(tmp_path / "mix.toml", MIX, '["naive", "ldp-nb-robust"]')
    rc, err = _check(p, capsys)
    assert rc == 2
    line = _one_line(err)
    assert "learners.names: 'ldp-nb-robust' needs one record mechanism for every client (no budget mix)" in line
    assert "gives 2 distinct record mechanisms" in line
    assert cli.main(["check", str(_scenario(tmp_path / "ok.toml", MIX, '["naive", "spread", "ldp-nb"]'))]) == 0


def test_check_accepts_refuses_what_fit_refuses():
    """The check and the fit share one rule: a learner check_accepts refuses also raises when fitted."""
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    a, b = (RecordMechanism(RandomizedResponse(4, f), RandomizedResponse(2, 0.2), n_features=3) for f in (0.1, 0.3))
    with pytest.raises(ValidationError, match="'ldp-nb-robust' needs one record mechanism"):
        learners.check_accepts(["ldp-nb-robust"], [a, b])
    learners.check_accepts(["ldp-nb", "ldp-nb-robust", "naive", "wdro"], a)
    learners.check_accepts(["ldp-nb"], [a, b])  # ldp-nb pools a budget mix's groups
    rng = np.random.default_rng(0)
    X = rng.integers(0, 4, (40, 3))
    y = rng.integers(0, 2, 40)
    entry = learners.fit_and_score("ldp-nb-robust", learners.FitData(X, y, [a, b] * 20), None).entry
    assert "needs one record mechanism" in entry["error"]
    assert "error" not in learners.fit_and_score("ldp-nb", learners.FitData(X, y, [a, b] * 20), None).entry


# ------------------------------------------------------------------------------------- sweep
TINY = """dataset = "digits_7_vs_9"
n_clients = 60
n_test_per_class = 20
[privacy]
mechanism = "rr"
feature_flip_grid = [0.2]
label_flip = 0.2"""


def test_sweep_learner_failure_exit(tmp_path, monkeypatch, capsys):
    """A learner that raises: the cell is kept (its other learners' results stand), and the sweep
    exits 1 naming how many learners failed in how many cells, with the first message; a rerun
    that skips the finished cell says so again."""
    key = ("classification", "majority")

    def boom(d, o):
        raise ValueError("boom")

    registry = learners._registry._REGISTRY
    monkeypatch.setitem(registry, key, dataclasses.replace(registry[key], fit=boom))
    p = _scenario(tmp_path / "tiny.toml", TINY, '["naive", "majority"]')
    out = tmp_path / "out"
    for _ in range(2):
        rc = cli.main(["sweep", str(p), "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err
        assert rc == 1
        assert "fedrr: 1 learner(s) failed in 1 cell(s); first: cell g000-n00-r000, majority: ValueError: boom" in err
        assert (out / "cells" / "g000-n00-r000.json").exists()  # the cell is kept


@pytest.mark.parametrize("workers", ["-1", "0"])
def test_sweep_refuses_workers_below_one(tmp_path, capsys, workers):
    p = _scenario(tmp_path / "tiny.toml", TINY)
    assert cli.main(["sweep", str(p), "--out", str(tmp_path / "out"), "--workers", workers]) == 2
    assert f"--workers: must be an integer >= 1, got {workers}" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------- estimators
def test_fit_without_mechanism():
    """Releases fitted without their mechanism are read as clean data, with a CleanDataWarning (not
    an error: the estimators stay scikit-learn estimators); with the mechanism, or NaiveLogistic-
    Regression(clean=True) on clean data, nothing is said."""
    from fedrr.estimators import (
        LDPNaiveBayes,
        MajorityClassifier,
        NaiveLogisticRegression,
        ReconstructionLogisticRegression,
        SpreadLogisticRegression,
        SpreadLogisticRegressionCV,
    )
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    rng = np.random.default_rng(0)
    rm = RecordMechanism(RandomizedResponse(3, 0.2), RandomizedResponse(2, 0.2), n_features=3)
    X = rng.integers(0, 3, (200, 3))
    y = (X[:, 0] + rng.integers(0, 2, 200) > 1).astype(int)
    Xt, yt = rm.release(X, y, rng=rng)
    estimators = [
        SpreadLogisticRegressionCV(Cs=(1.0,), cv=2, max_iter=3, cv_max_iter=3, n_permutations=19, random_state=0),
        SpreadLogisticRegression(max_iter=3, random_state=0),
        ReconstructionLogisticRegression(random_state=0),
        NaiveLogisticRegression(),
        LDPNaiveBayes(),
        MajorityClassifier(),
    ]
    for est in estimators:
        with pytest.warns(CleanDataWarning, match=rf"{type(est).__name__}\.fit got no mechanism") as rec:
            est.fit(Xt, yt)
        assert len([w for w in rec if w.category is CleanDataWarning]) == 1  # said once
        with warnings.catch_warnings():
            warnings.simplefilter("error", CleanDataWarning)
            est.fit(Xt, yt, mechanism=rm)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CleanDataWarning)
        NaiveLogisticRegression(clean=True).fit(X, y)


# -------------------------------------------------------------------------------- fallbacks
def test_score_lines_say_when_a_learner_fell_back():
    """spread on releases whose labels are independent of the features falls back, and every live
    line of its score says so, with the p-value the decision was taken on."""
    from fedrr.experiment._sweep import cell_line
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    rng = np.random.default_rng(1)
    rm = RecordMechanism(RandomizedResponse(3, 0.3), RandomizedResponse(2, 0.2), n_features=3)
    X, y = rng.integers(0, 3, (400, 3)), rng.integers(0, 2, 400)  # no signal
    Xt, yt = rm.release(X, y, rng=rng)
    test = (X[:100], y[:100])
    entry = learners.fit_and_score(
        "spread", learners.FitData(Xt, yt, rm), test, learners.FitOptions(spread_max_iter=20)
    ).entry
    p = entry["diagnostics"]["p_value"]
    assert entry["diagnostics"]["fallback"]
    note = f"fell back (no held-out gain over the intercept-only model, p = {p:.3g})"
    assert learners.fallback_note(entry) == note
    assert learners.score_text(entry) == f"accuracy {entry['accuracy']:.4f}, {note}"  # the ServerApp's line
    naive = learners.fit_and_score("naive", learners.FitData(Xt, yt, rm), test).entry
    assert learners.fallback_note(naive) == ""
    rec = {"cell": "g000-n00-r000", "eps": {"record": 3.0}, "n_clients": 400, "seconds": 1.0}
    line = cell_line({**rec, "learners": {"spread": entry, "naive": naive}})
    assert f"spread {entry['accuracy']:.4g} {note}; naive {naive['accuracy']:.4g} (1 s)" in line


def test_ldp_sgd_fallback_note_gives_its_check_p_value():
    entry = {"diagnostics": {"fallback": True, "fallback_reason": "the check's ...", "check": {"gain": 0.0, "se": 0.1}}}
    assert learners.fallback_note(entry) == "fell back (no accuracy gain on the check group, p = 0.5)"
    entry = {
        "diagnostics": {"fallback": True, "fallback_reason": "groups too small to move the model: ...", "check": None}
    }
    assert learners.fallback_note(entry) == "fell back (groups too small to move the model)"


# ------------------------------------------------------------------------------------ plots
def test_learner_colours_are_fixed_by_name(tmp_path):
    """Two sweeps with different learner subsets draw `naive` in the same colour and marker; every
    registered learner has its own fixed style, an unknown name a stable one."""
    import matplotlib

    matplotlib.use("Agg")
    from fedrr.experiment import _plots

    drawn = {}
    for subset in (["naive", "spread"], ["spread-flat", "majority", "naive"]):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        for i, name in enumerate(subset):
            _plots._mean_band(ax, [{"eps": 1.0, "mean": 0.5, "sd": 0.0, "fell_back": 0}], "eps", name, 1, i)
        drawn[tuple(subset)] = {ln.get_label(): (ln.get_color(), ln.get_marker()) for ln in ax.get_lines()}
        plt.close(fig)
    a, b = drawn.values()
    assert a["naive"] == b["naive"] == _plots.LEARNER_STYLES["naive"]
    for task in learners.TASKS:
        assert set(learners.names(task)) <= set(_plots.LEARNER_STYLES), "give every registered learner a style"
    assert _plots.learner_style("my-learner") == _plots.learner_style("my-learner")
    assert _plots.learner_style("my-learner")[0] in _plots._FALLBACK_COLOURS
