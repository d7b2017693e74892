"""Naive Bayes fitted on locally private releases (Yilmaz, Al-Rubaie & Chang 2019, "Locally
differentially private naive Bayes classification", arXiv:1905.01039).

Each client releases its label and some attributes, each through a discrete frequency oracle
(``DiscreteMechanism``). For a client that released attribute j, û_j(x̃_j) ⊗ v̂(ỹ) — the outer
product of the two fields' unbiased one-hot estimates — is unbiased for the indicator of (x_j, c),
because the two noises are independent. Its mean over those clients estimates the joint frequency
table of (x_j, c); which clients released j must not depend on the data (uniform attribute
sampling), so they are an unbiased subsample. Each table is projected onto the simplex (or fitted
by maximum likelihood from the exact likelihood of the releases) and turned into p(x_j | c) with a
pseudo-count α per cell. Only the DiscreteMechanism contract is used (``unbiased_onehot``,
``log_likelihood_matrix``, ``validate_release``), so any frequency oracle works, whatever its release.

Paired releases (``PairedRecordMechanism``), the published protocol (Yilmaz et al. §4): each client
sent a sampled attribute with its label as one value v = x_j·C + y through one oracle, whose own
unbiased estimator (mean of ``unbiased_onehot`` over the n_j clients that sampled j, as (k_j, C)) is
unbiased for P(x_j = s, y = c). Class prior: the tables' class margins pooled over attributes
(n_j-weighted); p(x_j | c) = P̂(x_j, c) / P̂_j(c). The paper replaces negative estimated counts by a
small positive value before forming probabilities; ``method="clip"`` (the paired default) sets
negative cells to 0, renormalises, and adds α pseudo-counts per cell (α = 1: a negative count becomes
one pseudo-client). The paper's exact floor was not checked against its text; α is fedrr's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._params import Interval, Options, validate_estimator
from .._validation import as_array, as_state_array
from ..errors import ValidationError
from ..mechanisms import DiscreteMechanism, PairedRecordMechanism, TripleRecordMechanism
from ._frequencies import clip_table, project_to_simplex, simplex_mle
from ._ldprecover import recover_tables
from ._margin_defence import margin_consistency, margin_trim
from ._naive_bayes_mix import mechanism_groups, paired_mix_mle, paired_mix_tables, split_mix_tables
from ._naive_bayes_releases import MLE_CALLER as _MLE
from ._naive_bayes_releases import Releases, check_record, check_releases
from ._sklearn import class_labels, validate, warn_clean

METHODS = ("auto", "mle", "projection", "clip")
#: robust="margins": trim the reports that carry a rejected attribute's excess class margin (``margin_trim``);
#: spread's defence takes these
ROBUST = ("none", "margins")
#: LDPNaiveBayes's: also "ldprecover", LDPRecover on each pair table (``_ldprecover``; paired releases only)
NB_ROBUST = (*ROBUST, "ldprecover")
#: log of the smallest positive double: the floor for log-probabilities estimated as exactly 0
LOG_FLOOR = math.log(np.finfo(float).tiny)


# --------------------------------------------------------------------------- releases


def _unbiased(rel: Releases) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    V = rel.label.unbiased_onehot(rel.y)  # (n, C)
    tables = [m.unbiased_onehot(x).T @ V[r] / r.size for m, x, r in zip(rel.mechs, rel.values, rel.rows)]
    return tables, np.array([r.size for r in rel.rows]), V.mean(axis=0)


def joint_frequencies(X_tilde: Any, y_tilde: Any, mechanism: Any) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Unbiased (unprojected) estimates from releases: per attribute j the joint table (k_j, C) of
    (x_j, c) over the n_j clients that released j — split releases: the mean of û_j(x̃_j) ⊗ v̂(ỹ); paired
    releases: the mean of the pair oracle's unbiased one-hot of the pair report — the counts n_j (D,),
    and the class frequencies (C,): split, the mean of v̂(ỹ) over all clients; paired, the pair tables'
    class margins pooled over attributes (Σ_j n_j Σ_s P̂_j(s, c) / Σ_j n_j)."""
    if check_record(mechanism).label_in_pairs:
        return _paired_unbiased(check_paired_releases(X_tilde, y_tilde, mechanism))
    return _unbiased(check_releases(X_tilde, y_tilde, mechanism))


