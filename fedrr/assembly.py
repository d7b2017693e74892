"""Domain objects built from a run config: the population (``build_population``: the built-in one
of ``dataset_population``, or a custom factory given the keys it takes; fake clients with
``fake-fraction`` > 0), its table (``config_table``), ``checked_population``, and the learners'
options (``fit_options``). The config
(``fedrr.run_config``) and the domain (``fedrr.population``, ``fedrr.fake``) do not know each
other: this module reads one and calls the other with plain arguments, and names a domain error
by the run-config key it comes from."""

from __future__ import annotations

import inspect
import json
import os
from contextlib import contextmanager
from functools import lru_cache

import numpy as np

from ._names import BUDGET_KEYS, DISCRETE_FAMILIES, WHOLE_RECORD_FAMILIES
from ._user_code import load_object, table_path
from .datasets import LOADERS, Dataset, load, read_table
from .errors import ValidationError
from .fake import FakeClients
from .learners import FitOptions
from .mechanisms import RandomizedResponse
from .population import (
    ClientPopulation,
    DatasetPopulation,
    TablePopulation,
    check_population,
    plan_line,
    planned_release,
    record_mechanism_for,
)
from .run_config import RunConfig


def dataset_population(cfg: RunConfig) -> DatasetPopulation:
    """The built-in population of a run config: clients drawn from ``cfg.dataset``, each releasing
    with the record mechanism of ``cfg.mechanism`` at the configured per-field budgets (or, with
    ``cfg.budget_mix``, one of several feature budgets drawn per client). With ``mechanism =
    "paired"`` the budget is ``feature-epsilon`` = the ε of each client's whole release (its
    ``n-sampled`` pairs, 0 meaning 1, share it); a budget mix then mixes whole-record ε. ``"auto"``
    likewise, the release planned for ``n-clients`` records (``plan_release``)."""
    if cfg.table:
        with _config_key(None):
            ds = config_table(cfg)
        name = str(ds.extra["table"])
    else:
        name = cfg.dataset
        if name not in LOADERS:
            raise ValidationError("dataset", f"unknown dataset {name!r}; valid: {', '.join(LOADERS)}")
        ds = load(name)
    family = cfg.mechanism
    states = ds.schema.states()
    discrete = bool(np.all(states > 0))
    if family in DISCRETE_FAMILIES and not discrete:
        raise ValidationError(
            "mechanism", f"{family!r} needs a dataset of discrete features; {name!r} has numeric ones"
        )
    n_states = (int(states[0]) if np.all(states == states[0]) else states) if discrete else None
    if cfg.n_sampled > ds.schema.n_features:
        raise ValidationError(
            "n-sampled", f"must be at most the {ds.schema.n_features} features of {name!r}, got {cfg.n_sampled}"
        )
    # rr: flip probabilities (the feature flip, the budget mix's values, or the default flip), or else
    # ε per feature; an unset budget is None (the run announced its default: RunConfig.budget_notes)
    defaults = cfg.default_budgets()
    feature_flip = cfg.feature_flip if cfg.feature_flip is not None else defaults.get("feature-flip")
    use_flip = family == "rr" and (bool(cfg.budget_mix) or feature_flip is not None)
    feat_key = "feature-flip" if use_flip else "feature-epsilon"
    if cfg.budget_mix:
        levels, weights = [v for v, _ in cfg.budget_mix], [w for _, w in cfg.budget_mix]
    else:
        lv = feature_flip if use_flip else cfg.feature_epsilon
        if lv is None:
            whole = family in WHOLE_RECORD_FAMILIES
            what = "the ε of one client's whole release" if whole else "ε per released feature"
            why = "; protocol 'ldp-sgd' takes no default budget" if cfg.protocol == "ldp-sgd" else ""
            raise ValidationError(feat_key, f"is required for mechanism {family!r} ({what}, > 0){why}")
        levels, weights = [lv], [1.0]
    label_flip = cfg.label_flip if cfg.label_flip is not None else defaults.get("label-flip")
    label_epsilon = cfg.label_epsilon
    if family not in WHOLE_RECORD_FAMILIES:  # no label budget of their own (RunConfig refuses the label keys)
        # errors of the mechanisms' own parameters (flip_prob, epsilon, ...) are reported by config key
        with _config_key("label-flip" if label_flip is not None else "label-epsilon"):
            RandomizedResponse(ds.schema.n_classes, label_flip, epsilon=label_epsilon)
    mechs = []
    for lv in levels:
        kw = {"feature_flip": lv} if use_flip else {"feature_epsilon": lv}
        with _config_key("budget-mix" if cfg.budget_mix else feat_key):
            mechs.append(
                record_mechanism_for(
                    family,
                    ds.schema.n_features,
                    n_states if family not in WHOLE_RECORD_FAMILIES else states,
                    ds.schema.n_classes,
                    label_flip=label_flip,
                    label_epsilon=label_epsilon,
                    delta=cfg.delta,
                    n_sampled=cfg.n_sampled or None,
                    gaussian_noise=cfg.gaussian_noise,
                    n_records=cfg.n_clients,
                    **kw,
                )
            )
    with _config_key(None):
        common = {"n_test_per_class": cfg.n_test_per_class, "dropout": cfg.dropout, "seed": cfg.seed}
        common |= {"resample": cfg.resample, "public_rows": cfg.public_rows}
        if cfg.table:
            public = table_path(cfg.public_table) if cfg.public_table else None
            pop = TablePopulation(ds, cfg.n_clients, mechs, weights, public_table=public, **common)
        else:
            features = "states" if family in DISCRETE_FAMILIES else "unit"
            pop = DatasetPopulation(name, cfg.n_clients, mechs, weights, features=features, **common)
    if family == "auto":
        pop.release_plans = tuple(
            plan_line(planned_release(states, ds.schema.n_classes, lv, cfg.n_clients)) for lv in levels
        )
    return pop


