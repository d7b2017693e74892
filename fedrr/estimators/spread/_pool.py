"""Spread-EM from a pool on disk: ``SpreadLogisticRegression.fit_pool(path)`` fits from a pool
directory (``Pool.save(path, layout="dir")``) without the driver ever holding the releases. Each
shard's factory memory-maps the pool's arrays and reads its own rows inside the worker (a Ray
actor on whichever node; the path must be visible there — a shared file system or the same path
on every node), validates them and builds the same ``Shard`` that ``fit`` builds from arrays in
memory. The learned prior's data, the released-value counts per column, are counted on the
shards and summed (integers: exact in any order), so ``fit_pool`` gives ``fit``'s result bit for
bit for the same seed and shard size. The driver reads the pool's metadata, its labels (only when
the labels were not released through a mechanism, to find the classes) and, for pools of several
record mechanisms, the mechanism index — never X."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..._params import seed_from
from ...errors import ValidationError
from ...mechanisms import RecordMechanism
from ...mechanisms.discrete import DiscreteMechanism, _MatrixMechanism
from ...mechanisms.paired import PairedRecordMechanism
from ...parallel.executors import ThreadExecutor, shard_bounds
from .._sklearn import class_labels
from ._design import ColumnLayout, Design
from ._estep import Shard
from ._priors._factorised import SpreadPrior, _discrete_em, _empty
from ._runtime import shard_group


def group_records(mechanism: Any, n: int) -> list[tuple[RecordMechanism, np.ndarray]]:
    """[(record mechanism, row indices)]: one mechanism for all rows, or one per row (grouped)."""
    if isinstance(mechanism, (RecordMechanism, PairedRecordMechanism)):
        return [(mechanism, np.arange(n))]
    if isinstance(mechanism, (list, tuple, np.ndarray)):
        if len(mechanism) != n:
            raise ValidationError(
                "mechanism", f"a per-record list must have one RecordMechanism per row ({n}), got {len(mechanism)}"
            )
        groups: dict[str, tuple[RecordMechanism, list[int]]] = {}
        key_of: dict[int, str] = {}  # id -> spec key: a pool of 10⁶ records shares a few objects
        for i, m in enumerate(mechanism):
            key = key_of.get(id(m))
            if key is None:
                if not isinstance(m, (RecordMechanism, PairedRecordMechanism)):
                    raise ValidationError(
                        "mechanism",
                        f"entry {i} must be a RecordMechanism or PairedRecordMechanism, got {type(m).__name__}",
                    )
                key = key_of[id(m)] = repr(m.to_spec())  # the list keeps m alive, so its id stays unique
            groups.setdefault(key, (m, []))[1].append(i)
        return [(m, np.asarray(rows)) for m, rows in groups.values()]
    raise ValidationError(
        "mechanism", f"must be a RecordMechanism or a per-record sequence of them, got {type(mechanism).__name__}"
    )


# ----------------------------------------------------------------------------- counts
def matrix_release_counts(mech: _MatrixMechanism, x: np.ndarray) -> np.ndarray:
    """Released-value counts (len(cols), k) of the columns x (n, len(cols)) a matrix mechanism
    released (NaN: not released) — what ``_priors._factorised._discrete_mle`` counts, per block of records."""
    k = mech.k
    rel = ~np.isnan(x) if x.dtype.kind == "f" else np.ones(x.shape, bool)
    flat = np.where(rel, x, 0).astype(np.int64) + np.arange(x.shape[1]) * k
    return np.bincount(flat[rel], minlength=x.shape[1] * k).reshape(x.shape[1], k).astype(float)


def shard_release_counts(shard: Shard, slot_of: list[int], n_slots: int) -> dict:
    """A shard's released-value counts (n_slots, D, Kmax) in the slot of its record mechanism's
    group (zeros elsewhere), so that the shards' results add up group by group."""
    D, K = shard.D, max(int(shard.design.layout.k.max()), 1)
    out = np.zeros((n_slots, D, K))
    slot = slot_of[shard.index]
    for mech, cols in shard.rm.groups():
        if isinstance(mech, _MatrixMechanism):
            out[slot, cols, : mech.k] = matrix_release_counts(mech, shard.X[:, cols])
    return {"counts": out}


def marginal_mle_prior_from_counts(
    layout: ColumnLayout,
    groups: list[tuple[RecordMechanism, np.ndarray]],
    numeric_kind: str = "gaussian",
    n_bins: int = 10,
    max_iter: int = 200,
    tol: float = 1e-6,
) -> SpreadPrior:
    """``_priors._factorised.marginal_mle_prior`` of all-discrete records released by matrix mechanisms,
    from each record-mechanism group's released-value counts (D, Kmax): the same EM on the same
    numbers in the same order (groups, then each one's column groups), so the same prior."""
    tasks = []
    for rm, counts in groups:
        for mech, cols in rm.groups():
            if not isinstance(mech, _MatrixMechanism):
                raise ValidationError(
                    "prior",
                    "fit_pool learns the prior from released-value counts, which needs matrix mechanisms "
                    f"(randomised response, ...) on every column; got {type(mech).__name__}: use fit, or a "
                    "flat or given prior",
                )
            tasks.append((mech, np.asarray(cols), counts[cols, : mech.k]))
    out = _empty(layout, numeric_kind, n_bins)
    out.disc = _discrete_em(layout, tasks, [], out.disc, max_iter, tol)
    return out


