"""``fedrr plan`` (issue 43 item 2): the planner for a schema on the command line or for a scenario's
population, whose schema is read from the population object the scenario builds (client 0's record
mechanism), so a dataset, a custom or a table population all work the same way."""

from __future__ import annotations

import textwrap

import pytest

from fedrr.experiment.cli import main


# --- fedrr plan ---------------------------------------------------------------------------------
def test_cli_plan_for_a_schema(capsys):
    argv = ["plan", "--states", "5,5,5,5,5,5", "--classes", "2", "--epsilon", "1", "--n", "2000"]
    assert main([*argv, "--dependence", "report"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: too few people" in out
    assert "collect ≥ 30,103 people at ε = 1" in out


@pytest.mark.parametrize(
    "argv, key",
    [
        (["--states", "5,x", "--classes", "2", "--epsilon", "1", "--n", "10"], "--states"),
        (["--states", "5,5", "--epsilon", "1", "--n", "10"], "--classes"),
        (["--states", "5,5", "--classes", "2", "--epsilon", "1"], "--n"),
        (["--states", "5,5", "--classes", "2", "--epsilon", "0", "--n", "10"], "--epsilon"),
        (["--states", "5,5", "--classes", "2", "--epsilon", "1", "--n", "0"], "--n"),
        (["--states", "5,5", "--classes", "2", "--epsilon", "1", "--n", "10", "--target", "-1"], "--target"),
        (["--states", "5,5", "--classes", "2", "--epsilon", "1", "--n", "10", "--top", "0"], "--top"),
        (["configs/quickstart.toml", "--states", "5,5"], "--states"),
        ([], "CONFIG"),
        (["--classes", "2", "--epsilon", "1", "--n", "10"], "CONFIG"),
    ],
)
def test_cli_plan_errors_name_the_option(argv, key, capsys):
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fedrr: error: {key}:"), err


def test_cli_plan_help_has_examples(capsys):
    with pytest.raises(SystemExit) as info:
        main(["plan", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "fedrr plan --states" in out and "--target" in out


def _scenario(tmp_path, body: str):
    path = tmp_path / "scenario.toml"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_cli_plan_for_a_custom_population(tmp_path, capsys):
    """A custom population: the schema (5 attributes of 4 states, 2 classes) comes from the population
    object, and each of its two budgets is planned, beside its own split RR mechanism."""
    cfg = _scenario(
        tmp_path,
        """
        [scenario]
        name = "two_budgets"
        [population]
        population = "fedrr.examples:TwoBudgetSyntheticPopulation"
        n_clients = 500
        [learners]
        names = ["naive"]
        """,
    )
    assert main(["plan", cfg, "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "F = 5 attributes (k = 4, 4, 4, 4, 4), C = 2 classes" in out
    assert out.count("Release plan: ε = ") == 2 and "a budget mix" in out
    assert out.count("This scenario's own mechanism at ε = ") == 2
    assert "Summary (target: RMS error ≤ 25 % of a cell)" in out
    assert main(["plan", cfg, "--epsilon", "2", "--n", "10000", "--target", "0.1"]) == 0
    out = capsys.readouterr().out
    assert out.count("Release plan: ε = 2 per person, n = 10,000 records") == 1 and "Summary" not in out
    assert "target 10 %" in out


def test_cli_plan_for_a_dataset_scenario(capsys):
    assert main(["plan", "configs/adult_planned.toml", "--epsilon", "1", "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert "F = 12 attributes (k = 8, 6, 3, 2, 5, 7, 7, 14, 6, 5, 2, 41), C = 2 classes" in out
    assert "n = 30,162 records" in out and "WARNING: too few people for ε = 1" in out
    assert "collect ≥ 1,914,115 people at ε = 1 (paired, m=1), or raise ε to" in out


def test_cli_plan_dependence_prefer_switches_with_n(capsys):
    # Adult's schema at ε 2: the triple's three-way error is 21.5 at 3·10⁴ (over the line: one pair kept)
    # and 6.8 at 3·10⁵ (within it: "prefer" switches to the triple; "report" keeps the variance ranking)
    base = ["plan", "configs/adult_planned.toml", "--epsilon", "2", "--top", "1"]
    chosen = {}
    for n, dep in (("30000", "prefer"), ("300000", "prefer"), ("300000", "report")):
        assert main([*base, "--n", n, "--dependence", dep]) == 0
        out = capsys.readouterr().out
        chosen[n, dep] = next(ln for ln in out.splitlines() if ln.startswith("Chosen:"))
    assert "paired, m=1" in chosen["30000", "prefer"]
    assert "triple" in chosen["300000", "prefer"]
    assert "paired, m=1" in chosen["300000", "report"]
    assert main([*base, "--n", "1000", "--dependence", "always"]) == 2
    assert "--dependence" in capsys.readouterr().err


def test_cli_plan_refuses_numeric_releases(tmp_path, capsys):
    cfg = _scenario(
        tmp_path,
        """
        [scenario]
        name = "numeric"
        [population]
        dataset = "breast_cancer"
        n_clients = 100
        [privacy]
        mechanism = "laplace"
        epsilon_grid = [10.0]
        [learners]
        names = ["naive"]
        """,
    )
    assert main(["plan", cfg]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("fedrr: error: privacy.mechanism: fedrr plan plans releases of discrete attributes")
