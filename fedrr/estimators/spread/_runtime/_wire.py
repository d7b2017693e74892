"""Messages between the driver and the shards: their size (``nbytes``, ``wire``), sums of shard
results in shard order (``add``, ``total``), and exact compression of the arrays they carry
(``Packed``, ``pack``, ``unpack``)."""

from __future__ import annotations

import dataclasses
import pickle
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

#: methods whose traffic is one-off set-up (the initial priors and samples, the preconditioner), not
#: an iteration's; other one-off calls say so themselves (``run_each(..., one_off=True)``, the priors
#: fetched at the end). Both groups count an iteration's traffic from the first E-step on without them.
SETUP_METHODS = ("set_prior", "init_samples", "hessian")


def nbytes(obj: Any) -> int:
    """Bytes of the arrays and scalars in a message (dicts, lists, tuples walked)."""
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, (bytes, bytearray)):
        return len(obj)
    if isinstance(obj, dict):
        return sum(nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # a prior: its fields (repr was slow)
        return sum(nbytes(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    return 8 if isinstance(obj, (int, float, np.number, bool)) or obj is None else len(repr(obj))


def add(a: Any, b: Any) -> Any:
    """a + b for nested dicts / tuples / lists of arrays and numbers (the reduction of shard results)."""
    if isinstance(a, dict):
        return {k: add(a[k], b[k]) for k in a}
    if isinstance(a, (tuple, list)):
        return type(a)(add(x, y) for x, y in zip(a, b))
    return a + b


class Packed:
    """An array sent compressed, exactly. Integer-valued arrays (prior counts: integers, mostly
    zeros; a shard's releases: states, NaN where not released) travel in the smallest unsigned type
    that holds them, split into byte planes (the high bytes of small counts are zeros together),
    zlib-compressed (run-length strategy), their NaNs as a bit mask; other arrays (gradients,
    Hessians: floats that do not compress) as their raw bytes. The memory order comes back as it went
    (BLAS sums a Fortran-ordered matrix's products in another order than a C-ordered copy's)."""

    def __init__(self, arr: np.ndarray, compress: bool = True):
        arr = np.asarray(arr)
        self.shape, self.dtype = arr.shape, arr.dtype
        self.order = "F" if arr.flags.f_contiguous and not arr.flags.c_contiguous else "C"
        self.small = self.nan = None
        self.compressed = compress
        nan = np.isnan(arr) if arr.dtype.kind == "f" else None
        if nan is not None and nan.any():
            vals = arr[~nan]
        else:
            vals, nan = arr, None
        if (
            arr.dtype.kind == "f"
            and arr.size
            and np.all(vals >= 0)
            and not np.signbit(vals).any()  # -0.0 would come back as +0.0
            and np.all(vals == np.round(vals))
            and (vals.max() if vals.size else 0) < 2**32
        ):
            top = vals.max() if vals.size else 0
            if nan is not None:
                self.nan = np.packbits(nan.reshape(-1))
                arr = np.where(nan, 0.0, arr)
            raw = arr.astype(np.uint8 if top < 2**8 else np.uint16 if top < 2**16 else np.uint32)
            self.small = raw.dtype
            planes = raw.reshape(-1).view(np.uint8).reshape(-1, raw.dtype.itemsize).T
            # run-length + Huffman: small counts (and changes of counts) are near-random bytes with
            # runs of zeros, which LZ77 matching barely shortens; as small and several times faster
            self.data = np.ascontiguousarray(planes).tobytes()
            if compress:
                z = zlib.compressobj(6, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
                self.data = z.compress(self.data) + z.flush()
        else:
            self.data = arr.tobytes(order=self.order)

    def unpack(self) -> np.ndarray:
        if self.small is None:
            return np.frombuffer(self.data, self.dtype).reshape(self.shape, order=self.order).copy(order="K")
        data = zlib.decompress(self.data) if self.compressed else self.data
        planes = np.frombuffer(data, np.uint8).reshape(self.small.itemsize, -1)
        raw = np.ascontiguousarray(planes.T).view(self.small).reshape(self.shape)
        out = raw.astype(self.dtype, order=self.order)
        if self.nan is not None:
            out[np.unpackbits(self.nan, count=out.size).reshape(self.shape).astype(bool)] = np.nan
        return out


class Shipped:
    """An array (a shard's releases) kept as it is in this process and pickled as ``Packed`` (not
    zlib-compressed: RR-noised states barely compress, and zlib would cost the driver ~30 ms a
    shard): a factory run here costs nothing, one shipped to a Ray actor sends states as small
    integers and arrives as the plain array."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __reduce__(self):
        return _unpacked, (Packed(self.array, compress=False),)


def _unpacked(p: Packed) -> np.ndarray:
    return p.unpack()


def walk(obj: Any, leaf: Callable[[Any], Any]) -> Any:
    """``obj`` with ``leaf`` applied to everything that is not a dict, list or tuple (a message's
    arrays and scalars), the containers rebuilt around them."""
    if isinstance(obj, dict):
        return {k: walk(v, leaf) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(walk(v, leaf) for v in obj)
    return leaf(obj)


def pack(obj: Any) -> Any:
    return walk(obj, lambda a: Packed(a) if isinstance(a, np.ndarray) and a.nbytes >= 4096 else a)


def unpack(obj: Any) -> Any:
    return walk(obj, lambda a: a.unpack() if isinstance(a, Packed) else a)


def packed_nbytes(obj: Any) -> int:
    if isinstance(obj, Packed):
        return len(obj.data)
    if isinstance(obj, dict):
        return sum(packed_nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(packed_nbytes(v) for v in obj)
    return nbytes(obj)


def total(results: list[Any]) -> Any:
    """Sum of shard results in shard order (the same float order for every group)."""
    out = results[0]
    for r in results[1:]:
        out = add(out, r)
    return out


def wire(obj: Any) -> int:
    """Bytes of a message as serialised (what crosses to or from an actor)."""
    try:
        return len(pickle.dumps(obj, protocol=5))
    except Exception:  # noqa: BLE001 - an unpicklable object is Ray's business; count its arrays
        return nbytes(obj)
