"""One client's release and the ledger rule: a client releases its record once, with its own
mechanism and generator, and from then on answers every query with the stored release, byte for
byte (a fresh sample would let a server average the noise away, Barber 2020 eq 3).

Flower-free: the Flower ClientApp (``fedrr.federation.client_app``) and the offline sweeps both
release through ``release_clients``, so a federation's pool equals ``offline_release`` for a seed.
In simulation a client's noise comes from ``client_generator(seed, id)``; in a deployment it comes
from OS entropy and nothing the server sends can seed it."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from .errors import FedrrError, ValidationError
from .mechanisms import RecordRelease, record_mechanism_from_spec
from .population import ClientPopulation


class ClientUnavailable(FedrrError):
    """The client(s) asked dropped out: there is no release to give."""


@dataclass(frozen=True)
class Release:
    """The releases of the clients one node hosts (what leaves the node; nothing clean)."""

    x: np.ndarray  # (m, D) released features or pair reports (NaN where an attribute was not released)
    y: np.ndarray  # (m,) released labels (NaN for a paired release: its label is inside the pairs)
    client_id: np.ndarray  # (m,) int64
    mechanism_index: np.ndarray  # (m,) int64 into mechanisms
    mechanisms: tuple[str, ...]  # JSON specs of record mechanisms (RecordMechanism or PairedRecordMechanism)

    @staticmethod
    def concat(parts: list[Release]) -> Release:
        specs: list[str] = []
        idx_parts = []
        for p in parts:
            remap = np.array([_index_of(specs, s) for s in p.mechanisms], dtype=np.int64)
            idx_parts.append(remap[p.mechanism_index] if len(remap) else p.mechanism_index)
        return Release(
            np.concatenate([p.x for p in parts]),
            np.concatenate([p.y for p in parts]),
            np.concatenate([p.client_id for p in parts]),
            np.concatenate(idx_parts),
            tuple(specs),
        )

    def save(self, path: str | os.PathLike, **extra: np.ndarray) -> None:
        """``.npz`` with the five fields (and ``extra`` arrays, which ``load`` ignores)."""
        np.savez(
            path,
            x=self.x,
            y=self.y,
            client_id=self.client_id,
            mechanism_index=self.mechanism_index,
            mechanisms=np.array(json.dumps(list(self.mechanisms))),
            **extra,
        )

    @staticmethod
    def load(path: str | os.PathLike) -> Release:
        with np.load(path, allow_pickle=False) as f:
            return Release(
                f["x"], f["y"], f["client_id"], f["mechanism_index"], tuple(json.loads(str(f["mechanisms"])))
            )


def _index_of(items: list[str], s: str) -> int:
    try:
        return items.index(s)
    except ValueError:
        items.append(s)
        return len(items) - 1


def client_generator(seed: int, client_id: int) -> np.random.Generator:
    """Simulation only: client i's noise generator, derived from the run seed (SeedSequence spawn)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(int(client_id),)))


def release_clients(
    population: ClientPopulation, client_ids: Iterable[int], rng_for: Callable[[int], np.random.Generator]
) -> Release:
    """Release each present client's record once with its own mechanism and generator
    (``ClientPopulation.release_record``; a fake client's crafted release, ``fedrr.fake``)."""
    xs, ys, ids, midx, specs = [], [], [], [], []
    index_of: dict[int, int] = {}  # id(mechanism) -> index into specs
    alive = []  # keeps those mechanisms alive, so their ids cannot be reused
    client_ids = list(client_ids)
    for cid in client_ids:
        if not population.is_present(cid):
            continue
        mech = population.mechanism(cid)
        xt, yt = population.release_record(cid, rng_for(cid))
        if id(mech) not in index_of:
            index_of[id(mech)] = _index_of(specs, json.dumps(mech.to_spec(), sort_keys=True))
            alive.append(mech)
        xs.append(xt)
        ys.append(yt)
        ids.append(cid)
        midx.append(index_of[id(mech)])
    if not ids:
        raise ClientUnavailable(f"client(s) {client_ids[:5]} dropped out")
    return Release(np.stack(xs), np.asarray(ys), np.asarray(ids, np.int64), np.asarray(midx, np.int64), tuple(specs))


