"""Bad-input fuzzing with hypothesis (issue #7): every rejected input raises fedrr's own error type
naming the field; nothing escapes from deep inside numpy, sklearn, tomllib or json.

Five surfaces, one property each (plus ``*_slow`` variants with many more examples, ``-m slow``):

1. scenario configs (``fedrr.experiment._spec``): mutated shipped configs either load — and are
   then semantically valid: ``preflight`` passes or names a config key, and every cell's run config
   is accepted by the federation — or raise ``ValidationError`` whose ``field`` is a key path;
   TOML text and bytes mutations go through ``load_scenario``.
2. the federation run config (``RunConfig.from_flwr`` + ``build_population``): rejected with the run-config
   key named, or accepted with every value in range.
3. estimators (spread-EM, naive, reconstruction, W-DRO): ``fit``/``predict``/``predict_proba`` with
   fuzzed arrays and constructor parameters: ``ValidationError`` naming an input or a parameter, or
   finite outputs of the right shape.
4. mechanisms: constructors, ``mechanism_from_spec`` on mutated specs, ``validate_release``,
   ``release`` and ``log_likelihood`` on fuzzed arrays.
5. client replies (``parse_reply``): ``ReplyRejected`` with a known reason, or a release that every
   mechanism accepts.

Every bug the fuzzing found is pinned in ``REGRESSIONS`` at the bottom (input -> old exception).
All runs are derandomised (profile ``fedrr-fuzz``) so CI sees the same examples every time.
"""

from __future__ import annotations

import atexit
import copy
import json
import math
import os
import re
import shutil
import tempfile
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
from flwr.app import Array, ArrayRecord, ConfigRecord, Error, Message, RecordDict
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

from fedrr.assembly import build_population
from fedrr.errors import ValidationError
from fedrr.estimators import (
    NaiveLogisticRegression,
    ReconstructionLogisticRegression,
    SpreadLogisticRegression,
    WassersteinDROLogisticRegression,
)
from fedrr.experiment import CellSpec, load_scenario, parse_scenario
from fedrr.experiment._sections import GRID_KEYS, SECTIONS
from fedrr.experiment._sweep import preflight
from fedrr.federation import MESSAGE_TYPE, PROTOCOL, parse_reply, query_content, release_content
from fedrr.learners import names as learner_names
from fedrr.mechanisms import (
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    RecordMechanism,
    TransitionMatrix,
    mechanism_from_spec,
)
from fedrr.parallel import SerialExecutor
from fedrr.pool import Pool, ReplyRejected
from fedrr.release import Release
from fedrr.run_config import DEFAULTS, RunConfig
from fedrr.testing.faults import FAULT_KINDS

#: the scenario schema as {section: {key: kind}} (kind: what the fuzzer draws for it)
_KINDS = {
    "n_clients": "int_or_list",
    "epsilon_grid": "float_list",
    "feature_flip_grid": "float_list",
    "feature_epsilon_grid": "float_list",
    "names": "str_list",
    "label_flip": "float_or_str",
    "label_public": "bool",
    "split": "table",
    "budget_mix": "table",
    "options": "table",
}
SCHEMA = {
    sec: {
        f.name: _KINDS.get(f.name, {int: "int", float: "float", bool: "bool"}.get(type(f.default), "str"))
        for f in __import__("dataclasses").fields(cls)
    }
    for sec, cls in SECTIONS.items()
}
LEARNERS = tuple(dict.fromkeys(learner_names("classification") + learner_names("regression")))
RELEASE_LEARNERS = learner_names(oracles=False)

for _k, _v in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
    os.environ.setdefault(_k, _v)

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------------------------ settings
settings.register_profile("fedrr-fuzz", derandomize=True, deadline=None, database=None, print_blob=True)
FUZZ = settings.get_profile("fedrr-fuzz")
#: examples per property: (default run, ``-m slow`` run)
N = {
    "scenario": (200, 4000),
    "toml": (80, 1500),
    "runconfig": (300, 5000),
    "estimator": (300, 5000),
    "predict": (150, 2000),
    "mech_ctor": (400, 10000),
    "spec": (400, 10000),
    "release": (400, 10000),
    "record": (250, 5000),
    "reply": (400, 10000),
}


def fuzz(prop, strategy, name):
    """Two tests of one property: the default run and a ``slow``-marked run with many more examples."""
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
    """fedrr's ValidationError with a non-empty ``field`` from ``allowed`` (a set, or a predicate)."""
    assert isinstance(exc, ValidationError), f"{type(exc).__name__}: {exc}"
    assert isinstance(exc.field, str) and exc.field, exc
    assert str(exc).startswith(f"{exc.field}: "), exc
    ok = allowed(exc.field) if callable(allowed) else exc.field in allowed
    assert ok, f"field {exc.field!r} is not one of the inputs: {exc}"
    _event(f"rejected: {exc.field}"[:60])


def _event(what: str) -> None:
    """hypothesis.event (outcome statistics, ``--hypothesis-show-statistics``), also callable outside a test."""
    try:
        event(what)
    except InvalidArgument:
        pass


# ------------------------------------------------------------------------- generic bad values
HUGE_INTS = st.sampled_from([2**63, -(2**63) - 1, 10**30, 10**400, -(10**400)])
SPECIAL_FLOATS = st.sampled_from([0.0, -0.0, -1.0, 1e-300, 5e-324, 1e300, -1e300, math.nan, math.inf, -math.inf])
WEIRD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    HUGE_INTS,
    SPECIAL_FLOATS,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.sampled_from(["", "nan", "1.0", "inf", "same", "rr", "dataset"]),
    st.lists(st.one_of(st.integers(-2, 5), SPECIAL_FLOATS, st.text(max_size=2)), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(-1, 2), max_size=2),
)


# ================================================================== 1. scenario configs (TOML)

SHIPPED = {p.name: p.read_text() for p in sorted((ROOT / "configs").glob("*.toml"))}
SCENARIO_BASES = [tomllib.loads(t) for t in SHIPPED.values()] + [
    {
        "population": {"dataset": "digits_7_vs_9", "n_clients": 50},
        "privacy": {"mechanism": "rr", "epsilon_grid": [10.0]},
        "learners": {"names": ["naive"]},
    },
    {
        "population": {"dataset": "breast_cancer", "n_clients": [20, 40]},
        "privacy": {"mechanism": "laplace", "feature_epsilon_grid": [0.5, 2.0], "label_flip": 0.1},
        "learners": {"names": ["wdro"]},
    },
]
NAMES = {
    "dataset": ["mnist_7_vs_9", "digits_7_vs_9", "breast_cancer", "adult", "diabetes", "lending_club", "cifar10", ""],
    "mechanism": ["rr", "gaussian", "laplace", "rappor", "RR", ""],
    "mode": ["flower", "cohort", "offline", "federated"],
    "executor": ["serial", "threads", "ray", "dask"],
    "population": [
        "dataset",
        "fedrr.examples:TwoBudgetSyntheticPopulation",
        "mypkg.pops:Thing",
        "a:",
        ":b",
        "x",
    ],
    "label_flip": ["same", "other"],
}
#: options keys: a custom population's own, and run-config keys (which must not be overridable)
OPTION_KEYS = st.sampled_from(["n_test", "anything", "C", "seed", "n-clients", "n_clients", "dropout", "results-dir"])


def _scenario_value(section: str, key: str):
    kind = SCHEMA[section][key] if key in SCHEMA.get(section, {}) else "any"
    names = st.sampled_from(NAMES[key]) if key in NAMES else st.text(max_size=6)
    grid = st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-5, 20000),
            SPECIAL_FLOATS,
            st.sampled_from([1e-9, 0.1, 0.5, 0.99, 1.0, 2.0, 1e4, 1e6]),
            HUGE_INTS,
        ),
        max_size=5,
    )
    by_kind = {
        "int": st.integers(-3, 400),
        "float": st.one_of(st.floats(-2, 2000), st.sampled_from([0.0, 1e-5, 0.5, 0.999, 1.0])),
        "str": names,
        "table": (
            st.fixed_dictionaries(
                {"features": st.one_of(st.floats(-1, 2), WEIRD), "label": st.one_of(st.floats(-1, 2), WEIRD)}
            )
            if key == "split"
            else st.dictionaries(OPTION_KEYS, WEIRD, max_size=3)
        ),
        "int_or_list": st.one_of(st.integers(-2, 500), st.lists(st.one_of(st.integers(-2, 500), WEIRD), max_size=4)),
        "float_list": grid,
        "str_list": st.lists(st.sampled_from(LEARNERS + ("magic", "", "SPREAD")), max_size=5),
        "float_or_str": st.one_of(st.floats(-1, 2), st.sampled_from(NAMES["label_flip"])),
        "bool": st.booleans(),
    }
    return st.one_of(by_kind.get(kind, WEIRD), WEIRD)


@st.composite
def scenario_configs(draw):
    data = copy.deepcopy(draw(st.sampled_from(SCENARIO_BASES)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["drop", "unknown", "replace", "replace", "grid", "section", "move"]))
        sections = [s for s in data if isinstance(data[s], dict)]
        if op == "drop":
            paths = [(s, None) for s in data] + [(s, k) for s in sections for k in data[s]]
            if paths:
                s, k = draw(st.sampled_from(paths))
                data.pop(s) if k is None else data[s].pop(k)
        elif op == "unknown":
            where = draw(st.sampled_from([None] + list(SCHEMA)))
            key = draw(st.one_of(st.text(max_size=6), st.sampled_from([k for keys in SCHEMA.values() for k in keys])))
            if where is None:
                data[key] = draw(WEIRD)
            elif isinstance(data.setdefault(where, {}), dict):
                data[where][key] = draw(WEIRD)
        elif op in ("replace", "grid"):
            if op == "grid":
                s, k = "privacy", draw(st.sampled_from(GRID_KEYS))
                if draw(st.booleans()) and isinstance(data.get("privacy"), dict):
                    for g in GRID_KEYS:
                        data["privacy"].pop(g, None)
            else:
                s = draw(st.sampled_from(list(SCHEMA)))
                k = draw(st.sampled_from(list(SCHEMA[s])))
            if isinstance(data.setdefault(s, {}), dict):
                data[s][k] = draw(_scenario_value(s, k))
        elif op == "section":
            data[draw(st.sampled_from(list(SCHEMA)))] = draw(WEIRD)
        elif op == "move" and sections:
            s = draw(st.sampled_from(sections))
            if data[s]:
                k = draw(st.sampled_from(sorted(data[s])))
                v = data[s].pop(k)
                dst = draw(st.sampled_from([None] + list(SCHEMA)))
                if dst is None:
                    data[k] = v
                elif isinstance(data.setdefault(dst, {}), dict):
                    data[dst][k] = v
    return data


