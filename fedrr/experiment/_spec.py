"""Scenario configs as typed, frozen dataclasses: a TOML file is parsed and validated once into a ``ScenarioSpec``
(keys known, typed, range-checked, defaulted; relations checked in ``crosscheck``) listing its ``CellSpec``s.
Fields carry their docs and constraints (``fedrr._params``; the config reference is generated from them).
A bad config raises ``ValidationError(field, message)`` with the key's path before anything runs."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _config_schema as schema
from .._config_tables import Options_, Split
from .._params import (
    Boolean,
    Constraint,
    Interval,
    IsNone,
    ListOf,
    Options,
    Satisfies,
    Text,
    check_param,
    type_name,
    unknown_key,
)
from ..errors import ValidationError
from ..learners import names as learner_names

CLASSIFICATION_DATASETS = ("mnist_7_vs_9", "digits_7_vs_9", "breast_cancer", "adult", "adult_binned")
REGRESSION_DATASETS = ("diabetes", "lending_club")
MODES = ("flower", "cohort", "offline")
GRID_KEYS = ("epsilon_grid", "feature_flip_grid", "feature_epsilon_grid")
#: bounds that keep a typo (repeats = 1e9) a config error instead of an out-of-memory kill
MAX_REPEATS, MAX_CELLS = 10_000, 100_000
#: privacy.split's default (mechanisms "paired" and "auto" refuse any other: no label budget to split off)
DEFAULT_SPLIT = {"features": 0.9, "label": 0.1}
_ALL_LEARNERS = tuple(dict.fromkeys(learner_names("classification") + learner_names("regression")))


def key(default: Any, doc: str, *constraints: Constraint) -> Any:
    """A config key: default, one line of documentation, the constraints its value must meet."""
    return field(default=default, metadata={"doc": doc, "constraints": constraints})


_POS = Interval(float, 0, None, closed="neither")
_UNIT_OPEN = Interval(float, 0, 1, closed="neither")


def _scenario_name(v: Any) -> bool:
    return isinstance(v, str) and bool(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", v)) and ".." not in v


# ------------------------------------------------------------------------------ sections
@dataclass(frozen=True)
class ScenarioSection:
    name: str | None = key(
        None,
        "name of the scenario (default: the file name); also the default results folder",
        Satisfies(
            _scenario_name,
            "a non-empty name of letters, digits, '_', '.' or '-' (it names the default results folder results/<name>)",
        ),
        IsNone(),
    )
    description: str = key("", "free text, copied to the manifest and summary", Text())
    seed: int = key(0, "master seed: cell seeds derive from it and the cell's index", Interval(int, 0, None))
    repeats: int = key(
        1, "independent repeats of every grid point (new split, new noise)", Interval(int, 1, MAX_REPEATS)
    )
    out: str | None = key(
        None, "results directory (default results/<name>; the CLI's --out wins)", Text(True), IsNone()
    )


# The shared keys of each section come from the config schema (``fedrr._config_schema``), which
# also generates ``RunConfig``: one declaration per key. A section declares here only the
# scenario's own keys: grid axes, the sweep's learner list, how cells run in parallel, ...


@schema.with_keys(schema.section_keys("population"), "scenario_field")
class PopulationSection:
    task: str = key(
        "classification",
        "classification (the built-in federated population) | regression (Farokhi "
        "2020: inputs released by one Gaussian/Laplace block, offline)",
        Options("classification", "regression"),
    )
    options: Mapping = field(
        default_factory=dict,
        hash=False,
        metadata={"doc": "extra keys passed to a custom population's constructor", "constraints": (Options_(),)},
    )


@schema.with_keys(schema.section_keys("privacy"), "scenario_field")
class PrivacySection:
    epsilon_grid: tuple | None = key(
        None,
        "ε per whole record, split across fields by `split` (paired: all of it to the pairs; auto: all of it to "
        "the planned release)",
        ListOf(_POS),
        IsNone(),
    )
    split: Mapping = field(
        default_factory=lambda: dict(DEFAULT_SPLIT),
        hash=False,
        metadata={
            "doc": "shares of ε_record for all features / the label (not with mechanism = paired or auto, whose "
            "label has no budget of its own)",
            "constraints": (Split(),),
        },
    )
    feature_flip_grid: tuple | None = key(None, "rr: flip probability per feature", ListOf(_UNIT_OPEN), IsNone())
    feature_epsilon_grid: tuple | None = key(
        None, "ε per feature (gaussian_noise = joint: ε of all features together)", ListOf(_POS), IsNone()
    )
    calibration: str = key(
        "analytic",
        "regression, gaussian: analytic (exact (ε, δ)) | farokhi (Farokhi 2020 Thm 1, "
        "nominal ε; the exact ε is what is reported)",
        Options("analytic", "farokhi"),
    )
    label_public: bool = key(False, "regression: release the target in the clear as Farokhi 2020 (ỹ = y)", Boolean())


@schema.with_keys(schema.section_keys("learners"), "scenario_field", first=False)
class LearnersSection:
    names: tuple = key(
        ("spread", "naive", "clean"),
        f"any of {', '.join(_ALL_LEARNERS)} (see fedrr.learners); the run config's learners are those of them "
        "that train on releases",
        ListOf(Options(*_ALL_LEARNERS)),
    )


@schema.with_keys(schema.section_keys("run"), "scenario_field", first=False)
class RunSection:
    mode: str = key(
        "offline",
        "flower (one Flower node per client) | cohort (nodes host cohort_size clients) | offline (no Flower)",
        Options(*MODES),
    )
    workers: int = key(
        0,
        "offline cells run in parallel, this many at once, the likely longest first (0: one per CPU)",
        Interval(int, 0, None),
    )
    parallel: str = key(
        "ray",
        "how offline cells run in parallel: ray (local, or the cluster at ray_address / "
        "RAY_ADDRESS) | processes; same results",
        Options("ray", "processes"),
    )


SECTIONS: dict[str, type] = {
    "scenario": ScenarioSection,
    "population": PopulationSection,
    "privacy": PrivacySection,
    "learners": LearnersSection,
    "run": RunSection,
}


def _key_path(k: Any) -> str:
    """A key as written in a TOML key path: bare, or quoted ("" for the empty key)."""
    k = str(k)
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _section(cls: type, name: str, given: Any) -> Any:
    if not isinstance(given, dict):
        raise ValidationError(name, f"must be a table ([{name}]), got {type_name(given)} {given!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    bad = [k for k in given if k not in fields]
    if bad:
        raise unknown_key(f"{name}.{_key_path(bad[0])}", bad[0], list(fields), f" in [{name}]")
    kw = {}
    for k, v in given.items():
        value = check_param(f"{name}.{k}", v, fields[k].metadata["constraints"])
        axis = getattr(fields[k].metadata.get("key"), "axis", False)
        kw[k] = (value,) if axis and not isinstance(value, tuple) else value  # one value: a grid of one
    return cls(**kw)


@dataclass(frozen=True)
class ScenarioSpec:
    """A validated scenario. ``grid_axis`` is the swept privacy key ("" when the population or a
    budget mix sets the budgets: one grid point)."""

    scenario: ScenarioSection
    population: PopulationSection
    privacy: PrivacySection
    learners: LearnersSection
    run: RunSection
    grid_axis: str = "epsilon_grid"
    path: str = field(default="", compare=False)
    text: str = field(default="", compare=False)
    #: one line per budget a default filled in (the sweep prints them at its start)
    notes: tuple = field(default=(), compare=False)

    @property
    def name(self) -> str:
        return self.scenario.name

    @property
    def grid(self) -> tuple[float, ...]:
        return tuple(getattr(self.privacy, self.grid_axis) or ()) if self.grid_axis else ()

    @property
    def n_grid(self) -> tuple[int, ...]:
        return self.population.n_clients

    @property
    def is_dataset(self) -> bool:
        return self.population.population == "dataset"

    @property
    def resampled(self) -> bool:
        """Whether the population's rows are resampled (``population.resample``): outputs say so."""
        return self.population.resample != "none"

    @property
    def task(self) -> str:
        return self.population.task

    @property
    def metric(self) -> str:
        """What cells are scored by: test accuracy, or test MSE for regression."""
        return "mse" if self.task == "regression" else "accuracy"

    def cells(self, grid_indices: list[int] | None = None) -> list:
        from ._cells import CellSpec

        gs = range(max(len(self.grid), 1)) if grid_indices is None else grid_indices
        return [
            CellSpec(self, g, n, r) for g in gs for n in range(len(self.n_grid)) for r in range(self.scenario.repeats)
        ]

    def as_dict(self) -> dict:
        """The scenario as a TOML-like dict (unset keys left out); ``parse_scenario`` of it gives
        this spec back."""
        out = {}
        for sec in SECTIONS:
            d = {}
            for f in dataclasses.fields(getattr(self, sec)):
                v = getattr(getattr(self, sec), f.name)
                if v is None:
                    continue
                if f.name == "budget_mix":
                    v = {"values": [a for a, _ in v], "weights": [w for _, w in v]} if v else {}
                elif f.name in ("table", "test_table") and v and self.path:  # as written: relative to the file
                    v = os.path.relpath(v, Path(self.path).resolve().parent)
                d[f.name] = json.loads(json.dumps(v))
            out[sec] = d
        return out


