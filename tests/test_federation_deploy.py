"""A real Flower deployment on 127.0.0.1: one ``flower-superlink`` and a few ``flower-supernode``
processes in deployment mode (``ledger-dir`` + ``record-file`` node config), the app started with
``flwr run`` (through ``fedrr.federation.flwr_cli``) twice. Every node must release its record
once, keep it on disk, and replay it byte-for-byte on the second run.

Every process is started here, tracked by pid (with its children) and stopped in the fixture's
teardown; the test fails if any of them is left."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")

from fedrr._procs import alive, descendants, free_port, stop  # noqa: E402
from fedrr.federation.flwr_cli import QUIET_ENV, flwr_run  # noqa: E402
from fedrr.mechanisms import RandomizedResponse, RecordMechanism  # noqa: E402
from fedrr.pool import Pool  # noqa: E402
from fedrr.population import build_population  # noqa: E402
from fedrr.release import write_record_file  # noqa: E402
from fedrr.run_config import RunConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
N_NODES = 5


class Processes:
    """Processes this test started; ``stop_all`` ends them and whatever they spawned, by pid."""

    def __init__(self, root: Path):
        self.root, self.procs, self.seen = root, [], set()

    def start(self, name: str, cmd: list[str], flwr_home: Path) -> subprocess.Popen:
        env = {
            **os.environ,
            **QUIET_ENV,
            "FLWR_HOME": str(flwr_home),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }  # they spawn flower-superexec by name
        flwr_home.mkdir(parents=True, exist_ok=True)
        log = open(self.root / f"{name}.log", "w")
        p = subprocess.Popen(cmd, cwd=flwr_home, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs.append(p)
        self.track()
        return p

    def track(self) -> None:
        for p in self.procs:
            self.seen |= descendants(p.pid)

    def stop_all(self) -> set:
        self.track()
        tops = {(p.pid, s) for p in self.procs for (pid, s) in self.seen if pid == p.pid}
        left = stop(tops, timeout=15)
        left |= stop(self.seen - tops, timeout=10)
        for p in self.procs:
            try:
                p.wait(timeout=5)  # reap
            except subprocess.TimeoutExpired:
                pass
        return alive(self.seen) | left

    def log(self, name: str) -> str:
        p = self.root / f"{name}.log"
        return p.read_text(errors="replace")[-3000:] if p.exists() else ""


def _wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "flower-superlink exited early"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"flower-superlink not healthy on 127.0.0.1:{port} after {timeout} s")


def _records(n: int):
    """n clean training rows of digits 7 vs 9 (classes alternating, so both labels are present)."""
    pop = build_population(RunConfig.from_flwr({"n-clients": 1000}))  # same seed/test split as the server's
    rows: dict[int, list] = {0: [], 1: []}
    for j in range(pop.n_train):
        x, y = pop.record(j)
        rows[y].append(x)
    return [(rows[i % 2][i // 2], i % 2) for i in range(n)]


@pytest.fixture
def deployment(tmp_path, app_copy):
    procs = Processes(tmp_path)
    mech = RecordMechanism(RandomizedResponse(17, 0.2), RandomizedResponse(2, 0.1), n_features=64)
    port = free_port()
    nodes = []
    try:
        sl = procs.start(
            "superlink",
            [
                str(BIN / "flower-superlink"),
                "--insecure",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--disable-runtime-dependency-installation",
            ],
            tmp_path / "superlink",
        )
        _wait_healthy(port, sl)
        for i, (x, y) in enumerate(_records(N_NODES)):
            d = tmp_path / f"node{i}"
            d.mkdir()
            rec = d / "record.npz"
            write_record_file(rec, x, y, mech, client_id=i)
            node_config = f"partition-id={i} ledger-dir='{d / 'ledger'}' record-file='{rec}'"
            procs.start(
                f"node{i}",
                [
                    str(BIN / "flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{port}",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(free_port()),
                    "--max-wait-time",
                    "120",
                    "--node-config",
                    node_config,
                ],
                d / "home",
            )
            nodes.append({"dir": d, "ledger": d / "ledger" / "fedrr-release.npz", "x": x, "y": y})
        yield {"port": port, "nodes": nodes, "procs": procs, "tmp": tmp_path, "app": app_copy}
    finally:
        left = procs.stop_all()
        assert not left, f"processes left running: {sorted(left)}"


def _run(dep, name: str) -> dict:
    res = flwr_run(
        dep["app"],
        superlink=f"127.0.0.1:{dep['port']}",
        flwr_home=dep["tmp"] / "cli-home",
        timeout=150,
        run_config={
            "n-clients": N_NODES,
            "min-valid": N_NODES,
            "learners": "naive",
            "node-wait-timeout": 60.0,
            "reply-timeout": 90.0,
            "results-dir": str(dep["tmp"] / "results"),
            "run-name": name,
        },
        log=lambda s: None,
    )
    dep["procs"].track()
    procs = dep["procs"]
    assert res["metrics"] is not None, (res["output"][-3000:], procs.log("superlink"), procs.log("node0"))
    assert res["metrics"]["status"] == "done", res["metrics"]
    return res


def _pool_arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


def test_real_superlink_and_supernodes_release_once_and_replay(deployment):
    dep = deployment
    first = _run(dep, "first")
    out1 = dep["tmp"] / "results" / "first"
    pool = Pool.load(out1 / "pool.npz")
    assert pool.n == N_NODES
    assert pool.client_id.tolist() == list(range(N_NODES))
    assert first["metrics"]["n_releases"] == N_NODES and first["metrics"]["dropped"] == {}
    mech = RecordMechanism(RandomizedResponse(17, 0.2), RandomizedResponse(2, 0.1), n_features=64)
    for i, node in enumerate(dep["nodes"]):
        assert node["ledger"].exists(), f"node {i} kept no ledger"
        with np.load(node["ledger"], allow_pickle=False) as led:
            assert led["client_id"].tolist() == [i]
            np.testing.assert_array_equal(pool.X[i], led["x"][0])
            assert pool.y[i] == led["y"][0]
        assert pool.mechanisms[i] == mech
        assert 0 <= pool.X[i].min() and pool.X[i].max() <= 16 and pool.y[i] in (0, 1)
    # a model needs both labels in the (noisy) pool; RR can flip them all with probability ~0.1^3
    if len(set(pool.y.tolist())) == 2:
        model = np.load(out1 / "model-naive.npz")
        assert model["coef"].shape == (1, 64)
    else:
        assert "error" in first["metrics"]["learners"]["naive"]

    ledgers = [n["ledger"].read_bytes() for n in dep["nodes"]]
    _run(dep, "second")  # the nodes must replay their ledger, not release again
    a, b = _pool_arrays(out1 / "pool.npz"), _pool_arrays(dep["tmp"] / "results" / "second" / "pool.npz")
    assert a.keys() == b.keys()
    for k in a:  # the .npz zip carries timestamps; the arrays in it must be byte-identical
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k
    assert [n["ledger"].read_bytes() for n in dep["nodes"]] == ledgers


@pytest.mark.slow  # ~60 s: a real SuperNode starts one ClientApp process per message (~10 s each on 2 cores)
def test_malicious_server_against_real_supernodes(deployment):
    """The malicious ServerApp of ``fedrr.testing.malicious_server``, shipped in the FAB, against real
    SuperNodes in deployment mode (DiskLedger, OS entropy). Each node's first message is a crafted
    release query (seed / ε / flip overrides, another ledger-dir and record-file, a planted
    release); then ``query.clean`` and a query without a protocol version; then an honest query.
    Every node releases once — what its ledger keeps — with its own mechanism, refuses the rest."""
    import json
    import tomllib

    import tomli_w

    from fedrr.testing import malicious_server as ms

    dep = deployment
    app = dep["app"]
    project = tomllib.loads((app / "pyproject.toml").read_text())
    project["tool"]["flwr"]["app"]["components"]["serverapp"] = "fedrr.testing.malicious_server:app"
    oop = ("query.clean", "protocol_missing")
    project["tool"]["flwr"]["app"]["config"].update(
        {"attack-burst": 1, "attack-repeats": 0, "attack-crafted": "none", "attack-oop": ",".join(oop)}
    )
    (app / "pyproject.toml").write_text(tomli_w.dumps(project))
    attacker_paths = {p: Path(ms.OVERRIDES[p]).exists() for p in ("ledger-dir", "record-file")}
    _run(dep, "attack")
    attack = json.loads((dep["tmp"] / "results" / "attack" / ms.ATTACK_FILE).read_text())
    assert all(v == [] for v in attack["refused"].values()), attack["refused"]
    mech = RecordMechanism(RandomizedResponse(17, 0.2), RandomizedResponse(2, 0.1), n_features=64)
    phases = attack["phases"]
    assert (
        len(phases["first"]) == len(phases["final"]) == N_NODES and len(phases["out_of_protocol"]) == len(oop) * N_NODES
    )
    first = {r["node"]: r for r in phases["first"]}
    for r in phases["first"] + phases["final"]:
        assert not r["error"], r.get("reason", "")[-500:]
        assert r["digest"] == first[r["node"]]["digest"]  # the crafted first query and the honest last one: one release
        cid = int(r["arrays"]["release/client_id"]["values"][0])
        node = dep["nodes"][cid]
        with np.load(node["ledger"], allow_pickle=False) as led:
            assert (
                r["arrays"]["release/x"]["values"] == led["x"].tolist()
                and r["arrays"]["release/y"]["values"] == led["y"].tolist()
            )
        assert [json.loads(s) for s in json.loads(r["records"]["config"]["meta"]["mechanisms"])] == [mech.to_spec()]
        assert set(r["arrays"]) == {"release/x", "release/y", "release/client_id", "release/mechanism_index"}
        assert (
            r["arrays"]["release/x"]["values"][0] != np.asarray(node["x"]).tolist()
        )  # never the clean row (chance 0.8^64)
    for r in phases["out_of_protocol"]:
        assert r["error"] and r["records"] is None, r["label"]
    assert {
        p: Path(ms.OVERRIDES[p]).exists() for p in attacker_paths
    } == attacker_paths  # the server's paths were not used
