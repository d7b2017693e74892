"""LDP-SGD's model shape from a client's record mechanism (numpy only: the Flower apps import it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ValidationError


def ldp_sgd_design(mechanism: Any) -> tuple[np.ndarray, int]:
    """(n_states, n_classes) of LDP-SGD's model from a client's record mechanism: a discrete field of k
    states is a k-state attribute (one-hot), a numeric one stays numeric (its bounds within [-1, 1])."""
    k = []
    for f in mechanism.fields:
        m = f.mechanism
        lo, hi = getattr(m, "lower", None), getattr(m, "upper", None)
        if m.width == 1 and getattr(m, "k", None):
            k.append(int(m.k))
        elif m.width == 1 and lo is not None and float(np.min(lo)) >= -1 and float(np.max(hi)) <= 1:
            k.append(0)
        else:
            raise ValidationError(
                "learners",
                f"'ldp-sgd' needs scalar discrete fields or numeric ones within [-1, 1]; columns {list(f.columns)} "
                f"use {type(m).__name__}",
            )
    if mechanism.label is None or not getattr(mechanism.label, "k", None):
        raise ValidationError("learners", "'ldp-sgd' needs a discrete label mechanism (its number of classes)")
    return np.array(k, dtype=np.int64), int(mechanism.label.k)
