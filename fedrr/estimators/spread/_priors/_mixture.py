"""Spread-EM's mixture priors p(x) = Σ_m π_m Π_d p(x_d | m), fixed during the fit: ``"naive-bayes"``,
whose components are the classes (naive Bayes fitted on the releases, ``LDPNaiveBayes``: debiased
(attribute, label) pair frequencies), and ``"latent-class"``, components fitted to the releases by EM
(``latent_class_prior``). A factorised prior imputes the attributes a record did not release
independently of the ones it did; a mixture, through their common dependence on the component. Its
posterior given a release is exact and cheap to draw from: the component from p(m | x̃), then each
attribute from p(x_d | m, x̃_d)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, fields

import numpy as np

from ....errors import ValidationError
from ....mechanisms import RecordMechanism
from .._design import ColumnLayout
from .._logexp import logsumexp
from .._paired import PairedView, class_margin
from ._factorised import SpreadPrior, _empty


@dataclass
class MixtureSpreadPrior(SpreadPrior):
    """A fixed mixture of factorised priors: ``log_pi`` (C,) and, per column, ``log_p`` (C, k_d).
    ``disc`` holds its marginals Σ_c π_c p(x_d | c), which the EM's start and ``prior_`` read."""

    log_pi: np.ndarray | None = None
    log_p: list | None = None

    def copy(self) -> MixtureSpreadPrior:
        base = SpreadPrior.copy(self)
        kept = {f.name: getattr(base, f.name) for f in fields(SpreadPrior)}
        return MixtureSpreadPrior(**kept, log_pi=self.log_pi, log_p=self.log_p)

    def _terms(self, rm: RecordMechanism, X: np.ndarray, released: np.ndarray) -> tuple[np.ndarray, dict]:
        """log π_c + Σ_{d released} log Σ_x p(x | c) p(x̃_d | x) per record (n, C), and per released
        column its records and log p(x | c) + log p(x̃_d | x), (n_d, C, k_d)."""
        lt = np.tile(self.log_pi, (X.shape[0], 1))
        terms = {}
        for mech, cols in rm.column_groups():
            for d in cols:
                rel = np.flatnonzero(released[:, d])
                if rel.size:
                    L = mech.log_likelihood_matrix(X[rel, d].astype(np.int64))  # (n_d, k_d)
                    w = self.log_p[d][None, :, :] + L[:, None, :]
                    lt[rel] += logsumexp(w, axis=2)
                    terms[d] = (rel, w)
        return lt, terms

    def log_marginal(self, rm: RecordMechanism, X: np.ndarray, released: np.ndarray) -> np.ndarray:
        """log p(x̃) = log Σ_c π_c Π_{d released} Σ_x p(x | c) p(x̃_d | x) per record: exact."""
        return logsumexp(self._terms(rm, X, released)[0], axis=1)

    def sampler(self, rm: RecordMechanism, X: np.ndarray, released: np.ndarray) -> MixtureSampler:
        """The posterior CDFs of these records (the prior is fixed: a shard keeps them for the fit)."""
        lt, terms = self._terms(rm, X, released)
        return MixtureSampler(
            self, _cdf(lt), [_cdf(lp) for lp in self.log_p], {d: (r, _cdf(w)) for d, (r, w) in terms.items()}
        )

    def draw(self, rm: RecordMechanism, X: np.ndarray, released: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Exact draws from p(x | x̃) ∝ p(x) p(x̃ | x) by the uniforms ``u`` (S, n, D + 1)."""
        return self.sampler(rm, X, released).draw(u)


@dataclass
class MixtureSampler:
    """Exact draws from a mixture prior's posterior for a block of records: the class from
    p(c | x̃) (``cls`` (n, C) CDFs), then attribute d from p(x_d | c, x̃_d) (``rel``: the released
    records' (n_d, C, k) CDFs; ``base``: p(x_d | c) (C, k) for the others). Each draw is an inverse
    CDF: the number of CDF entries <= its uniform (the compiled ``_kernels.mixture_draw``)."""

    prior: MixtureSpreadPrior
    cls: np.ndarray
    base: list
    rel: dict
    _tables: tuple | None = field(default=None, init=False, repr=False)

    def tables(self) -> tuple:
        """The kernel's dense tables: base (D, C, K), kd (D,), relidx (D, n), relcdf (rows, C, K),
        padded with +inf (never <= a uniform, so the counts are those of the unpadded CDFs)."""
        if self._tables is None:
            n, D = self.cls.shape[0], len(self.base)
            C, K = self.cls.shape[1], max(b.shape[1] for b in self.base)
            base = np.full((D, C, K), np.inf)
            kd = np.array([b.shape[1] for b in self.base], np.int64)
            relidx = np.full((D, n), -1, np.int64)
            relcdf = np.full((sum(r.size for r, _ in self.rel.values()), C, K), np.inf)
            at = 0
            for d, b in enumerate(self.base):
                base[d, :, : kd[d]] = b
                if d in self.rel:
                    rows, cdf = self.rel[d]
                    relidx[d, rows] = at + np.arange(rows.size)
                    relcdf[at : at + rows.size, :, : kd[d]] = cdf
                    at += rows.size
            self._tables = (base, kd, relidx, relcdf)
        return self._tables

    def draw(self, u: np.ndarray) -> np.ndarray:
        """By the uniforms ``u`` (S, n, D + 1): the class by u[..., 0], attribute d by u[..., d + 1]."""
        from .._kernels import mixture_draw  # numba: compiled at first use, not when spread is imported

        out = np.empty((u.shape[0], self.cls.shape[0], len(self.base)))
        mixture_draw(np.ascontiguousarray(u, dtype=np.float64), np.ascontiguousarray(self.cls), *self.tables(), out)
        return out


def _cdf(logw: np.ndarray) -> np.ndarray:
    """Normalised cumulative sums of exp(logw) along the last axis."""
    c = np.cumsum(np.exp(logw - logw.max(axis=-1, keepdims=True)), axis=-1)
    return c / c[..., -1:]


def naive_bayes_prior(X: np.ndarray, y: np.ndarray, groups: list, layout: ColumnLayout) -> MixtureSpreadPrior:
    """The ``prior="naive-bayes"`` of releases ``X`` (NaN where not released), released labels ``y``
    and their one record mechanism. An attribute no record released gets a uniform p(x_d | c): the
    releases say nothing of it (a small pool, or a cross-validation fold, may have one)."""
    if len(groups) != 1:
        raise ValidationError("prior", "'naive-bayes' needs one record mechanism for every record (no budget mix)")
    rm = groups[0][0]
    if isinstance(rm, PairedView):  # from the pair tables' maximum-likelihood estimates
        return paired_naive_bayes_prior(rm, layout)
    from ..._naive_bayes import LDPNaiveBayes  # scikit-learn: not on a Ray actor
    from ..._naive_bayes_releases import check_naive_bayes_mechanism

    seen = np.flatnonzero(~np.all(np.isnan(X), axis=0))
    try:
        mechs, label = check_naive_bayes_mechanism(rm)
        if seen.size == 0:
            raise ValidationError("X", "no record released any attribute")
        nb = LDPNaiveBayes().fit(X[:, seen], y, mechanism=RecordMechanism([mechs[d] for d in seen], label))
    except ValidationError as e:
        raise ValidationError("prior", f"'naive-bayes' fits LDPNaiveBayes on the releases: {e.message}") from e
    C = len(nb.classes_)
    log_p = [np.full((C, m.k), -np.log(m.k)) for m in mechs]
    for d, lp in zip(seen, nb.feature_log_prob_):
        log_p[d] = lp - logsumexp(lp, axis=1, keepdims=True)
    pi = nb.class_prior_ / nb.class_prior_.sum()
    with np.errstate(divide="ignore"):
        log_pi = np.log(pi)
    return mixture_prior(layout, pi, log_pi, log_p)


def paired_naive_bayes_prior(view: PairedView, layout: ColumnLayout):
    """``prior="naive-bayes"`` for paired releases: p(x) = Σ_c π_c Π_j p(x_j | c) from the pair tables'
    maximum-likelihood estimates (π_c the mean of their class margins), fixed."""
    tabs = view.tables
    pi = class_margin(tabs)
    log_p = []
    for t in tabs:
        cond = np.maximum(t, 1e-12).T  # (C, k)
        log_p.append(np.log(cond / cond.sum(axis=1, keepdims=True)))
    return mixture_prior(layout, pi, np.log(pi), log_p)


def latent_class_prior(layout: ColumnLayout, fit: tuple) -> MixtureSpreadPrior:
    """``prior="latent-class"``: p(x) = Σ_m π_m Π_d p(x_d | m), the x-part of the latent-class model
    ``fit`` = ``latent_class_em(...)`` fitted to the releases (its p(y | m) is dropped: p_θ(y | x)
    models the label), fixed in spread-EM. Unlike ``"naive-bayes"``, whose components are the
    classes, the components can model how attributes co-occur; that needs records that release two
    or more attributes (with one, only each attribute's table with the label is identified, and the
    rest of the fit is set by the EM's start: ``auto_prior`` does not choose it there)."""
    log_pi, _, P = fit
    return mixture_prior(layout, np.exp(log_pi), log_pi, [np.log(p) for p in P], P)


def mixture_prior(layout: ColumnLayout, pi, log_pi, log_p: list, p: list | None = None) -> MixtureSpreadPrior:
    """The fixed mixture prior Σ_m π_m Π_d p(x_d | m) of the components' log_p[d] (M, k_d), with
    each column's marginal Σ_m π_m p(x_d | m) in its table (from ``p``, the same probabilities
    unlogged, where the caller has them)."""
    out = _empty(layout, "gaussian", 1)
    prior = MixtureSpreadPrior(
        **{f.name: getattr(out, f.name) for f in fields(SpreadPrior)}, log_pi=log_pi, log_p=log_p
    )
    for d, pd in enumerate(p if p is not None else [np.exp(lp) for lp in log_p]):
        prior.disc[d, : pd.shape[1]] = pi @ pd
    return prior


def latent_class_em(
    X: np.ndarray,
    y: np.ndarray,
    groups: list,
    layout: ColumnLayout,
    n_components: int,
    seed: int,
    max_iter: int = 300,
    tol: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray, list]:
    """The latent-class model p(x, y) = Σ_m π_m p(y | m) Π_d p(x_d | m) fitted to the releases by
    EM on their exact likelihood: (log π (M,), p(y | m) (M, C), [p(x_d | m) (M, k_d)]). A record's
    reports are independent given its true values, so given the component its likelihood is

        Σ_c p(c | m) P(ỹ | c) Π_{d released} Σ_s p(s | m) P(x̃_d | s, c)

    (paired releases: P(v̂_d | s, c) of the pair report and no separate label term; record releases:
    P(x̃_d | s), the same for every c, and the label's P(ỹ | c)). Discrete columns and a label only;
    ``groups``: (mechanism or PairedView, rows). The start is drawn from ``seed``'s own stream. EM
    stops when the mean log-likelihood per record rises by at most ``tol`` in a step (a
    ConvergenceWarning if ``max_iter`` steps come first: the likelihood is flat along some directions
    at small ε, where EM creeps)."""
    blocks, label = _lc_blocks(X, y, groups, layout)
    return _lc_em(blocks, label, [int(k) for k in layout.k], int(n_components), seed, max_iter, tol)


def _lc_em(
    blocks: list,
    label: np.ndarray,
    ks: list,
    n_components: int | None,
    seed: int,
    max_iter: int = 300,
    tol: float = 1e-6,
    pseudo_count: float = 1e-12,
) -> tuple[np.ndarray, np.ndarray, list]:
    """``latent_class_em`` on its inputs (``_lc_blocks``). ``n_components`` None: M = C and
    p(y | m) the identity, held fixed: naive Bayes p(y) Π_d p(x_d | y) fitted by the same EM on the
    same exact likelihood, the nested model ``choose_latent_class`` compares with. ``pseudo_count``:
    added to each (component, state)'s expected count in the M-step (a Dirichlet prior's MAP)."""
    n, C = label.shape
    components_are_classes = n_components is None
    M = C if components_are_classes else int(n_components)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x1C,)))  # its own stream
    log_pi = np.full(M, -np.log(M))
    py = np.eye(C) if components_are_classes else rng.dirichlet(np.full(C, 5.0), size=M)
    P = [rng.dirichlet(np.full(k, 5.0), size=M) for k in ks]
    seen = {b[0] for b in blocks}
    for d in set(range(len(P))) - seen:  # no record released it: the releases say nothing of it
        P[d] = np.full_like(P[d], 1.0 / P[d].shape[1])
    prev = -np.inf
    runs, label, _ = _contiguous_blocks(blocks, label)
    like = None if not label.any() else np.exp(label)  # P(ỹ | c); None: paired, the label is in the pairs
    ones = np.ones(n)
    for _ in range(max_iter):
        post, log_z, A = _lc_posterior(log_pi, py, P, runs, label, like)  # (M, n, C), (n,)
        ll = float(np.mean(log_z))
        mass = ones @ post  # (M, C)
        log_pi = np.log(np.maximum(mass.sum(axis=1), 1e-300) / n)
        if not components_are_classes:
            py = np.maximum(mass, 1e-300) / np.maximum(mass.sum(axis=1, keepdims=True), 1e-300)
        counts = [np.zeros_like(p) for p in P]
        for (d, lo, hi, ETt), a in zip(runs, A):  # E[1{m, x_d = s}] over the records that released d
            W = (post[:, lo:hi, :] / a).reshape(a.shape[0], -1)  # (M, n_d·C): p(m, c | record) / a
            counts[d] += W @ ETt.T
        for d in seen:
            c = counts[d] * P[d] + pseudo_count
            P[d] = c / c.sum(axis=1, keepdims=True)
        if ll - prev <= tol:  # the mean log-likelihood per record has stopped rising
            break
        prev = ll
    else:
        from sklearn.exceptions import ConvergenceWarning  # at the warning: the module stays light for Ray actors

        warnings.warn(
            f"prior='latent-class': EM stopped at {max_iter} iterations, its mean log-likelihood per "
            f"record still rising by more than {tol:g}",
            ConvergenceWarning,
            stacklevel=3,
        )
    return log_pi, py, P


