"""fedrr's Flower ClientApp: a node hosts one client (or a cohort of logical clients), each with
one private record, and answers the server's release query with one LDP release per client —
once. Asked again it replays the stored release byte-for-byte (a fresh sample would let a server
average the noise away, Barber eq 3).

Two modes, chosen on the node, never by the server:
* simulation (default): records and budgets come from the run's population; the ledger lives
  in ``Context.state``; noise comes from a generator derived from the run seed and the client id,
  so a run is reproducible and equals the offline release (``offline_release``);
* deployment (node config ``ledger-dir``, or env ``FEDRR_DEPLOYMENT=1``): the node's own record
  and mechanism come from ``record-file`` (see ``write_record_file``); the ledger persists on the
  node's disk; the noise comes from OS entropy. Nothing the server sends can seed it.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from ..errors import FedrrError, ValidationError
from ..mechanisms import RecordMechanism
from ..mechanisms.snapping import harden
from .config import load_run_config
from .population import ClientPopulation, build_population
from .protocol import META_KEY, PROTOCOL, QUERY_KEY, RELEASE_KEY, NodeRelease

app = ClientApp()

LEDGER_KEY = "fedrr.ledger"


class ClientUnavailable(FedrrError):
    """The client(s) on this node dropped out: the node answers with an error, not a release."""


# ------------------------------------------------------------------------------ releasing
def client_generator(seed: int, client_id: int) -> np.random.Generator:
    """Simulation only: client i's noise generator, derived from the run seed (SeedSequence spawn)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(int(client_id),)))


def release_clients(population: ClientPopulation, client_ids, rng_for) -> NodeRelease:
    """Release each present client's record once with its own mechanism and generator."""
    xs, ys, ids, midx, specs = [], [], [], [], []
    index_of: dict[int, int] = {}  # id(mechanism) -> index into specs
    alive = []  # keeps those mechanisms alive, so their ids cannot be reused
    for cid in client_ids:
        if not population.is_present(cid):
            continue
        x, y = population.record(cid)
        mech = population.mechanism(cid)
        xt, yt = mech.release(np.asarray(x)[None, :], np.asarray([y]), rng=rng_for(cid))
        if id(mech) not in index_of:
            spec = json.dumps(mech.to_spec(), sort_keys=True)
            if spec not in specs:
                specs.append(spec)
            index_of[id(mech)] = specs.index(spec)
            alive.append(mech)
        xs.append(xt[0])
        ys.append(yt[0])
        ids.append(cid)
        midx.append(index_of[id(mech)])
    if not ids:
        raise ClientUnavailable(f"client(s) {list(client_ids)[:5]} dropped out")
    return NodeRelease(
        np.stack(xs), np.asarray(ys), np.asarray(ids, np.int64), np.asarray(midx, np.int64), tuple(specs)
    )


def offline_release(population: ClientPopulation, seed: int) -> NodeRelease:
    """What the federation's pool must equal for the same seed: every present client released
    with the simulation generator, without Flower (for tests and comparisons)."""
    return release_clients(population, range(population.n_clients), lambda c: client_generator(seed, c))


# -------------------------------------------------------------------------------- ledgers
def _release_to_records(rel: NodeRelease) -> tuple[ArrayRecord, ConfigRecord]:
    content = rel.to_content()
    return content.array_records[RELEASE_KEY], content.config_records[META_KEY]


class ContextLedger:
    """Simulation ledger in the node's ``Context.state`` (kept by Flower across messages)."""

    def __init__(self, context: Context):
        self.state = context.state

    def get(self) -> RecordDict | None:
        if LEDGER_KEY + ".x" not in self.state:
            return None
        return RecordDict({RELEASE_KEY: self.state[LEDGER_KEY + ".x"], META_KEY: self.state[LEDGER_KEY + ".meta"]})

    def put(self, content: RecordDict) -> None:
        self.state[LEDGER_KEY + ".x"] = content.array_records[RELEASE_KEY]
        self.state[LEDGER_KEY + ".meta"] = content.config_records[META_KEY]


class DiskLedger:
    """Deployment ledger: the node's release on its own disk, written atomically, replayed forever.

    ``locked()`` serialises get-or-release across processes (an exclusive ``flock`` on a file next
    to the ledger): two queries handled at once — two ClientApp processes, or two SuperNodes
    pointed at one ``ledger-dir`` — must not both find no ledger and each send a fresh release."""

    def __init__(self, directory: str | os.PathLike):
        self.dir = Path(directory)
        self.path = self.dir / "fedrr-release.npz"
        self.lock_path = self.dir / "fedrr-release.lock"

    @contextmanager
    def locked(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield self
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def get(self) -> RecordDict | None:
        if not self.path.exists():
            return None
        with np.load(self.path, allow_pickle=False) as f:
            rel = NodeRelease(
                f["x"], f["y"], f["client_id"], f["mechanism_index"], tuple(json.loads(str(f["mechanisms"])))
            )
        return rel.to_content()

    def put_release(self, rel: NodeRelease) -> None:
        """Write to a private temporary file, fsync, rename over the ledger, fsync the directory:
        once this returns the release survives a crash, and a reader never sees half a file."""
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".fedrr-release-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(
                    fh,
                    x=rel.x,
                    y=rel.y,
                    client_id=rel.client_id,
                    mechanism_index=rel.mechanism_index,
                    mechanisms=np.array(json.dumps(list(rel.mechanisms))),
                )
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


