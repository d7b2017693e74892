"""The repeated-release attack (``fedrr.audit._repeated_release``, Barber 2020 eq 3): a resampling
client leaks more with every query; fedrr's replaying client gives the server nothing after its
first release. ``simulations/repeated_release_attack.py`` is the script that reports it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import load_simulation
from flwr.app import Context, Message, RecordDict

import fedrr.audit._repeated_release as repeated_release
from fedrr.federation import MESSAGE_TYPE, query_content


@pytest.fixture(scope="module")
def att():
    return repeated_release


@pytest.fixture
def _task_identity():
    """Flower builds a Message's metadata from the process's TaskIdentity, which only a running
    app sets (as in test_federation.py)."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    if saved[1] is None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    yield
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


@pytest.mark.parametrize("k", [2, 4])
def test_resampler_posterior_concentrates_and_map_reaches_the_exact_accuracy(att, k):
    """ε = 0.5 RR: the mean posterior mass on the truth rises with every step of M, and at M = 50
    the MAP accuracy is the exact one (binomial for k = 2, multinomial for k = 4) within 4 Monte
    Carlo standard errors — far above one release's."""
    field = att.rr_field(f"RR k={k}", k, epsilon=0.5)
    n = 4000
    rows, checks = att.attack_offline(field, n, np.random.default_rng(7 + k))
    res = {r["M"]: r for r in rows if r["client"] == "resampler"}
    masses = [res[m]["mass_on_truth"] for m in att.M_GRID]
    assert all(b > a for a, b in zip(masses, masses[1:])), masses
    keep = field.mech.keep_prob
    exact50 = att.binary_exact_map_accuracy(keep, 50) if k == 2 else att.rr_exact_map_accuracy(k, keep, 50)
    exact1 = att.binary_exact_map_accuracy(keep, 1) if k == 2 else att.rr_exact_map_accuracy(k, keep, 1)
    assert exact1 == pytest.approx(keep, abs=1e-12)  # one report: the MAP is the report itself
    assert res[50]["map_accuracy_exact"] == pytest.approx(exact50, abs=1e-12)
    se = math.sqrt(exact50 * (1 - exact50) / n)
    assert res[50]["map_accuracy"] >= exact50 - 4 * se
    assert abs(res[50]["map_accuracy"] - exact50) <= 4 * se
    assert exact50 > exact1 + 0.3
    assert res[50]["epsilon_spent"] == pytest.approx(50 * 0.5)
    # eq 3 through mechanism.log_likelihood == the closed form softmax(log prior + ε·counts)
    assert checks["eq3_max_abs_diff"] < 1e-12
    rep = {r["M"]: r for r in rows if r["client"] == "replayer"}
    assert {rep[m]["map_accuracy"] for m in att.M_GRID} == {rep[1]["map_accuracy"]}
    assert {rep[m]["epsilon_spent"] for m in att.M_GRID} == {
        field.mech.epsilon
    } and field.mech.epsilon == pytest.approx(0.5)


def test_exact_map_accuracy_agrees_with_enumeration(att):
    """The multinomial dynamic programme against brute force over all k^M report sequences."""
    import itertools

    for k, keep, M in ((3, 0.5, 4), (4, 0.45, 5), (2, 0.8, 6)):
        other = (1 - keep) / (k - 1)
        total = 0.0
        for reps in itertools.product(range(k), repeat=M):
            counts = np.bincount(reps, minlength=k)
            p = keep ** counts[0] * other ** (M - counts[0])
            total += p * (counts[0] == counts.max()) / np.sum(counts == counts.max())
        assert att.rr_exact_map_accuracy(k, keep, M) == pytest.approx(total, abs=1e-12)


def test_laplace_eq3_matches_scipy_and_concentrates(att):
    field = att.laplace_field("Laplace", 1.0)
    rows, checks = att.attack_offline(field, 2000, np.random.default_rng(3))
    assert checks["eq3_max_abs_diff"] < 1e-12 and checks["replay_equals_first"]
    res = {r["M"]: r["mass_on_truth"] for r in rows if r["client"] == "resampler"}
    assert res[100] > 2 * res[1]


