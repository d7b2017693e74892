"""The factorised input prior p(x) = Π_d p(x[d]) of spread-EM (Barber §5.2 eq 62), stored per
column: categorical probabilities for discrete columns (zero-padded to the largest k),
Gaussian or histogram parameters for numeric columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..mechanisms import CategoricalPrior, GaussianPrior, HistogramPrior, RandomizedResponse, RecordMechanism
from ..mechanisms.discrete import _DiscreteMechanism
from ..mechanisms.numeric import _AdditiveNoise


@dataclass
class ColumnLayout:
    """Which columns are discrete (and their k) or numeric (and their bounds) — shared by every
    record mechanism in a pool (they may differ in noise level, not in domain)."""

    n_features: int
    k: np.ndarray  # (D,) number of states, 0 for numeric columns
    lower: np.ndarray  # (D,) NaN for discrete
    upper: np.ndarray

    @property
    def discrete(self) -> np.ndarray:
        return self.k > 0

    @classmethod
    def from_mechanism(cls, rm: RecordMechanism) -> ColumnLayout:
        D = rm.n_features
        k = np.zeros(D, int)
        lo = np.full(D, np.nan)
        hi = np.full(D, np.nan)
        for mech, cols in rm.groups():
            if isinstance(mech, _DiscreteMechanism):
                k[cols] = mech.k
            elif isinstance(mech, _AdditiveNoise):
                lo[cols] = np.broadcast_to(mech.lower, cols.shape)
                hi[cols] = np.broadcast_to(mech.upper, cols.shape)
            else:  # pragma: no cover - all built-in mechanisms are one of the two
                raise ValidationError("mechanism", f"unsupported feature mechanism {type(mech).__name__}")
        return cls(D, k, lo, hi)

    def same_domain(self, other: ColumnLayout) -> bool:
        return (
            self.n_features == other.n_features
            and np.array_equal(self.k, other.k)
            and np.array_equal(np.nan_to_num(self.lower, nan=-1), np.nan_to_num(other.lower, nan=-1))
            and np.array_equal(np.nan_to_num(self.upper, nan=-1), np.nan_to_num(other.upper, nan=-1))
        )

    def decode(self, states: np.ndarray, cols: np.ndarray, encoding: str) -> np.ndarray:
        """Numeric model input of discrete states: s/(k−1) ("unit") or s ("index")."""
        if encoding == "index":
            return states.astype(float)
        return states / (self.k[cols] - 1.0)


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

    def for_group(self, mech, cols: np.ndarray):
        if isinstance(mech, _DiscreteMechanism):
            return CategoricalPrior(self.disc[cols, : mech.k])
        if self.numeric_kind == "gaussian":
            return GaussianPrior(self.mean[cols], self.var[cols])
        return HistogramPrior(self.edges[cols], self.probs[cols])

    def copy(self) -> SpreadPrior:
        c = lambda a: None if a is None else a.copy()
        return SpreadPrior(
            self.layout, self.disc.copy(), self.numeric_kind, c(self.mean), c(self.var), c(self.edges), c(self.probs)
        )

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
        f"must be 'flat', 'learned', a CategoricalPrior/array, GaussianPrior, HistogramPrior or per-column list; got {type(prior).__name__}",
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
    the exact EM fixed point of Σ_n log Σ_x p(x̃_n[d] | x) p(x | d) for each column d. It
    initialises spread-EM's learned prior, which the EM then refines jointly (eq 65)."""
    out = _empty(layout, numeric_kind, n_bins)
    # discrete columns: EM π ← π ⊙ Pᵀ(f̃ / Pπ), vectorised over columns sharing a mechanism
    disc_cols = np.flatnonzero(layout.discrete)
    if disc_cols.size:
        tasks = []  # (mechanism, columns, counts) once: the counts are all EM needs
        for rm, Xt in pools:
            for mech, cols in rm.groups():
                if isinstance(mech, _DiscreteMechanism):
                    tasks.append((mech, cols, _column_counts(Xt[:, cols].astype(np.int64), mech.k)))
        pis = out.disc.copy()
        num = np.zeros_like(out.disc)
        for _ in range(max_iter):
            num[:] = 0.0
            for mech, cols, counts in tasks:
                k = mech.k
                pi = pis[cols, :k]
                if isinstance(mech, RandomizedResponse):
                    q, r = mech.keep_prob, mech.other_prob
                    ratio = counts / (r + (q - r) * pi)  # f̃ / (Pπ)
                    num[cols, :k] += pi * (r * ratio.sum(axis=1, keepdims=True) + (q - r) * ratio)
                else:
                    P = mech.matrix
                    num[cols, :k] += pi * ((counts / (pi @ P.T)) @ P)
            new = num / np.maximum(num.sum(axis=1, keepdims=True), 1e-300)
            new[~layout.discrete] = pis[~layout.discrete]
            delta = np.max(np.abs(new - pis))
            pis = new
            if delta < tol:
                break
        out.disc = pis
    num_cols = np.flatnonzero(~layout.discrete)
    if num_cols.size:
        if numeric_kind == "gaussian":
            xs, noise_var = [], []
            for rm, Xt in pools:
                for mech, cols in rm.groups():
                    if isinstance(mech, _AdditiveNoise):
                        xs.append((cols, Xt[:, cols].astype(float), mech.noise_std**2))
            s1 = np.zeros(layout.n_features)
            s2 = np.zeros(layout.n_features)
            nv = np.zeros(layout.n_features)
            n = np.zeros(layout.n_features)
            for cols, x, v in xs:
                s1[cols] += x.sum(0)
                s2[cols] += (x**2).sum(0)
                nv[cols] += v * x.shape[0]
                n[cols] += x.shape[0]
            m = s1[num_cols] / n[num_cols]
            total_var = s2[num_cols] / n[num_cols] - m**2
            signal = total_var - nv[num_cols] / n[num_cols]
            floor = 1e-3 * (layout.upper[num_cols] - layout.lower[num_cols]) ** 2 / 12.0
            out.mean[num_cols] = m
            out.var[num_cols] = np.maximum(signal, floor)
        else:
            for _ in range(min(max_iter, 50)):
                acc = np.zeros_like(out.probs)
                n = np.zeros(layout.n_features)
                for rm, Xt in pools:
                    for mech, cols in rm.groups():
                        if isinstance(mech, _AdditiveNoise):
                            post = mech.posterior(
                                Xt[:, cols].astype(float), HistogramPrior(out.edges[cols], out.probs[cols])
                            )
                            acc[cols] += post.bin_proba().reshape(Xt.shape[0], len(cols), -1).sum(0)
                            n[cols] += Xt.shape[0]
                new = acc[num_cols] / n[num_cols, None]
                delta = np.max(np.abs(new - out.probs[num_cols]))
                out.probs[num_cols] = new
                if delta < tol:
                    break
    return out


def _column_counts(states: np.ndarray, k: int) -> np.ndarray:
    """(n, d) states -> (d, k) counts, vectorised with one bincount."""
    n, d = states.shape
    flat = (states + np.arange(d) * k).ravel()
    return np.bincount(flat, minlength=d * k).reshape(d, k).astype(float)
