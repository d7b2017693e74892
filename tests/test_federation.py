"""The Flower federation end to end in a real Flower simulation (Ray backend): one-record clients
release once, the server validates, pools and trains; plus the protocol's boundary checks."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.serverapp import Grid, ServerApp

from fedrr.assembly import build_population, fit_options
from fedrr.errors import ValidationError
from fedrr.federation import (
    MESSAGE_TYPE,
    ServerSchema,
    parse_reply,
    query_content,
    release_content,
    run_federation,
    validate_replies,
)
from fedrr.federation.server_app import InsufficientReleases, model_arrays, run_server
from fedrr.learners import FitData, fit_and_score
from fedrr.pool import Pool, ReplyRejected
from fedrr.release import Release, client_generator, offline_release, release_clients
from fedrr.run_config import DEFAULTS, RunConfig
from fedrr.testing.faults import FAULT_KINDS, corrupt, faulty_client_app, reply_fault

ROOT = Path(__file__).resolve().parents[1]


class RecordingGrid(Grid):
    """A pass-through Grid that keeps every message the server sends and receives."""

    def __init__(self, inner: Grid):
        self.inner, self.sent, self.received = inner, [], []

    def set_run(self, run):
        self.inner.set_run(run)

    @property
    def run(self):
        return self.inner.run

    def create_message(self, *a, **k):
        return self.inner.create_message(*a, **k)

    def get_node_ids(self):
        return self.inner.get_node_ids()

    def push_messages(self, messages):
        messages = list(messages)
        self.sent.extend(messages)
        return self.inner.push_messages(messages)

    def pull_messages(self, message_ids):
        got = list(self.inner.pull_messages(message_ids))
        self.received.extend(got)
        return got

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        self.sent.extend(messages)
        got = list(self.inner.send_and_receive(messages, timeout=timeout))
        self.received.extend(got)
        return got


def _arrays_of(msg: Message) -> list[np.ndarray]:
    if msg.has_error():
        return []
    return [a.numpy() for rec in msg.content.array_records.values() for a in rec.values()]


BASE = {
    "dataset": "digits_7_vs_9",
    "n-clients": 60,
    "n-test-per-class": 50,
    "feature-flip": 0.3,
    "label-flip": 0.2,
    "learners": "spread,naive",
    "min-valid": 10,
    "seed": 11,
}


@pytest.fixture(scope="module")
def audited_run(tmp_path_factory):
    """One federation whose ServerApp records every message, then queries three clients 100 times."""
    out = tmp_path_factory.mktemp("fed")
    cfg = {**BASE, "results-dir": str(out), "run-name": "audited"}
    seen: dict = {}
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        rec = RecordingGrid(grid)
        seen["metrics"] = run_server(rec, RunConfig.from_flwr(context.run_config), log=lambda *_: None)
        nodes = sorted(grid.get_node_ids())[:3]
        repeats = {}
        for nid in nodes:
            msgs = [
                Message(content=query_content(), dst_node_id=nid, message_type=MESSAGE_TYPE, group_id="again")
                for _ in range(100)
            ]
            repeats[nid] = list(rec.send_and_receive(msgs, timeout=120))
        seen["repeats"] = repeats
        seen["sent"], seen["received"] = rec.sent, rec.received

    metrics = run_federation(cfg, server_app=app)
    return cfg, metrics, seen, out / "audited"


def test_pool_equals_offline_release_and_offline_fit(audited_run):
    cfg, metrics, seen, run_dir = audited_run
    full = RunConfig.from_flwr(cfg)
    pop = build_population(full)
    pool = Pool.load(run_dir / "pool.npz")
    off = offline_release(pop, full.seed)
    order = np.argsort(off.client_id)
    np.testing.assert_array_equal(pool.client_id, off.client_id[order])
    np.testing.assert_array_equal(pool.X, off.x[order])
    np.testing.assert_array_equal(pool.y, off.y[order])
    assert all(m == pop.mechanism(int(c)) for m, c in zip(pool.mechanisms, pool.client_id))
    assert metrics["n_releases"] == 60 and metrics["dropped"] == {}
    # the federated fit is the offline learner on the same releases (the same registry entry the
    # ServerApp uses, with the run config's options): same accuracy, same coefficients
    test = pop.test_set()
    data = FitData(off.x[order], off.y[order], pop.mechanism(0))
    for name in ("spread", "naive"):
        offline = fit_and_score(name, data, test, fit_options(full))
        assert metrics["learners"][name]["accuracy"] == pytest.approx(offline.entry["accuracy"], abs=1e-12), name
        model = np.load(run_dir / f"model-{name}.npz")
        np.testing.assert_allclose(model["coef"], offline.estimator.coef_, rtol=0, atol=1e-12)


def _pool_is_the_offline_release(cfg: dict, tmp_path, released: int, learners: tuple) -> dict:
    """Run the federation of ``cfg`` (60 clients, y all NaN, ``released`` columns a record) and check that
    its pool is the offline release bit for bit, every client's mechanism its own, nothing dropped and
    nothing flagged, and that ``learners`` fit it as they fit the offline release; its metrics."""
    cfg = {**cfg, "results-dir": str(tmp_path)}
    metrics = run_federation(cfg)
    full = RunConfig.from_flwr(cfg)
    pop = build_population(full)
    pool = Pool.load(tmp_path / cfg["run-name"] / "pool.npz")
    off = offline_release(pop, full.seed)
    order = np.argsort(off.client_id)
    np.testing.assert_array_equal(pool.client_id, off.client_id[order])
    assert pool.X.tobytes() == off.x[order].tobytes() and pool.y.tobytes() == off.y[order].tobytes()
    assert np.all(np.isnan(pool.y)) and np.all((~np.isnan(pool.X)).sum(axis=1) == released)
    assert all(m == pop.mechanism(int(c)) for m, c in zip(pool.mechanisms, pool.client_id))
    assert metrics["n_releases"] == 60 and metrics["dropped"] == {} and metrics["status"] == "done"
    assert metrics["record_epsilon"]["max"] == pytest.approx(2.0) and metrics["frequency_check"]["flagged"] is False
    data = FitData(off.x[order], off.y[order], pop.mechanism(0))
    for name in learners:  # the federated fit is the offline one on the same releases
        offline = fit_and_score(name, data, pop.test_set(), fit_options(full))
        assert metrics["learners"][name]["accuracy"] == pytest.approx(offline.entry["accuracy"], abs=1e-12), name
    return metrics


def test_a_paired_pool_equals_the_offline_release_bit_for_bit(tmp_path):
    """The paired release (mechanism "paired": 3 (attribute, label) pairs per client, y all NaN) crosses
    Flower, is validated and pooled exactly as released offline, with no default budget announced."""
    cfg = {**BASE, "dataset": "adult_binned", "mechanism": "paired", "feature-flip": "", "label-flip": ""}
    cfg |= {"feature-epsilon": 2.0, "n-sampled": 3, "n-clients": 60, "learners": "ldp-nb,majority,naive"}
    metrics = _pool_is_the_offline_release(cfg | {"run-name": "paired"}, tmp_path, 3, ("ldp-nb", "majority", "naive"))
    assert metrics["budget"]["defaults_used"] == {}


def test_a_triple_pool_equals_the_offline_release_bit_for_bit(tmp_path):
    """The triple release (mechanism "triple": one (attribute, attribute, label) report per client, in its
    two attributes' columns, y all NaN) crosses Flower, is validated, frequency-checked and pooled exactly
    as released offline, and the learners that take triples fit the pool as they do offline."""
    cfg = {**BASE, "dataset": "adult_binned", "mechanism": "triple", "feature-flip": "", "label-flip": ""}
    cfg |= {"feature-epsilon": 2.0, "n-clients": 60, "learners": "ldp-nb,majority"}
    _pool_is_the_offline_release(cfg | {"run-name": "triple"}, tmp_path, 2, ("ldp-nb", "majority"))


@pytest.mark.parametrize("name", ["naive", "majority", "ldp-nb"])
def test_the_server_saves_every_learners_model(name, tmp_path):
    """The ServerApp saved ``coef_``/``intercept_`` only: a run with learner "majority" or "ldp-nb"
    died with an AttributeError after its pool was collected and checked."""
    cfg = RunConfig.from_flwr({**BASE, "n-clients": 60})
    pop = build_population(cfg)
    res = fit_and_score(name, FitData(*_offline_xy(pop, cfg.seed), pop.mechanism(0)), pop.test_set(), fit_options(cfg))
    assert "error" not in res.entry
    np.savez(tmp_path / "model.npz", **model_arrays(res.estimator))
    model = np.load(tmp_path / "model.npz")
    np.testing.assert_array_equal(model["classes"], res.estimator.classes_)
    assert ("coef" in model) == (name == "naive") and ("class_prior" in model) == (name != "naive")


def _offline_xy(pop, seed):
    rel = offline_release(pop, seed)
    return rel.x, rel.y


def test_repeated_queries_replay_one_identical_release(audited_run):
    _, _, seen, run_dir = audited_run
    pool = Pool.load(run_dir / "pool.npz")
    for nid, replies in seen["repeats"].items():
        assert len(replies) == 100
        blobs = set()
        for r in replies:
            arrays = r.content.array_records["release"]
            blobs.add(b"".join(arrays[k].data for k in ("x", "y", "client_id", "mechanism_index")))
            cid = int(arrays["client_id"].numpy()[0])
            np.testing.assert_array_equal(arrays["x"].numpy()[0], pool.X[pool.client_id == cid][0])
        assert len(blobs) == 1, f"node {nid} answered with {len(blobs)} different releases"


def test_no_message_carries_a_clean_record(audited_run):
    cfg, _, seen, _ = audited_run
    pop = build_population(RunConfig.from_flwr(cfg))
    clean = {pop.record(c)[0].tobytes() for c in range(pop.n_clients)}
    assert len(seen["sent"]) >= 60 + 300 and len(seen["received"]) >= 60 + 300
    for msg in seen["sent"]:  # the server's queries hold the protocol version and nothing else
        assert list(msg.content.array_records) == []
        assert {k: dict(v) for k, v in msg.content.config_records.items()} == {"query": {"protocol": "fedrr/1"}}
    for msg in seen["received"]:
        assert set(msg.content.array_records) == {"release"} and set(msg.content.config_records) == {"meta"}
        assert set(msg.content.array_records["release"]) == {"x", "y", "client_id", "mechanism_index"}
        assert set(msg.content.config_records["meta"]) == {"protocol", "mechanisms"}
        x = msg.content.array_records["release"]["x"].numpy()
        for row in x:
            assert row.tobytes() not in clean


def test_dropout_malformed_and_mixed_budgets_are_counted(tmp_path):
    cfg = {
        **BASE,
        "n-clients": 100,
        "dropout": 0.1,
        "feature-flip": "",  # the budget mix sets the feature budgets: BASE's flip is left unset
        "budget-mix": "0.2:1,0.35:1",
        "learners": "spread,naive",
        "results-dir": str(tmp_path),
        "run-name": "faults",
    }
    metrics = run_federation(cfg, client_app=faulty_client_app(0.05))
    pop = build_population(RunConfig.from_flwr(cfg))
    absent = [c for c in range(100) if not pop.is_present(c)]
    kinds = tuple(FAULT_KINDS)
    faulty = {
        c: reply_fault(11, c, 0.05, kinds) for c in range(100) if pop.is_present(c) and reply_fault(11, c, 0.05, kinds)
    }
    assert 3 <= len(absent) <= 20 and 1 <= len(faulty) <= 12  # ~10 % and ~5 % of 100
    expected = {"dropped_out": len(absent)}
    for kind in faulty.values():
        expected[FAULT_KINDS[kind]] = expected.get(FAULT_KINDS[kind], 0) + 1
    assert metrics["dropped"] == expected
    assert metrics["n_releases"] == 100 - len(absent) - len(faulty)
    assert metrics["status"] == "done" and metrics["learners"]["spread"]["accuracy"] > 0.7
    pool = Pool.load(tmp_path / "faults" / "pool.npz")
    assert set(pool.client_id.tolist()) == set(range(100)) - set(absent) - set(faulty)
    flips = {round(m.fields[0].mechanism.flip_prob, 6) for m in pool.mechanisms}
    assert flips == {0.2, 0.35}
    assert all(m == pop.mechanism(int(c)) for m, c in zip(pool.mechanisms, pool.client_id))


def test_too_few_valid_releases_fail_clearly(tmp_path):
    cfg = {**BASE, "n-clients": 12, "dropout": 0.6, "min-valid": 10, "results-dir": str(tmp_path), "run-name": "few"}
    with pytest.raises(InsufficientReleases, match=r"only \d+ valid releases \(min-valid = 10\)"):
        run_federation(cfg)
    metrics = json.loads((tmp_path / "few" / "metrics.json").read_text())
    assert metrics["status"].startswith("failed") and metrics["dropped"]["dropped_out"] >= 3


# ------------------------------------------------------------------ the protocol, without Flower
@pytest.fixture(autouse=True)
def _server_identity(request):
    """Flower builds a new Message's metadata from the process's TaskIdentity, which only a running
    ServerApp sets; the protocol tests below make messages outside one."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    if saved[1] is None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    yield
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def _reply(content: RecordDict) -> Message:
    q = Message(content=query_content(), dst_node_id=1, message_type=MESSAGE_TYPE, group_id="t")
    return Message(content, reply_to=q)


def _good(pop, cid=0):
    return release_clients(pop, [cid], lambda c: client_generator(0, c))


@pytest.fixture(scope="module")
def pop():
    return build_population(RunConfig.from_flwr({**BASE, "n-clients": 10}))


def test_parse_reply_accepts_an_honest_release(pop):
    rel = _good(pop)
    back = parse_reply(_reply(release_content(rel)), 64, set(range(10)))
    np.testing.assert_array_equal(back.x, rel.x)
    assert back.client_id.tolist() == [0]


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_parse_reply_rejects_each_fault_with_its_reason(pop, kind):
    with pytest.raises(ReplyRejected) as exc:
        parse_reply(_reply(corrupt(release_content(_good(pop)), kind)), 64, set(range(10)))
    assert exc.value.reason == FAULT_KINDS[kind]


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_validate_replies_counts_a_fault_under_its_reason_in_any_order(pop, kind):
    """The schema is the server's own (the population's): a reply's reason does not depend on the
    order the replies came in, and a bad reply alone is rejected for the same reason."""
    schema = ServerSchema.of_population(pop)
    bad = _reply(corrupt(release_content(_good(pop, 0)), kind))
    good = [_reply(release_content(_good(pop, c))) for c in (1, 2)]
    for replies in ([bad, *good], [good[0], bad, good[1]], [*good, bad], [bad]):
        valid, reasons = validate_replies(replies, schema, 10)
        assert reasons == {FAULT_KINDS[kind]: 1}
        assert [int(v.client_id[0]) for v in valid] == [1, 2][: len(replies) - 1]


def _claiming(rel: Release, mech, x=None) -> Release:
    """The same reply, claiming ``mech`` (and optionally other release values)."""
    return Release(
        rel.x if x is None else x,
        rel.y,
        rel.client_id,
        np.zeros_like(rel.mechanism_index),
        (json.dumps(mech.to_spec(), sort_keys=True),),
    )


def test_first_reply_of_another_width_is_rejected_and_every_honest_reply_after_it_is_accepted(pop):
    """The width attack: a malicious first reply of another width used to set the pool's width, and
    every honest reply after it was rejected as wrong_shape. The server's width comes from its own
    population, so only the attacker's reply is lost."""
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    wide = RecordMechanism(RandomizedResponse(17, 0.3), RandomizedResponse(2, 0.2), n_features=65)
    attack = _claiming(_good(pop, 0), wide, x=np.zeros((1, 65)))
    replies = [_reply(release_content(attack))] + [_reply(release_content(_good(pop, c))) for c in range(1, 10)]
    valid, reasons = validate_replies(replies, ServerSchema.of_population(pop), 10)
    assert reasons == {"wrong_shape": 1}
    assert sorted(int(v.client_id[0]) for v in valid) == list(range(1, 10))


def test_misreport_of_a_nearly_noiseless_mechanism_is_rejected_with_its_reason(pop):
    """The mechanism-misreport attack: a client claims a far larger ε than its configured mechanism
    (so its crafted release would weigh like a clean record in every likelihood)."""
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    honest = _good(pop, 0)
    loud = RecordMechanism(RandomizedResponse(17, 1e-9), RandomizedResponse(2, 1e-9), n_features=64)
    replies = [_reply(release_content(_claiming(honest, loud)))] + [
        _reply(release_content(_good(pop, c))) for c in range(1, 10)
    ]
    valid, reasons = validate_replies(replies, ServerSchema.of_population(pop), 10)
    assert reasons == {"mechanism_misreport": 1}
    assert sorted(int(v.client_id[0]) for v in valid) == list(range(1, 10))
    with pytest.raises(ReplyRejected, match="claims a mechanism of record ε") as exc:
        ServerSchema.of_population(pop).check(_claiming(honest, loud), {})
    assert exc.value.reason == "mechanism_misreport"
    # deployments where clients choose their budgets: a declared limit, anything above it refused
    limit = ServerSchema(64, max_epsilon=pop.mechanism(0).epsilon)
    assert validate_replies(replies[:1], limit, 10)[1] == {"epsilon_above_limit": 1}
    assert len(validate_replies(replies[1:], limit, 10)[0]) == 9


def test_parse_reply_rejects_foreign_clients_and_huge_or_empty_arrays(pop):
    rel = _good(pop)
    with pytest.raises(ReplyRejected, match="unexpected_client"):
        parse_reply(_reply(release_content(rel)), 64, {5})
    empty = Release(
        np.zeros((0, 64), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), rel.mechanisms
    )
    with pytest.raises(ReplyRejected, match="wrong_shape"):
        parse_reply(_reply(release_content(empty)), 64, None)
    bad_y = RecordDict(
        {
            "release": ArrayRecord(
                {
                    "x": Array(rel.x),
                    "y": Array(np.array([7])),
                    "client_id": Array(rel.client_id),
                    "mechanism_index": Array(rel.mechanism_index),
                }
            ),
            "meta": ConfigRecord({"protocol": "fedrr/1", "mechanisms": json.dumps(list(rel.mechanisms))}),
        }
    )
    with pytest.raises(ReplyRejected, match="out_of_domain"):
        parse_reply(_reply(bad_y), 64, None)
    err = Message(content=query_content(), dst_node_id=1, message_type=MESSAGE_TYPE, group_id="t")
    from flwr.app import Error

    with pytest.raises(ReplyRejected, match="error_reply"):
        parse_reply(Message(Error(code=0, reason="boom"), reply_to=err), 64, None)


def test_pyproject_app_config_mirrors_the_defaults():
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert cfg["components"] == {
        "serverapp": "fedrr.federation.server_app:app",
        "clientapp": "fedrr.federation.client_app:app",
    }
    # the one documented difference: 2 cohorts of 50, so a bare `flwr run .` (2 SuperNodes) works
    assert cfg["config"] == {**DEFAULTS, "run-mode": "cohort", "cohort-size": 50}
    assert RunConfig.from_flwr(cfg["config"]).n_nodes == 2


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"run-mode": "swarm"}, "run-mode"),
        ({"cohort-size": 5}, "cohort-size"),
        ({"n-clients": 0}, "n-clients"),
        ({"executor": "gpu"}, "executor"),
        ({"wave-size": "big"}, "wave-size"),
        ({"seed": 1.5}, "seed"),
        ({"wdro-max-iter": -1}, "wdro-max-iter"),
    ],
)
def test_bad_run_config_names_the_key(bad, field):
    with pytest.raises(ValidationError) as exc:
        RunConfig.from_flwr(bad)
    assert exc.value.field == field


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"dataset": "imagenet"}, "dataset"),
        ({"mechanism": "exponential"}, "mechanism"),
        ({"feature-flip": 0.0}, "feature-flip"),
        ({"budget-mix": "0.2"}, "budget-mix"),
        ({"dropout": 1.0}, "dropout"),
        ({"population": "no_such_module:Pop"}, "population"),
        ({"mechanism": "rr", "dataset": "breast_cancer"}, "mechanism"),
    ],
)
def test_bad_population_config_names_the_key(bad, field):
    with pytest.raises(ValidationError) as exc:
        build_population(RunConfig.from_flwr({**BASE, **bad}))
    assert exc.value.field == field


