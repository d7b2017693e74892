"""Scenario configs for privacy-budget sweeps: a TOML file, validated on load.

Every key is known here (``SCHEMA``: type, default, meaning). A bad config raises
``fedrr.ValidationError(field, message)`` with ``field`` the key's path ("privacy.epsilon_grid"),
before anything runs. ``cells(cfg)`` lists the sweep's cells and ``cell_run_config`` turns one
into the flat run config of ``fedrr.federation`` (the same keys ``run_federation`` takes)."""

from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from .regression import REGRESSION_LEARNERS, REGRESSION_ORACLES

#: the built-in dataset population needs a classification dataset (the others are regression)
CLASSIFICATION_DATASETS = ("mnist_7_vs_9", "digits_7_vs_9", "breast_cancer", "adult")
REGRESSION_DATASETS = ("diabetes", "lending_club")
#: learners trained on the releases (by ``fedrr.federation.strategy.ReleaseStrategy``)
RELEASE_LEARNERS = ("spread", "spread-flat", "naive", "naive-cv", "wdro")
#: oracles outside the federation: they see clean data
ORACLE_LEARNERS = ("spread-true", "clean")
LEARNERS = RELEASE_LEARNERS + ORACLE_LEARNERS
MODES = ("flower", "cohort", "offline")
MECHANISMS = ("rr", "gaussian", "laplace")
GRID_KEYS = ("epsilon_grid", "feature_flip_grid", "feature_epsilon_grid")


@dataclass(frozen=True)
class Key:
    kind: str  # "int" | "float" | "str" | "bool" | "table" | "int_or_list" | "float_list" | "str_list" | "float_or_str"
    default: Any
    doc: str
    check: Callable[[str, Any], None] | None = None


def _type_name(v: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(v), type(v).__name__)


def _need(path: str, ok: bool, msg: str) -> None:
    if not ok:
        raise ValidationError(path, msg)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer too large for a float (TOML integers are unbounded in tomllib)
        return False


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(k: Any) -> str:
    """A key as it is written in a TOML key path: bare, or quoted ("" for the empty key)."""
    k = str(k)
    return k if _BARE_KEY.fullmatch(k) else json.dumps(k)


def _min(lo: float, strict: bool = False):
    def check(path, v):
        vals = v if isinstance(v, list) else [v]
        for x in vals:
            _need(path, x > lo if strict else x >= lo, f"must be {'>' if strict else '>='} {lo:g}, got {x!r}")

    return check


def _open_unit(path, v):
    vals = v if isinstance(v, list) else [v]
    for x in vals:
        _need(path, 0 < x < 1, f"must be in the open interval (0, 1), got {x!r}")


def _choice(options):
    def check(path, v):
        vals = v if isinstance(v, list) else [v]
        for x in vals:
            _need(path, x in options, f"unknown value {x!r}; valid: {', '.join(options)}")

    return check


def _dropout(path, v):
    _need(path, 0 <= v < 1, f"must be in [0, 1), got {v!r}")


def _population(path, v):
    _need(
        path,
        v == "dataset" or (":" in v and all(v.partition(":")[::2])),
        f"must be 'dataset' (built in) or an import path 'package.module:Class', got {v!r}",
    )


def _grid(path, v):
    _need(path, len(v) > 0, "is empty; give at least one value, e.g. [1.0, 10.0]")
    _need(path, len(set(v)) == len(v), f"has repeated values {sorted({x for x in v if v.count(x) > 1})}")


def _eps_grid(path, v):
    _grid(path, v)
    for x in v:
        _need(path, x > 0, f"values must be > 0 (ε is a privacy budget), got {x!r}")


def _flip_grid(path, v):
    _grid(path, v)
    _open_unit(path, v)


def _label_flip(path, v):
    if isinstance(v, str):
        _need(
            path,
            v == "same",
            f'must be a flip probability in (0, 1) or "same" (the feature flip of the grid), got {v!r}',
        )
    else:
        _open_unit(path, v)


def _learner_names(path, v):
    _need(path, len(v) > 0, f"is empty; give at least one of {', '.join(LEARNERS)}")
    _choice(LEARNERS + tuple(n for n in REGRESSION_LEARNERS if n not in LEARNERS))(path, v)
    _need(path, len(set(v)) == len(v), f"lists a learner twice: {v!r}")
    _need(
        path,
        any(n in RELEASE_LEARNERS or (n in REGRESSION_LEARNERS and n not in REGRESSION_ORACLES) for n in v),
        f"needs at least one learner trained on the releases ({', '.join(RELEASE_LEARNERS)}); "
        f"{', '.join(ORACLE_LEARNERS)} are clean-data oracles",
    )


