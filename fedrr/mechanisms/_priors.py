"""Factorised priors p(x[d]) over one field's values: what the server assumes (or learns)
about clean data when it inverts a mechanism (Barber §5.2 eq 62)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array
from ..errors import ValidationError


def _normalised(field: str, probs: np.ndarray, axis: int = -1) -> np.ndarray:
    if np.any(probs < 0):
        raise ValidationError(field, "probabilities must be >= 0")
    total = probs.sum(axis=axis, keepdims=True)
    if np.any(np.abs(total - 1.0) > 1e-6):
        raise ValidationError(
            field,
            f"probabilities must sum to 1 along the last axis (got sums in [{total.min():.6g}, {total.max():.6g}])",
        )
    return probs / total


@dataclass(frozen=True, eq=False)
class CategoricalPrior:
    """p(x = s) for states s = 0..k-1; ``probs`` has shape (k,) or (d, k) (one row per feature)."""

    probs: np.ndarray

    def __post_init__(self):
        p = as_float_array("prior.probs", self.probs, ndim=(1, 2))
        object.__setattr__(self, "probs", _normalised("prior.probs", p))

    @classmethod
    def flat(cls, k: int, d: int | None = None) -> CategoricalPrior:
        shape = (k,) if d is None else (d, k)
        return cls(np.full(shape, 1.0 / k))

    @property
    def k(self) -> int:
        return self.probs.shape[-1]


@dataclass(frozen=True, eq=False)
class GaussianPrior:
    """x[d] ~ N(mean[d], var[d]); scalars broadcast over features."""

    mean: np.ndarray
    var: np.ndarray

    def __post_init__(self):
        m = as_float_array("prior.mean", self.mean, ndim=(0, 1))
        v = as_float_array("prior.var", self.var, ndim=(0, 1))
        if np.any(v <= 0):
            raise ValidationError("prior.var", "variances must be > 0")
        object.__setattr__(self, "mean", m)
        object.__setattr__(self, "var", v)


@dataclass(frozen=True, eq=False)
class HistogramPrior:
    """Piecewise-uniform density: mass probs[..., b] spread uniformly on [edges[..., b], edges[..., b+1]).

    ``edges`` (B+1,) shared or (d, B+1); ``probs`` (B,) or (d, B).
    """

    edges: np.ndarray
    probs: np.ndarray

    def __post_init__(self):
        e = as_float_array("prior.edges", self.edges, ndim=(1, 2))
        p = as_float_array("prior.probs", self.probs, ndim=(1, 2))
        if e.shape[-1] < 2 or np.any(np.diff(e, axis=-1) <= 0):
            raise ValidationError("prior.edges", "must be strictly increasing with at least 2 edges per feature")
        if p.shape[-1] != e.shape[-1] - 1:
            raise ValidationError("prior.probs", f"needs {e.shape[-1] - 1} bins to match edges, got {p.shape[-1]}")
        object.__setattr__(self, "edges", e)
        object.__setattr__(self, "probs", _normalised("prior.probs", p))

    @classmethod
    def uniform(cls, lower, upper, n_bins: int) -> HistogramPrior:
        """Flat prior on [lower, upper] (per feature if arrays) with n_bins equal bins."""
        lo, hi = np.broadcast_arrays(np.asarray(lower, float), np.asarray(upper, float))
        edges = np.linspace(lo, hi, n_bins + 1, axis=-1)
        return cls(edges, np.full(edges.shape[:-1] + (n_bins,), 1.0 / n_bins))

    @property
    def n_bins(self) -> int:
        return self.probs.shape[-1]


@dataclass(frozen=True, eq=False)
class EmpiricalPrior:
    """A joint prior over whole discrete records: the empirical distribution of ``rows`` (M, d),
    clean feature vectors of a public sample (Barber §5.2: when a public dataset for a similar
    problem exists, "set the prior to this known model"). Unlike the factorised priors it keeps how
    attributes co-occur, which records that release one sampled attribute cannot show.

    ``smoothing``: α pseudo-rows drawn from naive Bayes's joint of the releases (the fit's
    ``prior="naive-bayes"``, seeded by its ``random_state``) join the M rows, so the prior is the
    mixture (M · empirical + α · naive Bayes) / (M + α), as a Dirichlet process with concentration
    α centred on what the releases identify: a sparse sample's unseen combinations get mass, and
    more public rows weigh more. 0 (the default): the rows alone."""

    rows: np.ndarray
    smoothing: int = 0

    def __post_init__(self):
        r = as_float_array("prior.rows", self.rows, ndim=(2,))
        if r.shape[0] < 1 or r.shape[1] < 1:
            raise ValidationError("prior.rows", f"needs at least one row and one column, got shape {r.shape}")
        if np.any(r < 0) or np.any(r != np.round(r)):
            raise ValidationError("prior.rows", "must hold discrete states 0..k-1 (non-negative integers)")
        object.__setattr__(self, "rows", r.astype(np.int64))
        a = self.smoothing
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or a < 0:
            raise ValidationError("prior.smoothing", f"must be an integer >= 0 (pseudo-rows), got {a!r}")
        object.__setattr__(self, "smoothing", int(a))