def test_custom_population_by_import_path():
    pop = build_population(
        RunConfig.from_flwr({"population": "fedrr.examples:TwoBudgetSyntheticPopulation", "n-clients": 50, "seed": 3})
    )
    assert pop.n_clients == 50
    x, y = pop.record(7)
    assert x.shape == (pop.mechanism(7).n_features,) and y in (0, 1)
    assert {round(pop.mechanism(c).epsilon, 6) for c in range(50)} == {
        round(pop.mechanism(0).epsilon, 6),
        round(pop.mechanism(1).epsilon, 6),
    }


def test_cohort_nodes_host_many_clients_each_and_a_failed_solver_is_reported(tmp_path):
    """Cohort nodes, Gaussian releases, and W-DRO's solver stopped after one iteration (a real
    Clarabel failure): the failure is reported as the learner's error, the other learner's result
    and every file it wrote are kept."""
    cfg = {
        **BASE,
        "n-clients": 150,
        "run-mode": "cohort",
        "cohort-size": 40,
        "dropout": 0.1,
        "mechanism": "gaussian",
        "gaussian-noise": "per-feature",  # ε 2 per pixel (the joint default would spread ε 2 over all 64)
        "feature-flip": "",  # unset: BASE's flip is for rr
        "feature-epsilon": 2.0,
        "learners": "naive,wdro",
        "wdro-max-iter": 1,
        "results-dir": str(tmp_path),
        "run-name": "cohort",
    }
    metrics = run_federation(cfg)
    assert metrics["status"] == "done"
    assert metrics["learners"]["wdro"]["error"].startswith("ConvergenceError: ")
    assert "accuracy" not in metrics["learners"]["wdro"] and not (tmp_path / "cohort" / "model-wdro.npz").exists()
    assert 0.5 < metrics["learners"]["naive"]["accuracy"] <= 1 and (tmp_path / "cohort" / "model-naive.npz").exists()
    assert json.loads((tmp_path / "cohort" / "metrics.json").read_text())["learners"] == metrics["learners"]
    assert metrics["nodes_registered"] == 4  # 40 + 40 + 40 + 30 clients
    full = RunConfig.from_flwr(cfg)
    pop = build_population(full)
    off = offline_release(pop, full.seed)
    pool = Pool.load(tmp_path / "cohort" / "pool.npz")
    o = np.argsort(off.client_id)
    np.testing.assert_array_equal(pool.client_id, off.client_id[o])
    np.testing.assert_array_equal(pool.X, off.x[o])
    assert metrics["n_releases"] == sum(pop.is_present(c) for c in range(150)) and metrics["dropped"] == {}