def _split(path, v):
    bad = sorted(set(v) - {"features", "label"})
    _need(path, not bad, f"unknown key(s) {bad}; valid: features, label")
    _need(path, set(v) == {"features", "label"}, "must give both shares, e.g. {features = 0.9, label = 0.1}")
    for k in ("features", "label"):
        _need(f"{path}.{k}", _is_num(v[k]) and 0 < v[k] < 1, f"must be a number in (0, 1), got {v[k]!r}")
    _need(
        path, abs(v["features"] + v["label"] - 1) < 1e-9, f"shares must add up to 1, got {v['features']} + {v['label']}"
    )


def _scenario_name(path, v):
    _need(
        path,
        bool(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", v)),
        f"must be a non-empty name of letters, digits, '_', '.' or '-' (it names the default results folder results/<name>), got {v!r}",
    )


def _budget_mix(path, v):
    if not v:
        return
    bad = sorted(set(map(str, v)) - {"values", "weights"})
    _need(
        path, not bad, f"unknown key(s) {bad}; valid: values, weights (e.g. {{values = [0.2, 0.4], weights = [1, 1]}})"
    )
    vals, wts = v.get("values"), v.get("weights", [1.0] * len(v.get("values") or []))
    _need(
        f"{path}.values", isinstance(vals, list) and len(vals) > 0, f"must be a non-empty list of numbers, got {vals!r}"
    )
    for x in vals:
        _need(
            f"{path}.values",
            _is_num(x) and x > 0,
            f"values must be numbers > 0 (flip probabilities for 'rr', ε per feature otherwise), got {x!r}",
        )
    _need(
        f"{path}.weights",
        isinstance(wts, list) and len(wts) == len(vals),
        f"must be a list of {len(vals)} numbers (one per value), got {wts!r}",
    )
    for w in wts:
        _need(f"{path}.weights", _is_num(w) and w >= 0, f"weights must be numbers >= 0, got {w!r}")
    _need(f"{path}.weights", sum(wts) > 0, f"must not all be 0, got {wts!r}")


#: section -> key -> Key. The TOML files in configs/ document the same defaults in comments.
SCHEMA: dict[str, dict[str, Key]] = {
    "scenario": {
        "name": Key(
            "str",
            None,
            "name of the scenario (default: the file name); also the default results folder",
            _scenario_name,
        ),
        "description": Key("str", "", "free text, copied to the manifest and summary"),
        "seed": Key("int", 0, "master seed: cell seeds derive from it and the cell's index", _min(0)),
        "repeats": Key("int", 1, "independent repeats of every grid point (new split, new noise)", _min(1)),
        "out": Key("str", None, "results directory (default results/<name>; the CLI's --out wins)"),
    },
    "population": {
        "population": Key(
            "str", "dataset", "'dataset' or an import path 'module:Class' of a ClientPopulation", _population
        ),
        "dataset": Key(
            "str",
            "digits_7_vs_9",
            "dataset of the built-in population",
            _choice(CLASSIFICATION_DATASETS + REGRESSION_DATASETS),
        ),
        "n_clients": Key("int_or_list", 100, "clients (one record each); a list makes an N grid", _min(1)),
        "n_test_per_class": Key(
            "int", 50, "held-out clean test records per class (evaluation only; regression: test rows)", _min(0)
        ),
        "task": Key(
            "str",
            "classification",
            "classification (the built-in federated population) | regression (Farokhi 2020: "
            "inputs released by one Gaussian/Laplace block, offline; datasets lending_club, adult, diabetes)",
            _choice(("classification", "regression")),
        ),
        "dropout": Key("float", 0.0, "fraction of clients that never answer", _dropout),
        "budget_mix": Key(
            "table",
            {},
            "clients with different budgets in one pool, e.g. {values = [0.2, 0.4], weights = [1, 1]}: "
            "values are feature flip probabilities ('rr') or ε per feature (gaussian/laplace), drawn per client "
            "with the weights; it replaces the privacy grid (the label uses label_flip / label_epsilon)",
            _budget_mix,
        ),
        "options": Key("table", {}, "extra keys passed to a custom population's constructor"),
    },
    "privacy": {
        "mechanism": Key(
            "str", "rr", "rr (k-ary randomised response on discrete features) | gaussian | laplace", _choice(MECHANISMS)
        ),
        "epsilon_grid": Key("float_list", None, "ε per whole record, split across fields by `split`", _eps_grid),
        "split": Key(
            "table", {"features": 0.9, "label": 0.1}, "shares of ε_record for all features / the label", _split
        ),
        "feature_flip_grid": Key("float_list", None, "rr: flip probability per feature", _flip_grid),
        "feature_epsilon_grid": Key("float_list", None, "ε per feature", _eps_grid),
        "label_flip": Key(
            "float_or_str", None, 'label flip probability, or "same" as the feature flip (per-field grids)', _label_flip
        ),
        "label_epsilon": Key("float", None, "label ε (per-field grids)", _min(0, True)),
        "delta": Key(
            "float",
            1e-5,
            "δ per feature of the Gaussian mechanism (record δ = D·δ; regression: δ of the input block)",
            _open_unit,
        ),
        "calibration": Key(
            "str",
            "analytic",
            "regression, gaussian: analytic (exact (ε, δ)) | farokhi (Farokhi 2020 Thm 1, "
            "nominal ε; the exact ε is what is reported)",
            _choice(("analytic", "farokhi")),
        ),
        "label_public": Key(
            "bool",
            False,
            "regression: release the target in the clear as Farokhi 2020 (ỹ = y); ε_record "
            "then covers the inputs only, and every output says so",
        ),
    },
    "learners": {
        "names": Key("str_list", ["spread", "naive", "clean"], f"any of {', '.join(LEARNERS)}", _learner_names),
        "C": Key("float", 1.0, "inverse L2 penalty (scikit-learn's C)", _min(0, True)),
        "spread_max_iter": Key("int", 200, "most EM iterations of spread-EM", _min(1)),
    },
    "run": {
        "mode": Key(
            "str",
            "offline",
            "flower (one Flower node per client) | cohort (nodes host cohort_size clients) | offline (no Flower)",
            _choice(MODES),
        ),
        "cohort_size": Key("int", 1000, "clients per Flower node in cohort mode", _min(1)),
        "workers": Key("int", 0, "offline cells run in parallel, this many at once (0: one per CPU)", _min(0)),
        "parallel": Key(
            "str",
            "ray",
            "how offline cells run in parallel: ray (Ray tasks on a local Ray, or the cluster at "
            "ray_address / RAY_ADDRESS) | processes (a local process pool); same results",
            _choice(("ray", "processes")),
        ),
        "executor": Key(
            "str",
            "threads",
            "spread-EM's E-step: serial | threads | ray (same result)",
            _choice(("serial", "threads", "ray")),
        ),
        "ray_address": Key("str", "", "Ray cluster for Flower simulations and the ray executor ('' = local)"),
        "wave_size": Key("int", 256, "Flower: release queries in flight at once", _min(1)),
        "min_valid": Key("int", 20, "fewer valid releases and the cell fails", _min(1)),
        "node_wait_timeout": Key("float", 120.0, "Flower: seconds to wait for nodes to register", _min(0, True)),
        "reply_timeout": Key("float", 600.0, "Flower: seconds to wait for all replies", _min(0, True)),
    },
}


def _check_type(path: str, key: Key, v: Any) -> Any:
    k = key.kind
    got = f"got {_type_name(v)} {v!r}"
    if k == "int":
        _need(path, _is_int(v), f"must be an integer, {got}")
    elif k == "float":
        _need(path, _is_num(v), f"must be a number, {got}")
        v = float(v)
    elif k == "str":
        _need(path, isinstance(v, str), f"must be a string, {got}")
    elif k == "bool":
        _need(path, isinstance(v, bool), f"must be true or false, {got}")
    elif k == "table":
        _need(path, isinstance(v, dict), f"must be a table, e.g. {{features = 0.9, label = 0.1}}, {got}")
    elif k == "int_or_list":
        if isinstance(v, list):
            _need(path, len(v) > 0, "is an empty list; give an integer or a non-empty list of integers")
            for x in v:
                _need(path, _is_int(x), f"must hold integers only, got {_type_name(x)} {x!r}")
            _need(path, len(set(v)) == len(v), f"has repeated values {v!r}")
        else:
            _need(path, _is_int(v), f"must be an integer or a list of integers, {got}")
    elif k == "float_list":
        _need(path, isinstance(v, list), f"must be a list of numbers, e.g. [1.0, 10.0], {got}")
        for x in v:
            _need(path, _is_num(x), f"must hold numbers only, got {_type_name(x)} {x!r}")
        v = [float(x) for x in v]
    elif k == "str_list":
        _need(path, isinstance(v, list), f'must be a list of strings, e.g. ["spread", "naive"], {got}')
        for x in v:
            _need(path, isinstance(x, str), f"must hold strings only, got {_type_name(x)} {x!r}")
    elif k == "float_or_str":
        _need(path, _is_num(v) or isinstance(v, str), f"must be a number or a string, {got}")
        v = float(v) if _is_num(v) else v
    if key.check is not None:
        key.check(path, v)
    return v


@dataclass
class ScenarioConfig:
    """A validated scenario: ``sections[section][key]`` with every default filled in."""

    sections: dict[str, dict[str, Any]]
    path: str = ""
    text: str = ""
    grid_key: str = "epsilon_grid"
    extras: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, section: str) -> dict[str, Any]:
        return self.sections[section]

    @property
    def name(self) -> str:
        return self.sections["scenario"]["name"]

    @property
    def grid(self) -> list[float]:
        return list(self.sections["privacy"][self.grid_key] or []) if self.grid_key else []

    @property
    def n_grid(self) -> list[int]:
        n = self.sections["population"]["n_clients"]
        return list(n) if isinstance(n, list) else [n]

    @property
    def is_dataset(self) -> bool:
        return self.sections["population"]["population"] == "dataset"

    def as_dict(self) -> dict:
        """The sections as a plain TOML-like dict (unset keys left out); ``parse_config`` of it
        gives this config back."""
        return {
            sec: {k: v for k, v in json.loads(json.dumps(keys)).items() if v is not None}
            for sec, keys in self.sections.items()
        }


