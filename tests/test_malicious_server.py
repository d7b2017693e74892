"""A malicious server against fedrr's real ClientApp, in Flower's simulation engine (issue #7).

One federation of 8 one-record clients; the ServerApp is ``fedrr.testing.malicious_server`` (phases:
crafted first queries, crafted overrides and payloads, 20 repeats, out-of-protocol messages, a
final honest query), which records every reply in ``attack.json``. Clients must never release
twice, never apply anything the server sends, never answer anything but the release query, and
never send their clean record. The DiskLedger (deployment) must hold under concurrent first
queries; the deployment path through real SuperNodes is in ``test_federation_deploy.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from fedrr.assembly import build_population
from fedrr.federation import PROTOCOL, run_federation
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.release import offline_release, write_record_file
from fedrr.run_config import RunConfig
from fedrr.testing import malicious_server as ms

ROOT = Path(__file__).resolve().parents[1]
CFG = {
    "dataset": "digits_7_vs_9",
    "n-clients": 8,
    "n-test-per-class": 50,
    "feature-flip": 0.3,
    "label-flip": 0.2,
    "seed": 11,
    "node-wait-timeout": 60.0,
    "reply-timeout": 120.0,
}
RELEASE_ARRAYS = {"x", "y", "client_id", "mechanism_index"}


def _attack_sim():
    from fedrr.audit import _repeated_release as repeated_release

    return repeated_release


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    out = tmp_path_factory.mktemp("malicious")
    cfg = {**CFG, "results-dir": str(out), "run-name": "attack"}
    metrics = run_federation(cfg, server_app=ms.app)
    assert metrics["status"] == "done"
    result = json.loads((out / "attack" / ms.ATTACK_FILE).read_text())
    full = RunConfig.from_flwr(cfg)
    pop = build_population(full)
    honest = offline_release(pop, full.seed)
    by_client = {int(c): (honest.x[i], int(honest.y[i])) for i, c in enumerate(honest.client_id)}
    return result, pop, by_client


def _replies(result, phase=None):
    phases = [phase] if phase else list(result["phases"])
    return [r for p in phases for r in result["phases"][p]]


def _cid(reply) -> int:
    return int(reply["arrays"]["release/client_id"]["values"][0])


def _first_digest(result) -> dict[int, str]:
    """node → digest of its first reply; every first-phase reply of a node must agree."""
    out: dict[int, set] = {}
    for r in _replies(result, "first"):
        out.setdefault(r["node"], set()).add(r["digest"])
    assert all(len(v) == 1 for v in out.values()), out
    return {n: v.pop() for n, v in out.items()}


def test_every_message_reached_a_node_and_was_answered(attacked):
    result, _, _ = attacked
    nodes = result["nodes"]
    assert len(nodes) == CFG["n-clients"]
    assert all(v == [] for v in result["refused"].values()), result["refused"]
    expected = {
        "first": ms.FIRST_BURST,
        "crafted": len(ms.crafted_variants()),
        "repeat": ms.REPEATS,
        "out_of_protocol": len(ms.out_of_protocol_variants()),
        "final": 1,
    }
    for phase, per_node in expected.items():
        replies = result["phases"][phase]
        assert len(replies) == per_node * len(nodes), phase
        assert all(r["node"] == r["sent_to"] for r in replies)


def test_first_queries_crafted_still_give_the_honest_release(attacked):
    """The very first messages every node saw carried seed 123, ε = 1e6, flip 0, k = 2, other
    ledger paths, a planted release...: the release equals an honest server's for the run seed."""
    result, pop, honest = attacked
    crafted_seed = offline_release(pop, ms.OVERRIDES["seed"])
    for r in _replies(result, "first"):
        assert not r["error"], r.get("reason", "")[-300:]
        cid = _cid(r)
        x, y = np.asarray(r["arrays"]["release/x"]["values"]), r["arrays"]["release/y"]["values"]
        np.testing.assert_array_equal(x[0], honest[cid][0])
        assert y == [honest[cid][1]]
        assert not np.array_equal(
            x[0], crafted_seed.x[crafted_seed.client_id == cid][0]
        )  # the server's seed was not used
    assert {r["label"] for r in _replies(result, "first")} == {"everything"} | {
        f"overrides-{i}" for i in range(1, ms.FIRST_BURST)
    }


def test_crafted_configs_and_payloads_change_nothing(attacked):
    """Overrides in the query record, extra config / metric / array records: the reply is the
    node's one release, with the population's own mechanism (ε not raised, flips not zero)."""
    result, pop, _ = attacked
    first = _first_digest(result)
    for r in _replies(result, "first") + _replies(result, "crafted"):
        assert not r["error"]
        assert r["digest"] == first[r["node"]], (r["label"], r["node"])
        assert r["records"]["array"] == {"release": sorted(RELEASE_ARRAYS)}
        assert set(r["records"]["config"]) == {"meta"} and r["records"]["metric"] == {}
        meta = r["records"]["config"]["meta"]
        assert set(meta) == {"protocol", "mechanisms"} and meta["protocol"] == PROTOCOL
        specs = [json.loads(s) for s in json.loads(meta["mechanisms"])]
        mech = pop.mechanism(_cid(r))
        assert specs == [mech.to_spec()]
        assert RecordMechanism.from_spec(specs[0]).epsilon == mech.epsilon
    assert {r["label"] for r in _replies(result, "crafted")} == set(ms.crafted_variants())


