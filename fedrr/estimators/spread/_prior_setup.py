"""Which prior a spread fit starts from, and the keys under which a cross-validation's fits share
one: the prior that ``prior="auto"`` resolves to (``auto_prior``), the priors fitted to the releases
themselves (naive Bayes, the latent-class model, the trees: once per CV on the same releases), the
learned prior's center (once per fold) and the given or public-rows ones."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...mechanisms import EmpiricalPrior, is_paired
from .._naive_bayes_releases import check_naive_bayes_mechanism
from ._design import ColumnLayout
from ._direct import prior_draws
from ._pair_reports import is_triple
from ._priors._factorised import SpreadPrior, flat_prior, given_prior, marginal_mle_prior
from ._priors._joint import joint_prior
from ._priors._mixture import latent_class_em, latent_class_prior, naive_bayes_prior
from ._priors._pairwise import pairwise_prior
from ._priors._tree import naive_bayes_pair_tables, tree_prior, triple_naive_bayes_prior

#: the priors a fit on triple releases takes by name (``check_triple_prior``)
TRIPLE_PRIORS = ("naive-bayes", "tree", "class-tree", "pairwise", "flat")
#: the priors fitted to the released records themselves (``initial_prior``: not by ``fit_pool``)
FITTED_PRIORS = ("naive-bayes", "latent-class", "tree", "class-tree", "pairwise")
#: the priors fitted to the tables of pairs of attributes, which releases of two attributes per record show
PAIR_TABLE_PRIORS = ("tree", "class-tree", "pairwise")


def initial_prior(
    layout: ColumnLayout,
    pools,
    p: dict,
    n: int,
    releases=None,
    seed: int = 0,
    memo: dict | None = None,
    units: dict | None = None,
) -> SpreadPrior:
    """The prior EM starts from; ``memo`` (a CV's, or None) shares the latent-class fit and the
    learned prior's center between fits on the same releases; ``units``: the releases'
    ``release_units``, for a tree, and for naive Bayes on triples."""
    if isinstance(p["prior"], str) and p["prior"] in FITTED_PRIORS:  # (X, y, groups)
        return fitted_prior(layout, p, releases, seed, memo, units)
    if isinstance(p["prior"], str) and p["prior"] == "flat":
        return flat_prior(layout, p["numeric_prior"], 1 if p["numeric_prior"] == "histogram" else p["n_bins"])
    if isinstance(p["prior"], str):  # learned: start at, and pull toward, the debiased marginals
        key = pools_key(pools, p["numeric_prior"], p["n_bins"]) if memo is not None else None
        hit = memo.get(key) if memo is not None else None
        # the entry holds the mechanisms it was computed for: an id in the key cannot be reused
        if hit is not None and all(a is b for a, b in zip(hit[0], (rm for rm, _ in pools))):
            center = hit[1]
        else:
            center = marginal_mle_prior(layout, pools, p["numeric_prior"], p["n_bins"])
            if memo is not None:
                memo[key] = (tuple(rm for rm, _ in pools), center)
        return center.smoothed(center, p["prior_strength"] * n)
    if isinstance(p["prior"], EmpiricalPrior):  # a joint prior: the public rows' distribution
        return joint_prior(layout, smoothed_rows(p["prior"], layout, releases, seed, units))
    return given_prior(layout, p["prior"])


def check_triple_prior(prior) -> None:
    """A fit on triple releases takes a prior of ``TRIPLE_PRIORS`` or a fixed one (given, or public
    rows: the direct solver holds the prior fixed); a ValidationError naming ``prior`` otherwise."""
    if isinstance(prior, str) and prior not in TRIPLE_PRIORS:
        raise ValidationError("prior", f"{prior!r} is not taken on triple releases: one of {TRIPLE_PRIORS} is")


def fitted_prior(layout: ColumnLayout, p: dict, releases, seed: int, memo: dict | None, units: dict | None):
    """One of ``FITTED_PRIORS``, fitted on the releases (X, y, groups); ``initial_prior``'s arguments."""
    if releases is None:  # fit_pool streams the pool: it has none
        msg = f"'{p['prior']}' is fitted on the released records: use fit, not fit_pool"
        raise ValidationError("prior", msg)
    triple = is_triple(releases[2][0][0])
    if p["prior"] == "naive-bayes":
        return triple_naive_bayes_prior(layout, units) if triple else naive_bayes_prior(*releases, layout)
    if p["prior"] in PAIR_TABLE_PRIORS:  # one fit for every fit of a CV on the same releases
        pairwise = p["prior"] == "pairwise"
        if pairwise and memo is not None:  # its draws: one seed for the whole CV
            seed = memo.setdefault(("pairwise", "seed"), seed)
        key = (p["prior"], releases_key(*releases), seed if pairwise else None)
        if memo is not None and key in memo:
            return memo[key]
        nb = triple_naive_bayes_prior(layout, units) if triple else naive_bayes_prior(*releases, layout)
        nb = naive_bayes_pair_tables(nb, units)
        if pairwise:
            prior = pairwise_prior(layout, units, nb, seed)
        else:
            prior = tree_prior(layout, units, nb, by_class=p["prior"] == "class-tree")
        if memo is not None:
            memo[key] = prior
        return prior
    if memo is not None:  # one start for the whole CV, whatever random_state draws per fit
        seed = memo.setdefault(("latent-class", "seed"), seed)
    key = ("latent-class", releases_key(*releases), p["n_latent_classes"], seed)
    if memo is not None and key in memo:
        return memo[key]
    prior = latent_class_prior(layout, latent_class_em(*releases, layout, p["n_latent_classes"], seed))
    if memo is not None:
        memo[key] = prior
    return prior


def smoothed_rows(
    prior: EmpiricalPrior, layout: ColumnLayout, releases, seed: int, units: dict | None = None
) -> EmpiricalPrior:
    """``prior`` with its ``smoothing`` pseudo-rows: α rows drawn from the naive Bayes of the releases
    (X, y, groups) with ``seed`` (of triples: ``triple_naive_bayes_prior`` of their ``units``), after
    its M rows (``EmpiricalPrior``); itself when α is 0."""
    if prior.smoothing == 0:
        return prior
    if releases is None:
        raise ValidationError("prior.smoothing", "draws from the releases' naive Bayes: use fit, not fit_pool")
    try:
        triple = is_triple(releases[2][0][0])
        nb = triple_naive_bayes_prior(layout, units) if triple else naive_bayes_prior(*releases, layout)
    except ValidationError as e:
        raise ValidationError("prior.smoothing", f"needs naive Bayes's joint of the releases: {e.message}") from None
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x5EED, prior.smoothing)))
    pseudo = prior_draws(nb, np.asarray(layout.k, np.int64), prior.smoothing, rng)[0]
    return EmpiricalPrior(np.vstack([prior.rows, pseudo]))