def test_client_and_server_code_do_not_import_each_other():
    import subprocess
    import sys

    probe = (
        "import sys, importlib; importlib.import_module('fedrr.federation.{0}'); "
        "print(sorted(m for m in {1!r} if m in sys.modules))"
    )
    client = subprocess.run(
        [
            sys.executable,
            "-c",
            probe.format(
                "client_app", ["fedrr.estimators", "fedrr.federation.server_app", "fedrr.parallel", "cvxpy", "numba"]
            ),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    server = subprocess.run(
        [sys.executable, "-c", probe.format("server_app", ["fedrr.federation.client_app"])],
        capture_output=True,
        text=True,
        check=True,
    )
    assert client.stdout.strip() == "[]" and server.stdout.strip() == "[]"


@pytest.mark.parametrize("fault", ["nan_where_released", "value_where_not"])
def test_release_pattern_faults_of_a_sampled_release_are_rejected_with_their_reason(fault):
    """Attribute sampling: a release must carry exactly n_sampled whole fields, NaN elsewhere; a reply
    whose pattern does not match its mechanism is rejected as wrong_sampling, honest ones kept."""
    cfg = RunConfig.from_flwr({**BASE, "n-clients": 10, "n-sampled": 2})
    pop = build_population(cfg)
    rels = [_good(pop, c) for c in range(10)]
    x = rels[0].x.astype(float).copy()
    released = np.flatnonzero(~np.isnan(x[0]))
    if fault == "nan_where_released":
        x[0, released[0]] = np.nan
    else:
        x[0, np.flatnonzero(np.isnan(x[0]))[0]] = 3.0
    bad = Release(x, rels[0].y, rels[0].client_id, rels[0].mechanism_index, rels[0].mechanisms)
    replies = [_reply(release_content(r)) for r in [bad, *rels[1:]]]
    valid, reasons = validate_replies(replies, ServerSchema.of_population(pop), 10)
    assert reasons == {"wrong_sampling": 1}
    assert sorted(int(v.client_id[0]) for v in valid) == list(range(1, 10))
