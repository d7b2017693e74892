"""simulations/ and benchmarks/ (bench_*.py) hold thin scripts on fedrr's public API (a custom
figure, an attack demo, a benchmark), no framework of its own: each runs end to end in a small
configuration and writes its outputs, each names its command, and none imports another. Paper reproductions are configs
(configs/paper/, tests/test_simulation.py)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*(ROOT / "simulations").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")])


def _folder(script: str) -> str:
    """Where a script lives: benchmarks/ for bench_*.py, simulations/ for the rest."""
    return "benchmarks" if script.startswith("bench_") else "simulations"


# script (and its --part, for a script of several parts) -> (arguments of a small run, the files it
# must write in --out); the attack, audit and
# demo scripts run in tests/test_repeated_release_attack.py, test_audit.py, test_snapping.py and
# test_frequencies.py
QUICK = {
    "barber_fig1.py": (["--quick"], ["fig1_bernoulli.csv", "fig1_bernoulli.png", "fig1_bernoulli.md"]),
    "spread_consistency.py": (
        ["--quick", "--n", "500", "1000", "--max-iter", "20"],
        ["spread_consistency.csv", "spread_consistency.png", "spread_consistency.md"],
    ),
    "bench_spread_em.py": (
        ["--quick", "--n", "400", "--variant", '{"n_chains": 1}'],
        ["bench_spread_em.csv", "bench_spread_em.txt", "bench_spread_em.png"],
    ),
    "bench_ray_scaling.py": (["--parts", "local", "--sizes", "2000", "--rounds", "2"], ["summary.md"]),
    "bench_spread_cv.py": (["--n", "300"], ["bench_spread_cv.md", "bench_spread_cv.csv"]),
    "bench_parallel_estep.py": (["--n", "600", "--iters", "6", "--shard-size", "256"], ["parallel_estep.md"]),
    "bench_ray_actor_start.py": (
        ["--n", "600", "--iters", "6", "--rounds", "1", "--fit-rounds", "0"],
        ["bench_ray_actor_start.md"],
    ),
    "bench_federation_scale.py": (
        ["--nodes", "12", "--cohort", "200", "--cohort-nodes", "4"],
        ["scale.csv", "scale.md"],
    ),
    "multiclass_burn_in.py": (["--seeds", "1"], ["multiclass_burn_in.md"]),
    "spread_cv_scoring.py --part rules": (["--seeds", "1"], ["spread_fallback_rules.md", "spread_fallback_rules.csv"]),
    "adult_spread.py --part c-choice": (["--eps", "8", "--max-iter", "3", "--cv-max-iter", "3"], ["summary.md"]),
    "spread_fallback_level.py": (["--part", "level", "--pools", "2"], ["level.md", "level.csv"]),
    "adult_spread.py --part public-prior": (
        ["--eps", "8", "--seeds", "1", "--n-public", "200", "--max-iter", "4"],
        ["summary.md"],
    ),
    "bench_dro_sdp.py": (["--p", "4", "--n", "80", "--repeats", "1"], []),
    "bench_wdro_cv.py": (["--n", "200"], ["wdro_cv.md"]),
    "fake_clients.py": (
        ["--quick", "--seeds", "1", "--flag-seeds", "1"],
        ["fake_clients.csv", "fake_clients_flags.csv", "fake_clients.md", "fake_clients.png"],
    ),
    "fake_attacks.py": (["--quick"], ["attacks.md", "attacks_accuracy.csv", "attacks_flags.csv"]),
    "bench_spread_scale.py": (["--quick", "--whole-selection", "--cells"], ["bench_spread_scale_3000_cells.md"]),
    "paired_independence_level.py": (["--pools", "2"], ["independence_direct.md"]),
    "paired_independence_level.py --adult --real": (
        ["--people", "1000", "--eps", "1", "--pools", "2", "--boot", "9"],
        ["independence_adult_power.md"],
    ),
}


def _run(script: str, args: list) -> None:
    """Run ``script`` (simulations/ or benchmarks/) with ``args`` as a user would (repository root,
    Agg backend); it must exit 0."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / _folder(script) / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("script", sorted(QUICK))