def auto_prior(mechanism: Any) -> str:
    """``prior="auto"``: for triple releases "pairwise" (each record's triple identifies its pair of
    attributes' table with the label, and the pairwise prior fits every pair's: on Adult's validation
    split, through the CV, it was above the tree on accuracy in 18 of 22 fits and on balanced accuracy
    in every cell but ε 4's, results/adult_scale_designs/summary.md, "Twenty-first session"); for
    paired releases "latent-class" when each record releases two or more pairs (their co-occurrences identify it; the
    fit then keeps it only if the releases' held-out likelihood says so, ``choose_latent_class``) and
    "naive-bayes" when it releases one (it shows nothing of how attributes co-occur, so a latent-class
    fit beyond the label would be set by its start);
    "naive-bayes" for one mechanism whose records release sampled attributes through discrete
    oracles with a label (on Adult it lifts spread above LDP naive Bayes, docs/results.md); else
    "learned" (factorised; also for per-record mechanisms that differ, and for clean data)."""
    if isinstance(mechanism, (list, tuple, np.ndarray)):  # one mechanism for every record: as that one
        distinct = list({id(m): m for m in mechanism}.values())
        if distinct and all(is_triple(m) for m in distinct):  # a budget mix of triples: their tables alike
            return "pairwise"
        same = len(distinct) > 0 and all(hasattr(m, "to_spec") for m in distinct)
        if not same or len({repr(m.to_spec()) for m in distinct}) != 1:
            return "learned"
        mechanism = distinct[0]
    if mechanism is None:
        return "learned"
    if is_triple(mechanism):  # each record shows how its two attributes co-occur with the label
        return "pairwise"
    if is_paired(mechanism):  # a PairedView samples as its paired mechanism does
        return "latent-class" if mechanism.n_sampled >= 2 else "naive-bayes"
    if getattr(mechanism, "n_sampled", None) is None:
        return "learned"
    try:
        check_naive_bayes_mechanism(mechanism)
    except ValidationError:
        return "learned"
    return "naive-bayes"


def pools_key(pools, numeric_prior: str, n_bins: int) -> tuple:
    """What ``marginal_mle_prior`` depends on: each group's mechanism (the object: the key lives
    for one cross-validation, which holds them) and a digest of its releases."""
    return tuple(
        (id(rm), hashlib.blake2b(np.ascontiguousarray(X), digest_size=16).digest(), X.shape) for rm, X in pools
    ) + (numeric_prior, n_bins)


def releases_key(X: np.ndarray, y: np.ndarray, groups: list) -> tuple:
    """What ``latent_class_prior`` depends on, by content: the releases, the labels and each group's
    mechanism (its spec) and rows."""
    h = hashlib.blake2b(digest_size=16)
    for a in (X, y):
        h.update(np.ascontiguousarray(a).tobytes())
    for rm, rows in groups:
        h.update(repr(rm.to_spec()).encode())
        h.update(np.ascontiguousarray(rows).tobytes())
    return (h.digest(), X.shape)
