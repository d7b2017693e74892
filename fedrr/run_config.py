"""The typed config of one run: who the clients are, how they release, what the server trains and
how the releases are collected. Parsed and validated once (``RunConfig.from_flwr``); Flower carries
it as the run config (``to_flwr()``: flat keys with dashes, the keys of pyproject's
``[tool.flwr.app.config]``); a sweep cell builds one per cell. Keys a custom population needs that
are not fedrr's own travel in ``extras`` and are handed to the population's constructor."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._params import Boolean, Constraint, Interval, IsNone, Options, Satisfies, Text, check_param, unknown_key
from .errors import ValidationError
from .fake import FAKE_ATTACKS
from .population import BUDGET_KEYS, GAUSSIAN_NOISE, MECHANISM_FAMILIES, WHOLE_RECORD_FAMILIES

EXECUTORS = ("serial", "threads", "ray")
PROTOCOLS = ("record", "ldp-sgd")
RUN_MODES = ("node", "cohort")
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _key(name: str, default: Any, doc: str, *constraints: Constraint, flwr: str | None = None) -> Any:
    """A config field: its Flower key (dashes), constraints and one-line documentation."""
    meta = {"flwr": flwr or name.replace("_", "-"), "doc": doc, "constraints": constraints}
    if isinstance(default, (list, dict, tuple)) and not isinstance(default, tuple):
        return field(default_factory=lambda: default, metadata=meta)
    return field(default=default, metadata=meta)


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


_NONNEG = Interval(float, 0, None)
_POS = Interval(float, 0, None, closed="neither")
_FLIP = Interval(float, 0, 1, closed="neither")
#: the budget keys (BUDGET_KEYS): each is set by a positive value or left out (unset); 0 never means "unset"
#: what the built-in population uses when neither key of a pair is given (and says so)
DEFAULT_FEATURE_FLIP, DEFAULT_LABEL_FLIP = 0.3, 0.2
#: how a Flower config file (where every key must be declared) writes "unset"
UNSET = ""


@dataclass(frozen=True)
class RunConfig:
    """One federated (or offline) run. Field docs are the config reference (docs/reference)."""

    population: str = _key(
        "population",
        "dataset",
        "'dataset' (built in) or an import path 'package.module:Class' of a ClientPopulation",
        Satisfies(_is_population, "'dataset' or an import path 'package.module:Class'"),
    )
    dataset: str = _key("dataset", "digits_7_vs_9", "dataset of the built-in population", Text(nonempty=True))
    n_clients: int = _key("n_clients", 100, "clients, one record each", Interval(int, 1, 10**9))
    n_test_per_class: int = _key(
        "n_test_per_class", 50, "held-out clean test records per class", Interval(int, 0, None)
    )
    mechanism: str = _key(
        "mechanism",
        "rr",
        "record mechanism family: rr | oracle | gaussian | laplace | paired ((attribute, label) pairs, each one "
        "value of their product domain through a frequency oracle; feature-epsilon is the whole record's ε, no "
        "label budget; n-sampled pairs, 0 meaning 1) | auto (the release planner's least-variance design for "
        "n-clients records, fedrr.mechanisms.plan_release; budgets as paired, n-sampled left at 0)",
        Options(*MECHANISM_FAMILIES),
    )
    feature_flip: float | None = _key(
        "feature_flip",
        None,
        "rr: flip probability per feature; unset (left out): feature-epsilon, or else the default "
        f"{DEFAULT_FEATURE_FLIP} (announced)",
        _FLIP,
        IsNone(),
    )
    feature_epsilon: float | None = _key(
        "feature_epsilon",
        None,
        "ε per feature (rr, oracle, laplace; gaussian per-feature), of all features (gaussian joint), of the "
        "whole record (paired: its n-sampled pairs share it; auto: all of it to the planned release)",
        _POS,
        IsNone(),
    )
    label_flip: float | None = _key(
        "label_flip",
        None,
        f"label flip probability; unset: label-epsilon, or else the default {DEFAULT_LABEL_FLIP} (announced)",
        _FLIP,
        IsNone(),
    )
    label_epsilon: float | None = _key("label_epsilon", None, "label ε", _POS, IsNone())
    delta: float = _key(
        "delta",
        1e-5,
        "δ per Gaussian field (the whole feature block if joint)",
        Interval(float, 0, 1, closed="neither"),
    )
    gaussian_noise: str = _key(
        "gaussian_noise",
        "joint",
        "gaussian: joint (one block on all features, analytic Gaussian on its L2 sensitivity) | per-feature "
        "(one per feature, basic composition)",
        Options(*GAUSSIAN_NOISE),
    )
    n_sampled: int = _key(
        "n_sampled",
        0,
        "features each client releases, drawn uniformly (0: all; attribute sampling; paired: pairs, 0 meaning 1; "
        "auto: 0, the planner picks it)",
        Interval(int, 0, 10**6),
    )
    budget_mix: tuple = _key(
        "budget_mix",
        (),
        "clients with different feature budgets: ((value, weight), ...); Flower: 'v:w,v:w'",
        Satisfies(_mix_ok, "pairs (value > 0, weight >= 0) with a positive total weight"),
    )
    dropout: float = _key("dropout", 0.0, "fraction of clients that never answer", Interval(float, 0, 1, closed="left"))
    fake_fraction: float = _key(
        "fake_fraction",
        0.0,
        "simulation: fraction of fake clients, each sending an attacker's crafted, valid-looking release (fedrr.fake)",
        Interval(float, 0, 1, closed="left"),
    )
    fake_attack: str = _key(
        "fake_attack",
        "output",
        "output: crafted releases bypassing the randomiser (maximal gain, unpadded) | output-sampled: the same at "
        "the honest sampling rate | mga: Cao-Jia-Gong's maximal gain attack (OUE padded to the honest number of "
        "ones, OLH best of sampled seeds) | mga-sampled: the same at the honest sampling rate | input: a fake "
        "record, honestly randomised",
        Options(*FAKE_ATTACKS),
    )
    fake_attribute: int = _key("fake_attribute", 0, "the attribute fake clients target", Interval(int, 0, None))
    fake_state: int = _key("fake_state", 0, "the state of fake-attribute fake clients push up", Interval(int, 0, None))
    fake_targets: int = _key(
        "fake_targets",
        1,
        "mga, mga-sampled, input: the number r of target states, fake-state to fake-state + r - 1 (output: 1)",
        Interval(int, 1, None),
    )
    fake_label: int = _key("fake_label", 1, "the label fake clients push up", Interval(int, 0, None))
    accept_mechanisms: str = _key(
        "accept_mechanisms",
        "population",
        "which mechanisms the server accepts: population (each client's must be the population's for it: "
        "simulation) | declared (clients choose their own, up to max-record-epsilon: deployment)",
        Options("population", "declared"),
    )
    max_record_epsilon: float | None = _key(
        "max_record_epsilon",
        None,
        "accept-mechanisms = declared: the largest record ε the server accepts (a reply claiming more is rejected)",
        _POS,
        IsNone(),
    )
    check_alpha: float = _key(
        "check_alpha",
        0.01,
        "false-alarm probability per run of the server's frequency check (fedrr.frequency_check)",
        Interval(float, 0, 1, closed="neither"),
    )
    seed: int = _key("seed", 0, "run seed: client generators and the split derive from it", Interval(int, 0, 2**63 - 1))
    run_mode: str = _key(
        "run_mode",
        "node",
        "node: one Flower node per client; cohort: cohort_size clients per node",
        Options(*RUN_MODES),
    )
    cohort_size: int = _key("cohort_size", 1, "clients per node (cohort mode)", Interval(int, 1, 10**7))
    learners: tuple = _key(
        "learners",
        ("spread", "naive"),
        "learners trained on the pool (see fedrr.learners)",
        Satisfies(
            lambda v: isinstance(v, tuple) and len(v) > 0 and all(isinstance(n, str) and n for n in v),
            "a non-empty list of learner names",
        ),
    )
    protocol: str = _key(
        "protocol",
        "record",
        "record: clients release their records (the learners train on the pool); ldp-sgd: each releases one "
        "gradient (Wang et al. 2019 §V) at its record's ε",
        Options(*PROTOCOLS),
    )
    ldp_sgd_mechanism: str = _key(
        "ldp_sgd_mechanism",
        "piecewise",
        "ldp-sgd: per-coordinate mechanism, piecewise | duchi",
        Options("piecewise", "duchi"),
    )
    ldp_sgd_n_sampled: int = _key(
        "ldp_sgd_n_sampled", 0, "ldp-sgd: coordinates each client releases (0: max(1, ⌊ε/2.5⌋))", Interval(int, 0, None)
    )
    ldp_sgd_clip: float = _key("ldp_sgd_clip", 1.0, "ldp-sgd: gradient coordinates clipped to [-clip, clip]", _POS)
    ldp_sgd_groups: int = _key(
        "ldp_sgd_groups", 0, "ldp-sgd: model rounds (0: the group-size rule)", Interval(int, 0, None)
    )
    ldp_sgd_learning_rate: float = _key(
        "ldp_sgd_learning_rate", 0.0, "ldp-sgd: step size (0: the default rule)", _NONNEG
    )
    ldp_sgd_fallback: str = _key(
        "ldp_sgd_fallback",
        "check",
        "ldp-sgd: check (a check group; fall back to the intercept-only model) | none",
        Options("check", "none"),
    )
    spread_max_iter: int = _key(
        "spread_max_iter", 200, "most EM iterations of spread-EM (its CV fits: at most 40)", Interval(int, 1, 10**6)
    )
    encoding: str = _key(
        "encoding",
        "unit",
        "model input of a discrete state: unit s/(k-1) | index s | onehot",
        Options("unit", "index", "onehot"),
    )
    C: float = _key(
        "C", 1.0, "inverse L2 penalty (scikit-learn's C)", Interval(float, 0, None, closed="neither"), flwr="C"
    )
    wdro_max_iter: int = _key(
        "wdro_max_iter", 0, "iteration cap of W-DRO's conic solver (0: its default)", Interval(int, 0, 10**7)
    )
    executor: str = _key("executor", "threads", "spread-EM's E-step: serial | threads | ray", Options(*EXECUTORS))
    ray_address: str = _key("ray_address", "", "Ray cluster address ('' = local, or RAY_ADDRESS)", Text())
    wave_size: int = _key("wave_size", 256, "release queries in flight at once", Interval(int, 1, 10**6))
    min_valid: int = _key("min_valid", 20, "fewer valid releases and the run fails", Interval(int, 1, None))
    node_wait_timeout: float = _key("node_wait_timeout", 120.0, "seconds to wait for the nodes to register", _POS)
    reply_timeout: float = _key("reply_timeout", 600.0, "seconds to wait for all replies", _POS)
    results_dir: str = _key("results_dir", "results/federation", "where run-name/ is written", Text(nonempty=True))
    run_name: str = _key(
        "run_name",
        "",
        "results sub-folder ('' = a timestamp)",
        Satisfies(
            lambda v: isinstance(v, str) and set(v) <= _NAME_CHARS and ".." not in v,
            "a folder-safe name of letters, digits, '_', '.' or '-'",
        ),
    )
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
            cons = f.metadata.get("constraints")
            if cons:
                object.__setattr__(self, f.name, check_param(f.metadata["flwr"], getattr(self, f.name), cons))
        for a, b in (("feature_flip", "feature_epsilon"), ("label_flip", "label_epsilon")):
            if getattr(self, a) is not None and getattr(self, b) is not None:
                raise ValidationError(
                    _flwr_key(b),
                    f"{_flwr_key(a)} = {getattr(self, a)!r} and {_flwr_key(b)} = {getattr(self, b)!r} both set the "
                    "same budget: give one of them",
                )
        if self.budget_mix and (self.feature_flip is not None or self.feature_epsilon is not None):
            given = "feature-flip" if self.feature_flip is not None else "feature-epsilon"
            raise ValidationError(given, "budget-mix sets the feature budgets itself: leave this key out")
        if self.feature_flip is not None and self.mechanism != "rr":
            raise ValidationError(
                "feature-flip",
                f"is a flip probability of mechanism 'rr'; mechanism {self.mechanism!r} takes feature-epsilon",
            )
        if self.mechanism in WHOLE_RECORD_FAMILIES and self.population == "dataset":
            why = (
                "the label is released inside every (attribute, label) pair and has no budget of its own"
                if self.mechanism == "paired"
                else "the planner decides how the label is released (inside pairs, or at a share of feature-epsilon)"
            )
            for k in ("label_flip", "label_epsilon"):
                if getattr(self, k) is not None:
                    raise ValidationError(
                        _flwr_key(k),
                        f"must be unset with mechanism {self.mechanism!r}, got {getattr(self, k)!r}: {why}; "
                        "feature-epsilon is the ε of the whole release",
                    )
            if self.mechanism == "auto" and self.n_sampled:
                raise ValidationError(
                    "n-sampled",
                    f"must be 0 with mechanism 'auto', got {self.n_sampled}: the planner chooses how many "
                    "attributes each client releases",
                )
        if self.protocol == "ldp-sgd" and self.run_mode != "node":
            raise ValidationError("run-mode", "protocol 'ldp-sgd' needs one client per node (run-mode 'node')")
        if self.run_mode == "node" and self.cohort_size != 1:
            raise ValidationError("cohort-size", "must be 1 in run-mode 'node' (use run-mode 'cohort')")
        from .learners import names

        bad = [n for n in self.learners if n not in names(oracles=False)]
        if bad:
            raise ValidationError(
                "learners",
                f"unknown learner {bad[0]!r}; the server trains on releases only: {', '.join(names(oracles=False))}",
            )
        if self.mechanism == "gaussian" and self.gaussian_noise == "joint" and self.n_sampled:
            raise ValidationError(
                "n-sampled",
                f"must be 0 with gaussian-noise = 'joint', got {self.n_sampled}: the joint block releases all "
                "features as one field; attribute sampling needs gaussian-noise = 'per-feature'",
            )
        if (self.accept_mechanisms == "declared") != (self.max_record_epsilon is not None):
            raise ValidationError(
                "max-record-epsilon",
                "is required with accept-mechanisms = 'declared' (the largest record ε the server accepts) and "
                "only then",
            )
        self._check_population_keys()

    def _check_population_keys(self) -> None:
        """Every key is fedrr's or a parameter of the population's constructor; a custom population
        that sets its own budgets is not handed a budget it would ignore."""
        own = [f.metadata["flwr"] for f in dataclasses.fields(self) if f.metadata.get("flwr")]
        if self.population == "dataset":
            for k in self.extras:
                raise unknown_key(str(k), k, own, " (the built-in population takes fedrr's keys only)")
            return
        from .population import population_parameters

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
        if self.population != "dataset" or self.protocol != "record":
            return {}
        out = {}
        feature_unset = self.feature_flip is None and self.feature_epsilon is None
        if self.mechanism == "rr" and not self.budget_mix and feature_unset:
            out["feature-flip"] = DEFAULT_FEATURE_FLIP
        if self.label_flip is None and self.label_epsilon is None and self.mechanism not in WHOLE_RECORD_FAMILIES:
            out["label-flip"] = DEFAULT_LABEL_FLIP  # a paired or planned release has no label budget to default
        return out

    def budget_notes(self) -> list[str]:
        """One line per budget this run uses that was not asked for (empty when every budget was set)."""
        return [
            f"[fedrr] {k} not set: using the default {k} = {v} (set {k} or "
            f"{k.replace('flip', 'epsilon')} to choose the budget)"
            for k, v in self.default_budgets().items()
        ]

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

    def fit_options(self):
        """The learners' options of this run (``fedrr.learners.FitOptions``), with its executor."""
        from .learners import FitOptions
        from .parallel import make_executor

        return FitOptions(
            C=self.C,
            random_state=self.seed,
            executor=make_executor(self.executor, self.ray_address),
            spread_max_iter=self.spread_max_iter,
            wdro_max_iter=self.wdro_max_iter,
            encoding=self.encoding,
            ldp_sgd=self.ldp_sgd_params(),
        )

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


def _flwr_key(name: str) -> str:
    return name.replace("_", "-")


def _from_flwr_value(f: dataclasses.Field, key: str, value: Any) -> Any:
    if (f.name in BUDGET_KEYS or f.name == "max_record_epsilon") and isinstance(value, str) and value == UNSET:
        return None
    if f.name == "learners":
        if not isinstance(value, str):
            raise ValidationError(key, f"must be a comma list of learner names, got {value!r}")
        return tuple(n.strip() for n in value.split(",") if n.strip())
    if f.name == "budget_mix":
        return parse_budget_mix(key, value)
    cons = f.metadata["constraints"]
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
        return tuple((float(a), float(w)) for a, w in value)
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
