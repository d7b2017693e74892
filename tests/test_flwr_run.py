"""``flwr run .`` on a local simulation SuperLink, through ``python -m fedrr.federation.flwr_cli``,
on a copy of the app (so flwr can never rewrite the repository's pyproject.toml). Checks the run
finished, its results landed where asked, and that nothing flwr started is left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fedrr._procs import _cmdline, _live_pids, alive, stop
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
        f"n-clients={N} min-valid={N} learners='spread,naive' spread-max-iter=100 "
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
        names = {p: " ".join(_cmdline(p))[:120] for p, _ in left | tracked}
        stop(left | tracked, timeout=10)  # clean up before failing, by pid
        assert not (left | tracked), f"left running: {names}"
        assert not alive(left | tracked)
    flwr_like = [
        p for p, _ in left if any(k in " ".join(_cmdline(p)) for k in ("flower-superlink", "flower-supernode", "flwr-"))
    ]
    assert not flwr_like