_KEY_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z0-9_-]+')


def _key_path(field: str) -> list[str] | None:
    """A TOML dotted key path ('privacy.split.label', '""', 'population.options."a b"') -> its keys."""
    parts, pos = [], 0
    while True:
        m = _KEY_PART.match(field, pos)
        if not m:
            return None
        parts.append(json.loads(m.group()) if m.group().startswith('"') else m.group())
        pos = m.end()
        if pos == len(field):
            return parts
        if field[pos] != ".":
            return None
        pos += 1


def _scenario_field(data):
    """A scenario error names a key path: 'config', a section, 'section.key[.sub]' or an unknown top-level key."""

    def ok(field: str) -> bool:
        parts = _key_path(field)
        if not parts:
            return False
        if parts[0] == "config" or (isinstance(data, dict) and parts[0] in data and parts[0] not in SCHEMA):
            return len(parts) == 1
        if parts[0] not in SCHEMA:
            return False
        given_keys = data.get(parts[0], {}) if isinstance(data, dict) and isinstance(data.get(parts[0]), dict) else {}
        return len(parts) == 1 or parts[1] in SCHEMA[parts[0]] or parts[1] in given_keys

    return ok


def check_scenario(data) -> None:
    """A mutated scenario config either loads (and is then valid all the way to the federation's run
    configs) or is rejected with ValidationError naming the key path."""
    try:
        cfg = parse_scenario(data)
    except ValidationError as exc:
        assert_error(exc, _scenario_field(data))
        return
    # accepted by the loader: the invariants the sweep relies on
    event("accepted by parse_scenario")
    grid = cfg.grid
    assert cfg.grid_axis in GRID_KEYS or (cfg.grid_axis == "" and not cfg.is_dataset)
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in grid) and len(set(grid)) == len(grid)
    if cfg.grid_axis == "feature_flip_grid":
        assert all(0 < v < 1 for v in grid)
    assert cfg.n_grid and all(isinstance(n, int) and n >= 1 for n in cfg.n_grid)
    assert cfg.scenario.repeats >= 1 and cfg.scenario.seed >= 0
    again = parse_scenario(cfg.as_dict(), name=cfg.name)
    assert again == cfg and again.grid_axis == cfg.grid_axis
    # what `fedrr check` runs before any cell: either passes or names a config key
    try:
        preflight(cfg)
    except ValidationError as exc:
        assert_error(exc, _scenario_field(data))
        return
    corners = [
        CellSpec(cfg, 0, 0, 0),
        CellSpec(cfg, max(len(grid), 1) - 1, len(cfg.n_grid) - 1, cfg.scenario.repeats - 1),
    ]
    for cell in corners:
        cell.privacy()
        rc = cell.run_config()  # an accepted scenario never produces a run config the federation rejects
        assert RunConfig.from_flwr(rc.to_flwr()) == rc and rc.n_clients == cfg.n_grid[cell.n]
        assert len(cell.fingerprint()) == 16
    event("accepted by preflight")


test_scenario_configs, test_scenario_configs_slow = fuzz(check_scenario, scenario_configs(), "scenario")


# --- the TOML text, through load_scenario -----------------------------------------------------
@st.composite
def toml_files(draw):
    text = draw(st.sampled_from(list(SHIPPED.values())))
    kind = draw(st.sampled_from(["cut", "insert", "line", "bytes", "value"]))
    if kind == "bytes":
        raw = text.encode()
        i = draw(st.integers(0, len(raw)))
        return raw[:i] + draw(st.binary(min_size=1, max_size=8)) + raw[i:]
    lines = text.splitlines()
    if kind == "cut":
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        text = text[:i] + text[j:]
    elif kind == "insert":
        i = draw(st.integers(0, len(text)))
        text = (
            text[:i]
            + draw(
                st.one_of(
                    st.text(max_size=12),
                    st.sampled_from(["[", "]", "=", '"', "\n[x]\n", "inf", "nan", "99999999999999999999999"]),
                )
            )
            + text[i:]
        )
    elif kind == "line":
        i = draw(st.integers(0, len(lines) - 1))
        lines[i] = draw(
            st.sampled_from(
                [
                    "n_clients = 1e400",
                    "seed = -1",
                    "repeats = 99999999999999999999999",
                    "epsilon_grid = [nan]",
                    "epsilon_grid = [inf, 1]",
                    "names = [1, 2]",
                    "split = {features = 1, label = 0}",
                    "[[scenario]]",
                    "mechanism = 3",
                    "n_clients = [ ]",
                    "x = {a = {b = 1}}",
                    "dropout = -0.0",
                ]
            )
        )
        text = "\n".join(lines)
    else:  # a key's value replaced by a random TOML value
        keyed = [i for i, ln in enumerate(lines) if "=" in ln and not ln.lstrip().startswith("#")]
        i = draw(st.sampled_from(keyed))
        key = lines[i].split("=")[0]
        val = draw(
            st.sampled_from(
                ["true", "0", "-1", "1.5", "nan", "-inf", "''", '"x"', "[]", "[1, 'a']", "{}", "1979-05-27", "0x10"]
            )
        )
        lines[i] = f"{key}= {val}"
        text = "\n".join(lines)
    return text.encode()


_TMP = tempfile.mkdtemp(prefix="fedrr-fuzz-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)


def check_toml_file(raw: bytes) -> None:
    """``load_scenario`` on a damaged TOML file: a config, or ValidationError (TOML syntax and encoding
    errors are reported as field 'config', with the file name)."""
    p = Path(_TMP) / "scenario.toml"
    p.write_bytes(raw)
    try:
        cfg = load_scenario(p)
    except ValidationError as exc:
        try:
            data = tomllib.loads(raw.decode())
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            assert exc.field == "config" and str(p) in str(exc), exc
            event("rejected: config (TOML syntax or encoding)")
            return
        assert_error(exc, _scenario_field(data))
        return
    check_scenario(tomllib.loads(raw.decode()))
    assert cfg.name


test_toml_files, test_toml_files_slow = fuzz(check_toml_file, toml_files(), "toml")


# ============================================================== 2. federation run config

RUN_BASES = [
    {"n-clients": 10},
    {
        "n-clients": 10,
        "mechanism": "gaussian",
        "feature-epsilon": 1.0,
        "dataset": "breast_cancer",
        "label-epsilon": 2.0,
    },
    {"n-clients": 10, "mechanism": "laplace", "feature-epsilon": 0.5, "dataset": "breast_cancer"},
    {"n-clients": 30, "budget-mix": "0.1:1,0.3:2", "run-mode": "cohort", "cohort-size": 10, "learners": "spread,wdro"},
    {"n-clients": 12, "dropout": 0.2, "executor": "serial"},
]
RUN_NAMES = {
    "population": [
        "dataset",
        "nope",
        "nope:Thing",
        "os:getcwd",
        "builtins:int",
        "fedrr.examples:Missing",
        ":x",
        ".x:y",
        "x:",
    ],
    "dataset": NAMES["dataset"],
    "mechanism": NAMES["mechanism"],
    "run-mode": ["node", "cohort", "flower"],
    "executor": NAMES["executor"],
    "learners": [
        "spread",
        "spread,naive",
        "naive-cv,wdro",
        "spread-flat",
        "",
        ",",
        "magic",
        "spread,magic",
        "clean",
        "spread, naive",
    ],
    "budget-mix": [
        "",
        "0.1:1",
        "0.1:1,0.2:0",
        "0.1:0",
        "0.1",
        "a:b",
        "0.1:1:2",
        "-1:1",
        "nan:1",
        "inf:1",
        "0.7:1",
        "1e300:1",
        "0.1:-1",
        "0.1:inf",
    ],
}


def _run_value(key: str):
    default = DEFAULTS.get(key)
    if key in ("feature-flip", "feature-epsilon", "label-flip", "label-epsilon"):  # "" = unset
        return st.one_of(st.sampled_from(["", 0.0, 0, 1e-9, 0.3, 0.5, 0.99, 1.0, 2.0]), st.floats(-1, 3), WEIRD)
    if key in RUN_NAMES:
        plausible = st.sampled_from(RUN_NAMES[key])
    elif isinstance(default, bool):
        plausible = st.booleans()
    elif isinstance(default, int):
        plausible = st.one_of(st.integers(-2, 60), st.sampled_from([0.0, 3.0, 2.5, 1e300]))
    elif isinstance(default, float):
        plausible = st.one_of(st.floats(-1, 3), st.sampled_from([0.0, 1e-9, 0.3, 0.99, 1.0, 1e6]), st.integers(-1, 3))
    else:
        plausible = st.text(max_size=5)
    return st.one_of(plausible, WEIRD)


@st.composite
def run_configs(draw):
    d = dict(draw(st.sampled_from(RUN_BASES)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["replace", "replace", "unknown", "drop"]))
        if op == "replace":
            k = draw(st.sampled_from(sorted(DEFAULTS)))
            d[k] = draw(_run_value(k))
        elif op == "unknown":
            d[draw(st.text(min_size=1, max_size=6))] = draw(WEIRD)
        elif d:
            d.pop(draw(st.sampled_from(sorted(d))))
    return d


def check_run_config(d) -> None:
    """RunConfig.from_flwr + build_population on a mutated flat run config: rejected with a run-config
    key named, or accepted with every value in range."""
    try:
        typed = RunConfig.from_flwr(d)
        pop = build_population(typed)
    except ValidationError as exc:  # a key, or an entry of a table key ("categorical.region")
        keys = set(DEFAULTS) | set(d)
        assert_error(exc, lambda f: f in keys or f.split(".")[0] in keys)
        return
    event("accepted")
    cfg, learners = typed.to_flwr(), typed.learners
    for key, default in DEFAULTS.items():
        if key in ("feature-flip", "feature-epsilon", "label-flip", "label-epsilon"):
            assert cfg[key] == "" or (isinstance(cfg[key], float) and 0 < cfg[key] < math.inf), (key, cfg[key])
        elif isinstance(default, float):
            assert isinstance(cfg[key], float) and math.isfinite(cfg[key]), (key, cfg[key])
        elif isinstance(default, int):
            assert isinstance(cfg[key], int) and not isinstance(cfg[key], bool), (key, cfg[key])
    assert cfg["C"] > 0 and cfg["node-wait-timeout"] > 0 and cfg["reply-timeout"] > 0
    assert 0 <= cfg["dropout"] < 1 and 0 < cfg["delta"] < 1
    assert cfg["seed"] >= 0 and cfg["n-test-per-class"] >= 0 and typed.n_nodes >= 1
    assert learners and set(learners) <= set(RELEASE_LEARNERS)
    assert pop.n_clients == cfg["n-clients"] and 0 <= pop.dropout < 1
    mech = pop.mechanism(0)
    assert math.isfinite(mech.epsilon) and mech.epsilon > 0
    x, y = pop.record(0)
    mech.validate_input(x[None, :], np.array([y]))


test_run_configs, test_run_configs_slow = fuzz(check_run_config, run_configs(), "runconfig")


# ====================================================================== 3. estimators

MECHS = {
    "rr": RecordMechanism(RandomizedResponse(3, 0.25), RandomizedResponse(2, 0.2), n_features=2),
    "tm": RecordMechanism(RandomizedResponse(2, 0.2), TransitionMatrix.binary(0.1, 0.2), n_features=3),
    "laplace": RecordMechanism(LaplaceMechanism(2.0, 0.0, 1.0), RandomizedResponse(2, 0.2), n_features=2),
    "gaussian": RecordMechanism(GaussianMechanism(2.0, 1e-5, -1.0, 1.0), RandomizedResponse(3, 0.2), n_features=2),
    "clean": None,
}
WDRO_MECH = LaplaceMechanism(2.0, 0.0, 1.0)


def _good_params(kind: str) -> dict:
    if kind in ("spread", "recon"):
        p = {"random_state": 0, "executor": SerialExecutor(), "n_samples": 1}
        if kind == "spread":
            p.update(max_iter=2, n_average=1, m_step_iter=3)
        return p
    if kind == "naive":
        return {"max_iter": 50}
    return {"rho": 0.1}


RESOURCE_PARAMS = {"max_iter", "n_average", "m_step_iter", "n_samples", "n_bins", "shard_size"}
SMALL_OR_WEIRD = st.one_of(st.integers(-3, 4), st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3))


