"""Declarative parameter constraints, one style for the whole package (as scikit-learn's
``_parameter_constraints``): a parameter maps to a list of constraints, the value must satisfy
one of them, and a violation raises ``ValidationError(name, "must be …, got …")`` naming the
parameter and the allowed range. Estimators, run configs and scenario configs all use it, and the
config reference in the docs is generated from the same objects."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ValidationError


class Constraint:
    """One admissible kind of value. ``accepts`` says whether a value fits; ``coerce`` turns an
    accepted value into its canonical form (an int for an integer, a float for a real)."""

    def accepts(self, value: Any) -> bool:
        raise NotImplementedError

    def coerce(self, value: Any) -> Any:
        return value

    def describe(self) -> str:
        raise NotImplementedError

    def explain(self, name: str, value: Any) -> ValidationError | None:
        """A more precise error than "must be …" for a value this constraint refuses (which item
        of a list, which key of a table), or None."""
        return None


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_, str, bytes)) or not isinstance(v, numbers.Real):
        return False
    try:
        return not math.isnan(float(v))
    except OverflowError:  # an int too large for a float
        return False


@dataclass(frozen=True)
class Interval(Constraint):
    """An integer (``kind=int``) or real number (``kind=float``) in [lo, hi]; ``closed`` says
    which ends belong to it; ``inf`` admits +inf (e.g. C = inf: no penalty)."""

    kind: type
    lo: float | None = None
    hi: float | None = None
    closed: str = "both"  # both | left | right | neither
    inf: bool = False

    def accepts(self, value: Any) -> bool:
        if self.kind is int:
            if not _is_int(value):
                return False
        elif not (_is_real(value) or _is_int(value)):
            return False
        try:
            v = float(value) if self.kind is float else int(value)
        except OverflowError:  # an integer too large for a float
            return False
        if self.kind is float and math.isinf(v):
            return self.inf and v > 0
        lo_ok = self.lo is None or (v >= self.lo if self.closed in ("both", "left") else v > self.lo)
        hi_ok = self.hi is None or (v <= self.hi if self.closed in ("both", "right") else v < self.hi)
        return lo_ok and hi_ok

    def coerce(self, value: Any) -> Any:
        return int(value) if self.kind is int else float(value)

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a real number"
        lb = "[" if self.closed in ("both", "left") else "("
        rb = "]" if self.closed in ("both", "right") else ")"
        if self.lo is None and self.hi is None:
            rng = ""
        elif self.hi is None:
            rng = f" {'>=' if lb == '[' else '>'} {self.lo:g}"
        elif self.lo is None:
            rng = f" {'<=' if rb == ']' else '<'} {self.hi:g}"
        else:
            rng = f" in {lb}{self.lo:g}, {self.hi:g}{rb}"
        return what + rng + (" (or inf)" if self.inf else "")


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of values (strings, usually)."""

    values: tuple

    def __init__(self, *values: Any):
        object.__setattr__(self, "values", tuple(values))

    def accepts(self, value: Any) -> bool:
        try:
            return not isinstance(value, (bool, np.ndarray)) and value in self.values
        except (TypeError, ValueError):  # unhashable or incomparable (an array compares elementwise)
            return False

    def describe(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)

    def explain(self, name: str, value: Any) -> ValidationError | None:
        if isinstance(value, str):
            return ValidationError(name, f"unknown value {value!r}; valid: {', '.join(map(str, self.values))}")
        return None


@dataclass(frozen=True)
class Boolean(Constraint):
    def accepts(self, value: Any) -> bool:
        return isinstance(value, (bool, np.bool_))

    def coerce(self, value: Any) -> Any:
        return bool(value)

    def describe(self) -> str:
        return "true or false"


@dataclass(frozen=True)
class Text(Constraint):
    """A string; ``nonempty`` refuses ''."""

    nonempty: bool = False

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and (bool(value) or not self.nonempty)

    def describe(self) -> str:
        return "a non-empty string" if self.nonempty else "a string"


@dataclass(frozen=True)
class IsNone(Constraint):
    def accepts(self, value: Any) -> bool:
        return value is None

    def describe(self) -> str:
        return "None"


@dataclass(frozen=True)
class InstanceOf(Constraint):
    types: tuple
    name: str = ""

    def __init__(self, *types: type, name: str = ""):
        object.__setattr__(self, "types", types)
        object.__setattr__(self, "name", name)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.types)

    def describe(self) -> str:
        return self.name or "an instance of " + " or ".join(t.__name__ for t in self.types)