def _contiguous_blocks(blocks: list, label: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
    """The EM's inputs with the records reordered so that every block is a run of consecutive
    records: records sorted by the set of blocks that hold them (their released columns), each block
    cut into one run per set. -> ([(d, lo, hi, likelihood laid out (k_d, run·C))], the label's rows in
    the new order, ``order``: the new order's record i is input record order[i]). The EM's sums over
    records do not depend on their order, and a run is a slice, where a block's rows were a gather and
    a scatter per step."""
    n = label.shape[0]
    key = np.zeros((n, -(-len(blocks) // 63)), np.int64)  # each record's set of blocks, 63 bits a word
    for b, (_, rows, _) in enumerate(blocks):
        key[rows, b // 63] |= np.int64(1) << np.int64(b % 63)
    order = np.lexsort(key.T[::-1])  # stable: records of one set keep their order
    where = np.empty(n, np.int64)
    where[order] = np.arange(n)
    runs = []
    for d, rows, ET in blocks:
        pos = where[rows]
        by = np.argsort(pos, kind="stable")
        pos, ET = pos[by], ET[by]
        cut = np.flatnonzero(np.diff(pos) != 1) + 1  # a new run wherever the positions jump
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, pos.size]):
            T = np.ascontiguousarray(ET[lo:hi].transpose(1, 0, 2)).reshape(ET.shape[1], -1)
            runs.append((d, int(pos[lo]), int(pos[lo]) + int(hi - lo), T))
    return runs, label[order], order


def _lc_posterior(log_pi, py, P: list, runs: list, label: np.ndarray, like) -> tuple:
    """One E-step on ``_contiguous_blocks``' runs: the posterior p(m, c | record) laid out (M, n, C),
    each record's log-likelihood (n,) in the blocks' per-record scale, and each run's
    Σ_s p(s | m) P(x̃_d | s, c) (M, run, C). Products, not sums of logs: every factor is at most 1
    (the blocks' scale), so nothing overflows, and a record whose product underflows sends the step
    through logarithms (``_lc_log_joint_runs``). ``like``: exp(label), or None for paired releases."""
    M, (n, C) = log_pi.size, label.shape
    B = np.empty((M, n, C))
    B[:] = (np.exp(log_pi)[:, None] * py)[:, None, :]
    if like is not None:
        B *= like[None]
    A = []
    for d, lo, hi, ETt in runs:
        a = np.maximum(P[d] @ ETt, 1e-300).reshape(M, hi - lo, C)
        B[:, lo:hi, :] *= a
        A.append(a)
    z = B.sum(axis=0) @ np.ones(C)
    if z.min() > 1e-250:
        B /= z[:, None]
        return B, np.log(z), A
    logB, A = _lc_log_joint_runs(log_pi, py, P, runs, label)
    top = logB.max(axis=(0, 2))
    B = np.exp(logB - top[None, :, None])
    z = B.sum(axis=0) @ np.ones(C)
    B /= z[:, None]
    return B, np.log(z) + top, A


def _lc_log_joint_runs(log_pi, py, P: list, runs: list, label: np.ndarray) -> tuple:
    """log of π_m p(c | m) P(ỹ | c) Π_d Σ_s p(s | m) P(x̃_d | s, c) per record, laid out (M, n, C) on
    ``_contiguous_blocks``' runs (in the blocks' per-record scale), and each run's Σ_s terms."""
    M, C = log_pi.size, label.shape[1]
    with np.errstate(divide="ignore"):  # p(y | m) = 0 (naive Bayes's identity): log 0 = −inf, exp gives 0
        head = log_pi[:, None] + np.log(py)  # (M, C)
    logB = head[:, None, :] + label[None, :, :]
    A = []
    for d, lo, hi, ETt in runs:
        a = np.maximum(P[d] @ ETt, 1e-300).reshape(M, hi - lo, C)
        logB[:, lo:hi, :] += np.log(a)
        A.append(a)
    return logB, A


def _lc_record_loglik(fit: tuple, blocks: list, label: np.ndarray) -> np.ndarray:
    """Each record's log-likelihood of its releases under the fitted model ``fit``, up to a
    per-record constant that is the same for every model (the blocks' scale): differences between
    models on the same records are exact (``_lc_posterior``'s E-step, in the records' own order)."""
    runs, label, order = _contiguous_blocks(blocks, label)
    like = None if not label.any() else np.exp(label)
    out = np.empty(label.shape[0])
    out[order] = _lc_posterior(*fit, runs, label, like)[1]
    return out


def _lc_subset(blocks: list, label: np.ndarray, keep: np.ndarray) -> tuple[list, np.ndarray]:
    """The latent-class EM's inputs restricted to the records ``keep`` (sorted indices), renumbered."""
    index = np.full(label.shape[0], -1)
    index[keep] = np.arange(keep.size)
    out = []
    for d, rows, ET in blocks:
        sel = index[rows] >= 0
        if sel.any():
            out.append((d, index[rows[sel]], ET[sel]))
    return out, label[keep]


#: ``prior="auto"`` keeps the latent-class prior when its held-out log-likelihood per record beats
#: naive Bayes's by this many standard errors (one-sided; ≈ 2.3 % under no gain, normal reference)
CHOOSE_Z = 2.0
#: the choice's fits add this to every (component, state) count (Jeffreys): without it a state a half
#: never showed gets probability ~0 and costs the other half's records that show it ~25 nats, which
#: decides the comparison on rare cells, not on dependence
CHOOSE_PSEUDO_COUNT = 0.5


def choose_latent_class(
    X: np.ndarray, y: np.ndarray, groups: list, layout: ColumnLayout, n_components: int, seed: int
) -> dict:
    """``prior="auto"`` on releases whose records release two or more attributes: does a latent-class
    prior of ``n_components`` describe them better than naive Bayes? Two-fold cross-fitting on the
    releases alone: each model (naive Bayes as the latent-class model whose components are the
    classes, nested in it) is fitted by EM on one half and scores the other half's records by their
    exact log-likelihood; the per-record differences (latent-class − naive Bayes) give a mean and a
    standard error, and the latent-class prior is chosen when the mean exceeds ``CHOOSE_Z`` standard
    errors. ``auto_prior`` asks only where records release two or more attributes: with one pair per
    record both models describe the same pair tables (any tables sharing a class margin), so the
    comparison would weigh their smoothing, not dependence. No clean record or label is read.
    -> {"chosen", "loglik_gain", "se", "z", "n"}."""
    blocks, label = _lc_blocks(X, y, groups, layout)
    ks = [int(k) for k in layout.k]
    n = label.shape[0]
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0xC5,)))
    fold = rng.permutation(n) % 2
    diff = np.empty(n)
    with warnings.catch_warnings():  # a fold's EM that creeps: its held-out score says what it is worth
        warnings.simplefilter("ignore")
        for f in (0, 1):
            train, test = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
            bt, lt = _lc_subset(blocks, label, train)
            bh, lh = _lc_subset(blocks, label, test)
            lc = _lc_em(bt, lt, ks, n_components, seed, pseudo_count=CHOOSE_PSEUDO_COUNT)
            nb = _lc_em(bt, lt, ks, None, seed, pseudo_count=CHOOSE_PSEUDO_COUNT)
            diff[test] = _lc_record_loglik(lc, bh, lh) - _lc_record_loglik(nb, bh, lh)
    gain, se = float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else float("inf")
    z = gain / se if se > 0 else (np.inf if gain > 0 else 0.0)
    return {
        "chosen": "latent-class" if z > CHOOSE_Z else "naive-bayes",
        "loglik_gain": gain,
        "se": se,
        "z": float(z),
        "n": int(n),
    }