def _param_value(name: str):
    if name in RESOURCE_PARAMS:
        return SMALL_OR_WEIRD  # counts are resources: a huge one is legal, just slow
    specific = {
        "C": st.one_of(st.floats(allow_nan=True, allow_infinity=True), HUGE_INTS),
        "prior": st.sampled_from(["learned", "flat", "magic", None, 5, [0.5, 0.5], np.full((2, 3), 1 / 3), [[1.0]]]),
        "e_step": st.sampled_from(["mcmc", "importance", "gibbs", None]),
        "encoding": st.sampled_from(["unit", "index", "onehot", None]),
        "numeric_prior": st.sampled_from(["gaussian", "histogram", "kde"]),
        "random_state": st.one_of(
            st.integers(-2, 3), st.sampled_from(["a", 1.5, np.random.RandomState(0), np.random.default_rng(0)])
        ),
        "executor": st.sampled_from([None, SerialExecutor(), 5, "threads"]),
        "cv": st.one_of(st.integers(-1, 30), st.none()),
        "rho": st.one_of(st.floats(-1, 5), st.sampled_from(["auto", "magic"])),
        "beta": st.floats(-1, 2),
        "solver": st.sampled_from(["CLARABEL", "SCS", "NOPE", "clarabel"]),
        "solver_options": st.sampled_from([None, {}, {"max_iter": 5}, {"bogus": 1}, {"max_iter": "x"}, 5]),
        "mechanism": st.sampled_from([None, WDRO_MECH, RandomizedResponse(2, 0.2), 5, MECHS["rr"]]),
        "zeta_constants": st.sampled_from([None, (1.0, 2.0, 3.0), (1.0, 2.0), "abc", (np.nan, 1.0, 1.0)]),
    }.get(name, st.nothing())
    return st.one_of(specific, WEIRD)


def _good_X(draw, mech_name: str, n: int) -> np.ndarray:
    rm = MECHS[mech_name]
    if rm is None:
        return np.array(draw(hnp.arrays(np.float64, (n, 2), elements=st.floats(-3, 3))))
    cols = []
    for mech, c in rm.groups():
        if hasattr(mech, "k"):
            cols.append((c, draw(hnp.arrays(np.int64, (n, len(c)), elements=st.integers(0, mech.k - 1)))))
        else:
            cols.append((c, draw(hnp.arrays(np.float64, (n, len(c)), elements=st.floats(-3, 4)))))
    dtype = np.int64 if all(a.dtype.kind == "i" for _, a in cols) else float
    X = np.empty((n, rm.n_features), dtype=dtype)
    for c, a in cols:
        X[:, c] = a
    return X


def _n_classes(mech_name: str) -> int:
    rm = MECHS[mech_name]
    return 2 if rm is None else rm.label.k


BAD_ELEMENTS = st.sampled_from([np.nan, np.inf, -np.inf, -1, 3, 7, 0.5, 1e300, -1e300, 2**40])


def _corrupt_array(draw, a: np.ndarray, n_classes: int | None = None):
    how = draw(st.sampled_from(["value", "dtype", "shape", "ragged", "scalar", "empty"]))
    if how == "value" and a.size:
        b = a.astype(float)
        idx = tuple(draw(st.integers(0, s - 1)) for s in a.shape)
        b[idx] = draw(BAD_ELEMENTS)
        return b
    if how == "dtype":
        dt = draw(st.sampled_from([object, str, complex, bool, np.float16, np.uint8, np.int8, "datetime64[s]"]))
        try:
            return a.astype(dt)
        except (TypeError, ValueError):
            return a.astype(object)
    if how == "shape":
        return draw(
            st.sampled_from(
                [
                    a.reshape(-1),
                    a[..., None],
                    a[:0],
                    a[:-1] if len(a) > 1 else a[:0],
                    a.T,
                    np.concatenate([a, a[:1]]) if a.size else a,
                ]
            )
        )
    if how == "ragged" and a.ndim == 2 and len(a) > 1:
        rows = a.tolist()
        rows[0] = rows[0][:-1]
        return rows
    if how == "scalar":
        return draw(WEIRD)
    return np.zeros((0,) + a.shape[1:])


@st.composite
def estimator_cases(draw):
    kind = draw(st.sampled_from(["spread", "spread", "naive", "naive", "recon", "wdro"]))
    mech_name = draw(
        st.sampled_from(["clean", "laplace"] if kind == "wdro" else ["rr", "tm", "laplace", "gaussian", "clean"])
    )
    n = draw(st.integers(2, 12))
    X = _good_X(draw, mech_name, n)
    k = _n_classes(mech_name)
    y = np.array(draw(hnp.arrays(np.int64, n, elements=st.integers(0, k - 1))))
    m = min(n, 2 if kind == "wdro" else k)
    y[:m] = np.arange(m)  # every class present (one class is tested through corruption)
    params = _good_params(kind)
    if kind == "wdro" and mech_name == "laplace":
        params.update(rho="auto", mechanism=WDRO_MECH)
    what = draw(st.sampled_from(["none", "X", "X", "y", "param", "param"]))
    if what == "X":
        X = _corrupt_array(draw, X)
    elif what == "y":
        y = _corrupt_array(draw, y, k)
    elif what == "param":
        cls = {
            "spread": SpreadLogisticRegression,
            "naive": NaiveLogisticRegression,
            "recon": ReconstructionLogisticRegression,
            "wdro": WassersteinDROLogisticRegression,
        }[kind]
        name = draw(st.sampled_from(sorted(cls().get_params())))
        params[name] = draw(_param_value(name))
    return kind, mech_name, X, y, params, draw(st.integers(0, 2**31))


def _make(kind, params):
    cls = {
        "spread": SpreadLogisticRegression,
        "naive": NaiveLogisticRegression,
        "recon": ReconstructionLogisticRegression,
        "wdro": WassersteinDROLogisticRegression,
    }[kind]
    return cls(**params)


INPUT_FIELDS = {"X", "y", "X_tilde", "y_tilde", "mechanism"}


