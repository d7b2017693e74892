"""Validated split releases for LDP naive Bayes (``_naive_bayes``, ``_naive_bayes_mix``): which
clients released which attribute, their reports checked by each field's oracle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validation import as_array
from ..errors import ValidationError
from ..mechanisms import DiscreteMechanism, TripleRecordMechanism, is_record_mechanism

#: who the simplex solver's ConvergenceError names
MLE_CALLER = "LDPNaiveBayes(method='mle')"


def check_naive_bayes_mechanism(mechanism: Any) -> tuple[list[DiscreteMechanism], DiscreteMechanism]:
    """The per-column oracles and the label oracle of a RecordMechanism fit for naive Bayes."""
    if not is_record_mechanism(mechanism) or mechanism.label_in_pairs:
        raise ValidationError("mechanism", f"must be a RecordMechanism, got {type(mechanism).__name__}")
    if not isinstance(mechanism.label, DiscreteMechanism):
        got = "none" if mechanism.label is None else type(mechanism.label).__name__
        raise ValidationError("mechanism", f"needs a discrete label mechanism (a frequency oracle), got {got}")
    mechs: list[DiscreteMechanism] = []
    for f in mechanism.fields:
        m = f.mechanism
        if not isinstance(m, DiscreteMechanism) or m.width != 1:
            raise ValidationError(
                "mechanism",
                f"every feature field must be a discrete oracle of width 1; columns {list(f.columns)} use "
                f"{type(m).__name__} of width {m.width}",
            )
        mechs.append(m)
    return mechs, mechanism.label


def check_record(mechanism: Any):
    """``mechanism`` if it is a record mechanism (split or paired), else a clear error."""
    if not is_record_mechanism(mechanism):
        raise ValidationError("mechanism", f"must be a RecordMechanism, got {type(mechanism).__name__}")
    if isinstance(mechanism, TripleRecordMechanism):
        raise ValidationError("mechanism", f"{TripleRecordMechanism.NOT_PAIRS}; LDPNaiveBayes fits pairs")
    return mechanism


@dataclass(frozen=True)
class Releases:
    """Validated releases: per attribute j, the clients that released it (``rows[j]``) and their
    releases (``values[j]``); every client's released label ``y``; the oracles."""

    rows: list[np.ndarray]
    values: list[np.ndarray]
    y: np.ndarray
    mechs: list[DiscreteMechanism]
    label: DiscreteMechanism


def check_releases(X_tilde: Any, y_tilde: Any, mechanism: Any, *, allow_empty: bool = False) -> Releases:
    """Validate releases: NaN in a feature column means "this client did not release that attribute";
    every other entry is checked by that column's oracle, the labels by the label's oracle. A column
    no client released is refused, unless ``allow_empty`` (one group of a budget mix, whose other
    groups may release it): then it is kept empty."""
    mechs, label = check_naive_bayes_mechanism(mechanism)
    D = len(mechs)
    X = as_array("X_tilde", X_tilde, f"must be an array of shape (n_clients, {D})")
    if X.ndim != 2 or X.shape[1] != D:
        raise ValidationError("X_tilde", f"must have shape (n_clients, {D}), got {X.shape}")
    if X.shape[0] == 0:
        raise ValidationError("X_tilde", "needs at least one client")
    if X.dtype.kind not in "iuf":
        raise ValidationError("X_tilde", f"must hold released values (NaN where not released), got dtype {X.dtype}")
    y = as_array("y_tilde", y_tilde, f"must be an array of shape ({X.shape[0]},)")
    if y.shape != (X.shape[0],):
        raise ValidationError("y_tilde", f"must have shape ({X.shape[0]},) to match X_tilde, got {y.shape}")
    yv = label.validate_release(y, "y_tilde")
    released = ~np.isnan(X) if X.dtype.kind == "f" else np.ones(X.shape, dtype=bool)
    rows, values = [], []
    for j, m in enumerate(mechs):
        r = np.flatnonzero(released[:, j])
        if r.size == 0 and allow_empty:
            rows.append(r)
            values.append(np.zeros(0, np.int64))
            continue
        if r.size == 0:
            raise ValidationError("X_tilde", f"column {j} is NaN for every client: no client released attribute {j}")
        try:
            values.append(m.validate_release(X[r, j], "X_tilde"))
        except ValidationError as exc:
            raise ValidationError(
                "X_tilde", f"column {j} (indices among its released entries): {exc.message}"
            ) from None
        rows.append(r)
    return Releases(rows, values, yv, mechs, label)
