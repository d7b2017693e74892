"""Relations between a scenario's keys (each key alone is checked by its section's constraints):
which privacy axis is swept, what a regression scenario allows, what a custom population may be
given. Returns the sections (with derived defaults) and the swept axis."""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import _config_rules as rules
from .._config_schema import BY_NAME
from .._names import DISCRETE_FAMILIES, WHOLE_RECORD_FAMILIES
from .._params import unknown_key
from .._user_code import population_parameters
from ..errors import ValidationError
from ..learners import check_names
from ..learners import names as learner_names
from ..run_config import RunConfig
from ._sections import DEFAULT_SPLIT, GRID_KEYS, REGRESSION_DATASETS, _key_path


def _need(path: str, ok: bool, msg: str) -> None:
    if not ok:
        raise ValidationError(path, msg)


def _need_unset(priv: Any, keys: tuple[str, ...], msg: str) -> None:
    """Each of ``keys`` of the privacy section must be left out: the first one set is refused with ``msg``."""
    for k in keys:
        _need(f"privacy.{k}", getattr(priv, k) is None, msg)


class _Keys:
    """A scenario's keys by schema name, for the relations it shares with the run config
    (``fedrr._config_rules``); a key no scenario sets reads as its default."""

    def __init__(self, secs: dict[str, Any]):
        self._secs = secs

    def __getattr__(self, name: str) -> Any:
        key = BY_NAME[name]
        return getattr(self._secs[key.section], name) if key.scenario else key.default


def _check(secs: dict[str, Any], *relations: rules.Rule) -> None:
    """The run config's relations on the scenario's keys, each error naming the scenario key."""
    for rule in relations:
        rule.check(_Keys(secs), rules.scenario_name)