def _fit(kind, mech_name, X, y, params):
    est = _make(kind, params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of tiny fits are fine
        if kind == "wdro":
            return est.fit(X, y)
        return est.fit(X, y, MECHS[mech_name]) if MECHS[mech_name] is not None else est.fit(X, y)


def _check_outputs(est, X) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proba = est.predict_proba(X)
        pred = est.predict(X)
    m = np.shape(X)[0]
    assert proba.shape == (m, len(est.classes_)), proba.shape
    assert np.all(np.isfinite(proba)) and np.all(proba >= 0), proba
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
    assert pred.shape == (m,) and set(np.asarray(pred).tolist()) <= set(np.asarray(est.classes_).tolist())


def check_estimator_input(case) -> None:
    """fit with fuzzed X, y and constructor parameters: ValidationError naming an input or a parameter,
    or a fitted model whose predict_proba / predict on valid input are finite and well shaped."""
    kind, mech_name, X, y, params, _ = case
    est = _make(kind, params)
    allowed = INPUT_FIELDS | set(est.get_params())
    try:
        est = _fit(kind, mech_name, X, y, params)
    except ValidationError as exc:
        prior_given = not isinstance(params.get("prior", "learned"), str)
        assert_error(exc, lambda f: f in allowed or (prior_given and f.startswith("prior")))
        return
    event(f"accepted: {kind}")
    Xp = np.asarray(X) if mech_name == "clean" or np.asarray(X).dtype.kind in "iuf" else None
    if Xp is None or Xp.ndim != 2 or Xp.shape[0] == 0:
        return
    _check_outputs(est, Xp)


test_estimator_inputs, test_estimator_inputs_slow = fuzz(check_estimator_input, estimator_cases(), "estimator")


# --- predict / predict_proba on fuzzed X, one fitted model per estimator and mechanism -----------
_FITTED: dict = {}


def _fitted(kind: str, mech_name: str):
    key = (kind, mech_name)
    if key not in _FITTED:
        rng = np.random.default_rng(1)
        n = 40
        rm = MECHS[mech_name]
        if rm is None:
            X = rng.random((n, 2))
        else:
            X = np.column_stack(
                [
                    rng.integers(0, m.k, n) if hasattr(m, "k") else rng.random(n)
                    for m in (rm.mechanism_for(j) for j in range(rm.n_features))
                ]
            )
        k = _n_classes(mech_name)
        y = np.arange(n) % k
        params = _good_params(kind)
        if kind == "wdro" and mech_name == "laplace":
            params.update(rho="auto", mechanism=WDRO_MECH)
        _FITTED[key] = (_fit(kind, mech_name, X, y, params), X)
    return _FITTED[key]


@st.composite
def predict_cases(draw):
    kind = draw(st.sampled_from(["spread", "naive", "recon", "wdro"]))
    mech_name = draw(
        st.sampled_from(["clean", "laplace"] if kind == "wdro" else ["rr", "tm", "laplace", "gaussian", "clean"])
    )
    m = draw(st.integers(1, 5))
    X = _good_X(draw, mech_name, m)
    if draw(st.integers(0, 3)):
        X = _corrupt_array(draw, X)
    return kind, mech_name, X


def check_predict(case) -> None:
    """predict / predict_proba / decision_function on fuzzed X: ValidationError(field='X') or finite,
    well-shaped outputs."""
    kind, mech_name, X = case
    est, _ = _fitted(kind, mech_name)
    try:
        _check_outputs(est, X)
        d = est.decision_function(X)
        assert np.all(np.isfinite(d))
        event("accepted")
    except ValidationError as exc:
        assert_error(exc, {"X"})


test_predict_inputs, test_predict_inputs_slow = fuzz(check_predict, predict_cases(), "predict")


# ====================================================================== 4. mechanisms
ANY_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.floats(1e-3, 10), HUGE_INTS, st.integers(-2, 300)
)
BOUNDS = st.one_of(
    st.floats(-5, 5),
    st.lists(st.floats(-5, 5), min_size=1, max_size=3),
    WEIRD,
    st.sampled_from([[0.0, 0.0], np.zeros((2, 2)), [[0.0], [1.0]], -1e308, 1e308]),
)


@st.composite
def stochastic_matrices(draw):
    k = draw(mostly(st.integers(2, 4), st.just(1)))
    M = np.array(draw(hnp.arrays(np.float64, (k, k), elements=mostly(st.floats(0.01, 10), st.floats(0, 10)))))
    M += np.eye(k) * draw(st.floats(0, 5))  # diagonally dominant: usually invertible
    M = M / np.where(M.sum(0) > 0, M.sum(0), 1.0)
    return M


def mostly(valid, bad=WEIRD, one_in: int = 4):
    """``valid`` values, and a ``bad`` one about once in ``one_in`` draws (so that both sides of
    every property are exercised)."""
    return st.integers(1, one_in).flatmap(lambda i: bad if i == one_in else valid)


POS = st.one_of(st.floats(1e-3, 50), st.sampled_from([1e-9, 1e-300, 1e6, 1e300, 1]))
GOOD_BOUNDS = st.tuples(st.floats(-5, 5), st.floats(0.01, 10)).map(lambda t: (t[0], t[0] + t[1]))
RR_ARGS = st.one_of(
    st.fixed_dictionaries(
        {
            "k": mostly(st.integers(2, 300)),
            "flip_prob": mostly(st.floats(0.001, 0.45), st.floats(0, 1) | WEIRD),
            "epsilon": st.none(),
        }
    ),
    st.fixed_dictionaries(
        {"k": mostly(st.integers(2, 300)), "flip_prob": st.none(), "epsilon": mostly(POS, ANY_NUMBER | WEIRD)}
    ),
    st.fixed_dictionaries({"k": st.integers(2, 5), "flip_prob": mostly(st.floats(0, 1)), "epsilon": mostly(POS)}),
)
BOX = mostly(
    GOOD_BOUNDS.map(lambda t: {"lower": t[0], "upper": t[1]}), st.fixed_dictionaries({"lower": BOUNDS, "upper": BOUNDS})
)
BOX3 = st.lists(GOOD_BOUNDS, min_size=1, max_size=3).map(
    lambda ts: {"lower": [t[0] for t in ts], "upper": [t[1] for t in ts]}
)
LAP_ARGS = st.builds(
    lambda e, box, sens: {"epsilon": e, **box, "sensitivity": sens},
    mostly(POS, ANY_NUMBER | WEIRD),
    st.one_of(BOX, BOX3),
    mostly(st.none(), ANY_NUMBER | WEIRD),
)
GAU_ARGS = st.builds(
    lambda e_or_s, d, box, cal, sens: {**e_or_s, "delta": d, **box, "calibration": cal, "sensitivity": sens},
    st.one_of(
        st.fixed_dictionaries({"epsilon": mostly(POS, ANY_NUMBER | WEIRD), "sigma": st.none()}),
        st.fixed_dictionaries({"epsilon": st.none(), "sigma": mostly(POS, ANY_NUMBER | WEIRD)}),
        st.fixed_dictionaries({"epsilon": st.none(), "sigma": st.none()}),
        st.fixed_dictionaries({"epsilon": POS, "sigma": POS}),
    ),
    mostly(st.floats(1e-12, 0.5), st.floats(0, 1) | ANY_NUMBER | WEIRD),
    st.one_of(BOX, BOX3),
    mostly(
        st.sampled_from(["analytic", "analytic", "classic", "farokhi"]), st.sampled_from(["x", None, 1, "ANALYTIC"])
    ),
    mostly(st.none(), ANY_NUMBER | WEIRD),
)
REC_ARGS = st.fixed_dictionaries(
    {
        "features": mostly(
            st.sampled_from(
                [
                    RandomizedResponse(3, 0.2),
                    LaplaceMechanism(1.0, [0.0] * 3, [1.0] * 3),
                    LaplaceMechanism(2.0),
                    [RandomizedResponse(2, 0.1), LaplaceMechanism(1.0)],
                    (GaussianMechanism(1.0),),
                ]
            ),
            st.sampled_from(
                [
                    [],
                    5,
                    "rr",
                    None,
                    RecordMechanism(RandomizedResponse(2, 0.1), n_features=2),
                    [RandomizedResponse(2, 0.1), "rr"],
                    {"a": 1},
                    iter([]),
                ]
            ),
        ),
        "label": mostly(
            st.sampled_from([None, RandomizedResponse(2, 0.2), TransitionMatrix.binary(0.1, 0.2)]),
            st.sampled_from(
                [LaplaceMechanism(1.0, [0.0] * 2, [1.0] * 2), "rr", 3, RecordMechanism(RandomizedResponse(2, 0.1))]
            ),
        ),
        "n_features": mostly(st.sampled_from([None, 1, 2, 3, 4]), st.integers(-1, 5) | WEIRD),
    }
)

CTORS = {
    "rr": (
        lambda a: RandomizedResponse(a["k"], a["flip_prob"], epsilon=a["epsilon"]),
        RR_ARGS,
        {"k", "flip_prob", "epsilon"},
    ),
    "tm": (
        lambda a: TransitionMatrix(a["P"]),
        st.fixed_dictionaries(
            {
                "P": mostly(
                    stochastic_matrices(),
                    hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=3))
                    | st.lists(st.lists(st.floats(0, 1), max_size=3), max_size=3)
                    | WEIRD,
                )
            }
        ),
        {"P"},
    ),
    "laplace": (
        lambda a: LaplaceMechanism(a["epsilon"], a["lower"], a["upper"], sensitivity=a["sensitivity"]),
        LAP_ARGS,
        {"epsilon", "lower", "upper", "sensitivity"},
    ),
    "gaussian": (
        lambda a: GaussianMechanism(
            a["epsilon"],
            a["delta"],
            a["lower"],
            a["upper"],
            calibration=a["calibration"],
            sensitivity=a["sensitivity"],
            sigma=a["sigma"],
        ),
        GAU_ARGS,
        {"epsilon", "delta", "lower", "upper", "calibration", "sensitivity", "sigma"},
    ),
    "record": (
        lambda a: RecordMechanism(a["features"], a["label"], n_features=a["n_features"]),
        REC_ARGS,
        {"features", "label", "n_features"},
    ),
}


