"""The registry: each learner's name and task -> how to fit it (``Learner``), what it is fitted on
(``FitData``, ``FitOptions``), and the checks of names and mechanisms a run makes before anything runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from .._config_schema import BY_NAME
from ..errors import ValidationError
from ._accepts import _mechanisms

TASKS = ("classification", "regression")


@dataclass(frozen=True)
class FitData:
    """What a learner is fitted on. ``X``/``y``: releases (features, labels or targets);
    ``mechanism``: one RecordMechanism or one per record (classification) — the estimators use it
    as the exact likelihood; ``clean_X``/``clean_y``: the same clients' clean records (oracles
    only); ``feature_mechanism``/``label_noised``: the regression setting's input block and
    whether the target was noised; ``client_id``: whose records they are (``own_protocol``
    learners seed each client's simulated release with it); ``public_X``: public clean feature rows
    (the population's ``public_sample``), for a prior."""

    X: np.ndarray
    y: np.ndarray
    mechanism: Any = None
    clean_X: np.ndarray | None = None
    clean_y: np.ndarray | None = None
    feature_mechanism: Any = None
    label_noised: bool = False
    client_id: np.ndarray | None = None  # the records' client ids (a learner that simulates its own releases)
    public_X: np.ndarray | None = None  # public clean feature rows (the population's ``public_sample``), a prior


@dataclass(frozen=True)
class FitOptions:
    """Knobs shared by the learners (run config / scenario ``[learners]``; their defaults are the
    config schema's, declared once)."""

    C: float = BY_NAME["C"].default
    random_state: int = 0
    executor: Any = None
    spread_max_iter: int = BY_NAME["spread_max_iter"].default
    spread_solver: str = BY_NAME["spread_solver"].default
    public_smoothing: int = BY_NAME["public_smoothing"].default
    wdro_max_iter: int = BY_NAME["wdro_max_iter"].default
    encoding: str = BY_NAME["encoding"].default
    #: LDP-SGD's keywords (``RunConfig.ldp_sgd_params``; empty: the estimator's defaults)
    ldp_sgd: Mapping[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Learner:
    name: str
    task: str
    doc: str
    fit: Callable[[FitData, FitOptions], Any]  # -> a fitted estimator
    oracle: bool = False
    #: not trained on the record releases but on its own releases from the same clients (another
    #: protocol), simulated from their clean records: needs clean_X, clean_y and client_id
    own_protocol: bool = False
    #: ``accepts(mechanism)`` raises the ValidationError ``fit`` would for releases of these mechanisms
    #: (one, or a list of the distinct ones): what ``check_accepts`` asks before anything runs
    accepts: Callable[[Any], None] | None = None


_REGISTRY: dict[tuple[str, str], Learner] = {}


def _learner(
    task: str, name: str, doc: str, *, oracle: bool = False, own_protocol: bool = False, accepts=None, triples=False
):
    """Register a learner; ``triples``: it learns from triple releases (``TripleRecordMechanism``), which
    every other learner refuses by name, before anything runs (``accepts``) and at fit."""

    def deco(fn):
        ok, fit = accepts, fn
        if not triples:
            ok = partial(_no_triples, name, accepts)

            def fit(d, o, _fn=fn):
                _no_triples(name, None, d.mechanism)
                return _fn(d, o)

        _REGISTRY[(task, name)] = Learner(name, task, doc, fit, oracle, own_protocol, ok)
        return fn

    return deco


#: the learners that take triple releases (``_learner(triples=True)``)
TRIPLE_LEARNERS = (
    "spread",
    "naive",
    "naive-cv",
    "spread-plain",
    "spread-flat",
    "spread-public",
    "ldp-nb",
    "ldp-nb-normsub",
    "majority",
    "clean",
    "clean-nb",
    "ldp-sgd",
)


def _no_triples(name: str, then, mechanism: Any) -> None:
    """A clear error for a learner that cannot use triple releases, then ``then``'s own check."""
    from ..mechanisms import TripleRecordMechanism

    if any(isinstance(m, TripleRecordMechanism) for m in _mechanisms(mechanism)):
        raise ValidationError(
            "learners",
            f"{name!r} cannot learn from triple releases (TripleRecordMechanism): it reads (attribute, label) "
            f"pair reports or released features; {', '.join(TRIPLE_LEARNERS)} take triples",
        )
    if then is not None:
        then(mechanism)


def names(task: str = "classification", *, oracles: bool = True) -> tuple[str, ...]:
    """Learner names of a task, in registry order."""
    return tuple(n for (t, n), L in _REGISTRY.items() if t == task and (oracles or not L.oracle))


def get(name: str, task: str = "classification") -> Learner:
    if (task, name) not in _REGISTRY:
        raise ValidationError("learners", f"unknown {task} learner {name!r}; valid: {', '.join(names(task))}")
    return _REGISTRY[(task, name)]


def check_names(learners: Any, task: str = "classification", field_name: str = "learners") -> tuple[str, ...]:
    """A validated tuple of distinct learner names with at least one trained on the releases."""
    if isinstance(learners, str):
        learners = [n.strip() for n in learners.split(",") if n.strip()]
    learners = tuple(learners)
    valid = names(task)
    bad = [n for n in learners if n not in valid]
    if not learners or bad:
        raise ValidationError(
            field_name,
            f"unknown learner {bad[0]!r}; valid: {', '.join(valid)}"
            if bad
            else f"is empty; give at least one of {', '.join(valid)}",
        )
    if len(set(learners)) != len(learners):
        raise ValidationError(field_name, f"lists a learner twice: {list(learners)!r}")
    if all(_REGISTRY[(task, n)].oracle for n in learners):
        raise ValidationError(
            field_name,
            "needs at least one learner trained on the releases; "
            f"{', '.join(n for n in valid if _REGISTRY[(task, n)].oracle)} are clean-data oracles",
        )
    return learners


def check_accepts(learners: Any, mechanism: Any, task: str = "classification", population: str = "") -> None:
    """Refuse, before anything runs, a learner that would refuse releases of ``mechanism`` (one, or a
    list of a population's distinct mechanisms: a budget mix): the error its ``fit`` would raise,
    saying how many mechanisms ``population`` (its name) gives."""
    for name in check_names(learners, task):
        accepts = get(name, task).accepts
        if accepts is None:
            continue
        try:
            accepts(mechanism)
        except ValidationError as exc:
            n = len(_mechanisms(mechanism))
            where = f"{population} gives {n} distinct record mechanism{'s' if n > 1 else ''}"
            raise ValidationError(exc.field, f"{exc.message}; {where}" if population else exc.message) from None
