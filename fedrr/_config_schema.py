"""The one declaration of every config key a run has: its name, its concern (population, privacy,
learners, collection, execution), its type, its one default, its constraints (``fedrr._params``)
and its one line of documentation.

Both config paths are generated from it:

- ``fedrr.run_config.RunConfig`` (Flower's flat run config, ``[tool.flwr.app.config]``) has one
  field per key with a Flower name (``Key.flwr``, the name with dashes);
- the sections of a scenario TOML (``fedrr.experiment._sections``) have one field per key with
  ``scenario=True``, in the section of its concern (``SECTION_OF``: today's section names, so every
  committed config still reads; collection and execution share ``[run]``), next to the scenario's
  own keys (grid axes, repeats, the sweep's learner list, ...), which stay in ``_sections.py``.

A key that only one path has says why in ``Key.only``: the value a sweep cell gives it is derived
from the scenario (a grid point, the cell's seed), or it belongs to a deployment."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ._config_tables import BudgetMix, ColumnDomains, ColumnEdges
from ._names import DATASETS, FAKE_ATTACKS, GAUSSIAN_NOISE, MECHANISM_FAMILIES, RESAMPLE
from ._params import Constraint, Interval, IsNone, ListOf, Options, Satisfies, Text

CONCERNS = ("population", "privacy", "learners", "collection", "execution")
#: the scenario TOML section of each concern: today's names (``[run]`` holds collection and execution)
SECTION_OF = {
    "population": "population",
    "privacy": "privacy",
    "learners": "learners",
    "collection": "run",
    "execution": "run",
}
EXECUTORS = ("serial", "threads", "ray")
PROTOCOLS = ("record", "ldp-sgd")
RUN_MODES = ("node", "cohort")
#: what the built-in population uses when neither key of a budget pair is given (and says so)
DEFAULT_FEATURE_FLIP, DEFAULT_LABEL_FLIP = 0.3, 0.2
#: clients per node in cohort mode when cohort_size is unset (node mode: one)
DEFAULT_COHORT_SIZE = 1000
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


@dataclass(frozen=True)
class Key:
    """One config key. ``flwr``: its name in Flower's flat run config (default: the name with
    dashes; None: not in it). ``scenario``: settable in a scenario TOML, in the section of its
    concern. ``axis``: in a scenario, a list of values makes a grid axis (one cell per value).
    ``toml``: how a scenario TOML writes the value, when not as the value itself (a table).
    ``scenario_also``: values a scenario accepts besides (resolved per cell, e.g. label_flip "same").
    ``only``: why the key is in one path only. ``builtin``: the constraints are the built-in
    population's; a custom population whose factory takes the key gets its value as given (it
    checks it, as its own keys)."""

    name: str
    concern: str
    type: str
    default: Any
    doc: str
    constraints: tuple[Constraint, ...]
    flwr: str | None = ""
    scenario: bool = True
    axis: bool = False
    toml: tuple[Constraint, ...] = ()
    scenario_also: tuple[Constraint, ...] = ()
    only: str = ""
    #: a key not in a scenario: the scenario key a sweep cell derives its value from (if one)
    from_scenario: str = ""
    builtin: bool = False
    #: in Flower's flat run config the value is JSON text ("" = the default): a table or a list
    flwr_json: bool = False
    #: what a sweep cell's fingerprint (which decides whether a finished cell is reused) holds of the
    #: key: "always"; "if-set", only a value other than its default (a key added after results were
    #: first fingerprinted: a new key, at its default, leaves earlier cells valid); "never" (it
    #: cannot change a cell's result: where it runs, where it writes, how long it waits)
    fingerprint: str = "always"

    def __post_init__(self):
        assert self.concern in CONCERNS, self.concern
        assert self.fingerprint in ("always", "if-set", "never"), self.fingerprint
        if self.flwr == "":
            object.__setattr__(self, "flwr", self.name.replace("_", "-"))

    @property
    def section(self) -> str | None:
        """The scenario TOML section of the key (None: not in a scenario)."""
        return SECTION_OF[self.concern] if self.scenario else None

    @property
    def scenario_path(self) -> str:
        """The scenario key that sets the key ("privacy.delta"), or derives it ("" if none)."""
        return f"{self.section}.{self.name}" if self.scenario else self.from_scenario

    def run_field(self) -> Any:
        """The ``RunConfig`` field of the key."""
        meta = {"flwr": self.flwr, "doc": self.doc, "constraints": self.constraints, "key": self}
        if isinstance(self.default, dict):
            d = self.default
            return field(default_factory=lambda: dict(d), hash=False, metadata=meta)
        return field(default=self.default, metadata=meta)

    def scenario_constraints(self) -> tuple[Constraint, ...]:
        """What a scenario TOML accepts: ``toml`` if given, else the key's constraints (each also
        as a list for a grid axis), then ``scenario_also``, then unset if the key may be unset."""
        if self.toml:
            return self.toml
        values = tuple(c for c in self.constraints if not isinstance(c, IsNone))
        unset = tuple(c for c in self.constraints if isinstance(c, IsNone))
        if self.axis:  # one value, or a list of them (a grid axis)
            values += tuple(ListOf(c) for c in values)
        return values + self.scenario_also + unset

    def scenario_default(self) -> Any:
        return (self.default,) if self.axis else self.default

    def scenario_field(self) -> Any:
        """The field of the key in its scenario section."""
        meta = {"doc": self.doc, "constraints": self.scenario_constraints(), "key": self}
        d = self.scenario_default()
        if isinstance(d, dict):
            return field(default_factory=lambda: dict(d), hash=False, metadata=meta)
        return field(default=d, metadata=meta)


def _is_population(v: Any) -> bool:
    return v == "dataset" or (isinstance(v, str) and ":" in v and all(v.partition(":")[::2]))


def _mix_ok(v: Any) -> bool:
    return (
        isinstance(v, tuple)
        and all(
            isinstance(p, tuple) and len(p) == 2 and p[0] > 0 and p[1] >= 0 and math.isfinite(p[0] + p[1]) for p in v
        )
        and (not v or sum(w for _, w in v) > 0)
    )


def _run_name_ok(v: Any) -> bool:
    return isinstance(v, str) and set(v) <= _NAME_CHARS and ".." not in v


def _learners_ok(v: Any) -> bool:
    return isinstance(v, tuple) and len(v) > 0 and all(isinstance(n, str) and n for n in v)


_NONNEG = Interval(float, 0, None)
_POS = Interval(float, 0, None, closed="neither")
_FLIP = Interval(float, 0, 1, closed="neither")
_FRACTION = Interval(float, 0, 1, closed="left")
_UNSET = IsNone()


def _keys() -> tuple[Key, ...]:
    K = Key
    return (
        # ------------------------------------------------------------------ population
        K(
            "population",
            "population",
            "str",
            "dataset",
            "'dataset' (the built-in population drawn from `dataset`) or an import path 'package.module:Class' of a "
            "ClientPopulation",
            (Satisfies(_is_population, "'dataset' (built in) or an import path 'package.module:Class'"),),
        ),
        K(
            "dataset",
            "population",
            "str",
            "digits_7_vs_9",
            "dataset of the built-in population; in a run config, a custom population that takes a `dataset` "
            "parameter gets the name as given",
            (Options(*DATASETS),),
            builtin=True,
        ),
        K(
            "n_clients",
            "population",
            "int",
            100,
            "clients, one record each",
            (Interval(int, 1, 10**9),),
            axis=True,
        ),
        K(
            "table",
            "population",
            "str",
            "",
            "your own table instead of `dataset`: a .csv or .parquet file, one row per person (relative paths: to "
            "the scenario file, or to where the run starts); with label and the columns declared in categorical / "
            "edges (fedrr.population.TablePopulation). '' = none",
            (Text(),),
            fingerprint="if-set",
        ),
        K(
            "label",
            "population",
            "str",
            "",
            "table: the label column",
            (Text(),),
            fingerprint="if-set",
        ),
        K(
            "classes",
            "population",
            "tuple",
            (),
            "table: the label column's values, declared (y = index in this list); left out, the sorted distinct "
            "labels of the rows, treated as public. Flower: JSON text",
            (ListOf(Satisfies(lambda v: isinstance(v, (str, int, float)), "a label value"), nonempty=False),),
            flwr_json=True,
            fingerprint="if-set",
        ),
        K(
            "categorical",
            "population",
            "dict",
            {},
            "table: categorical columns and their domains, {column = [values]} (a value outside its domain is "
            "an error naming its row and column). Flower: JSON text",
            (ColumnDomains(),),
            flwr_json=True,
            fingerprint="if-set",
        ),
        K(
            "edges",
            "population",
            "dict",
            {},
            "table: numeric columns and their declared public cut points, {column = [e1, e2, ...]}: k = len + 1 "
            'states, a value on an edge goes up; "private-quantiles:K" fits K quantile bins on the private rows '
            "(explicit opt-in: the edges then reveal the rows' quantiles, outside ε). Flower: JSON text",
            (ColumnEdges(),),
            flwr_json=True,
            fingerprint="if-set",
        ),
        K(
            "test_table",
            "population",
            "str",
            "",
            "table: held-out clean test rows, a table of the same columns ('' = n_test_per_class rows per class "
            "held out of `table`)",
            (Text(),),
            fingerprint="if-set",
        ),
        K(
            "resample",
            "population",
            "str",
            "none",
            "none (at most one client per training row of a table; a built-in dataset cycles its rows) | "
            "bootstrap (client i's row drawn with replacement as a function of (seed, i): any n_clients; every "
            "output says resampled)",
            (Options(*RESAMPLE),),
            fingerprint="if-set",
        ),
        K(
            "public_table",
            "population",
            "str",
            "",
            "table: public clean rows with the table's feature columns (no label needed), a .csv or .parquet file "
            "coded by its declared schema, offered to the server as a prior (learner spread-public). '' = none",
            (Text(),),
            fingerprint="if-set",
        ),
        K(
            "public_rows",
            "population",
            "int",
            0,
            "a simulation's public sample: this many training rows, drawn with the seed, offered to the server as "
            "a prior (learner spread-public); a sample of the people's own distribution. 0 = none",
            (Interval(int, 0, None),),
            fingerprint="if-set",
        ),
        K(
            "n_test_per_class",
            "population",
            "int",
            50,
            "held-out clean test records per class (evaluation only; regression: test rows)",
            (Interval(int, 0, None),),
        ),
        # ------------------------------------------------------------------ privacy
        K(
            "mechanism",
            "privacy",
            "str",
            "rr",
            "record mechanism family: rr (k-ary randomised response on discrete features) | oracle | gaussian | "
            "laplace | paired (each client releases n_sampled (attribute, label) pairs, each one value of their "
            "product domain through a frequency oracle: the whole record ε goes to the pairs, no label budget) | "
            "triple (each client releases one (attribute, attribute, label) triple as one value through a frequency "
            "oracle: the whole record ε goes to it, no label budget, no n_sampled) | "
            "auto (the release planner's design for n_clients records, fedrr.mechanisms.plan_release: the whole "
            "record ε goes to it, no label budget, no n_sampled)",
            (Options(*MECHANISM_FAMILIES),),
        ),
        K(
            "feature_flip",
            "privacy",
            "float | None",
            None,
            "rr: flip probability per feature; unset (left out): feature_epsilon, or else the default "
            f"{DEFAULT_FEATURE_FLIP} (announced)",
            (_FLIP, _UNSET),
            scenario=False,
            only="the cell's grid point (or epsilon_grid's, through privacy.split; or population.budget_mix)",
            from_scenario="privacy.feature_flip_grid",
        ),
        K(
            "feature_epsilon",
            "privacy",
            "float | None",
            None,
            "ε per feature (rr, oracle, laplace; gaussian per-feature), of all features (gaussian joint), of the "
            "whole record (paired: its n_sampled pairs share it; auto: all of it to the planned release)",
            (_POS, _UNSET),
            scenario=False,
            only="the cell's grid point (or epsilon_grid's, through privacy.split; or population.budget_mix)",
            from_scenario="privacy.feature_epsilon_grid",
        ),
        K(
            "label_flip",
            "privacy",
            "float | str | None",
            None,
            f"label flip probability; unset: label_epsilon, or else the default {DEFAULT_LABEL_FLIP} (announced); a "
            'scenario may also give "same" (the label flips like the features of feature_flip_grid)',
            (_FLIP, _UNSET),
            scenario_also=(Options("same"),),
        ),
        K("label_epsilon", "privacy", "float | None", None, "label ε (not with epsilon_grid)", (_POS, _UNSET)),
        K(
            "delta",
            "privacy",
            "float",
            1e-5,
            "δ per Gaussian field (of the feature block if joint; regression: of the input block)",
            (Interval(float, 0, 1, closed="neither"),),
        ),
        K(
            "gaussian_noise",
            "privacy",
            "str",
            "joint",
            "gaussian: joint (one block on all features, the analytic Gaussian on its L2 sensitivity √D; "
            "ε_record = ε_features + ε_label) | per-feature (one per feature, basic composition: D·ε + ε_label)",
            (Options(*GAUSSIAN_NOISE),),
        ),
        K(
            "n_sampled",
            "privacy",
            "int",
            0,
            "attribute sampling: features each client releases, drawn uniformly, with the whole feature budget "
            "(0: all; paired: pairs, 0 meaning 1; auto: 0, the planner picks it)",
            (Interval(int, 0, 10**6),),
        ),
        K(
            "budget_mix",
            "population",
            "tuple",
            (),
            "clients with different feature budgets in one pool: flip probabilities ('rr') or ε per feature, drawn "
            "per client with the weights; it replaces the privacy grid. Scenario: {values = [0.2, 0.4], weights = "
            "[1, 1]}; Flower: '0.2:1,0.4:1'",
            (Satisfies(_mix_ok, "pairs (value > 0, weight >= 0) with a positive total weight"),),
            toml=(BudgetMix(),),
        ),
        K("dropout", "population", "float", 0.0, "fraction of clients that never answer", (_FRACTION,)),
        K(
            "fake_fraction",
            "population",
            "float",
            0.0,
            "simulation: fraction of the clients that are fake, each sending an attacker's crafted, valid-looking "
            "release (fedrr.fake)",
            (_FRACTION,),
            fingerprint="if-set",
        ),
        K(
            "fake_attack",
            "population",
            "str",
            "output",
            "output (crafted releases of fake_attribute and the label, maximal gain, an OUE report with only the "
            "target bit, unpadded; paired: of the pair (fake_state, fake_label)) | output-sampled (the same, the "
            "attribute only when the honest sampling draws it) | mga (Cao, Jia & Gong's maximal gain attack: k-RR "
            "a target drawn uniformly, OUE the target bits padded with random ones to the honest expected number, "
            "OLH the best of 1,000 sampled seeds) | mga-sampled (mga, the attribute only when the honest sampling "
            "draws it) | input (a fake record, honestly randomised)",
            (Options(*FAKE_ATTACKS),),
            fingerprint="if-set",
        ),
        K(
            "fake_attribute",
            "population",
            "int",
            0,
            "the attribute (column) fake clients target",
            (Interval(int, 0, None),),
            fingerprint="if-set",
        ),
        K(
            "fake_state",
            "population",
            "int",
            0,
            "the state of fake_attribute fake clients push up",
            (Interval(int, 0, None),),
            fingerprint="if-set",
        ),
        K(
            "fake_targets",
            "population",
            "int",
            1,
            "mga, mga-sampled, input: the number r of target states, fake_state to fake_state + r - 1 (output: 1)",
            (Interval(int, 1, None),),
            fingerprint="if-set",
        ),
        K(
            "fake_label",
            "population",
            "int",
            1,
            "the label fake clients push up",
            (Interval(int, 0, None),),
            fingerprint="if-set",
        ),
        # ------------------------------------------------------------------ collection (the server's side)
        K(
            "accept_mechanisms",
            "collection",
            "str",
            "population",
            "which mechanisms the server accepts: population (each client's must be the population's for it: "
            "simulation) | declared (clients choose their own, up to max_record_epsilon: deployment)",
            (Options("population", "declared"),),
            scenario=False,
            only="a deployment's key: a sweep simulates its population, whose mechanisms the server knows",
            fingerprint="if-set",
        ),
        K(
            "max_record_epsilon",
            "collection",
            "float | None",
            None,
            "accept_mechanisms = declared: the largest record ε the server accepts (a reply claiming more is rejected)",
            (_POS, _UNSET),
            scenario=False,
            only="a deployment's key (with accept_mechanisms = declared)",
            fingerprint="if-set",
        ),
        K(
            "check_alpha",
            "collection",
            "float",
            0.01,
            "false-alarm probability per run (per cell) of the server's frequency check (fedrr.frequency_check)",
            (Interval(float, 0, 1, closed="neither"),),
            fingerprint="if-set",
        ),
        K(
            "seed",
            "population",
            "int",
            0,
            "run seed: client generators and the split derive from it",
            (Interval(int, 0, 2**63 - 1),),
            scenario=False,
            only="SeedSequence(scenario.seed, spawn_key=the cell's index)",
            from_scenario="scenario.seed",
        ),
        K(
            "run_mode",
            "collection",
            "str",
            "node",
            "node: one Flower node per client; cohort: cohort_size clients per node",
            (Options(*RUN_MODES),),
            scenario=False,
            only="flower: node, cohort: cohort",
            from_scenario="run.mode",
        ),
        K(
            "cohort_size",
            "collection",
            "int | None",
            None,
            f"clients per Flower node in cohort mode (unset: {DEFAULT_COHORT_SIZE}); node mode has one client per "
            "node (unset or 1)",
            (Interval(int, 1, 10**7), _UNSET),
        ),
        K(
            "learners",
            "learners",
            "tuple",
            ("spread", "naive"),
            "learners the server trains on the pool (see fedrr.learners; no oracles); Flower: comma text",
            (Satisfies(_learners_ok, "a non-empty list of learner names"),),
            scenario=False,
            only="those of its learners that train on releases (the oracles run beside the federation)",
            from_scenario="learners.names",
        ),
        K(
            "protocol",
            "collection",
            "str",
            "record",
            "record: clients release their records (the learners train on the pool); ldp-sgd: each releases one "
            "gradient (Wang et al. 2019 §V) at its record's ε",
            (Options(*PROTOCOLS),),
            scenario=False,
            only="a sweep runs the record protocol; its learner 'ldp-sgd' simulates the ldp-sgd protocol on the "
            "same clients",
        ),
        # ------------------------------------------------------------------ learners
        K(
            "ldp_sgd_mechanism",
            "learners",
            "str",
            "piecewise",
            "ldp-sgd: per-coordinate mechanism, piecewise | duchi",
            (Options("piecewise", "duchi"),),
        ),
        K(
            "ldp_sgd_n_sampled",
            "learners",
            "int",
            0,
            "ldp-sgd: coordinates each client releases (0: max(1, ⌊ε/2.5⌋))",
            (Interval(int, 0, None),),
        ),
        K("ldp_sgd_clip", "learners", "float", 1.0, "ldp-sgd: gradient coordinates clipped to [-clip, clip]", (_POS,)),
        K(
            "ldp_sgd_groups",
            "learners",
            "int",
            0,
            "ldp-sgd: model rounds (0: the group-size rule)",
            (Interval(int, 0, None),),
        ),
        K(
            "ldp_sgd_learning_rate",
            "learners",
            "float",
            0.0,
            "ldp-sgd: step size (0: the default rule)",
            (_NONNEG,),
        ),
        K(
            "ldp_sgd_fallback",
            "learners",
            "str",
            "check",
            "ldp-sgd: check (a check group; fall back to the intercept-only model) | none",
            (Options("check", "none"),),
        ),
        K(
            "spread_max_iter",
            "learners",
            "int",
            200,
            "most EM iterations of spread-EM (its CV fits: at most 40)",
            (Interval(int, 1, 10**6),),
        ),
        K(
            "spread_solver",
            "learners",
            "str",
            "auto",
            "spread's solver: em (spread-EM) | direct (paired releases of one pair per record: L-BFGS on the "
            "pair reports' likelihood, the same penalised likelihood without Monte Carlo noise) | auto (direct "
            "where it applies, else em)",
            (Options("em", "direct", "auto"),),
        ),
        K(
            "public_smoothing",
            "learners",
            "int",
            1000,
            "spread-public: pseudo-rows drawn from naive Bayes's joint of the releases that join the public rows "
            "(EmpiricalPrior smoothing: the prior is (M rows + α pseudo-rows)/(M + α)); 0 = the rows alone",
            (Interval(int, 0, 10**6),),
            fingerprint="if-set",
        ),
        K(
            "encoding",
            "learners",
            "str",
            "unit",
            "model input of a discrete state: unit s/(k−1) | index s | onehot (k−1 indicators) | auto (onehot "
            "up to 512 model inputs, else unit: the estimators' default)",
            (Options("unit", "index", "onehot", "auto"),),
        ),
        K("C", "learners", "float", 1.0, "inverse L2 penalty (scikit-learn's C)", (_POS,), flwr="C"),
        K(
            "wdro_max_iter",
            "learners",
            "int",
            0,
            "iteration cap of W-DRO's conic solver (0: its default)",
            (Interval(int, 0, 10**7),),
        ),
        # ------------------------------------------------------------------ execution
        K(
            "executor",
            "execution",
            "str",
            "threads",
            "spread-EM's E-step: serial | threads | ray (same result)",
            (Options(*EXECUTORS),),
            fingerprint="never",
        ),
        K(
            "ray_address",
            "execution",
            "str",
            "",
            "Ray cluster for Flower simulations and the ray executor ('' = local, or RAY_ADDRESS)",
            (Text(),),
            fingerprint="never",
        ),
        K(
            "wave_size",
            "collection",
            "int",
            256,
            "Flower: release queries in flight at once",
            (Interval(int, 1, 10**6),),
            fingerprint="never",
        ),
        K(
            "min_valid",
            "collection",
            "int",
            20,
            "fewer valid releases and the run (the cell) fails",
            (Interval(int, 1, None),),
        ),
        K(
            "node_wait_timeout",
            "collection",
            "float",
            120.0,
            "Flower: seconds to wait for the nodes to register",
            (_POS,),
            fingerprint="never",
        ),
        K(
            "reply_timeout",
            "collection",
            "float",
            600.0,
            "Flower: seconds to wait for all replies",
            (_POS,),
            fingerprint="never",
        ),
        K(
            "results_dir",
            "execution",
            "str",
            "results/federation",
            "where run_name/ is written",
            (Text(nonempty=True),),
            scenario=False,
            only="a sweep writes each cell's run under its results folder (scenario.out or --out)",
            fingerprint="never",
        ),
        K(
            "run_name",
            "execution",
            "str",
            "",
            "results sub-folder ('' = a timestamp)",
            (Satisfies(_run_name_ok, "a folder-safe name of letters, digits, '_', '.' or '-'"),),
            scenario=False,
            only="a sweep names each cell's run by the cell's key",
        ),
    )


#: every key, in the order of Flower's run config (and of ``RunConfig``'s fields)
KEYS: tuple[Key, ...] = _keys()
BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}


def run_keys() -> tuple[Key, ...]:
    """The keys of Flower's flat run config (``RunConfig``'s fields)."""
    return tuple(k for k in KEYS if k.flwr is not None)


def section_keys(section: str) -> tuple[Key, ...]:
    """The keys a scenario TOML section takes from the schema."""
    return tuple(k for k in KEYS if k.section == section)


def with_keys(keys: tuple[Key, ...], make_field: str, *, first: bool = True):
    """A class decorator: the class as a frozen dataclass with one field per key (``make_field``:
    "run_field" or "scenario_field"), before (or after) the class's own fields."""

    def deco(cls: type) -> type:
        own = dict(cls.__dict__.get("__annotations__", {}))
        clash = [k.name for k in keys if k.name in own]
        assert not clash, f"{cls.__name__} declares schema keys itself: {clash}"
        for k in keys:
            setattr(cls, k.name, getattr(k, make_field)())
        ann = {k.name: k.type for k in keys}
        cls.__annotations__ = {**ann, **own} if first else {**own, **ann}
        return dataclasses.dataclass(frozen=True)(cls)

    return deco
