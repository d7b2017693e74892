"""LDP-SGD in its one-release form (Wang et al., ICDE 2019, §V): each client's one gradient release is
bounded and replayed, the aggregate is unbiased, the offline protocol (``GradientClients`` answering
``LDPSGDClassifier``) equals a real Flower run for a seed, it learns at large ε and falls back to the
intercept-only model at tiny ε; the formulas the protocol takes from the paper are checked numerically."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from flwr.app import Context, Message, MessageType, RecordDict

from fedrr import gradient_release as G
from fedrr.errors import ValidationError
from fedrr.estimators import LDPSGDClassifier, ldp_sgd_design
from fedrr.estimators import _ldp_sgd as L
from fedrr.examples import TwoBudgetSyntheticPopulation as TwoBudget
from fedrr.federation import _ldp_sgd_client as client
from fedrr.federation import content_release, release_content
from fedrr.federation._ldp_sgd_protocol import content_query, parse_answer, query_content
from fedrr.gradient_release import GradientClients
from fedrr.learners import FitData, FitOptions, fit_and_score
from fedrr.mechanisms import PiecewiseMechanism, RandomizedResponse, RecordMechanism
from fedrr.pool import ReplyRejected
from fedrr.release import write_record_file
from fedrr.run_config import RunConfig

POP = "fedrr.examples:TwoBudgetSyntheticPopulation"


def _task(n: int, seed: int = 0, D: int = 4):
    """Numeric features in [−1, 1], a logistic label with a clear signal."""
    rng = np.random.default_rng(seed)
    w = np.array([3.0, -3.5, 1.0, -1.0, 0.5, 0.0][:D])
    X = rng.uniform(-1, 1, (n, D))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ w - 0.7)))).astype(int)
    return X, y


def _fit(X, y, epsilon=1.0, *, seed=0, client_ids=None, classes=None, **params) -> LDPSGDClassifier:
    """The offline protocol: the clients (noise seeded by ``seed``) answer the server (shuffle seeded by it too)."""
    clients = GradientClients(X, y, epsilon, client_ids=client_ids, classes=classes, seed=seed)
    return LDPSGDClassifier(random_state=seed, **params).fit(clients)


# ------------------------------------------------------------------------------ formulas
def test_sampling_rule_and_worst_case_variance_match_the_paper_and_monte_carlo():
    """m = max(1, min(d, ⌊ε/2.5⌋)) (Algorithm 4); PM's Var[t̃ | t] = t²/(e^{ε/2} − 1) + (e^{ε/2} + 3)/(3(e^{ε/2} − 1)²)
    (Wang et al. Lemma 1) within the snapping's cell rounding; the scaled coordinate's worst-case variance
    (PM at t = ±1, Duchi at t = 0) by Monte Carlo."""
    assert [G.n_sampled_rule(e, 10) for e in (0.5, 2.4, 2.5, 5, 7.4, 8, 30, 100)] == [1, 1, 1, 2, 2, 3, 10, 10]
    rng = np.random.default_rng(1)
    for eps in (1.0, 4.0):
        r = math.exp(eps / 2)
        for t in (0.0, 0.5, 1.0):
            v = PiecewiseMechanism(eps).release(np.full(200_000, t), rng)
            paper = t * t / (r - 1) + (r + 3) / (3 * (r - 1) ** 2)
            assert abs(v.mean() - t) < 5 * v.std() / math.sqrt(v.size)
            assert v.var() == pytest.approx(paper, rel=0.02)
    for mech, t in (("piecewise", 1.0), ("duchi", 0.0)):
        rm = G.query_mechanism(mech, 8.0, 12, None, 1.0)
        R, _ = rm.release(np.full((100_000, 12), t), rng=rng)
        est = 12 / rm.n_sampled * np.nan_to_num(R)
        assert est.var(axis=0).mean() == pytest.approx(L.coordinate_variance(rm), rel=0.03)
        assert rm.n_sampled == 3 and rm.epsilon <= 8.0 and rm.epsilon == pytest.approx(8.0, rel=1e-6)


def test_group_size_rule_is_d_log_d_over_eps_squared():
    """G* = ⌈2 v ln(2d/β)⌉ grows as d log d / ε² (m = 1): ×4 for ε/2 at small ε, ~×d log d in d."""
    g = {}
    for eps in (0.1, 0.2):
        for d in (10, 100):
            v = L.coordinate_variance(G.query_mechanism("piecewise", eps, d, None, 1.0))
            g[eps, d] = 2 * v * math.log(2 * d / L.BETA)
    assert g[0.1, 10] / g[0.2, 10] == pytest.approx(4, rel=0.05)
    assert g[0.1, 100] / g[0.1, 10] == pytest.approx(10 * math.log(4000) / math.log(400), rel=0.02)


# ------------------------------------------------------------------------- client releases
@pytest.mark.parametrize("mechanism", ["piecewise", "duchi"])
def test_each_release_is_bounded_and_carries_m_coordinates(mechanism):
    X, y = _task(40)
    Z = G.encode(X, np.zeros(4, int))
    theta = np.array([[0.3, 2.0, -1.0, 0.5, 0.1]])
    for kind, eps, clip in (("gradient", 2.0, 0.5), ("gradient", 9.0, 1.0), ("intercept", 2.0, 1.0), ("check", 1.0, 1)):
        q = G.Query(kind, 0, theta, theta * 0 if kind == "check" else None)
        for i in range(40):
            x, rm = G.client_answer(q, Z[i], y[i], eps, np.random.default_rng(i), mechanism=mechanism, clip=clip)
            rm.validate_release(x[None])  # cell midpoints (PM) or ±B (Duchi), exactly m coordinates
            mech = rm.fields[0].mechanism
            reach = mech.C if mechanism == "piecewise" else mech.B
            bound = clip if kind == "gradient" else 1.0
            assert np.nanmax(np.abs(x)) <= reach * bound * (1 + 1e-12)
            assert np.sum(~np.isnan(x)) == rm.n_sampled == G.n_sampled_rule(eps, x.size)
            assert rm.epsilon <= eps


# ------------------------------------------------------------------------- the clients' side
def test_clients_answer_only_the_group_asked_each_from_its_own_record_and_generator():
    """A group's answers come back in the order asked, each the client's own ``client_answer`` with
    ``client_generator(seed, id)`` (byte for byte); nobody else releases, and nobody releases twice."""
    from fedrr.release import client_generator

    X, y = _task(30)
    ids = np.arange(30) * 2 + 5
    clients = GradientClients(X, y, 3.0, client_ids=ids, seed=11)
    q = G.Query("gradient", 1, np.array([[0.3, 2.0, -1.0, 0.5, 0.1]]))
    group = [ids[7], ids[2], ids[20]]
    got = clients.answer(q, group, mechanism="duchi", clip=0.5)
    assert got.x.shape == (3, 5) and got.epsilon.shape == (3,) and len(got.mechanisms) == 3
    Z = G.encode(X, np.zeros(4, int))
    for row, (i, cid) in enumerate(zip([7, 2, 20], group)):
        x, _ = G.client_answer(q, Z[i], y[i], 3.0, client_generator(11, cid), mechanism="duchi", clip=0.5)
        assert got.x[row].tobytes() == x.tobytes()
    assert np.flatnonzero(clients.released).tolist() == [2, 7, 20]
    with pytest.raises(ValidationError, match="already released") as exc:
        clients.answer(q, [ids[0], ids[2]])
    assert exc.value.field == "client_ids" and np.flatnonzero(clients.released).tolist() == [2, 7, 20]
    empty = clients.answer(G.Query("intercept", 0, np.zeros((1, 5))), [])
    assert empty.x.shape == (0, 1) and empty.epsilon.shape == (0,)


def test_clients_report_each_ones_realised_epsilon():
    """Each client's realised ε is its mechanism's own accounting: at most its budget, within 1e-6 of it;
    a deployed node's clients (seed None) draw from OS entropy."""
    X, y = _task(12, seed=1)
    eps = np.array([0.5, 1.0, 2.0, 8.0] * 3)
    clients = GradientClients(X, y, eps, seed=0)
    q = G.Query("check", 9, np.ones((1, 5)), np.zeros((1, 5)))
    got = clients.answer(q, np.arange(12), n_states=[0, 0, 0, 0])
    assert np.all(got.epsilon <= eps) and np.allclose(got.epsilon, eps, rtol=1e-6)
    assert [m.epsilon for m in got.mechanisms] == got.epsilon.tolist()
    a, b = (GradientClients(X, y, 8.0).answer(q, np.arange(12)) for _ in range(2))
    assert a.x.tobytes() != b.x.tobytes()


