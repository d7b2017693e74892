"""The server's only data: the pool of validated releases, each with its mechanism and client id.
Every reply is checked at the boundary; a bad one is dropped and counted with its reason, never
allowed to reach an estimator."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import FedrrError, ValidationError
from .mechanisms import PairedRecordMechanism, RecordRelease, record_mechanism_from_spec
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
    _check_reply_arrays(x, y, cid, midx, n_features, expected_ids)
    mechs, canonical = _mechanisms_of(str(specs_json), x.shape[1])
    if midx.min() < 0 or midx.max() >= len(mechs):
        raise ReplyRejected("malformed", f"mechanism_index outside [0, {len(mechs) - 1}]")
    for j, mech in enumerate(mechs):
        rows = midx == j
        if rows.any():
            _check_mechanism_rows(mech, x, y, rows)
    return Release(x, y, cid.astype(np.int64), midx.astype(np.int64), canonical)


#: parsed specs by (SHA-256 of the reply's spec text, width), most recently used last
_SPECS: OrderedDict[tuple[bytes, int], tuple[tuple, tuple[str, ...]]] = OrderedDict()
_SPECS_SIZE = 64
_SPECS_LOCK = threading.Lock()


def _mechanisms_of(specs_json: str, n_columns: int) -> tuple[tuple, tuple[str, ...]]:
    """The reply's mechanisms and their canonical specs. Every honest reply of a run names the same
    few specs, and building one (784 fields on MNIST) costs more than the rest of a reply's checks:
    each is built once. The cache keeps the spec's digest and what was built from it, never the
    reply's text (which a reply may pad); a spec that does not parse raises and is not kept."""
    key = (hashlib.sha256(specs_json.encode("utf-8", "surrogatepass")).digest(), n_columns)
    with _SPECS_LOCK:
        hit = _SPECS.get(key)
        if hit is not None:
            _SPECS.move_to_end(key)
            return hit
    mechs = _parse_mechanism_specs(specs_json, n_columns)
    built = mechs, tuple(json.dumps(m.to_spec(), sort_keys=True) for m in mechs)
    with _SPECS_LOCK:
        _SPECS[key] = built
        while len(_SPECS) > _SPECS_SIZE:
            _SPECS.popitem(last=False)
    return built


def _check_reply_arrays(x, y, cid, midx, n_features: int | None, expected_ids: set[int] | None) -> None:
    """The reply's arrays: shapes, dtypes, no inf, client ids asked for and distinct."""
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
    if (x.dtype.kind == "f" and np.any(np.isinf(x))) or (y.dtype.kind == "f" and np.any(np.isinf(y))):
        raise ReplyRejected("not_finite", "x or y holds inf")
    if expected_ids is not None and not set(cid.tolist()) <= expected_ids:
        raise ReplyRejected(
            "unexpected_client", f"client ids {sorted(set(cid.tolist()) - expected_ids)[:5]} were not asked"
        )
    if len(set(cid.tolist())) != m:
        raise ReplyRejected("malformed", "duplicate client ids in one reply")


def _parse_mechanism_specs(specs_json: Any, n_columns: int) -> tuple:
    """The JSON list of record mechanism specs -> the mechanisms, each on exactly ``n_columns`` features."""
    try:
        specs = json.loads(str(specs_json))
        if not isinstance(specs, list) or not specs:
            raise ValueError("not a non-empty list")
        specs = [json.loads(s) if isinstance(s, str) else s for s in specs]
        for spec in specs:  # before building anything: a spec must cover exactly x's columns
            if not isinstance(spec, dict) or spec.get("n_features") != n_columns:
                raise ValueError(f"each spec must be a record mechanism on the reply's {n_columns} features")
        return tuple(record_mechanism_from_spec(s) for s in specs)
    except (
        ValueError,
        TypeError,
        KeyError,
        ValidationError,
        RecursionError,
    ) as exc:  # RecursionError: absurdly nested JSON
        raise ReplyRejected("unknown_mechanism", f"mechanism specs not understood: {str(exc)[:200]}") from None


