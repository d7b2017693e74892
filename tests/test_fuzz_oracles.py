"""Bad-input fuzzing (hypothesis, derandomised) of the new mechanisms: unary encoding, local hashing,
frequency_oracle, the Piecewise and Duchi mechanisms, and records with attribute sampling.

Each property: either fedrr's ``ValidationError`` naming one of the inputs, or an accepted object that
behaves (finite ε > 0, an exact JSON spec round trip, finite releases/likelihoods of the right shape).
A foreign exception, a floating-point warning turned error, or a silently accepted impossible input is
a bug to fix at the boundary; the ones found are pinned in ``REGRESSIONS`` at the bottom. Default run:
a few hundred examples per property; ``*_slow`` variants (``-m slow``) run many more.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fedrr.errors import ValidationError
from fedrr.estimators import estimate_frequencies
from fedrr.mechanisms import (
    DuchiMechanism,
    GaussianPrior,
    HistogramPrior,
    LaplaceMechanism,
    LocalHashing,
    PiecewiseMechanism,
    RandomizedResponse,
    RecordMechanism,
    UnaryEncoding,
    frequency_oracle,
    mechanism_from_spec,
)

settings.register_profile("fedrr-fuzz", derandomize=True, deadline=None, database=None, print_blob=True)
FUZZ = settings.get_profile("fedrr-fuzz")
N = {"ctor": (300, 5000), "spec": (300, 5000), "release": (400, 8000), "record": (300, 5000), "freq": (150, 2000)}


def fuzz(prop, strategy, name):
    fast_n, slow_n = N[name]

    @settings(FUZZ, max_examples=fast_n)
    @given(strategy)
    def fast(case):
        prop(case)

    @pytest.mark.slow
    @settings(FUZZ, max_examples=slow_n)
    @given(strategy)
    def slow(case):
        prop(case)

    fast.__doc__ = slow.__doc__ = prop.__doc__
    return fast, slow


def assert_error(exc: BaseException, allowed) -> None:
    assert isinstance(exc, ValidationError), f"{type(exc).__name__}: {exc}"
    assert isinstance(exc.field, str) and exc.field and str(exc).startswith(f"{exc.field}: "), exc
    ok = allowed(exc.field) if callable(allowed) else exc.field in allowed
    assert ok, f"field {exc.field!r} is not one of the inputs: {exc}"


SPECIAL = st.sampled_from([0.0, -0.0, -1.0, 1e-300, 5e-324, 1e300, -1e300, math.nan, math.inf, -math.inf])
WEIRD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2**63, 10**30, 10**400, -(10**400), 2**53 + 1]),
    SPECIAL,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.one_of(st.integers(-2, 5), SPECIAL), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(-1, 2), max_size=2),
)


def mostly(valid, bad=WEIRD, one_in: int = 4):
    return st.integers(1, one_in).flatmap(lambda i: bad if i == one_in else valid)


EPS = mostly(st.one_of(st.floats(1e-3, 12), st.sampled_from([1e-9, 1e-6, 29.9, 30.0, 31.0, 0.01])))
BOUNDS = mostly(
    st.tuples(st.floats(-1e6, 1e6), st.floats(1e-6, 1e6)).map(lambda t: (t[0], t[0] + t[1])),
    st.tuples(WEIRD, WEIRD) | st.sampled_from([(1.0, 1.0), (2.0, 1.0), (-1e308, 1e308), ([0.0, 1.0], 2.0)]),
)

CTORS = {
    "oue": (
        st.fixed_dictionaries({"k": mostly(st.integers(2, 60)), "epsilon": EPS}),
        lambda a: UnaryEncoding(a["k"], a["epsilon"]),
        {"k", "epsilon"},
    ),
    "olh": (
        st.fixed_dictionaries(
            {
                "k": mostly(st.one_of(st.integers(2, 3000), st.sampled_from([10**7, 2**27, 2**40]))),
                "epsilon": EPS,
                "g": mostly(st.one_of(st.none(), st.integers(2, 50), st.sampled_from([10**6, 2**40]))),
            }
        ),
        lambda a: LocalHashing(a["k"], a["epsilon"], g=a["g"]),
        {"k", "epsilon", "g"},
    ),
    "pm": (
        st.fixed_dictionaries(
            {
                "epsilon": EPS,
                "bounds": BOUNDS,
                "resolution": mostly(st.one_of(st.none(), st.integers(1, 50), st.sampled_from([2**30, 2**45]))),
            }
        ),
        lambda a: PiecewiseMechanism(a["epsilon"], *a["bounds"], resolution=a["resolution"]),
        {"epsilon", "lower", "upper", "resolution"},
    ),
    "duchi": (
        st.fixed_dictionaries({"epsilon": EPS, "bounds": BOUNDS}),
        lambda a: DuchiMechanism(a["epsilon"], *a["bounds"]),
        {"epsilon", "lower", "upper"},
    ),
    "oracle": (
        st.fixed_dictionaries(
            {
                "k": mostly(st.one_of(st.integers(2, 400), st.sampled_from([10**6, 2**62]))),
                "epsilon": mostly(st.floats(1e-3, 40)),
                "rule": mostly(st.sampled_from(["variance", "wang"]), st.sampled_from(["best", None, 1])),
            }
        ),
        lambda a: frequency_oracle(a["k"], a["epsilon"], rule=a["rule"]),
        {"k", "epsilon", "rule"},
    ),
    "record": (
        st.fixed_dictionaries(
            {
                "features": st.sampled_from(
                    [
                        UnaryEncoding(4, 1.0),
                        [LocalHashing(30, 1.0), PiecewiseMechanism(1.0), LaplaceMechanism(1.0, [0, 0], [1, 1])],
                        [DuchiMechanism(0.5), RandomizedResponse(3, 0.2)],
                    ]
                ),
                "n_features": st.sampled_from([None, 1, 3, 4]),
                "n_sampled": mostly(st.one_of(st.none(), st.integers(0, 5))),
            }
        ),
        lambda a: RecordMechanism(
            a["features"], RandomizedResponse(2, 0.1), n_features=a["n_features"], n_sampled=a["n_sampled"]
        ),
        {"features", "n_features", "n_sampled"},
    ),
}


def valid_input(mech, n: int = 4, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if isinstance(mech, RecordMechanism):
        X = np.empty((n, mech.n_features))
        for i, (m, cols) in enumerate(mech.groups()):
            size = n * (cols.size if m.width == 1 else 1)
            X[:, cols] = valid_input(m, size, seed + i).reshape(n, cols.size)
        return X
    if hasattr(mech, "k"):
        return rng.integers(0, mech.k, n)
    if mech.width == 1:  # mid + half·u: no overflow for boxes like [-1e308, 1e308]
        lo, hi = float(mech.lower[0]), float(mech.upper[0])
        return np.clip(lo / 2 + hi / 2 + (hi / 2 - lo / 2) * rng.uniform(-1, 1, n), lo, hi)
    return rng.uniform(mech.lower, mech.upper, (n, mech.width))


def check_accepted(mech) -> None:
    eps = mech.epsilon
    assert isinstance(eps, float) and math.isfinite(eps) and eps > 0, eps
    spec = json.loads(json.dumps(mech.to_spec()))
    again = mechanism_from_spec(spec)
    assert again == mech and again.epsilon == eps
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        if isinstance(mech, RecordMechanism):
            X, y = valid_input(mech), None if mech.label is None else np.array([0, 1, 1, 0])
            Xt, yt = mech.release(X, y, rng=np.random.default_rng(0))
            ll = mech.log_likelihood(Xt, yt, X, y)
            assert ll.shape == (4,) and np.all(np.isfinite(ll))
            R = mech.released_fields(Xt)
            assert np.all(R.sum(1) == (mech.n_sampled or len(mech.fields)))
            return
        x = valid_input(mech)
        xt = mech.release(x, np.random.default_rng(0))
        assert xt.shape == x.shape and np.all(np.isfinite(xt))
        mech.validate_release(xt)
        assert np.all(np.isfinite(mech.log_likelihood(xt, x)))


def check_ctor(case) -> None:
    """Constructors on fuzzed arguments: ValidationError naming an argument, or a working mechanism."""
    name, args = case
    _, ctor, fields = CTORS[name]
    try:
        mech = ctor(args)
    except ValidationError as exc:
        assert_error(exc, fields)
        return
    check_accepted(mech)


ctor_cases = st.sampled_from(sorted(CTORS)).flatmap(lambda n: st.tuples(st.just(n), CTORS[n][0]))
test_constructors, test_constructors_slow = fuzz(check_ctor, ctor_cases, "ctor")


# ----------------------------------------------------------------------------- specs
BASE_SPECS = [
    UnaryEncoding(5, 1.0).to_spec(),
    LocalHashing(40, 2.0).to_spec(),
    PiecewiseMechanism(1.0, 0.0, 3.0).to_spec(),
    PiecewiseMechanism(2.0, resolution=3).to_spec(),
    DuchiMechanism(0.5, -2.0, 2.0).to_spec(),
    RecordMechanism([UnaryEncoding(3, 1.0), DuchiMechanism(1.0)], RandomizedResponse(2, 0.1), n_sampled=1).to_spec(),
    RecordMechanism(PiecewiseMechanism(1.0), None, n_features=3, n_sampled=2).to_spec(),
]
KINDS = ["unary_encoding", "local_hashing", "piecewise", "duchi", "record", "laplace", ""]


def mutate(draw, spec, depth=0):
    spec = copy.deepcopy(spec)
    if not isinstance(spec, dict):
        return draw(WEIRD)
    op = draw(st.sampled_from(["drop", "add", "value", "kind", "nested"]))
    if op == "drop" and spec:
        spec.pop(draw(st.sampled_from(sorted(spec))))
    elif op == "add":
        spec[draw(st.sampled_from(["n_sampled", "g", "resolution", "x"]))] = draw(WEIRD)
    elif op == "value" and spec:
        key = draw(st.sampled_from(sorted(spec)))
        spec[key] = draw(st.one_of(WEIRD, st.floats(-10, 1e9), st.integers(-2, 2**60)))
    elif op == "kind":
        spec["kind"] = draw(st.one_of(st.sampled_from(KINDS), WEIRD))
    elif op == "nested" and depth < 2 and isinstance(spec.get("features"), list) and spec["features"]:
        i = draw(st.integers(0, len(spec["features"]) - 1))
        spec["features"][i] = mutate(draw, spec["features"][i], depth + 1)
    elif op == "nested" and depth < 2 and isinstance(spec.get("features"), dict):
        spec["features"]["replicate"] = mutate(draw, spec["features"].get("replicate"), depth + 1)
    return spec


@st.composite
def mutated_specs(draw):
    spec = draw(st.sampled_from(BASE_SPECS))
    for _ in range(draw(st.integers(1, 2))):
        spec = mutate(draw, spec)
    return spec


SPEC_FIELDS = {f for _, _, fs in CTORS.values() for f in fs} | {"spec", "P", "flip_prob", "sensitivity", "delta"}


def check_spec(spec) -> None:
    """mechanism_from_spec on mutated specs of the new kinds: ValidationError naming a spec entry or
    a constructor argument, or a mechanism that round-trips and works."""
    try:
        mech = mechanism_from_spec(spec)
    except ValidationError as exc:
        assert_error(exc, lambda f: f in SPEC_FIELDS or f.startswith("spec."))
        return
    check_accepted(mech)


test_specs, test_specs_slow = fuzz(check_spec, mutated_specs(), "spec")


# ----------------------------------------------------------------------------- arrays
FIXED = {
    "oue": UnaryEncoding(4, 1.0),
    "olh": LocalHashing(20, 1.0),
    "pm": PiecewiseMechanism(1.0, 0.0, 10.0),
    "pm_coarse": PiecewiseMechanism(2.0, -1.0, 1.0, resolution=3),
    "duchi": DuchiMechanism(1.0, -5.0, 5.0),
}
ARRAYS = st.one_of(
    hnp.arrays(
        st.sampled_from(
            [np.int8, np.int64, np.uint64, np.float16, np.float32, np.float64, np.bool_, np.complex128, "U3"]
        ),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), elements=st.floats(-20, 1e6)),
    st.lists(st.one_of(st.integers(-1, 20), SPECIAL, st.lists(st.integers(0, 2), max_size=2)), max_size=4),
    WEIRD,
)


@st.composite
def near_valid(draw, mech, released: bool):
    """Honest values (releases or clean inputs), maybe with one entry, the dtype or the shape broken."""
    how = draw(st.sampled_from(["valid", "valid", "corrupt", "fuzz"]))
    if how == "fuzz":
        return draw(ARRAYS)
    n = draw(st.integers(0, 4))
    a = valid_input(mech, n, draw(st.integers(0, 9)))
    if released:
        a = mech.release(a, np.random.default_rng(draw(st.integers(0, 9))))
    if draw(st.booleans()):
        a = a.reshape(draw(st.sampled_from([(n,), (n, 1), (1, n)])))
    if how == "corrupt" and a.size:
        b = a.astype(float)
        idx = tuple(draw(st.integers(0, s - 1)) for s in a.shape)
        b[idx] = draw(st.one_of(SPECIAL, st.floats(-1e3, 1e3), st.sampled_from([0.5, 2.0**52, 1e17])))
        return b
    return a


@st.composite
def array_cases(draw):
    name = draw(st.sampled_from(sorted(FIXED)))
    mech = FIXED[name]
    method = draw(st.sampled_from(["validate_release", "release", "log_likelihood", "matrix", "onehot", "posterior"]))
    return name, method, draw(near_valid(mech, True)), draw(near_valid(mech, False)), draw(st.booleans())


def check_arrays(case) -> None:
    """validate_release / release / log_likelihood / log_likelihood_matrix / unbiased_onehot /
    posterior on fuzzed arrays: ValidationError naming x or x_tilde, or finite outputs of the right shape."""
    name, method, a, b, histogram = case
    mech = FIXED[name]
    discrete = hasattr(mech, "k")
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            if method == "validate_release":
                out, shape = mech.validate_release(a), np.shape(a)
            elif method == "release":
                out, shape = mech.release(b, np.random.default_rng(0)), np.shape(b)
                mech.validate_release(out)
            elif method == "log_likelihood":
                out = mech.log_likelihood(a, b)
                shape = np.broadcast_shapes(np.shape(a), np.shape(b))
            elif method in ("matrix", "onehot") and discrete:
                out = mech.log_likelihood_matrix(a) if method == "matrix" else mech.unbiased_onehot(a)
                shape = np.shape(a) + (mech.k,)
            elif method == "posterior" and not discrete:
                if histogram:
                    prior = HistogramPrior.uniform(mech.lower[0], mech.upper[0], 3)
                else:
                    prior = GaussianPrior(float(mech.mid), mech.half**2)
                post = mech.posterior(a, prior)
                out, shape = post.mean(), np.shape(a)
            else:
                return
    except ValidationError as exc:
        assert_error(exc, {"x", "x_tilde"})
        return
    assert np.shape(out) == shape and np.all(np.isfinite(out))


test_arrays, test_arrays_slow = fuzz(check_arrays, array_cases(), "release")


# ----------------------------------------------------------------------------- sampled records
SAMPLED = [
    RecordMechanism(
        [UnaryEncoding(3, 1.0), LaplaceMechanism(1.0, [0.0, 0.0], [1.0, 1.0]), PiecewiseMechanism(1.0)],
        RandomizedResponse(2, 0.2),
        n_sampled=1,
    ),
    RecordMechanism(DuchiMechanism(0.5, 0.0, 1.0), None, n_features=4, n_sampled=3),
    RecordMechanism([LocalHashing(10, 1.0), RandomizedResponse(3, 0.2)], RandomizedResponse(2, 0.1), n_sampled=2),
]


@st.composite
def record_cases(draw):
    rm = SAMPLED[draw(st.integers(0, len(SAMPLED) - 1))]
    n = draw(st.integers(1, 4))
    X = valid_input(rm, n, draw(st.integers(0, 9)))
    y = None if rm.label is None else np.arange(n) % 2
    Xt, yt = rm.release(X, y, rng=np.random.default_rng(draw(st.integers(0, 9))))
    how = draw(st.sampled_from(["none", "nan", "unnan", "value", "label", "shape", "fuzz"]))
    if how == "nan":  # withhold one more entry
        Xt[draw(st.integers(0, n - 1)), draw(st.integers(0, rm.n_features - 1))] = np.nan
    elif how == "unnan":  # release an entry that was withheld
        r, c = draw(st.integers(0, n - 1)), draw(st.integers(0, rm.n_features - 1))
        Xt[r, c] = Xt[r, c] if not np.isnan(Xt[r, c]) else draw(st.sampled_from([0.0, 1.0, 0.5]))
    elif how == "value":
        Xt[draw(st.integers(0, n - 1)), draw(st.integers(0, rm.n_features - 1))] = draw(
            st.one_of(SPECIAL, st.floats(-10, 10))
        )
    elif how == "label" and yt is not None:
        yt = yt.astype(float)
        yt[0] = draw(st.one_of(SPECIAL, st.sampled_from([2.0, 0.5])))
    elif how == "shape":
        Xt = draw(st.sampled_from([Xt[:, :-1], Xt[:, :, None], Xt.ravel(), Xt[:0]]))
    elif how == "fuzz":
        Xt = draw(ARRAYS)
    return rm, draw(st.sampled_from(["validate_release", "log_likelihood", "released_fields"])), X, Xt, yt


def check_record(case) -> None:
    """Sampled records: validate_release / log_likelihood / released_fields on mutated releases give
    ValidationError naming X_tilde or y_tilde, or a release with exactly n_sampled whole fields per row
    whose likelihood is finite."""
    rm, method, X, Xt, yt = case
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            if method == "released_fields":
                R = rm.released_fields(Xt)
                Xv = np.asarray(Xt, float).reshape(R.shape[0], rm.n_features)
            else:
                Xv, _ = rm.validate_release(Xt, yt)
                R = rm.released_fields(Xv)
                if method == "log_likelihood" and Xv.shape[0] == X.shape[0]:
                    y = None if rm.label is None else np.arange(X.shape[0]) % 2
                    assert np.all(np.isfinite(rm.log_likelihood(Xv, yt, X, y)))
    except ValidationError as exc:
        assert_error(exc, {"X_tilde", "y_tilde", "X"})
        return
    assert np.all(R.sum(1) == rm.n_sampled)
    for i, f in enumerate(rm.fields):
        cols = list(f.columns)
        assert np.array_equal(np.isnan(Xv[:, cols]).all(1), ~R[:, i]) and not np.isnan(Xv[R[:, i]][:, cols]).any()


test_records, test_records_slow = fuzz(check_record, record_cases(), "record")


# ----------------------------------------------------------------------------- frequency estimation
@st.composite
def freq_cases(draw):
    mech = draw(st.sampled_from([FIXED["oue"], FIXED["olh"], RandomizedResponse(4, 0.3)]))
    xt = draw(near_valid(mech, True))
    try:
        ones = np.ones(np.size(xt))
    except ValueError:  # ragged fuzz input
        ones = None
    weights = draw(st.one_of(st.none(), ARRAYS, st.just(ones)))
    return mech, xt, weights, draw(st.sampled_from(["inversion", "mle", "em", None]))


def check_frequencies(case) -> None:
    """estimate_frequencies on fuzzed releases and weights: ValidationError naming an argument, or a
    distribution over the k states."""
    mech, xt, weights, method = case
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            pi = estimate_frequencies(xt, mech, method=method, weights=weights)
    except ValidationError as exc:
        assert_error(exc, {"x_tilde", "weights", "method"})
        return
    assert pi.shape == (mech.k,) and np.all(pi >= 0) and pi.sum() == pytest.approx(1.0)


test_frequencies, test_frequencies_slow = fuzz(check_frequencies, freq_cases(), "freq")


# ----------------------------------------------------------------------------- regressions
#: (id, call, field, what happened before the fix): inputs the fuzzing found, now rejected by name
REGRESSIONS = [
    (
        "freq_weight_int_overflow",
        lambda: estimate_frequencies([12.0], UnaryEncoding(4, 1.0), weights=10**400),
        "weights",
        "OverflowError: int too large to convert to float",
    ),
    (
        "freq_weight_sum_overflow",
        lambda: estimate_frequencies([1, 2], RandomizedResponse(4, 0.3), weights=[1e308, 1e308]),
        "weights",
        "accepted: the weights' sum overflowed and the estimate was NaN",
    ),
    (
        "freq_complex_weights",
        lambda: estimate_frequencies([1, 2], RandomizedResponse(4, 0.3), weights=[1 + 1j, 1.0]),
        "weights",
        "accepted: ComplexWarning, the imaginary part silently dropped",
    ),
]
#: (id, call, what happened before the fix): valid inputs that must now simply work (no warning either)
ACCEPTED = [
    (
        "pm_huge_box",
        lambda: PiecewiseMechanism(3.0, -1e308, 1e308).release([0.0], np.random.default_rng(0)),
        "OverflowError: cannot convert float infinity to integer (the default resolution's cell count)",
    ),
    (
        "duchi_huge_box_release_check",
        lambda: DuchiMechanism(2.0, -1e308, 1e308).validate_release(DuchiMechanism(2.0, -1e308, 1e308).values),
        "FloatingPointError: overflow in x̃ − value when matching a release to the other value",
    ),
]


@pytest.mark.parametrize("call, field", [r[1:3] for r in REGRESSIONS], ids=[r[0] for r in REGRESSIONS])
def test_regressions(call, field):
    with pytest.raises(ValidationError) as e:
        call()
    assert e.value.field == field


@pytest.mark.parametrize("call", [r[1] for r in ACCEPTED], ids=[r[0] for r in ACCEPTED])
def test_accepted_regressions(call):
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        out = call()
    assert np.all(np.isfinite(out))