def parse_config(data: dict, *, name: str = "scenario", path: str = "", text: str = "") -> ScenarioConfig:
    """Validate a parsed TOML document and fill in defaults."""
    if not isinstance(data, dict):
        raise ValidationError("config", f"must be a TOML table, got {_type_name(data)}")
    unknown = [s for s in data if s not in SCHEMA]
    if unknown:
        s = unknown[0]
        hint = ""
        for sec, keys in SCHEMA.items():
            if s in keys:
                hint = f" ({s!r} belongs in [{sec}])"
        raise ValidationError(_key(s), f"unknown section or key{hint}; valid sections: {', '.join(SCHEMA)}")
    sections: dict[str, dict[str, Any]] = {}
    for sec, keys in SCHEMA.items():
        given = data.get(sec, {})
        if not isinstance(given, dict):
            raise ValidationError(sec, f"must be a table ([{sec}]), got {_type_name(given)} {given!r}")
        bad = [k for k in given if k not in keys]
        if bad:
            raise ValidationError(f"{sec}.{_key(bad[0])}", f"unknown key; valid keys in [{sec}]: {', '.join(keys)}")
        out = {}
        for k, key in keys.items():
            if k in given:
                out[k] = _check_type(f"{sec}.{k}", key, given[k])
            else:
                out[k] = json.loads(json.dumps(key.default))
        sections[sec] = out
    if sections["scenario"]["name"] is None:
        sections["scenario"]["name"] = name
    cfg = ScenarioConfig(sections, path=path, text=text)
    _cross_check(cfg)
    return cfg


