"""Delta messages for the E-step's summed statistics: from one iteration to the next the state
counts of a chain change only where proposals were accepted, so the last actor sends the change
of the total since the previous total its receivers hold (the driver, and the other actors for
their prior update). Exact: counts are integer-valued floats, whose differences and sums are
exact below 2**53; the change is zigzag-mapped to non-negative integers so that ``Packed`` sends
it as small unsigned integers. Anything else (non-integer weights, no shared base) goes whole."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._wire import pack, unpack

#: integer-valued floats stay exact below this
_EXACT = 2.0**52


def _integral(a: Any) -> bool:
    return (
        isinstance(a, np.ndarray)
        and a.dtype == np.float64
        and bool(np.all(a == np.round(a)))
        and bool(np.all(np.abs(a) < _EXACT))
    )


def encode(result: dict, base: Any, prev: tuple | None) -> Any:
    """The message for an E-step total ``result`` ({"stats": {"counts": ...}, ...}): a delta
    against ``prev`` = (id, previous result) when the receivers hold that id (``base``) and both
    count tables are integer-valued; else the packed result."""
    try:
        counts = result["stats"]["counts"]
        old = prev[1]["stats"]["counts"] if prev is not None and prev[0] == base and base is not None else None
    except (KeyError, TypeError):
        return pack(result)
    if old is None or old.shape != counts.shape or not (_integral(counts) and _integral(old)):
        return pack(result)
    d = counts - old
    zig = np.where(d >= 0, 2.0 * d, -2.0 * d - 1.0)
    rest = {**result, "stats": {k: v for k, v in result["stats"].items() if k != "counts"}}
    return {"__delta_of__": base, "zigzag": pack(zig), "rest": pack(rest)}


def decode(msg: Any, prev: tuple | None) -> Any:
    """The result a message stands for, given the receiver's ``prev`` = (id, previous result);
    None if it is a delta against a base the receiver does not hold."""
    if not (isinstance(msg, dict) and "__delta_of__" in msg):
        return unpack(msg)
    if prev is None or prev[0] != msg["__delta_of__"]:
        return None
    zig = unpack(msg["zigzag"]).astype(np.int64)  # exact: integer-valued, below 2**53
    d = ((zig >> 1) ^ -(zig & 1)).astype(np.float64)  # 2d -> d, -2d - 1 -> d (d < 0)
    rest = unpack(msg["rest"])
    return {**rest, "stats": {**rest["stats"], "counts": prev[1]["stats"]["counts"] + d}}