def write_record_file(path: str | os.PathLike, x, y, mechanism: RecordMechanism, client_id: int = 0) -> None:
    """Deployment: the node's own clean record and its chosen mechanism (stays on the node)."""
    mechanism.validate_input(np.asarray(x)[None, :], np.asarray([y]) if mechanism.label is not None else None)
    np.savez(
        path,
        x=np.asarray(x),
        y=np.asarray(y),
        client_id=np.int64(client_id),
        mechanism=np.array(json.dumps(mechanism.to_spec())),
    )


class _FilePopulation(ClientPopulation):
    """The one record a deployment node holds (from ``record-file``)."""

    def __init__(self, path: str):
        with np.load(path, allow_pickle=False) as f:
            self._x, self._y = f["x"], f["y"].item()
            self._cid = int(f["client_id"])
            # deployment hardening: Laplace fields are released by the snapping mechanism (Mironov
            # 2012), whose stated ε is at most the requested one; the reply carries the snapped spec
            self._mech = harden(RecordMechanism.from_spec(json.loads(str(f["mechanism"]))))

    @property
    def n_clients(self) -> int:
        return self._cid + 1

    def record(self, client_id):
        return self._x, self._y

    def mechanism(self, client_id):
        return self._mech


# ------------------------------------------------------------------------------- the app
def _is_deployment(context: Context) -> bool:
    return "ledger-dir" in context.node_config or os.environ.get("FEDRR_DEPLOYMENT") == "1"


def hosted_clients(context: Context, cfg: dict, n_clients: int) -> range:
    """Client ids this node hosts: partition p hosts [p·m, (p+1)·m) with m = ``cohort-size``."""
    m = int(cfg.get("cohort-size", 1))
    p = int(context.node_config.get("partition-id", 0))
    return range(p * m, min((p + 1) * m, n_clients))


def _answer(context: Context) -> RecordDict:
    if _is_deployment(context):
        if "ledger-dir" not in context.node_config:
            raise ValidationError(
                "node_config", "deployment mode needs 'ledger-dir' (where this node keeps its release)"
            )
        ledger = DiskLedger(str(context.node_config["ledger-dir"]))
        with ledger.locked():  # get-or-release is one step, even for queries handled concurrently
            stored = ledger.get()
            if stored is not None:
                return stored
            if "record-file" not in context.node_config:
                raise ValidationError(
                    "node_config", "deployment mode needs 'record-file' (this node's record and mechanism)"
                )
            pop = _FilePopulation(str(context.node_config["record-file"]))
            rel = release_clients(pop, [pop._cid], lambda c: np.random.default_rng())  # OS entropy
            ledger.put_release(rel)  # on disk before anything is sent
            return rel.to_content()
    cfg = load_run_config(context.run_config)
    pop = _population(cfg)
    hosted = hosted_clients(context, cfg, pop.n_clients)
    ledger = ContextLedger(context)
    content = ledger.get()
    if content is None:
        seed = int(cfg["seed"])
        rel = release_clients(pop, hosted, lambda c: client_generator(seed, c))
        content = rel.to_content()
        ledger.put(content)
    fault = getattr(pop, "reply_fault", lambda c: None)(hosted[0]) if len(hosted) else None
    return corrupt(content, fault) if fault else content


def corrupt(content: RecordDict, kind: str) -> RecordDict:
    """Fault injection (``FaultyPopulation``): a copy of the reply broken in one way."""
    arrays = content.array_records[RELEASE_KEY]
    x = arrays["x"].numpy()
    parts = {k: arrays[k].numpy() for k in ("y", "client_id", "mechanism_index")}
    meta = dict(content.config_records[META_KEY])
    if kind == "nan":
        x = x.astype(float)
        x[0, 0] = np.nan
    elif kind == "wrong_shape":
        x = np.concatenate([x, x[:, :1]], axis=1)
    elif kind == "wrong_dtype":
        x = x.astype(np.complex64)
    elif kind == "out_of_domain":
        x = x + 1000
    elif kind == "unknown_mechanism":
        meta["mechanisms"] = json.dumps([json.dumps({"kind": "secret-sauce"})])
    out = {"x": Array(np.ascontiguousarray(x)), **{k: Array(v) for k, v in parts.items()}}
    records: dict = {RELEASE_KEY: ArrayRecord(out)}
    if kind != "missing_meta":
        records[META_KEY] = ConfigRecord(meta)
    return RecordDict(records)


_POP_CACHE: dict[str, ClientPopulation] = {}


def _population(cfg: dict) -> ClientPopulation:
    """One population object per worker process and config (building one loads a dataset)."""
    key = json.dumps(cfg, sort_keys=True, default=str)
    if key not in _POP_CACHE:
        _POP_CACHE.clear()
        _POP_CACHE[key] = build_population(cfg)
    return _POP_CACHE[key]


@app.query("release")
def release(msg: Message, context: Context) -> Message:
    """Answer the release query. Only the protocol version is read from the message."""
    query = msg.content.config_records.get(QUERY_KEY)
    if query is None or query.get("protocol") != PROTOCOL:
        raise ValidationError("message", f"expected a {PROTOCOL!r} release query")
    return Message(_answer(context), reply_to=msg)