def parse_scenario(data: Any, *, name: str = "scenario", path: str = "", text: str = "") -> ScenarioSpec:
    """Validate a parsed TOML document, fill in defaults and check the keys' relations."""
    if not isinstance(data, dict):
        raise ValidationError("config", f"must be a TOML table, got {type_name(data)}")
    unknown = [s for s in data if s not in SECTIONS]
    if unknown:
        s = unknown[0]
        hint = next(
            (
                f" ({s!r} belongs in [{sec}])"
                for sec, cls in SECTIONS.items()
                if s in {f.name for f in dataclasses.fields(cls)}
            ),
            "",
        )
        raise ValidationError(_key_path(s), f"unknown section or key{hint}; valid sections: {', '.join(SECTIONS)}")
    secs = {sec: _section(cls, sec, data.get(sec, {})) for sec, cls in SECTIONS.items()}
    secs["population"] = _table_paths(secs["population"], path)
    if secs["scenario"].name is None:
        secs["scenario"] = dataclasses.replace(secs["scenario"], name=name)
    from ._crosscheck import crosscheck

    notes: list[str] = []
    secs, axis = crosscheck(secs, notes)
    spec = ScenarioSpec(**secs, grid_axis=axis, path=path, text=text, notes=tuple(notes))
    n_cells = max(len(spec.grid), 1) * len(spec.n_grid) * spec.scenario.repeats
    if n_cells > MAX_CELLS:  # refused before a cell list (or a results table) that size is built
        raise ValidationError(
            "scenario.repeats",
            f"{n_cells:,} cells ({max(len(spec.grid), 1)} grid points × {len(spec.n_grid)} client counts × "
            f"{spec.scenario.repeats} repeats) is over the limit of {MAX_CELLS:,}: split the sweep",
        )
    return spec


