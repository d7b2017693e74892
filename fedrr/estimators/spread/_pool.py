"""Where spread-EM's shards come from: the record groups of a per-record mechanism list
(``group_records``, for ``fit`` on arrays) and a pool on disk (``PoolSource``, for
``SpreadLogisticRegression.fit_pool(path)``). ``fit_pool`` fits from a pool directory
(``Pool.save(path, layout="dir")``) without the driver ever holding the releases. Each
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

from ...errors import ValidationError
from ...mechanisms import DiscreteMechanism, RecordMechanism, is_record_mechanism
from ...parallel import shard_bounds
from ...pool import PoolFile
from .._sklearn import class_labels
from ._design import ColumnLayout, Design
from ._estep import Shard


def group_records(mechanism: Any, n: int) -> list[tuple[RecordMechanism, np.ndarray]]:
    """[(record mechanism, row indices)]: one mechanism for all rows, or one per row (grouped)."""
    if is_record_mechanism(mechanism):
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
                if not is_record_mechanism(m):
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


# ------------------------------------------------------------------------------ shards
def pool_shard(path: str, rows: Any, rm: RecordMechanism, classes: np.ndarray | None, shard_args: tuple) -> Shard:
    """A shard built where it runs: its rows (a slice or indices) read from the pool's memory
    maps, validated, labels mapped to class indices (``classes`` None: the labels are released
    class indices), then ``Shard(*shard_args[:1], rm, X, y, *shard_args[1:])``."""
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


# ------------------------------------------------------------------------------ source
class PoolSource:
    """The shard source of a pool directory: its record mechanisms and their row groups, validated
    as ``fit`` validates them, the classes, and factories that build each shard where it runs."""

    def __init__(self, path: Any):
        f = self.file = PoolFile(path)
        self.groups = [(f.mechanisms[j], rows) for j, rows in pool_groups(f)]
        if any(rm.label_in_pairs for rm, _ in self.groups):
            raise ValidationError("path", "fit_pool does not read paired releases yet: load the pool and use fit")
        self.layout = layout = ColumnLayout.from_mechanism(self.groups[0][0])
        has_label = self.groups[0][0].label is not None
        for rm, _ in self.groups:
            if not ColumnLayout.from_mechanism(rm).same_domain(layout):
                raise ValidationError("mechanism", "all record mechanisms in one pool must share the feature domains")
            if (rm.label is not None) != has_label:
                raise ValidationError("mechanism", "either every record mechanism has a label mechanism or none does")
        if has_label:
            k = self.groups[0][0].label.k
            if any(rm.label.k != k for rm, _ in self.groups):
                raise ValidationError("mechanism", "label mechanisms must all have the same number of classes")
            self.classes, self._label_classes = np.arange(k), None
        else:  # clean labels: the classes are the label values (the labels are read, never X)
            self.classes, _ = class_labels(np.asarray(f.array("y")))
            self._label_classes = self.classes
        self.n = f.n

    def factories(self, design: Design, entropy: Any, chains: int, e_step: str, shard_size: int) -> tuple[list, list]:
        """([shard factory], [group slot of each shard]): fixed-size shards of each group's rows,
        numbered in order, each built by ``pool_shard`` where it runs."""
        factories, slot_of = [], []
        for slot, (rm, rows) in enumerate(self.groups):
            for s0, s1 in shard_bounds(_n_rows(rows), shard_size):
                args = (len(factories), design, len(self.classes), entropy, chains, e_step, self.n)
                factories.append(
                    functools.partial(
                        pool_shard, str(self.file.path), _rows(rows, s0, s1), rm, self._label_classes, args
                    )
                )
                slot_of.append(slot)
        return factories, slot_of

    def check_learnable(self) -> None:
        """The learned prior is counted on the shards: discrete columns and oracles only."""
        if not self.layout.discrete.all() or not all(
            isinstance(m, DiscreteMechanism) for rm, _ in self.groups for m, _ in rm.groups()
        ):
            raise ValidationError("prior", "fit_pool learns the prior of discrete columns only: use fit")