@dataclass(frozen=True)
class HasMethods(Constraint):
    """An object with the named methods (e.g. an executor with ``map``)."""

    methods: tuple

    def __init__(self, *methods: str):
        object.__setattr__(self, "methods", methods)

    def accepts(self, value: Any) -> bool:
        return all(callable(getattr(value, m, None)) for m in self.methods)

    def describe(self) -> str:
        return "an object with " + ", ".join(f"{m}()" for m in self.methods)


@dataclass(frozen=True)
class Satisfies(Constraint):
    """Any value for which ``test`` is true (for the rare rule no other constraint states)."""

    test: Callable[[Any], bool]
    text: str

    def accepts(self, value: Any) -> bool:
        try:
            return bool(self.test(value))
        except (TypeError, ValueError):
            return False

    def describe(self) -> str:
        return self.text


@dataclass(frozen=True)
class ListOf(Constraint):
    """A list (or tuple) of items that each satisfy ``item``; coerced to a tuple. ``nonempty`` and
    ``distinct`` refuse [] and repeated values."""

    item: Constraint
    nonempty: bool = True
    distinct: bool = True

    def accepts(self, value: Any) -> bool:
        return self.explain("", value) is None

    def coerce(self, value: Any) -> Any:
        return tuple(self.item.coerce(v) for v in value)

    def describe(self) -> str:
        return f"a {'non-empty ' if self.nonempty else ''}list, each item {self.item.describe()}"

    def explain(self, name: str, value: Any) -> ValidationError | None:
        if not isinstance(value, (list, tuple)):
            return ValidationError(name, f"must be {self.describe()}, got {type_name(value)} {value!r}")
        if self.nonempty and not value:
            return ValidationError(name, f"is empty; give at least one value ({self.describe()})")
        for i, v in enumerate(value):
            if not self.item.accepts(v):
                return self.item.explain(name, v) or ValidationError(
                    name, f"item {i} must be {self.item.describe()}, got {type_name(v)} {v!r}"
                )
        if self.distinct:
            seen = [self.item.coerce(v) for v in value]
            rep = sorted({v for v in seen if seen.count(v) > 1}, key=repr)
            if rep:
                return ValidationError(name, f"has repeated values {rep}")
        return None


def type_name(v: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
        tuple: "a list",
    }.get(type(v), type(v).__name__)


def describe(constraints: Sequence[Constraint]) -> str:
    """'a real number > 0 (or inf)' / 'an integer >= 1 or None' for a list of constraints."""
    return " or ".join(c.describe() for c in constraints)


def check_param(name: str, value: Any, constraints: Sequence[Constraint]) -> Any:
    """``value`` in canonical form if it satisfies one of ``constraints``, else ValidationError."""
    for c in constraints:
        if c.accepts(value):
            return c.coerce(value)
    # a precise reason from the constraints the value was closest to (a list for a list, ...)
    close = [c for c in constraints if not isinstance(c, IsNone)]
    if isinstance(value, (list, tuple)):
        close = [c for c in close if isinstance(c, ListOf)] or close
    elif _is_real(value) or _is_int(value):
        close = [c for c in close if not isinstance(c, ListOf)] or close
    if len(close) == 1 and (err := close[0].explain(name, value)) is not None:
        raise err
    constraints = close or constraints
    raise ValidationError(name, f"must be {describe(constraints)}, got {type_name(value)} {value!r}")


def validate_params(params: Mapping[str, Any], constraints: Mapping[str, Sequence[Constraint]]) -> dict[str, Any]:
    """Every parameter checked against its constraints (parameters without any are passed on)."""
    return {k: check_param(k, v, constraints[k]) if k in constraints else v for k, v in params.items()}


def validate_estimator(est: Any) -> dict[str, Any]:
    """An estimator's parameters named in its ``_parameter_constraints``, each checked (at ``fit``,
    as scikit-learn does): ``{name: value in canonical form}``."""
    constraints = est._parameter_constraints
    return validate_params({k: getattr(est, k) for k in constraints}, constraints)


def random_state_constraints() -> list[Constraint]:
    return [IsNone(), Interval(int, 0, None), InstanceOf(np.random.Generator, name="a numpy.random.Generator")]


def seed_from(random_state: Any) -> int:
    """The one integer seed of a validated ``random_state`` (``random_state_constraints``): the int
    itself, a draw below 2⁶³ from a Generator, or fresh entropy below 2⁶³ for None."""
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
    return int(random_state)


def unknown_key(name: str, key: Any, valid: Sequence[str], where: str = "") -> ValidationError:
    """The one error for a key no config path knows (scenario TOML, a flat run config, a
    population's options): it names the key, offers the nearest valid one and lists them all."""
    import difflib

    near = difflib.get_close_matches(str(key), list(valid), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    return ValidationError(name, f"unknown key; {hint}valid keys{where}: {', '.join(valid)}")
