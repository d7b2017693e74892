"""A record's field groups split into per-column scalar mechanisms, for the server's per-column work
(posteriors, priors) on records released as blocks (e.g. one joint Gaussian on all features)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import Mechanism


def column_groups(groups: list[tuple[Mechanism, np.ndarray]]) -> list[tuple[Mechanism, np.ndarray]]:
    """Like ``RecordMechanism.groups()``, with every block field split into its columns' width-1
    marginal mechanisms (``Mechanism.marginal``; columns with equal marginals grouped): [(scalar
    mechanism, columns)]."""
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
