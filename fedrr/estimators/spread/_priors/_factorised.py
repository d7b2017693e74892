"""The factorised input prior p(x) = Π_d p(x[d]) of spread-EM (Barber §5.2 eq 62), stored per
column: categorical probabilities for discrete columns (zero-padded to the largest k), Gaussian
or histogram parameters for numeric columns.

A learned prior is updated by stochastic approximation from the E-step's samples (eq 65 and its
numeric analogues), regularised by conjugate pseudo-counts toward a ``center`` — the
mechanism-debiased marginals of the releases — so that it cannot collapse when the releases hold
little information (N = 300 MNIST pixels at flip 0.99 drove P(pixel = 0) from 0.83 to 0.07).
``strength`` is the weight of the center in records."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

from ....errors import ValidationError
from ....mechanisms import (
    CategoricalPrior,
    DiscreteMechanism,
    GaussianPrior,
    HistogramPrior,
    MatrixMechanism,
    RandomizedResponse,
    RecordMechanism,
    guide_table,
)
from ..._frequencies import deconvolution_factor
from .._design import ColumnLayout

#: guard the table caches of priors (``SpreadPrior.rr_tables``), striped by the prior's id: not a
#: lock in the prior itself, which is pickled to Ray actors
_TABLES_LOCKS = tuple(threading.Lock() for _ in range(16))


@dataclass
class SpreadPrior:
    """Per-column prior parameters. numeric_kind is "gaussian" or "histogram"."""

    layout: ColumnLayout
    disc: np.ndarray  # (D, Kmax) categorical probs (rows of numeric columns unused)
    numeric_kind: str = "gaussian"
    mean: np.ndarray | None = None  # (D,)
    var: np.ndarray | None = None
    edges: np.ndarray | None = None  # (D, B+1)
    probs: np.ndarray | None = None  # (D, B)
    center: SpreadPrior | None = None  # what the pseudo-counts pull toward (None: no smoothing)
    strength: float = 0.0  # the center's weight, in records

    #: the compiled E-step's tables of this prior, by the randomised-response parameters of the
    #: columns (``rr_tables``): built once, shared by every shard holding this prior. Not a field:
    #: a copy, a blend or an estimate starts without them
    _rr_cache = None  # dict | None (no annotation: not a dataclass field)

    def rr_tables(self, q: np.ndarray, r: np.ndarray) -> tuple:
        """(stay, jump, P, A, cdf, guide): the tables the compiled E-step draws this prior's states
        with, for columns whose randomised response keeps a state with probability q and reports
        each other one with r (per column); the inverse-CDF tables only where some q < r. Built
        once per prior and (q, r), also when the shards of several threads ask at once."""
        from .._kernels import rr_tables  # numba: compiled at first use, not when spread is imported

        key = (q.tobytes(), r.tobytes())
        entry = (self._rr_cache or {}).get(key)
        if entry is not None:
            return entry
        # striped locks: the chains' priors (different objects) are built at the same time
        with _TABLES_LOCKS[(id(self) >> 4) % len(_TABLES_LOCKS)]:  # ids are 16-byte aligned
            if self._rr_cache is None:
                self._rr_cache = {}
            if key not in self._rr_cache:
                K = self.disc.shape[1]
                stay, jump, P, A = rr_tables(self.disc, q, r)
                if np.all(q >= r):  # the inverse-CDF tables are only read where q < r
                    cdf, guide = np.zeros((0, K)), np.zeros((0, K), np.int64)
                else:
                    cdf = np.cumsum(self.disc, axis=1)
                    cdf /= cdf[:, -1:]
                    guide = guide_table(cdf)
                self._rr_cache[key] = (stay, jump, P, A, cdf, guide)
            return self._rr_cache[key]

    def for_group(self, mech, cols: np.ndarray):
        if isinstance(mech, DiscreteMechanism):
            return CategoricalPrior(self.disc[cols, : mech.k])
        if self.numeric_kind == "gaussian":
            return GaussianPrior(self.mean[cols], self.var[cols])
        return HistogramPrior(self.edges[cols], self.probs[cols])

    def for_column(self, c: int):
        """The prior of one column as a fedrr prior object (what a mechanism's posterior takes)."""
        if self.layout.discrete[c]:
            return CategoricalPrior(self.disc[c, : self.layout.k[c]])
        if self.numeric_kind == "gaussian":
            return GaussianPrior(self.mean[c], self.var[c])
        return HistogramPrior(self.edges[c], self.probs[c])

    def sample_column(self, c: int, rng: np.random.Generator, shape: tuple) -> np.ndarray:
        """Draws of column c from the prior alone (for attributes a client did not release)."""
        u = rng.random(shape)
        if self.layout.discrete[c]:
            cdf = np.cumsum(self.disc[c, : self.layout.k[c]])
            return np.minimum(np.searchsorted(cdf / cdf[-1], u, side="right"), self.layout.k[c] - 1).astype(float)
        if self.numeric_kind == "gaussian":
            return self.mean[c] + np.sqrt(self.var[c]) * ndtri(np.clip(u, 1e-300, 1 - 1e-16))
        cdf = np.cumsum(self.probs[c])
        b = np.minimum(np.searchsorted(cdf / cdf[-1], u, side="right"), self.probs.shape[1] - 1)
        lo, hi = self.edges[c, b], self.edges[c, b + 1]
        return lo + rng.random(shape) * (hi - lo)

    def column_means(self) -> np.ndarray:
        """E[x_d] under the prior, per column."""
        K = self.disc.shape[1]
        out = self.disc @ np.arange(K, dtype=float)
        num = ~self.layout.discrete
        if num.any():
            if self.numeric_kind == "gaussian":
                out[num] = self.mean[num]
            else:
                mid = 0.5 * (self.edges[:, 1:] + self.edges[:, :-1])
                out[num] = (self.probs * mid).sum(axis=1)[num]
        return out

    def statistics(self, x: np.ndarray, w: np.ndarray) -> dict:
        """Weighted statistics of samples x (m, D) for ``estimate``: state counts of the discrete
        columns (eq 65), moments or bin counts of the numeric ones."""
        layout = self.layout
        stats: dict[str, Any] = {}
        disc = np.flatnonzero(layout.discrete)
        if disc.size:
            K = self.disc.shape[1]
            st = x[:, disc].astype(np.int64) + np.arange(disc.size) * K
            stats["counts"] = np.bincount(st.ravel(), weights=np.repeat(w, disc.size), minlength=disc.size * K).reshape(
                disc.size, K
            )
        num = np.flatnonzero(~layout.discrete)
        if num.size:
            xn = x[:, num]
            stats["s0"], stats["s1"], stats["s2"] = w.sum(), w @ xn, w @ (xn * xn)
            if self.numeric_kind == "histogram":
                B = self.probs.shape[1]
                h = np.zeros((num.size, B))
                for i, c in enumerate(num):
                    b = np.clip(np.searchsorted(self.edges[c], xn[:, i], side="right") - 1, 0, B - 1)
                    h[i] = np.bincount(b, weights=w, minlength=B)
                stats["hist"] = h
        return stats

    def log_marginal(self, rm: RecordMechanism, X: np.ndarray, released: np.ndarray) -> np.ndarray:
        """Σ_d log p(x̃_d) under this prior per record, over the released discrete columns and the
        Gaussian-noise columns under a Gaussian prior (exact); other numeric columns add 0."""
        out = np.zeros(X.shape[0])
        for mech, cols in rm.column_groups():
            if isinstance(mech, RandomizedResponse) and len(cols):  # p(x̃) = r·Σπ + (q − r)·π(x̃), all columns at once
                out += self._rr_log_marginal(mech, np.asarray(cols), X, released)
                continue
            for c in cols:
                rel = np.flatnonzero(released[:, c])
                if not rel.size:
                    continue
                if isinstance(mech, DiscreteMechanism):
                    L = mech.log_likelihood_matrix(X[rel, c].astype(np.int64))
                    with np.errstate(divide="ignore"):
                        lp = np.log(self.disc[c, : mech.k])
                    out[rel] += np.logaddexp.reduce(L + lp, axis=1)
                elif self.numeric_kind == "gaussian" and getattr(mech, "noise_family", "") == "gaussian":
                    v = self.var[c] + mech.sigma**2
                    out[rel] += -0.5 * (X[rel, c] - self.mean[c]) ** 2 / v - 0.5 * np.log(2 * np.pi * v)
        return out

    def _rr_log_marginal(self, mech: RandomizedResponse, cols: np.ndarray, X: np.ndarray, released: np.ndarray):
        """Σ over ``cols`` of log p(x̃_d) per record for randomised response: Σ_x π(x)·p(x̃ | x) =
        r·Σ_x π(x) + (q − r)·π(x̃) in closed form (what the log-sum-exp over the k states gives,
        to round-off, in O(1) per release instead of O(k))."""
        rel = released[:, cols]
        xi = np.where(rel, X[:, cols], 0).astype(np.int64)
        pi = self.disc[cols, : mech.k]
        q, r = mech.keep_prob, mech.other_prob
        with np.errstate(divide="ignore"):
            lp = np.log(r * pi.sum(axis=1) + (q - r) * pi[np.arange(len(cols)), xi])
        return np.where(rel, lp, 0.0).sum(axis=1)

    def copy(self) -> SpreadPrior:
        c = lambda a: None if a is None else a.copy()  # noqa: E731
        return SpreadPrior(
            self.layout,
            self.disc.copy(),
            self.numeric_kind,
            c(self.mean),
            c(self.var),
            c(self.edges),
            c(self.probs),
            self.center,
            self.strength,
        )

    def smoothed(self, center: SpreadPrior, strength: float) -> SpreadPrior:
        out = self.copy()
        out.center, out.strength = center, float(strength)
        return out

    def estimate(self, stats: dict) -> SpreadPrior:
        """The prior the E-step's weighted samples imply (eq 65; weighted moments or bin counts for
        numeric columns), with the center's pseudo-counts added: the posterior mean under a
        Dirichlet (Normal-inverse-gamma moments for Gaussian columns) prior of weight ``strength``."""
        out = self.copy()
        layout, a, c = self.layout, self.strength, self.center
        disc = np.flatnonzero(layout.discrete)
        if disc.size:
            disc = _as_slice(disc)  # consecutive columns (all of them, usually): a slice, views not copies
            counts = stats["counts"] + (a * c.disc[disc] if c is not None and a > 0 else 0.0)
            out.disc[disc] = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1e-300)
        num = np.flatnonzero(~layout.discrete)
        if num.size:
            s0, s1, s2 = stats["s0"], stats["s1"], stats["s2"]
            if c is not None and a > 0:
                s0, s1 = s0 + a, s1 + a * c.mean[num] if self.numeric_kind == "gaussian" else s1
                if self.numeric_kind == "gaussian":
                    s2 = s2 + a * (c.var[num] + c.mean[num] ** 2)
            if self.numeric_kind == "gaussian":
                m = s1 / s0
                floor = 1e-3 * (layout.upper[num] - layout.lower[num]) ** 2 / 12.0
                out.mean[num] = m
                out.var[num] = np.maximum(s2 / s0 - m**2, floor)
            else:
                h = stats["hist"] + (a * c.probs[num] if c is not None and a > 0 else 0.0)
                out.probs[num] = h / h.sum(axis=1, keepdims=True)
        return out

    def blend(self, other: SpreadPrior, gamma: float) -> SpreadPrior:
        """(1 − γ)·self + γ·other: the stochastic-approximation step of the prior update."""
        out = self.copy()
        out.disc = (1 - gamma) * self.disc + gamma * other.disc
        if self.mean is not None:
            out.mean = (1 - gamma) * self.mean + gamma * other.mean
            out.var = (1 - gamma) * self.var + gamma * other.var
        if self.probs is not None:
            out.probs = (1 - gamma) * self.probs + gamma * other.probs
        return out

    def public(self) -> dict:
        """What users see as ``prior_``."""
        out: dict[str, Any] = {}
        d = self.layout.discrete
        if d.any():
            out["categorical"] = {int(j): self.disc[j, : self.layout.k[j]] for j in np.flatnonzero(d)}
        if (~d).any():
            cols = np.flatnonzero(~d)
            if self.numeric_kind == "gaussian":
                out["gaussian"] = {"columns": cols, "mean": self.mean[cols], "var": self.var[cols]}
            else:
                out["histogram"] = {"columns": cols, "edges": self.edges[cols], "probs": self.probs[cols]}
        return out