def test_clients_refuse_bad_input_naming_the_field():
    X, y = _task(20)
    q = G.Query("gradient", 1, np.zeros((1, 5)))
    ok = {"epsilon": 1.0, "seed": 0}
    built = [
        ({"X": np.r_[X[:19], [[np.nan] * 4]]}, "X"),
        ({"X": X[:, 0]}, "X"),
        ({"X": X[:0], "y": y[:0]}, "X"),
        ({"y": y[:19]}, "y"),
        ({"y": y + 0.5}, "y"),
        ({"y": np.zeros(20)}, "y"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": np.ones(3)}, "epsilon"),
        ({"epsilon": np.full(20, np.inf)}, "epsilon"),
        ({"client_ids": np.arange(20)[::-1]}, "client_ids"),
        ({"client_ids": np.arange(20) + 2**40}, "client_ids"),
        ({"classes": [0, 2]}, "classes"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
    ]
    for bad, field in built:
        kw = {"X": X, "y": y, **ok, **bad}
        with pytest.raises(ValidationError) as exc:
            GradientClients(kw.pop("X"), kw.pop("y"), kw.pop("epsilon"), **kw)
        assert exc.value.field == field, (bad, exc.value)
    clients = GradientClients(X, y, 1.0, seed=0)
    asked = [
        ((q, [25]), {}, "client_ids"),
        ((q, [1, 1]), {}, "client_ids"),
        ((q, [1.0]), {}, "client_ids"),
        ((G.Query("gradient", 1, np.zeros((1, 4))), [1]), {}, "query"),
        ((G.Query("check", 1, np.zeros((1, 5))), [1]), {}, "query"),
        ((G.Query("sgd", 1, np.zeros((1, 5))), [1]), {}, "query"),
        ((q, [1]), {"n_states": [3, 0]}, "n_states"),
        ((q, [1]), {"n_states": [2, 0, 0, 0]}, "X"),
        ((q, [1]), {"mechanism": "gauss"}, "mechanism"),
        ((q, [1]), {"n_sampled": 0}, "n_sampled"),
        ((q, [1]), {"clip": 0.0}, "clip"),
    ]
    for args, kw, field in asked:
        with pytest.raises(ValidationError) as exc:
            clients.answer(*args, **kw)
        assert exc.value.field == field, (args, kw, exc.value)
    assert not clients.released.any()  # a refused query releases nothing


@pytest.mark.parametrize("mechanism, eps", [("piecewise", 1.0), ("duchi", 1.0), ("piecewise", 8.0)])
def test_aggregated_gradient_is_unbiased(mechanism, eps):
    """The server's step with η = 1, no penalty: θ_0 − θ_1 is its averaged gradient; over 400 groups its
    mean is the clients' mean clipped gradient within 4.5 standard errors, every coordinate."""
    X, y = _task(300, seed=3)
    Z = G.encode(X, np.zeros(4, int))
    theta = np.array([[0.2, 1.5, -0.5, 0.0, 2.5]])
    P = 1 / (1 + np.exp(-(Z @ theta[0])))
    truth = np.clip((P - y)[:, None] * Z, -0.8, 0.8).mean(axis=0)
    plan = [("intercept", np.arange(0)), ("gradient", np.arange(300))]
    rng = np.random.default_rng(7)
    steps = []
    for _ in range(400):
        server = L.LDPSGDServer(2, 4, 300, 5.0, plan, learning_rate=1.0, C=math.inf)
        server.theta = theta.copy()
        rm = G.query_mechanism(mechanism, eps, 5, None, 0.8)
        grads = np.clip((P - y)[:, None] * Z, -0.8, 0.8)
        server.update(1, rm.release(grads, rng=rng)[0])  # one client per row (a batch draws the same law)
        steps.append((theta - server.theta)[0])
    steps = np.array(steps)
    z = (steps.mean(axis=0) - truth) / (steps.std(axis=0, ddof=1) / math.sqrt(len(steps)))
    assert np.all(np.abs(z) < 4.5), z


# ------------------------------------------------------------------------------- ledger
@pytest.fixture
def identity():
    """Flower builds a Message's metadata from the process's TaskIdentity, which a running app sets."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    if saved[1] is None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    yield
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def _msg(q: G.Query, kind=MessageType.TRAIN) -> Message:
    return Message(content=query_content(q), dst_node_id=1, message_type=kind, group_id="t")


def _reply_bytes(reply: Message) -> tuple:
    rel = content_release(reply.content)
    return tuple(np.ascontiguousarray(a).tobytes() for a in (rel.x, rel.y, rel.client_id)) + rel.mechanisms


def test_a_node_releases_once_and_replays_it_for_any_later_query(tmp_path, identity):
    """Simulation (Context.state) and deployment (DiskLedger, also across a restart): a second query
    with another model, and the check query, get the first release back byte for byte; the server
    rejects the replay as stale, and accepts the original."""
    cfg = RunConfig.from_flwr({"population": POP, "n-clients": 6, "protocol": "ldp-sgd"}).to_flwr()
    rm = RecordMechanism(RandomizedResponse(4, 0.3), RandomizedResponse(2, 0.2), n_features=5)
    write_record_file(tmp_path / "rec.npz", np.array([1, 0, 3, 2, 1]), 1, rm, client_id=4)
    deployed = {"record-file": str(tmp_path / "rec.npz"), "ledger-dir": str(tmp_path / "ledger")}
    n_states, K = ldp_sgd_design(rm)
    shape = (K - 1, 1 + int(np.sum(n_states - 1)))
    qa, qb = G.Query("gradient", 3, np.full(shape, 0.1)), G.Query("gradient", 5, np.full(shape, -2.0))
    qc = G.Query("check", 7, np.ones(shape), np.zeros(shape))
    for node_config in ({"partition-id": 4}, deployed):
        ctx = Context(run_id=1, node_id=1, node_config=node_config, state=RecordDict(), run_config=cfg)
        first = client.train(_msg(qa), ctx)
        assert not first.has_error(), first.error
        again = [client.train(_msg(qb), ctx), client.evaluate(_msg(qc, MessageType.EVALUATE), ctx)]
        if "ledger-dir" in node_config:  # a restarted node: fresh Context, same disk
            fresh = Context(run_id=2, node_id=1, node_config=node_config, state=RecordDict(), run_config=cfg)
            again.append(client.train(_msg(qb), fresh))
        for r in again:
            assert _reply_bytes(r) == _reply_bytes(first)
        node_eps = rm.epsilon if "ledger-dir" in node_config else TwoBudget(6).mechanism(4).epsilon
        expected = G.query_mechanism("piecewise", node_eps, shape[0] * shape[1], None, 1.0)
        x = parse_answer(first, qa, 4, expected)
        assert x.shape == (shape[0] * shape[1],) and np.sum(~np.isnan(x)) == expected.n_sampled
        with pytest.raises(ReplyRejected, match="stale_replay"):
            parse_answer(again[0], qb, 4, expected)
        with pytest.raises(ReplyRejected, match="unknown_mechanism"):  # not the ε the node announced
            parse_answer(first, qa, 4, G.query_mechanism("piecewise", node_eps / 2, shape[1], None, 1.0))


def test_a_node_that_released_its_record_sends_nothing_new(tmp_path, identity):
    """One ledger slot per node, whatever the protocol: a record release already on disk is replayed to
    a gradient query, and the LDP-SGD server rejects it (no second release ever leaves the node)."""
    from fedrr.release import DiskLedger, FilePopulation, client_generator, release_clients

    rm = RecordMechanism(RandomizedResponse(4, 0.3), RandomizedResponse(2, 0.2), n_features=5)
    write_record_file(tmp_path / "rec.npz", np.array([1, 0, 3, 2, 1]), 1, rm, client_id=0)
    pop = FilePopulation(tmp_path / "rec.npz")
    record_release = release_clients(pop, [0], lambda c: client_generator(0, c))
    DiskLedger(tmp_path / "ledger").put(record_release)
    cfg = RunConfig.from_flwr({"protocol": "ldp-sgd"}).to_flwr()
    node = {"record-file": str(tmp_path / "rec.npz"), "ledger-dir": str(tmp_path / "ledger")}
    ctx = Context(run_id=1, node_id=1, node_config=node, state=RecordDict(), run_config=cfg)
    q = G.Query("gradient", 1, np.zeros((1, 16)))
    reply = client.train(_msg(q), ctx)
    assert _reply_bytes(reply) == _reply_bytes(Message(release_content(record_release), reply_to=_msg(q)))
    with pytest.raises(ReplyRejected, match="malformed"):
        parse_answer(reply, q, 0, G.query_mechanism("piecewise", rm.epsilon, 16, None, 1.0))


def test_a_query_of_the_wrong_shape_or_protocol_is_refused():
    with pytest.raises(ValidationError, match="theta"):
        content_query(query_content(G.Query("gradient", 0, np.zeros((1, 3)))), (1, 4))
    with pytest.raises(ValidationError, match="theta"):
        content_query(query_content(G.Query("gradient", 0, np.full((1, 4), np.inf))), (1, 4))
    with pytest.raises(ValidationError, match="query"):
        content_query(RecordDict(), (1, 4))


# ------------------------------------------------------------------------------ learning
def test_learns_at_large_epsilon_and_the_multiclass_model_too():
    X, y = _task(4000, seed=5)
    Xt, yt = _task(4000, seed=6)
    est = _fit(X, y, 8.0, seed=0)
    majority = max(yt.mean(), 1 - yt.mean())
    assert not est.fallback_ and est.score(Xt, yt) > majority + 0.15, est.diagnostics()
    assert est.epsilon_ <= 8.0 and est.epsilon_ == pytest.approx(8.0, rel=1e-6)
    assert est.predict_proba(Xt).shape == (4000, 2) and est.decision_function(Xt).shape == (4000,)
    k3 = np.digitize(X[:, 0] + 0.3 * X[:, 1], [-0.4, 0.4])  # 3 classes, a clean linear signal
    est3 = _fit(X, k3, 8.0, seed=1)
    kt = np.digitize(Xt[:, 0] + 0.3 * Xt[:, 1], [-0.4, 0.4])
    assert est3.coef_.shape == (3, 4) and not est3.fallback_ and est3.score(Xt, kt) > 0.6


def test_falls_back_to_the_intercept_only_model_at_tiny_epsilon():
    X, y = _task(2000, seed=8)
    Xt, yt = _task(2000, seed=9)
    a_priori = _fit(X, y, 0.05, seed=0)
    assert a_priori.fallback_ and "groups too small" in a_priori.fallback_reason_
    assert a_priori.groups_ == [("intercept", 2000)] and np.all(a_priori.coef_ == 0)
    forced = _fit(X, y, 0.2, seed=0, groups=3)
    assert forced.fallback_ and "check" in forced.fallback_reason_ and forced.n_iter_ == 3
    for est in (a_priori, forced):  # the majority class, for everyone
        assert np.all(est.predict(Xt) == np.bincount(y).argmax())
        assert est.diagnostics()["fallback"] and est.diagnostics()["fallback_reason"]


def test_one_hot_attributes_budget_mix_and_client_ids():
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.integers(0, 3, 3000), rng.integers(0, 2, 3000), rng.uniform(0, 1, 3000)])
    y = (rng.random(3000) < 1 / (1 + np.exp(-(2.5 * (X[:, 0] == 2) - 2 * X[:, 1] + X[:, 2] - 0.5)))).astype(int)
    eps = np.where(np.arange(3000) % 2, 4.0, 12.0)
    est = _fit(X, y, eps, seed=4, n_states=[3, 2, 0])
    assert est.coef_.shape == (1, 4) and est.client_epsilon_.max() <= 12.0
    assert np.all(est.client_epsilon_[eps == 4.0] <= 4.0)
    ids = np.arange(3000) * 3 + 1
    other = _fit(X, y, eps, seed=4, client_ids=ids, n_states=[3, 2, 0])
    assert not np.array_equal(other.theta_, est.theta_)  # the ids seed the clients' generators


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "params, field",
    [
        ({"mechanism": "laplace"}, "mechanism"),
        ({"n_sampled": 0}, "n_sampled"),
        ({"clip": 0.0}, "clip"),
        ({"groups": 0}, "groups"),
        ({"groups": 10_000}, "groups"),
        ({"learning_rate": -0.1}, "learning_rate"),
        ({"C": 0.0}, "C"),
        ({"fallback": "yes"}, "fallback"),
        ({"n_states": [1, 0, 0, 0]}, "n_states"),
        ({"random_state": -3}, "random_state"),
    ],
)
def test_bad_parameters_name_the_field(params, field):
    X, y = _task(200)
    with pytest.raises(ValidationError) as exc:
        LDPSGDClassifier(**params).fit(GradientClients(X, y, 1.0, seed=0))
    assert exc.value.field == field


def test_bad_data_name_the_field():
    X, y = _task(200)
    cases = [
        (lambda: _fit(X * 3, y), "X"),
        (lambda: _fit(X, y, n_states=[2, 0, 0, 0]), "X"),
        (lambda: _fit(X, np.zeros(200)), "y"),
        (lambda: _fit(X, y, -1.0), "epsilon"),
        (lambda: _fit(X, y, np.ones(5)), "epsilon"),
        (lambda: _fit(X, y, client_ids=np.arange(200)[::-1]), "client_ids"),
        (lambda: _fit(X, y, classes=[0]), "classes"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as exc:
            call()
        assert exc.value.field == field


def test_fit_refuses_clean_records():
    """The server never takes clean data: arrays (or labels beside the clients) are refused, saying what to pass."""
    X, y = _task(50)
    for call in (lambda: LDPSGDClassifier().fit(X, y), lambda: LDPSGDClassifier().fit(X)):
        with pytest.raises(ValidationError, match="GradientClients") as exc:
            call()
        assert exc.value.field == "clients"
    with pytest.raises(ValidationError) as exc:
        LDPSGDClassifier().fit(GradientClients(X, y, 1.0, seed=0), y)
    assert exc.value.field == "y"


def test_the_numbers_are_those_of_the_records_form():
    """fit(GradientClients) gives the model ``fit(X, y, client_epsilon=eps, client_ids=ids)`` gave before
    the clients' side moved to ``fedrr.gradient_release`` (recorded then; seed 4 for clients and server)."""
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.integers(0, 3, 3000), rng.integers(0, 2, 3000), rng.uniform(0, 1, 3000)])
    y = (rng.random(3000) < 1 / (1 + np.exp(-(2.5 * (X[:, 0] == 2) - 2 * X[:, 1] + X[:, 2] - 0.5)))).astype(int)
    eps = np.where(np.arange(3000) % 2, 4.0, 12.0)
    est = _fit(X, y, eps, seed=4, client_ids=np.arange(3000) * 3 + 1, n_states=[3, 2, 0])
    before = [0.06460904479643344, -0.44322358689722086, 1.5333118459381936, -1.0572730773111507, -0.03662516486534056]
    np.testing.assert_allclose(est.theta_, [before], rtol=0, atol=1e-12)
    assert not est.fallback_ and est.groups_[0] == ("intercept", 300) and est.groups_[-1] == ("check", 300)
    assert len(est.groups_) == 74 and est.check_["gain"] == pytest.approx(0.1805991858868595, abs=1e-12)
    assert est.client_epsilon_[:2].tolist() == pytest.approx([11.999999999997213, 3.9999999999992353], abs=1e-12)


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"protocol": "sgd"}, "protocol"),
        ({"protocol": "ldp-sgd", "run-mode": "cohort", "cohort-size": 4}, "run-mode"),
        ({"ldp-sgd-mechanism": "gauss"}, "ldp-sgd-mechanism"),
        ({"ldp-sgd-clip": 0.0}, "ldp-sgd-clip"),
        ({"ldp-sgd-groups": -1}, "ldp-sgd-groups"),
        ({"ldp-sgd-fallback": True}, "ldp-sgd-fallback"),
    ],
)
def test_bad_run_config_names_the_key(bad, field):
    with pytest.raises(ValidationError) as exc:
        RunConfig.from_flwr(bad)
    assert exc.value.field == field


