"""``flwr run .`` on a local simulation SuperLink, through ``python -m fedrr.federation.flwr_cli``,
on a copy of the app (so flwr can never rewrite the repository's pyproject.toml). Checks the run
finished, its results landed where asked, and that nothing flwr started is left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedrr._procs import _live_pids, alive, cmdline, stop
from fedrr.federation.flwr_cli import QUIET_ENV

REPO = Path(__file__).resolve().parents[1]
N = 20


def _with_env(value: str) -> set[tuple[int, int]]:
    """Live processes whose environment holds ``value`` (our FLWR_HOME: flwr's children inherit it)."""
    found = set()
    for pid, (_, start) in _live_pids().items():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if value in env:
            found.add((pid, start))
    return found


def test_flwr_run_local_simulation(tmp_path, app_copy):
    app = app_copy
    pyproject = (app / "pyproject.toml").read_bytes()
    home, results = tmp_path / "flwr-home", tmp_path / "results"
    cmd = [
        sys.executable,
        "-m",
        "fedrr.federation.flwr_cli",
        str(app),
        "--flwr-home",
        str(home),
        "--json",
        "--timeout",
        "150",
        "--run-config",
        f"n-clients={N} run-mode='node' cohort-size=1 min-valid={N} learners='spread,naive' spread-max-iter=100 "
        f"results-dir='{results}' run-name='flwr-run-test'",
    ]
    env = {**os.environ, **QUIET_ENV}
    proc = subprocess.run(cmd, cwd=app, env=env, capture_output=True, text=True, timeout=240)
    summary = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    try:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        metrics = json.loads((results / "flwr-run-test" / "metrics.json").read_text())
        assert metrics["status"] == "done"
        assert metrics["n_releases"] == N and metrics["nodes_registered"] == N
        assert metrics["config"]["results-dir"] == str(results)
        assert metrics["learners"]["naive"]["accuracy"] > 0.7, metrics["learners"]
        assert max(v.get("accuracy", 0) for v in metrics["learners"].values()) > 0.7
        assert (results / "flwr-run-test" / "pool.npz").exists()
        assert summary["pids"], "the helper saw no SuperLink processes"
        assert summary["survivors"] == []
        assert (app / "pyproject.toml").read_bytes() == pyproject
        assert (home / "config.toml").exists()
    finally:
        # nothing flwr started for this test may be left: neither a process the helper tracked
        # (SuperLink, SuperExec, flwr-simulation, Ray) nor anything else with this FLWR_HOME
        left = _with_env(f"FLWR_HOME={home}")
        ours = set(summary.get("pids", []))
        tracked = {(pid, st[1]) for pid, st in _live_pids().items() if pid in ours}  # pids the helper saw, still alive
        names = {p: " ".join(cmdline(p))[:120] for p, _ in left | tracked}
        stop(left | tracked, timeout=10)  # clean up before failing, by pid
        assert not (left | tracked), f"left running: {names}"
        assert not alive(left | tracked)
    flwr_like = [
        p for p, _ in left if any(k in " ".join(cmdline(p)) for k in ("flower-superlink", "flower-supernode", "flwr-"))
    ]
    assert not flwr_like


def _raw_flwr(app: Path, home: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """A bare ``flwr run . --stream`` as a user types it (a fresh FLWR_HOME, flwr's own defaults)."""
    from fedrr._procs import free_port

    env = {
        **os.environ,
        **QUIET_ENV,
        "FLWR_HOME": str(home),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    flwr = str(Path(sys.executable).parent / "flwr")
    return subprocess.run(
        [flwr, "run", ".", "--stream", *extra], cwd=app, env=env, capture_output=True, text=True, timeout=timeout
    )


def _stop_all_with(home: Path) -> None:
    """flwr leaves its local SuperLink running (flwr 1.41, by design): stop everything it started."""
    left = _with_env(f"FLWR_HOME={home}")
    stop(left, timeout=15)
    assert not alive(left)
    assert not _with_env(f"FLWR_HOME={home}")


@pytest.mark.flower
def test_a_bare_flwr_run_works_with_the_apps_defaults(tmp_path, app_copy):
    home = tmp_path / "flwr-home"
    try:
        proc = _raw_flwr(app_copy, home)
        out = proc.stdout + proc.stderr
        runs = list((app_copy / "results" / "federation").glob("*/metrics.json"))
        assert proc.returncode == 0 and len(runs) == 1, out[-4000:]
        metrics = json.loads(runs[0].read_text())
        assert metrics["status"] == "done", out[-4000:]
        assert metrics["nodes_registered"] == 2 and metrics["n_releases"] == 100
        assert metrics["budget"]["defaults_used"] == {"feature-flip": 0.3, "label-flip": 0.2}
        assert "feature-flip not set: using the default" in out  # the default budget, said at the start
    finally:
        _stop_all_with(home)


@pytest.mark.flower
def test_a_bare_flwr_run_short_of_nodes_fails_loudly_and_the_wrapper_exits_non_zero(tmp_path, app_copy):
    """flwr's own exit status is 0 whatever the run did (flwr 1.41 returns once the run started):
    what fedrr controls is that the failure is written and said, and that its wrapper, the
    documented first command, exits non-zero and leaves nothing running."""
    home = tmp_path / "flwr-home"
    cfg = "n-clients=60 run-mode='node' cohort-size=1 node-wait-timeout=5 learners='naive'"
    try:
        proc = _raw_flwr(app_copy, home, "--run-config", cfg)
        out = proc.stdout + proc.stderr
        runs = list((app_copy / "results" / "federation").glob("*/metrics.json"))
        assert len(runs) == 1, out[-4000:]
        assert json.loads(runs[0].read_text())["status"] == "failed: too few valid releases"
        assert 'num-supernodes=60"' in out, out[-4000:]  # the ServerApp says how to fix it
    finally:
        _stop_all_with(home)
    wrapped = subprocess.run(
        [sys.executable, "-m", "fedrr.federation.flwr_cli", str(app_copy), "--flwr-home", str(home), "--json"]
        + ["--num-supernodes", "2", "--timeout", "120", "--run-config", cfg],
        cwd=app_copy,
        env={**os.environ, **QUIET_ENV},
        capture_output=True,
        text=True,
        timeout=240,
    )
    try:
        assert wrapped.returncode == 1, wrapped.stderr[-3000:]
        assert "status: failed: too few valid releases" in wrapped.stderr
        assert json.loads(wrapped.stdout.strip().splitlines()[-1])["survivors"] == []
    finally:
        _stop_all_with(home)


def test_the_wrapper_refuses_a_misspelt_override_before_starting_flwr(tmp_path, app_copy):
    proc = subprocess.run(
        [sys.executable, "-m", "fedrr.federation.flwr_cli", str(app_copy), "--flwr-home", str(tmp_path / "h")]
        + ["--run-config", "n-clinets=30"],
        cwd=app_copy,
        env={**os.environ, **QUIET_ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "n-clinets: unknown key; did you mean 'n-clients'?" in proc.stderr
    assert not (tmp_path / "h").exists()  # nothing was started
