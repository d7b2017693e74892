"""The classification learners, registered in the order ``names()`` lists them: spread-EM's variants,
naive logistic regression, W-DRO, LDP-SGD, the clean oracles, majority and LDP naive Bayes."""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..errors import ValidationError
from ._accepts import (
    _first,
    _has_paired,
    _no_paired,
    _one_mechanism,
    _paired_one,
    _paired_only,
    decode_paired,
    record_domain,
    release_prior,
)
from ._registry import FitData, FitOptions, _learner


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
    from ..estimators import SpreadLogisticRegressionCV

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
    from ..mechanisms import EmpiricalPrior

    if d.public_X is None:
        raise ValidationError(
            "learners", "'spread-public' needs a public sample: set population.public_table or public_rows"
        )
    return _spread(d, o, prior=EmpiricalPrior(d.public_X, smoothing=o.public_smoothing))


def _plain(d: FitData, o: FitOptions, **kw):
    """SpreadLogisticRegression at the configured C, EM budget and encoding (``kw`` overrides), fitted."""
    from ..estimators import SpreadLogisticRegression

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
    from ..estimators import NaiveLogisticRegression

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
    from ..estimators import NaiveLogisticRegression

    return NaiveLogisticRegression(C=o.C, cv=5, encoding=o.encoding).fit(*_naive_data(d))


@_learner(
    "classification",
    "wdro",
    "Wasserstein-DRO logistic regression, radius from the LDP noise (Farokhi 2020)",
    accepts=_no_paired("wdro"),
)
def _wdro(d: FitData, o: FitOptions):
    from ..estimators import WassersteinDROLogisticRegression, noise_radius
    from ..mechanisms import RecordMechanism

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
    from ..estimators import WassersteinDROLogisticRegressionCV

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
    from ..estimators import LDPSGDClassifier, ldp_sgd_design
    from ..gradient_release import GradientClients

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
    from ..estimators import NaiveLogisticRegression

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
    from ..estimators import MajorityClassifier

    if not _has_paired(d.mechanism):
        return MajorityClassifier().fit(d.X, d.y, mechanism=d.mechanism)
    return _paired_majority(d)


def _paired_majority(d: FitData):
    """The majority class of paired releases: the class prior of LDP naive Bayes on the pairs (the
    maximum-likelihood label frequencies, debiased through the pair oracles), as a fitted
    ``MajorityClassifier`` (which takes split releases only)."""
    from ..estimators import LDPNaiveBayes, MajorityClassifier

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
    from ..estimators import LDPNaiveBayes

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