@st.composite
def mechanism_args(draw):
    name = draw(st.sampled_from(sorted(CTORS)))
    return name, draw(CTORS[name][1])


def _valid_input(mech, n=4, seed=0):
    """Clean values in the mechanism's domain (a fixed seed: examples must replay exactly)."""
    rng = np.random.default_rng(seed)
    if isinstance(mech, RecordMechanism):
        parts = [
            (cols, _valid_input(m, n * (len(cols) if m.width == 1 else 1), seed + i).reshape(n, len(cols)))
            for i, (m, cols) in enumerate(mech.groups())
        ]
        X = np.empty((n, mech.n_features), dtype=np.result_type(*[p.dtype for _, p in parts]))
        for cols, part in parts:
            X[:, cols] = part
        return X
    if hasattr(mech, "k"):
        return rng.integers(0, mech.k, n)
    if mech.width == 1:
        return rng.uniform(mech.lower[0], mech.upper[0], n)
    return rng.uniform(mech.lower, mech.upper, (n, mech.width))


def check_accepted_mechanism(mech) -> None:
    eps = mech.epsilon
    assert isinstance(eps, float) and math.isfinite(eps) and eps > 0, eps
    assert 0 <= mech.delta < 1
    spec = json.loads(json.dumps(mech.to_spec()))
    assert mechanism_from_spec(spec) == mech
    if isinstance(mech, RecordMechanism):
        X = _valid_input(mech)
        y = None if mech.label is None else _valid_input(mech.label)
        Xt, yt = mech.release(X, y, rng=np.random.default_rng(0))
        assert np.all(np.isfinite(Xt)) and np.all(np.isfinite(mech.log_likelihood(Xt, yt, X, y)))
        mech.validate_release(Xt, yt)
        return
    x = _valid_input(mech)
    xt = mech.release(x, np.random.default_rng(0))
    assert np.all(np.isfinite(xt)) and xt.shape == np.shape(x)
    mech.validate_release(xt)
    assert np.all(np.isfinite(mech.log_likelihood(xt, x)))


def check_mechanism_ctor(case) -> None:
    """Constructors on fuzzed arguments: ValidationError naming an argument, or a mechanism with a
    finite ε > 0 whose spec round-trips and whose releases and likelihoods are finite."""
    name, args = case
    ctor, _, fields = CTORS[name]
    try:
        mech = ctor(args)
    except ValidationError as exc:
        assert_error(exc, fields)
        return
    event(f"accepted: {name}")
    check_accepted_mechanism(mech)


test_mechanism_constructors, test_mechanism_constructors_slow = fuzz(
    check_mechanism_ctor, mechanism_args(), "mech_ctor"
)


# --- mechanism_from_spec on mutated specs ---------------------------------------------------------
BASE_SPECS = [
    RandomizedResponse(3, 0.2).to_spec(),
    TransitionMatrix.binary(0.1, 0.3).to_spec(),
    LaplaceMechanism(1.0, [0.0, -1.0], [1.0, 1.0]).to_spec(),
    GaussianMechanism(1.0, 1e-5).to_spec(),
    GaussianMechanism(sigma=2.0).to_spec(),
    RecordMechanism(RandomizedResponse(4, 0.3), RandomizedResponse(2, 0.1), n_features=3).to_spec(),
    RecordMechanism([LaplaceMechanism(1.0), RandomizedResponse(2, 0.1)], None).to_spec(),
]
SPEC_KINDS = ["randomized_response", "transition_matrix", "laplace", "gaussian", "record", "exponential", ""]


def _mutate_spec(draw, spec, depth=0):
    spec = copy.deepcopy(spec)
    if not isinstance(spec, dict):
        return draw(WEIRD)
    op = draw(st.sampled_from(["drop", "add", "value", "kind", "nested", "whole"]))
    if op == "drop" and spec:
        spec.pop(draw(st.sampled_from(sorted(spec))))
    elif op == "add":
        spec[draw(st.text(max_size=5))] = draw(WEIRD)
    elif op == "value" and spec:
        spec[draw(st.sampled_from(sorted(spec)))] = draw(st.one_of(WEIRD, ANY_NUMBER))
    elif op == "kind":
        spec["kind"] = draw(st.one_of(st.sampled_from(SPEC_KINDS), WEIRD))
    elif op == "nested" and depth < 2:
        if isinstance(spec.get("features"), list) and spec["features"]:
            i = draw(st.integers(0, len(spec["features"]) - 1))
            spec["features"][i] = _mutate_spec(draw, spec["features"][i], depth + 1)
        elif isinstance(spec.get("features"), dict):
            spec["features"]["replicate"] = _mutate_spec(draw, spec["features"].get("replicate"), depth + 1)
        elif spec.get("label") is not None:
            spec["label"] = _mutate_spec(draw, spec["label"], depth + 1)
    elif op == "whole":
        return draw(
            st.one_of(
                WEIRD,
                st.sampled_from(BASE_SPECS).map(
                    lambda s: {"kind": "record", "n_features": 1, "features": {"replicate": s}, "label": s}
                ),
            )
        )
    return spec


@st.composite
def mutated_specs(draw):
    spec = draw(st.sampled_from(BASE_SPECS))
    for _ in range(draw(st.integers(1, 2))):
        spec = _mutate_spec(draw, spec)
    return spec


def _spec_field(field: str) -> bool:
    ctor_fields = set().union(*(f for _, _, f in CTORS.values())) | {"spec"}
    return field in ctor_fields or field.startswith("spec.")


def check_spec(spec) -> None:
    """mechanism_from_spec on mutated specs: ValidationError naming the spec entry or the constructor
    argument, or a mechanism that round-trips."""
    try:
        mech = mechanism_from_spec(spec)
    except ValidationError as exc:
        assert_error(exc, _spec_field)
        return
    event("accepted")
    check_accepted_mechanism(mech)


test_mechanism_specs, test_mechanism_specs_slow = fuzz(check_spec, mutated_specs(), "spec")


# --- validate_release / release / log_likelihood on fuzzed arrays --------------------------------
FIXED_MECHS = {
    "rr3": RandomizedResponse(3, 0.3),
    "tm2": TransitionMatrix.binary(0.1, 0.2),
    "lap": LaplaceMechanism(1.0, 0.0, 1.0),
    "lap3": LaplaceMechanism(1.0, [0.0] * 3, [1.0] * 3),
    "gau": GaussianMechanism(1.0, 1e-5, -1.0, 1.0),
}
FUZZ_DTYPES = st.sampled_from(
    [np.int8, np.int64, np.uint64, np.float16, np.float32, np.float64, np.bool_, np.complex128, "U3", "datetime64[s]"]
)
FUZZ_ARRAYS = st.one_of(
    hnp.arrays(FUZZ_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)),
    hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), elements=st.integers(-3, 5)),
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), elements=st.floats(-5, 5)),
    st.lists(
        st.one_of(
            st.integers(-1, 3), st.floats(allow_nan=True, allow_infinity=True), st.lists(st.integers(0, 2), max_size=2)
        ),
        max_size=4,
    ),
    WEIRD,
)


def _near_valid(draw, mech, released: bool):
    """Values in the mechanism's domain (numeric releases: anywhere near the box), of a random
    shape; then maybe one entry, the dtype or the shape broken; or something else entirely."""
    how = draw(st.sampled_from(["valid", "valid", "corrupt", "fuzz"]))
    if how == "fuzz":
        return draw(FUZZ_ARRAYS)
    n = draw(st.integers(0, 4))
    a = _valid_input(mech, n, draw(st.integers(0, 9)))
    if released and not hasattr(mech, "k"):
        a = a + draw(st.sampled_from([0.0, -3.0, 40.0, 1e3]))
    if mech.width == 1 and draw(st.booleans()):
        a = a.reshape(draw(st.sampled_from([(n,), (n, 1), (1, n), (n, 1, 1)])))
    return _corrupt_array(draw, a) if how == "corrupt" else a


@st.composite
def release_cases(draw):
    name = draw(st.sampled_from(sorted(FIXED_MECHS)))
    mech = FIXED_MECHS[name]
    return (
        name,
        draw(st.sampled_from(["validate_release", "release", "log_likelihood"])),
        _near_valid(draw, mech, True),
        _near_valid(draw, mech, False),
    )


def check_release_inputs(case) -> None:
    """validate_release / release / log_likelihood on fuzzed arrays: ValidationError naming x or
    x_tilde, or arrays of the input's shape: states in {0..k-1}, finite numbers."""
    name, method, a, b = case
    mech = FIXED_MECHS[name]
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):  # (underflow to 0 is fine)
            if method == "validate_release":
                out = mech.validate_release(a)
                shape = np.shape(a)
            elif method == "release":
                a = b  # clean values
                out = mech.release(a, np.random.default_rng(0))
                shape = np.shape(a)
            else:
                out = mech.log_likelihood(a, b)
                shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    except ValidationError as exc:
        assert_error(exc, {"x", "x_tilde"})
        return
    event(f"accepted: {method}")
    assert out.shape == shape
    if hasattr(mech, "k") and method != "log_likelihood":
        assert out.dtype.kind in "iu" and np.all((out >= 0) & (out < mech.k))
    assert np.all(np.isfinite(out))


test_release_inputs, test_release_inputs_slow = fuzz(check_release_inputs, release_cases(), "release")


