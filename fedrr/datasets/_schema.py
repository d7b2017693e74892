"""What a dataset's columns are: the contract between datasets, mechanisms and estimators."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class FeatureSpec:
    """One feature column.

    kind="discrete": integer states 0..n_states-1 (values in X are those integers).
    kind="numeric": real values in the closed interval [lower, upper]. ``lower``/``upper``
    is None when that side is unbounded (e.g. synthetic Gaussian inputs); never +-inf.
    Consumers that need a bounded domain (e.g. LDP mechanisms) must reject None bounds.
    ``edges``: for a discrete feature binned from a numeric source column, the cut points
    e_1 < … < e_{n_states−1} it was cut at, declared by the schema (public, never fitted on the
    records); ``closed`` says which bin a value on an edge joins: "left" — bins [e_{b−1}, e_b), a value
    on an edge goes up (state = number of edges ≤ value); "right" — bins (e_{b−1}, e_b].
    """

    name: str
    kind: Literal["discrete", "numeric"]
    n_states: int | None = None
    lower: float | None = None
    upper: float | None = None
    edges: tuple[float, ...] | None = None
    closed: Literal["left", "right"] | None = None


@dataclass(frozen=True)
class Schema:
    """Features, label classes (y holds indices 0..n_classes-1 into ``classes``) and provenance."""

    features: tuple[FeatureSpec, ...]
    classes: tuple = ()
    target: str = "label"
    task: Literal["classification", "regression"] = "classification"
    target_bounds: tuple[float, float] | None = None
    source: str = ""
    license: str = ""

    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def states(self) -> np.ndarray:
        """Number of states per discrete feature (0 for numeric ones)."""
        return np.array([f.n_states or 0 for f in self.features], dtype=int)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds per numeric feature (NaN for discrete ones)."""
        lo = np.array([np.nan if f.lower is None else f.lower for f in self.features], dtype=float)
        hi = np.array([np.nan if f.upper is None else f.upper for f in self.features], dtype=float)
        return lo, hi


@dataclass(frozen=True)
class Dataset:
    """Features X (n, d), target y (n,) and the schema describing them."""

    X: np.ndarray
    y: np.ndarray
    schema: Schema
    extra: dict = field(default_factory=dict)

    def __iter__(self):  # allows ``X, y, schema = load_x()``
        return iter((self.X, self.y, self.schema))