# ------------------------------------------------------------------------------ shards
def pool_shard(path: str, rows: Any, rm: RecordMechanism, classes: np.ndarray | None, shard_args: tuple) -> Shard:
    """A shard built where it runs: its rows (a slice or indices) read from the pool's memory
    maps, validated, labels mapped to class indices (``classes`` None: the labels are released
    class indices), then ``Shard(*shard_args[:1], rm, X, y, *shard_args[1:])``."""
    from ...pool import PoolFile

    f = PoolFile(path)
    X = np.asarray(f.array("X")[rows])
    y = np.asarray(f.array("y")[rows])
    Xv = rm.validate_release(X, y if rm.label is not None else None)[0]
    if classes is None:
        yi = np.asarray(y, np.int64)
    else:
        yi = np.searchsorted(classes, y)
        if np.any(yi >= len(classes)) or np.any(classes[np.minimum(yi, len(classes) - 1)] != y):
            raise ValidationError("y", "holds labels that are not among the pool's classes")
    index, rest = shard_args[0], shard_args[1:]
    return Shard(index, rm, Xv, yi, *rest)


def pool_groups(f) -> list[tuple[int, Any]]:
    """[(mechanism index, rows)] in the order ``group_records`` finds them for the pool's
    per-record list: by first occurrence; rows a slice when one mechanism covers the pool."""
    midx = f.array("mechanism_index")
    lo, hi = int(midx.min()), int(midx.max())
    if lo < 0 or hi >= len(f.mechanisms):
        raise ValidationError("path", f"mechanism_index outside [0, {len(f.mechanisms) - 1}]")
    if lo == hi or all(f.mechanisms[j] == f.mechanisms[lo] for j in np.unique(midx)):
        return [(lo, slice(0, f.n))]
    vals, first = np.unique(midx, return_index=True)
    return [(int(v), np.flatnonzero(midx == v)) for v in vals[np.argsort(first)]]


def _rows(rows: Any, s0: int, s1: int) -> Any:
    return slice(rows.start + s0, rows.start + s1) if isinstance(rows, slice) else rows[s0:s1]


def _n_rows(rows: Any) -> int:
    return rows.stop - rows.start if isinstance(rows, slice) else len(rows)


# ---------------------------------------------------------------------------------- fit
def fit_pool(est, path):
    """``est.fit`` on the pool at ``path`` (a directory written by ``Pool.save(..., layout="dir")``)."""
    from ...pool import PoolFile

    p = est._params()
    if isinstance(p["prior"], str) and p["prior"] == "auto":  # naive-bayes needs the releases: learned here
        p["prior"] = "learned"
    f = PoolFile(path)
    with threadpool_limits(limits=1, user_api="blas"):
        groups = [(f.mechanisms[j], rows) for j, rows in pool_groups(f)]
        if any(isinstance(rm, PairedRecordMechanism) for rm, _ in groups):
            raise ValidationError("path", "fit_pool does not read paired releases yet: load the pool and use fit")
        layout = ColumnLayout.from_mechanism(groups[0][0])
        has_label = groups[0][0].label is not None
        for rm, _ in groups:
            if not ColumnLayout.from_mechanism(rm).same_domain(layout):
                raise ValidationError("mechanism", "all record mechanisms in one pool must share the feature domains")
            if (rm.label is not None) != has_label:
                raise ValidationError("mechanism", "either every record mechanism has a label mechanism or none does")
        if has_label:
            k = groups[0][0].label.k
            if any(rm.label.k != k for rm, _ in groups):
                raise ValidationError("mechanism", "label mechanisms must all have the same number of classes")
            est.classes_, classes = np.arange(k), None
        else:  # clean labels: the classes are the label values (the labels are read, never X)
            est.classes_, _ = class_labels(np.asarray(f.array("y")))
            classes = est.classes_
        n, C = f.n, len(est.classes_)
        design = Design(layout, p["encoding"])
        S = p["n_samples"] or (1 if p["e_step"] == "mcmc" else 10)
        executor = p["executor"] if p["executor"] is not None else ThreadExecutor()
        entropy = seed_from(p["random_state"])
        factories, slot_of = [], []
        for slot, (rm, rows) in enumerate(groups):
            for s0, s1 in shard_bounds(_n_rows(rows), p["shard_size"]):
                args = (len(factories), design, C, entropy, p["n_chains"], p["e_step"], n)
                factories.append(functools.partial(pool_shard, str(f.path), _rows(rows, s0, s1), rm, classes, args))
                slot_of.append(slot)
        group = shard_group(executor, factories, chains=p["n_chains"])
        try:
            if isinstance(p["prior"], str) and p["prior"] == "learned":
                if not layout.discrete.all() or not all(
                    isinstance(m, DiscreteMechanism) for rm, _ in groups for m, _ in rm.groups()
                ):
                    raise ValidationError("prior", "fit_pool learns the prior of discrete columns only: use fit")
                counts = group.reduce("release_counts", slot_of, len(groups))["counts"]
                center = marginal_mle_prior_from_counts(
                    layout, [(rm, counts[g]) for g, (rm, _) in enumerate(groups)], p["numeric_prior"], p["n_bins"]
                )
                prior = center.smoothed(center, p["prior_strength"] * n)
            else:
                prior = est._initial_prior(layout, [], p, n)
        except BaseException:
            group.close()
            raise
        return est._fit_group(group, design, layout, prior, p, S)
