"""Scenario configs: a TOML file is parsed and validated once into a ``ScenarioSpec`` (keys known, typed,
range-checked, defaulted by its sections, ``_sections``; relations checked in ``crosscheck``) listing its
``CellSpec``s.
A bad config raises ``ValidationError(field, message)`` with the key's path before anything runs."""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._params import type_name
from ..errors import ValidationError
from ._cells import CellSpec
from ._crosscheck import crosscheck
from ._sections import (
    MAX_CELLS,
    SECTIONS,
    LearnersSection,
    PopulationSection,
    PrivacySection,
    RunSection,
    ScenarioSection,
    _key_path,
    _section,
)

#: the [population] keys that name files, relative to the scenario file as written
TABLE_FILES = ("table", "test_table", "public_table")


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

    def cells(self, grid_indices: list[int] | None = None) -> list[CellSpec]:
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
                elif f.name in TABLE_FILES and v and self.path:  # as written: relative to the file
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
    from .._user_code import table_path

    base = Path(path).resolve().parent if path else None
    paths = {k: table_path(getattr(pop, k), base) for k in TABLE_FILES if getattr(pop, k)}
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