def _empty(layout: ColumnLayout, numeric_kind: str, n_bins: int) -> SpreadPrior:
    D = layout.n_features
    kmax = max(int(layout.k.max()), 1)
    disc = np.zeros((D, kmax))
    for j in np.flatnonzero(layout.discrete):
        disc[j, : layout.k[j]] = 1.0 / layout.k[j]
    p = SpreadPrior(layout, disc, numeric_kind)
    num = ~layout.discrete
    if numeric_kind == "gaussian":
        p.mean = np.where(num, 0.5 * (layout.lower + layout.upper), 0.0)
        p.var = np.where(num, (layout.upper - layout.lower) ** 2 / 12.0, 1.0)
    else:
        lo = np.where(num, layout.lower, 0.0)
        hi = np.where(num, layout.upper, 1.0)
        p.edges = np.linspace(lo, hi, n_bins + 1, axis=-1)
        p.probs = np.full((D, n_bins), 1.0 / n_bins)
    return p


def flat_prior(layout: ColumnLayout, numeric_kind: str = "histogram", n_bins: int = 1) -> SpreadPrior:
    """Uniform over each discrete column's states and over each numeric column's bounds."""
    return _empty(layout, numeric_kind, n_bins)


def given_prior(layout: ColumnLayout, prior: Any) -> SpreadPrior:
    """A user-supplied ("true"/public) prior: CategoricalPrior or (D, K) array for all-discrete
    records, GaussianPrior / HistogramPrior for all-numeric ones, or a list with one per column."""
    D = layout.n_features
    if isinstance(prior, (list, tuple)):
        if len(prior) != D:
            raise ValidationError("prior", f"a per-column list must have {D} entries, got {len(prior)}")
        kinds = {type(p) for p in prior if not isinstance(p, CategoricalPrior)}
        if len(kinds) > 1:
            raise ValidationError("prior", "numeric columns must all use the same prior type")
        kind = "histogram" if kinds == {HistogramPrior} else "gaussian"
        n_bins = next((p.n_bins for p in prior if isinstance(p, HistogramPrior)), 1)
        out = _empty(layout, kind, n_bins)
        for j, pj in enumerate(prior):
            _set_column(out, layout, j, pj)
        return out
    if isinstance(prior, (CategoricalPrior, np.ndarray)):
        if not layout.discrete.all():
            raise ValidationError(
                "prior",
                "a categorical prior needs all feature columns discrete; pass a per-column list for mixed records",
            )
        probs = prior.probs if isinstance(prior, CategoricalPrior) else CategoricalPrior(prior).probs
        probs = np.broadcast_to(probs, (D, probs.shape[-1])) if probs.ndim == 1 else probs
        if probs.shape[0] != D or np.any(layout.k != probs.shape[1]):
            raise ValidationError(
                "prior",
                f"categorical prior must have shape ({D}, k) matching the mechanism's k per column, got {probs.shape}",
            )
        out = _empty(layout, "gaussian", 1)
        out.disc = np.array(probs, dtype=float)
        return out
    if isinstance(prior, GaussianPrior):
        out = _empty(layout, "gaussian", 1)
        num = ~layout.discrete
        out.mean = np.where(num, np.broadcast_to(prior.mean, (D,)), out.mean)
        out.var = np.where(num, np.broadcast_to(prior.var, (D,)), out.var)
        return out
    if isinstance(prior, HistogramPrior):
        out = _empty(layout, "histogram", prior.n_bins)
        out.edges = np.array(np.broadcast_to(prior.edges, (D, prior.n_bins + 1)), dtype=float)
        out.probs = np.array(np.broadcast_to(prior.probs, (D, prior.n_bins)), dtype=float)
        return out
    raise ValidationError(
        "prior",
        "must be 'flat', 'learned', 'naive-bayes', a CategoricalPrior/array, GaussianPrior, HistogramPrior, "
        "EmpiricalPrior or per-column list; "
        f"got {type(prior).__name__}",
    )