def _check_mechanism_rows(mech, x: np.ndarray, y: np.ndarray, rows: np.ndarray) -> None:
    """The rows released through one mechanism (``rows``: a non-empty mask): layout, NaNs where
    nothing was released, the sampling pattern, then the values' domain."""
    if mech.n_features != x.shape[1]:
        raise ReplyRejected("unknown_mechanism", f"mechanism covers {mech.n_features} features, x has {x.shape[1]}")
    if mech.label_in_pairs:
        _check_paired_rows(mech, x[rows], y[rows])
    else:
        if y.dtype.kind == "f" and np.isnan(y[rows]).any():
            raise ReplyRejected("not_finite", "y holds NaN, but its mechanism releases the label")
        if mech.n_sampled is None and x.dtype.kind == "f" and np.isnan(x[rows]).any():
            raise ReplyRejected("not_finite", "x holds NaN, but its mechanism releases every attribute")
        if mech.n_sampled is not None:  # the sampling pattern: whole fields, exactly n_sampled per row
            try:
                mech.released_fields(x[rows])
            except ValidationError as exc:
                raise ReplyRejected("wrong_sampling", str(exc)[:200]) from None
    try:
        mech.validate_release(x[rows], y[rows] if mech.uses_label else None)
    except ValidationError as exc:
        raise ReplyRejected("out_of_domain", str(exc)[:200]) from None


def _check_paired_rows(mech: PairedRecordMechanism, x: np.ndarray, y: np.ndarray) -> None:
    """The layout of paired releases, each fault under its own reason (the reports themselves are then
    checked by ``mech.validate_release``, "out_of_domain"): ``label_released`` — y not all NaN (the
    label travels only inside the pair reports; a separate label value would be a channel no ε pays
    for); ``wrong_sampling`` — a row whose number of released (non-NaN) attributes is not n_sampled
    (a NaN where a pair was released, or a value where none was)."""
    if y.dtype.kind != "f" or not np.all(np.isnan(y)):
        raise ReplyRejected(
            "label_released", "y must be all NaN: a paired release sends the label only inside its pair reports"
        )
    count = (~np.isnan(x)).sum(axis=1) if x.dtype.kind == "f" else np.full(x.shape[0], x.shape[1])
    bad = np.flatnonzero(count != mech.n_sampled)
    if bad.size:
        raise ReplyRejected(
            "wrong_sampling",
            f"row {int(bad[0])} releases {int(count[bad[0]])} attributes, the paired mechanism's n_sampled is "
            f"{mech.n_sampled} (NaN elsewhere)",
        )


@dataclass
class Pool:
    """Validated releases: X (n, D), y (n,), client ids, one record mechanism per record
    (``RecordMechanism`` or ``PairedRecordMechanism``; with a paired one, y is all NaN: the label is
    inside the pair reports of X)."""

    X: np.ndarray
    y: np.ndarray
    client_id: np.ndarray
    mechanisms: list[RecordRelease]
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
        mechs = [record_mechanism_from_spec(json.loads(s)) for s in rel.mechanisms]
        return Pool(
            rel.x[order],
            rel.y[order],
            rel.client_id[order],
            [mechs[i] for i in rel.mechanism_index[order]],
            dict(counts or {}),
        )

    def mechanism_arg(self) -> Any:
        """What estimators take: one mechanism if all records share it, else one per record."""
        first = self.mechanisms[0]
        distinct = {id(m): m for m in self.mechanisms}.values()
        return first if all(m is first or m == first for m in distinct) else list(self.mechanisms)

    def accounting(self) -> dict[str, Any]:
        """Record ε/δ of the pool by the mechanisms' own accounting (``.epsilon``, ``.delta``,
        ``.epsilon_breakdown()``): record-weighted means, min and max, distinct values. A paired
        mechanism's breakdown puts its whole ε on the features (its pairs) and 0 on the label."""
        by_id: dict[int, Any] = {}
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

    def save(self, path: str | os.PathLike, layout: str = "npz") -> None:
        """Atomically write the pool (releases, client ids, mechanism specs, counts). ``layout``:
        "npz" (one compressed file) or "dir" (a directory of uncompressed .npy arrays and a small
        ``pool.json``: shards of a cluster memory-map their rows, see :meth:`Pool.open`)."""
        if layout not in ("npz", "dir"):
            raise ValidationError("layout", f"must be 'npz' or 'dir', got {layout!r}")
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
        if layout == "dir":
            arrays = {"X": self.X, "y": self.y, "client_id": self.client_id, "mechanism_index": idx}
            write_pool_dir(path, arrays, specs, self.counts)
            return
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
        """Read a pool written by :meth:`save` (either layout) into memory."""
        if Path(path).is_dir():
            f = Pool.open(path)
            return Pool(*(np.load(f.array_path(k)) for k in ("X", "y", "client_id")), f.per_record(), f.counts)
        with np.load(path, allow_pickle=False) as f:
            mechs = [record_mechanism_from_spec(json.loads(s)) for s in json.loads(str(f["mechanisms"]))]
            return Pool(
                f["X"], f["y"], f["client_id"], [mechs[i] for i in f["mechanism_index"]], json.loads(str(f["counts"]))
            )

    @staticmethod
    def open(path: str | os.PathLike) -> PoolFile:
        """The metadata of a pool saved with ``layout="dir"``, reading no array (see PoolFile)."""
        return PoolFile(path)


