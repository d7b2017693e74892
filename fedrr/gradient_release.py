"""LDP-SGD's client side (Wang et al., ICDE 2019, §V): a client releases ONE clipped gradient of the
loss at the model a server sends (or, in the check group, whether that model classifies its record
better than the intercept-only one), with its own mechanism at its own ε, instead of its record.

``client_answer`` is one client's release; ``GradientClients`` holds a set of clients (their clean
records, budgets, ids and the run seed) and answers a server's query for a group of them, each once.
``fedrr.estimators.LDPSGDClassifier`` is the server side and sees only what ``answer`` returns; fedrr's
Flower ClientApp answers through ``GradientClients`` too, so a federation's releases equal the offline
ones for a seed. The model and the protocol: ``LDPSGDClassifier`` (``fedrr/estimators/_ldp_sgd.py``).

Encoding (shared with the server, which encodes its clean test records the same way): z = [1, x'], x'
has k − 1 indicators per k-state attribute (state 0 the base) and the numeric attributes (in [−1, 1])."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from ._validation import as_float_array
from .errors import ValidationError
from .mechanisms import DuchiMechanism, PiecewiseMechanism, RecordMechanism
from .release import client_generator

MECHANISMS = ("piecewise", "duchi")
KINDS = ("intercept", "gradient", "check")
#: spawn key of the server's group shuffle, SeedSequence(seed, spawn_key=(GROUPS_KEY,)); client ids stay below it
GROUPS_KEY = 2**40


# ------------------------------------------------------------------------------------ encoding
def check_n_states(n_states: Any, n_features: int) -> np.ndarray:
    """(D,) ints: k ≥ 2 for a k-state attribute, 0 for a numeric one (None: all numeric)."""
    if n_states is None:
        return np.zeros(n_features, dtype=np.int64)
    k = np.broadcast_to(np.asarray(n_states), (n_features,)) if np.ndim(n_states) == 0 else np.asarray(n_states)
    if k.shape != (n_features,) or k.dtype.kind not in "iu" or np.any((k != 0) & (k < 2)):
        raise ValidationError("n_states", f"must be None, an int >= 2 or {n_features} ints (0 = numeric, k >= 2)")
    return k.astype(np.int64)


def n_inputs(n_states: np.ndarray) -> int:
    """p, the encoded inputs besides the intercept: k − 1 per k-state attribute, 1 per numeric one."""
    return int(np.sum(np.where(np.asarray(n_states) > 0, np.asarray(n_states) - 1, 1)))


def encode(X: np.ndarray, n_states: np.ndarray) -> np.ndarray:
    """z = [1, x'] (n, 1 + p): k − 1 indicators per k-state attribute, numeric attributes as they are."""
    X = np.asarray(X, dtype=float)
    cols = [np.ones((X.shape[0], 1))]
    for j, k in enumerate(n_states):
        x = X[:, j]
        if k == 0:
            if np.any(np.abs(x) > 1):
                raise ValidationError("X", f"numeric column {j} must lie in [-1, 1] (scale it; Wang et al. §V)")
            cols.append(x[:, None])
        else:
            if np.any((x != np.round(x)) | (x < 0) | (x >= k)):
                raise ValidationError("X", f"column {j} must hold integer states in [0, {k - 1}]")
            cols.append((x[:, None] == np.arange(1, k)).astype(float))
    return np.hstack(cols)


def probabilities(theta: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """(n, K) class probabilities of the multinomial logistic model θ (K − 1, 1 + p), class 0 the reference."""
    s = np.hstack([np.zeros((Z.shape[0], 1)), Z @ theta.T])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------------- the release
def n_sampled_rule(epsilon: float, d: int) -> int:
    """Wang et al.'s m = max(1, min(d, ⌊ε/2.5⌋)) (Algorithm 4)."""
    return max(1, min(d, math.floor(epsilon / 2.5)))


@lru_cache(maxsize=256)
def query_mechanism(mechanism: str, epsilon: float, d: int, n_sampled: int | None, bound: float) -> RecordMechanism:
    """The release of a d-coordinate answer in [−bound, bound]^d at ε: m coordinates sampled, each by
    PM / Duchi at min(ε/m, 20) (more is noiseless in effect; Duchi cannot realise ε ≳ 26 exactly), shrunk
    by 2⁻⁴⁰ relative until the stated ε (the RecordMechanism's own accounting, m·ε'_field, each field's
    rounded up) is at most ε."""
    m = min(d, n_sampled) if n_sampled else n_sampled_rule(epsilon, d)
    cls, eps_f = PiecewiseMechanism if mechanism == "piecewise" else DuchiMechanism, min(epsilon / m, 20.0)
    while (rm := RecordMechanism(cls(eps_f, -bound, bound), n_features=d, n_sampled=m)).epsilon > epsilon:
        eps_f *= 1 - 2.0**-40
    return rm


@dataclass(frozen=True)
class Query:
    """What the server sends a group: the kind, the round, the model θ (K − 1, 1 + p) and, for the
    check, the fallback model θ_0. Nothing in it can seed or re-budget a client's noise."""

    kind: str
    round: int
    theta: np.ndarray
    theta0: np.ndarray | None = None


def client_answer(query: Query, z, y: int, epsilon: float, rng, *, mechanism="piecewise", n_sampled=None, clip=1.0):
    """One client's one release (d_q,), NaN where not released, and the RecordMechanism it used. z: its
    encoded record, y: its class index, ε: its budget, rng: its own generator."""
    K1 = query.theta.shape[0]
    if query.kind == "intercept":
        v, bound = probabilities(query.theta[:, :1], np.ones((1, 1)))[0, 1:] - (np.arange(1, K1 + 1) == y), 1.0
    elif query.kind == "gradient":
        g = np.outer(probabilities(query.theta, z[None])[0, 1:] - (np.arange(1, K1 + 1) == y), z)
        v, bound = np.clip(g.ravel(), -clip, clip), float(clip)
    elif query.kind == "check":
        right = [int(np.argmax(probabilities(t, z[None])[0]) == y) for t in (query.theta, query.theta0)]
        v, bound = np.array([right[0] - right[1]], float), 1.0
    else:
        raise ValidationError("query", f"kind must be one of {KINDS}, got {query.kind!r}")
    rm = query_mechanism(mechanism, float(epsilon), v.size, n_sampled, bound)
    return rm.release(v[None], rng=rng)[0][0], rm


# ----------------------------------------------------------------------------- the clients
class GradientAnswers(NamedTuple):
    """A group's answers, in the order asked: ``x`` (G, d_q) releases (NaN where not released),
    ``epsilon`` (G,) each client's realised ε (its mechanism's own accounting), ``mechanisms`` those."""

    x: np.ndarray
    epsilon: np.ndarray
    mechanisms: tuple[RecordMechanism, ...]


class GradientClients:
    """LDP-SGD's clients: row i of ``X``/``y`` is client ``client_ids[i]``'s clean record, released at
    its own ``epsilon``. They stay here: a server reads the public ``client_ids``, ``epsilon``,
    ``classes`` and ``n_features`` and calls ``answer``, which returns releases only.

    ``epsilon``: one ε for every client or one per client. ``client_ids``: increasing ints in [0, 2⁴⁰)
    (default 0..n−1). ``classes``: every class label the clients may hold (default: those in y); the
    model has one row per class but the first. ``seed``: the run seed; client i's noise comes from
    ``client_generator(seed, i)`` (simulation), or from OS entropy with None (a deployed node).
    Each client answers one query ever: asking it again is refused."""

    def __init__(self, X: Any, y: Any, epsilon: Any, *, client_ids: Any = None, classes: Any = None, seed: Any = None):
        self._X = as_float_array("X", X, ndim=2)  # the records stay private to the clients' side
        n = self._X.shape[0]
        if n == 0:
            raise ValidationError("X", "needs at least one client (one row per client)")
        y = np.asarray(y)
        if y.shape != (n,):
            raise ValidationError("y", f"must hold {n} labels, one per row of X, got shape {y.shape}")
        self.classes, self._y = _class_index(y, classes)
        self.epsilon = _per_client_epsilon(epsilon, n)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValidationError("seed", f"must be an int >= 0 (the run seed) or None (OS entropy), got {seed!r}")
        # the ids seed the clients' generators only in a simulation (a run seed): then they are bounded
        self.client_ids = _client_ids(client_ids, n, seeded=seed is not None)
        self._seed = None if seed is None else int(seed)
        self._released = np.zeros(n, dtype=bool)  # who answered: the clients' own record, not the server's
        self._lock = threading.Lock()  # two threads asking the same client: one release
        self._encoded: tuple[tuple[int, ...], np.ndarray] | None = None

    @property
    def released(self) -> np.ndarray:
        """Which clients have answered (a copy: only answering sets it)."""
        return self._released.copy()

    @property
    def n_clients(self) -> int:
        return self._X.shape[0]

    @property
    def n_features(self) -> int:
        """D, the attributes of a record (what the server's ``n_states`` describes)."""
        return self._X.shape[1]

    def __repr__(self) -> str:
        return f"GradientClients(n_clients={self.n_clients}, n_features={self.n_features}, classes={self.classes!r})"

    def answer(  # noqa: PLR0913  the query, the group and the run's release settings, keyword-only
        self,
        query: Query,
        client_ids: Any,
        *,
        n_states: Any = None,
        mechanism: str = "piecewise",
        n_sampled: int | None = None,
        clip: float = 1.0,
    ) -> GradientAnswers:
        """The releases of the clients ``client_ids`` (in that order) to ``query``, each from its own
        record, ε and generator (``client_answer``). ``n_states`` is the run's encoding (as in
        ``check_n_states``); ``mechanism``, ``n_sampled``, ``clip`` the run's release settings."""
        k = check_n_states(n_states, self.n_features)
        rows = self._rows(client_ids)
        _check_release_settings(mechanism, n_sampled, clip)
        Z = self._encode(k)
        shape = (len(self.classes) - 1, Z.shape[1])
        _check_query(query, shape)
        kw = {"mechanism": mechanism, "n_sampled": n_sampled, "clip": clip}
        with self._lock:
            rows = self._rows(client_ids)  # checked again under the lock: each client answers once
            self._released[rows] = True
        out = [client_answer(query, Z[i], self._y[i], self.epsilon[i], self._rng(i), **kw) for i in rows]
        d = {"intercept": shape[0], "gradient": shape[0] * shape[1], "check": 1}[query.kind]
        return GradientAnswers(
            np.array([x for x, _ in out]).reshape(len(rows), d),
            np.array([rm.epsilon for _, rm in out], dtype=float),
            tuple(rm for _, rm in out),
        )

    def _rows(self, client_ids: Any) -> np.ndarray:
        ids = np.asarray(client_ids)
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu") or len(np.unique(ids)) != ids.size:
            raise ValidationError("client_ids", "must be a list of distinct integer client ids (the group asked)")
        rows = np.searchsorted(self.client_ids, ids).astype(np.int64)
        known = (rows < self.n_clients) & (self.client_ids[np.minimum(rows, self.n_clients - 1)] == ids)
        if not np.all(known):
            raise ValidationError("client_ids", f"no such client(s): {ids[~known][:5].tolist()}")
        if np.any(self._released[rows]):
            again = ids[self._released[rows]][:5].tolist()
            raise ValidationError(
                "client_ids", f"client(s) {again} already released: each client answers one query ever"
            )
        return rows

    def _encode(self, k: np.ndarray) -> np.ndarray:
        """Every record encoded once per encoding (a bad record is refused before anyone releases)."""
        key = tuple(int(v) for v in k)
        if self._encoded is None or self._encoded[0] != key:
            self._encoded = (key, encode(self._X, k))
        return self._encoded[1]

    def _rng(self, i: int) -> np.random.Generator:
        return np.random.default_rng() if self._seed is None else client_generator(self._seed, self.client_ids[i])


def _class_index(y: np.ndarray, classes: Any) -> tuple[np.ndarray, np.ndarray]:
    """(classes, each label's index in them); at least two classes, every label among them."""
    if y.dtype.kind not in "iubUO" and not (y.dtype.kind == "f" and np.all(y == np.round(y))):
        raise ValidationError("y", f"must hold class labels (integers or strings), got {y.dtype} values")
    if classes is None:
        labels, yi = np.unique(y, return_inverse=True)
        if len(labels) < 2:
            raise ValidationError("y", f"needs at least 2 classes, got 1 class: {labels[0]!r}")
        return labels, yi
    labels = np.unique(np.asarray(classes))
    if len(labels) < 2 or not np.all(np.isin(y, labels)):
        raise ValidationError("classes", "must hold at least 2 classes, every label of y among them")
    return labels, np.searchsorted(labels, y)


def _per_client_epsilon(epsilon: Any, n: int) -> np.ndarray:
    eps = as_float_array("epsilon", epsilon, ndim=(0, 1))
    eps = np.full(n, float(eps)) if eps.ndim == 0 else eps
    if eps.shape != (n,) or not np.all(eps > 0):
        raise ValidationError("epsilon", f"must be one number > 0 or {n} numbers > 0, one per client")
    return eps


def _client_ids(client_ids: Any, n: int, seeded: bool = True) -> np.ndarray:
    """The clients' ids, increasing; with a run seed (``seeded``) in [0, 2^40), as they seed generators."""
    ids = np.arange(n) if client_ids is None else np.asarray(client_ids)
    if ids.shape != (n,) or ids.dtype.kind not in "iu" or np.any(np.diff(ids) <= 0):
        raise ValidationError("client_ids", f"must be {n} increasing integers, one per client")
    if seeded and ids.min() < 0:
        raise ValidationError("client_ids", f"must be {n} increasing integers >= 0, one per client")
    if seeded and ids.max() >= GROUPS_KEY:
        raise ValidationError("client_ids", "must be < 2^40 (the group shuffle's spawn key)")
    return ids.astype(np.int64)


def _check_release_settings(mechanism: Any, n_sampled: Any, clip: Any) -> None:
    if mechanism not in MECHANISMS:
        raise ValidationError("mechanism", f"must be one of {MECHANISMS}, got {mechanism!r}")
    if n_sampled is not None and (isinstance(n_sampled, bool) or not isinstance(n_sampled, (int, np.integer))):
        raise ValidationError("n_sampled", f"must be None or an int >= 1, got {n_sampled!r}")
    if n_sampled is not None and n_sampled < 1:
        raise ValidationError("n_sampled", f"must be None or an int >= 1, got {n_sampled!r}")
    if isinstance(clip, bool) or not isinstance(clip, (int, float, np.number)) or not clip > 0:
        raise ValidationError("clip", f"must be a number > 0, got {clip!r}")


def _check_query(query: Any, shape: tuple[int, int]) -> None:
    """A Query of a known kind whose model(s) have the run's shape (K − 1, 1 + p) and are finite."""
    if not isinstance(query, Query) or query.kind not in KINDS:
        raise ValidationError("query", f"must be a Query of kind {KINDS}, got {query!r}"[:200])
    models = [("theta", query.theta)] + ([("theta0", query.theta0)] if query.kind == "check" else [])
    for name, t in models:
        if t is None or np.shape(t) != shape or not np.all(np.isfinite(np.asarray(t, float))):
            raise ValidationError("query", f"{name} must be a finite array of shape {shape}")