@dataclass(frozen=True)
class PairedReleases:
    """Validated paired releases: per attribute j its clients (``rows[j]``) and pair reports (``values[j]``)."""

    rows: list[np.ndarray]
    values: list[np.ndarray]
    mechanism: PairedRecordMechanism


def check_paired_releases(X_tilde: Any, y_tilde: Any, mechanism: PairedRecordMechanism) -> PairedReleases:
    """Validate paired releases (``PairedRecordMechanism.validate_release``); every attribute must have
    been sampled by at least one client."""
    X, _ = mechanism.validate_release(X_tilde, y_tilde)
    if X.shape[0] == 0:
        raise ValidationError("X_tilde", "needs at least one client")
    rows, values = [], []
    for j in range(mechanism.n_features):
        r = np.flatnonzero(~np.isnan(X[:, j]))
        if r.size == 0:
            raise ValidationError("X_tilde", f"column {j} is NaN for every client: no client released attribute {j}")
        rows.append(r)
        values.append(X[r, j])
    return PairedReleases(rows, values, mechanism)


def triple_pair_tables(mech: TripleRecordMechanism, X: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Validated triple releases ``X`` -> (per attribute j the mean over its partners of the unbiased
    margins Σ_t û_(s, t, c) of their triple reports (k_j, C), the people whose triple held j (F,)). An
    attribute no triple held is refused, naming ``X_tilde``."""
    sums = [np.zeros((k, mech.n_classes)) for k in mech.n_states]
    parts, n_released = np.zeros(mech.n_features), np.zeros(mech.n_features, np.int64)
    released = ~np.isnan(X)
    for (j, k), o in zip(mech.pairs, mech.oracles):
        rows = np.flatnonzero(released[:, j] & released[:, k])
        if rows.size == 0:
            continue
        reports, counts = np.unique(X[rows, j], return_counts=True)
        U = o.unbiased_onehot(reports).reshape(reports.size, mech.n_states[j], mech.n_states[k], mech.n_classes)
        U = np.tensordot(counts / rows.size, U, axes=1)  # (k_j, k_k, C): the triple table's unbiased estimate
        for a, margin in ((j, U.sum(axis=1)), (k, U.sum(axis=0))):
            sums[a] += margin
            parts[a] += 1
            n_released[a] += rows.size
    missing = np.flatnonzero(parts == 0)
    if missing.size:
        raise ValidationError("X_tilde", f"no client's triple holds attribute {int(missing[0])}")
    return [s / p for s, p in zip(sums, parts)], n_released


def _pooled_margin(tables: list[np.ndarray], n_released: np.ndarray) -> np.ndarray:
    """Σ_j n_j Σ_s T_j[s, c] / Σ_j n_j: the class frequencies from the pair tables' margins."""
    return sum(n * t.sum(axis=0) for t, n in zip(tables, n_released)) / float(n_released.sum())


def _paired_unbiased(rel: PairedReleases) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    m = rel.mechanism
    tables = [m.unbiased_pair_table(j, v).mean(axis=0) for j, v in enumerate(rel.values)]
    n_released = np.array([r.size for r in rel.rows])
    return tables, n_released, _pooled_margin(tables, n_released)


def paired_mle_tables(
    rel: PairedReleases, start: list[np.ndarray], *, tol: float, max_iter: int
) -> tuple[list[np.ndarray], int]:
    """Maximum-likelihood pair table per attribute from the exact likelihood P(report | x_j = s, y = c)
    of its pair reports (distinct reports grouped), starting halfway between ``start`` and uniform."""
    m, out, steps = rel.mechanism, [], 0
    with threadpool_limits(limits=1, user_api="blas"):
        for j, (v, p0) in enumerate(zip(rel.values, start)):
            uniq, counts = np.unique(v, return_counts=True)
            L = m.pair_log_likelihood(j, uniq).reshape(uniq.size, -1)
            p0 = 0.5 * p0.ravel() + 0.5 / p0.size
            p, it = simplex_mle(L, counts.astype(float), p0, tol=tol, max_iter=max_iter, caller=_MLE)
            out.append(p.reshape(m.n_states[j], m.n_classes))
            steps = max(steps, it)
    return out, steps


def _grouped(mech: DiscreteMechanism, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log p(x̃ | x = s) for each distinct release (u, k) and the index of each client's release."""
    uniq, inv = np.unique(values, return_inverse=True)
    return mech.log_likelihood_matrix(uniq), inv.reshape(-1)


def mle_tables(
    rel: Releases, start: list[np.ndarray], prior: np.ndarray, *, tol: float, max_iter: int
) -> tuple[list[np.ndarray], np.ndarray, int]:
    """Maximum-likelihood joint table of (x_j, c) per attribute from the exact likelihood
    p(x̃_j, ỹ | x_j, c) = p(x̃_j | x_j) p(ỹ | c) (distinct release pairs grouped), and the
    maximum-likelihood class frequencies from all labels; each starts halfway between the
    projection and uniform (strictly inside the simplex). Also returns the most Newton steps used."""
    Ly, iy = _grouped(rel.label, rel.y)
    C, out, steps = Ly.shape[1], [], 0
    with threadpool_limits(limits=1, user_api="blas"):  # tiny matrices: threaded BLAS was ~20x slower here
        for m, x, r, p0 in zip(rel.mechs, rel.values, rel.rows, start):
            Lx, ix = _grouped(m, x)
            pair, counts = np.unique(ix * Ly.shape[0] + iy[r], return_counts=True)
            a, b = np.divmod(pair, Ly.shape[0])
            L = (Lx[a][:, :, None] + Ly[b][:, None, :]).reshape(pair.size, -1)
            k = Lx.shape[1]
            p0 = 0.5 * p0.ravel() + 0.5 / (k * C)
            p, it = simplex_mle(L, counts.astype(float), p0, tol=tol, max_iter=max_iter, caller=_MLE)
            out.append(p.reshape(k, C))
            steps = max(steps, it)
        p, it = simplex_mle(
            Ly, np.bincount(iy).astype(float), 0.5 * prior + 0.5 / C, tol=tol, max_iter=max_iter, caller=_MLE
        )
    return out, p, max(steps, it)


# --------------------------------------------------------------------------- estimator


class LDPNaiveBayes(ClassifierMixin, BaseEstimator):
    """Categorical naive Bayes p(c) Π_j p(x_j | c) fitted on LDP releases (see the module docstring).

    ``fit(X_tilde, y_tilde, mechanism=RecordMechanism)``: X_tilde (n, D) holds each client's released
    attributes (NaN: not released), y_tilde its released label; every field is a discrete oracle.
    Without a mechanism, ``fit(X, y)`` is ordinary categorical naive Bayes on clean integer states
    (scikit-learn's CategoricalNB with the same smoothing). ``predict*`` take clean records (n, D).

    ``fit(X_tilde, y_tilde, mechanism=PairedRecordMechanism)`` fits on paired releases (y_tilde all NaN)
    by Yilmaz et al.'s protocol (module docstring).

    ``mechanism`` may be one per record: a budget mix, people who chose different budgets (all paired
    or all split, the same attributes and classes). Each mechanism's group is debiased as above and
    the groups are pooled cell by cell by inverse variance (``_naive_bayes_mix``; "mle" on paired
    releases maximises every group's reports' likelihood together; on split ones it is "projection").
    Not with robust="margins", whose test compares one mechanism's tables.

    method="auto" (default): "clip" for paired releases (the published protocol), "mle" for split ones.
    "projection": each debiased joint table is projected onto the simplex (Euclidean, Duchi et al.
    2008); "mle": the tables maximise the exact likelihood of the releases (``simplex_mle``, to a
    certified gap ``tol`` within ``max_iter`` Newton steps); "clip": negative debiased entries are set
    to 0 and each table renormalised (Yilmaz et al. §4). For paired releases the class prior is the
    fitted tables' class margin pooled over attributes (n_j-weighted); for split releases the label
    reports' own estimate. alpha: the
    pseudo-count added to every (state, class) cell, in units of one client:
    p(x_j | c) = (n_j p̂(x_j, c) + α) / (n_j p̂_j(c) + k_j α), p̂_j(c) = Σ_x p̂(x, c) the table's own
    class margin (so that each conditional sums to 1); the default α = 1 is Laplace smoothing, so
    the noiseless limit is exactly Laplace-smoothed naive Bayes, and it vanishes as n grows.
    alpha=0 is allowed: cells estimated as 0 get log-probability LOG_FLOOR (log of the smallest
    double) instead of −inf, so a class is only out-ranked by them, and a state estimated
    impossible under every class shifts all classes alike; a class with no mass in a table gets
    a uniform p(x_j | c). The class prior is not smoothed (as in CategoricalNB), only floored.

    robust="margins" (a defence against fake clients, ``fedrr.fake``; default "none"), detection
    and recovery kept apart: the test (``margin_consistency`` at level ``robust_alpha``) rejects the
    attributes whose table's class margin disagrees with the other tables'; the recovery
    (``margin_trim``) removes from each rejected table the fewest reports that bring its margin back
    to the others' median, and nothing else (issue 45: the former drop of the whole attribute let a
    handful of fakes discard all its honest reports). The tables are then estimated from the kept
    reports (the attribute still votes) and, when anything was trimmed, the class prior is the
    tables' pooled margin (n_j-weighted; for split releases too, instead of the label reports' own
    estimate, so the trimmed clients' labels do not count). It acts on attacks that put their crafted reports on
    one attribute more than on the others — the maximal-gain and output attacks, which release the
    target attribute at every fake client, push that table's class margin towards the target label.
    It does NOT defend: (i) releases without attribute sampling (every client releases every
    attribute: all tables share the fakes, their margins agree); (ii) fakes that release at the
    honest sampling rate ("output-sampled", "mga-sampled": every table gets the same share of fakes;
    on paired releases it still acts a little on fedrr's fakes, whose other pairs carry a uniform
    label, and not on ones that put the target label in every pair) or spread their targets over
    more than half of the attributes (the median moves); (iii) fakes
    whose crafted reports leave the target table's class margin where it was (pairs promoted with the
    labels at the honest class frequencies); (iv) the input attack below the test's power; (v) any
    damage to the attributes not rejected; (vi) fakes whose reports are not the ones with the largest
    margin contribution (OLH supports, padded OUE vectors: the trim then removes honest extreme
    reports instead, correcting the margin but not the table's cells). An honest pool is rejected
    with probability ≤ robust_alpha and then loses the few reports its noise excess implies.
    Learned: ``consistent_`` (F,) bool (the test), ``margin_z_`` (F,), ``margin_z_critical_`` (all
    attributes consistent, z 0, when robust="none"), ``trimmed_`` (per attribute, the records whose
    report on it was discarded) and ``n_trimmed_`` (F,).

    robust="ldprecover" (paired releases, one mechanism; for comparison, issue 45): LDPRecover (Sun et
    al., ICDE 2024; ``_ldprecover``) on each attribute's debiased pair table instead of the clipping:
    f̂ = (1 + η_j) P̂_j − η_j f̃_Y, the malicious mass of the pair oracle spread evenly over the table's
    positive cells, projected onto the simplex; η_j from the sampling counts (``recover_eta="counts"``)
    or one given η ≥ 0. The class prior is the recovered tables' pooled margin, weighted by the genuine
    counts n_j/(1 + η_j). No attack knowledge is used, so it does not move a promoted cell more than the
    others (the paper's LDPRecover* would need the targets). Learned: ``recover_eta_`` (η_j),
    ``malicious_mass_`` (Σ f̃_Y per table), ``malicious_support_`` (|D_1|); None for the other options.

    Learned: ``classes_``, ``n_states_`` (k_j), ``n_released_`` (n_j), ``joint_unbiased_`` and
    ``class_prior_unbiased_`` (debiased, before projection), ``joint_`` and ``class_prior_`` (on the
    simplex), ``feature_log_prob_`` (per attribute (C, k_j)), ``class_log_prior_``, ``n_iter_`` (1 for
    the closed forms, the most Newton steps of one table for "mle").
    """

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        method: str = "auto",
        tol: float = 1e-7,
        max_iter: int = 1000,
        mechanism: Any = None,
        robust: str = "none",
        robust_alpha: float = 0.01,
        recover_eta: str | float = "counts",
    ):
        self.alpha = alpha
        self.method = method
        self.tol = tol
        self.max_iter = max_iter
        self.mechanism = mechanism
        self.robust = robust
        self.robust_alpha = robust_alpha
        self.recover_eta = recover_eta

    _parameter_constraints = {
        "alpha": [Interval(float, 0, None, closed="left")],
        "method": [Options(*METHODS)],
        "tol": [Interval(float, 0, None, closed="neither")],
        "max_iter": [Interval(int, 1, None)],
        "robust": [Options(*NB_ROBUST)],
        "robust_alpha": [Interval(float, 0, 1, closed="neither")],
        "recover_eta": [Options("counts"), Interval(float, 0, None)],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True  # integer states
        tags.input_tags.positive_only = True
        return tags

    def fit(self, X, y, mechanism: Any = None):
        """Fit on releases (with a mechanism) or on clean integer data (without one, with a
        ``CleanDataWarning``: not an error, so that ``check_estimator``'s plain arrays still fit)."""
        validate_estimator(self)
        mechanism = self.mechanism if mechanism is None else mechanism
        if mechanism is None:
            warn_clean(self)
            return self._fit_clean(X, y)
        if isinstance(mechanism, (list, tuple, np.ndarray)):  # one per record
            groups = mechanism_groups(mechanism, np.shape(X)[0])
            if len(groups) > 1:
                if any(isinstance(m, TripleRecordMechanism) for m, _ in groups):
                    msg = (
                        "a mix of triple releases' mechanisms is not pooled by LDPNaiveBayes: one mechanism, or spread"
                    )
                    raise ValidationError("mechanism", msg)
                return self._fit_mix(X, y, groups)
            mechanism = groups[0][0]
        if isinstance(mechanism, TripleRecordMechanism):
            return self._fit_triple(X, y, mechanism)
        if check_record(mechanism).label_in_pairs:
            return self._fit_paired(X, y, mechanism)
        if self.robust == "ldprecover":
            raise ValidationError(
                "robust", "'ldprecover' needs paired releases (one pair oracle per attribute's table)"
            )
        method = "mle" if self.method == "auto" else self.method
        rel = check_releases(X, y, mechanism)
        if self.robust == "margins":
            V = rel.label.unbiased_onehot(rel.y)
            per_report = [
                m.unbiased_onehot(x).sum(axis=1)[:, None] * V[r] for m, x, r in zip(rel.mechs, rel.values, rel.rows)
            ]
            self._robust_test(per_report)
            keys = [np.column_stack([x, rel.y[r]]) for x, r in zip(rel.values, rel.rows)]  # (report, label)
            cut = self._trim(per_report, keys, rel.rows)
            kept = [np.setdiff1d(np.arange(r.size), c) for r, c in zip(rel.rows, cut)]
            rel = Releases([r[k] for r, k in zip(rel.rows, kept)], [x[k] for x, k in zip(rel.values, kept)],
                           rel.y, rel.mechs, rel.label)  # fmt: skip
        else:
            self._robust_test(None, len(rel.rows))
        tables, n_released, freq = _unbiased(rel)
        if method == "clip":
            joint = [clip_table(t) for t in tables]
            prior, n_iter = clip_table(freq), 1
        else:
            joint = [project_to_simplex(t.ravel()).reshape(t.shape) for t in tables]
            prior, n_iter = project_to_simplex(freq), 1
        if method == "mle":
            joint, prior, n_iter = mle_tables(rel, joint, prior, tol=self.tol, max_iter=self.max_iter)
        if self.n_trimmed_.any():  # the trimmed tables' pooled class margin: the trimmed clients' labels do not count
            prior = clip_table(_pooled_margin(tables, n_released))
        if hasattr(self, "feature_names_in_"):  # left by an earlier clean fit on a DataFrame
            del self.feature_names_in_
        self.joint_unbiased_, self.class_prior_unbiased_, self.n_iter_ = tables, freq, n_iter
        self.classes_ = np.arange(prior.size)
        self.n_states_ = np.array([t.shape[0] for t in tables])
        self.n_features_in_ = len(tables)
        self._set_model(joint, prior, n_released)
        return self

    def _fit_paired(self, X_tilde, y_tilde, mechanism: PairedRecordMechanism):
        """Yilmaz et al. §4 on paired releases: unbiased pair tables, cleaned by ``method``; the class
        prior is their class margin pooled over attributes; conditionals from each table (_set_model)."""
        method = "clip" if self.method == "auto" else self.method
        rel = check_paired_releases(X_tilde, y_tilde, mechanism)
        if self.robust == "margins":
            per_report = [mechanism.unbiased_pair_table(j, v).sum(axis=1) for j, v in enumerate(rel.values)]
            self._robust_test(per_report)
            cut = self._trim(per_report, rel.values, rel.rows)
            kept = [np.setdiff1d(np.arange(r.size), c) for r, c in zip(rel.rows, cut)]
            rel = PairedReleases([r[k] for r, k in zip(rel.rows, kept)], [v[k] for v, k in zip(rel.values, kept)],
                                 mechanism)  # fmt: skip
        else:
            self._robust_test(None, len(rel.rows))
        tables, n_released, freq = _paired_unbiased(rel)
        # the unbiased pooled margin (of the trimmed tables), negative entries clipped
        n_iter, prior = 1, clip_table(_pooled_margin(tables, n_released))
        if self.robust == "ldprecover":  # LDPRecover's CI output is on the simplex: no clip, projection or MLE
            joint, etas, masses, support = recover_tables(tables, list(mechanism.oracles), n_released,
                                                          self.recover_eta)  # fmt: skip
            self._set_recovery((etas, masses, support))
            n_released = n_released / (1.0 + etas)  # the genuine reports' count, n_j = (n_j + m_j)/(1 + η_j)
            prior = _pooled_margin(joint, n_released)
        elif method == "clip":
            joint = [clip_table(t) for t in tables]
        else:
            joint = [project_to_simplex(t.ravel()).reshape(t.shape) for t in tables]
            if method == "mle":  # the maximum-likelihood tables' own pooled margin
                joint, n_iter = paired_mle_tables(rel, joint, tol=self.tol, max_iter=self.max_iter)
                prior = _pooled_margin(joint, n_released)
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.joint_unbiased_, self.class_prior_unbiased_, self.n_iter_ = tables, freq, n_iter
        self.classes_ = np.arange(mechanism.n_classes)
        self.n_states_ = np.array(mechanism.n_states)
        self.n_features_in_ = mechanism.n_features
        self._set_model(joint, prior, n_released)
        return self

    def _fit_triple(self, X_tilde, y_tilde, mechanism: TripleRecordMechanism):
        """Yilmaz et al.'s estimator on triple releases (``TripleRecordMechanism``): attribute j's pair table
        is the mean over its partners k of the triple tables' margins Σ_t û_(s, t, c), each unbiased for
        P(x_j = s, y = c) (the pair a person draws is independent of the data); the class prior their pooled
        class margin; cleaned by ``method`` ("auto": "clip"; "mle" is built for pair reports)."""
        if self.robust != "none":
            raise ValidationError("robust", f"{self.robust!r} is built for pair reports, not for triple releases")
        method = "clip" if self.method == "auto" else self.method
        if method == "mle":
            raise ValidationError(
                "method", "'mle' is built for pair reports: triple releases take 'clip' or 'projection'"
            )
        X, _ = mechanism.validate_release(X_tilde, y_tilde)
        tables, n_released = triple_pair_tables(mechanism, X)
        self._robust_test(None, len(tables))
        prior = clip_table(_pooled_margin(tables, n_released))
        if method == "clip":
            joint = [clip_table(t) for t in tables]
        else:
            joint = [project_to_simplex(t.ravel()).reshape(t.shape) for t in tables]
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.joint_unbiased_, self.class_prior_unbiased_, self.n_iter_ = tables, _pooled_margin(tables, n_released), 1
        self.classes_ = np.arange(mechanism.n_classes)
        self.n_states_ = np.array(mechanism.n_states)
        self.n_features_in_ = mechanism.n_features
        self._set_model(joint, prior, n_released)
        return self

    def _fit_mix(self, X_tilde, y_tilde, groups: list):
        """A budget mix (``_naive_bayes_mix``): each mechanism's group debiased as one mechanism is, the
        groups pooled by inverse variance; ``method`` as for one mechanism ("mle" on split releases:
        "projection", the pooled tables' exact likelihood is not built for them)."""
        if self.robust != "none":
            raise ValidationError(
                "robust", f"{self.robust!r} needs one record mechanism for every record (no budget mix)"
            )
        X = as_array("X_tilde", X_tilde, "must be an array of shape (n_clients, n_features)")
        paired = bool(groups[0][0].label_in_pairs)
        if paired:
            tables, n_released, reports = paired_mix_tables(X, groups)
            freq = _pooled_margin(tables, n_released)
            method = "clip" if self.method == "auto" else self.method
        else:
            y = as_array("y_tilde", y_tilde, f"must be an array of shape ({X.shape[0]},)")
            if y.shape != (X.shape[0],):
                raise ValidationError("y_tilde", f"must have shape ({X.shape[0]},) to match X_tilde, got {y.shape}")
            tables, n_released, freq = split_mix_tables(X, y, groups)
            method = "projection" if self.method in ("auto", "mle") else self.method
        n_iter, prior = 1, clip_table(freq)
        if method == "clip":
            joint = [clip_table(t) for t in tables]
        else:
            joint = [project_to_simplex(t.ravel()).reshape(t.shape) for t in tables]
            if not paired:
                prior = project_to_simplex(freq)
            if method == "mle":  # paired: every group's reports in one exact likelihood
                joint, n_iter = paired_mix_mle(reports, joint, tol=self.tol, max_iter=self.max_iter)
                prior = _pooled_margin(joint, n_released)
        self._robust_test(None, len(tables))
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.joint_unbiased_, self.class_prior_unbiased_, self.n_iter_ = tables, freq, n_iter
        self.classes_ = np.arange(tables[0].shape[1])
        self.n_states_ = np.array([t.shape[0] for t in tables])
        self.n_features_in_ = len(tables)
        self._set_model(joint, prior, n_released)
        return self

    def _set_recovery(self, learned: tuple | None) -> None:
        """Set ``recover_eta_`` (η_j), ``malicious_mass_`` (Σ_v f̃_Y) and ``malicious_support_`` (|D_1|)
        per attribute for robust="ldprecover" (``_ldprecover``), None otherwise."""
        self.recover_eta_, self.malicious_mass_, self.malicious_support_ = learned or (None, None, None)

    def _robust_test(self, per_report: list[np.ndarray] | None, n_features: int = 0) -> None:
        """Set ``consistent_``, ``margin_z_``, ``margin_z_critical_`` (see ``margin_consistency``), and
        ``trimmed_`` / ``n_trimmed_`` empty (``_trim`` fills them), and no recovery (``_set_recovery``)."""
        self._set_recovery(None)
        if per_report is None:
            self.consistent_ = np.ones(n_features, dtype=bool)
            self.margin_z_, self.margin_z_critical_ = np.zeros(n_features), math.inf
            self.trimmed_ = [np.zeros(0, dtype=np.int64) for _ in range(n_features)]
            self.n_trimmed_ = np.zeros(n_features, dtype=np.int64)
            return
        self.consistent_, self.margin_z_, self.margin_z_critical_ = margin_consistency(
            per_report, float(self.robust_alpha)
        )

    def _trim(self, per_report: list[np.ndarray], keys: list[np.ndarray], rows: list[np.ndarray]) -> list[np.ndarray]:
        """``margin_trim`` on the test's result: sets ``trimmed_`` (per attribute, the records whose report
        on it is discarded) and ``n_trimmed_``; returns the discarded reports' indices per attribute."""
        cut = margin_trim(per_report, keys, self.consistent_)
        self.trimmed_ = [r[c] for r, c in zip(rows, cut)]
        self.n_trimmed_ = np.array([c.size for c in cut], dtype=np.int64)
        return cut

    def _fit_clean(self, X, y):
        X, y = validate(self, X, y)
        X = self._states(X, None)
        self.classes_, yi = class_labels(y)
        C, n = self.classes_.size, X.shape[0]
        self.n_states_ = X.max(axis=0) + 1
        joint = []
        for j, k in enumerate(self.n_states_):
            joint.append(np.bincount(X[:, j] * C + yi, minlength=k * C).reshape(k, C) / n)
        prior = np.bincount(yi, minlength=C) / n
        self.joint_unbiased_, self.class_prior_unbiased_, self.n_iter_ = joint, prior, 1
        self._robust_test(None, X.shape[1])
        self._set_model(joint, prior, np.full(X.shape[1], n))
        return self

    def _set_model(self, joint: list[np.ndarray], prior: np.ndarray, n_released: np.ndarray) -> None:
        """Conditionals from the joint tables: (n_j p(x_j, c) + α) / (n_j p(c) + k_j α), in log space."""
        self.joint_, self.class_prior_, self.n_released_ = joint, prior, n_released
        a = float(self.alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.class_log_prior_ = np.maximum(np.log(prior), LOG_FLOOR)
            self.feature_log_prob_ = []
            for t, nj in zip(joint, n_released):
                num = nj * t.T + a  # (C, k_j)
                den = num.sum(axis=1, keepdims=True)
                logp = np.where(den > 0, np.log(num) - np.log(den), -math.log(t.shape[0]))
                self.feature_log_prob_.append(np.maximum(logp, LOG_FLOOR))

    # --- prediction ---------------------------------------------------------------------------
    def _states(self, X: np.ndarray, k: np.ndarray | None) -> np.ndarray:
        """Clean integer states, >= 0 (and < k per column when k is given)."""
        if X.dtype.kind == "f" and (not np.all(np.isfinite(X)) or np.any(X != np.round(X))):
            raise ValidationError("X", "must hold integer states (finite, whole numbers)")
        if np.any(X < 0):
            raise ValidationError("X", "Negative values in data: states must be integers >= 0")
        if k is not None:
            return as_state_array("X", X, k)
        return X.astype(np.int64)

    def _check_X(self, X) -> np.ndarray:
        check_is_fitted(self, "feature_log_prob_")
        Xv = validate(self, X, reset=False)
        return self._states(Xv, self.n_states_)

    def predict_joint_log_proba(self, X) -> np.ndarray:
        """log p(c) + Σ_j log p(x_j | c) for each clean record (n, C)."""
        Xv = self._check_X(X)
        jll = np.tile(self.class_log_prior_, (Xv.shape[0], 1))
        for j, logp in enumerate(self.feature_log_prob_):
            jll += logp[:, Xv[:, j]].T
        return jll

    def predict_log_proba(self, X) -> np.ndarray:
        """log p(c | x), floored at LOG_FLOOR so that it is exactly log(predict_proba)."""
        jll = self.predict_joint_log_proba(X)
        return np.maximum(jll - np.logaddexp.reduce(jll, axis=1, keepdims=True), LOG_FLOOR)

    def predict_proba(self, X) -> np.ndarray:
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        jll = self.predict_joint_log_proba(X)
        return self.classes_[np.argmax(jll, axis=1)]