def offline_release(population: ClientPopulation, seed: int) -> Release:
    """What a federation's pool equals for the same seed: every present client released with the
    simulation generator, without Flower."""
    return release_clients(population, range(population.n_clients), lambda c: client_generator(seed, c))


# --------------------------------------------------------------------------------- ledgers
class Ledger(Protocol):
    """Where a node keeps its release: ``get()`` the stored one (None before the first query),
    ``put(release)`` once."""

    def get(self) -> Release | None: ...

    def put(self, release: Release) -> None: ...


def release_once(ledger: Ledger, make: Callable[[], Release]) -> Release:
    """The ledger rule: the stored release if there is one, else a new one, stored before it is
    returned (so it is on record before anything is sent)."""
    stored = ledger.get()
    if stored is not None:
        return stored
    rel = make()
    ledger.put(rel)
    return rel


class DiskLedger:
    """Deployment ledger: the node's release on its own disk, written atomically, replayed forever.

    ``locked()`` serialises get-or-release across processes (an exclusive ``flock`` on a file next
    to the ledger): two queries handled at once — two ClientApp processes, or two SuperNodes
    pointed at one directory — must not both find no ledger and each send a fresh release.

    ``credential`` (the fingerprint of the node's authentication key, or None for a node without
    one) is written into the ledger with the release. A ledger is replayed only to the credential
    that made it: ``get()`` under any other credential raises ``ValidationError`` instead of
    returning the release (which would replay one identity's release under another) or returning
    None (which would release the record again under a second identity)."""

    def __init__(self, directory: str | os.PathLike, credential: str | None = None):
        if credential is not None and (not isinstance(credential, str) or not credential):
            raise ValidationError("credential", f"must be a non-empty string or None, got {credential!r}")
        self.dir = Path(directory)
        self.path = self.dir / "fedrr-release.npz"
        self.lock_path = self.dir / "fedrr-release.lock"
        self.credential = credential

    @contextmanager
    def locked(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def get(self) -> Release | None:
        if not self.path.exists():
            return None
        with np.load(self.path, allow_pickle=False) as f:
            stored = str(f["credential"]) if "credential" in f.files else None
        if stored != self.credential:
            if stored is None:
                why = "holds a release made without a node credential, and this node has one"
            elif self.credential is None:
                why = "holds a release made under a node credential, and this node has none"
            else:
                why = "holds the release of another node credential"
            raise ValidationError("ledger-dir", f"{why}; refusing to release again or to replay (one per credential)")
        return Release.load(self.path)

    def put(self, rel: Release) -> None:
        """Write to a private temporary file, fsync, rename over the ledger, fsync the directory:
        once this returns the release survives a crash, and a reader never sees half a file."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".fedrr-release-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                rel.save(fh, **({} if self.credential is None else {"credential": np.array(self.credential)}))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        dfd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


# --------------------------------------------------------------------- a deployed node's record
def write_record_file(path: str | os.PathLike, x: Any, y: Any, mechanism: RecordRelease, client_id: int = 0) -> None:
    """Deployment: the node's own clean record and its chosen mechanism (stays on the node). A paired
    mechanism needs the label (it is released inside every pair), so it is checked with it."""
    mechanism.validate_input(np.asarray(x)[None, :], np.asarray([y]) if mechanism.uses_label else None)
    np.savez(
        path,
        x=np.asarray(x),
        y=np.asarray(y),
        client_id=np.int64(client_id),
        mechanism=np.array(json.dumps(mechanism.to_spec())),
    )


class FilePopulation(ClientPopulation):
    """The one record a deployment node holds (from ``write_record_file``). Laplace fields are
    released by the snapping mechanism (Mironov 2012), whose stated ε is at most the requested
    one: ``harden``. The reply carries the snapped spec."""

    def __init__(self, path: str | os.PathLike):
        from .mechanisms import harden

        with np.load(path, allow_pickle=False) as f:
            self._x, self._y = f["x"], f["y"].item()
            self.client_id = int(f["client_id"])
            self._mech = harden(record_mechanism_from_spec(json.loads(str(f["mechanism"]))))

    @property
    def n_clients(self) -> int:
        return self.client_id + 1

    def record(self, client_id):
        return self._x, self._y

    def mechanism(self, client_id):
        return self._mech
