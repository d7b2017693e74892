"""A whole record's release — what one person sends once — and the one contract every design of it
implements (``RecordRelease``: sampler, likelihood, ε, spec), with the one spec registry the pool, the
release ledger and the federation rebuild a reply's mechanism through (``record_mechanism_from_spec``).

The split design lives here: ``RecordMechanism``, one mechanism per feature field plus one for the
label, and the record's LDP cost by basic composition over fields (ε and δ add up) — or, with
attribute sampling (``n_sampled = m``), over the m most expensive fields only. The paired design
(``PairedRecordMechanism``, (attribute, label) pairs through one oracle) lives in ``_paired``."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._validation import as_array, as_state_array, check_int, first_true
from ..errors import ValidationError
from ._base import Mechanism, _from_kind, mechanism_from_spec, register, registry
from ._discrete import DiscreteMechanism

#: most feature columns a record may have (a scalar mechanism makes one field per column; a spec
#: with n_features = 10**18 must not make the server build them)
MAX_FEATURES = 10**6


class RecordRelease(ABC):
    """The contract of a whole record's mechanism, whatever its design: one object that is the client's
    sampler (``release``), the server's likelihood (``log_likelihood``) and the statement of its own LDP
    guarantee (``epsilon``, ``delta``, ``epsilon_breakdown``), rebuilt from its spec
    (``record_mechanism_from_spec``). Releases are (X_tilde (n, n_features) with NaN where a field was
    not released, y_tilde (n,)); code downstream reads what varies between designs from the properties
    below, never from the class it holds."""

    #: the spec kind (one registry with the field mechanisms': ``mechanism_from_spec`` rebuilds it too)
    kind: ClassVar[str] = ""
    #: feature columns of a record
    n_features: int
    #: fields (or attributes) each person releases, drawn uniformly; None: all of them
    n_sampled: int | None
    #: the label's own mechanism (None: the label has no channel of its own)
    label: Mechanism | None
    #: True when the label travels only inside (attribute, label) pair reports: every released column
    #: of X_tilde is a pair report, and y_tilde is all NaN
    label_in_pairs: ClassVar[bool] = False

    @property
    def uses_label(self) -> bool:
        """True when the clean label enters the release (its own channel, or inside the pairs): ``release``
        and ``validate_input`` then need ``y``."""
        return self.label is not None or self.label_in_pairs

    # --- accounting -------------------------------------------------------------------------
    @property
    @abstractmethod
    def epsilon(self) -> float:
        """ε of one person's whole release."""

    @property
    @abstractmethod
    def delta(self) -> float:
        """δ of one person's whole release."""

    @property
    @abstractmethod
    def features_epsilon(self) -> float:
        """ε of the feature columns' releases (the whole record's when the label is inside them)."""

    @abstractmethod
    def epsilon_breakdown(self) -> dict[str, Any]:
        """Where the budget goes: at least ``features``, ``label`` and ``record`` (= ``epsilon``)."""

    # --- validation -------------------------------------------------------------------------
    @abstractmethod
    def validate_input(self, X: Any, y: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Check clean records (X (n, n_features), y (n,) or None) lie in the mechanism's domain; returns
        them as arrays (y None when the release does not use the label)."""

    @abstractmethod
    def validate_release(self, X_tilde: Any, y_tilde: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Check releases could have come from this mechanism; returns them as arrays."""

    @abstractmethod
    def released_fields(self, X_tilde: Any) -> np.ndarray:
        """(n, F) bool: which fields (attributes) each release carries, the NaN pattern checked."""

    # --- client and server sides ------------------------------------------------------------
    @abstractmethod
    def release(self, X: Any, y: Any = None, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """Client side: one noisy release of each record (X, y). Nothing clean is returned."""

    @abstractmethod
    def log_likelihood(self, X_tilde: Any, y_tilde: Any, X: Any, y: Any) -> np.ndarray:
        """Server side: the exact log p(x̃, ỹ | x, y) per record (n,)."""

    def domain_record(self) -> RecordMechanism:
        """A ``RecordMechanism`` on this mechanism's *clean* domain, for code that needs only the domain
        (encoding clean records, point guesses, a model's inputs), never as a likelihood."""
        raise NotImplementedError

    # --- specs ------------------------------------------------------------------------------
    @abstractmethod
    def to_spec(self) -> dict:
        """A JSON-serialisable description; ``record_mechanism_from_spec`` inverts it exactly."""

    @classmethod
    @abstractmethod
    def from_spec(cls, spec: dict) -> RecordRelease:
        """The mechanism a ``to_spec()`` describes."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecordRelease) and self.kind == other.kind and self.to_spec() == other.to_spec()

    def __hash__(self) -> int:
        return hash(repr(self.to_spec()))


#: the classes of a whole record's mechanism (``isinstance(m, RECORD_MECHANISMS)``): the contract
RECORD_MECHANISMS = (RecordRelease,)


def is_record_mechanism(m: Any) -> bool:
    """True for a whole record's mechanism (any ``RecordRelease``: split or paired)."""
    return isinstance(m, RecordRelease)


def is_paired(m: Any) -> bool:
    """True for a record mechanism whose label travels inside pair reports (``label_in_pairs``;
    ``y_tilde`` is all NaN)."""
    return isinstance(m, RecordRelease) and m.label_in_pairs


def record_mechanism_from_spec(spec: Any) -> RecordRelease:
    """Rebuild a record mechanism from its ``to_spec()``; a spec of another kind (a field mechanism's, or
    an unknown one) is refused (``ValidationError("spec.kind", ...)``), so a reply cannot claim a plain
    field mechanism as the mechanism of a whole record. A spec without ``kind`` is read as a
    RecordMechanism's, as pools written before paired releases existed hold only those."""
    if not isinstance(spec, dict):
        raise ValidationError("spec", f"must be a dict (a record mechanism spec), got {type(spec).__name__}")
    kinds = {k: c for k, c in registry().items() if issubclass(c, RecordRelease)}
    kind = spec.get("kind", RecordMechanism.kind)
    unknown = f"must be a record mechanism, one of {sorted(kinds)}, got {kind!r}"
    return _from_kind(kinds, kind, spec, unknown)


@dataclass(frozen=True)
class Field:
    """A mechanism and the feature columns one release of it covers."""

    mechanism: Mechanism
    columns: tuple[int, ...]


def records_array(X: Any, n_features: int, field: str) -> np.ndarray:
    """``X`` as a 2-d array (n_records, n_features); one record may come as a 1-d row."""
    arr = as_array(field, X, f"must be an array of shape (n_records, {n_features})")
    if arr.ndim == 1 and arr.shape[0] == n_features:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != n_features:
        raise ValidationError(field, f"must have shape (n_records, {n_features}), got {np.shape(X)}")
    return arr


def column_groups(groups: list[tuple[Mechanism, np.ndarray]]) -> list[tuple[Mechanism, np.ndarray]]:
    """A record's field groups split into per-column scalar mechanisms, for the server's per-column work
    (posteriors, priors) on records released as blocks (e.g. one joint Gaussian on all features): like
    ``RecordMechanism.groups()``, with every block field split into its columns' width-1 marginal
    mechanisms (``Mechanism.marginal``; columns with equal marginals grouped): [(scalar mechanism, columns)]."""
    out: list[tuple[Mechanism, list[int]]] = []
    for mech, cols in groups:
        if mech.width == 1:
            out.append((mech, list(cols)))
            continue
        by_box: dict[Any, list[int]] = {}  # one marginal per distinct column box
        box = hasattr(mech, "lower") and hasattr(mech, "upper")
        for j in range(len(cols)):
            by_box.setdefault((float(mech.lower[j]), float(mech.upper[j])) if box else j, []).append(j)
        for js in by_box.values():
            out.append((mech.marginal(js[0]), [int(cols[j]) for j in js]))
    return [(m, np.asarray(c, dtype=int)) for m, c in out]


@register
class RecordMechanism(RecordRelease):
    """Releases (x, y) field by field. ``features`` is one mechanism for every column (a scalar
    mechanism is applied to each column separately; a numeric block mechanism whose width equals
    ``n_features`` covers them all in one release) or a sequence whose widths add up to the
    number of features. ``label`` is the label's mechanism (None: the record has no label).

    Attribute sampling, ``n_sampled = m`` (an integer in [1, F], F = number of fields: a replicated
    scalar mechanism has one field per column, a block mechanism one field for its block): every
    client draws m fields uniformly without replacement, independently of its data, from the same
    ``rng``, releases those (and the label) with their own mechanisms, and sends NaN in every column
    of the other fields. Accounting, exact: with ε_(1) ≥ … ≥ ε_(F) the per-field ε (δ likewise),

        ε = ε_(1) + … + ε_(m) + ε_label,     δ = δ_(1) + … + δ_(m) + δ_label.

    Proof. A release o reveals its sampled set S, drawn with probability π(S) = 1/C(F, m) whatever
    the record, so P(o ∈ E | r) = Σ_S π(S) P_S(E_S | r) with P_S the composition of the fields in S,
    which is (Σ_S ε_f, Σ_S δ_f)-DP; the same weights π(S) under both neighbours r, r' give
    P(E | r) ≤ Σ_S π(S)(e^{ε*} P_S(E_S | r') + δ*) = e^{ε*} P(E | r') + δ* with ε*, δ* the largest
    Σ_S ε_f, Σ_S δ_f over |S| = m: the sums of the m largest. It is tight for pure ε (the output
    sampling the m worst fields attains it). ``n_sampled=None`` releases every field (draws nothing)."""

    kind = "record"

    def __init__(
        self,
        features: Mechanism | Sequence[Mechanism],
        label: Mechanism | None = None,
        *,
        n_features: int | None = None,
        n_sampled: int | None = None,
    ):
        if isinstance(features, Mechanism):
            if n_features is None:
                n_features = features.width
            n_features = check_int("n_features", n_features, minimum=1, maximum=MAX_FEATURES)
            if features.width == n_features:
                fields = [Field(features, tuple(range(n_features)))]
            elif features.width == 1:
                fields = [Field(features, (j,)) for j in range(n_features)]
            else:
                raise ValidationError(
                    "features", f"a block mechanism of width {features.width} cannot cover n_features={n_features}"
                )
            self._replicated = features.width == 1 and n_features > 1
        else:
            try:
                mechs = list(features)
            except TypeError:  # not a sequence at all (a number, None, ...)
                mechs = []
            if not mechs or not all(isinstance(m, Mechanism) for m in mechs):
                raise ValidationError("features", "must be a Mechanism or a non-empty sequence of Mechanism objects")
            fields, start = [], 0
            for m in mechs:
                fields.append(Field(m, tuple(range(start, start + m.width))))
                start += m.width
            if n_features is not None and n_features != start:
                raise ValidationError("n_features", f"is {n_features} but the field widths add up to {start}")
            n_features = start
            self._replicated = False
        if label is not None and not isinstance(label, Mechanism):
            raise ValidationError("label", f"must be a Mechanism or None, got {type(label).__name__}")
        if label is not None and label.width != 1:
            raise ValidationError("label", "must be a scalar mechanism (width 1)")
        self.fields: tuple[Field, ...] = tuple(fields)
        self.label = label
        self.n_features = n_features
        self._groups = self._make_groups()
        self._column_groups: list[tuple[Mechanism, np.ndarray]] | None = None
        self.n_sampled = (
            None if n_sampled is None else check_int("n_sampled", n_sampled, minimum=1, maximum=len(fields))
        )
        self._col_field = np.empty(n_features, dtype=np.int64)  # column -> index of its field
        for i, f in enumerate(self.fields):
            self._col_field[list(f.columns)] = i
        self._col_k = None  # each column's k when every field is discrete (one input check per record)
        if all(isinstance(f.mechanism, DiscreteMechanism) for f in self.fields):
            self._col_k = np.array([f.mechanism.k for f in self.fields for _ in f.columns], dtype=np.int64)
        self._field_group = np.empty(len(self.fields), dtype=np.int64)  # field -> index of its group
        for g, (_m, cols) in enumerate(self._groups):
            self._field_group[self._col_field[cols]] = g

    # --- accounting -------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """ε of releasing one whole record (features and label), by basic composition."""
        return self.features_epsilon + (self.label.epsilon if self.label is not None else 0.0)

    @property
    def delta(self) -> float:
        return float(
            self._top([f.mechanism.delta for f in self.fields]) + (self.label.delta if self.label is not None else 0.0)
        )

    @property
    def features_epsilon(self) -> float:
        """Σ of the per-field ε, or of the n_sampled largest with attribute sampling."""
        return float(self._top([f.mechanism.epsilon for f in self.fields]))

    def _top(self, values: list[float]) -> float:
        if self.n_sampled is None:
            return sum(values)
        return sum(sorted(values, reverse=True)[: self.n_sampled])

    def epsilon_breakdown(self) -> dict[str, float]:
        """ε per part of the record, to report honestly where the budget goes (with attribute sampling
        also ``n_sampled`` of ``n_fields`` fields; ``features`` is then the m largest fields' sum)."""
        out = {"features": self.features_epsilon, "label": self.label.epsilon if self.label is not None else 0.0}
        out["record"] = out["features"] + out["label"]
        if self.n_sampled is not None:
            out["n_sampled"] = self.n_sampled
            out["n_fields"] = len(self.fields)
        return out

    # --- structure --------------------------------------------------------------------------
    def groups(self) -> list[tuple[Mechanism, np.ndarray]]:
        """Fields grouped by identical scalar mechanism: [(mechanism, columns)], for vectorised work."""
        return self._groups

    def _make_groups(self) -> list[tuple[Mechanism, np.ndarray]]:
        out: list[tuple[Mechanism, list[int]]] = []
        for f in self.fields:
            for mech, cols in out:
                if mech.width == 1 and f.mechanism.width == 1 and mech == f.mechanism:
                    cols.extend(f.columns)
                    break
            else:
                out.append((f.mechanism, list(f.columns)))
        return [(m, np.asarray(c, dtype=int)) for m, c in out]

    def column_groups(self) -> list[tuple[Mechanism, np.ndarray]]:
        """``groups()`` with block fields split into width-1 marginals (``record_columns``)."""
        if self._column_groups is None:
            self._column_groups = column_groups(self._groups)
        return self._column_groups

    def mechanism_for(self, column: int) -> Mechanism:
        for f in self.fields:
            if column in f.columns:
                return f.mechanism
        raise ValidationError("column", f"must be in [0, {self.n_features - 1}], got {column}")

    # --- validation -------------------------------------------------------------------------
    def _check_X(self, X: Any, field: str) -> np.ndarray:
        return records_array(X, self.n_features, field)

    def _apply(self, X: np.ndarray, fn, field: str) -> list[np.ndarray]:
        return [fn(mech, X[:, cols], field) for mech, cols in self._groups]

    def validate_input(self, X: Any, y: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Check clean records lie in every field's domain; returns (X, y) as arrays."""
        Xv, _ = self._validate_parts(X)
        return Xv, self._check_y(y, Xv.shape[0], "y", clean=True)

    def _validate_parts(self, X: Any) -> tuple[np.ndarray, list[np.ndarray]]:
        """Clean records checked against every field's domain: the assembled array and, per group,
        an array holding the group's columns as its mechanism validated them (integer states for
        discrete fields): the group's own columns, or all of them (``_part`` slices)."""
        Xa = self._check_X(X, "X")
        if self._col_k is not None:  # every field discrete: one check against each column's k
            Xv = as_state_array("X", Xa, self._col_k)
            return Xv, [Xv] * len(self._groups)  # the groups' columns are sliced where needed
        parts = self._apply(Xa, lambda m, s, f: m.validate_input(s, f), "X")
        return self._assemble(Xa.shape[0], parts), parts

    def validate_release(self, X_tilde: Any, y_tilde: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Check released records could have come from this mechanism (with attribute sampling: NaN
        exactly on the whole columns of unreleased fields, n_sampled fields per row)."""
        Xa = self._check_X(X_tilde, "X_tilde")
        if self.n_sampled is not None:
            Xv, released = self._check_pattern(Xa)
            for mech, cols in self._groups:
                if mech.width == 1:
                    mask = released[:, self._col_field[cols]]
                    mech.validate_release(Xv[:, cols][mask], "X_tilde")
                else:
                    rows = released[:, self._col_field[cols[0]]]
                    mech.validate_release(Xv[np.ix_(rows, cols)], "X_tilde")
            return Xv, self._check_y(y_tilde, Xv.shape[0], "y_tilde", clean=False)
        cols = self._apply(Xa, lambda m, s, f: m.validate_release(s, f), "X_tilde")
        Xv = self._assemble(Xa.shape[0], cols)
        return Xv, self._check_y(y_tilde, Xv.shape[0], "y_tilde", clean=False)

    def _check_pattern(self, Xa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A sampled release as floats and its (n, F) released-field mask; NaN only on whole fields,
        exactly n_sampled fields per row, no infinities."""
        if Xa.dtype.kind not in "iuf":
            raise ValidationError("X_tilde", f"must be an array of numbers (NaN for unreleased fields), got {Xa.dtype}")
        X = Xa.astype(float)
        if (idx := first_true(np.isinf(X))) is not None:
            raise ValidationError("X_tilde", f"must be finite or NaN (an unreleased field); found inf at index {idx}")
        nan = np.isnan(X)
        released = np.empty((X.shape[0], len(self.fields)), dtype=bool)
        for i, f in enumerate(self.fields):
            cols = list(f.columns)
            withheld = nan[:, cols].all(axis=1)
            partial = nan[:, cols].any(axis=1) & ~withheld
            if partial.any():
                r = int(np.argmax(partial))
                raise ValidationError(
                    "X_tilde", f"row {r} withholds part of field {i} (columns {cols}): a field is released or NaN whole"
                )
            released[:, i] = ~withheld
        count = released.sum(axis=1)
        if np.any(count != self.n_sampled):
            r = int(np.argmax(count != self.n_sampled))
            raise ValidationError("X_tilde", f"row {r} releases {int(count[r])} fields, n_sampled is {self.n_sampled}")
        return X, released

    def released_fields(self, X_tilde: Any) -> np.ndarray:
        """(n, F) bool: which fields each release carries (all of them without attribute sampling)."""
        Xa = self._check_X(X_tilde, "X_tilde")
        if self.n_sampled is None:
            if Xa.dtype.kind == "f" and np.any(np.isnan(Xa)):
                raise ValidationError("X_tilde", "has NaN, but this record mechanism releases every field")
            return np.ones((Xa.shape[0], len(self.fields)), dtype=bool)
        return self._check_pattern(Xa)[1]

    def _check_y(self, y: Any, n: int, field: str, clean: bool):
        if self.label is None:
            if y is not None:
                raise ValidationError(field, "this record mechanism has no label mechanism; pass y=None")
            return None
        if y is None:
            raise ValidationError(field, "is required: the record mechanism has a label mechanism")
        arr = as_array(field, y, f"must be an array of shape ({n},)")
        if arr.shape != (n,):
            raise ValidationError(field, f"must have shape ({n},) to match the features, got {arr.shape}")
        return self.label.validate_input(arr, field) if clean else self.label.validate_release(arr, field)

    def _assemble(self, n: int, parts: list[np.ndarray]) -> np.ndarray:
        all_int = all(np.asarray(p).dtype.kind in "iu" for p in parts)
        out = np.empty((n, self.n_features), dtype=np.int64 if all_int else float)
        for (_mech, cols), part in zip(self._groups, parts):
            out[:, cols] = np.asarray(part).reshape(n, len(cols))
        return out

    # --- client and server sides ------------------------------------------------------------
    def release(self, X: Any, y: Any = None, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """Client side: one noisy release of each record (X, y). Nothing clean is returned."""
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("rng", f"must be a numpy.random.Generator, got {type(rng).__name__}")
        Xv, parts = self._validate_parts(X)
        yv = self._check_y(y, Xv.shape[0], "y", clean=True)
        if self.n_sampled is not None:
            X_tilde = self._release_sampled(parts, Xv.shape[0], rng)
        else:
            out = [mech.sample_valid(self._part(parts, g), rng) for g, (mech, _) in enumerate(self._groups)]
            X_tilde = self._assemble(Xv.shape[0], out)
        y_tilde = self.label.sample_valid(yv, rng) if self.label is not None else None
        return X_tilde, y_tilde

    def _release_sampled(self, parts: list[np.ndarray], n: int, rng: np.random.Generator) -> np.ndarray:
        """Each row: n_sampled fields uniformly without replacement (an exact uniform permutation per
        row, drawn before and independently of the data), released; NaN in the others. ``parts``:
        each group's validated columns."""
        F = len(self.fields)
        perm = rng.permuted(np.broadcast_to(np.arange(F), (n, F)), axis=1)
        chosen = perm[:, : self.n_sampled]
        released = np.zeros((n, F), dtype=bool)
        released[np.arange(n)[:, None], chosen] = True
        out = np.full((n, self.n_features), np.nan)
        # groups in order, each drawing its sampled entries at once (groups with none draw nothing)
        for g in np.unique(self._field_group[chosen]):
            mech, cols = self._groups[g]
            part = self._part(parts, g)
            if mech.width == 1:  # every column is a field: release the sampled entries only
                mask = released[:, self._col_field[cols]]
                sub = np.full((n, cols.size), np.nan)
                sub[mask] = mech.sample_valid(part[mask], rng)
                out[:, cols] = sub
            else:
                rows = released[:, self._col_field[cols[0]]]
                out[np.ix_(rows, cols)] = mech.sample_valid(part[rows], rng)
        return out

    def _part(self, parts: list[np.ndarray], g: int) -> np.ndarray:
        """Group g's validated columns from ``_validate_parts``' output."""
        return parts[g][:, self._groups[g][1]] if self._col_k is not None else parts[g]

    def log_likelihood(self, X_tilde: Any, y_tilde: Any, X: Any, y: Any) -> np.ndarray:
        """Server side: log p(x̃, ỹ | x, y) per record (n,). With attribute sampling: the released
        fields' terms plus log(1/C(F, m)), the probability of the release's sampled set."""
        Xt, yt = self.validate_release(X_tilde, y_tilde)
        Xc, yc = self.validate_input(X, y)
        if Xc.shape[0] != Xt.shape[0]:
            raise ValidationError("X", f"must have one clean record per release ({Xt.shape[0]}), got {Xc.shape[0]}")
        total = np.zeros(Xt.shape[0])
        if self.n_sampled is not None:
            total += self._sampled_log_likelihood(Xt, Xc)
        else:
            for mech, cols in self._groups:
                total += np.asarray(mech.log_likelihood(Xt[:, cols], Xc[:, cols])).reshape(Xt.shape[0], -1).sum(axis=1)
        if self.label is not None:
            total += self.label.log_likelihood(yt, yc)
        return total

    def _sampled_log_likelihood(self, Xt: np.ndarray, Xc: np.ndarray) -> np.ndarray:
        n, F, m = Xt.shape[0], len(self.fields), self.n_sampled
        total = np.full(n, -(math.lgamma(F + 1) - math.lgamma(m + 1) - math.lgamma(F - m + 1)))
        released = ~np.isnan(Xt[:, self._first_columns()])
        for mech, cols in self._groups:
            if mech.width == 1:
                mask = released[:, self._col_field[cols]]
                terms = np.zeros((n, cols.size))
                terms[mask] = mech.log_likelihood(Xt[:, cols][mask], Xc[:, cols][mask])
                total += terms.sum(axis=1)
            else:
                rows = released[:, self._col_field[cols[0]]]
                if rows.any():
                    ll = mech.log_likelihood(Xt[np.ix_(rows, cols)], Xc[np.ix_(rows, cols)])
                    total[rows] += np.asarray(ll).reshape(int(rows.sum()), -1).sum(axis=1)
        return total

    def _first_columns(self) -> list[int]:
        return [f.columns[0] for f in self.fields]

    # --- specs ------------------------------------------------------------------------------
    def to_spec(self) -> dict:
        if self._replicated:
            feats: Any = {"replicate": self.fields[0].mechanism.to_spec()}
        else:
            feats = [f.mechanism.to_spec() for f in self.fields]
        spec = {
            "kind": self.kind,
            "n_features": self.n_features,
            "features": feats,
            "label": None if self.label is None else self.label.to_spec(),
        }
        if self.n_sampled is not None:  # absent without sampling: existing specs are unchanged
            spec["n_sampled"] = self.n_sampled
        return spec

    @classmethod
    def from_spec(cls, spec: dict) -> RecordMechanism:
        if not isinstance(spec, dict):
            raise ValidationError("spec", f"must be a dict (a RecordMechanism spec), got {type(spec).__name__}")
        feats = spec.get("features")
        label = None if spec.get("label") is None else mechanism_from_spec(spec["label"])
        m = spec.get("n_sampled")
        if isinstance(feats, dict) and "replicate" in feats:
            return cls(mechanism_from_spec(feats["replicate"]), label, n_features=spec["n_features"], n_sampled=m)
        if not isinstance(feats, list):
            raise ValidationError("spec.features", "must be a list of mechanism specs or {'replicate': spec}")
        return cls([mechanism_from_spec(f) for f in feats], label, n_features=spec["n_features"], n_sampled=m)

    def domain_record(self) -> RecordMechanism:
        """Itself: its releases are read on its own clean domain."""
        return self

    def __repr__(self) -> str:
        sampled = "" if self.n_sampled is None else f", n_sampled={self.n_sampled}"
        eps = f"epsilon={self.epsilon:.4g}, delta={self.delta:.3g}"
        return f"RecordMechanism(n_features={self.n_features}{sampled}, {eps})"