def _table_paths(pop: Any, path: str) -> Any:
    """A table population's files, relative paths made absolute against the scenario file's folder
    (every cell, worker process and Ray worker then reads the same files)."""
    from ..population import table_path

    base = Path(path).resolve().parent if path else None
    paths = {k: table_path(getattr(pop, k), base) for k in ("table", "test_table") if getattr(pop, k)}
    return dataclasses.replace(pop, **paths) if paths else pop


def first_repeats(spec: ScenarioSpec, n: int, field: str = "--repeats") -> ScenarioSpec:
    """The scenario with only its first ``n`` repeats: the same cells, seeds and results as those
    repeats of the whole sweep (a cell's seed depends on its grid point, N and repeat only)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= spec.scenario.repeats:
        raise ValidationError(
            field, f"must be an integer in [1, {spec.scenario.repeats}] (the scenario's repeats), got {n}"
        )
    return dataclasses.replace(spec, scenario=dataclasses.replace(spec.scenario, repeats=n))


def load_scenario(path: str | Path) -> ScenarioSpec:
    """Read and validate a scenario TOML file."""
    p = Path(path)
    if not p.exists():
        raise ValidationError("config", f"file {str(p)!r} does not exist")
    try:  # bytes, then UTF-8, CRLF as LF: text mode would also turn a lone CR (not TOML) into a newline
        text = p.read_bytes().decode("utf-8").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            "config", f"{p}: not valid TOML: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise ValidationError("config", f"cannot read {str(p)!r}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config", f"{p}: not valid TOML: {exc}") from None
    return parse_scenario(data, name=p.stem, path=str(p), text=text)