def test_replaying_client_gives_the_server_nothing_after_the_first_release(att, _task_identity):
    """fedrr's real ClientApp (called directly, its Context kept across messages as Flower keeps
    it), asked 100 times: byte-identical replies, and the server's exact posterior over every
    pixel and the label after M replies is array_equal to the one after the first."""
    from fedrr.assembly import build_population
    from fedrr.federation.client_app import app
    from fedrr.run_config import RunConfig

    cfg = {"dataset": "digits_7_vs_9", "n-clients": 4, "feature-flip": 0.3, "label-flip": 0.2, "seed": 5}
    ctx = Context(run_id=1, node_id=1, node_config={"partition-id": 2}, state=RecordDict(), run_config=cfg)
    xs, ys, blobs = [], [], set()
    for _ in range(100):
        q = Message(content=query_content(), dst_node_id=1, message_type=MESSAGE_TYPE, group_id="again")
        reply = app(q, ctx)
        arrays = reply.content.array_records["release"]
        blobs.add(b"".join(arrays[k].numpy().tobytes() for k in ("x", "y", "client_id", "mechanism_index")))
        assert arrays["client_id"].numpy().tolist() == [2]
        xs.append(arrays["x"].numpy()[0])
        ys.append(arrays["y"].numpy()[0])
    assert len(blobs) == 1
    mech = build_population(RunConfig.from_flwr(cfg)).mechanism(2)
    feat, lab = mech.mechanism_for(0), mech.label
    X = np.stack(xs).T  # (64 pixels, M)
    Y = np.array(ys)[None, :]  # (1, M)
    for field, reps in (
        (att.rr_field("pixel", feat.k, flip_prob=feat.flip_prob), X),
        (att.rr_field("label", lab.k, flip_prob=lab.flip_prob), Y),
    ):
        lp = att.posterior_replaying(field, reps)
        for m in range(reps.shape[1]):
            assert np.array_equal(lp[:, m], lp[:, 0])
        # a server that (wrongly) applies eq 3 to the replays grows confident, but in the released
        # value: its MAP guesses are those after one reply
        blind = att.posterior_independent(field, reps)
        assert np.array_equal(blind[:, -1].argmax(axis=1), blind[:, 0].argmax(axis=1))
    # a reply that differed would contradict the protocol
    with pytest.raises(ValueError, match="not a replaying client"):
        att.posterior_replaying(att.rr_field("label", 2, flip_prob=0.2), np.array([[0, 1]]))


def test_barbers_majority_rule_as_printed_is_unanimity(att):
    """Barber §1 prints the majority of three binary reports as I(c1 + c2 + c3 > 2); eq 3's MAP
    (uniform prior, f < ½) is I(c1 + c2 + c3 ≥ 2)."""
    field = att.rr_field("RR k=2", 2, flip_prob=0.2)
    patterns = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)])
    map3 = att.posterior_independent(field, patterns)[:, -1].argmax(axis=1)
    assert np.array_equal(map3, (patterns.sum(axis=1) >= 2).astype(int))
    assert not np.array_equal(map3, (patterns.sum(axis=1) > 2).astype(int))


def test_script_runs_offline(tmp_path):
    script = load_simulation("repeated_release_attack")
    assert script.main(["--quick", "--no-flower", "--out", str(tmp_path)]) == 0
    for name in ("repeated_release.md", "repeated_release.csv", "repeated_release.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert "Skipped (`--no-flower`)" in (tmp_path / "repeated_release.md").read_text()


def test_attack_through_a_flower_federation(tmp_path):
    """fedrr.audit._repeated_release_flower: a real simulated federation whose server asks every
    node 5 times; every check holds and the replayer's rows do not move with M."""
    from fedrr.audit import attack_federation

    cfg = {
        "dataset": "digits_7_vs_9",
        "n-clients": 3,
        "seed": 2,
        "results-dir": str(tmp_path),
        "run-name": "replay",
        "mechanism": "rr",
        "feature-flip": 0.3,
        "label-flip": 0.2,
    }
    rows, checks = attack_federation(cfg, 5, np.random.default_rng(0), m_grid=(1, 2, 5))
    assert checks["byte_identical"] and checks["equals_offline_release"] and checks["mechanism_unchanged"]
    assert checks["posterior_after_M_equals_after_1"] and checks["n_clients"] == 3
    for field in {r["field"] for r in rows}:
        rep = [r for r in rows if r["field"] == field and r["client"] == "replayer (Flower)"]
        assert [r["M"] for r in rep] == [1, 2, 5] and len({r["mass_on_truth"] for r in rep}) == 1
        assert {r["epsilon_spent"] for r in rep} == {rep[0]["epsilon_per_release"]}
        res = [r for r in rows if r["field"] == field and r["client"] == "resampler (offline)"]
        eps = rep[0]["epsilon_per_release"]
        assert [r["epsilon_spent"] for r in res] == pytest.approx([m * eps for m in (1, 2, 5)])
    assert {r["n_values"] for r in rows if "pixel" in r["field"]} == {3 * 64}