def test_script_small_run(script, tmp_path):
    args, outputs = QUICK[script]
    script, *part = script.split()
    out = tmp_path / "out"
    _run(script, [*part, *args, *(["--out", str(out)] if outputs else [])])
    for name in outputs:
        path = out / name
        assert path.stat().st_size > 0, name
        if name.endswith((".csv", ".md", ".txt")):  # every result names the command that made it
            assert f"python {_folder(script)}/{script}" in path.read_text(), name
        if name.endswith(".md"):  # ... and the code it ran (fedrr.io.provenance: the git commit)
            assert ", git " in path.read_text(), name


def test_spread_fallback_level_paired(tmp_path):
    """The level part on paired releases (issue 29): one p-value and z per pool, the command named."""
    out = tmp_path / "out"
    script = "spread_fallback_level.py"
    _run(script, ["--part", "level", "--only", "paired:2", "--pools", "2", "--out", str(out)])
    for name in ("level_paired_2_seed10000.md", "level_paired_2_seed10000.csv"):
        assert f"python simulations/{script}" in (out / name).read_text(), name
    lines = [x for x in (out / "level_paired_2_seed10000.csv").read_text().splitlines() if not x.startswith("#")]
    assert lines[0].split(",")[:5] == ["release", "classes", "seed", "p_value", "z"]
    assert len(lines) == 3 and all(x.startswith("paired,2,") for x in lines[1:])


def test_spread_fallback_power_paired(tmp_path):
    """The power part on paired releases: kept rates per (records, ε per record), the command named."""
    out = tmp_path / "out"
    script = "spread_fallback_level.py"
    args = ["--part", "power", "--release", "paired", "--pools", "2", "--records", "200", "--eps", "2,4"]
    _run(script, [*args, "--out", str(out)])
    md = (out / "power_paired.md").read_text()
    assert f"python simulations/{script}" in md and "| 200 | 2.0 | 2 |" in md and "| 200 | 4.0 | 2 |" in md
    lines = [x for x in (out / "power_paired.csv").read_text().splitlines() if not x.startswith("#")]
    assert lines[0].split(",")[:3] == ["records", "epsilon", "seed"] and len(lines) == 5


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_are_thin_and_name_their_command(path):
    """A module docstring that gives the command, imports from fedrr and libraries only (no shared
    helper module in simulations/, no sys.path tricks). (No line count: a script is split along
    its seams, never to a number, issue 30.)"""
    text = path.read_text()
    tree = ast.parse(text)
    doc = ast.get_docstring(tree) or ""
    assert f"python {path.parent.name}/{path.name}" in doc
    local = {p.stem for p in SCRIPTS}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert node.module.split(".")[0] not in local, node.module
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & local
    assert "sys.path.insert" not in text


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_import_public_names_only(path):
    """No module path with a private part (``fedrr.x._y``) and no underscore name from fedrr: a script
    uses the public API only, as a user's own would."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fedrr"):
            assert not any(part.startswith("_") for part in node.module.split(".")), node.module
            assert not [a.name for a in node.names if a.name.startswith("_")], (node.module, node.names)
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("fedrr"):
                    assert not any(part.startswith("_") for part in a.name.split(".")), a.name


def test_no_second_experiment_framework():
    """Paper reproductions are configs; simulations/ keeps no framework of its own."""
    assert not (ROOT / "simulations" / "_common.py").exists()
    assert (ROOT / "configs" / "paper").is_dir()
    assert len(SCRIPTS) >= 10


def test_paired_independence_level_grid_resumes(tmp_path):
    """The level grid (issue 45): settings appended to the CSV as they finish, a rerun skips them, and
    ``--report`` writes the table with its Clopper-Pearson intervals and the command."""
    out = tmp_path / "out"
    script = "paired_independence_level.py"
    args = ["--grid", "--pools", "2", "--shard", "0/36", "--out", str(out)]
    _run(script, args)
    csv_path = out / "independence_grid.csv"
    rows = lambda: [x for x in csv_path.read_text().splitlines() if not x.startswith("#")]  # noqa: E731
    first = rows()
    assert first[0].startswith("index,oracle,eps,pairs,classes,records,pools,kept05")
    assert [x.split(",")[0] for x in first[1:]] == ["0", "36"]  # the settings whose index is 0 modulo 36
    _run(script, args)
    assert rows() == first  # nothing rerun
    _run(script, ["--grid", "--report", "--out", str(out)])
    md = (out / "independence_grid.md").read_text()
    assert f"python simulations/{script}" in md and "| RR | 0.5 | 1 | 2 | 600 | 2 |" in md
    assert "0 of 2 settings have their kept rate" in md
