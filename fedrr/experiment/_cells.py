"""A sweep cell: one population and one release of it (one federation) at grid point ``g``, N
index ``n`` and repeat ``r`` of a scenario — its seed, its per-field privacy parameters, its
``RunConfig`` and the fingerprint that decides whether a finished cell can be reused."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .. import _config_schema as schema
from .._names import BUDGET_KEYS, WHOLE_RECORD_FAMILIES
from ..errors import ValidationError
from ..run_config import DEFAULTS, UNSET, RunConfig
from ._sections import LearnersSection, PopulationSection, PrivacySection, RunSection, ScenarioSection


class Scenario(Protocol):
    """What a cell reads of its scenario (``ScenarioSpec`` implements it): the sections, the swept
    axis and the grids derived from them. Declared here so that the spec, which lists its cells,
    and the cells need not import each other."""

    scenario: ScenarioSection
    population: PopulationSection
    privacy: PrivacySection
    learners: LearnersSection
    run: RunSection
    grid_axis: str

    @property
    def grid(self) -> tuple[float, ...]: ...
    @property
    def n_grid(self) -> tuple[int, ...]: ...
    @property
    def is_dataset(self) -> bool: ...
    @property
    def task(self) -> str: ...


@cache
def dataset_shape(name: str) -> tuple[int, int | None, int]:
    """(D, states per feature or None, classes) of a built-in dataset."""
    from ..datasets import load

    ds = load(name)
    st = ds.schema.states()
    k = int(st[0]) if np.all(st > 0) and np.all(st == st[0]) else None
    return ds.schema.n_features, k, ds.schema.n_classes


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes, computed once per process for an unchanged file."""
    st = Path(path).stat()
    return _digest(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=16)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: read_table's arguments, which are the [population] keys of the same names
_TABLE_KEYS = ("table", "test_table", "label", "classes", "categorical", "edges")


def scenario_schema(spec: Scenario):
    """The ``Schema`` of the scenario's built-in population (n_states per attribute, the classes: what
    the release planner reads): its table's (``population.table``, read once per process) or its
    dataset's."""
    if spec.population.table:
        from ..assembly import config_table

        try:
            return config_table(spec.population).schema
        except ValidationError as exc:  # read_table names its argument: the scenario key (a bad cell keeps its place)
            if exc.field.split(".")[0] in _TABLE_KEYS:
                raise ValidationError(f"population.{exc.field}", exc.message) from None
            raise
    from ..datasets import load

    return load(spec.population.dataset).schema


def population_shape(spec: Scenario) -> tuple[int, int | None, int]:
    """(D, states per feature or None, classes) of the scenario's built-in population: its table
    (``population.table``) or its dataset."""
    if not spec.population.table:
        return dataset_shape(spec.population.dataset)
    schema = scenario_schema(spec)
    st = schema.states()
    return schema.n_features, int(st[0]) if np.all(st == st[0]) else None, schema.n_classes


@dataclass(frozen=True)
class PrivacyParams:
    """Per-field budgets of one grid point (None = unset, as in ``RunConfig``), and what was asked for."""

    mechanism: str
    delta: float
    feature_flip: float | None = None
    feature_epsilon: float | None = None
    label_flip: float | None = None
    label_epsilon: float | None = None
    budget_mix: tuple = ()
    requested_eps_record: float | None = None
    calibration: str = "analytic"
    label_public: bool = False
    n_sampled: int | None = None
    gaussian_noise: str = "joint"