def _cross_check_regression(cfg: ScenarioConfig) -> None:
    """A regression scenario: built-in data, offline, one Gaussian/Laplace block on the inputs,
    a record budget grid (epsilon_grid), regression learners."""
    pop, priv, learners = cfg["population"], cfg["privacy"], cfg["learners"]
    _need(
        "population.population", cfg.is_dataset, "task = 'regression' uses the built-in datasets (no custom population)"
    )
    _need(
        "population.dataset",
        pop["dataset"] in ("lending_club", "adult", "diabetes"),
        f"task = 'regression' needs lending_club, adult or diabetes, got {pop['dataset']!r}",
    )
    _need("population.budget_mix", not pop["budget_mix"], "is not available for task = 'regression'")
    _need(
        "privacy.mechanism",
        priv["mechanism"] in ("gaussian", "laplace"),
        f"task = 'regression' releases numeric inputs: 'gaussian' or 'laplace', got {priv['mechanism']!r}",
    )
    _need(
        "run.mode",
        cfg["run"]["mode"] == "offline",
        "task = 'regression' runs offline (the Flower protocol's label is categorical)",
    )
    for k in ("feature_flip_grid", "feature_epsilon_grid", "label_flip", "label_epsilon"):
        _need(
            f"privacy.{k}",
            priv[k] is None,
            "is not used by task = 'regression': give epsilon_grid (ε per record; "
            "privacy.split shares it between the input block and the target, or label_public = true)",
        )
    _need(
        "privacy.epsilon_grid", priv["epsilon_grid"] is not None, "is missing: task = 'regression' sweeps ε per record"
    )
    _need(
        "privacy.calibration",
        priv["calibration"] == "analytic" or priv["mechanism"] == "gaussian",
        "'farokhi' is a Gaussian calibration",
    )
    bad = [n for n in learners["names"] if n not in REGRESSION_LEARNERS]
    _need(
        "learners.names",
        not bad,
        f"{bad[0] if bad else ''!r} is not a regression learner; valid: {', '.join(REGRESSION_LEARNERS)}",
    )
    _need(
        "learners.names",
        any(n != "clean" for n in learners["names"]),
        "needs at least one learner trained on the releases",
    )
    _need(
        "learners.names",
        "gauss-dro" not in learners["names"] or priv["mechanism"] == "gaussian",
        "'gauss-dro' (Thm 6) needs privacy.mechanism = 'gaussian'",
    )
    cfg.grid_key = "epsilon_grid"