def _set_column(out: SpreadPrior, layout: ColumnLayout, j: int, pj: Any) -> None:
    if layout.discrete[j]:
        probs = pj.probs if isinstance(pj, CategoricalPrior) else CategoricalPrior(pj).probs
        if probs.shape != (layout.k[j],):
            raise ValidationError(
                f"prior[{j}]", f"must have {layout.k[j]} state probabilities, got shape {probs.shape}"
            )
        out.disc[j, : layout.k[j]] = probs
    elif isinstance(pj, GaussianPrior) and out.numeric_kind == "gaussian":
        out.mean[j], out.var[j] = float(pj.mean), float(pj.var)
    elif isinstance(pj, HistogramPrior) and out.numeric_kind == "histogram":
        out.edges[j], out.probs[j] = pj.edges, pj.probs
    else:
        raise ValidationError(
            f"prior[{j}]", f"column {j} is numeric: needs a GaussianPrior or HistogramPrior, got {type(pj).__name__}"
        )


def marginal_mle_prior(
    layout: ColumnLayout,
    pools: list[tuple[RecordMechanism, np.ndarray]],
    numeric_kind: str = "gaussian",
    n_bins: int = 10,
    max_iter: int = 200,
    tol: float = 1e-6,
) -> SpreadPrior:
    """Per-column maximum-likelihood prior from the releases alone (deconvolution, no labels):
    the EM fixed point of Σ_n log Σ_x p(x̃_n[d] | x) p(x | d) for each column d, over the clients
    that released column d (NaN: not released). It is the center of the learned prior and its
    starting point; spread-EM then refines it jointly with the model (eq 65)."""
    out = _empty(layout, numeric_kind, n_bins)
    if layout.discrete.any():
        out.disc = _discrete_mle(layout, pools, out.disc, max_iter, tol)
    num_cols = np.flatnonzero(~layout.discrete)
    if num_cols.size and numeric_kind == "gaussian":
        s1, s2, nv, n = (np.zeros(layout.n_features) for _ in range(4))
        for rm, Xt in pools:
            for mech, cols in rm.column_groups():
                if not isinstance(mech, DiscreteMechanism):
                    for c in cols:
                        x = Xt[:, c].astype(float)
                        x = x[~np.isnan(x)]
                        s1[c] += x.sum()
                        s2[c] += (x**2).sum()
                        nv[c] += mech.noise_std**2 * x.size
                        n[c] += x.size
        n = np.maximum(n, 1)
        m = s1[num_cols] / n[num_cols]
        signal = s2[num_cols] / n[num_cols] - m**2 - nv[num_cols] / n[num_cols]
        floor = 1e-3 * (layout.upper[num_cols] - layout.lower[num_cols]) ** 2 / 12.0
        out.mean[num_cols] = np.clip(m, layout.lower[num_cols], layout.upper[num_cols])
        out.var[num_cols] = np.maximum(signal, floor)
    elif num_cols.size:
        for _ in range(min(max_iter, 50)):
            acc = np.zeros_like(out.probs)
            n = np.zeros(layout.n_features)
            for rm, Xt in pools:
                for mech, cols in rm.column_groups():
                    if isinstance(mech, DiscreteMechanism):
                        continue
                    for c in cols:
                        x = Xt[:, c].astype(float)
                        x = x[~np.isnan(x)]
                        if x.size:
                            post = mech.posterior(x, HistogramPrior(out.edges[c], out.probs[c]))
                            acc[c] += post.bin_proba().reshape(x.size, -1).sum(0)
                            n[c] += x.size
            new = acc[num_cols] / np.maximum(n[num_cols, None], 1)
            delta = np.max(np.abs(new - out.probs[num_cols]))
            out.probs[num_cols] = np.where(n[num_cols, None] > 0, new, out.probs[num_cols])
            if delta < tol:
                break
    return out


