"""The server's only data: the pool of validated releases, each with its mechanism and client id.
Every reply is checked at the boundary; a bad one is dropped and counted with its reason, never
allowed to reach an estimator."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import FedrrError, ValidationError
from .mechanisms import RecordMechanism
from .release import Release

#: the largest reply one node may send (a cohort); bigger ones are dropped as malformed
MAX_RECORDS_PER_REPLY = 1_000_000


class ReplyRejected(FedrrError):
    """A reply failed validation; ``reason`` is the counter key it is reported under."""

    def __init__(self, reason: str, detail: str):
        self.reason = reason
        super().__init__(f"{reason}: {detail}")


def validate_release_arrays(
    parts: dict[str, Any], specs_json: Any, n_features: int | None, expected_ids: set[int] | None = None
) -> Release:
    """One node's reply, as arrays (x, y, client_id, mechanism_index) and the JSON list of its
    record mechanisms' specs -> a validated Release, or ReplyRejected naming what was wrong."""
    x, y, cid, midx = parts["x"], parts["y"], parts["client_id"], parts["mechanism_index"]
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[0] > MAX_RECORDS_PER_REPLY:
        raise ReplyRejected("wrong_shape", f"x must be (m, D) with 1 <= m <= {MAX_RECORDS_PER_REPLY}, got {x.shape}")
    m = x.shape[0]
    if n_features is not None and x.shape[1] != n_features:
        raise ReplyRejected("wrong_shape", f"x has {x.shape[1]} features, the pool has {n_features}")
    for name, a in (("y", y), ("client_id", cid), ("mechanism_index", midx)):
        if a.shape != (m,):
            raise ReplyRejected("wrong_shape", f"{name} must have shape ({m},), got {a.shape}")
    for name, a in (("x", x), ("y", y)):
        if a.dtype.kind not in "iuf":
            raise ReplyRejected("wrong_dtype", f"{name} must be integer or float, got {a.dtype}")
    for name, a in (("client_id", cid), ("mechanism_index", midx)):
        if a.dtype.kind not in "iu":
            raise ReplyRejected("wrong_dtype", f"{name} must be integer, got {a.dtype}")
    if (x.dtype.kind == "f" and np.any(np.isinf(x))) or (y.dtype.kind == "f" and not np.all(np.isfinite(y))):
        raise ReplyRejected("not_finite", "x holds inf, or y NaN or inf")
    if expected_ids is not None and not set(cid.tolist()) <= expected_ids:
        raise ReplyRejected(
            "unexpected_client", f"client ids {sorted(set(cid.tolist()) - expected_ids)[:5]} were not asked"
        )
    if len(set(cid.tolist())) != m:
        raise ReplyRejected("malformed", "duplicate client ids in one reply")
    try:
        specs = json.loads(str(specs_json))
        if not isinstance(specs, list) or not specs:
            raise ValueError("not a non-empty list")
        specs = [json.loads(s) if isinstance(s, str) else s for s in specs]
        for spec in specs:  # before building anything: a spec must cover exactly x's columns
            if not isinstance(spec, dict) or spec.get("n_features") != x.shape[1]:
                raise ValueError(f"each spec must be a record mechanism on the reply's {x.shape[1]} features")
        mechs = tuple(RecordMechanism.from_spec(s) for s in specs)
    except (
        ValueError,
        TypeError,
        KeyError,
        ValidationError,
        RecursionError,
    ) as exc:  # RecursionError: absurdly nested JSON
        raise ReplyRejected("unknown_mechanism", f"mechanism specs not understood: {str(exc)[:200]}") from None
    if midx.min() < 0 or midx.max() >= len(mechs):
        raise ReplyRejected("malformed", f"mechanism_index outside [0, {len(mechs) - 1}]")
    for j, mech in enumerate(mechs):
        rows = midx == j
        if not rows.any():
            continue
        if mech.n_features != x.shape[1]:
            raise ReplyRejected("unknown_mechanism", f"mechanism covers {mech.n_features} features, x has {x.shape[1]}")
        if mech.n_sampled is None and x.dtype.kind == "f" and np.isnan(x[rows]).any():
            raise ReplyRejected("not_finite", "x holds NaN, but its mechanism releases every attribute")
        try:
            mech.validate_release(x[rows], y[rows] if mech.label is not None else None)
        except ValidationError as exc:
            raise ReplyRejected("out_of_domain", str(exc)[:200]) from None
    return Release(
        x, y, cid.astype(np.int64), midx.astype(np.int64), tuple(json.dumps(m.to_spec(), sort_keys=True) for m in mechs)
    )


