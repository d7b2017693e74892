"""The TOML tables a scenario's keys may hold (``privacy.split``, ``population.budget_mix``,
``population.options``): constraints that check a table's own keys and name the bad one
("privacy.split.label")."""

from __future__ import annotations

import math
from typing import Any

from ._params import Constraint, Interval, ListOf, check_param, type_name
from .errors import ValidationError

_POS = Interval(float, 0, None, closed="neither")
_UNIT_OPEN = Interval(float, 0, 1, closed="neither")


class _Table(Constraint):
    """A TOML table with known keys; ``explain`` names the bad key ("privacy.split.label")."""

    keys: dict[str, tuple[Constraint, ...]] = {}
    example = ""

    def accepts(self, value: Any) -> bool:
        return self.explain("", value) is None

    def coerce(self, value: Any) -> Any:
        return {k: check_param(k, v, self.keys[k]) for k, v in value.items()}

    def describe(self) -> str:
        return f"a table such as {self.example}"

    def explain(self, name: str, value: Any) -> ValidationError | None:
        if not isinstance(value, dict):
            return ValidationError(name, f"must be {self.describe()}, got {type_name(value)} {value!r}")
        bad = sorted(set(map(str, value)) - set(self.keys))
        if bad:
            return ValidationError(name, f"unknown key(s) {bad}; valid: {', '.join(self.keys)}")
        for k, v in value.items():
            try:
                check_param(f"{name}.{k}", v, self.keys[k])
            except ValidationError as exc:
                return exc
        return self.relation(name, value)

    def relation(self, name: str, value: dict) -> ValidationError | None:
        return None


class Split(_Table):
    keys = {"features": (_UNIT_OPEN,), "label": (_UNIT_OPEN,)}
    example = "{features = 0.9, label = 0.1}"

    def relation(self, name, value):
        if set(value) != {"features", "label"}:
            return ValidationError(name, f"must give both shares, e.g. {self.example}")
        if abs(value["features"] + value["label"] - 1) > 1e-9:
            return ValidationError(name, f"shares must add up to 1, got {value['features']} + {value['label']}")
        return None


class BudgetMix(_Table):
    keys = {"values": (ListOf(_POS, distinct=False),), "weights": (ListOf(Interval(float, 0, None), distinct=False),)}
    example = "{values = [0.2, 0.4], weights = [1, 1]}"

    def relation(self, name, value):
        if not value:
            return None
        if "values" not in value:
            return ValidationError(
                f"{name}.values",
                "must be a non-empty list of numbers (flip probabilities for 'rr', ε per feature otherwise)",
            )
        n = len(value["values"])
        w = value.get("weights", [1.0] * n)
        if len(w) != n:
            return ValidationError(f"{name}.weights", f"must be a list of {n} numbers (one per value), got {w!r}")
        if sum(w) <= 0:
            return ValidationError(f"{name}.weights", f"must not all be 0, got {w!r}")
        return None

    def coerce(self, value):
        if not value:
            return ()
        vals = [float(v) for v in value["values"]]
        return tuple(zip(vals, [float(w) for w in value.get("weights", [1.0] * len(vals))]))


class Options_(_Table):
    example = "{n_informative = 5}"

    def explain(self, name, value):
        if not isinstance(value, dict):
            return ValidationError(name, f"must be {self.describe()}, got {type_name(value)} {value!r}")
        return None

    def coerce(self, value):
        return dict(value)


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


class _Columns(Constraint):
    """A table {column: value} of a table population's schema; ``explain`` names the bad column
    ("population.categorical.sex"). The values' own rules are ``fedrr.datasets.read_table``'s."""

    example = ""
    what = ""

    def item_ok(self, v: Any) -> bool:
        raise NotImplementedError

    def accepts(self, value: Any) -> bool:
        return self.explain("", value) is None

    def coerce(self, value: Any) -> Any:
        return {str(k): (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in value.items()}

    def describe(self) -> str:
        return f"a table such as {self.example}"

    def explain(self, name: str, value: Any) -> ValidationError | None:
        if not isinstance(value, dict):
            return ValidationError(name, f"must be {self.describe()}, got {type_name(value)} {value!r}")
        for k, v in value.items():
            if not str(k).strip():
                return ValidationError(name, f"its column names must be non-empty, got {k!r}")
            if not self.item_ok(v):
                return ValidationError(f"{name}.{k}", f"must be {self.what}, got {type_name(v)} {v!r}")
        return None


class ColumnDomains(_Columns):
    """``categorical``: {column: its domain, a non-empty list of values}."""

    example = '{sex = ["F", "M"], region = ["north", "south"]}'
    what = "a non-empty list of the column's values (its declared domain)"

    def item_ok(self, v: Any) -> bool:
        return isinstance(v, (list, tuple)) and len(v) > 0 and all(_scalar(x) for x in v)


class ColumnEdges(_Columns):
    """``edges``: {column: public cut points, or "private-quantiles:K"}."""

    example = '{age = [25, 35, 50], income = "private-quantiles:4"}'
    what = 'a non-empty list of increasing numbers (public cut points), or "private-quantiles:K"'

    def item_ok(self, v: Any) -> bool:
        if isinstance(v, str):
            return v.startswith("private-quantiles:")
        return (
            isinstance(v, (list, tuple))
            and len(v) > 0
            and all(_scalar(x) and not isinstance(x, (bool, str)) and math.isfinite(x) for x in v)
            and all(a < b for a, b in zip(v, v[1:]))
        )