def _discrete_mle(layout: ColumnLayout, pools, start: np.ndarray, max_iter: int, tol: float) -> np.ndarray:
    """EM π ← π ⊙ mean_n p(x̃_n | ·)/(p(x̃_n | ·)·π) per discrete column, over the released values:
    through released-value counts for matrix oracles (randomised response; vectorised over the
    columns a mechanism covers), through each record's likelihood row otherwise."""
    counts_tasks, row_tasks = [], []
    for rm, Xt in pools:
        for mech, cols in rm.groups():
            if not isinstance(mech, DiscreteMechanism):
                continue
            x = Xt[:, cols]
            if isinstance(mech, MatrixMechanism):
                counts_tasks.append((mech, np.asarray(cols), release_counts(mech, x)))
            else:
                rel = ~np.isnan(x) if x.dtype.kind == "f" else np.ones(x.shape, bool)
                for j, c in enumerate(cols):
                    xs = x[rel[:, j], j]
                    if xs.size:
                        L = np.exp(mech.log_likelihood_matrix(xs.astype(np.int64)))  # (n_c, k)
                        row_tasks.append((c, L / L.max(axis=1, keepdims=True)))
    return _discrete_em(layout, counts_tasks, row_tasks, start, max_iter, tol)


def release_counts(mech: MatrixMechanism, x: np.ndarray) -> np.ndarray:
    """Released-value counts (len(cols), k) of the columns x (n, len(cols)) a matrix mechanism
    released (NaN: not released): the data of ``_discrete_mle`` for that mechanism. Integers, so the
    counts of blocks of records add up to the whole pool's exactly, in any order."""
    k = mech.k
    rel = ~np.isnan(x) if x.dtype.kind == "f" else np.ones(x.shape, bool)
    flat = np.where(rel, x, 0).astype(np.int64) + np.arange(x.shape[1]) * k
    return np.bincount(flat[rel], minlength=x.shape[1] * k).reshape(x.shape[1], k).astype(float)