def _n_classes(groups: list) -> int:
    rm = groups[0][0]
    if isinstance(rm, PairedView):
        return int(rm.n_classes)
    if getattr(rm.label, "k", None) is None:
        raise ValidationError("prior", "'latent-class' needs a released label (one discrete label mechanism) or pairs")
    return int(rm.label.k)


def _lc_blocks(X: np.ndarray, y: np.ndarray, groups: list, layout: ColumnLayout) -> tuple[list, np.ndarray]:
    """The latent-class EM's inputs: per (column, group) the records that released it and their
    likelihoods P(x̃_d | s, c) (n_d, k_d, C), each row scaled by its largest entry (a per-record
    constant, which the EM does not see); and the label's log P(ỹ | c) (n, C), zero for pairs."""
    if not layout.discrete.all():
        raise ValidationError("prior", "'latent-class' models discrete columns only: this release has numeric ones")
    C = _n_classes(groups)
    blocks, label = [], np.zeros((X.shape[0], C))
    for rm, rows in groups:
        if isinstance(rm, PairedView):
            for d, (r, T) in enumerate(rm.paired.pair_log_likelihoods(X[rows])):
                if r.size:
                    blocks.append((d, rows[r], _scaled(T)))
            continue
        if getattr(rm.label, "k", None) != C:
            raise ValidationError("prior", f"'latent-class' needs one discrete label mechanism of {C} classes or pairs")
        label[rows] = rm.label.log_likelihood_matrix(np.asarray(y[rows], np.int64))
        released = ~np.isnan(X[rows])
        for mech, cols in rm.column_groups():
            for d in cols:
                r = np.flatnonzero(released[:, d])
                if r.size:
                    L = mech.log_likelihood_matrix(X[rows[r], d].astype(np.int64))  # (n_d, k_d)
                    blocks.append((d, rows[r], _scaled(np.repeat(L[:, :, None], C, axis=2))))
    return blocks, label


def _scaled(logT: np.ndarray) -> np.ndarray:
    """exp(logT) with each record's largest entry 1."""
    return np.exp(logT - logT.reshape(logT.shape[0], -1).max(axis=1)[:, None, None])
