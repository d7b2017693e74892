"""The run config's relations between keys (``RunConfig`` checks them in order, once every key is
valid alone): each a ``Rule`` naming the key it refuses and why. The keys themselves are declared in
``fedrr._config_schema``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ValidationError
from .population import DISCRETE_FAMILIES, WHOLE_RECORD_FAMILIES


@dataclass(frozen=True)
class Rule:
    """A relation between run-config keys: a config for which ``broken`` holds is refused with a
    ValidationError naming ``key`` (its Flower name), with ``message`` (or ``message(config)``)."""

    key: str
    broken: Callable[[Any], bool]
    message: str | Callable[[Any], str]

    def check(self, cfg: Any) -> None:
        if self.broken(cfg):
            raise ValidationError(self.key, self.message(cfg) if callable(self.message) else self.message)


def _one_budget(a: str, b: str) -> Rule:
    """The two keys of one budget (a flip probability, an ε): at most one is set."""
    fa, fb = a.replace("_", "-"), b.replace("_", "-")
    return Rule(
        fb,
        lambda c: getattr(c, a) is not None and getattr(c, b) is not None,
        lambda c: f"{fa} = {getattr(c, a)!r} and {fb} = {getattr(c, b)!r} both set the same budget: give one of them",
    )


def _whole_record(c: Any) -> bool:
    """The built-in population releases whole records (paired, or planned): ε is the record's."""
    return c.mechanism in WHOLE_RECORD_FAMILIES and c.population == "dataset"


def _no_label_budget(k: str) -> Rule:
    """A whole-record release has no label budget of its own."""
    why = {
        "paired": "the label is released inside every (attribute, label) pair and has no budget of its own",
        "auto": "the planner decides how the label is released (inside pairs, or at a share of feature-epsilon)",
    }
    return Rule(
        k.replace("_", "-"),
        lambda c: _whole_record(c) and getattr(c, k) is not None,
        lambda c: (
            f"must be unset with mechanism {c.mechanism!r}, got {getattr(c, k)!r}: {why[c.mechanism]}; "
            "feature-epsilon is the ε of the whole release"
        ),
    )


def _release_learners() -> tuple[str, ...]:
    """The learners a server trains on releases (no oracle)."""
    from .learners import names

    return names(oracles=False)


def _unknown_learner(c: Any) -> str | None:
    return next((n for n in c.learners if n not in _release_learners()), None)


_MIX = "budget-mix sets the feature budgets itself: leave this key out"
#: the keys that declare a table population's schema (each needs ``table``)
TABLE_KEYS = ("label", "classes", "categorical", "edges", "test_table")


def _table_rules() -> tuple[Rule, ...]:
    """A table population: ``table`` with its label and feature columns, only for the built-in
    population and a discrete release; its schema keys only with ``table``."""
    out = [
        Rule(
            k.replace("_", "-"),
            lambda c, k=k: not c.table and bool(getattr(c, k)),
            f"is a table population's key: set table (a .csv or .parquet file) too, or leave {k.replace('_', '-')} out",
        )
        for k in TABLE_KEYS
    ]
    out += [
        Rule(
            "table",
            lambda c: bool(c.table) and c.population != "dataset",
            lambda c: f"is the built-in population's table; population {c.population!r} reads its own data",
        ),
        Rule("label", lambda c: bool(c.table) and not c.label, "is required with table: the label column's name"),
        Rule(
            "categorical",
            lambda c: bool(c.table) and not c.categorical and not c.edges,
            "table needs its feature columns declared: categorical = {column = [values]} and/or edges = "
            "{column = [cut points]}",
        ),
        Rule(
            "resample",
            lambda c: c.resample != "none" and c.population != "dataset" and not c._custom_population_takes("resample"),
            lambda c: (
                f"is the built-in population's; {c.population} takes no 'resample' parameter and draws its own rows"
            ),
        ),
        Rule(
            "mechanism",
            lambda c: bool(c.table) and c.mechanism not in DISCRETE_FAMILIES,
            lambda c: (
                f"a table population releases discrete states: {', '.join(DISCRETE_FAMILIES)}, got {c.mechanism!r}"
            ),
        ),
    ]
    return tuple(out)


#: the run config's relations, checked in this order (``RunConfig``) once every key is valid alone
RUN_RULES: tuple[Rule, ...] = (
    # the budget keys against each other and against the mechanism family
    _one_budget("feature_flip", "feature_epsilon"),
    _one_budget("label_flip", "label_epsilon"),
    Rule("feature-flip", lambda c: bool(c.budget_mix) and c.feature_flip is not None, _MIX),
    Rule("feature-epsilon", lambda c: bool(c.budget_mix) and c.feature_epsilon is not None, _MIX),
    Rule(
        "feature-flip",
        lambda c: c.feature_flip is not None and c.mechanism != "rr",
        lambda c: f"is a flip probability of mechanism 'rr'; mechanism {c.mechanism!r} takes feature-epsilon",
    ),
    _no_label_budget("label_flip"),
    _no_label_budget("label_epsilon"),
    Rule(
        "n-sampled",
        lambda c: _whole_record(c) and c.mechanism == "auto" and bool(c.n_sampled),
        lambda c: (
            f"must be 0 with mechanism 'auto', got {c.n_sampled}: the planner chooses how many "
            "attributes each client releases"
        ),
    ),
    # cohorts, protocol, learners and what the server accepts
    Rule(
        "run-mode",
        lambda c: c.protocol == "ldp-sgd" and c.run_mode != "node",
        "protocol 'ldp-sgd' needs one client per node (run-mode 'node')",
    ),
    Rule(
        "cohort-size",
        lambda c: c.run_mode == "node" and c.cohort_size != 1,
        "must be 1 in run-mode 'node' (use run-mode 'cohort')",
    ),
    Rule(
        "learners",
        lambda c: _unknown_learner(c) is not None,
        lambda c: (
            f"unknown learner {_unknown_learner(c)!r}; the server trains on releases only: "
            f"{', '.join(_release_learners())}"
        ),
    ),
    Rule(
        "n-sampled",
        lambda c: c.mechanism == "gaussian" and c.gaussian_noise == "joint" and bool(c.n_sampled),
        lambda c: (
            f"must be 0 with gaussian-noise = 'joint', got {c.n_sampled}: the joint block releases all "
            "features as one field; attribute sampling needs gaussian-noise = 'per-feature'"
        ),
    ),
    *_table_rules(),
    Rule(
        "max-record-epsilon",
        lambda c: (c.accept_mechanisms == "declared") != (c.max_record_epsilon is not None),
        "is required with accept-mechanisms = 'declared' (the largest record ε the server accepts) and only then",
    ),
)