def config_table(cfg: RunConfig) -> Dataset:
    """The run config's table (``table``, ``label``, ``classes``, ``categorical``, ``edges``,
    ``test-table``) read by ``read_table``, once per process for an unchanged file."""
    files = [table_path(cfg.table)] + ([table_path(cfg.test_table)] if cfg.test_table else [])
    stamps = tuple((f, *_stamp(f)) for f in files)
    spec = json.dumps(
        [cfg.label, list(cfg.classes) or None, dict(cfg.categorical), dict(cfg.edges)], sort_keys=True, default=str
    )
    return _read_config_table(stamps, spec)


def _stamp(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)  # read_table names the missing file
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _read_config_table(stamps: tuple, spec: str) -> Dataset:
    label, classes, categorical, edges = json.loads(spec)
    test = stamps[1][0] if len(stamps) > 1 else None
    return read_table(stamps[0][0], label=label, classes=classes, categorical=categorical, edges=edges, test=test)


#: DatasetPopulation's argument names -> run-config keys
_ARG_KEYS = {"n_clients": "n-clients", "n_test_per_class": "n-test-per-class", "weights": "budget-mix"}
_ARG_KEYS |= {"n_sampled": "n-sampled", "gaussian_noise": "gaussian-noise"}
_ARG_KEYS |= {k: k.replace("_", "-") for k in BUDGET_KEYS} | {"test_table": "test-table"}
_ARG_KEYS |= {"public_table": "public-table", "public_rows": "public-rows"}
#: run-config keys whose errors pass through unchanged
_OWN_KEYS = {"delta", "dropout", "seed", "dataset", "mechanism", "n-clients", "n-test-per-class", "budget-mix"}
_OWN_KEYS |= {"feature-flip", "feature-epsilon", "label-flip", "label-epsilon", "n-sampled", "gaussian-noise"}
_OWN_KEYS |= {"table", "label", "classes", "resample"}


@contextmanager
def _config_key(key: str | None):
    """Re-raise a ValidationError under the run-config key it comes from (``key``, or the argument's
    own key); errors that already name a run-config key pass unchanged."""
    try:
        yield
    except ValidationError as exc:
        if exc.field in _OWN_KEYS:
            raise
        raise ValidationError(_ARG_KEYS.get(exc.field, key or exc.field), exc.message) from None


def build_population(cfg: RunConfig) -> ClientPopulation:
    """The population a run config names: ``population = "dataset"`` (built in) or
    ``"module:Factory"``. A factory gets the run config's keys that match its parameters (dashes as
    underscores: ``n-clients`` -> ``n_clients``), its own keys (``extras``) included; with
    ``fake-fraction`` > 0 some of its clients are fake (``fedrr.fake``, simulation only)."""
    return with_fake_clients(dataset_population(cfg) if cfg.population == "dataset" else _custom(cfg), cfg)