@st.composite
def record_cases(draw):
    rm = draw(
        st.sampled_from(
            [
                MECHS["rr"],
                MECHS["laplace"],
                MECHS["tm"],
                RecordMechanism(LaplaceMechanism(1.0, [0.0] * 3, [1.0] * 3), None, n_features=3),
            ]
        )
    )
    n = draw(st.integers(1, 4))
    X = _valid_input(rm, n, draw(st.integers(0, 9)))
    y = None if rm.label is None else _valid_input(rm.label, n)
    which = draw(st.sampled_from(["X", "y", "both", "none", "none"]))
    if which in ("X", "both"):
        how = draw(st.sampled_from(["fuzz", "float", "corrupt"]))
        X = draw(FUZZ_ARRAYS) if how == "fuzz" else X.astype(float) if how == "float" else _corrupt_array(draw, X)
    if which in ("y", "both"):
        how = draw(st.sampled_from(["fuzz", "none", "corrupt"]))
        y = (
            draw(FUZZ_ARRAYS)
            if how == "fuzz"
            else None
            if how == "none"
            else _corrupt_array(draw, np.zeros(n, int) if y is None else y)
        )
    return rm, draw(st.sampled_from(["validate_release", "validate_input", "log_likelihood"])), X, y


def check_record_inputs(case) -> None:
    """RecordMechanism.validate_release / validate_input / log_likelihood on fuzzed (X, y)."""
    rm, method, X, y = case
    try:
        if method == "log_likelihood":
            Xc = _valid_input(rm, 2)
            yc = None if rm.label is None else _valid_input(rm.label, 2)
            out = rm.log_likelihood(X, y, Xc, yc)
            assert out.shape == (2,) and np.all(np.isfinite(out))
            return
        Xv, yv = getattr(rm, method)(X, y)
    except ValidationError as exc:
        assert_error(exc, {"X", "y", "X_tilde", "y_tilde"})
        return
    event(f"accepted: {method}")
    assert Xv.ndim == 2 and Xv.shape[1] == rm.n_features and np.all(np.isfinite(Xv))
    assert (yv is None) == (rm.label is None)
    if yv is not None:
        assert yv.shape == (Xv.shape[0],) and np.all((yv >= 0) & (yv < rm.label.k))


test_record_inputs, test_record_inputs_slow = fuzz(check_record_inputs, record_cases(), "record")


# ====================================================================== 5. client replies

REASONS = set(FAULT_KINDS.values()) | {"dropped_out", "error_reply", "unexpected_client", "malformed"}
REPLY_MECHS = (
    RecordMechanism(RandomizedResponse(3, 0.2), RandomizedResponse(2, 0.1), n_features=4),
    RecordMechanism(RandomizedResponse(3, 0.4), RandomizedResponse(2, 0.3), n_features=4),
)


@pytest.fixture(scope="module", autouse=True)
def _server_identity():
    """Flower builds a Message's metadata from the process's TaskIdentity (set by a running ServerApp)."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    if saved[1] is None:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 1
    yield
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def _honest(m: int, seed: int = 0) -> Release:
    rng = np.random.default_rng(seed)
    midx = rng.integers(0, 2, m)
    X = rng.integers(0, 3, (m, 4))
    y = rng.integers(0, 2, m)
    xt, yt = np.empty_like(X), np.empty_like(y)
    for j, rm in enumerate(REPLY_MECHS):
        rows = midx == j
        if rows.any():
            xt[rows], yt[rows] = rm.release(X[rows], y[rows], rng=rng)
    return Release(
        xt,
        yt,
        np.arange(m, dtype=np.int64) * 3,
        midx.astype(np.int64),
        tuple(json.dumps(rm.to_spec(), sort_keys=True) for rm in REPLY_MECHS),
    )


def _message(content=None, error=None) -> Message:
    q = Message(content=query_content(), dst_node_id=1, message_type=MESSAGE_TYPE, group_id="fuzz")
    return Message(error, reply_to=q) if error is not None else Message(content, reply_to=q)


REPLY_ARRAYS = st.one_of(
    hnp.arrays(FUZZ_DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)),
    hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=5), elements=st.integers(-2, 4)),
    st.sampled_from(
        [np.zeros((2000, 4), np.int64), np.zeros((1_000_001, 0)), np.full(3, 2**62, np.int64), np.arange(3) * 3]
    ),
)
META_VALUES = st.one_of(
    st.text(max_size=10),
    st.integers(-2, 2),
    st.booleans(),
    st.binary(max_size=4),
    st.lists(st.text(max_size=3), max_size=2),
    st.sampled_from(
        [
            "[]",
            "{}",
            "[1]",
            '["{}"]',
            "null",
            "[" * 50 + "]" * 50,
            '[{"kind": "record"}]',
            "NaN",
            '"x"',
            json.dumps(
                [
                    json.dumps(
                        {
                            "kind": "record",
                            "n_features": 4,
                            "features": {"replicate": {"kind": "record"}},
                            "label": None,
                        }
                    )
                ]
            ),
        ]
    ),
)


@st.composite
def replies(draw):
    m = draw(st.integers(1, 6))
    rel = _honest(m, draw(st.integers(0, 100)))
    content = release_content(rel)
    arrays = {k: content.array_records["release"][k] for k in ("x", "y", "client_id", "mechanism_index")}
    meta = dict(content.config_records["meta"])
    records: dict = {}
    for _ in range(draw(st.integers(0, 3))):
        op = draw(
            st.sampled_from(
                [
                    "array",
                    "array",
                    "drop_array",
                    "extra_array",
                    "garbage_bytes",
                    "meta",
                    "meta_spec",
                    "drop_meta_key",
                    "protocol",
                    "no_meta",
                    "no_release",
                    "error",
                ]
            )
        )
        if op == "array":
            arrays[draw(st.sampled_from(sorted(arrays) or ["x"]))] = Array(np.ascontiguousarray(draw(REPLY_ARRAYS)))
        elif op == "drop_array" and arrays:
            arrays.pop(draw(st.sampled_from(sorted(arrays))))
        elif op == "extra_array":
            arrays[draw(st.text(min_size=1, max_size=4))] = Array(np.zeros(2))
        elif op == "garbage_bytes":
            arrays[draw(st.sampled_from(["x", "y", "client_id", "mechanism_index"]))] = Array(
                dtype=draw(st.sampled_from(["float64", "int64", "bogus"])),
                shape=(m, 4),
                stype="numpy.ndarray",
                data=draw(st.binary(max_size=64)),
            )
        elif op == "meta":
            meta["mechanisms"] = draw(META_VALUES)
        elif op == "meta_spec":
            spec = _mutate_spec(draw, json.loads(rel.mechanisms[0]))
            try:
                meta["mechanisms"] = json.dumps([json.dumps(spec), rel.mechanisms[1]])
            except (TypeError, ValueError):
                pass
        elif op == "drop_meta_key" and meta:
            meta.pop(draw(st.sampled_from(sorted(meta))))
        elif op == "protocol":
            meta["protocol"] = draw(st.one_of(st.sampled_from([PROTOCOL, "fedrr/0", "", "FEDRR/1"]), st.integers(0, 2)))
        elif op == "no_meta":
            records["no_meta"] = True
        elif op == "no_release":
            records["no_release"] = True
        elif op == "error":
            records["error"] = Error(
                code=draw(st.integers(0, 5)),
                reason=draw(st.sampled_from(["boom", "client dropped out", "", "x" * 500])),
            )
    if "error" in records:
        msg = _message(error=records["error"])
    else:
        rd = {}
        if not records.get("no_release"):
            rd["release"] = ArrayRecord(arrays)
        if not records.get("no_meta"):
            rd["meta"] = ConfigRecord(meta)
        msg = _message(RecordDict(rd))
    n_features = draw(st.sampled_from([None, 4, 3]))
    expected = draw(st.sampled_from([None, set(range(0, 30)), {0, 3}, set()]))
    return msg, n_features, expected


def check_reply(case) -> None:
    """parse_reply on fuzzed Flower replies: ReplyRejected with a known reason, or a release that
    every record's mechanism accepts and that pools."""
    msg, n_features, expected = case
    try:
        rel = parse_reply(msg, n_features, expected)
    except ReplyRejected as exc:
        assert exc.reason in REASONS, exc
        event(f"rejected: {exc.reason}")
        return
    event("accepted")
    m = rel.x.shape[0]
    assert rel.x.ndim == 2 and 1 <= m and rel.y.shape == rel.client_id.shape == rel.mechanism_index.shape == (m,)
    assert n_features is None or rel.x.shape[1] == n_features
    assert len(set(rel.client_id.tolist())) == m and (expected is None or set(rel.client_id.tolist()) <= expected)
    mechs = [RecordMechanism.from_spec(json.loads(s)) for s in rel.mechanisms]
    for j, rm in enumerate(mechs):
        rows = rel.mechanism_index == j
        if rows.any():
            rm.validate_release(rel.x[rows], rel.y[rows] if rm.label is not None else None)
    pool = Pool.from_releases([rel])
    assert pool.n == m


test_replies, test_replies_slow = fuzz(check_reply, replies(), "reply")


def test_honest_replies_are_accepted():
    for m in (1, 5):
        rel = parse_reply(_message(release_content(_honest(m))), 4, None)
        assert rel.x.shape == (m, 4)


# ==================================================================== bugs found, pinned
def _scenario(**changes):
    data = {
        "population": {"dataset": "digits_7_vs_9", "n_clients": 50},
        "privacy": {"mechanism": "rr", "epsilon_grid": [10.0]},
        "learners": {"names": ["naive"]},
    }
    for path, value in changes.items():
        sec, _, key = path.partition("__")
        if key:
            data.setdefault(sec, {})[key] = value
        else:
            data[sec] = value
    return data


def _load_toml_bytes(raw: bytes):
    p = Path(_TMP) / "regression.toml"
    p.write_bytes(raw)
    return load_scenario(p)


def _quiet_fit(est, X, y, mech=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y) if mech is None else est.fit(X, y, mech)


_RX = np.array([[0, 1], [2, 1], [1, 0], [0, 2]])
_RY = np.array([0, 1, 1, 0])
_FX = np.array([[0.1, 0.5], [0.9, 0.2], [0.4, 0.8], [0.3, 0.3]])
_SPREAD = dict(max_iter=2, n_average=1, random_state=0, executor=SerialExecutor())