def test_repeated_queries_replay_and_the_posterior_does_not_move(attacked):
    """20 repeats (and every other answered query): one byte-identical release per node; the
    server's exact posterior over every pixel and the label after all replies == after the first."""
    result, pop, _ = attacked
    first = _first_digest(result)
    per_node: dict[int, list] = {}
    for r in _replies(result):
        if not r["error"]:
            assert r["digest"] == first[r["node"]]
            per_node.setdefault(r["node"], []).append(r)
    assert all(len(v) == ms.FIRST_BURST + len(ms.crafted_variants()) + ms.REPEATS + 1 for v in per_node.values())
    att = _attack_sim()
    mech = pop.mechanism(0)
    feat, lab = mech.mechanism_for(0), mech.label
    X = np.stack(
        [np.stack([np.asarray(r["arrays"]["release/x"]["values"][0]) for r in v]) for v in per_node.values()]
    )  # (n, M, D)
    Y = np.stack([np.array([r["arrays"]["release/y"]["values"][0] for r in v]) for v in per_node.values()])  # (n, M)
    for field, reps in (
        (att.rr_field("pixel", feat.k, flip_prob=feat.flip_prob), X.transpose(0, 2, 1).reshape(-1, X.shape[1])),
        (att.rr_field("label", lab.k, flip_prob=lab.flip_prob), Y),
    ):
        lp = att.posterior_replaying(field, reps)
        assert all(np.array_equal(lp[:, m], lp[:, 0]) for m in range(lp.shape[1]))


def test_out_of_protocol_messages_get_errors_and_leave_no_trace(attacked):
    """train / evaluate / query.clean / query.record / ..., and query.release with a wrong or
    missing protocol version or query record: an error reply without content, refused at the
    door (never a failure half-way through releasing); afterwards the release is still the first."""
    result, _, _ = attacked
    for r in _replies(result, "out_of_protocol"):
        assert r["error"] and r["records"] is None, r["label"]
        assert ("expected a 'fedrr/1' release query" in r["reason"]) or (
            "function registered with name" in r["reason"]
        ), r["reason"][-300:]
    assert {r["label"] for r in _replies(result, "out_of_protocol")} == set(ms.out_of_protocol_variants())
    first = _first_digest(result)
    finals = _replies(result, "final")
    assert {r["node"] for r in finals} == set(first)
    assert all(not r["error"] and r["digest"] == first[r["node"]] for r in finals)


def test_no_reply_carries_the_clean_record(attacked):
    """Every array of every reply, against the clean data: only the protocol's arrays; no released
    row equals its clean row (chance: 0.7^64 per client); the fraction of changed pixels over the
    8 distinct releases is consistent with the flip probability 0.3 (not 0: no override applied)."""
    result, pop, _ = attacked
    clean = {c: pop.record(c) for c in range(pop.n_clients)}
    clean_rows = {v[0].tobytes() for v in clean.values()}
    distinct: dict[int, np.ndarray] = {}
    for r in _replies(result):
        if r["error"]:
            assert r["records"] is None
            continue
        assert set(r["arrays"]) == {f"release/{k}" for k in RELEASE_ARRAYS}
        x = np.asarray(r["arrays"]["release/x"]["values"], dtype=np.int64)
        assert r["arrays"]["release/x"]["shape"] == [1, 64] and r["arrays"]["release/y"]["shape"] == [1]
        cid = _cid(r)
        assert not np.array_equal(x[0], clean[cid][0])
        assert x[0].tobytes() not in clean_rows
        distinct[cid] = x[0]
    assert sorted(distinct) == list(range(CFG["n-clients"]))
    changed = sum(int(np.sum(distinct[c] != clean[c][0])) for c in distinct)
    n = 64 * len(distinct)
    lo, hi = binom.ppf(1e-6, n, CFG["feature-flip"]), binom.isf(1e-6, n, CFG["feature-flip"])
    assert lo <= changed <= hi, (changed, n, lo, hi)


# ------------------------------------------------------- the deployment ledger, concurrently
_CHILD = r"""
import hashlib, sys, time
from pathlib import Path
from flwr.app import Context, RecordDict
from fedrr.federation.client_app import answer
d, go = Path(sys.argv[1]), Path(sys.argv[2])
ctx = Context(run_id=1, node_id=1, node_config={"ledger-dir": str(d / "ledger"), "record-file": str(d / "record.npz")},
              state=RecordDict(), run_config={})
print("ready", flush=True)
while not go.exists():
    time.sleep(0.0005)
r = answer(ctx)
blob = b"".join(getattr(r, k).tobytes() for k in ("x", "y", "client_id", "mechanism_index"))
print(hashlib.sha256(blob).hexdigest(), flush=True)
"""


def test_concurrent_first_queries_on_a_deployment_node_release_once(tmp_path):
    """Regression: two queries handled at once by one deployment node (two ClientApp processes on
    one ``ledger-dir``) each found no ledger and sent a different fresh release (and could leave a
    corrupt ledger). With the ledger lock every process sends the one release the disk keeps."""
    import hashlib

    mech = RecordMechanism(RandomizedResponse(17, 0.2), RandomizedResponse(2, 0.1), n_features=64)
    write_record_file(tmp_path / "record.npz", np.arange(64) % 17, 1, mech, client_id=0)
    go = tmp_path / "go"
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for _ in range(4)
    ]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()[-2000:]
        go.touch()
        digests = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 0, err[-2000:]
            digests.append(out.strip())
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    with np.load(tmp_path / "ledger" / "fedrr-release.npz", allow_pickle=False) as f:
        disk = hashlib.sha256(
            b"".join(np.ascontiguousarray(f[k]).tobytes() for k in ("x", "y", "client_id", "mechanism_index"))
        ).hexdigest()
    assert set(digests) == {disk}, digests
    assert [
        p.name for p in (tmp_path / "ledger").iterdir() if p.name.startswith(".fedrr-release-")
    ] == []  # no temporary left
