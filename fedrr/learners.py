"""The one learner registry: a learner's name -> how to build and fit its estimator, and one
``fit_and_score`` that sweeps, the federation's ServerApp and scripts all use.

Names follow one scheme (lower case, dashes). Learners fit on the releases only; ``oracle``
learners (``clean``, ``clean-nb``, ``spread-true``) see clean training data and sit outside the federation, as
references. Estimator classes are imported when a learner is built, so that importing this
module (the run config does, to check learner names) stays cheap for the ClientApp."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ._config_schema import BY_NAME
from .errors import FedrrError, ValidationError

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
    from .mechanisms import TripleRecordMechanism

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


# ---------------------------------------------------------------------------- classification
def _first(mechanism: Any) -> Any:
    return mechanism[0] if isinstance(mechanism, (list, tuple)) else mechanism


def _mechanisms(mechanism: Any) -> list:
    """The distinct mechanism objects of ``FitData.mechanism`` (one, or one per record)."""
    ms = mechanism if isinstance(mechanism, (list, tuple)) else [mechanism]
    return list({id(m): m for m in ms}.values())


def _has_paired(mechanism: Any) -> bool:
    from .mechanisms import is_paired

    return any(is_paired(m) for m in _mechanisms(mechanism))


def _refuse_paired(name: str, mechanism: Any, why: str) -> None:
    """A clear error for a learner that cannot use paired releases (instead of a crash inside it)."""
    if _has_paired(mechanism):
        raise ValidationError(
            "learners", f"{name!r} cannot learn from paired releases (mechanism 'paired', PairedRecordMechanism): {why}"
        )


def _one_mechanism(name: str, mechanism: Any) -> None:
    """A clear error for a learner that needs one record mechanism for every client (no budget mix)."""
    if isinstance(mechanism, (list, tuple)) and len(_mechanisms(mechanism)) > 1:
        raise ValidationError("learners", f"{name!r} needs one record mechanism for every client (no budget mix)")


#: why each learner that refuses paired releases does
_PAIRED_WHY = {
    "spread-true": "its prior is a per-feature table of a split release's features",
    "wdro": "its radius bounds the noise of released features, and a pair report is not one",
    "wdro-cv": "it fits on released features and labels, and a paired release has neither",
}


def _no_paired(name: str) -> Callable[[Any], None]:
    return partial(_refuse_paired, name, why=_PAIRED_WHY[name])


def _paired_only(name: str, mechanism: Any) -> None:
    """A learner that reads one paired mechanism's pair tables (``ldp-nb-ldprecover``): paired releases,
    one mechanism for every client."""
    _one_mechanism(name, mechanism)
    if not _has_paired(mechanism):
        raise ValidationError(
            "learners", f"{name!r} needs paired releases (PairedRecordMechanism): it recovers pair tables"
        )


def _paired_one(name: str, mechanism: Any) -> None:
    """Paired releases read by one paired mechanism's tables (``naive``, ``majority``): one for every client."""
    if _has_paired(mechanism) and isinstance(mechanism, (list, tuple)):
        if len({repr(m.to_spec()) for m in _mechanisms(mechanism)}) > 1:
            raise ValidationError(
                "learners", f"{name!r} on paired releases (PairedRecordMechanism) needs one mechanism for every client"
            )


def record_domain(mechanism: Any) -> Any:
    """``mechanism`` (one, or a list) with every record mechanism replaced by its ``domain_record()``
    (shared objects kept shared; a split record mechanism is its own): for code that needs only the
    records' clean domain (the ``clean`` oracle's encoding, LDP-SGD's model in sweeps and in its federation)."""
    made: dict[int, Any] = {}

    def one(m):
        if id(m) not in made:
            made[id(m)] = m.domain_record()
        return made[id(m)]

    return [one(m) for m in mechanism] if isinstance(mechanism, (list, tuple)) else one(mechanism)


