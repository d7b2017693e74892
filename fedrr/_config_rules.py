"""The run config's relations between keys, each written once: ``RunConfig`` checks them all, in
order, once every key is valid alone; a scenario (``fedrr.experiment._crosscheck``) checks those of
its keys (``SHARED``), each error naming the key as that path spells it. Each is a ``Rule`` naming
the key it refuses and why. The keys themselves (and their defaults) are declared in
``fedrr._config_schema``; the budgets the built-in population fills in are ``default_budgets``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._config_schema import BY_NAME, DEFAULT_FEATURE_FLIP, DEFAULT_LABEL_FLIP
from ._names import DISCRETE_FAMILIES, RELEASE_LEARNERS, WHOLE_RECORD_FAMILIES
from .errors import ValidationError

#: how a path names a key (its Flower name, its scenario path, ...)
Namer = Callable[[str], str]


def flwr_name(key: str) -> str:
    """A key's name in Flower's run config (``RunConfig``'s errors)."""
    return BY_NAME[key].flwr or key


def scenario_name(key: str) -> str:
    """A key's name in a scenario TOML: the key that sets it ("privacy.label_flip")."""
    return BY_NAME[key].scenario_path or key


@dataclass(frozen=True)
class Rule:
    """A relation between config keys: a config for which ``broken`` holds is refused with a
    ValidationError naming ``key`` (a schema key, as the path spells it), with ``message`` (or
    ``message(config, name)``, ``name`` spelling a key as the path does). ``builtin``: a run config
    checks it for the built-in population only (a custom population gets its keys as given); a
    scenario checks it whatever its population."""

    key: str
    broken: Callable[[Any], bool]
    message: str | Callable[[Any, Namer], str]
    builtin: bool = False

    def check(self, cfg: Any, name: Namer = flwr_name) -> None:
        if self.broken(cfg):
            raise ValidationError(name(self.key), self.message(cfg, name) if callable(self.message) else self.message)


def default_budgets(c: Any) -> dict[str, float]:
    """The budgets the built-in population uses when nobody set them ({key: value}): the feature
    flip of "rr" without a budget mix, the label flip of a release with a label budget. A scenario
    fills them into its cells; a run config into its population (each run says so)."""
    if c.population != "dataset" or c.protocol != "record":
        return {}
    out = {}
    if c.mechanism == "rr" and not c.budget_mix and c.feature_flip is None and c.feature_epsilon is None:
        out["feature_flip"] = DEFAULT_FEATURE_FLIP
    if c.label_flip is None and c.label_epsilon is None and c.mechanism not in WHOLE_RECORD_FAMILIES:
        out["label_flip"] = DEFAULT_LABEL_FLIP  # a paired or planned release has no label budget to default
    return out


def default_note(key: str, value: float, name: Namer = flwr_name) -> str:
    """The line a run (or a sweep) says at its start for a budget it fills in."""
    k, other = name(key), name(key.replace("flip", "epsilon"))
    return f"[fedrr] {k} not set: using the default {k} = {value} (set {k} or {other} to choose the budget)"


def _one_budget(a: str, b: str) -> Rule:
    """The two keys of one budget (a flip probability, an ε): at most one is set."""
    return Rule(
        b,
        lambda c: getattr(c, a) is not None and getattr(c, b) is not None,
        lambda c, n: (
            f"{n(a)} = {getattr(c, a)!r} and {n(b)} = {getattr(c, b)!r} both set the same budget: give one of them, "
            "not both"
        ),
    )


def _no_label_budget(k: str) -> Rule:
    """A whole-record release (paired, or planned: ε is the record's) has no label budget of its own."""
    why = {
        "paired": "the label is released inside every (attribute, label) pair and has no budget of its own",
        "triple": "the label is released inside the (attribute, attribute, label) triple and has no budget of its own",
        "auto": "the planner decides how the label is released (inside pairs, or at a share of the record's ε)",
    }
    return Rule(
        k,
        lambda c: c.mechanism in WHOLE_RECORD_FAMILIES and getattr(c, k) is not None,
        lambda c, n: (
            f"must be unset with mechanism {c.mechanism!r}, got {getattr(c, k)!r}: {why[c.mechanism]}; the whole "
            "ε of the record goes to the release"
        ),
        builtin=True,
    )


#: a release with a label budget: one of label_flip and label_epsilon (the scenario checks it off epsilon_grid)
ONE_LABEL_BUDGET = _one_budget("label_flip", "label_epsilon")
#: mechanisms "paired" and "auto": no label budget
WHOLE_RECORD_LABEL = (_no_label_budget("label_flip"), _no_label_budget("label_epsilon"))
#: mechanisms "auto" and "triple": the planner, or the design (two attributes in one report), sets how many
#: attributes a client releases
AUTO_N_SAMPLED = Rule(
    "n_sampled",
    lambda c: c.mechanism in ("auto", "triple") and bool(c.n_sampled),
    lambda c, n: (
        f"must be 0 with mechanism {c.mechanism!r}, got {c.n_sampled}: "
        + (
            "the planner chooses how many attributes each client releases"
            if c.mechanism == "auto"
            else "each client releases one triple, two attributes and the label in one report"
        )
    ),
    builtin=True,
)
#: a joint Gaussian block is one field: no attribute sampling
JOINT_N_SAMPLED = Rule(
    "n_sampled",
    lambda c: c.mechanism == "gaussian" and c.gaussian_noise == "joint" and bool(c.n_sampled),
    lambda c, n: (
        f"must be 0 with {n('gaussian_noise')} = 'joint', got {c.n_sampled}: the joint block releases all features "
        f"as one field; attribute sampling needs {n('gaussian_noise')} = 'per-feature'"
    ),
)


def _unknown_learner(c: Any) -> str | None:
    return next((n for n in c.learners if n not in RELEASE_LEARNERS), None)


_MIX = "budget-mix sets the feature budgets itself: leave this key out"
#: the keys that declare a table population's schema (each needs ``table``)
TABLE_KEYS = ("label", "classes", "categorical", "edges", "test_table", "public_table")


def _table_rules() -> tuple[Rule, ...]:
    """A table population: ``table`` with its label and feature columns, only for the built-in
    population and a discrete release; its schema keys only with ``table``."""
    out = [
        Rule(
            k,
            lambda c, k=k: not c.table and bool(getattr(c, k)),
            lambda c, n, k=k: (
                f"is a table population's key: set {n('table')} (a .csv or .parquet file) too, or leave {n(k)} out"
            ),
        )
        for k in TABLE_KEYS
    ]
    out += [
        Rule(
            "table",
            lambda c: bool(c.table) and c.population != "dataset",
            lambda c, n: f"is the built-in population's table; population {c.population!r} reads its own data",
        ),
        Rule(
            "label",
            lambda c: bool(c.table) and not c.label,
            lambda c, n: f"is required with {n('table')}: the label column's name",
        ),
        Rule(
            "categorical",
            lambda c: bool(c.table) and not c.categorical and not c.edges,
            lambda c, n: (
                f"{n('table')} needs its feature columns declared: categorical = {{column = [values]}} and/or "
                "edges = {column = [cut points]}"
            ),
        ),
        Rule(
            "public_rows",
            lambda c: bool(c.public_table) and c.public_rows > 0,
            lambda c, n: f"a public sample comes from {n('public_table')} or {n('public_rows')}: set one",
        ),
        Rule(
            "public_rows",
            lambda c: c.public_rows > 0 and c.population != "dataset",
            lambda c, n: f"is the built-in population's; population {c.population!r} gives its own public_sample()",
        ),
        Rule(
            "mechanism",
            lambda c: bool(c.table) and c.mechanism not in DISCRETE_FAMILIES,
            lambda c, n: (
                f"a table population releases discrete states: {', '.join(DISCRETE_FAMILIES)}, got {c.mechanism!r}"
            ),
        ),
    ]
    return tuple(out)


#: a table population's relations (a scenario checks them too)
TABLE_RULES = _table_rules()

#: the run config's relations, checked in this order (``RunConfig``) once every key is valid alone
RUN_RULES: tuple[Rule, ...] = (
    # the budget keys against each other and against the mechanism family
    _one_budget("feature_flip", "feature_epsilon"),
    ONE_LABEL_BUDGET,
    Rule("feature_flip", lambda c: bool(c.budget_mix) and c.feature_flip is not None, _MIX),
    Rule("feature_epsilon", lambda c: bool(c.budget_mix) and c.feature_epsilon is not None, _MIX),
    Rule(
        "feature_flip",
        lambda c: c.feature_flip is not None and c.mechanism != "rr",
        lambda c, n: f"is a flip probability of mechanism 'rr'; mechanism {c.mechanism!r} takes feature-epsilon",
    ),
    *WHOLE_RECORD_LABEL,
    AUTO_N_SAMPLED,
    Rule(
        "learners",
        lambda c: (
            "spread-public" in c.learners and c.population == "dataset" and not c.public_table and not c.public_rows
        ),
        lambda c, n: f"'spread-public' needs a public sample: set {n('public_table')} or {n('public_rows')}",
    ),
    # cohorts, protocol, learners and what the server accepts
    Rule(
        "run_mode",
        lambda c: c.protocol == "ldp-sgd" and c.run_mode != "node",
        "protocol 'ldp-sgd' needs one client per node (run-mode 'node')",
    ),
    Rule(
        "cohort_size",
        lambda c: c.run_mode == "node" and c.cohort_size != 1,
        "must be 1 in run-mode 'node' (use run-mode 'cohort')",
    ),
    Rule(
        "learners",
        lambda c: _unknown_learner(c) is not None,
        lambda c, n: (
            f"unknown learner {_unknown_learner(c)!r}; the server trains on releases only: "
            f"{', '.join(RELEASE_LEARNERS)}"
        ),
    ),
    JOINT_N_SAMPLED,
    *TABLE_RULES,
    Rule(
        "resample",
        lambda c: c.resample != "none" and c.population != "dataset" and not c._custom_population_takes("resample"),
        lambda c, n: (
            f"is the built-in population's; {c.population} takes no 'resample' parameter and draws its own rows"
        ),
    ),
    Rule(
        "max_record_epsilon",
        lambda c: (c.accept_mechanisms == "declared") != (c.max_record_epsilon is not None),
        "is required with accept-mechanisms = 'declared' (the largest record ε the server accepts) and only then",
    ),
)