#: the name and version of the directory layout's metadata file
POOL_META, POOL_FORMAT = "pool.json", "fedrr-pool-dir/1"
_ARRAYS = ("X", "y", "client_id", "mechanism_index")


def write_pool_dir(path: str | os.PathLike, arrays: dict[str, np.ndarray], specs: list[str], counts: dict) -> None:
    """Write a pool directory atomically: the arrays as .npy files and ``pool.json`` (format, n,
    n_features, mechanism specs, counts) into a temporary directory renamed into place."""
    import shutil

    path = Path(path)
    n = int(arrays["X"].shape[0])
    for k in _ARRAYS:
        if k not in arrays or arrays[k].shape[0] != n:
            raise ValidationError("pool", f"array {k!r} missing or not of {n} rows")
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for k in _ARRAYS:
        np.save(tmp / f"{k}.npy", np.ascontiguousarray(arrays[k]))
    meta = {
        "format": POOL_FORMAT,
        "n": n,
        "n_features": int(arrays["X"].shape[1]),
        "mechanisms": specs,
        "counts": counts,
    }
    (tmp / POOL_META).write_text(json.dumps(meta))
    old = path.with_name(path.name + ".old")
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)


class PoolFile:
    """A pool directory opened without reading its arrays: ``n``, ``n_features``, the distinct
    record mechanisms (``mechanisms``, in the order of ``mechanism_index``), ``counts``. The arrays
    are memory-mapped on demand (``array``), so a shard can read its rows where it runs."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        meta_path = self.path / POOL_META
        if not meta_path.is_file():
            raise ValidationError("path", f"{os.fspath(path)!r} is not a pool directory (no {POOL_META})")
        try:
            meta = json.loads(meta_path.read_text())
            if meta.get("format") != POOL_FORMAT:
                raise ValueError(f"format {meta.get('format')!r}, expected {POOL_FORMAT!r}")
            self.n, self.n_features = int(meta["n"]), int(meta["n_features"])
            self.specs = [str(s) for s in meta["mechanisms"]]
            self.mechanisms = [record_mechanism_from_spec(json.loads(s)) for s in self.specs]
            self.counts = dict(meta.get("counts", {}))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValidationError("path", f"{os.fspath(path)!r}: unreadable {POOL_META}: {exc}") from None
        for k in _ARRAYS:
            if not (self.path / f"{k}.npy").is_file():
                raise ValidationError("path", f"{os.fspath(path)!r} has no {k}.npy")

    def array_path(self, name: str) -> Path:
        return self.path / f"{name}.npy"

    def array(self, name: str) -> np.ndarray:
        """A memory map of one of the pool's arrays (X, y, client_id, mechanism_index), read-only."""
        if name not in _ARRAYS:
            raise ValidationError("name", f"must be one of {_ARRAYS}, got {name!r}")
        arr = np.load(self.array_path(name), mmap_mode="r", allow_pickle=False)
        if arr.shape[0] != self.n:
            raise ValidationError("path", f"{name}.npy has {arr.shape[0]} rows, {POOL_META} says {self.n}")
        return arr

    def per_record(self) -> list[Any]:
        """One record mechanism per record (shared objects): what :class:`Pool` holds."""
        return [self.mechanisms[i] for i in self.array("mechanism_index")]

    def __repr__(self) -> str:
        return f"PoolFile({os.fspath(self.path)!r}, n={self.n}, n_features={self.n_features})"


def _spec_index(specs: list[str], m: Any) -> int:
    s = json.dumps(m.to_spec(), sort_keys=True)
    if s not in specs:
        specs.append(s)
    return specs.index(s)
