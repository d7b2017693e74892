"""Paired releases (``PairedRecordMechanism``) through the whole pipeline: the run config's strict
budget rules, the built-in population, release → pool (each malformed reply rejected with its own
reason, never costing an honest one), the frequency check, fake clients, the learners, sweep cells,
and a Flower federation whose pool equals the offline release bit for bit."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fedrr.assembly import build_population
from fedrr.errors import ValidationError
from fedrr.experiment import parse_scenario, run_cell
from fedrr.fake import FakeClients, crafted_release
from fedrr.frequency_check import check_pool
from fedrr.learners import FitData, decode_paired, fit_and_score
from fedrr.mechanisms import PairedRecordMechanism, record_mechanism_from_spec
from fedrr.pool import Pool, ReplyRejected, validate_release_arrays
from fedrr.population import DatasetPopulation, record_mechanism_for
from fedrr.release import FilePopulation, client_generator, offline_release, release_clients, write_record_file
from fedrr.run_config import RunConfig

BASE = {"dataset": "adult_binned", "mechanism": "paired", "feature-epsilon": 2.0, "n-clients": 400, "seed": 5}


@pytest.fixture(scope="module")
def pop():
    return build_population(RunConfig.from_flwr(BASE))


# ------------------------------------------------------------------------------ run config
@pytest.mark.parametrize(
    "extra, key",
    [
        ({"label-flip": 0.2}, "label-flip"),
        ({"label-epsilon": 1.0}, "label-epsilon"),
        ({"feature-flip": 0.3, "feature-epsilon": ""}, "feature-flip"),
    ],
)
def test_a_paired_run_refuses_label_budgets_and_flips(extra, key):
    with pytest.raises(ValidationError) as exc:
        RunConfig.from_flwr({**BASE, **extra})
    assert exc.value.field == key


def test_a_paired_run_gets_no_default_budget_and_needs_its_record_epsilon():
    cfg = RunConfig.from_flwr({**BASE, "feature-epsilon": ""})
    assert cfg.default_budgets() == {} and cfg.budget_notes() == []
    with pytest.raises(ValidationError) as exc:
        build_population(cfg)
    assert exc.value.field == "feature-epsilon" and "whole release" in exc.value.message


@pytest.mark.parametrize("n_sampled, m", [(0, 1), (1, 1), (3, 3)])
def test_the_built_in_population_releases_with_the_paired_mechanism(n_sampled, m):
    pop = build_population(RunConfig.from_flwr({**BASE, "n-sampled": n_sampled}))
    mech = pop.mechanism(0)
    assert isinstance(mech, PairedRecordMechanism) and mech.n_sampled == m and mech.n_classes == 2
    assert mech.epsilon == pytest.approx(2.0, rel=1e-9)  # feature-epsilon is the whole record's ε
    assert mech.epsilon_breakdown()["label"] == 0.0


def test_record_mechanism_for_paired_refuses_a_label_budget():
    with pytest.raises(ValidationError, match="no budget of its own") as exc:
        record_mechanism_for("paired", 3, [2, 3, 4], 2, feature_epsilon=1.0, label_epsilon=0.5)
    assert exc.value.field == "label_epsilon"
    m = record_mechanism_for("paired", 3, [2, 3, 4], 2, feature_epsilon=1.0)
    assert m.n_states == (2, 3, 4) and m.n_sampled == 1


def test_record_mechanism_from_spec_takes_record_kinds_only():
    pm = PairedRecordMechanism([2, 3], 2, 1.0)
    assert record_mechanism_from_spec(pm.to_spec()) == pm
    with pytest.raises(ValidationError) as exc:
        record_mechanism_from_spec({"kind": "randomized_response", "k": 2, "flip_prob": 0.2, "n_features": 2})
    assert exc.value.field == "spec.kind"


# ------------------------------------------------------------------------------ release and pool
def test_offline_release_pools_paired_releases(pop, tmp_path):
    rel = offline_release(pop, 7)
    pool = Pool.from_releases([rel])
    assert pool.n == 400 and np.all(np.isnan(pool.y))
    assert np.all((~np.isnan(pool.X)).sum(axis=1) == 1)
    acc = pool.accounting()
    assert acc["record"] == pytest.approx(2.0) and acc["features"] == pytest.approx(2.0) and acc["label"] == 0.0
    for layout in ("npz", "dir"):
        path = tmp_path / f"pool-{layout}"
        pool.save(path, layout)
        back = Pool.load(path if layout == "dir" else path)
        np.testing.assert_array_equal(back.X, pool.X)
        np.testing.assert_array_equal(back.y, pool.y)
        assert all(a == b for a, b in zip(back.mechanisms, pool.mechanisms))


def _parts(rel):
    return {"x": rel.x.copy(), "y": rel.y.copy(), "client_id": rel.client_id, "mechanism_index": rel.mechanism_index}


def _specs(rel):
    return json.dumps(list(rel.mechanisms))


def _break(kind, parts, mech):
    x, y = parts["x"], parts["y"]
    released = ~np.isnan(x)
    j = int(np.flatnonzero(released[0])[0])
    if kind == "out_of_domain":
        x[0, j] = 1e9
    elif kind == "extra_column":  # a value where none was released
        x[0, (j + 1) % x.shape[1]] = 0.0
    elif kind == "nan_released":  # NaN where the pair was released
        x[0, j] = np.nan
    elif kind == "label":
        y[0] = 1.0
    elif kind == "inf":
        x[0, j] = np.inf
    return parts


MALFORMED = {
    "out_of_domain": "out_of_domain",
    "extra_column": "wrong_sampling",
    "nan_released": "wrong_sampling",
    "label": "label_released",
    "inf": "not_finite",
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_paired_reply_is_rejected_with_its_own_reason(pop, kind):
    rel = release_clients(pop, [0, 1], lambda c: client_generator(3, c))
    validate_release_arrays(_parts(rel), _specs(rel), None)  # the honest reply passes
    with pytest.raises(ReplyRejected) as exc:
        validate_release_arrays(_break(kind, _parts(rel), pop.mechanism(0)), _specs(rel), None)
    assert exc.value.reason == MALFORMED[kind]


def test_a_bad_paired_reply_never_costs_an_honest_one(pop):
    from flwr.app import Message
    from flwr.supercore.task_identity import TaskIdentity

    from fedrr.federation import MESSAGE_TYPE, ServerSchema, query_content, release_content, validate_replies
    from fedrr.release import Release

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    if saved[1] is None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    try:
        q = Message(content=query_content(), dst_node_id=1, message_type=MESSAGE_TYPE, group_id="t")
        good = [release_clients(pop, [c], lambda c: client_generator(3, c)) for c in (1, 2)]
        bad_rel = release_clients(pop, [0], lambda c: client_generator(3, c))
        bad = Release(bad_rel.x, np.array([0.0]), bad_rel.client_id, bad_rel.mechanism_index, bad_rel.mechanisms)
        for order in ([bad, *good], [good[0], bad, good[1]], [*good, bad]):
            msgs = [Message(release_content(r), reply_to=q) for r in order]
            valid, reasons = validate_replies(msgs, ServerSchema.of_population(pop), 10)
            assert reasons == {"label_released": 1}
            assert sorted(int(v.client_id[0]) for v in valid) == [1, 2]
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def test_a_spec_is_built_once_for_all_the_replies_that_name_it(pop, monkeypatch):
    """Honest replies all name the same spec: it is built once (it was once per reply, 2.6 s of a
    300-node MNIST collection), with the same validated release; a bad spec is refused every time."""
    import fedrr.pool as pool_module

    built = []
    real = pool_module.record_mechanism_from_spec
    monkeypatch.setattr(pool_module, "record_mechanism_from_spec", lambda s: built.append(1) or real(s))
    pool_module._SPECS.clear()
    rels = [release_clients(pop, [c], lambda c: client_generator(3, c)) for c in range(5)]
    valid = [validate_release_arrays(_parts(r), _specs(r), None) for r in rels]
    assert len(built) == 1
    assert all(v.mechanisms == r.mechanisms and np.array_equal(v.x, r.x, equal_nan=True) for v, r in zip(valid, rels))
    bad = json.dumps([{"n_features": rels[0].x.shape[1], "kind": "nonsense"}])
    for _ in range(2):
        with pytest.raises(ReplyRejected, match="unknown_mechanism"):
            validate_release_arrays(_parts(rels[0]), bad, None)
    # a padded copy of the spec parses to the same mechanisms, but the cache keeps no reply's text
    padded = _specs(rels[0]) + " " * 1_000_000
    validate_release_arrays(_parts(rels[0]), padded, None)
    assert all(isinstance(k[0], bytes) and len(k[0]) == 32 for k in pool_module._SPECS)
    assert sum(len(c) for _, cs in pool_module._SPECS.values() for c in cs) < 100_000


def test_an_integer_label_next_to_paired_reports_is_refused(pop):
    """A paired reply carrying a label value (an int array, as a split release's) is refused."""
    rel = release_clients(pop, [0], lambda c: client_generator(3, c))
    parts = _parts(rel)
    parts["y"] = np.array([1])  # a label value, as a split release would carry
    with pytest.raises(ReplyRejected, match="label_released"):
        validate_release_arrays(parts, _specs(rel), None)


def test_deployment_record_file_releases_a_paired_record(tmp_path):
    mech = PairedRecordMechanism([2, 3, 4], 2, 1.0)
    with pytest.raises(ValidationError):
        write_record_file(tmp_path / "r.npz", np.array([1, 2, 3]), None, mech)
    write_record_file(tmp_path / "r.npz", np.array([1, 2, 3]), 1, mech, client_id=4)
    node = FilePopulation(tmp_path / "r.npz")
    assert node.mechanism(4) == mech
    rel = release_clients(node, [4], lambda c: np.random.default_rng(0))
    assert np.isnan(rel.y[0]) and (~np.isnan(rel.x[0])).sum() == 1
    validate_release_arrays(_parts(rel), _specs(rel), 3, {4})


# ------------------------------------------------------------------------------ frequency check
def test_frequency_check_tests_each_attributes_pair_reports_and_its_sampling():
    mech = PairedRecordMechanism([2, 3, 4], 2, 1.0, n_sampled=2)
    base = DatasetPopulation(_tiny_dataset(), 3000, mech, seed=0)
    pool = Pool.from_releases([offline_release(base, 0)])
    chk = check_pool(pool)
    assert not chk.flagged
    assert {f.name for f in chk.fields} == {"pair x0", "pair x1", "pair x2"}  # no label field
    for f in chk.fields:
        j = int(f.name[-1])
        assert f.estimate.shape == (mech.n_states[j] * 2,)
        assert abs(f.estimate.sum() - 1) < 0.15  # debiased pair frequencies (sum to 1 up to noise)
    for s in chk.sampling:  # released with probability m/F = 2/3 each, whatever the data
        assert s.expected == pytest.approx(3000 * 2 / 3)
        assert abs(s.count - s.expected) < 5 * math.sqrt(3000 * 2 / 3 * 1 / 3)
    # the n_tests: 2 per pair value of every attribute + 2 per sampled attribute
    assert chk.n_tests == 2 * (4 + 6 + 8) + 2 * 3


def _tiny_dataset():
    """3 attributes (2, 3, 4 states) and a binary label tied to attribute 0, with a clean test split."""
    from fedrr.datasets import Dataset, FeatureSpec, Schema

    rng = np.random.default_rng(1)
    n = 4000
    X = np.stack([rng.integers(0, k, n) for k in (2, 3, 4)], axis=1)
    y = (X[:, 0] ^ (rng.random(n) < 0.2)).astype(np.int64)
    feats = tuple(FeatureSpec(f"a{j}", "discrete", k) for j, k in enumerate((2, 3, 4)))
    return Dataset(X, y, Schema(feats, classes=(0, 1)))


@pytest.mark.parametrize("oracle", ["rr", "oue", "olh"])
def test_output_fakes_send_the_maximal_gain_pair_report(oracle):
    mech = PairedRecordMechanism([2, 3, 4], 2, 1.0, oracle=oracle)
    base = DatasetPopulation(_tiny_dataset(), 200, mech, seed=0)
    fakes = FakeClients(base, 0.5, attack="output", attribute=2, state=3, label=1)
    o = mech.oracles[2]
    target = 3 * 2 + 1
    rng = np.random.default_rng(0)
    honest = o.unbiased_onehot(o.release(rng.integers(0, o.k, 4000), rng))[:, target].max()
    for c in fakes.fake_ids()[:10]:
        x, y = fakes.release_record(int(c), client_generator(0, int(c)))
        assert np.isnan(y) and np.flatnonzero(~np.isnan(x)).tolist() == [2]
        mech.validate_release(x[None, :], np.array([y]))
        gain = o.unbiased_onehot(x[2:3])[0, target]
        assert gain >= honest - 1e-12  # no honest report supports the target pair more
        assert gain == pytest.approx(o.unbiased_onehot(np.array([crafted_release(o, target, rng)]))[0, target])


def test_output_fakes_are_flagged_and_input_fakes_are_not():
    cfg = {**BASE, "n-clients": 4000, "feature-epsilon": 1.0, "fake-attribute": 3, "fake-state": 1, "fake-label": 1}
    honest = check_pool(Pool.from_releases([offline_release(build_population(RunConfig.from_flwr(cfg)), 1)]))
    assert not honest.flagged
    out = {**cfg, "fake-fraction": 0.05, "fake-attack": "output"}
    chk = check_pool(Pool.from_releases([offline_release(build_population(RunConfig.from_flwr(out)), 1)]))
    flagged = chk.to_dict()["flagged_fields"]
    assert chk.flagged and flagged and all("x3" in f for f in flagged), flagged  # the target attribute only
    pair3, honest3 = (next(f for f in c.fields if f.name == "pair x3") for c in (chk, honest))
    target = 1 * 2 + 1  # the pair (x_3 = 1, y = 1); Adult's attribute 3 has 2 states: 4 pair values
    assert pair3.estimate.shape == (4,) and pair3.estimate[target] - honest3.estimate[target] > 0.3
    inp = {**cfg, "fake-fraction": 0.05, "fake-attack": "input"}
    pop = build_population(RunConfig.from_flwr(inp))
    pool = Pool.from_releases([offline_release(pop, 1)])
    assert not check_pool(pool).flagged  # distributed like an honest release: the documented limitation
    fake_rows = np.isin(pool.client_id, pop.fake_ids())
    assert fake_rows.sum() > 100 and np.all((~np.isnan(pool.X[fake_rows])).sum(axis=1) == 1)


# ------------------------------------------------------------------------------ learners
def test_decode_paired_reads_randomised_response_reports_as_the_pairs():
    mech = PairedRecordMechanism([2, 3, 4], 3, 30.0, n_sampled=2, oracle="rr")  # ε 15 per pair: reports = pairs
    rng = np.random.default_rng(0)
    X = np.stack([rng.integers(0, k, 500) for k in (2, 3, 4)], axis=1)
    y = rng.integers(0, 3, 500)
    Xt, yt = mech.release(X, y, rng=rng)
    Xd, yd = decode_paired(Xt, mech)
    rel = ~np.isnan(Xt)
    np.testing.assert_array_equal(np.isnan(Xd), ~rel)
    assert np.mean(Xd[rel] == X[rel]) > 0.999 and np.mean(yd == y) > 0.999


@pytest.mark.parametrize("name", ["ldp-nb", "naive", "majority", "spread", "spread-plain"])
def test_release_learners_fit_paired_releases(pop, name):
    rel = offline_release(pop, 7)
    res = fit_and_score(name, FitData(rel.x, rel.y, pop.mechanism(0)), pop.test_set())
    assert "error" not in res.entry, res.entry
    assert 0.5 < res.entry["accuracy"] <= 1


def test_clean_oracle_and_majority_on_paired_releases(pop):
    rel = offline_release(pop, 7)
    recs = [pop.record(int(c)) for c in rel.client_id]
    d = FitData(
        rel.x, rel.y, pop.mechanism(0), clean_X=np.stack([x for x, _ in recs]), clean_y=np.array([y for _, y in recs])
    )
    assert fit_and_score("clean", d, pop.test_set()).entry["accuracy"] > 0.78
    maj = fit_and_score("majority", d, pop.test_set()).estimator
    assert maj.classes_.tolist() == [0, 1] and maj.class_prior_.sum() == pytest.approx(1)
    assert maj.class_prior_[0] > 0.5  # Adult: most earn <= 50K


@pytest.mark.parametrize("name", ["wdro", "wdro-cv", "spread-true"])
def test_learners_that_cannot_use_paired_releases_say_so(pop, name):
    rel = offline_release(pop, 7)
    res = fit_and_score(name, FitData(rel.x, rel.y, pop.mechanism(0), clean_X=rel.x, clean_y=rel.y), None)
    assert res.entry["error"].startswith("ValidationError") and "paired" in res.entry["error"]


# ------------------------------------------------------------------------------ sweeps
def _scenario(**privacy):
    return {
        "population": {"dataset": "adult_binned", "n_clients": 600},
        "privacy": {"mechanism": "paired", "epsilon_grid": [1.0, 4.0], **privacy},
        "learners": {"names": ["ldp-nb", "majority", "clean"]},
    }


@pytest.mark.parametrize(
    "privacy, key",
    [
        ({"split": {"features": 0.5, "label": 0.5}}, "privacy.split"),
        ({"label_epsilon": 0.5}, "privacy.label_epsilon"),
        ({"label_flip": 0.2}, "privacy.label_flip"),
        ({"epsilon_grid": None, "feature_epsilon_grid": [1.0]}, "privacy.feature_epsilon_grid"),
    ],
)
def test_a_paired_scenario_refuses_keys_it_would_not_use(privacy, key):
    data = _scenario(**privacy)
    data["privacy"] = {k: v for k, v in data["privacy"].items() if v is not None}
    with pytest.raises(ValidationError) as exc:
        parse_scenario(data)
    assert exc.value.field == key


def test_a_paired_cell_gives_the_whole_record_epsilon_to_the_pairs(tmp_path):
    spec = parse_scenario(_scenario())
    assert spec.notes == ()  # no default label budget announced: there is none
    cell = spec.cells()[1]
    p = cell.privacy()
    assert (p.feature_epsilon, p.label_epsilon, p.label_flip, p.n_sampled) == (4.0, None, None, 1)
    cfg = cell.run_config()
    assert cfg.mechanism == "paired" and cfg.feature_epsilon == 4.0 and cfg.label_epsilon is None
    rec = run_cell(cell, tmp_path)
    assert rec["eps"]["record"] == pytest.approx(4.0) and rec["eps"]["features"] == pytest.approx(4.0)
    assert rec["eps"]["label"] == 0.0 and rec["params"]["label_epsilon"] is None
    assert "paired" in rec["params"]["text"] and not rec["frequency_check"]["flagged"]
    assert all("error" not in e for e in rec["learners"].values()), rec["learners"]


def test_ldp_sgd_runs_at_each_paired_clients_record_epsilon(pop):
    """LDP-SGD (its own protocol, simulated from the records) takes its model from the paired record's
    clean domain and each client's ε from the paired mechanism's own accounting."""
    rel = offline_release(pop, 7)
    recs = [pop.record(int(c)) for c in rel.client_id]
    d = FitData(
        rel.x,
        rel.y,
        pop.mechanism(0),
        clean_X=np.stack([x for x, _ in recs]),
        clean_y=np.array([y for _, y in recs]),
        client_id=rel.client_id,
    )
    res = fit_and_score("ldp-sgd", d, pop.test_set())
    assert "error" not in res.entry, res.entry
    assert np.allclose(np.asarray(res.entry["diagnostics"]["epsilon"], float), 2.0)


def test_a_paired_budget_mix_mixes_whole_record_epsilons(tmp_path):
    data = _scenario()
    del data["privacy"]["epsilon_grid"]
    data["population"]["budget_mix"] = {"values": [0.5, 2.0], "weights": [1, 1]}
    spec = parse_scenario(data)
    assert spec.grid_axis == "" and spec.notes == ()
    pop = build_population(spec.cells()[0].run_config())
    eps = sorted({round(pop.mechanism(i).epsilon, 9) for i in range(200)})
    assert eps == [0.5, 2.0] and all(isinstance(pop.mechanism(i), PairedRecordMechanism) for i in range(20))


def test_a_paired_release_is_replayed_byte_for_byte_from_the_ledger(pop, tmp_path):
    """The ledger rule holds for paired releases: the stored release (NaN-laden x, all-NaN y) comes back
    identical, and asking again never draws new noise."""
    from fedrr.release import DiskLedger, release_once

    ledger = DiskLedger(tmp_path / "node")
    calls = []

    def make():
        calls.append(1)
        return release_clients(pop, [3], lambda c: np.random.default_rng())  # fresh entropy: a replay must not call

    first = release_once(ledger, make)
    for _ in range(3):
        again = release_once(ledger, make)
        assert again.x.tobytes() == first.x.tobytes() and again.y.tobytes() == first.y.tobytes()
        assert again.mechanisms == first.mechanisms
    assert len(calls) == 1 and np.isnan(first.y[0])
    validate_release_arrays(_parts(first), _specs(first), None, {3})
