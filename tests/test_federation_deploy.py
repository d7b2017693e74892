"""A real Flower deployment on 127.0.0.1 with TLS and SuperNode authentication: one
``flower-superlink`` (server certificate from ``fedrr credentials``, ``--enable-supernode-auth``),
five ``flower-supernode`` processes whose keys were registered with ``flwr supernode register``,
in deployment mode (``ledger-dir``, ``record-file``, ``node-public-key``); the app started with
``flwr run`` over TLS (through ``fedrr.federation.flwr_cli``) twice. Every node must release its
record once, keep it on disk, and replay it byte-for-byte on the second run; a SuperNode without
credentials, one with an unregistered key and one without TLS must get nothing.

Every process is started here, tracked by pid (with its children) and stopped in the fixture's
teardown; the test fails if any of them is left. (The deployment itself: tests/_deployment.py;
a SuperNode killed mid-collection: tests/test_federation_deploy_crash.py.)"""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("httpx")

from _deployment import MECH, N_NODES, Deployment, records  # noqa: E402

from fedrr.pool import Pool  # noqa: E402


@pytest.fixture
def deployment(tmp_path, app_copy):
    dep = Deployment(tmp_path, app_copy)
    try:
        dep.start()
        yield dep
    finally:
        left = dep.procs.stop_all()
        assert not left, f"processes left running: {sorted(left)}"