def _cross_check(cfg: ScenarioConfig) -> None:
    pop, priv, learners = cfg["population"], cfg["privacy"], cfg["learners"]
    if pop["task"] == "regression":
        return _cross_check_regression(cfg)
    bad = [n for n in learners["names"] if n not in LEARNERS and n in REGRESSION_LEARNERS]
    _need(
        "learners.names",
        not bad,
        f"{bad[0] if bad else ''!r} is a regression learner; set population.task = 'regression' "
        f"or use {', '.join(LEARNERS)}",
    )
    _need(
        "privacy.calibration",
        priv["calibration"] == "analytic",
        "is for task = 'regression' (classification uses the analytic Gaussian)",
    )
    _need(
        "privacy.label_public",
        not priv["label_public"],
        "is for task = 'regression' (a classification label is always randomised)",
    )
    if cfg.is_dataset:
        if pop["dataset"] in REGRESSION_DATASETS:
            raise ValidationError(
                "population.dataset",
                f"{pop['dataset']!r} is a regression dataset; the built-in population "
                f"trains classifiers: use one of {', '.join(CLASSIFICATION_DATASETS)}, or set task = 'regression'",
            )
        if pop["options"]:
            raise ValidationError("population.options", "is only for a custom population (population = 'module:Class')")
    else:
        from ..federation.config import DEFAULTS

        owned = {k.replace("-", "_") for k in DEFAULTS}
        for k in pop["options"]:
            if str(k).replace("-", "_") in owned:
                raise ValidationError(
                    f"population.options.{_key(k)}",
                    "is a run-config key the scenario sets itself (or the federation "
                    "reads); options are only the custom population's own constructor arguments",
                )
    grids = [k for k in GRID_KEYS if priv[k] is not None]
    if len(grids) > 1:
        raise ValidationError(f"privacy.{grids[1]}", f"give exactly one swept axis, not both {grids[0]} and {grids[1]}")
    if pop["budget_mix"]:
        _need(
            "population.budget_mix",
            cfg.is_dataset,
            "is for the built-in dataset population (a custom population sets its own budgets)",
        )
        _need(
            f"privacy.{grids[0]}" if grids else "population.budget_mix",
            not grids,
            "cannot be combined with population.budget_mix, which sets the feature budgets itself (no privacy grid)",
        )
        _need(
            "privacy.label_flip",
            priv["label_flip"] not in (None, "same") or priv["label_epsilon"] is not None,
            "population.budget_mix needs the label's budget: give label_flip (a number) or label_epsilon",
        )
        mix = pop["budget_mix"]
        pop["budget_mix"] = {"values": mix["values"], "weights": mix.get("weights", [1.0] * len(mix["values"]))}
        cfg.grid_key = ""  # one grid point: the mix is the scenario's budget
    elif not grids:
        if cfg.is_dataset:
            raise ValidationError(
                "privacy.epsilon_grid",
                "is missing: give epsilon_grid (ε per record), feature_flip_grid or feature_epsilon_grid",
            )
        cfg.grid_key = ""  # a custom population sets its own budgets: one grid point
    else:
        cfg.grid_key = grids[0]
    g = cfg.grid_key
    fam = priv["mechanism"]
    if g == "feature_flip_grid" and fam != "rr":
        raise ValidationError(
            "privacy.feature_flip_grid",
            f"flip probabilities are for mechanism 'rr'; for {fam!r} give feature_epsilon_grid or epsilon_grid",
        )
    if g == "epsilon_grid":
        for k in ("label_flip", "label_epsilon"):
            if priv[k] is not None:
                raise ValidationError(
                    f"privacy.{k}",
                    "cannot be set with epsilon_grid: the label's share of ε_record comes from privacy.split",
                )
        if not cfg.is_dataset:
            raise ValidationError(
                "privacy.epsilon_grid",
                "a record budget split needs the built-in dataset population (it must know D "
                "and k); give feature_flip_grid or feature_epsilon_grid for a custom population",
            )
    else:
        if priv["label_flip"] is not None and priv["label_epsilon"] is not None:
            raise ValidationError("privacy.label_epsilon", "give one of label_flip and label_epsilon, not both")
        if priv["label_flip"] is None and priv["label_epsilon"] is None:
            priv["label_flip"] = 0.2
        if priv["label_flip"] == "same" and g != "feature_flip_grid":
            raise ValidationError(
                "privacy.label_flip", '"same" needs feature_flip_grid (the label then flips like the features)'
            )
    if "spread-true" in learners["names"] and cfg.is_dataset and fam != "rr":
        raise ValidationError(
            "learners.names",
            "'spread-true' (spread-EM with the clean data's own prior) needs discrete "
            "features: privacy.mechanism = 'rr'",
        )


