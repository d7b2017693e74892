"""A scenario's sections as typed, frozen dataclasses, one field per key with its doc and constraints
(``fedrr._params``; the config reference is generated from them), and the scenario's vocabulary
(datasets by task, modes, grid keys). The lowest module of a scenario: the spec
(``fedrr.experiment._spec``), its relation checks (``_crosscheck``) and its cells (``_cells``) read it."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import _config_schema as schema
from .._config_tables import Options_, Split
from .._names import LEARNERS
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

CLASSIFICATION_DATASETS = ("mnist_7_vs_9", "digits_7_vs_9", "breast_cancer", "adult", "adult_binned")
REGRESSION_DATASETS = ("diabetes", "lending_club")
MODES = ("flower", "cohort", "offline")
GRID_KEYS = ("epsilon_grid", "feature_flip_grid", "feature_epsilon_grid")
#: bounds that keep a typo (repeats = 1e9) a config error instead of an out-of-memory kill
MAX_REPEATS, MAX_CELLS = 10_000, 100_000
#: privacy.split's default (mechanisms "paired" and "auto" refuse any other: no label budget to split off)
DEFAULT_SPLIT = {"features": 0.9, "label": 0.1}
_ALL_LEARNERS = tuple(dict.fromkeys(LEARNERS["classification"] + LEARNERS["regression"]))


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
