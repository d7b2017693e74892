"""The triple release (``TripleRecordMechanism``): its exact ε and likelihood, its release format and the
checks that refuse a malformed one, the pool, the DP audit, the code that reads pair reports refusing it
by name, and spread's direct fit of it (consistent where the tree prior is the truth's family)."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from fedrr.errors import ValidationError
from fedrr.estimators import LDPNaiveBayes, SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.mechanisms import (
    LocalHashing,
    PairedRecordMechanism,
    RandomizedResponse,
    TripleRecordMechanism,
    record_mechanism_from_spec,
)
from fedrr.pool import ReplyRejected, validate_release_arrays

KS = (2, 3, 4)


def records(n: int, seed: int, ks=KS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.stack([rng.integers(0, k, n) for k in ks], axis=1)
    return X, rng.integers(0, 2, n)


# ------------------------------------------------------------------------------ the mechanism
def test_its_epsilon_is_the_largest_triple_oracles_and_its_spec_rebuilds_it():
    m = TripleRecordMechanism(KS, 2, 1.5, oracle="rr")
    assert m.pairs == ((0, 1), (0, 2), (1, 2))
    assert [o.k for o in m.oracles] == [12, 16, 24]
    assert m.epsilon == pytest.approx(1.5) and m.delta == 0.0
    assert m.epsilon_breakdown()["record"] == m.epsilon and m.epsilon_breakdown()["label"] == 0.0
    again = record_mechanism_from_spec(m.to_spec())
    assert isinstance(again, TripleRecordMechanism) and again == m
    auto = TripleRecordMechanism(KS, 2, 1.0)
    assert {o.kind for o in auto.oracles} <= {RandomizedResponse.kind, LocalHashing.kind, "unary_encoding"}


def test_a_spec_read_first_in_a_process_finds_every_kind():
    """The package loads its names lazily: a spec read before any class is imported must still find
    its kind (the registry imports its modules)."""
    code = (
        "from fedrr.mechanisms import mechanism_from_spec, record_mechanism_from_spec\n"
        "print(type(mechanism_from_spec({'kind': 'local_hashing', 'k': 5, 'epsilon': 1.0, 'g': 4})).__name__)\n"
        "spec = {'kind': 'triple_record', 'n_states': [2, 3], 'n_classes': 2, 'epsilon': 1.0, 'oracle': ['rr']}\n"
        "print(type(record_mechanism_from_spec(spec)).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["LocalHashing", "TripleRecordMechanism"]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"n_states": [3]}, "n_states"),
        ({"n_states": [2, 1]}, "n_states[1]"),
        ({"epsilon": None}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"oracle": "nope"}, "oracle"),
        ({"oracle": ["rr", "rr"]}, "oracle"),
        ({"n_classes": 1}, "n_classes"),
    ],
)
def test_bad_parameters_name_their_field(kwargs, field):
    args = {"n_states": KS, "n_classes": 2, "epsilon": 1.0} | kwargs
    with pytest.raises(ValidationError) as exc:
        TripleRecordMechanism(args.pop("n_states"), args.pop("n_classes"), args.pop("epsilon"), **args)
    assert exc.value.field == field


def test_each_row_releases_one_report_in_its_pairs_two_columns_and_pairs_are_uniform():
    m = TripleRecordMechanism(KS, 2, 2.0, oracle="rr")
    X, y = records(30_000, 0)
    Xt, yt = m.release(X, y, rng=np.random.default_rng(1))
    assert np.all(np.isnan(yt))
    released = ~np.isnan(Xt)
    assert np.all(released.sum(axis=1) == 2)
    two = Xt[released].reshape(-1, 2)
    assert np.array_equal(two[:, 0], two[:, 1])
    pairs = [tuple(np.flatnonzero(r)) for r in released]
    counts = np.array([sum(p == jk for p in pairs) for jk in m.pairs])
    assert stats.chisquare(counts).pvalue > 1e-4  # one pair per person, uniformly
    # randomised response keeps the true triple with probability e^ε / (e^ε + K − 1)
    for (j, k), o in zip(m.pairs, m.oracles):
        rows = released[:, j] & released[:, k]
        v = (X[rows, j] * KS[k] + X[rows, k]) * 2 + y[rows]
        p = math.exp(2.0) / (math.exp(2.0) + o.k - 1)
        kept = np.mean(Xt[rows, j] == v)
        assert abs(kept - p) < 5 * math.sqrt(p * (1 - p) / rows.sum())


def test_its_likelihood_is_exact_and_sums_to_one_over_every_output():
    """log P(x̃ | x, y) over every possible output (each pair × each RR report) sums to 1 for a record."""
    m = TripleRecordMechanism(KS, 2, 1.0, oracle="rr")
    x, y = np.array([1, 2, 3]), 1
    outs = []
    for (j, k), o in zip(m.pairs, m.oracles):
        for v in range(o.k):
            row = np.full(3, np.nan)
            row[[j, k]] = v
            outs.append(row)
    Xt = np.array(outs)
    ll = m.log_likelihood(Xt, None, np.repeat(x[None], len(outs), axis=0), np.full(len(outs), y))
    assert np.exp(ll).sum() == pytest.approx(1.0, abs=1e-12)
    # and it is the report's oracle term plus the pair's 1/3
    L = m.triple_log_likelihood(0, 1, Xt[:1, 0])  # the first output: pair (0, 1), report 0
    assert L.shape == (1, 2, 3, 2)
    assert ll[0] == pytest.approx(L[0, 1, 2, 1] - math.log(3))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda X: X.__setitem__((0, int(np.flatnonzero(~np.isnan(X[0]))[0])), np.nan), "releases 1 attributes"),
        (lambda X: X.__setitem__((0, slice(None)), 0.0), "releases 3 attributes"),
        (lambda X: X.__setitem__((0, int(np.flatnonzero(~np.isnan(X[0]))[1])), -5.0), "differ"),
        (lambda X: X.__setitem__((0, np.flatnonzero(~np.isnan(X[0]))), 999.0), "triple reports"),
    ],
)
def test_a_malformed_release_is_refused_naming_x_tilde(change, message):
    m = TripleRecordMechanism(KS, 2, 1.0, oracle="rr")
    Xt, _ = m.release(*records(20, 0), rng=np.random.default_rng(0))
    change(Xt)
    with pytest.raises(ValidationError) as exc:
        m.validate_release(Xt)
    assert exc.value.field == "X_tilde" and message in exc.value.message


def reply(m, Xt, y=None):
    n = Xt.shape[0]
    parts = {
        "x": Xt,
        "y": np.full(n, np.nan) if y is None else y,
        "client_id": np.arange(n),
        "mechanism_index": np.zeros(n, np.int64),
    }
    import json

    return parts, json.dumps([m.to_spec()])


def test_the_pool_takes_triples_and_rejects_a_bad_reply_with_its_reason():
    m = TripleRecordMechanism(KS, 2, 1.0, oracle="olh")
    Xt, _ = m.release(*records(50, 0), rng=np.random.default_rng(0))
    rel = validate_release_arrays(*reply(m, Xt), 3)
    assert rel.x.shape == (50, 3) and record_mechanism_from_spec(__import__("json").loads(rel.mechanisms[0])) == m
    bad = Xt.copy()
    bad[0] = 1.0
    with pytest.raises(ReplyRejected) as exc:
        validate_release_arrays(*reply(m, bad), 3)
    assert exc.value.reason == "wrong_sampling"
    with pytest.raises(ReplyRejected) as exc:
        validate_release_arrays(*reply(m, Xt, y=np.zeros(50)), 3)
    assert exc.value.reason == "label_released"


def test_the_audit_certifies_an_honest_triple_and_fails_a_misclaimed_one():
    from fedrr.testing.audit_suite import run_cases, standard_cases

    cases = [c for c in standard_cases(quick=True) if "triple" in c.name]
    assert len(cases) == 3 and sum(not c.expect_pass for c in cases) == 1
    rows = run_cases(cases, seed=3)
    assert all(r["as_expected"] for r in rows), [r["result"] for r in rows]


def test_code_that_reads_pair_reports_refuses_triples_by_name():
    from fedrr.estimators import joint_frequencies
    from fedrr.learners import check_accepts

    m = TripleRecordMechanism(KS, 2, 1.0)
    Xt, yt = m.release(*records(200, 0), rng=np.random.default_rng(0))
    for kw, field in (({"robust": "margins"}, "robust"), ({"method": "mle"}, "method")):
        with pytest.raises(ValidationError) as exc:
            LDPNaiveBayes(**kw).fit(Xt, yt, mechanism=m)
        assert exc.value.field == field
    with pytest.raises(ValidationError) as exc:
        joint_frequencies(Xt, yt, m)
    assert exc.value.field == "mechanism" and "triples" in exc.value.message
    with pytest.raises(ValidationError) as exc:
        check_accepts(["spread", "ldp-nb-robust"], m)
    assert exc.value.field == "learners" and "'ldp-nb-robust' cannot learn from triple releases" in exc.value.message
    check_accepts(["spread", "spread-plain", "spread-public", "ldp-nb", "majority", "clean", "clean-nb"], m)


def test_naive_bayes_on_triples_reads_each_pair_table_off_the_triples_margins():
    """LDPNaiveBayes on triple releases: each debiased pair table within 5 predicted standard deviations
    (the planner's ``predicted_variance`` of the same estimator) of the population's own table."""
    from fedrr.planning import predicted_variance

    ks, n = (2, 3, 4), 200_000
    rng = np.random.default_rng(5)
    y = (rng.random(n) < 0.3).astype(np.int64)
    X = np.stack([np.minimum(rng.integers(0, k, n) + y * rng.integers(0, 2, n), k - 1) for k in ks], axis=1)
    m = TripleRecordMechanism(ks, 2, 2.0, oracle="rr")
    Xt, yt = m.release(X, y, rng=rng)
    nb = LDPNaiveBayes().fit(Xt, yt, mechanism=m)
    truth = [np.histogram2d(X[:, j], y, bins=[np.arange(k + 1), [0, 1, 2]])[0] / n for j, k in enumerate(ks)]
    sd = [np.sqrt(v) for v in predicted_variance(m, n, reference=truth).cell_variance]
    for est, t, s in zip(nb.joint_unbiased_, truth, sd):
        assert np.all(np.abs(est - t) < 5 * s), (est, t, s)
    assert nb.score(X, y) > 0.6


def test_the_frequency_check_tests_each_pairs_triple_reports_and_their_counts():
    from fedrr.frequency_check import frequency_check

    m = TripleRecordMechanism(KS, 2, 1.0, oracle="rr")
    Xt, yt = m.release(*records(3000, 0), rng=np.random.default_rng(0))
    assert not frequency_check(Xt, yt, m).flagged
    forged = Xt.copy()  # 400 people who all report one triple value of pair (0, 1): far too many
    rows = np.flatnonzero(~np.isnan(forged[:, 0]) & ~np.isnan(forged[:, 1]))[:400]
    forged[rows, 0] = forged[rows, 1] = 0.0
    assert frequency_check(forged, yt, m).flagged


# ------------------------------------------------------------------------------ config, sweep, federation
def triple_scenario():
    return {
        "population": {"dataset": "adult_binned", "n_clients": 3000},
        "privacy": {"mechanism": "triple", "epsilon_grid": [2.0]},
        "learners": {"names": ["spread-plain", "ldp-nb", "clean"]},
    }


def test_a_triple_scenario_runs_its_cell_and_refuses_what_it_would_not_use(tmp_path):
    from fedrr.experiment import parse_scenario, run_cell

    spec = parse_scenario(triple_scenario())
    cell = spec.cells()[0]
    cfg = cell.run_config()
    assert cfg.mechanism == "triple" and cfg.feature_epsilon == 2.0 and cfg.label_epsilon is None
    rec = run_cell(cell, tmp_path)
    assert rec["eps"]["record"] == pytest.approx(2.0) and rec["eps"]["label"] == 0.0
    assert "triple" in rec["params"]["text"] and not rec["frequency_check"]["flagged"]
    assert "accuracy" in rec["learners"]["spread-plain"] and "accuracy" in rec["learners"]["clean"]
    assert "accuracy" in rec["learners"]["ldp-nb"]
    for extra, key in (({"n_sampled": 2}, "privacy.n_sampled"), ({"label_epsilon": 1.0}, "privacy.label_epsilon")):
        data = triple_scenario()
        data["privacy"] |= extra
        with pytest.raises(ValidationError) as exc:
            parse_scenario(data)
        assert exc.value.field == key


# ------------------------------------------------------------------------------ spread's fit
def chain_records(n: int, seed: int, ks=(3, 3, 2, 3)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Records whose attributes are a Markov chain (a tree: the tree prior's family) and whose label is
    logistic in their one-hot states; returns (X, y, the true coefficients (one-hot, state 0 the
    reference) with the intercept last)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, len(ks)), np.int64)
    X[:, 0] = rng.integers(0, ks[0], n)
    for d in range(1, len(ks)):
        keep = rng.random(n) < 0.6
        X[:, d] = np.where(keep, np.minimum(X[:, d - 1], ks[d] - 1), rng.integers(0, ks[d], n))
    coef = np.array([0.8, 1.4, -0.9, -0.4, 1.0, 0.5, -0.7])  # (3−1) + (3−1) + (2−1) + (3−1) inputs
    onehot = np.concatenate([np.eye(k)[X[:, d]][:, 1:] for d, k in enumerate(ks)], axis=1)
    b = -0.6
    y = (rng.random(n) < 1 / (1 + np.exp(-(onehot @ coef + b)))).astype(np.int64)
    return X, y, np.append(coef, b)


@pytest.mark.parametrize("prior", ["tree", "auto"])
def test_spread_on_triples_is_unbiased_where_one_pair_is_not(prior):
    """Twelve independent populations of 60,000 people released as triples at ε 2: the fit's mean
    coefficients are within 4 standard errors (of the mean, from the twelve fits' spread) of the truth,
    with the tree prior and with the defaults' ("pairwise" on triples: rows of the tree reweighted to
    every pair's table). The control, one (attribute, label) pair per person with the naive-Bayes prior,
    is biased far beyond its own standard error on the same people: the test can fail."""
    ks = (3, 3, 2, 3)
    fits, ctrl = [], []
    for seed in range(12):
        X, y, truth = chain_records(60_000, seed, ks)
        rng = np.random.default_rng(100 + seed)
        m = TripleRecordMechanism(ks, 2, 2.0)
        Xt, yt = m.release(X, y, rng=rng)
        est = SpreadLogisticRegression(C=np.inf, prior=prior, encoding="onehot", random_state=seed)
        est.fit(Xt, yt, mechanism=m)
        assert est.solver_ == "direct" and est.converged_
        assert ("pairwise" in est.prior_) == (prior == "auto")
        fits.append(np.append(est.coef_[0], est.intercept_))
        p = PairedRecordMechanism(ks, 2, 2.0)
        Xp, yp = p.release(X, y, rng=rng)
        one = SpreadLogisticRegression(C=np.inf, prior="naive-bayes", encoding="onehot", random_state=seed)
        one.fit(Xp, yp, mechanism=p)
        ctrl.append(np.append(one.coef_[0], one.intercept_))
    fits, ctrl = np.array(fits), np.array(ctrl)
    se = fits.std(axis=0, ddof=1) / np.sqrt(len(fits))
    z = (fits.mean(axis=0) - truth) / se
    assert np.all(np.abs(z) < 4.0), z.round(2)
    z_ctrl = (ctrl.mean(axis=0) - truth) / (ctrl.std(axis=0, ddof=1) / np.sqrt(len(ctrl)))
    assert np.max(np.abs(z_ctrl)) > 8.0, z_ctrl.round(2)


def test_spread_refuses_what_it_cannot_fit_on_triples():
    m = TripleRecordMechanism(KS, 2, 1.0)
    Xt, yt = m.release(*records(500, 0), rng=np.random.default_rng(0))
    for kw, field in (({"solver": "em", "prior": "naive-bayes"}, "solver"), ({"prior": "latent-class"}, "prior")):
        with pytest.raises(ValidationError) as exc:
            SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=m)
        assert exc.value.field == field
    with pytest.raises(ValidationError) as exc:
        SpreadLogisticRegression(prior="learned").fit(Xt, yt, mechanism=m)
    assert exc.value.field == "prior"
    with pytest.raises(ValidationError) as exc:
        SpreadLogisticRegressionCV(fallback=True).fit(Xt, yt, mechanism=m)
    assert exc.value.field == "fallback"


def test_the_cv_selects_c_on_held_out_triples_and_keeps_its_model():
    ks = (3, 3, 2, 3)
    X, y, _ = chain_records(20_000, 7, ks)
    m = TripleRecordMechanism(ks, 2, 2.0)
    Xt, yt = m.release(X, y, rng=np.random.default_rng(7))
    cv = SpreadLogisticRegressionCV(Cs=[0.01, 1.0], random_state=0).fit(Xt, yt, mechanism=m)
    assert cv.fallback_ is False and cv.C_ in (0.01, 1.0)
    assert np.all(np.isfinite(cv.cv_results_["mean_test_score"]))
    assert cv.estimator_.solver_ == "direct" and cv.estimator_.prior_ is not None
    assert cv.score(X, y) > np.mean(y == np.bincount(y).argmax())


def test_every_pair_shows_up_in_the_triples_units():
    from fedrr.estimators.spread._pair_reports import triple_units

    m = TripleRecordMechanism(KS, 2, 1.0, oracle="rr")
    Xt, _ = m.release(*records(3000, 0), rng=np.random.default_rng(0))
    units, n = triple_units([(m, np.arange(3000))], Xt)
    assert n == 3000 and sorted(units) == list(itertools.combinations(range(3), 2))
    for (j, k), (cnt, L) in units.items():
        assert L.shape == (cnt.size, KS[j] * KS[k] * 2)


def test_the_naive_learner_reads_a_triple_report_as_its_two_attributes_and_label():
    """``decode_paired`` on randomised-response triples: the point guess is the report itself, so the
    decoded (x_j, x_k, y) re-encode to exactly the report, in both of its columns."""
    from fedrr.learners import decode_paired

    m = TripleRecordMechanism(KS, 2, 1.0, oracle="rr")
    X, y = records(500, 3)
    Xt, _ = m.release(X, y, rng=np.random.default_rng(3))
    Xd, yd = decode_paired(Xt, m)
    released = ~np.isnan(Xt)
    assert np.array_equal(~np.isnan(Xd), released)
    for r in range(500):
        j, k = np.flatnonzero(released[r])
        assert (Xd[r, j] * KS[k] + Xd[r, k]) * 2 + yd[r] == Xt[r, j]


def test_a_budget_mix_of_triples_is_fitted_by_spread_and_refused_by_naive_bayes_by_name():
    ks = (3, 3, 2, 3)
    X, y, _ = chain_records(6000, 4, ks)
    mechs = [TripleRecordMechanism(ks, 2, 1.0), TripleRecordMechanism(ks, 2, 4.0)]
    per = [mechs[i % 2] for i in range(6000)]
    rng = np.random.default_rng(4)
    Xt = np.vstack([m.release(X[i : i + 1], y[i : i + 1], rng=rng)[0] for i, m in enumerate(per)])
    est = SpreadLogisticRegression(encoding="onehot", random_state=0).fit(Xt, None, mechanism=per)
    assert est.solver_ == "direct" and est.score(X, y) > np.mean(y == np.bincount(y).argmax())
    assert "pairwise" in est.prior_  # "auto" on a budget mix of triples, as on one triple mechanism
    with pytest.raises(ValidationError) as exc:
        LDPNaiveBayes().fit(Xt, None, mechanism=per)
    assert exc.value.field == "mechanism" and "triple" in exc.value.message


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: TripleRecordMechanism(KS, 2, 1e-300), "epsilon"),
        (lambda: SpreadLogisticRegression().fit(*_strings_for_y()), "y"),
    ],
)
def test_bad_input_on_triples_names_its_field(call, field):
    with pytest.raises(ValidationError) as exc:
        call()
    assert exc.value.field == field


def _strings_for_y():
    m = TripleRecordMechanism(KS, 2, 1.0)
    Xt, _ = m.release(*records(50, 0), rng=np.random.default_rng(0))
    return Xt, np.array(["a"] * 50), m


def test_the_planner_keeps_max_sampled_one_to_one_attribute_per_person():
    from fedrr.planning import plan_release

    plan = plan_release([8, 6, 3, 2, 5, 7, 7, 14, 6, 5, 2, 41], 2, 4.0, 100_000, max_sampled=1)
    assert all(c.n_sampled == 1 for c in plan.candidates) and not isinstance(plan.mechanism, TripleRecordMechanism)