def load_config(path: str | Path) -> ScenarioConfig:
    """Read and validate a scenario TOML file."""
    p = Path(path)
    if not p.exists():
        raise ValidationError("config", f"file {str(p)!r} does not exist")
    try:
        text = p.read_text(encoding="utf-8")
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
    return parse_config(data, name=p.stem, path=str(p), text=text)


# ------------------------------------------------------------------------------------ cells
@dataclass(frozen=True)
class Cell:
    """One population + one release (one federation) at grid point ``g``, N index ``n``, repeat ``r``."""

    g: int
    n: int
    r: int

    @property
    def key(self) -> str:
        return f"g{self.g:03d}-n{self.n:02d}-r{self.r:03d}"


def cells(cfg: ScenarioConfig, grid_indices: list[int] | None = None) -> list[Cell]:
    gs = range(max(len(cfg.grid), 1)) if grid_indices is None else grid_indices
    return [Cell(g, n, r) for g in gs for n in range(len(cfg.n_grid)) for r in range(cfg["scenario"]["repeats"])]


def cell_seed(cfg: ScenarioConfig, cell: Cell) -> int:
    """The cell's seed: ``SeedSequence(scenario.seed, spawn_key=(g, n, r))`` — independent of
    which process runs it, of the order and of how many run at once."""
    ss = np.random.SeedSequence(int(cfg["scenario"]["seed"]), spawn_key=(cell.g, cell.n, cell.r))
    return int(ss.generate_state(1, dtype=np.uint32)[0])


_SHAPE_CACHE: dict[str, tuple[int, int | None, int]] = {}


def dataset_shape(name: str) -> tuple[int, int | None, int]:
    """(D, states per feature or None, classes) of a built-in dataset."""
    if name not in _SHAPE_CACHE:
        from ..datasets import load

        ds = load(name)
        st = ds.schema.states()
        k = int(st[0]) if np.all(st > 0) and np.all(st == st[0]) else None
        _SHAPE_CACHE[name] = (ds.schema.n_features, k, ds.schema.n_classes)
    return _SHAPE_CACHE[name]