@dataclass
class Pool:
    """Validated releases: X (n, D), y (n,), client ids, one RecordMechanism per record."""

    X: np.ndarray
    y: np.ndarray
    client_id: np.ndarray
    mechanisms: list[RecordMechanism]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @staticmethod
    def from_releases(releases: list[Release], counts: dict[str, int] | None = None) -> Pool:
        if not releases:
            raise ValidationError("pool", "no valid releases")
        rel = Release.concat(releases)
        order = np.argsort(rel.client_id, kind="stable")  # canonical order: by client id
        mechs = [RecordMechanism.from_spec(json.loads(s)) for s in rel.mechanisms]
        return Pool(
            rel.x[order],
            rel.y[order],
            rel.client_id[order],
            [mechs[i] for i in rel.mechanism_index[order]],
            dict(counts or {}),
        )

    def mechanism_arg(self) -> RecordMechanism | list[RecordMechanism]:
        """What estimators take: one mechanism if all records share it, else one per record."""
        first = self.mechanisms[0]
        distinct = {id(m): m for m in self.mechanisms}.values()
        return first if all(m is first or m == first for m in distinct) else list(self.mechanisms)

    def accounting(self) -> dict[str, Any]:
        """Record ε/δ of the pool by the mechanisms' own accounting (``RecordMechanism.epsilon``,
        ``.delta``, ``.epsilon_breakdown()``): record-weighted means, min and max, distinct values."""
        by_id: dict[int, RecordMechanism] = {}
        counts: dict[int, int] = {}
        for m in self.mechanisms:
            by_id.setdefault(id(m), m)
            counts[id(m)] = counts.get(id(m), 0) + 1
        mechs = list(by_id.values())
        w = np.array([counts[id(m)] for m in mechs], float)
        w /= w.sum()
        eps = np.array([m.epsilon for m in mechs])
        parts = [m.epsilon_breakdown() for m in mechs]
        D = mechs[0].n_features
        feats = float(np.dot(w, [b["features"] for b in parts]))
        return {
            "record": float(np.dot(w, eps)),
            "min": float(eps.min()),
            "max": float(eps.max()),
            "delta": float(np.dot(w, [m.delta for m in mechs])),
            "features": feats,
            "label": float(np.dot(w, [b["label"] for b in parts])),
            "per_feature": feats / D,
            "n_features": D,
            "distinct": sorted({round(float(e), 9) for e in eps}),
        }

    def save(self, path: str | os.PathLike) -> None:
        """Atomically write the pool (releases, client ids, mechanism specs, counts)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        specs: list[str] = []
        by_id: dict[int, int] = {}
        idx = np.array(
            [
                by_id[id(m)] if id(m) in by_id else by_id.setdefault(id(m), _spec_index(specs, m))
                for m in self.mechanisms
            ],
            dtype=np.int64,
        )
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(
            tmp,
            X=self.X,
            y=self.y,
            client_id=self.client_id,
            mechanism_index=idx,
            mechanisms=np.array(json.dumps(specs)),
            counts=np.array(json.dumps(self.counts)),
        )
        os.replace(tmp, path)

    @staticmethod
    def load(path: str | os.PathLike) -> Pool:
        with np.load(path, allow_pickle=False) as f:
            mechs = [RecordMechanism.from_spec(json.loads(s)) for s in json.loads(str(f["mechanisms"]))]
            return Pool(
                f["X"], f["y"], f["client_id"], [mechs[i] for i in f["mechanism_index"]], json.loads(str(f["counts"]))
            )


def _spec_index(specs: list[str], m: RecordMechanism) -> int:
    s = json.dumps(m.to_spec(), sort_keys=True)
    if s not in specs:
        specs.append(s)
    return specs.index(s)