# ------------------------------------------------------------------------------ learners
def test_learners_ldp_nb_and_ldp_sgd_at_the_records_epsilon():
    from fedrr.assembly import build_population
    from fedrr.release import offline_release

    cfg = RunConfig.from_flwr({"population": POP, "n-clients": 1500, "seed": 2})
    pop = build_population(cfg)
    rel = offline_release(pop, cfg.seed)
    mechs = [pop.mechanism(int(c)) for c in rel.client_id]
    recs = [pop.record(int(c)) for c in rel.client_id]
    data = FitData(rel.x, rel.y, mechs, np.stack([x for x, _ in recs]), np.array([v for _, v in recs]),
                   client_id=rel.client_id)  # fmt: skip
    sgd = fit_and_score("ldp-sgd", data, pop.test_set(), FitOptions(random_state=2))
    assert "accuracy" in sgd.entry, sgd.entry
    per_client = sgd.estimator.client_epsilon_
    record_eps = np.array([m.epsilon for m in mechs])
    assert np.all(per_client <= record_eps) and np.allclose(per_client, record_eps, rtol=1e-6)
    nb = fit_and_score("ldp-nb", FitData(rel.x, rel.y, pop.mechanism(0)), pop.test_set())
    assert 0.5 < nb.entry["accuracy"] <= 1
    mix = fit_and_score("ldp-nb", data, pop.test_set()).entry  # a budget mix: the groups pooled
    assert 0.5 < mix["accuracy"] <= 1, mix
    assert "needs one record mechanism" in fit_and_score("ldp-nb-robust", data, pop.test_set()).entry["error"]
    assert "records" in fit_and_score("ldp-sgd", FitData(rel.x, rel.y, mechs), None).entry["error"]