@dataclass(frozen=True)
class CellSpec:
    spec: Scenario
    g: int
    n: int
    r: int

    @property
    def key(self) -> str:
        return f"g{self.g:03d}-n{self.n:02d}-r{self.r:03d}"

    @property
    def seed(self) -> int:
        """``SeedSequence(scenario.seed, spawn_key=(g, n, r))``: independent of which process runs
        the cell, of the order and of how many run at once."""
        ss = np.random.SeedSequence(self.spec.scenario.seed, spawn_key=(self.g, self.n, self.r))
        return int(ss.generate_state(1, dtype=np.uint32)[0])

    @property
    def n_clients(self) -> int:
        return self.spec.n_grid[self.n]

    @property
    def grid_value(self) -> float | None:
        return self.spec.grid[self.g] if self.spec.grid_axis else None

    def privacy(self) -> PrivacyParams:
        """The per-field parameters at this grid point (a record budget is split by
        ``privacy.split`` and, for randomised response, turned into a flip probability)."""
        spec, priv = self.spec, self.spec.privacy
        base = {
            "mechanism": priv.mechanism,
            "delta": priv.delta,
            "n_sampled": (priv.n_sampled or 1) if priv.mechanism == "paired" else (priv.n_sampled or None),
            "gaussian_noise": priv.gaussian_noise,
        }
        axis = spec.grid_axis
        label = (
            {"label_flip": priv.label_flip}
            if priv.label_flip not in (None, "same")
            else {"label_epsilon": priv.label_epsilon}
            if priv.label_epsilon is not None
            else {}
        )
        if not axis:
            mix = spec.population.budget_mix
            return PrivacyParams(**base, budget_mix=mix, **(label if mix else {}))
        v = spec.grid[self.g]
        if spec.task == "regression":  # one block on the inputs; the target public or Laplace
            s = priv.split
            return PrivacyParams(
                **base,
                requested_eps_record=v,
                calibration=priv.calibration,
                label_public=priv.label_public,
                feature_epsilon=v if priv.label_public else s["features"] * v,
                label_epsilon=None if priv.label_public else s["label"] * v,
            )
        if axis == "epsilon_grid":
            return _record_budget(spec, v, base)
        feat = {"feature_flip": v} if axis == "feature_flip_grid" else {"feature_epsilon": v}
        if priv.label_flip == "same":
            label = {"label_flip": v}
        return PrivacyParams(**base, **feat, **label)

    def run_config(self, results_dir: str = "results/federation", executor: str | None = None) -> RunConfig:
        """The ``RunConfig`` of this cell: every key the scenario sets (``fedrr._config_schema``: the
        keys of both paths) as the scenario gives it, then the keys a cell derives (its N, its grid
        point's budgets, its seed, ...)."""
        spec = self.spec
        kw = {k.name: getattr(getattr(spec, k.section), k.name) for k in schema.run_keys() if k.scenario}
        kw.update(self.derived())
        kw.update(results_dir=results_dir, executor=executor or spec.run.executor)
        return RunConfig(**kw)

    def derived(self) -> dict[str, Any]:
        """The run-config keys this cell derives from the scenario (``Key.from_scenario``), whose
        scenario value is a grid (``Key.axis``) or resolved at the grid point (the budgets), or that
        only one mode reads (cohort_size)."""
        spec, pop = self.spec, self.spec.population
        p = self.privacy()
        from ..learners import names

        return {
            "n_clients": self.n_clients,
            **{k: getattr(p, k) for k in BUDGET_KEYS},
            "budget_mix": p.budget_mix,
            "n_sampled": p.n_sampled or 0,
            "seed": self.seed,
            "learners": tuple(n for n in spec.learners.names if n in names(oracles=False)),
            "run_mode": "cohort" if spec.run.mode == "cohort" else "node",
            # read in cohort mode only: the manifests of earlier sweeps list cohort_size = 1000 with any mode
            "cohort_size": spec.run.cohort_size if spec.run.mode == "cohort" else None,
            "run_name": self.key,
            "extras": dict(pop.options) if not spec.is_dataset else {},
        }

    def fingerprint(self) -> str:
        """What determines the cell's result: a finished cell file is reused only if this matches."""
        spec = self.spec
        if spec.task == "regression":
            rc: dict[str, Any] = {
                "privacy": _unset_as_zero(self.privacy().__dict__, BUDGET_KEYS),
                "n": self.n_clients,
                "seed": self.seed,
                "dataset": spec.population.dataset,
                "n_test": spec.population.n_test_per_class,
            }
        else:
            rc = self.run_config().to_flwr()
            rc = _unset_as_zero(rc, [k.replace("_", "-") for k in BUDGET_KEYS])
            for key in schema.run_keys():  # Key.fingerprint: what of the key decides the cell's result
                if key.fingerprint == "never" or (
                    key.fingerprint == "if-set" and rc.get(key.flwr) == DEFAULTS[key.flwr]
                ):
                    rc.pop(key.flwr, None)
        # a table's content decides the result, not where it lies: the report re-reads the path from the
        # manifest, relative to another file
        for k in ("table", "test-table", "public-table"):
            if rc.get(k):
                rc[f"{k}-sha256"] = file_digest(rc.pop(k))
        rc["all-learners"] = list(spec.learners.names)
        rc["mode"] = spec.run.mode
        return hashlib.sha256(json.dumps(rc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _unset_as_zero(d: dict[str, Any], keys) -> dict[str, Any]:
    """``d`` with its unset budgets (None, or "" in Flower's run config) written 0.0: fingerprinted as
    before unset became None, so finished cells stay valid."""
    return {k: 0.0 if k in keys and (v is None or v == UNSET) else v for k, v in d.items()}


def _record_budget(spec: Scenario, v: float, base: dict) -> PrivacyParams:
    """ε per record split: the label gets split.label·ε, the features split.features·ε, shared by the
    fields a client releases (all D, or n_sampled of them: each released field gets
    split.features·ε / m; a joint Gaussian block is one field and gets all of it). Randomised
    response on features with one k becomes a flip probability. Mechanisms "paired" and "auto": no
    split — ``feature_epsilon`` = ε_record, all of it to the pairs (each of m gets ε_record/m) or to
    the planned release."""
    from ..mechanisms import RandomizedResponse

    if spec.privacy.mechanism in WHOLE_RECORD_FAMILIES:  # all of ε_record to the release (no label budget)
        return PrivacyParams(**base, requested_eps_record=v, feature_epsilon=v)
    D, k, _ = population_shape(spec)
    s = spec.privacy.split
    joint = spec.privacy.mechanism == "gaussian" and spec.privacy.gaussian_noise == "joint"
    m = 1 if joint else spec.privacy.n_sampled or D
    eps_feat = s["features"] * v / m
    out = {"requested_eps_record": v, "label_epsilon": s["label"] * v}
    if spec.privacy.mechanism == "rr" and k is not None:
        try:
            out["feature_flip"] = RandomizedResponse(k, epsilon=eps_feat).flip_prob
        except ValidationError as exc:
            raise ValidationError(
                "privacy.epsilon_grid",
                f"ε_record = {v:g} gives ε = {eps_feat:.3g} per feature on {m} released features: {exc}",
            ) from None
    else:
        out["feature_epsilon"] = eps_feat
    return PrivacyParams(**base, **out)