def _pool_arrays(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


_PLAIN_REQUEST = (
    b"POST /v1/fleet/register-node HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/protobuf\r\nContent-Length: 0\r\n\r\n"
)


def _ask(dep, tls: bool) -> bytes:
    """A Fleet API request, in plaintext or over TLS (verified with the CA); every byte the
    SuperLink sends back before it closes the connection (or 10 s pass)."""
    data = b""
    with socket.create_connection(("127.0.0.1", dep.port), timeout=10) as raw:
        s = dep.tls.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
        s.sendall(_PLAIN_REQUEST)
        try:
            while chunk := s.recv(4096):
                data += chunk
                if tls and b"\r\n\r\n" in data:
                    break
        except (TimeoutError, ConnectionResetError):
            pass
    return data


def test_tls_node_auth_lets_in_only_registered_nodes_which_release_once_and_replay(deployment):
    dep = deployment
    # (c) a plaintext client gets nothing: the SuperLink closes the connection without sending a
    # byte (no HTTP, no TLS alert), where the same request over TLS gets an HTTP answer (401:
    # the request carries no node signature)
    assert _ask(dep, tls=False) == b""
    assert _ask(dep, tls=True).startswith(b"HTTP/1.1 401 ")
    # three strangers, each with a valid record and its own ledger-dir, started with the nodes
    strangers = {}
    for j, (name, key, tls) in enumerate(
        [
            ("no-credentials", None, True),  # (a) TLS, no key: asks to self-register
            ("unregistered", dep.creds.node_keys[N_NODES], True),  # (b) a key nobody registered
            ("plaintext", None, False),  # (c) a SuperNode without TLS
        ]
    ):
        x, y = records(1)[0]
        d = dep.node_dir(name, x, y, client_id=j)
        pub = dep.creds.node_public_keys[N_NODES] if key is not None else None
        strangers[name] = (dep.start_node(name, dep.config(d, j, pub), key=key, tls=tls, max_wait=20), d)

    first = dep.run("first")
    out1 = dep.tmp / "results" / "first"
    m = first["metrics"]
    # the ServerApp saw exactly the registered nodes (grid.get_node_ids()), and all of them answered
    assert m["nodes_registered"] == N_NODES and m["replies"] == N_NODES
    assert m["n_releases"] == N_NODES and m["dropped"] == {}
    pool = Pool.load(out1 / "pool.npz")
    assert pool.n == N_NODES
    assert pool.client_id.tolist() == list(range(N_NODES))
    for i, node in enumerate(dep.nodes):
        assert node["ledger"].exists(), f"node {i} kept no ledger"
        with np.load(node["ledger"], allow_pickle=False) as led:
            assert led["client_id"].tolist() == [i]
            np.testing.assert_array_equal(pool.X[i], led["x"][0])
            assert pool.y[i] == led["y"][0]
            assert str(led["credential"]).startswith("SHA256:")  # keyed by the node's credential
        assert pool.mechanisms[i] == MECH
        assert 0 <= pool.X[i].min() and pool.X[i].max() <= 16 and pool.y[i] in (0, 1)
    # a model needs both labels in the (noisy) pool; RR can flip them all with probability ~0.1^3
    if len(set(pool.y.tolist())) == 2:
        model = np.load(out1 / "model-naive.npz")
        assert model["coef"].shape == (1, 64)
    else:
        assert "error" in first["metrics"]["learners"]["naive"]

    ledgers = [n["ledger"].read_bytes() for n in dep.nodes]
    second = dep.run("second")  # the nodes must replay their ledger, not release again
    assert second["metrics"]["nodes_registered"] == N_NODES and second["metrics"]["dropped"] == {}
    a, b = _pool_arrays(out1 / "pool.npz"), _pool_arrays(dep.tmp / "results" / "second" / "pool.npz")
    assert a.keys() == b.keys()
    for k in a:  # the .npz zip carries timestamps; the arrays in it must be byte-identical
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k
    assert [n["ledger"].read_bytes() for n in dep.nodes] == ledgers

    # the SuperLink's own list (Control API): the registered nodes, online; no stranger
    assert dep.listed_nodes() == {nid: "online" for nid in dep.node_ids}
    expected_log = {
        "no-credentials": ("[code: 2001] SuperNode authentication is enabled",),  # Fleet RegisterNode refused
        "unregistered": ("[code: 2004] Failed to activate SuperNode",),  # Fleet ActivateNode refused
        # a TLS listener drops a plaintext request: either it closes without an HTTP answer, or the
        # client's read sees the reset first (both seen on 2 cores); retried until max-wait either way
        "plaintext": ("Server disconnected without sending a response", "Connection reset by peer"),
    }
    for name, (p, d) in strangers.items():
        p.wait(timeout=90)
        log = dep.procs.log(name)
        assert p.returncode == 1 and "Exit Code: 305" in log and any(e in log for e in expected_log[name]), (
            name,
            log,
        )
        assert not (d / "ledger").exists(), name  # no query ever reached it: it never released


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
    app = dep.app
    project = tomllib.loads((app / "pyproject.toml").read_text())
    project["tool"]["flwr"]["app"]["components"]["serverapp"] = "fedrr.testing.malicious_server:app"
    oop = ("query.clean", "protocol_missing")
    project["tool"]["flwr"]["app"]["config"].update(
        {"attack-burst": 1, "attack-repeats": 0, "attack-crafted": "none", "attack-oop": ",".join(oop)}
    )
    (app / "pyproject.toml").write_text(tomli_w.dumps(project))
    attacker_paths = {p: Path(ms.OVERRIDES[p]).exists() for p in ("ledger-dir", "record-file")}
    dep.run("attack")
    attack = json.loads((dep.tmp / "results" / "attack" / ms.ATTACK_FILE).read_text())
    assert all(v == [] for v in attack["refused"].values()), attack["refused"]
    mech = MECH
    phases = attack["phases"]
    assert (
        len(phases["first"]) == len(phases["final"]) == N_NODES and len(phases["out_of_protocol"]) == len(oop) * N_NODES
    )
    first = {r["node"]: r for r in phases["first"]}
    for r in phases["first"] + phases["final"]:
        assert not r["error"], r.get("reason", "")[-500:]
        assert r["digest"] == first[r["node"]]["digest"]  # the crafted first query and the honest last one: one release
        cid = int(r["arrays"]["release/client_id"]["values"][0])
        node = dep.nodes[cid]
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