def crosscheck(secs: dict[str, Any], notes: list[str] | None = None) -> tuple[dict[str, Any], str]:
    """The sections with derived defaults, and the swept axis; a default budget that fills a key
    the user left out is announced in ``notes`` (one line each)."""
    notes = [] if notes is None else notes
    if secs["population"].task == "regression":
        return _regression(secs)
    pop, priv, learners = secs["population"], secs["privacy"], secs["learners"]
    is_dataset = pop.population == "dataset"
    reg_only = [n for n in learners.names if n not in learner_names("classification")]
    _need(
        "learners.names",
        not reg_only,
        f"{reg_only[0] if reg_only else ''!r} is a regression learner; set "
        f"population.task = 'regression' or use {', '.join(learner_names('classification'))}",
    )
    check_names(learners.names, "classification", "learners.names")
    _need(
        "privacy.calibration",
        priv.calibration == "analytic",
        "is for task = 'regression' (classification uses the analytic Gaussian)",
    )
    _need(
        "privacy.label_public",
        not priv.label_public,
        "is for task = 'regression' (a classification label is always randomised)",
    )
    _check(secs, *rules.TABLE_RULES)
    _need(
        "learners.names",
        "spread-public" not in learners.names or not is_dataset or bool(pop.public_table or pop.public_rows),
        "'spread-public' needs a public sample: set population.public_table or population.public_rows",
    )
    if pop.resample != "none":
        notes.append(
            f"[fedrr] population.resample = {pop.resample!r}: the clients' rows are resampled (client i's row "
            "drawn with replacement as a function of (seed, i)); every cell's population says so"
        )
    if is_dataset:
        _need(
            "population.dataset",
            pop.dataset not in REGRESSION_DATASETS,
            f"{pop.dataset!r} is a regression dataset; the built-in population trains classifiers: use a "
            "classification dataset, or set task = 'regression'",
        )
        _need("population.options", not pop.options, "is only for a custom population (population = 'module:Class')")
    else:
        _custom_population_options(pop)
    _need(
        "privacy.gaussian_noise",
        priv.gaussian_noise == "joint" or priv.mechanism == "gaussian",
        f"'per-feature' is for mechanism 'gaussian', got mechanism {priv.mechanism!r}",
    )
    _check(secs, rules.JOINT_N_SAMPLED)
    _need(
        "population.fake_fraction",
        pop.fake_fraction == 0
        or not is_dataset
        or (priv.mechanism in DISCRETE_FAMILIES and priv.mechanism != "triple"),
        "fake clients craft releases of discrete fields: privacy.mechanism 'rr' or 'oracle', or 'paired' (pair "
        f"reports) or 'auto' (they forge no triple), got {priv.mechanism!r}",
    )
    if priv.mechanism in WHOLE_RECORD_FAMILIES:
        _whole_record(secs, is_dataset)
    grids = [k for k in GRID_KEYS if getattr(priv, k) is not None]
    if len(grids) > 1:
        raise ValidationError(f"privacy.{grids[1]}", f"give exactly one swept axis, not both {grids[0]} and {grids[1]}")
    if pop.budget_mix:
        _need(
            "population.budget_mix",
            is_dataset,
            "is for the built-in dataset population (a custom population sets its own budgets)",
        )
        _need(
            f"privacy.{grids[0]}" if grids else "population.budget_mix",
            not grids,
            "cannot be combined with population.budget_mix, which sets the feature budgets itself (no privacy grid)",
        )
        _need(
            "privacy.label_flip",
            priv.label_flip not in (None, "same")
            or priv.label_epsilon is not None
            or priv.mechanism in WHOLE_RECORD_FAMILIES,
            "population.budget_mix needs the label's budget: give label_flip (a number) or label_epsilon",
        )
        axis = ""  # one grid point: the mix is the scenario's budget
    elif not grids:
        _need(
            "privacy.epsilon_grid",
            not is_dataset,
            "is missing: give epsilon_grid (ε per record), feature_flip_grid or feature_epsilon_grid",
        )
        axis = ""  # a custom population sets its own budgets: one grid point
    else:
        axis = grids[0]
    fam = priv.mechanism
    if axis == "feature_flip_grid" and fam != "rr":
        raise ValidationError(
            "privacy.feature_flip_grid",
            f"flip probabilities are for mechanism 'rr'; for {fam!r} give feature_epsilon_grid or epsilon_grid",
        )
    if axis == "epsilon_grid":
        _need_unset(
            priv,
            ("label_flip", "label_epsilon"),
            "cannot be set with epsilon_grid: the label's share of ε_record comes from privacy.split",
        )
        _need(
            "privacy.epsilon_grid",
            is_dataset,
            "a record budget split needs the built-in dataset population (it "
            "must know D and k); give feature_flip_grid or feature_epsilon_grid for a custom population",
        )
    else:
        _check(secs, rules.ONE_LABEL_BUDGET)
        label_flip = rules.default_budgets(_Keys(secs)).get("label_flip")
        if label_flip is not None:  # the cells carry it (their fingerprints with it), and the sweep says so
            secs["privacy"] = priv = dataclasses.replace(priv, label_flip=label_flip)
            notes.append(rules.default_note("label_flip", label_flip, rules.scenario_name))
        _need(
            "privacy.label_flip",
            priv.label_flip != "same" or axis == "feature_flip_grid",
            '"same" needs feature_flip_grid (the label then flips like the features)',
        )
    _need(
        "learners.names",
        not ("spread-true" in learners.names and is_dataset and fam != "rr"),
        "'spread-true' (spread-EM with the clean data's own prior) needs discrete features: privacy.mechanism = 'rr'",
    )
    return secs, axis


def _custom_population_options(pop: Any) -> None:
    """A custom population's options: none is a run-config key, each is a parameter of its
    constructor (when its signature can be read)."""
    owned = {f.name for f in dataclasses.fields(RunConfig)}
    for k in pop.options:
        _need(
            f"population.options.{_key_path(k)}",
            str(k).replace("-", "_") not in owned,
            "is a run-config key the scenario sets itself (or the federation reads); options are only the "
            "custom population's own constructor arguments",
        )
    try:  # imports it: an unimportable population fails here, before anything runs
        params = population_parameters(pop.population)
    except ValidationError as exc:
        raise ValidationError("population.population", exc.message) from None
    if params is not None:
        theirs = sorted(params - owned)
        for k in pop.options:
            if str(k).replace("-", "_") not in params:
                raise unknown_key(
                    f"population.options.{_key_path(k)}",
                    k,
                    theirs,
                    f" (the constructor arguments of {pop.population} that the scenario does not set)",
                )