def _fitted_spread():
    return _quiet_fit(SpreadLogisticRegression(**_SPREAD), _RX, _RY, MECHS["rr"])


def _fitted_naive():
    return _quiet_fit(NaiveLogisticRegression(), _RX, _RY, MECHS["rr"])


#: (id, call, field the error must name, what happened before the fix). Every entry was found by the
#: properties above (or, for the last few, by reading the code they pointed at).
REGRESSIONS = [
    # --- scenario configs --------------------------------------------------------------------------
    (
        "scenario_huge_int_number",
        lambda: parse_scenario(_scenario(learners__C=10**400)),
        "learners.C",
        "OverflowError: int too large to convert to float (TOML integers are unbounded)",
    ),
    (
        "scenario_huge_int_grid",
        lambda: parse_scenario(_scenario(privacy__epsilon_grid=[10**400])),
        "privacy.epsilon_grid",
        "OverflowError",
    ),
    (
        "scenario_empty_key",
        lambda: parse_scenario({**_scenario(), "": 1}),
        '""',
        "ValidationError with field '' (empty)",
    ),
    (
        "scenario_empty_key_in_section",
        lambda: parse_scenario(_scenario(run={"": 1})),
        'run.""',
        "field 'run.' (dangling)",
    ),
    (
        "scenario_options_override_run_config",
        lambda: parse_scenario(
            {
                "population": {
                    "population": "fedrr.examples:TwoBudgetSyntheticPopulation",
                    "options": {"C": "x"},
                },
                "privacy": {"feature_flip_grid": [0.2]},
                "learners": {"names": ["naive"]},
            }
        ),
        "population.options.C",
        "accepted; the cell's run config then failed in the federation with field 'C' "
        "(or silently overrode learners.C)",
    ),
    (
        "scenario_repeats_huge",
        lambda: parse_scenario(_scenario(scenario__repeats=10**9)),
        "scenario.repeats",
        "accepted; preflight then built a list of 10⁹ cells and pytest was OOM-killed at 24 GB (CI)",
    ),
    (
        "scenario_too_many_cells",
        lambda: parse_scenario(_scenario(scenario__repeats=5000, privacy__epsilon_grid=[1.0 + i for i in range(21)])),
        "scenario.repeats",
        "accepted (105,000 cells)",
    ),
    ("toml_not_utf8", lambda: _load_toml_bytes(b'[scenario]\nname = "\xff"\n'), "config", "UnicodeDecodeError"),
    ("toml_is_a_directory", lambda: load_scenario(Path(_TMP)), "config", "IsADirectoryError"),
    # --- federation run config ---------------------------------------------------------------------
    (
        "run_config_C_nan",
        lambda: RunConfig.from_flwr({"C": math.nan}),
        "C",
        "accepted (the learners failed after the whole collection round)",
    ),
    (
        "run_config_C_huge_int",
        lambda: RunConfig.from_flwr({"C": 10**400}),
        "C",
        "OverflowError: int too large to convert to float",
    ),
    ("run_config_timeout_negative", lambda: RunConfig.from_flwr({"reply-timeout": -5}), "reply-timeout", "accepted"),
    (
        "run_config_unknown_learner",
        lambda: RunConfig.from_flwr({"learners": "spread,magic"}),
        "learners",
        "accepted (rejected only by the server's strategy, after the collection round)",
    ),
    (
        "run_config_seed_negative",
        lambda: RunConfig.from_flwr({"seed": -1, "population": "fedrr.examples:TwoBudgetSyntheticPopulation"}),
        "seed",
        "accepted; numpy's SeedSequence raised ValueError in the server",
    ),
    (
        "run_config_delta",
        lambda: RunConfig.from_flwr({"delta": 2.0}),
        "delta",
        "accepted (rejected later as 'delta' only for mechanism gaussian)",
    ),
    (
        "population_relative_import",
        lambda: build_population(RunConfig.from_flwr({"population": ".x:y"})),
        "population",
        "TypeError: the 'package' argument is required to perform a relative import",
    ),
    (
        "population_empty_module",
        lambda: build_population(RunConfig.from_flwr({"population": ":y"})),
        "population",
        "ValueError: Empty module name",
    ),
    (
        "population_flip_named_by_key",
        lambda: build_population(RunConfig.from_flwr({"n-clients": 10, "feature-flip": 1.5})),
        "feature-flip",
        "ValidationError named 'flip_prob' (not a run-config key)",
    ),
    (
        "population_mix_named_by_key",
        lambda: build_population(RunConfig.from_flwr({"n-clients": 10, "budget-mix": "inf:1"})),
        "budget-mix",
        "ValidationError named 'flip_prob'",
    ),
    (
        "population_test_split_named_by_key",
        lambda: build_population(RunConfig.from_flwr({"n-clients": 10, "n-test-per-class": 500})),
        "n-test-per-class",
        "ValidationError named 'n_test_per_class'",
    ),
    # --- mechanisms --------------------------------------------------------------------------------
    ("rr_epsilon_huge_int", lambda: RandomizedResponse(2, epsilon=10**400), "epsilon", "OverflowError"),
    ("rr_flip_huge_int", lambda: RandomizedResponse(2, 10**400), "flip_prob", "OverflowError"),
    ("laplace_epsilon_huge_int", lambda: LaplaceMechanism(10**400), "epsilon", "OverflowError"),
    (
        "rr_flip_denormal",
        lambda: RandomizedResponse(3, 5e-324),
        "flip_prob",
        "accepted; .epsilon then raised ValueError: math domain error (flip_prob/(k-1) = 0)",
    ),
    (
        "rr_k_beyond_int64",
        lambda: RandomizedResponse(2**63, 0.1),
        "k",
        "accepted; release raised ValueError: high is out of bounds for int64",
    ),
    (
        "laplace_epsilon_denormal",
        lambda: LaplaceMechanism(5e-324),
        "epsilon",
        "accepted with scale inf: releases were inf",
    ),
    (
        "laplace_scale_underflow",
        lambda: LaplaceMechanism(1e300, 0.0, 1e-300),
        "epsilon",
        "accepted with scale 0; log_likelihood raised ValueError: math domain error",
    ),
    (
        "bounds_empty",
        lambda: LaplaceMechanism(1.0, [], [], sensitivity=1.0),
        "lower",
        "accepted: a mechanism of width 0",
    ),
    (
        "bounds_mismatch",
        lambda: LaplaceMechanism(1.0, [], [1.0, 1.0]),
        "lower",
        "ValueError: shape mismatch (numpy broadcast)",
    ),
    (
        "bounds_overflow",
        lambda: GaussianMechanism(1.0, 1e-5, -1e308, 1e308),
        "upper",
        "RuntimeWarning: overflow, then ValidationError named 'sensitivity'",
    ),
    ("gaussian_delta_denormal", lambda: GaussianMechanism(1.0, 5e-324), "delta", "OverflowError: math range error"),
    (
        "gaussian_sigma_tiny",
        lambda: GaussianMechanism(sigma=1e-300),
        "sigma",
        "RuntimeWarning, then ValueError: The function value at x=inf is NaN (scipy brentq)",
    ),
    (
        "gaussian_farokhi_epsilon_huge",
        lambda: GaussianMechanism(1e300, 0.5, calibration="farokhi"),
        "epsilon",
        "accepted; epsilon_exact (which .epsilon now reports for farokhi) raised scipy ValueError: f(inf) is NaN",
    ),
    (
        "spec_kind_unhashable",
        lambda: mechanism_from_spec({"kind": [1]}),
        "spec.kind",
        "TypeError: unhashable type: 'list'",
    ),
    ("spec_missing_key", lambda: mechanism_from_spec({"kind": "randomized_response"}), "spec.k", "KeyError: 'k'"),
    (
        "spec_gaussian_missing_key",
        lambda: mechanism_from_spec({"kind": "gaussian", "delta": 0.1}),
        "spec.lower",
        "KeyError: 'lower'",
    ),
    (
        "record_spec_not_dict",
        lambda: RecordMechanism.from_spec([]),
        "spec",
        "AttributeError: 'list' object has no attribute 'get'",
    ),
    ("record_features_not_iterable", lambda: RecordMechanism(5), "features", "TypeError: 'int' object is not iterable"),
    (
        "record_n_features_bomb",
        lambda: RecordMechanism(RandomizedResponse(2, 0.1), n_features=10**18),
        "n_features",
        "hung: built 10**18 per-column fields (reachable from a client's mechanism spec)",
    ),
    (
        "release_complex",
        lambda: LaplaceMechanism(1.0).validate_release(np.array([0.5 + 1j])),
        "x_tilde",
        "accepted: the imaginary part was silently dropped (ComplexWarning)",
    ),
    (
        "release_numeric_strings",
        lambda: LaplaceMechanism(1.0).validate_release(["0.5"]),
        "x_tilde",
        "accepted: strings parsed as numbers",
    ),
    (
        "release_object_huge_int",
        lambda: LaplaceMechanism(1.0).validate_release(np.array([10**400], dtype=object)),
        "x_tilde",
        "OverflowError",
    ),
    (
        "release_far_outside_box",
        lambda: LaplaceMechanism(1.0).validate_release([1e300]),
        "x_tilde",
        "accepted; spread-EM then failed with ValidationError named 'prior.var' (an internal prior)",
    ),
    (
        "rr_loglik_shapes",
        lambda: RandomizedResponse(3, 0.2).log_likelihood([0, 1], [0, 1, 2]),
        "x",
        "ValueError: operands could not be broadcast together",
    ),
    (
        "tm_loglik_shapes",
        lambda: TransitionMatrix.binary(0.1, 0.2).log_likelihood([0, 1], [0, 1, 1]),
        "x",
        "IndexError: shape mismatch",
    ),
    (
        "laplace_loglik_shapes",
        lambda: LaplaceMechanism(1.0).log_likelihood([0.1, 0.2], [0.1, 0.2, 0.3]),
        "x",
        "ValueError (broadcast)",
    ),
    (
        "record_loglik_rows",
        lambda: MECHS["rr"].log_likelihood(_RX, _RY, _RX[:2], _RY[:2]),
        "X",
        "ValueError (broadcast)",
    ),
    (
        "record_ragged",
        lambda: MECHS["rr"].validate_release([[0, 1], [1]], [0, 1]),
        "X_tilde",
        "ValueError: inhomogeneous shape (numpy)",
    ),
    # --- estimators --------------------------------------------------------------------------------
    (
        "spread_C_huge_int",
        lambda: _quiet_fit(SpreadLogisticRegression(C=10**400, **_SPREAD), _RX, _RY, MECHS["rr"]),
        "C",
        "OverflowError",
    ),
    (
        "spread_burn_in_str",
        lambda: _quiet_fit(SpreadLogisticRegression(burn_in="a", **_SPREAD), _RX, _RY, MECHS["rr"]),
        "burn_in",
        "TypeError: '>' not supported between 'int' and 'str'",
    ),
    (
        "spread_burn_in_negative",
        lambda: _quiet_fit(SpreadLogisticRegression(burn_in=-5, **_SPREAD), _RX, _RY, MECHS["rr"]),
        "burn_in",
        "accepted",
    ),
    (
        "spread_random_state_str",
        lambda: _quiet_fit(SpreadLogisticRegression(**{**_SPREAD, "random_state": "a"}), _RX, _RY, MECHS["rr"]),
        "random_state",
        "accepted: silently unseeded (a different fit every run)",
    ),
    (
        "spread_random_state_negative",
        lambda: _quiet_fit(SpreadLogisticRegression(**{**_SPREAD, "random_state": -1}), _RX, _RY, MECHS["rr"]),
        "random_state",
        "ValueError: expected non-negative integer (numpy SeedSequence)",
    ),
    (
        "spread_fit_intercept_str",
        lambda: _quiet_fit(SpreadLogisticRegression(fit_intercept="no", **_SPREAD), _RX, _RY, MECHS["rr"]),
        "fit_intercept",
        "accepted as True",
    ),
    (
        "spread_executor",
        lambda: _quiet_fit(SpreadLogisticRegression(**{**_SPREAD, "executor": 5}), _RX, _RY, MECHS["rr"]),
        "executor",
        "AttributeError: 'int' object has no attribute 'map'",
    ),
    (
        "spread_clean_nan",
        lambda: _quiet_fit(SpreadLogisticRegression(**_SPREAD), np.array([[np.nan, 1.0], [0.0, 1.0]]), [0, 1]),
        "X",
        "sklearn ValueError (no field)",
    ),
    (
        "spread_clean_continuous_y",
        lambda: _quiet_fit(SpreadLogisticRegression(**_SPREAD), _FX, [0.1, 0.2, 0.3, 0.4]),
        "y",
        "sklearn ValueError: Unknown label type (no field)",
    ),
    (
        "spread_clean_datetime",
        lambda: _quiet_fit(SpreadLogisticRegression(**_SPREAD), _FX.astype("datetime64[s]"), _RY),
        "X",
        "accepted; predict_proba raised numpy UFuncTypeError (matmul on datetime64)",
    ),
    (
        "spread_predict_wrong_width",
        lambda: _fitted_spread().predict(np.zeros((2, 3))),
        "X",
        "IndexError: boolean index did not match indexed array",
    ),
    (
        "naive_C_negative",
        lambda: _quiet_fit(NaiveLogisticRegression(C=-1), _RX, _RY, MECHS["rr"]),
        "C",
        "sklearn InvalidParameterError",
    ),
    (
        "naive_cv_one",
        lambda: _quiet_fit(NaiveLogisticRegression(cv=1), _RX, _RY, MECHS["rr"]),
        "cv",
        "sklearn InvalidParameterError",
    ),
    (
        "naive_cv_too_many",
        lambda: _quiet_fit(NaiveLogisticRegression(cv=10), _RX, _RY, MECHS["rr"]),
        "cv",
        "sklearn ValueError: Cannot have number of splits n_splits=10 greater than the number of samples",
    ),
    (
        "naive_encoding",
        lambda: _quiet_fit(NaiveLogisticRegression(encoding="one-hot"), _RX, _RY, MECHS["rr"]),
        "encoding",
        "accepted as 'unit'",
    ),
    (
        "naive_one_class",
        lambda: _quiet_fit(NaiveLogisticRegression(), _RX, np.zeros(4, int), MECHS["rr"]),
        "y",
        "sklearn ValueError: needs samples of at least 2 classes",
    ),
    (
        "naive_no_rows",
        lambda: _quiet_fit(NaiveLogisticRegression(), _RX[:0], _RY[:0], MECHS["rr"]),
        "X",
        "sklearn ValueError: 0 sample(s)",
    ),
    ("naive_predict_1d", lambda: _fitted_naive().predict(_RX[0]), "X", "IndexError: too many indices for array"),
    ("naive_predict_wrong_width", lambda: _fitted_naive().predict(np.zeros((2, 3))), "X", "IndexError"),
    (
        "naive_predict_no_rows",
        lambda: _fitted_naive().predict_proba(np.zeros((0, 2))),
        "X",
        "sklearn ValueError: 0 sample(s)",
    ),
    (
        "wdro_huge_int_input",
        lambda: _quiet_fit(WassersteinDROLogisticRegression(rho=0.1), 10**400, _RY),
        "X",
        "OverflowError: int too large to convert to float (from sklearn's check_array)",
    ),
    (
        "wdro_rho_huge_int",
        lambda: _quiet_fit(WassersteinDROLogisticRegression(rho=10**400), _FX, _RY),
        "rho",
        "OverflowError",
    ),
    (
        "wdro_solver_options",
        lambda: _quiet_fit(WassersteinDROLogisticRegression(rho=0.1, solver_options={"bogus": 1}), _FX, _RY),
        "solver_options",
        "TypeError: Clarabel: unrecognized solver setting 'bogus'",
    ),
]


