"""A SuperNode killed mid-collection, after its release is on disk and before its reply left,
replays that release when it is restarted with the same node config and key; and a second
registered key started on the same ledger gets nothing — with the real TLS deployment of
tests/_deployment.py (real SuperLink, SuperNodes, ``flwr run``; no mocks).

How the moment is chosen, deterministically: the test holds node k's ledger lock (the
``flock`` its ClientApp takes before get-or-release); once that ClientApp waits for the lock
(``/proc/locks``) it holds the query, so the test freezes the SuperNode (SIGSTOP: it can forward
nothing, not even heartbeats), lets the lock go, waits until the ClientApp has written the ledger,
and SIGKILLs the node's whole process tree. The reply never reached the SuperLink.

What Flower 1.41 does then (read from its source, asserted here): the query is not delivered
again; once the node misses its heartbeats (2 × 30 s, ``HEARTBEAT_PATIENCE`` ×
``HEARTBEAT_DEFAULT_INTERVAL``) the SuperLink answers the ServerApp with a node-unavailable error
reply, so the first run ends without node k's release. Restarted with the same key the node gets
its old node id back (the key is registered once), and the next run pools the release its ledger
has kept since the kill, byte for byte."""

from __future__ import annotations

import fcntl
import os
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("httpx")

from _deployment import N_NODES, Deployment  # noqa: E402

from fedrr._procs import alive  # noqa: E402
from fedrr.pool import Pool  # noqa: E402

pytestmark = pytest.mark.slow  # ~5 min on 2 busy cores: two runs, and a 60 s heartbeat timeout in the first


@pytest.fixture
def deployment(tmp_path, app_copy):
    dep = Deployment(tmp_path, app_copy)
    try:
        dep.start()
        yield dep
    finally:
        left = dep.procs.stop_all()
        assert not left, f"processes left running: {sorted(left)}"


def _flock_waiters(path: Path) -> set[int]:
    """Pids blocked in ``flock`` on ``path`` (Linux ``/proc/locks``: ``N: -> FLOCK ... PID MAJ:MIN:INODE``)."""
    ino = str(path.stat().st_ino)
    pids = set()
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if len(f) > 6 and f[1] == "->" and f[2] == "FLOCK" and f[6].rsplit(":", 1)[-1] == ino:
            pids.add(int(f[5]))
    return pids


def _wait(cond, timeout: float, what: str, poll: float = 0.05):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(poll)
    return got


def _same_release(pool: Pool, i: int, ledger: Path) -> bool:
    """Pool row i is the ledger's release: x byte for byte (same dtype), the same label."""
    with np.load(ledger, allow_pickle=False) as f:
        x, y = f["x"][0], f["y"][0]
    return pool.X[i].dtype == x.dtype and pool.X[i].tobytes() == x.tobytes() and pool.y[i] == y


def test_killed_supernode_replays_its_ledger_after_restart_and_a_second_key_gets_nothing(deployment):
    dep = deployment
    k = 2
    node = dep.nodes[k]
    lock = node["dir"] / "ledger" / "fedrr-release.lock"
    lock.parent.mkdir(parents=True)
    executor = ThreadPoolExecutor(1)
    held = open(lock, "a+b")
    try:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        run1 = executor.submit(dep.run, "crash", **{"min-valid": N_NODES - 1, "reply-timeout": 240.0})
        tree = lambda: {pid for pid, _ in dep.procs.tree(f"node{k}")}  # noqa: E731
        waiter = _wait(
            lambda: (run1.done() and run1.result()) or (_flock_waiters(lock) & tree()),
            240,
            f"node {k}'s ClientApp to wait for its ledger lock",
        )
        assert not run1.done(), "the run ended before node k's ClientApp asked for its ledger"
        assert not node["ledger"].exists()
        os.kill(dep.procs.procs[f"node{k}"].pid, signal.SIGSTOP)  # the SuperNode can forward nothing now
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    finally:
        held.close()
    _wait(node["ledger"].exists, 120, f"node {k}'s ClientApp (pid {sorted(waiter)}) to write its ledger")
    on_disk = node["ledger"].read_bytes()
    victims = dep.procs.tree(f"node{k}")
    for pid, _ in alive(victims):
        os.kill(pid, signal.SIGKILL)  # the SuperNode, its SuperExec and the ClientApp
    _wait(lambda: not alive(victims), 30, "the killed processes to be gone")

    first = run1.result(timeout=400)  # ends when the SuperLink reports node k unavailable
    executor.shutdown()
    m1 = first["metrics"]
    assert m1["nodes_registered"] == N_NODES and m1["replies"] == N_NODES, m1
    assert m1["n_releases"] == N_NODES - 1 and m1["dropped"] == {"error_reply": 1}, m1
    pool1 = Pool.load(dep.tmp / "results" / "crash" / "pool.npz")
    assert sorted(pool1.client_id.tolist()) == [i for i in range(N_NODES) if i != k]
    assert node["ledger"].read_bytes() == on_disk

    # restart node k with the same node config and key; and a second registered key (a Sybil) on
    # node 0's ledger-dir and record
    dep.start_node(f"node{k}", node["config"], key=dep.creds.node_keys[k])
    (sybil_id,) = dep.register([dep.creds.node_public_keys[N_NODES + 1]])
    n0 = dep.nodes[0]
    sybil_cfg = dep.config(n0["dir"], 0, dep.creds.node_public_keys[N_NODES + 1])
    dep.start_node("sybil", sybil_cfg, key=dep.creds.node_keys[N_NODES + 1])
    ids = {*dep.node_ids, sybil_id}
    _wait(lambda: dep.listed_nodes() == {i: "online" for i in ids}, 180, "node k and the Sybil online", poll=2)
    ledger0 = n0["ledger"].read_bytes()
    assert re.findall(r"SuperNode ID: (\d+)", dep.procs.log(f"node{k}", tail=100_000)) == [str(dep.node_ids[k])] * 2

    second = dep.run("after-restart", **{"n-clients": N_NODES + 1, "min-valid": N_NODES})
    m2 = second["metrics"]
    assert m2["nodes_registered"] == N_NODES + 1 and m2["replies"] == N_NODES + 1, m2
    assert m2["n_releases"] == N_NODES and m2["dropped"] == {"error_reply": 1}, m2  # the Sybil's refusal
    pool2 = Pool.load(dep.tmp / "results" / "after-restart" / "pool.npz")
    assert pool2.client_id.tolist() == list(range(N_NODES))
    # node k: the release its ledger has kept since the kill, byte for byte; the ledger unchanged
    assert node["ledger"].read_bytes() == on_disk
    assert _same_release(pool2, k, node["ledger"])
    # the others replayed what they sent in the first run; node 0's ledger is untouched by the Sybil
    assert n0["ledger"].read_bytes() == ledger0
    for i in range(N_NODES):
        if i != k:
            j = pool1.client_id.tolist().index(i)
            assert pool2.X[i].tobytes() == pool1.X[j].tobytes() and pool2.y[i] == pool1.y[j]
            assert _same_release(pool2, i, dep.nodes[i]["ledger"])
    assert "holds the release of another node credential" in dep.procs.log("sybil", tail=20000)