def _whole_record(secs: dict[str, Any], is_dataset: bool) -> None:
    """Mechanisms "paired", "triple" and "auto": the whole ε_record goes to the release (paired: each of
    the n_sampled pairs gets ε_record/n_sampled, unset meaning 1; triple: its one report; auto: the
    planned design), and the label
    has no budget of its own. So a key that would set a label budget, or split ε_record between
    features and label, is refused rather than silently unused; the sweep's axis is epsilon_grid
    (ε_record), or a budget mix of ε_record values. "auto" and "triple" also refuse n_sampled."""
    pop, priv = secs["population"], secs["privacy"]
    fam = priv.mechanism
    where = {
        "paired": "the pairs; the label is released inside every (attribute, label) pair",
        "triple": "the triple; the label is released inside the (attribute, attribute, label) triple",
    }.get(fam, "the planned release; the planner decides how the label is released")
    _check(secs, *rules.WHOLE_RECORD_LABEL)
    _need(
        "privacy.split",
        dict(priv.split) == DEFAULT_SPLIT,
        f"is not used by mechanism = {fam!r} (the whole ε_record goes to {where}, with no budget of its own): "
        "leave it out",
    )
    _check(secs, rules.AUTO_N_SAMPLED)
    _need_unset(
        priv,
        ("feature_flip_grid", "feature_epsilon_grid"),
        f"is not used by mechanism = {fam!r}: give epsilon_grid (the ε of each client's whole release)",
    )
    _need(
        "privacy.epsilon_grid",
        not is_dataset or priv.epsilon_grid is not None or bool(pop.budget_mix),
        f"is missing: mechanism = {fam!r} sweeps the ε of each client's whole release",
    )


def _regression(secs: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A regression scenario: built-in data, offline, one Gaussian/Laplace block on the inputs, a
    record budget grid (epsilon_grid), regression learners."""
    pop, priv, learners, run = secs["population"], secs["privacy"], secs["learners"], secs["run"]
    _need(
        "population.population",
        pop.population == "dataset",
        "task = 'regression' uses the built-in datasets (no custom population)",
    )
    _need(
        "population.dataset",
        pop.dataset in ("lending_club", "adult", "diabetes"),
        f"task = 'regression' needs lending_club, adult or diabetes, got {pop.dataset!r}",
    )
    _need("population.budget_mix", not pop.budget_mix, "is not available for task = 'regression'")
    _need("population.table", not pop.table, "is not available for task = 'regression' (a table is classified)")
    _need("population.resample", pop.resample == "none", "is not available for task = 'regression'")
    _need("population.fake_fraction", pop.fake_fraction == 0, "is not available for task = 'regression'")
    _need(
        "privacy.mechanism",
        priv.mechanism in ("gaussian", "laplace"),
        f"task = 'regression' releases numeric inputs: 'gaussian' or 'laplace', got {priv.mechanism!r}",
    )
    _need(
        "run.mode",
        run.mode == "offline",
        "task = 'regression' runs offline (the Flower protocol's label is categorical)",
    )
    _need_unset(
        priv,
        ("feature_flip_grid", "feature_epsilon_grid", "label_flip", "label_epsilon"),
        "is not used by task = 'regression': give epsilon_grid (ε per "
        "record; privacy.split shares it between the input block and the target, or label_public = true)",
    )
    _need("privacy.epsilon_grid", priv.epsilon_grid is not None, "is missing: task = 'regression' sweeps ε per record")
    _need(
        "privacy.calibration",
        priv.calibration == "analytic" or priv.mechanism == "gaussian",
        "'farokhi' is a Gaussian calibration",
    )
    _need(
        "privacy.gaussian_noise",
        priv.gaussian_noise == "joint",
        "task = 'regression' releases the inputs as one block (calibrated by privacy.calibration)",
    )
    bad = [n for n in learners.names if n not in learner_names("regression")]
    _need(
        "learners.names",
        not bad,
        f"{bad[0] if bad else ''!r} is not a regression learner; valid: {', '.join(learner_names('regression'))}",
    )
    check_names(learners.names, "regression", "learners.names")
    _need(
        "learners.names",
        "gauss-dro" not in learners.names or priv.mechanism == "gaussian",
        "'gauss-dro' (Thm 6) needs privacy.mechanism = 'gaussian'",
    )
    return secs, "epsilon_grid"