def privacy_params(cfg: ScenarioConfig, g: int) -> dict[str, Any]:
    """Per-field parameters at grid point g, as run-config keys (0.0 = unused) plus what was
    asked for (``requested_eps_record`` with a record budget)."""
    priv = cfg["privacy"]
    out: dict[str, Any] = {
        "mechanism": priv["mechanism"],
        "delta": priv["delta"],
        "feature-flip": 0.0,
        "feature-epsilon": 0.0,
        "label-flip": 0.0,
        "label-epsilon": 0.0,
    }
    gk = cfg.grid_key
    if not gk:
        mix = cfg["population"]["budget_mix"]
        if mix:
            out["budget-mix"] = ",".join(f"{v!r}:{w!r}" for v, w in zip(mix["values"], mix["weights"]))
            if priv["label_flip"] is not None:
                out["label-flip"] = priv["label_flip"]
            else:
                out["label-epsilon"] = priv["label_epsilon"]
        return out
    v = cfg.grid[g]
    if cfg["population"]["task"] == "regression":  # one block on the inputs; the target public or Laplace
        out.update(
            {
                "requested_eps_record": v,
                "calibration": priv["calibration"],
                "label-public": priv["label_public"],
                "feature-epsilon": v if priv["label_public"] else priv["split"]["features"] * v,
                "label-epsilon": 0.0 if priv["label_public"] else priv["split"]["label"] * v,
            }
        )
        return out
    if gk == "epsilon_grid":
        from ..mechanisms import RandomizedResponse

        D, k, _ = dataset_shape(cfg["population"]["dataset"])
        eps_feat = priv["split"]["features"] * v / D
        out["requested_eps_record"] = v
        out["label-epsilon"] = priv["split"]["label"] * v
        if priv["mechanism"] == "rr":
            if k is None:
                raise ValidationError(
                    "privacy.mechanism",
                    f"'rr' needs a dataset whose features all have the same number of "
                    f"states; {cfg['population']['dataset']!r} does not (use gaussian or laplace)",
                )
            try:
                out["feature-flip"] = RandomizedResponse(k, epsilon=eps_feat).flip_prob
            except ValidationError as exc:
                raise ValidationError(
                    "privacy.epsilon_grid",
                    f"ε_record = {v:g} gives ε = {eps_feat:.3g} per feature on {D} features: {exc}",
                ) from None
        else:
            out["feature-epsilon"] = eps_feat
        return out
    if gk == "feature_flip_grid":
        out["feature-flip"] = v
    else:
        out["feature-epsilon"] = v
    if priv["label_flip"] == "same":
        out["label-flip"] = v
    elif priv["label_flip"] is not None:
        out["label-flip"] = priv["label_flip"]
    else:
        out["label-epsilon"] = priv["label_epsilon"]
    return out


def cell_run_config(
    cfg: ScenarioConfig, cell: Cell, *, results_dir: str = "results/federation", executor: str | None = None
) -> dict:
    """The flat ``fedrr.federation`` run config of one cell (population, mechanism, learners, Flower)."""
    pop, run, learners = cfg["population"], cfg["run"], cfg["learners"]
    params = privacy_params(cfg, cell.g)
    params.pop("requested_eps_record", None)
    rc: dict[str, Any] = {
        "population": pop["population"],
        "dataset": pop["dataset"],
        "n-clients": cfg.n_grid[cell.n],
        "n-test-per-class": pop["n_test_per_class"],
        "dropout": pop["dropout"],
        **params,
        "seed": cell_seed(cfg, cell),
        "learners": ",".join(n for n in learners["names"] if n in RELEASE_LEARNERS),
        "C": learners["C"],
        "spread-max-iter": learners["spread_max_iter"],
        "executor": executor or run["executor"],
        "ray-address": run["ray_address"],
        "run-mode": "cohort" if run["mode"] == "cohort" else "node",
        "cohort-size": run["cohort_size"] if run["mode"] == "cohort" else 1,
        "wave-size": run["wave_size"],
        "min-valid": run["min_valid"],
        "node-wait-timeout": run["node_wait_timeout"],
        "reply-timeout": run["reply_timeout"],
        "results-dir": results_dir,
        "run-name": cell.key,
    }
    if not cfg.is_dataset:
        for k, v in pop["options"].items():
            rc[k] = v
    return rc


def cell_fingerprint(cfg: ScenarioConfig, cell: Cell) -> str:
    """What determines a cell's result: a finished cell file is reused only if this matches."""
    rc = cell_run_config(cfg, cell)
    for k in ("executor", "ray-address", "results-dir", "wave-size", "node-wait-timeout", "reply-timeout"):
        rc.pop(k, None)
    rc["all-learners"] = cfg["learners"]["names"]
    rc["mode"] = cfg["run"]["mode"]
    return hashlib.sha256(json.dumps(rc, sort_keys=True).encode()).hexdigest()[:16]
