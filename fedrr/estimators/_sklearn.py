"""scikit-learn's input checks, re-raised as fedrr's ValidationError naming X or y (the messages
kept): the estimators' boundary, so that a bad array never fails deep inside sklearn or numpy."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..errors import CleanDataWarning, ValidationError


class ValidationTypeError(ValidationError, TypeError):
    """A ValidationError that is also the TypeError scikit-learn's conventions expect for
    objects that are not numbers (``check_dtype_object``)."""


def warn_clean(est: Any, silence: str = "warnings.simplefilter('ignore', CleanDataWarning)") -> None:
    """Warn (``CleanDataWarning``) that ``est.fit`` got no mechanism and reads X, y as clean records:
    releases fitted so would be learned from as if they were clean, silently. ``silence``: how to say
    the data are clean on purpose."""
    warnings.warn(
        f"{type(est).__name__}.fit got no mechanism: X and y are read as clean records; pass "
        f"mechanism= for releases, or {silence} for clean data",
        CleanDataWarning,
        stacklevel=3,
    )


def field_of(message: str) -> str:
    if re.search(r"\bInput y\b|\by should\b|\by=|target|label|\bclass", message):
        return "y"
    return "X"


def validate(est, X, y=None, *, reset=True, **kw):
    """sklearn's validate_data, re-raised as ValidationError naming X or y (messages kept)."""
    for name, a in (("X", X), ("y", y)):
        if isinstance(a, np.ndarray) and a.dtype.kind in "mM":  # sklearn lets dates and durations through
            raise ValidationError(name, f"must hold real numbers, got dtype {a.dtype}")
    try:
        if y is None and not reset:
            return validate_data(est, X, reset=False, **kw)
        return validate_data(est, X, y, reset=reset, **kw)
    except (ValueError, TypeError, OverflowError) as exc:  # TypeError: objects numpy cannot turn into numbers
        if isinstance(exc, ValidationError):
            raise
        cls = ValidationTypeError if isinstance(exc, TypeError) else ValidationError
        raise cls(field_of(str(exc)), str(exc)) from exc


def class_labels(y: Any) -> tuple[np.ndarray, np.ndarray]:
    """(classes, index of each label) of classification targets; at least two classes."""
    try:
        check_classification_targets(y)
    except ValueError as exc:
        raise ValidationError("y", str(exc)) from exc
    classes, yi = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        raise ValidationError("y", f"needs at least 2 classes, got 1 class: {classes[0]!r}")
    return classes, yi