def marginal_mle_prior_from_counts(
    layout: ColumnLayout,
    groups: list,
    numeric_kind: str = "gaussian",
    n_bins: int = 10,
    max_iter: int = 200,
    tol: float = 1e-6,
) -> SpreadPrior:
    """``marginal_mle_prior`` of all-discrete records released by matrix mechanisms, from each
    record-mechanism group's released-value counts [(record mechanism, counts (D, Kmax))]: the same
    EM on the same numbers in the same order (groups, then each one's column groups), so the same
    prior (``fit_pool`` counts them on the shards)."""
    tasks = []
    for rm, counts in groups:
        for mech, cols in rm.groups():
            if not isinstance(mech, MatrixMechanism):
                raise ValidationError(
                    "prior",
                    "fit_pool learns the prior from released-value counts, which needs matrix mechanisms "
                    f"(randomised response, ...) on every column; got {type(mech).__name__}: use fit, or a "
                    "flat or given prior",
                )
            tasks.append((mech, np.asarray(cols), counts[cols, : mech.k]))
    out = _empty(layout, numeric_kind, n_bins)
    out.disc = _discrete_em(layout, tasks, [], out.disc, max_iter, tol)
    return out


def _discrete_em(layout: ColumnLayout, counts_tasks, row_tasks, start: np.ndarray, max_iter: int, tol: float):
    """The EM of ``_discrete_mle`` on [(mechanism, columns, counts)] and [(column, likelihood rows)]:
    ``estimate_frequencies``' deconvolution update (``deconvolution_factor``) for every column at once,
    its numerators summed over the pools before they are normalised (randomised response in closed
    form, P = (q − r)I + r11ᵀ; likelihood rows as Σ_i L_i / (L_i·π), the same factor with unit weights
    summed in another order, kept so that the learned priors of committed results stay bit for bit)."""
    pis = start.copy()
    num = np.zeros_like(pis)
    # a contiguous run of columns (one mechanism for all: the usual case) as a slice: views, not copies
    counts_tasks = [(m, _as_slice(cols), counts) for m, cols, counts in counts_tasks]
    for _ in range(max_iter):
        num[:] = 0.0
        for mech, cols, counts in counts_tasks:
            k = mech.k
            pi = pis[cols, :k]
            if isinstance(mech, RandomizedResponse):
                q, r = mech.keep_prob, mech.other_prob
                ratio = counts / (r + (q - r) * pi)  # f̃ / (Pπ)
                num[cols, :k] += pi * (r * ratio.sum(axis=1, keepdims=True) + (q - r) * ratio)
            else:
                num[cols, :k] += pi * deconvolution_factor(pi, mech.matrix, counts)
        for c, L in row_tasks:
            k = L.shape[1]
            pi = pis[c, :k]
            num[c, :k] += pi * (L / (L @ pi)[:, None]).sum(axis=0)
        tot = num.sum(axis=1, keepdims=True)
        new = np.where(tot > 0, num / np.maximum(tot, 1e-300), pis)
        new[~layout.discrete] = pis[~layout.discrete]
        delta = np.max(np.abs(new - pis))
        pis = new
        if delta < tol:
            break
    return pis


def _as_slice(cols: np.ndarray):
    """``cols`` as a slice when it is a run of consecutive columns (indexing gives views), else as is."""
    cols = np.asarray(cols)
    if cols.size and np.array_equal(cols, np.arange(cols[0], cols[0] + cols.size)):
        return slice(int(cols[0]), int(cols[0]) + cols.size)
    return cols