# ---------------------------------------------------------------------------- Flower run
class RecordingGrid:
    """A pass-through Grid that keeps every reply the server receives."""

    def __init__(self, inner):
        self.inner, self.received = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def send_and_receive(self, messages, *, timeout=None):
        got = list(self.inner.send_and_receive(list(messages), timeout=timeout))
        self.received.extend(got)
        return got


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    """40 nodes (two budgets), 4 groups: intercept, 2 model rounds, check; then 3 nodes asked again with
    another model."""
    from flwr.serverapp import ServerApp

    from fedrr.federation import run_federation
    from fedrr.federation._ldp_sgd_server import run_sgd_server

    out = tmp_path_factory.mktemp("sgd")
    cfg = {"population": POP, "n-clients": 40, "seed": 5, "protocol": "ldp-sgd", "ldp-sgd-groups": 2,
           "results-dir": str(out), "run-name": "sgd"}  # fmt: skip
    seen: dict = {}
    app = ServerApp()

    @app.main()
    def main(grid, context):
        rec = RecordingGrid(grid)
        seen["metrics"] = run_sgd_server(rec, RunConfig.from_flwr(context.run_config), log=lambda *_: None)
        seen["received"] = list(rec.received)
        by_node = {m.metadata.src_node_id: m for m in rec.received if _is_release(m)}
        nodes = sorted(by_node)[:3]
        q = G.Query("gradient", 99, np.full((1, 16), 1.5))
        msgs = [
            Message(query_content(q), dst_node_id=n, message_type=MessageType.TRAIN, group_id="again") for n in nodes
        ]
        seen["again"] = [(by_node[m.metadata.src_node_id], m) for m in grid.send_and_receive(msgs, timeout=120)]

    run_federation(cfg, server_app=app)
    return RunConfig.from_flwr(cfg), seen


