"""Boundary checks shared by mechanisms, estimators and datasets (raise ValidationError)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .errors import ValidationError


def first_true(mask: Any) -> tuple[int, ...] | None:
    """The index of ``mask``'s first True (row-major) as a tuple of ints; None when none is True."""
    return tuple(int(i) for i in np.argwhere(mask)[0]) if np.any(mask) else None


def check_positive(field: str, value: Any, *, allow_inf: bool = False) -> float:
    """A finite real number > 0 (or +inf if allowed)."""
    if isinstance(value, (str, bytes)):
        raise ValidationError(field, f"must be a real number > 0, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int too large for a float
        raise ValidationError(field, f"must be a real number > 0, got {value!r}") from None
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise ValidationError(field, f"must be a finite real number > 0, got {value!r}")
    return v


def check_open_unit(field: str, value: Any) -> float:
    """A real number in the open interval (0, 1)."""
    if isinstance(value, (str, bytes)):
        raise ValidationError(field, f"must be a real number in (0, 1), got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(field, f"must be a real number in (0, 1), got {value!r}") from None
    if not (0.0 < v < 1.0):
        raise ValidationError(field, f"must be in the open interval (0, 1), got {value!r}")
    return v


def check_int(field: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
    """An integer >= minimum (and <= maximum if given; bools rejected)."""
    allowed = f">= {minimum}" if maximum is None else f">= {minimum} and <= {maximum}"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValidationError(field, f"must be an integer {allowed}, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        raise ValidationError(field, f"must be an integer {allowed}, got {value!r}")
    return int(value)


def as_float_array(field: str, value: Any, *, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """A finite float array (no NaN/inf) with the given number of dimensions."""
    raw = as_array(field, value, "must be an array of real numbers")
    if raw.dtype.kind not in "biufO":  # complex (would drop the imaginary part), strings, dates
        raise ValidationError(field, f"must be an array of real numbers, got dtype {raw.dtype}")
    try:
        arr = raw.astype(float)
    except (TypeError, ValueError, OverflowError):  # objects that are not real numbers
        raise ValidationError(field, "must be an array of real numbers") from None
    _check_ndim(field, arr, ndim)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValidationError(
            field, f"must be finite (no NaN or inf); first bad entry at index {tuple(int(i) for i in bad)}"
        )
    return arr


def as_state_array(
    field: str, value: Any, k: int | np.ndarray, *, ndim: int | tuple[int, ...] | None = None
) -> np.ndarray:
    """An integer array of states in {0, ..., k-1} (k may vary along the last axis)."""
    raw = as_array(field, value, "must be an array of integer states")
    _check_ndim(field, raw, ndim)
    if raw.dtype.kind == "b" or raw.dtype.kind not in "iuf":
        raise ValidationError(field, f"must hold integer states, got dtype {raw.dtype}")
    if raw.dtype.kind == "f":
        if not np.all(np.isfinite(raw)):
            raise ValidationError(field, "must hold integer states; found NaN or inf")
        if np.any(raw != np.round(raw)):
            raise ValidationError(field, "must hold integer states; found non-integer values")
    kk = np.asarray(k)
    if raw.size and (np.any(raw < 0) or np.any(raw >= kk)):  # before any cast: huge values would wrap around
        bad = np.argwhere((raw < 0) | (raw >= kk))[0]
        idx = tuple(int(i) for i in bad)
        kmax = int(kk if kk.ndim == 0 else kk[idx[-1]])
        raise ValidationError(
            field, f"states must lie in {{0, ..., {kmax - 1}}}; got {raw[idx].item()!r} at index {idx}"
        )
    return raw.astype(np.int64)


def as_array(field: str, value: Any, message: str) -> np.ndarray:
    """np.asarray, with ragged nesting and unconvertible objects reported as ValidationError."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise ValidationError(field, f"{message} (got a ragged or non-numeric {type(value).__name__})") from None


def check_broadcast(field: str, a: np.ndarray, other_field: str, b: np.ndarray) -> tuple[int, ...]:
    """The broadcast shape of two validated arrays, or ValidationError naming ``field``."""
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValidationError(
            field, f"shape {a.shape} does not broadcast against {other_field}'s shape {b.shape}"
        ) from None


def check_rng(field: str, rng: Any) -> np.random.Generator:
    """A numpy.random.Generator (legacy RandomState, ints and None are rejected)."""
    if not isinstance(rng, np.random.Generator):
        raise ValidationError(
            field, f"must be a numpy.random.Generator (e.g. np.random.default_rng(seed)), got {type(rng).__name__}"
        )
    return rng


def _check_ndim(field: str, arr: np.ndarray, ndim: int | tuple[int, ...] | None) -> None:
    if ndim is None:
        return
    allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    if arr.ndim not in allowed:
        raise ValidationError(field, f"must have {' or '.join(map(str, allowed))} dimension(s), got shape {arr.shape}")
