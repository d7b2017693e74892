"""The model's inputs: which feature columns are discrete (and their k) or numeric (and their
bounds), and how a discrete state enters the logistic model — ``"unit"`` s/(k−1), ``"index"`` s,
or ``"onehot"`` k−1 indicators (state 0 the reference), as a user would model a categorical
attribute; ``"auto"`` (the estimators' default) is "onehot" up to ``AUTO_ONEHOT_INPUTS`` inputs, else
"unit". The same ``Design`` decodes clean records, sampled states and releases, and gives the
lookup tables the compiled E-step uses (logit contribution of every state of every column)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from ...errors import ValidationError
from ...mechanisms import DiscreteMechanism, RecordMechanism

ENCODINGS = ("unit", "index", "onehot", "auto")
#: most model inputs a one-hot design may have (a dense (samples × inputs) matrix is built)
MAX_ONEHOT_INPUTS = 4096
#: "auto" one-hot encodes the discrete attributes when that gives at most this many model inputs,
#: else "unit": a few categorical attributes (Adult's 12: 94 inputs) get a coefficient per state, as
#: naive Bayes's log-odds has; many ordered states (MNIST's 784 pixels × 256: 199,920) one slope each
AUTO_ONEHOT_INPUTS = 512


@dataclass(frozen=True)
class ColumnLayout:
    """Discrete columns (k > 0) and numeric columns (bounds) — shared by every record mechanism in
    a pool (they may differ in noise level and oracle, not in domain)."""

    n_features: int
    k: np.ndarray  # (D,) number of states, 0 for numeric columns
    lower: np.ndarray  # (D,) NaN for discrete
    upper: np.ndarray

    @property
    def discrete(self) -> np.ndarray:
        return self.k > 0

    @property
    def kmax(self) -> int:
        return max(int(self.k.max()), 1)

    @classmethod
    def from_mechanism(cls, rm: RecordMechanism) -> ColumnLayout:
        D = rm.n_features
        k = np.zeros(D, int)
        lo = np.full(D, np.nan)
        hi = np.full(D, np.nan)
        for mech, cols in rm.column_groups():
            if isinstance(mech, DiscreteMechanism):
                k[cols] = mech.k
            elif hasattr(mech, "lower") and hasattr(mech, "upper"):
                lo[cols] = np.broadcast_to(mech.lower, cols.shape)
                hi[cols] = np.broadcast_to(mech.upper, cols.shape)
            else:
                raise ValidationError("mechanism", f"unsupported feature mechanism {type(mech).__name__}")
        return cls(D, k, lo, hi)

    @classmethod
    def from_states(cls, k) -> ColumnLayout:
        k = np.asarray(k, int)
        return cls(k.size, k, np.full(k.size, np.nan), np.full(k.size, np.nan))

    def same_domain(self, other: ColumnLayout) -> bool:
        nan = lambda a: np.nan_to_num(a, nan=-1)  # noqa: E731
        return (
            self.n_features == other.n_features
            and np.array_equal(self.k, other.k)
            and np.array_equal(nan(self.lower), nan(other.lower))
            and np.array_equal(nan(self.upper), nan(other.upper))
        )


def _onehot_widths(k: np.ndarray) -> np.ndarray:
    """Model inputs per column of a one-hot design: k − 1 per discrete column (1 if binary), 1 per numeric."""
    return np.where(k > 0, np.maximum(k - 1, 1), 1)


@dataclass(frozen=True, eq=False)
class Design:
    """Model inputs from a layout and an encoding. ``columns[d]`` are the model inputs of feature d."""

    layout: ColumnLayout
    encoding: str = "unit"

    def __post_init__(self):
        if self.encoding not in ENCODINGS:
            raise ValidationError("encoding", f"must be one of {ENCODINGS}, got {self.encoding!r}")
        if self.encoding == "auto":  # resolved here, once: ``encoding`` is what the model uses
            onehot = int(_onehot_widths(self.layout.k).sum())
            object.__setattr__(self, "encoding", "onehot" if onehot <= AUTO_ONEHOT_INPUTS else "unit")
        if self.encoding == "onehot" and self.n_inputs > MAX_ONEHOT_INPUTS:
            raise ValidationError(
                "encoding",
                f"'onehot' would give {self.n_inputs:,} model inputs (Σ(k−1) over the "
                f"discrete columns), more than {MAX_ONEHOT_INPUTS:,}; use 'unit' for attributes "
                "with many ordered states",
            )

    def __getstate__(self) -> dict:
        """Its fields only: the cached tables are rebuilt where it is unpickled (a Ray actor's shards),
        so they are that process's own, not read-only views of Ray's object store, for which numba
        would compile its kernels again (``_runtime._ray_actor._own``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @cached_property
    def widths(self) -> np.ndarray:
        if self.encoding == "onehot":
            return _onehot_widths(self.layout.k)
        return np.ones(self.layout.n_features, int)

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.widths)[:-1]]).astype(int)

    @property
    def n_inputs(self) -> int:
        return int(self.widths.sum())

    @cached_property
    def scalar(self) -> bool:
        """One model input per feature (unit / index, or one-hot of binary attributes only)."""
        return bool(np.all(self.widths == 1))

    @cached_property
    def state_table(self) -> np.ndarray:
        """E[d, s] (D, Kmax) float32: the model input of state s of discrete column d (scalar designs)."""
        k, K = self.layout.k, self.layout.kmax
        s = np.arange(K, dtype=float)[None, :]
        if self.encoding == "unit":
            E = s / np.maximum(k[:, None] - 1.0, 1.0)
        else:  # index, and one-hot of a binary attribute (the indicator of state 1)
            E = np.broadcast_to(s, (k.size, K)).copy()
        return np.where(k[:, None] > 0, E, 0.0).astype(np.float32)

    def logit_table(self, coef: np.ndarray) -> np.ndarray:
        """W[r, d, s] (Rn, D, Kmax): the logit contribution of state s of discrete column d."""
        k, K = self.layout.k, self.layout.kmax
        if self.scalar:
            return coef[:, :, None] * self.state_table[None, :, :].astype(float)
        W = np.zeros((coef.shape[0], k.size, K))
        for d in np.flatnonzero(k > 0):
            o = self.offsets[d]
            W[:, d, 1 : k[d]] = coef[:, o : o + k[d] - 1]
        return W

    def decode(self, X: np.ndarray) -> np.ndarray:
        """Model inputs (n, n_inputs) float32 of clean records or sampled states (n, D); numeric
        columns pass through."""
        X = np.asarray(X)
        n, D = X.shape
        disc = self.layout.discrete
        if self.scalar:
            out = np.asarray(X, dtype=np.float32).copy()
            if disc.any():
                cols = np.flatnonzero(disc)
                out[:, cols] = self.state_table[cols[None, :], X[:, cols].astype(np.int64)]
            return out
        from ._kernels import onehot_fill  # numba: compiled at first use, not when spread is imported

        out = np.zeros((n, self.n_inputs), np.float32)
        offsets = np.asarray(self.offsets, np.int64)
        dc, nc = np.flatnonzero(disc), np.flatnonzero(~disc)
        if dc.size:  # state s > 0 of column d sets indicator offsets[d] + s − 1 (state 0: none)
            onehot_fill(X, dc, offsets[dc], out)
        if nc.size:
            out[:, offsets[nc]] = X[:, nc]
        return out

    def feature_coef(self, coef: np.ndarray) -> list[np.ndarray]:
        """Per feature, its block of coefficients (Rn, width): for reports."""
        return [coef[:, o : o + w] for o, w in zip(self.offsets, self.widths)]