def decode_paired(X: Any, mechanism: Any) -> tuple[np.ndarray, np.ndarray]:
    """Paired releases read as clean records (the ``naive`` learner): each pair report's point guess
    v̂ = argmax_v P(report | v) (``decode``; the report itself for randomised response, ties to the
    lowest value for OUE and OLH) gives x̂_j = v̂ // C and ŷ = v̂ mod C; a triple report's gives both
    of its attributes and the label. Returns (X̂ (n, F) with NaN
    where no pair was released, ŷ (n,) int: the label guess of the row's lowest released attribute)."""
    from .estimators.spread import group_records
    from .mechanisms import TripleRecordMechanism

    X = np.asarray(X, dtype=float)
    out, y = np.full(X.shape, np.nan), np.full(X.shape[0], -1, dtype=np.int64)
    for pm, rows in group_records(mechanism, X.shape[0]):
        if not pm.label_in_pairs:
            raise ValidationError("mechanism", "decode_paired takes paired mechanisms only (no mix with split ones)")
        Xg, _ = pm.validate_release(X[rows])
        released = ~np.isnan(Xg)
        if isinstance(pm, TripleRecordMechanism):  # v̂ = (x̂_j·k_k + x̂_k)·C + ŷ, in both columns
            for (j, k), o in zip(pm.pairs, pm.oracles):
                r = np.flatnonzero(released[:, j] & released[:, k])
                if r.size:
                    v = o.decode(Xg[r, j])
                    out[rows[r], j] = v // (pm.n_states[k] * pm.n_classes)
                    out[rows[r], k] = (v // pm.n_classes) % pm.n_states[k]
                    y[rows[r]] = v % pm.n_classes
            continue
        for j in range(pm.n_features - 1, -1, -1):  # last write wins: the lowest released attribute's label
            r = np.flatnonzero(released[:, j])
            if r.size:
                v = pm.oracles[j].decode(Xg[r, j])
                out[rows[r], j] = v // pm.n_classes
                y[rows[r]] = v % pm.n_classes
    return out, y


def release_prior(mechanism: Any) -> str:
    """The spread learners' prior: the estimators' ``prior="auto"`` (``auto_prior``), resolved."""
    from .estimators.spread import auto_prior

    return auto_prior(mechanism)


@_learner(
    "classification",
    "spread",
    "spread-EM (Barber 2020 §5), prior learned from the releases (naive Bayes's joint when records "
    "release sampled attributes or one pair, a latent-class mixture when they release two or more pairs); "
    "C and the prior's smoothing chosen by cross-validation on the "
    "held-out noisy likelihood; on releases with a label of their own a fallback to the intercept-only model "
    "when the held-out releases do not support the model (paired releases keep it and report the test); "
    "triple releases: rows of the Chow-Liu tree of their tables reweighted to every pair's table (prior "
    "'pairwise'), the direct solver",
    triples=True,
)
def _spread(d: FitData, o: FitOptions, **params):
    from .estimators import SpreadLogisticRegressionCV

    Cs = tuple(sorted({0.01, 0.1, 1.0, 10.0, float(o.C)}))
    params = {"prior": release_prior(d.mechanism)} | params
    est = SpreadLogisticRegressionCV(
        Cs=Cs,
        executor=o.executor,
        random_state=o.random_state,
        max_iter=o.spread_max_iter,
        cv_max_iter=min(40, o.spread_max_iter),  # spread_max_iter bounds every EM run, the selection fits too
        encoding=o.encoding,
        solver=o.spread_solver,
        **params,
    )
    return est.fit(d.X, d.y, mechanism=d.mechanism)


@_learner(
    "classification",
    "spread-robust",
    "spread with the fake-client defence robust='margins': for an attribute whose table's class margin disagrees "
    "with the others' (attribute sampling; ldp-nb-robust's test), the fewest records whose reports carry the excess "
    "are dropped before the fit",
    accepts=partial(_one_mechanism, "spread-robust"),
)
def _spread_robust(d: FitData, o: FitOptions):
    return _spread(d, o, robust="margins")


@_learner(
    "classification",
    "spread-public",
    "spread with a prior of public clean rows (the population's public sample: population.public_table or "
    "public_rows; EmpiricalPrior, Barber §5.2) smoothed by public_smoothing pseudo-rows of naive Bayes's joint "
    "of the releases: given the attributes' joint, one pair per person identifies logistic regression",
    triples=True,
)
def _spread_public(d: FitData, o: FitOptions):
    from .mechanisms import EmpiricalPrior

    if d.public_X is None:
        raise ValidationError(
            "learners", "'spread-public' needs a public sample: set population.public_table or public_rows"
        )
    return _spread(d, o, prior=EmpiricalPrior(d.public_X, smoothing=o.public_smoothing))


def _plain(d: FitData, o: FitOptions, **kw):
    """SpreadLogisticRegression at the configured C, EM budget and encoding (``kw`` overrides), fitted."""
    from .estimators import SpreadLogisticRegression

    kw = {"C": o.C, "executor": o.executor, "random_state": o.random_state, "max_iter": o.spread_max_iter} | kw
    return SpreadLogisticRegression(**{"encoding": o.encoding} | kw).fit(d.X, d.y, mechanism=d.mechanism)


@_learner(
    "classification",
    "spread-plain",
    "spread-EM at the configured C, prior as for spread, no selection or fallback",
    triples=True,
)
def _spread_plain(d: FitData, o: FitOptions):
    return _plain(d, o, prior=release_prior(d.mechanism))


@_learner("classification", "spread-flat", "spread-EM with a flat input prior", triples=True)
def _spread_flat(d: FitData, o: FitOptions):
    return _plain(d, o, prior="flat")


@_learner("classification", "spread-is", "spread-EM with Barber's importance-sampling E-step (§5.1), for reproduction")
def _spread_is(d: FitData, o: FitOptions):
    """Barber (2020) §5.1 as printed: the E-step draws S = 10 samples per record from the prior and
    weights them by the likelihood of the release (self-normalised importance sampling), prior
    learned (factorised), unit encoding. The paper's own variant, kept to compare with; ``spread``
    (the exact-posterior MCMC E-step) is the consistent one."""
    return _plain(d, o, prior="learned", e_step="importance", encoding="unit")


@_learner(
    "classification",
    "spread-true",
    "spread-EM with the clean records' own prior (oracle)",
    oracle=True,
    accepts=_no_paired("spread-true"),
)
def _spread_true(d: FitData, o: FitOptions):
    _no_paired("spread-true")(d.mechanism)
    mechs = d.mechanism if isinstance(d.mechanism, (list, tuple)) else [d.mechanism]
    ks = {getattr(f.mechanism, "k", None) for m in {id(m): m for m in mechs}.values() for f in m.fields}
    if None in ks or len(ks) != 1:
        raise ValidationError("learners", "'spread-true' needs discrete features with one number of states")
    k = ks.pop()
    Xc = np.asarray(d.clean_X)
    counts = np.stack([np.bincount(np.asarray(Xc[:, j], int), minlength=k) for j in range(Xc.shape[1])]) + 1e-3
    return _plain(d, o, prior=counts / counts.sum(axis=1, keepdims=True))


@_learner(
    "classification",
    "naive",
    "logistic regression on the releases as if they were clean (Barber eq 34)",
    accepts=partial(_paired_one, "naive"),
    triples=True,
)
def _naive(d: FitData, o: FitOptions):
    from .estimators import NaiveLogisticRegression

    return NaiveLogisticRegression(C=o.C, encoding=o.encoding).fit(*_naive_data(d))


def _naive_data(d: FitData) -> tuple:
    """(X, y, mechanism=...) for the naive learners: the releases; paired ones read as clean records
    through ``decode_paired`` (the pair reports' point guesses), on their clean domain."""
    if not _has_paired(d.mechanism):
        return d.X, d.y, d.mechanism
    _paired_one("naive", d.mechanism)
    Xd, yd = decode_paired(d.X, d.mechanism)
    return Xd, yd, _first(d.mechanism).domain_record()


@_learner(
    "classification",
    "naive-cv",
    "naive logistic regression with C tuned by 5-fold CV on the releases",
    accepts=partial(_paired_one, "naive"),
    triples=True,
)
def _naive_cv(d: FitData, o: FitOptions):
    from .estimators import NaiveLogisticRegression

    return NaiveLogisticRegression(C=o.C, cv=5, encoding=o.encoding).fit(*_naive_data(d))


@_learner(
    "classification",
    "wdro",
    "Wasserstein-DRO logistic regression, radius from the LDP noise (Farokhi 2020)",
    accepts=_no_paired("wdro"),
)
def _wdro(d: FitData, o: FitOptions):
    from .estimators import WassersteinDROLogisticRegression, noise_radius
    from .mechanisms import RecordMechanism

    _no_paired("wdro")(d.mechanism)
    mechs = d.mechanism if isinstance(d.mechanism, (list, tuple)) else [d.mechanism] * len(d.y)
    radii: dict[int, float] = {}
    for m in mechs:  # ρ = √E‖w‖²: the root mean square over records of each one's own feature noise
        if id(m) not in radii:
            spec = m.to_spec()
            spec["label"] = None
            radii[id(m)] = noise_radius(RecordMechanism.from_spec(spec), d.X.shape[1])
    rho = math.sqrt(float(np.mean([radii[id(m)] ** 2 for m in mechs])))
    opts = {"max_iter": int(o.wdro_max_iter)} if o.wdro_max_iter else None
    return WassersteinDROLogisticRegression(rho=rho, solver_options=opts).fit(np.asarray(d.X, float), d.y)


@_learner(
    "classification",
    "wdro-cv",
    "Wasserstein-DRO logistic regression, radius by 5-fold CV on the releases",
    accepts=_no_paired("wdro-cv"),
)
def _wdro_cv(d: FitData, o: FitOptions):
    from .estimators import WassersteinDROLogisticRegressionCV

    _no_paired("wdro-cv")(d.mechanism)
    ms = d.mechanism if isinstance(d.mechanism, (list, tuple)) else [d.mechanism]
    labels = list({id(m): getattr(m, "label", None) for m in ms}.values())
    # the labels' mechanism when every record shares one (mixed label budgets: labels as they are)
    label = labels[0] if len({repr(lab and lab.to_spec()) for lab in labels}) == 1 else None
    opts = {"max_iter": int(o.wdro_max_iter)} if o.wdro_max_iter else None
    label = label if getattr(label, "k", 0) == 2 else None
    return WassersteinDROLogisticRegressionCV(
        label_mechanism=label, executor=o.executor, random_state=o.random_state, solver_options=opts
    ).fit(np.asarray(d.X, float), d.y)


@_learner(
    "classification",
    "ldp-sgd",
    "LDP-SGD (Wang et al. 2019 §V): the same clients each release one clipped gradient instead of their record, "
    "at their record's ε — simulated from their records",
    own_protocol=True,
    triples=True,
)
def _ldp_sgd(d: FitData, o: FitOptions):
    """Not an oracle: the protocol itself (the clients' side, ``GradientClients``, holds their records
    and releases one gradient each; the server's, ``LDPSGDClassifier``, sees releases only), but
    simulating it needs the records."""
    from .estimators import LDPSGDClassifier, ldp_sgd_design
    from .gradient_release import GradientClients

    if d.clean_X is None or d.clean_y is None or d.client_id is None:
        raise ValidationError(
            "learners",
            "'ldp-sgd' releases gradients, not records: it needs the clients' records to simulate them (a sweep "
            "cell), or a federation with protocol 'ldp-sgd'",
        )
    mechs = list(d.mechanism) if isinstance(d.mechanism, (list, tuple)) else [d.mechanism] * len(d.clean_y)
    n_states, n_classes = ldp_sgd_design(record_domain(mechs[0]))  # a paired record: its clean domain
    eps = [m.epsilon for m in mechs]  # each client's ε = its record's ε, by the mechanism's own accounting
    clients = GradientClients(
        d.clean_X, d.clean_y, eps, client_ids=d.client_id, classes=np.arange(n_classes), seed=o.random_state
    )
    est = LDPSGDClassifier(**{"C": o.C, **o.ldp_sgd}, n_states=n_states, random_state=o.random_state)
    return est.fit(clients)


@_learner(
    "classification",
    "clean",
    "logistic regression on the clean records of the same clients (oracle)",
    oracle=True,
    triples=True,
)
def _clean(d: FitData, o: FitOptions):
    from .estimators import NaiveLogisticRegression

    return NaiveLogisticRegression(C=o.C, encoding=o.encoding, clean=True).fit(
        d.clean_X,
        d.clean_y,
        mechanism=record_domain(_first(d.mechanism)),  # only the records' domain is used
    )


@_learner(
    "classification",
    "clean-nb",
    "categorical naive Bayes on the clean records of the same clients (oracle): the ceiling of every "
    "naive-Bayes learner",
    oracle=True,
    triples=True,
)
def _clean_nb(d: FitData, o: FitOptions):
    """sklearn's CategoricalNB (Laplace smoothing, α = 1) on the clean discrete attributes, each with the
    k_j states of the records' domain (a state no training record has still gets its smoothed share)."""
    from sklearn.naive_bayes import CategoricalNB

    domain = record_domain(_first(d.mechanism))
    cols = {c: getattr(f.mechanism, "k", None) for f in getattr(domain, "fields", ()) for c in f.columns}
    ks = [cols[c] for c in sorted(cols)]
    if not ks or None in ks:
        raise ValidationError("learners", "'clean-nb' needs discrete features (every field with k states)")
    X = np.asarray(d.clean_X)
    if X.ndim != 2 or X.shape[1] != len(ks):
        raise ValidationError("clean_X", f"must have shape (n_records, {len(ks)}) to match the mechanism's columns")
    return CategoricalNB(alpha=1.0, min_categories=np.asarray(ks)).fit(X.astype(np.int64), np.asarray(d.clean_y))


@_learner(
    "classification",
    "majority",
    "the majority class of the label frequencies debiased from the releases",
    accepts=partial(_paired_one, "majority"),
    triples=True,
)
def _majority(d: FitData, o: FitOptions):
    from .estimators import MajorityClassifier

    if not _has_paired(d.mechanism):
        return MajorityClassifier().fit(d.X, d.y, mechanism=d.mechanism)
    return _paired_majority(d)


def _paired_majority(d: FitData):
    """The majority class of paired releases: the class prior of LDP naive Bayes on the pairs (the
    maximum-likelihood label frequencies, debiased through the pair oracles), as a fitted
    ``MajorityClassifier`` (which takes split releases only)."""
    from .estimators import LDPNaiveBayes, MajorityClassifier

    _paired_one("majority", d.mechanism)
    mechanism = _first(d.mechanism)  # one paired mechanism for every client (equal ones, if a list)
    nb = LDPNaiveBayes().fit(d.X, d.y, mechanism=mechanism)
    est = MajorityClassifier(mechanism=mechanism)
    est.classes_, est.class_prior_ = np.asarray(nb.classes_), np.asarray(nb.class_prior_, float)
    est.n_features_in_ = np.shape(d.X)[1]
    return est


def _ldp_nb_variant(name: str, params: dict, d: FitData, o: FitOptions):
    """``LDPNaiveBayes(**params)``: on a budget mix its groups pooled by inverse variance
    (``_naive_bayes_mix``), except the defence's variant, which needs one record mechanism."""
    from .estimators import LDPNaiveBayes

    if params.get("robust", "none") != "none":  # the defence compares one mechanism's tables
        _one_mechanism(name, d.mechanism)
        return LDPNaiveBayes(**params).fit(d.X, d.y, mechanism=_first(d.mechanism))
    return LDPNaiveBayes(**params).fit(d.X, d.y, mechanism=d.mechanism)  # a budget mix: pooled groups


# the LDP naive Bayes learners: one LDPNaiveBayes each, with its parameters
for _name, _params, _doc in (
    (
        "ldp-nb",
        {},
        "LDP naive Bayes from debiased (attribute, label) pair frequencies (Yilmaz et al. 2019): maximum-likelihood "
        "tables on split releases, clipped debiased tables on paired ones (the published protocol); on triple "
        "releases each pair table is the mean of the triples' debiased margins",
    ),
    (
        "ldp-nb-normsub",
        {"method": "projection"},
        "ldp-nb with Norm-Sub consistency (Wang et al. 2020): each debiased table's negative cells to 0, the same "
        "amount taken off the others so that it sums to 1 (the Euclidean projection onto the simplex), no likelihood "
        "fit",
    ),
    (
        "ldp-nb-robust",
        {"robust": "margins"},
        "ldp-nb with the fake-client defence robust='margins': for an attribute whose table's class margin disagrees "
        "with the others' (attribute sampling), the fewest reports that carry the excess are trimmed from its table",
    ),
    (
        "ldp-nb-ldprecover",
        {"robust": "ldprecover"},
        "ldp-nb with LDPRecover (Sun et al., ICDE 2024) on each pair table, for comparison with ldp-nb-robust: "
        "(1 + η) f - η f_Y, the pair oracle's malicious mass spread over the positive cells (η from the sampling "
        "counts), projected onto the simplex; paired releases only",
    ),
):
    _accepts = {"margins": _one_mechanism, "ldprecover": _paired_only}.get(_params.get("robust", "none"))
    _triples = _params.get("robust", "none") == "none"  # the defences read pair reports
    _learner("classification", _name, _doc, accepts=partial(_accepts, _name) if _accepts else None, triples=_triples)(
        partial(_ldp_nb_variant, _name, _params)
    )
del _name, _params, _doc, _accepts


# -------------------------------------------------------------------------------- regression
@_learner("regression", "ls", "least squares on the noisy inputs (= W-DRO with ρ = 0)")
def _ls(d: FitData, o: FitOptions):
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit(d.X, d.y)


@_learner("regression", "ridge-cv", "ridge, α tuned by leave-one-out CV on the noisy data")
def _ridge_cv(d: FitData, o: FitOptions):
    from sklearn.linear_model import RidgeCV

    return RidgeCV(alphas=np.logspace(-4, 6, 21)).fit(d.X, d.y)


@_learner("regression", "wdro", "Wasserstein-DRO regression, Lipschitz regulariser (Farokhi 2020 eq 8)")
def _wdro_reg(d: FitData, o: FitOptions):
    from .estimators import WassersteinDRORegression

    # W-DRO's Lipschitz constant needs target bounds: [0, 1] for clean targets; Laplace-noised
    # targets leave [0, 1], so their observed range is the bound (ρ still covers the inputs' noise only)
    bounds = dict(y_lower=None, y_upper=None) if d.label_noised else dict(y_lower=0.0, y_upper=1.0)
    return WassersteinDRORegression(rho="auto", mechanism=d.feature_mechanism, **bounds).fit(d.X, d.y)


@_learner("regression", "gauss-dro", "Gaussian-optimal W-DRO linear regression (Farokhi 2020 Thm 6)")
def _gauss_dro(d: FitData, o: FitOptions):
    from .estimators import GaussianDROLinearRegression

    if getattr(d.feature_mechanism, "kind", None) != "gaussian":
        raise ValidationError(
            "learners", "'gauss-dro' is the Gaussian-optimal W-DRO (Thm 6): it needs mechanism 'gaussian'"
        )
    return GaussianDROLinearRegression(rho="auto", mechanism=d.feature_mechanism).fit(d.X, d.y)


@_learner("regression", "mean", "predict the training mean of the (released) target")
def _mean(d: FitData, o: FitOptions):
    from sklearn.dummy import DummyRegressor

    return DummyRegressor(strategy="mean").fit(d.X, d.y)


@_learner("regression", "clean", "least squares on the clean records of the same clients (oracle)", oracle=True)
def _clean_reg(d: FitData, o: FitOptions):
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit(d.clean_X, d.clean_y)


# ------------------------------------------------------------------------------ fit and score
@dataclass
class Scored:
    """One learner's outcome: ``entry`` is what results files hold (metric, seconds, n_iter,
    diagnostics, or error); ``estimator`` the fitted object (None after an error)."""

    entry: dict[str, Any] = field(default_factory=dict)
    estimator: Any = None


#: errors one learner may raise without losing the others' results
LEARNER_ERRORS = (FedrrError, ValueError, ArithmeticError)


def classification_scores(est: Any, X: np.ndarray, y: np.ndarray) -> dict:
    """Accuracy, balanced accuracy and AUC (two classes: of p̂(1 | x); more: one-vs-rest, macro) on a
    clean test set; AUC is None when the estimator gives no probabilities or one class is absent."""
    from sklearn.metrics import balanced_accuracy_score, roc_auc_score

    out = {"accuracy": float(est.score(X, y)), "balanced_accuracy": float(balanced_accuracy_score(y, est.predict(X)))}
    out["auc"] = None
    if hasattr(est, "predict_proba") and len(np.unique(y)) > 1:
        P = est.predict_proba(X)
        if P.shape[1] == len(est.classes_) and set(np.unique(y)) <= set(est.classes_.tolist()):
            pos = P[:, 1] if P.shape[1] == 2 else P
            out["auc"] = float(
                roc_auc_score(y, pos, multi_class="ovr", labels=est.classes_ if P.shape[1] > 2 else None)
            )
    return out


def fallback_note(entry: Mapping[str, Any]) -> str:
    """For a learner's results entry (``Scored.entry``): ``"fell back (reason, p = …)"`` when its
    estimator fell back to the intercept-only model (``fallback_``), else "". The reason is short
    (the whole of it is ``fallback_reason_``, in the entry's diagnostics); p is the p-value the
    fallback decision was taken on (spread: ``p_value_``; LDP-SGD: its check group's one-sided z-test,
    gain against Z_CHECK standard errors), left out when the decision had none (an a-priori fallback)."""
    d = entry.get("diagnostics") or {}
    if not d.get("fallback"):
        return ""
    gain, check, p = d.get("heldout_gain") or {}, d.get("check"), d.get("p_value")
    if gain.get("statistic") == "independence":
        why = "no label-attribute association in the pairs"
    elif gain:
        why = "no held-out gain over the intercept-only model"
    elif check:
        why = "no accuracy gain on the check group"
        z = check["gain"] / check["se"] if check.get("se") else 0.0
        p = 0.5 * math.erfc(z / math.sqrt(2.0))  # one-sided normal p of the check's z
    else:
        why = str(d.get("fallback_reason") or "no model supported").split(":")[0]
    return f"fell back ({why}, p = {p:.3g})" if p is not None else f"fell back ({why})"


def score_text(entry: Mapping[str, Any], metric: str = "accuracy") -> str:
    """A learner's score as a live line shows it: ``"accuracy 0.8900"``, with ``fallback_note``."""
    note = fallback_note(entry)
    return f"{metric} {entry.get(metric, float('nan')):.4f}" + (f", {note}" if note else "")


def fit_and_score(
    name: str,
    data: FitData,
    test: tuple[np.ndarray, np.ndarray] | None,
    options: FitOptions = FitOptions(),
    *,
    task: str = "classification",
) -> Scored:
    """Fit learner ``name`` and score it on the clean ``test`` set (``classification_scores``, or MSE
    for regression).
    A learner that fails is reported as ``{"error": ...}``, never raised: a run keeps the others."""
    learner = get(name, task)
    out = Scored()
    t0 = time.perf_counter()
    try:
        est = learner.fit(data, options)
        out.entry["seconds"] = time.perf_counter() - t0
        if hasattr(est, "n_iter_"):
            out.entry["n_iter"] = int(np.max(est.n_iter_))
        if hasattr(est, "rho_"):
            out.entry["rho"] = float(est.rho_)
        if callable(getattr(est, "diagnostics", None)):  # spread-EM: did its chains agree, did it fall back
            out.entry["diagnostics"] = est.diagnostics()
        if test is not None:
            Xte, yte = test
            if task == "regression":
                out.entry["mse"] = float(np.mean((est.predict(Xte) - yte) ** 2))
            else:
                out.entry.update(classification_scores(est, Xte, yte))
        out.estimator = est
    except LEARNER_ERRORS as exc:
        out.entry["error"] = f"{type(exc).__name__}: {exc}"
    return out
