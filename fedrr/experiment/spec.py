"""Scenario configs as typed, frozen dataclasses: a TOML file is parsed and validated once into a ``ScenarioSpec``
(keys known, typed, range-checked, defaulted; relations checked in ``crosscheck``) listing its ``CellSpec``s.
Fields carry their docs and constraints (``fedrr._params``; the config reference is generated from them).
A bad config raises ``ValidationError(field, message)`` with the key's path before anything runs."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._params import (
    Boolean,
    Constraint,
    Interval,
    IsNone,
    ListOf,
    Options,
    Satisfies,
    Text,
    _type_name,
    check_param,
    unknown_key,
)
from ..errors import ValidationError
from ..fake import FAKE_ATTACKS
from ..learners import names as learner_names
from ..run_config import GAUSSIAN_NOISE, MECHANISM_FAMILIES
from ._tables import BudgetMix, Options_, Split

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


@dataclass(frozen=True)
class PopulationSection:
    population: str = key(
        "dataset",
        "'dataset' or an import path 'module:Class' of a ClientPopulation",
        Satisfies(
            lambda v: v == "dataset" or (isinstance(v, str) and ":" in v and all(v.partition(":")[::2])),
            "'dataset' (built in) or an import path 'package.module:Class'",
        ),
    )
    dataset: str = key(
        "digits_7_vs_9", "dataset of the built-in population", Options(*CLASSIFICATION_DATASETS, *REGRESSION_DATASETS)
    )
    n_clients: tuple = key(
        (100,),
        "clients (one record each); a list makes an N grid",
        Interval(int, 1, None),
        ListOf(Interval(int, 1, None)),
    )
    n_test_per_class: int = key(
        50, "held-out clean test records per class (evaluation only; regression: test rows)", Interval(int, 0, None)
    )
    task: str = key(
        "classification",
        "classification (the built-in federated population) | regression (Farokhi "
        "2020: inputs released by one Gaussian/Laplace block, offline)",
        Options("classification", "regression"),
    )
    dropout: float = key(0.0, "fraction of clients that never answer", Interval(float, 0, 1, closed="left"))
    budget_mix: tuple = key(
        (),
        "clients with different feature budgets in one pool, e.g. {values = [0.2, 0.4], "
        "weights = [1, 1]}: flip probabilities ('rr') or ε per feature, drawn per client with "
        "the weights; it replaces the privacy grid",
        BudgetMix(),
    )
    options: Mapping = field(
        default_factory=dict,
        hash=False,
        metadata={"doc": "extra keys passed to a custom population's constructor", "constraints": (Options_(),)},
    )
    fake_fraction: float = key(
        0.0,
        "simulation: fraction of the clients that are fake, sending an attacker's crafted releases (fedrr.fake)",
        Interval(float, 0, 1, closed="left"),
    )
    fake_attack: str = key(
        "output",
        "output (crafted releases of fake_attribute and the label, maximal gain, an OUE report with only the "
        "target bit; paired: of the pair (fake_state, fake_label)) | output-sampled (the same, the attribute only "
        "when the honest sampling draws it) | mga (Cao, Jia & Gong's maximal gain attack: k-RR a target drawn "
        "uniformly, OUE the target bits padded with random ones to the honest expected number, OLH the best of "
        "1,000 sampled seeds) | mga-sampled (mga, the attribute only when the honest sampling draws it) | input "
        "(a fake record, honestly randomised)",
        Options(*FAKE_ATTACKS),
    )
    fake_attribute: int = key(0, "the attribute (column) fake clients target", Interval(int, 0, None))
    fake_state: int = key(0, "the state of fake_attribute fake clients push up", Interval(int, 0, None))
    fake_targets: int = key(
        1,
        "mga, mga-sampled, input: the number r of target states, fake_state to fake_state + r - 1 (output: 1)",
        Interval(int, 1, None),
    )
    fake_label: int = key(1, "the label fake clients push up", Interval(int, 0, None))


@dataclass(frozen=True)
class PrivacySection:
    mechanism: str = key(
        "rr",
        "rr (k-ary randomised response on discrete features) | oracle | gaussian | laplace | paired (each "
        "client releases n_sampled (attribute, label) pairs, each one value of the product domain through a "
        "frequency oracle: the whole ε_record goes to the pairs, no label budget) | auto (the release planner's "
        "least-variance design for n_clients records, fedrr.mechanisms.plan_release: the whole ε_record goes to "
        "it, no label budget, no split, no n_sampled)",
        Options(*MECHANISM_FAMILIES),
    )
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
    label_flip: float | str | None = key(
        None, 'label flip probability, or "same" as the feature flip', _UNIT_OPEN, Options("same"), IsNone()
    )
    label_epsilon: float | None = key(None, "label ε (per-field grids)", _POS, IsNone())
    n_sampled: int | None = key(
        None,
        "attribute sampling: each client releases this many features, drawn uniformly, with the whole "
        "feature budget (None: all; paired: pairs, None meaning 1; auto: unset, the planner picks it)",
        Interval(int, 1, None),
        IsNone(),
    )
    delta: float = key(
        1e-5, "δ per Gaussian field (of the feature block if joint; regression: input block)", _UNIT_OPEN
    )
    gaussian_noise: str = key(
        "joint",
        "gaussian: joint (one block on all features, the analytic Gaussian on its L2 sensitivity √D; "
        "ε_record = ε_features + ε_label) | per-feature (one per feature, basic composition: D·ε + ε_label)",
        Options(*GAUSSIAN_NOISE),
    )
    calibration: str = key(
        "analytic",
        "regression, gaussian: analytic (exact (ε, δ)) | farokhi (Farokhi 2020 Thm 1, "
        "nominal ε; the exact ε is what is reported)",
        Options("analytic", "farokhi"),
    )
    label_public: bool = key(False, "regression: release the target in the clear as Farokhi 2020 (ỹ = y)", Boolean())


@dataclass(frozen=True)
class LearnersSection:
    names: tuple = key(
        ("spread", "naive", "clean"),
        f"any of {', '.join(_ALL_LEARNERS)} (see fedrr.learners)",
        ListOf(Options(*_ALL_LEARNERS)),
    )
    C: float = key(1.0, "inverse L2 penalty (scikit-learn's C)", _POS)
    encoding: str = key(
        "unit",
        "model input of a discrete state: unit s/(k−1) | index s | onehot (k−1 indicators)",
        Options("unit", "index", "onehot"),
    )
    spread_max_iter: int = key(200, "most EM iterations of spread-EM (its CV fits: at most 40)", Interval(int, 1, None))


@dataclass(frozen=True)
class RunSection:
    mode: str = key(
        "offline",
        "flower (one Flower node per client) | cohort (nodes host cohort_size clients) | offline (no Flower)",
        Options(*MODES),
    )
    cohort_size: int = key(1000, "clients per Flower node in cohort mode", Interval(int, 1, None))
    workers: int = key(0, "offline cells run in parallel, this many at once (0: one per CPU)", Interval(int, 0, None))
    parallel: str = key(
        "ray",
        "how offline cells run in parallel: ray (local, or the cluster at ray_address / "
        "RAY_ADDRESS) | processes; same results",
        Options("ray", "processes"),
    )
    executor: str = key(
        "threads", "spread-EM's E-step: serial | threads | ray (same result)", Options("serial", "threads", "ray")
    )
    ray_address: str = key("", "Ray cluster for Flower simulations and the ray executor ('' = local)", Text())
    wave_size: int = key(256, "Flower: release queries in flight at once", Interval(int, 1, 10**6))
    min_valid: int = key(20, "fewer valid releases and the cell fails", Interval(int, 1, None))
    check_alpha: float = key(
        0.01,
        "false-alarm probability per cell of the server's frequency check (fedrr.frequency_check)",
        Interval(float, 0, 1, closed="neither"),
    )
    node_wait_timeout: float = key(120.0, "Flower: seconds to wait for nodes to register", _POS)
    reply_timeout: float = key(600.0, "Flower: seconds to wait for all replies", _POS)


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
        raise ValidationError(name, f"must be a table ([{name}]), got {_type_name(given)} {given!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    bad = [k for k in given if k not in fields]
    if bad:
        raise unknown_key(f"{name}.{_key_path(bad[0])}", bad[0], list(fields), f" in [{name}]")
    kw = {}
    for k, v in given.items():
        value = check_param(f"{name}.{k}", v, fields[k].metadata["constraints"])
        kw[k] = (value,) if k == "n_clients" and isinstance(value, int) else value
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
    def task(self) -> str:
        return self.population.task

    @property
    def metric(self) -> str:
        """What cells are scored by: test accuracy, or test MSE for regression."""
        return "mse" if self.task == "regression" else "accuracy"

    def cells(self, grid_indices: list[int] | None = None) -> list:
        from .cells import CellSpec

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
                d[f.name] = json.loads(json.dumps(v))
            out[sec] = d
        return out


def parse_scenario(data: Any, *, name: str = "scenario", path: str = "", text: str = "") -> ScenarioSpec:
    """Validate a parsed TOML document, fill in defaults and check the keys' relations."""
    if not isinstance(data, dict):
        raise ValidationError("config", f"must be a TOML table, got {_type_name(data)}")
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
    if secs["scenario"].name is None:
        secs["scenario"] = dataclasses.replace(secs["scenario"], name=name)
    from .crosscheck import crosscheck

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