def _is_release(msg) -> bool:
    return not msg.has_error() and "release" in msg.content.array_records


def test_flower_run_equals_the_offline_simulator(federation, monkeypatch):
    """Same groups, the same released gradients (byte for byte), the same final θ (to 1e-12)."""
    from fedrr.assembly import build_population

    cfg, seen = federation
    pop = build_population(cfg)
    ids = np.arange(cfg.n_clients)
    recs = [pop.record(int(c)) for c in ids]
    X, y = np.stack([x for x, _ in recs]), np.array([v for _, v in recs])
    n_states, K = ldp_sgd_design(pop.mechanism(0))
    eps = np.array([pop.mechanism(int(c)).epsilon for c in ids])  # two budgets
    calls = []
    original = G.client_answer

    def spy(q, *a, **kw):
        out = original(q, *a, **kw)
        calls.append((q.round, out[0]))
        return out

    monkeypatch.setattr(G, "client_answer", spy)
    est = LDPSGDClassifier(n_states=n_states, groups=2, random_state=cfg.seed)
    est.fit(GradientClients(X, y, eps, client_ids=ids, classes=np.arange(K), seed=cfg.seed))
    entry = seen["metrics"]["learners"]["ldp-sgd"]
    assert seen["metrics"]["status"] == "done" and seen["metrics"]["dropped"] == {}
    assert [tuple(g) for g in entry["diagnostics"]["groups"]] == est.groups_ == [
        ("intercept", 4), ("gradient", 16), ("gradient", 16), ("check", 4)
    ]  # fmt: skip
    model = np.load(cfg.results_dir + "/sgd/model-ldp-sgd.npz")
    np.testing.assert_allclose(model["theta"], est.theta_, rtol=0, atol=1e-12)
    assert entry["diagnostics"]["fallback"] == est.fallback_ and entry["accuracy"] == est.score(*pop.test_set())
    params = {k: getattr(est, k) for k in L.LDPSGDClassifier._parameter_constraints}
    plan = L.make_server(K, est.theta_.shape[1] - 1, 5, eps, params, cfg.seed).plan
    keys = [(r, int(ids[i])) for r, (_, rows) in enumerate(plan) for i in rows]  # the offline calls' order
    assert [r for r, _ in calls] == [r for r, _ in keys]
    offline = {key: x for key, (_, x) in zip(keys, calls)}
    fed = {}
    for m in filter(_is_release, seen["received"]):
        rel = content_release(m.content)
        spec = json.loads(rel.mechanisms[0])
        fed[(spec["round"], int(rel.client_id[0]))] = rel.x[0]
    assert fed.keys() == offline.keys() and len(fed) == 40
    for key, x in offline.items():
        assert fed[key].tobytes() == x.tobytes(), key