def _custom(cfg: RunConfig) -> ClientPopulation:
    factory = load_object(cfg.population)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    accepts_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kw = {k.replace("-", "_"): v for k, v in cfg.to_flwr().items()}
    for k in BUDGET_KEYS:  # an unset budget is not passed: the population's own default applies
        if getattr(cfg, k) is None:
            del kw[k]
    kw = kw if accepts_all else {k: v for k, v in kw.items() if k in params}
    pop = factory(**kw)
    if not isinstance(pop, ClientPopulation):
        raise ValidationError(
            "population", f"{cfg.population!r} must build a ClientPopulation, got {type(pop).__name__}"
        )
    return pop


def checked_population(cfg: RunConfig, key: str = "population") -> tuple[ClientPopulation, list]:
    """``build_population(cfg)`` and ``check_population`` of it, any error one ``ValidationError``:
    what the ``fedrr`` command and the Flower wrapper do before anything runs; then every mechanism
    states an ε > 0 and the clean test set (if any) has the mechanisms' width. Returns the population
    and its distinct mechanisms."""
    name = cfg.population_name()
    try:
        pop = build_population(cfg)
    except ValidationError:
        raise
    except Exception as exc:  # a custom population's own code raised
        raise ValidationError(key, f"{name} failed to build: {type(exc).__name__}: {exc}") from None
    mechanisms = check_population(pop, name, key)
    for i, m in enumerate(mechanisms):
        if not m.epsilon > 0:
            raise ValidationError(key, f"{name}: mechanism {i} states no ε > 0")
    try:  # the server scores every learner on it: a test set the models cannot read fails them all
        test = pop.test_set()
    except ValidationError:
        raise
    except Exception as exc:
        raise ValidationError(key, f"{name}'s test_set() failed: {type(exc).__name__}: {exc}") from None
    if test is not None:
        width, D = np.shape(test[0])[1:2], mechanisms[0].n_features
        if width != (D,) or len(test[1]) != len(test[0]):
            got = f"got X {np.shape(test[0])}, y {np.shape(test[1])}"
            raise ValidationError(key, f"{name}'s test_set() must be (X (n, {D}), y (n,)), {got}")
    return pop, mechanisms


#: argument -> run-config key, for errors raised while building from a run config
_KEYS = {
    "fraction": "fake-fraction",
    "attack": "fake-attack",
    "attribute": "fake-attribute",
    "state": "fake-state",
    "targets": "fake-targets",
    "label": "fake-label",
}


def with_fake_clients(population: ClientPopulation, cfg: RunConfig) -> ClientPopulation:
    """``population`` with the fake clients of a run config (``fake-*`` keys; unchanged when
    ``fake-fraction`` is 0); errors name the run-config key."""
    if cfg.fake_fraction <= 0:
        return population
    try:
        return FakeClients(
            population,
            cfg.fake_fraction,
            attack=cfg.fake_attack,
            attribute=cfg.fake_attribute,
            state=cfg.fake_state
            if cfg.fake_targets == 1
            else list(range(cfg.fake_state, cfg.fake_state + cfg.fake_targets)),
            label=cfg.fake_label,
        )
    except ValidationError as exc:
        if exc.field == "state" and cfg.fake_targets > 1:  # the target states fake-state .. + r − 1
            last = cfg.fake_state + cfg.fake_targets - 1
            raise ValidationError(
                "fake-targets",
                f"targets fake-state {cfg.fake_state} to {last} (fake-targets {cfg.fake_targets}): {exc.message}",
            ) from None
        raise ValidationError(_KEYS.get(exc.field, exc.field), exc.message) from None


def fit_options(cfg: RunConfig) -> FitOptions:
    """The learners' options of a run config (``fedrr.learners.FitOptions``), with its executor (imported
    here: the ClientApp imports this module and must not load the executors)."""
    from .parallel import make_executor

    return FitOptions(
        C=cfg.C,
        random_state=cfg.seed,
        executor=make_executor(cfg.executor, cfg.ray_address),
        spread_max_iter=cfg.spread_max_iter,
        spread_solver=cfg.spread_solver,
        public_smoothing=cfg.public_smoothing,
        wdro_max_iter=cfg.wdro_max_iter,
        encoding=cfg.encoding,
        ldp_sgd=cfg.ldp_sgd_params(),
    )
