"""The typed config of one run: who the clients are, how they release, what the server trains and
how the releases are collected. Parsed and validated once (``RunConfig.from_flwr``); Flower carries
it as the run config (``to_flwr()``: flat keys with dashes, the keys of pyproject's
``[tool.flwr.app.config]``); a sweep cell builds one per cell. Keys a custom population needs that
are not fedrr's own travel in ``extras`` and are handed to the population's constructor."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from . import _config_schema as schema
from ._config_rules import RUN_RULES, default_budgets, default_note
from ._config_schema import (  # noqa: F401  (re-exported: the run config's public constants)
    DEFAULT_COHORT_SIZE,
    DEFAULT_FEATURE_FLIP,
    DEFAULT_LABEL_FLIP,
    EXECUTORS,
    PROTOCOLS,
    RUN_MODES,
)
from ._names import BUDGET_KEYS
from ._params import Boolean, Interval, IsNone, check_param, unknown_key
from .errors import ValidationError

#: how a Flower config file (where every key must be declared) writes "unset"
UNSET = ""


@schema.with_keys(schema.run_keys(), "run_field")
class RunConfig:
    """One federated (or offline) run: one field per key of the config schema
    (``fedrr._config_schema``) that Flower's run config carries, in its order. Field docs are the
    config reference (docs/reference)."""

    extras: Mapping = field(
        default_factory=dict, hash=False, metadata={"flwr": None, "doc": "a custom population's own keys"}
    )

    def __post_init__(self):
        for k in BUDGET_KEYS:  # "unset" is a missing key: 0 would silently mean another budget
            v = getattr(self, k)
            if v is not None and not isinstance(v, bool) and isinstance(v, (int, float)) and v == 0:
                raise ValidationError(
                    _flwr_key(k),
                    f'must be > 0, got {v!r}: a budget is unset by leaving its key out (or "" in a Flower '
                    "config file, where every key is declared), never by 0",
                )
        for f in dataclasses.fields(self):
            if f.metadata.get("constraints"):
                try:
                    self._check_field(f)
                except ValidationError:
                    if not (_builtin(f) and self._custom_population_takes(f.name)):
                        raise  # a custom population that takes the key gets its value as given
        if self.cohort_size is None:  # unset: one client per node, or DEFAULT_COHORT_SIZE per cohort node
            object.__setattr__(self, "cohort_size", 1 if self.run_mode == "node" else DEFAULT_COHORT_SIZE)
        for rule in RUN_RULES:  # the keys' relations (budgets, collection)
            if not (rule.builtin and self.population != "dataset"):
                rule.check(self)
        self._check_population_keys()

    def _check_field(self, f: dataclasses.Field) -> None:
        object.__setattr__(
            self, f.name, check_param(f.metadata["flwr"], getattr(self, f.name), f.metadata["constraints"])
        )

    def _custom_population_takes(self, name: str) -> bool:
        """Whether the population is a custom factory with a parameter ``name`` (one whose signature
        cannot be read, or that does not import, takes nothing: its key is then checked as the
        built-in population's, in its place)."""
        if self.population == "dataset":
            return False
        from ._user_code import population_parameters

        try:
            params = population_parameters(self.population)
        except Exception:  # noqa: BLE001 - reported by _check_population_keys, after the key's own error
            return False
        return params is not None and name in params

    def _check_population_keys(self) -> None:
        """Every key is fedrr's or a parameter of the population's constructor; a custom population
        that sets its own budgets is not handed a budget it would ignore."""
        own = [f.metadata["flwr"] for f in dataclasses.fields(self) if f.metadata.get("flwr")]
        if self.population == "dataset":
            for k in self.extras:
                raise unknown_key(str(k), k, own, " (the built-in population takes fedrr's keys only)")
            return
        from ._user_code import population_parameters

        params = population_parameters(self.population)
        if params is None:  # a factory whose signature cannot be read: its own keys cannot be checked
            return
        theirs = sorted(p.replace("_", "-") for p in params if p.replace("_", "-") not in own)
        for k in self.extras:
            if str(k).replace("-", "_") not in params:
                raise unknown_key(str(k), k, own + theirs, f" (fedrr's, then the parameters of {self.population})")
        for k in BUDGET_KEYS:
            if getattr(self, k) is not None and k not in params:
                raise ValidationError(
                    _flwr_key(k),
                    f"is set, but {self.population} sets its own budgets (it takes no {k!r} parameter): leave it "
                    "out, or give the population a parameter of that name",
                )

    def default_budgets(self) -> dict[str, float]:
        """The budgets the built-in population will use that nobody set ({flwr key: value}); a run
        says so in one line at its start (``budget_notes``)."""
        return {_flwr_key(k): v for k, v in default_budgets(self).items()}

    def budget_notes(self) -> list[str]:
        """One line per budget this run uses that was not asked for (empty when every budget was set)."""
        return [default_note(k, v) for k, v in default_budgets(self).items()]

    def requested_budget(self) -> dict[str, Any]:
        """The budget keys as asked for (None: not set), with the defaults that fill them."""
        asked = {_flwr_key(k): getattr(self, k) for k in BUDGET_KEYS}
        if self.budget_mix:
            asked["budget-mix"] = [list(p) for p in self.budget_mix]
        return {"asked": asked, "defaults_used": self.default_budgets()}

    # ------------------------------------------------------------------ Flower's run config
    def to_flwr(self) -> dict[str, bool | int | float | str]:
        """Flat Flower run config: scalars only (lists as comma text, an unset budget as "")."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            key = f.metadata["flwr"]
            if key is None:
                continue
            v = getattr(self, f.name)
            if f.name == "learners":
                v = ",".join(v)
            elif f.name == "budget_mix":
                v = ",".join(f"{a!r}:{w!r}" for a, w in v)
            elif f.metadata["key"].flwr_json:  # a table or a list: JSON text, "" when empty
                v = json.dumps(dict(v) if isinstance(v, Mapping) else list(v)) if v else UNSET
            elif v is None:  # an unset budget (or limit): a Flower config file declares every key
                v = UNSET
            out[key] = v
        for k, v in self.extras.items():
            out[k] = v
        return out

    @classmethod
    def from_flwr(cls, run_config: Mapping[str, Any] | None) -> RunConfig:
        """The typed config from Flower's flat run config (defaults for missing keys). A key that is
        not fedrr's must be a parameter of the named population's constructor (it travels in
        ``extras``); any other key is refused, naming the nearest valid one."""
        raw = dict(run_config or {})
        by_key = {f.metadata["flwr"]: f for f in dataclasses.fields(cls) if f.metadata.get("flwr")}
        kw: dict[str, Any] = {}
        extras = {}
        for key, value in raw.items():
            f = by_key.get(key)
            if f is None:
                extras[key] = value
                continue
            kw[f.name] = _from_flwr_value(f, key, value)
        return cls(**kw, extras=extras)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def population_name(self) -> str:
        """The population in words, for messages: its import path, or the built-in one's dataset."""
        return f"dataset {self.dataset!r}" if self.population == "dataset" else self.population

    def ldp_sgd_params(self) -> dict[str, Any]:
        """LDP-SGD's parameters of this run (``LDPSGDClassifier``'s keywords; a key's 0 is the
        estimator's own rule): the federation's ldp-sgd server and the sweep's 'ldp-sgd' learner."""
        return {
            "mechanism": self.ldp_sgd_mechanism,
            "n_sampled": self.ldp_sgd_n_sampled or None,
            "clip": self.ldp_sgd_clip,
            "groups": self.ldp_sgd_groups or None,
            "learning_rate": self.ldp_sgd_learning_rate or None,
            "C": self.C,
            "fallback": self.ldp_sgd_fallback == "check",
        }

    @property
    def n_nodes(self) -> int:
        """Flower nodes a simulation needs: one per client, or one per cohort."""
        return -(-self.n_clients // self.cohort_size)


def _builtin(f: dataclasses.Field) -> bool:
    """Whether the field's constraints are the built-in population's (``Key.builtin``)."""
    key = f.metadata.get("key")
    return key is not None and key.builtin


def _flwr_key(name: str) -> str:
    return name.replace("_", "-")


def _from_flwr_value(f: dataclasses.Field, key: str, value: Any) -> Any:
    cons = f.metadata["constraints"]
    if IsNone() in cons and isinstance(value, str) and value == UNSET:  # a key that may be unset
        return None
    if f.name == "learners":
        if not isinstance(value, str):
            raise ValidationError(key, f"must be a comma list of learner names, got {value!r}")
        return tuple(n.strip() for n in value.split(",") if n.strip())
    if f.name == "budget_mix":
        return parse_budget_mix(key, value)
    if f.metadata["key"].flwr_json and isinstance(value, str):  # JSON text (a table population's schema)
        if value == UNSET:
            return f.default_factory() if f.default is dataclasses.MISSING else f.default
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            example = '{"age": [25, 50]}'
            raise ValidationError(key, f"must be JSON text such as '{example}', got {value!r}: {exc}") from None
    if (
        any(isinstance(c, Interval) and c.kind is float for c in cons)
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        try:
            return float(value)
        except OverflowError:
            raise ValidationError(key, f"must be a finite number, got {value!r}") from None
    if any(isinstance(c, Interval) and c.kind is int for c in cons) and isinstance(value, float) and value.is_integer():
        return int(value)
    if any(isinstance(c, Boolean) for c in cons) and not isinstance(value, bool):
        raise ValidationError(key, f"must be true or false, got {value!r}")
    return value


def parse_budget_mix(key: str, value: Any) -> tuple:
    """'f1:w1,f2:w2' (or a sequence of pairs) -> ((f1, w1), (f2, w2))."""
    if isinstance(value, (tuple, list)):
        out = []
        for pair in value:  # each a (value, weight) pair of numbers
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValidationError(key, f"must be (value, weight) pairs, got {pair!r} in {value!r}")
            try:
                out.append((float(pair[0]), float(pair[1])))
            except (TypeError, ValueError):
                raise ValidationError(key, f"must be (value, weight) pairs of numbers, got {pair!r}") from None
        return tuple(out)
    if not isinstance(value, str):
        raise ValidationError(key, f"must look like 'value:weight,value:weight', got {value!r}")
    text = value.strip()
    if not text:
        return ()
    pairs = []
    for part in text.split(","):
        bits = part.split(":")
        try:
            lv, wt = float(bits[0]), float(bits[1])
            if len(bits) != 2:
                raise ValueError
        except (ValueError, IndexError):
            raise ValidationError(
                key, f"must look like 'value:weight,value:weight' with values > 0, got {value!r}"
            ) from None
        if not (lv > 0 and wt >= 0 and math.isfinite(lv + wt)):
            raise ValidationError(key, f"must look like 'value:weight,value:weight' with values > 0, got {value!r}")
        pairs.append((lv, wt))
    return tuple(pairs)


#: the defaults as Flower keys: pyproject's [tool.flwr.app.config] must list exactly these (tested)
DEFAULTS: dict[str, Any] = RunConfig().to_flwr()