@pytest.mark.flower
def test_a_node_asked_again_over_flower_replays_its_release(federation):
    _, seen = federation
    assert len(seen["again"]) == 3
    for first, again in seen["again"]:
        assert _reply_bytes(again) == _reply_bytes(first)


def test_an_offline_sweep_cell_runs_ldp_sgd_at_the_cells_record_epsilon(tmp_path):
    """The cell runner gives ldp-sgd the clients' records and ids; its ε per client (the largest, by
    the mechanisms' own accounting) is the cell's ε per record, never above it."""
    from fedrr.experiment.cli import main

    scenario = """
[scenario]
name = "sgd"
seed = 3
repeats = 1
[population]
dataset = "breast_cancer"
n_clients = 300
n_test_per_class = 40
[privacy]
mechanism = "laplace"
epsilon_grid = [4.0]
[learners]
names = ["naive", "ldp-sgd"]
[run]
mode = "offline"
workers = 1
"""
    path = tmp_path / "sgd.toml"
    path.write_text(scenario)
    assert main(["sweep", str(path), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    rec = json.loads(next((tmp_path / "out" / "cells").glob("*.json")).read_text())
    sgd = rec["learners"]["ldp-sgd"]
    assert "accuracy" in sgd and "diagnostics" in sgd, rec["learners"]
    assert rec["eps"]["max"] == pytest.approx(4.0, rel=1e-6)
    assert sgd["eps_per_client"] <= rec["eps"]["max"] and sgd["eps_per_client"] == pytest.approx(4.0, rel=1e-6)


def test_deployed_clients_take_any_increasing_ids_and_their_record_of_answers_is_their_own():
    """Ids bound the generators' spawn keys only in a simulation (a run seed); a deployed node (seed
    None, OS entropy) keeps its population's ids. ``released`` is a copy: only answering sets it."""
    from fedrr.gradient_release import GradientClients

    X, y = np.zeros((2, 1)), np.array([0, 1])
    with pytest.raises(ValidationError, match="2\\^40"):
        GradientClients(X, y, 1.0, client_ids=[5, 2**41], seed=0)
    with pytest.raises(ValidationError, match=">= 0"):
        GradientClients(X, y, 1.0, client_ids=[-3, 4], seed=0)
    deployed = GradientClients(X, y, 1.0, client_ids=[-3, 2**41])
    deployed.released[:] = True
    assert not deployed.released.any()
