"""A real multi-process Ray cluster on this machine: a head node and a second worker node
(`ray start`), joined through RAY_ADDRESS. Spread-EM's shard actors on the cluster give the
serial fit, also when they read their rows from a pool directory (``fit_pool``), and a Flower
simulation attaches to the cluster (no resource arguments, which made run_simulation hang) and
trains with the Ray executor. Every Ray process the test started is stopped by pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from fedrr.estimators import SpreadLogisticRegression  # noqa: E402
from fedrr.parallel import RayExecutor, SerialExecutor  # noqa: E402

RAY = str(Path(sys.executable).with_name("ray"))
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pids_with(marker: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker in (p / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(p.name))
            except OSError:
                pass
    return [p for p in out if p != os.getpid()]


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def ray_cluster():
    if ray.is_initialized():
        ray.shutdown()
    temp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths have a length limit
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp}"]
    try:
        _run(
            [
                RAY,
                "start",
                "--head",
                f"--port={port}",
                "--node-ip-address=127.0.0.1",
                "--include-dashboard=false",
                f"--ray-client-server-port={_free_port()}",
                *common,
            ]
        )
        _run([RAY, "start", f"--address={address}", "--node-ip-address=127.0.0.1", *common])
        os.environ["RAY_ADDRESS"] = address
        yield address, temp
    finally:
        os.environ.pop("RAY_ADDRESS", None)
        if ray.is_initialized():
            ray.shutdown()
        pids = _pids_with(temp)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + 20
        while time.time() < deadline and _pids_with(temp):
            time.sleep(0.5)
        for pid in _pids_with(temp):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        assert _pids_with(temp) == [], "Ray processes of the test cluster were left running"


def test_cluster_has_two_nodes_and_estep_equals_serial(ray_cluster, small_rr_release):
    address, _ = ray_cluster
    Xt, yt, rm = small_rr_release
    kw = dict(random_state=5, max_iter=6, shard_size=500)
    ex = RayExecutor()  # joins through RAY_ADDRESS
    try:
        par = SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=rm)
        nodes = [nd for nd in ray.nodes() if nd["Alive"]]
        assert len(nodes) == 2 and sum(nd["Resources"].get("CPU", 0) for nd in nodes) == 2
    finally:
        ex.shutdown()
        if ray.is_initialized():
            ray.shutdown()
    ser = SpreadLogisticRegression(executor=SerialExecutor(), **kw).fit(Xt, yt, mechanism=rm)
    np.testing.assert_array_equal(par.coef_, ser.coef_)
    np.testing.assert_array_equal(par.intercept_, ser.intercept_)


def test_fit_pool_on_the_cluster_reads_rows_in_the_actors_and_equals_fit(ray_cluster, small_rr_release, tmp_path):
    """Two actors of one CPU on two nodes of one CPU: one per node. Each reads its rows from the
    pool directory (the same path on both nodes here), and the fit equals the serial one."""
    from fedrr.pool import Pool

    Xt, yt, rm = small_rr_release
    Pool(Xt, yt, np.arange(len(yt)), [rm] * len(yt)).save(tmp_path / "pool", layout="dir")
    kw = dict(random_state=5, max_iter=6, burn_in=3, shard_size=500)
    ex = RayExecutor(n_actors=2)
    try:
        par = SpreadLogisticRegression(executor=ex, **kw).fit_pool(tmp_path / "pool")
    finally:
        ex.shutdown()
        if ray.is_initialized():
            ray.shutdown()
    ser = SpreadLogisticRegression(executor=SerialExecutor(), **kw).fit(Xt, yt, mechanism=rm)
    np.testing.assert_array_equal(par.coef_, ser.coef_)
    np.testing.assert_array_equal(par.intercept_, ser.intercept_)
    assert par.traffic_["release_counts up"] > 0 and par.shard_restarts_ == 0


@pytest.mark.slow  # ~80 s: a Flower simulation placed on the two-node cluster (make test-slow)
def test_flower_simulation_on_the_cluster_with_ray_executor(ray_cluster, tmp_path):
    from fedrr.federation import backend_config, run_federation

    assert "num_cpus" not in backend_config()["init_args"]  # attached to a cluster: no resource args
    metrics = run_federation(
        {
            "dataset": "digits_7_vs_9",
            "n-clients": 24,
            "min-valid": 20,
            "learners": "spread",
            "executor": "ray",
            "results-dir": str(tmp_path),
            "run-name": "cluster",
            "seed": 2,
        }
    )
    assert metrics["status"] == "done" and metrics["n_releases"] == 24
    assert metrics["learners"]["spread"]["accuracy"] > 0.7
    if ray.is_initialized():
        ray.shutdown()