@pytest.mark.parametrize("call, field", [c[1:3] for c in REGRESSIONS], ids=[c[0] for c in REGRESSIONS])
def test_regression(call, field):
    with pytest.raises(ValidationError) as ei:
        call()
    assert_error(ei.value, {field})


REPLY_REGRESSIONS = [
    (
        "deep_json",
        "[" * 100_000 + "]" * 100_000,
        "RecursionError escaped parse_reply (the ServerApp only catches ReplyRejected)",
    ),
    ("spec_is_a_list", json.dumps([[1]]), "AttributeError: 'list' object has no attribute 'get'"),
    (
        "spec_kind_unhashable",
        json.dumps([{"kind": [1], "n_features": 4}]),
        "TypeError: unhashable type (caught, by luck, as TypeError)",
    ),
    (
        "spec_n_features_bomb",
        json.dumps(
            [
                {
                    "kind": "record",
                    "n_features": 10**18,
                    "label": None,
                    "features": {"replicate": RandomizedResponse(3, 0.2).to_spec()},
                }
            ]
        ),
        "hung: the server built 10**18 per-column fields",
    ),
]


@pytest.mark.parametrize("mechanisms", [r[1] for r in REPLY_REGRESSIONS], ids=[r[0] for r in REPLY_REGRESSIONS])
def test_reply_regression(mechanisms):
    content = release_content(_honest(3))
    meta = dict(content.config_records["meta"])
    meta["mechanisms"] = mechanisms
    msg = _message(RecordDict({"release": content.array_records["release"], "meta": ConfigRecord(meta)}))
    with pytest.raises(ReplyRejected) as ei:
        parse_reply(msg, 4, None)
    assert ei.value.reason == "unknown_mechanism"


def test_wdro_fits_huge_inputs():
    """Before: ConvergenceError (Clarabel fails on inputs of 1e12 and more). Columns with huge values
    are now rescaled inside the fit, an exact reformulation: the other column's coefficient is the
    one fitted without the outlier's scale problem."""
    rng = np.random.default_rng(0)
    X, y = rng.random((20, 2)), np.arange(20) % 2
    ref = _quiet_fit(WassersteinDROLogisticRegression(rho=0.0), X, y)
    X[0, 0] = 1e13
    est = _quiet_fit(WassersteinDROLogisticRegression(rho=0.0), X, y)
    assert np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.predict_proba(X)))
    assert est.coef_[0, 1] == pytest.approx(ref.coef_[0, 1], rel=0.05)


def test_wdro_huge_rho_gives_zero_coefficients():
    """Before: rho = 2**63 made Clarabel report the problem 'unbounded' (ConvergenceError). For ρ at least
    the gradient norm at θ = 0 the minimiser is θ = 0; larger ρ are now solved at that threshold."""
    for X, y in [(np.zeros((2, 2)), np.array([0, 1])), (_FX, _RY)]:
        est = _quiet_fit(WassersteinDROLogisticRegression(rho=2**63), X, y)
        np.testing.assert_allclose(est.coef_, 0.0, atol=1e-8)
        assert est.rho_ == 2.0**63 and np.all(np.isfinite(est.predict_proba(X)))


def test_one_learner_registry():
    """The run config, the scenario schema and the fitting code read one registry."""
    from fedrr.experiment._sections import LearnersSection

    names = __import__("dataclasses").fields(LearnersSection)[0].metadata["constraints"][0].item.values
    assert set(names) == set(LEARNERS) and set(RELEASE_LEARNERS) < set(names)
    with pytest.raises(ValidationError, match="unknown learner 'clean'"):
        RunConfig(learners=("clean",))  # an oracle: the server has no clean data
