"""Client populations: who the clients are, what one private record each holds, and which
mechanism (privacy budget) each one releases it with.

A population is the simulation's stand-in for the people: ``record(i)`` is client i's clean record,
only ever called on the client side; the server calls ``test_set()`` (held-out clean data, outside the
federation) and the accounting methods, never ``record``. Users plug in their own by import path
(``population = "mypkg.pops:MyPopulation"``), built from the run config's keys it accepts."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from ._names import (  # noqa: F401  (their home is the names leaf; re-exported: the population's vocabulary)
    BUDGET_KEYS,
    DISCRETE_FAMILIES,
    GAUSSIAN_NOISE,
    MECHANISM_FAMILIES,
    RESAMPLE,
    WHOLE_RECORD_FAMILIES,
)
from ._user_code import (  # noqa: F401  (re-exported: a population's import path and table files)
    START_DIR_ENV,
    load_object,
    mark_start_dir,
    population_parameters,
    table_path,
)
from ._validation import check_int
from .datasets import Dataset, Schema, load, read_public_rows, read_table, train_test_split_per_class
from .errors import ValidationError
from .mechanisms import (
    RECORD_MECHANISMS,
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
    TripleRecordMechanism,
    frequency_oracle,
)
from .planning import ReleasePlan, plan_release


def unit_uniform(seed: int, client_id: int, stream: str) -> float:
    """A deterministic U[0, 1) for (seed, client, purpose): decides dropout or budget per client
    without any shared random state (the same answer on every node and on the server)."""
    h = hashlib.blake2b(f"{seed}:{client_id}:{stream}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2.0**64


def bootstrap_row(seed: int, client_id: int, n_rows: int) -> int:
    """Client i's row under bootstrap resampling: ⌊u·n_rows⌋, u = ``unit_uniform(seed, i, "resample")``
    — rows drawn uniformly with replacement, a function of (seed, i) alone, so every cohort, worker and
    the server agree without materialising the population."""
    return min(int(unit_uniform(seed, client_id, "resample") * n_rows), n_rows - 1)


class ClientPopulation(ABC):
    """Maps a client id in [0, n_clients) to (record, mechanism). Subclass it and implement
    ``n_clients``, ``record`` and ``mechanism``; override ``test_set`` to enable evaluation."""

    #: fraction of clients that never answer (simulated dropout); see ``is_present``
    dropout: float = 0.0
    seed: int = 0

    @property
    @abstractmethod
    def n_clients(self) -> int:
        """How many clients the population has."""

    @abstractmethod
    def record(self, client_id: int) -> tuple[np.ndarray, Any]:
        """Client side only: the clean record (features (D,), label) of one client."""

    @abstractmethod
    def mechanism(self, client_id: int) -> RecordMechanism | PairedRecordMechanism:
        """The mechanism this client releases its record with (its own privacy budget): a
        ``RecordMechanism`` or a ``PairedRecordMechanism``."""

    def test_set(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Held-out clean (X, y) for evaluating the server's model; None if there is none."""
        return None

    def public_sample(self) -> np.ndarray | None:
        """Public clean feature rows (M, D), coded as the records are, that the server may use as a
        prior (learner ``spread-public``: spread with ``EmpiricalPrior`` of them, smoothed; Barber §5.2);
        None if there are none. Override it to give your population's public sample."""
        return None

    def is_present(self, client_id: int) -> bool:
        """False for a client that drops out (never answers); decided per client, reproducibly."""
        return self.dropout <= 0 or unit_uniform(self.seed, client_id, "dropout") >= self.dropout

    def release_record(self, client_id: int, rng: np.random.Generator) -> tuple[np.ndarray, Any]:
        """Client side: client i's release (x̃ (D,), ỹ) of its record (``fedrr.fake`` crafts fakes')."""
        x, y = self.record(client_id)
        xt, yt = self.mechanism(client_id).release(np.asarray(x)[None, :], np.asarray([y]), rng=rng)
        return xt[0], yt[0]

    def check_client(self, client_id: Any) -> int:
        n = self.n_clients
        if isinstance(client_id, bool) or not isinstance(client_id, (int, np.integer)) or not 0 <= client_id < n:
            raise ValidationError("client_id", f"must be an integer in [0, {n - 1}], got {client_id!r}")
        return int(client_id)

    def describe(self) -> dict:
        """A JSON-able summary for results manifests (no records)."""
        eps = sorted({round(self.mechanism(i).epsilon, 6) for i in range(min(self.n_clients, 1000))})
        return {
            "class": f"{type(self).__module__}:{type(self).__qualname__}",
            "n_clients": self.n_clients,
            "dropout": self.dropout,
            "record_epsilons": eps,
        }


def record_mechanism_for(  # noqa: C901, PLR0913  one branch per mechanism family; keyword-only budgets
    family: str,
    n_features: int,
    n_states: Any,
    n_classes: int,
    *,
    feature_flip: float | None = None,
    feature_epsilon: float | None = None,
    label_flip: float | None = None,
    label_epsilon: float | None = None,
    delta: float = 1e-5,
    n_sampled: int | None = None,
    gaussian_noise: str = "joint",
    n_records: int | None = None,
) -> RecordMechanism | PairedRecordMechanism:
    """A record mechanism from a family name and per-field parameters. ``n_states``: one k for every
    feature, one per feature (a sequence), or None for numeric features in [0, 1]. Families:
    "rr" — k-ary randomised response on each discrete feature (its own k); "oracle" — per feature
    the frequency oracle with the smallest variance at its ε (randomised response, unary encoding or
    local hashing, ``fedrr.mechanisms.frequency_oracle``); "laplace" — noise on features in [0, 1], one
    mechanism per column; "gaussian" — the same with ``gaussian_noise="per-feature"`` (record ε = D·ε +
    ε_label by basic composition), or by default ("joint") one block on all D features, the analytic
    Gaussian on its L2 sensitivity √D at ε = ``feature_epsilon``, δ = ``delta`` for the whole feature
    vector. The label always uses k-ary randomised response. ``n_sampled``: each client releases that
    many uniformly drawn features (None: all; not with a joint block, which is one field).

    "paired" — ``PairedRecordMechanism``: each client releases ``n_sampled`` (None: 1) sampled
    (attribute, label) pairs, each one value of the k_j·C product domain through the least-variance
    frequency oracle (``oracle="auto"``). Its budget is ``feature_epsilon`` = the ε of the client's
    *whole* release (each pair gets ε/n_sampled); the label has no budget of its own (it is paid for
    inside every pair), so ``label_flip``/``label_epsilon`` are refused, and so is ``feature_flip``.

    "triple" — ``TripleRecordMechanism``: each client releases one sampled pair of attributes with the
    label, (x_j, x_k, y) as one value through the least-variance frequency oracle at ``feature_epsilon``,
    the ε of its whole release; the same budget rules as "paired", and ``n_sampled`` is refused.

    "auto" — ``plan_release(n_states, n_classes, feature_epsilon, n_records).mechanism``: the release
    planner's least-variance design (paired, or split with the label at a share of ε) for
    ``n_records`` records. The same budget rules as "paired"; the planner picks m, so ``n_sampled``
    is refused."""
    if family not in MECHANISM_FAMILIES:
        raise ValidationError("mechanism", f"must be one of {MECHANISM_FAMILIES}, got {family!r}")
    if family in WHOLE_RECORD_FAMILIES:
        ks = _whole_record_states(
            family, n_features, n_states, feature_flip, feature_epsilon, label_flip, label_epsilon
        )
        if family == "paired":
            m = 1 if n_sampled is None else max(1, n_sampled)
            return PairedRecordMechanism(ks, n_classes, feature_epsilon, n_sampled=m, oracle="auto")
        if family == "triple":
            if n_sampled:
                raise ValidationError(
                    "n_sampled", f"must be unset for mechanism 'triple', got {n_sampled!r}: one triple per client"
                )
            return TripleRecordMechanism(ks, n_classes, feature_epsilon, oracle="auto")
        if n_sampled is not None:
            raise ValidationError(
                "n_sampled", f"must be unset for mechanism 'auto', got {n_sampled!r}: the planner chooses it"
            )
        if n_records is None:
            raise ValidationError("n_records", "is required for mechanism 'auto' (the records the release plans for)")
        return planned_release(ks, n_classes, feature_epsilon, n_records).mechanism
    if (label_flip is None) == (label_epsilon is None):
        raise ValidationError("label_flip", "give exactly one of label_flip and label_epsilon")
    label = RandomizedResponse(n_classes, label_flip, epsilon=label_epsilon)  # exactly one of them is given
    if family in ("rr", "oracle"):
        if n_states is None:
            raise ValidationError("mechanism", f"{family!r} needs discrete features (a dataset with integer states)")
        if (feature_flip is None) == (feature_epsilon is None):
            raise ValidationError(
                "feature_flip", f"give exactly one of feature_flip and feature_epsilon for {family!r}"
            )
        if family == "oracle" and feature_epsilon is None:
            raise ValidationError("feature_epsilon", "is required for the 'oracle' family (ε per released feature)")
        ks = np.broadcast_to(np.asarray(n_states, dtype=np.int64), (n_features,))
        made: dict[int, Mechanism] = {}  # one object per k: records share mechanisms
        for k in np.unique(ks):
            k = int(k)
            if family == "oracle":
                made[k] = frequency_oracle(k, feature_epsilon)
            else:
                made[k] = RandomizedResponse(k, feature_flip, epsilon=feature_epsilon)  # exactly one is given
        if len(made) == 1:
            return RecordMechanism(next(iter(made.values())), label, n_features=n_features, n_sampled=n_sampled)
        return RecordMechanism([made[int(k)] for k in ks], label, n_features=n_features, n_sampled=n_sampled)
    if feature_epsilon is None:
        raise ValidationError("feature_epsilon", f"is required for the {family!r} family")
    if gaussian_noise not in GAUSSIAN_NOISE:
        raise ValidationError("gaussian_noise", f"must be one of {GAUSSIAN_NOISE}, got {gaussian_noise!r}")
    if family == "gaussian" and gaussian_noise == "joint":
        if n_sampled is not None:
            raise ValidationError(
                "n_sampled",
                f"must be None with gaussian_noise = 'joint', got {n_sampled!r}: the joint block releases all "
                "features as one field; attribute sampling needs gaussian_noise = 'per-feature'",
            )
        n = check_int("n_features", n_features, minimum=1)
        return RecordMechanism(GaussianMechanism(feature_epsilon, delta, np.zeros(n), np.ones(n)), label, n_features=n)
    feat = GaussianMechanism(feature_epsilon, delta) if family == "gaussian" else LaplaceMechanism(feature_epsilon)
    return RecordMechanism(feat, label, n_features=n_features, n_sampled=n_sampled)


def _whole_record_states(family, n_features, n_states, feature_flip, feature_epsilon, label_flip, label_epsilon):
    """The budget checks of a whole-record family ("paired", "auto"): only ``feature_epsilon`` (the ε
    of the whole release), discrete features. Returns the k of every feature."""
    why = {
        "paired": "the label is released inside every (attribute, label) pair and has no budget of its own",
        "triple": "the label is released inside the (attribute, attribute, label) triple and has no budget of its own",
        "auto": "the planner decides how the label is released (inside pairs, or at a share of feature_epsilon)",
    }[family]
    for name, v in (("label_flip", label_flip), ("label_epsilon", label_epsilon)):
        if v is not None:
            raise ValidationError(
                name,
                f"must be unset for mechanism {family!r}, got {v!r}: {why}; feature_epsilon is the ε of the "
                "whole release",
            )
    if feature_flip is not None:
        raise ValidationError(
            "feature_flip", f"must be unset for mechanism {family!r}, got {feature_flip!r}: give feature_epsilon"
        )
    if feature_epsilon is None:
        raise ValidationError(
            "feature_epsilon", f"is required for mechanism {family!r}: the ε of one client's whole release (> 0)"
        )
    if n_states is None:
        raise ValidationError("mechanism", f"{family!r} needs discrete features (a dataset with integer states)")
    return [int(k) for k in np.broadcast_to(np.asarray(n_states, dtype=np.int64), (n_features,))]


def planned_release(n_states: Sequence[int], n_classes: int, epsilon: float, n_records: int) -> ReleasePlan:
    """``plan_release`` from public inputs only, planned once per process (mechanism "auto": every
    client, and every population built from the same config, gets the same mechanism object)."""
    ks = tuple(n_states.tolist() if isinstance(n_states, np.ndarray) else n_states)
    return _planned(ks, n_classes, epsilon, n_records)  # plan_release checks every argument


@lru_cache(maxsize=64)
def _planned(ks: tuple[int, ...], n_classes: int, epsilon: float, n_records: int) -> ReleasePlan:
    return plan_release(list(ks), n_classes, epsilon, n_records)


def plan_line(plan: ReleasePlan) -> str:
    """The one-line announcement of mechanism "auto"'s choice."""
    return (
        f"mechanism auto: planned {plan.best.name()} ({plan.best.oracle_summary()}) -> {plan.mechanism!r} "
        f"for ε={plan.epsilon:g} n={plan.n_records}"
    )


class DatasetPopulation(ClientPopulation):
    """Clients drawn from a real dataset: a class-balanced clean test split is held out for the
    server's evaluation (or the dataset's own test split, when it has one: ``extra["is_test"]``,
    e.g. Adult's files; ``n_test_per_class`` is then unused), and client i holds training row
    ``order[i mod n_train]`` (rows are reused only when there are more clients than training rows;
    ``describe()`` says so). ``resample="bootstrap"``: client i holds training row
    ``bootstrap_row(seed, i, n_train)`` instead — N people drawn from the rows with replacement, at any
    N (``describe()`` says ``resampled``).

    Budgets: one record mechanism (``RecordMechanism`` or ``PairedRecordMechanism``) for everyone, or
    a mix — ``mechanisms`` with ``weights``:
    each client gets mechanism j with probability weights[j], reproducibly from ``seed``.
    ``features="states"`` keeps discrete pixels as integer states (for randomised response);
    ``"unit"`` scales them to [0, 1] numbers (for Gaussian / Laplace noise). ``public_rows``: that
    many training rows offered to the server as a public sample (``public_sample``; a simulation's)."""

    #: one line per planned mechanism (mechanism "auto", ``plan_line``), shown by ``describe()``
    release_plans: tuple[str, ...] = ()

    def __init__(  # noqa: PLR0913  the dataset, N and mechanisms, then keyword-only options
        self,
        dataset: str | Dataset,
        n_clients: int,
        mechanisms: RecordMechanism | PairedRecordMechanism | Sequence[RecordMechanism | PairedRecordMechanism],
        weights: Sequence[float] | None = None,
        *,
        n_test_per_class: int = 50,
        features: str = "states",
        dropout: float = 0.0,
        seed: int = 0,
        resample: str = "none",
        public_rows: int = 0,
    ):
        self._n = check_int("n_clients", n_clients, minimum=1)
        self.public_rows = check_int("public_rows", public_rows, minimum=0)
        if resample not in RESAMPLE:
            raise ValidationError("resample", f"must be one of {RESAMPLE}, got {resample!r}")
        self.resample = resample
        self.seed = check_int("seed", seed, minimum=0)
        if not (isinstance(dropout, (int, float)) and 0.0 <= dropout < 1.0):
            raise ValidationError("dropout", f"must be a number in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        if features not in ("states", "unit"):
            raise ValidationError("features", f"must be 'states' or 'unit', got {features!r}")
        self.features = features
        self._dataset_arg = dataset
        self.n_test_per_class = check_int("n_test_per_class", n_test_per_class, minimum=0)
        mechs = [mechanisms] if isinstance(mechanisms, RECORD_MECHANISMS) else list(mechanisms)
        if not mechs or not all(isinstance(m, RECORD_MECHANISMS) for m in mechs):
            raise ValidationError(
                "mechanisms",
                "must be a record mechanism (RecordMechanism, PairedRecordMechanism, TripleRecordMechanism), or a "
                "non-empty list of them",
            )
        if weights is None:
            weights = [1.0 / len(mechs)] * len(mechs)
        w = np.asarray(weights, dtype=float)
        if w.shape != (len(mechs),) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValidationError(
                "weights", f"must be {len(mechs)} non-negative numbers with a positive sum, got {weights!r}"
            )
        self._mechs = mechs
        self._cdf = np.cumsum(w / w.sum())
        D = self._data[0].shape[1]
        for m in mechs:
            if m.n_features != D:
                raise ValidationError("mechanisms", f"cover {m.n_features} features but the dataset has {D}")
        if self.public_rows > self.n_train:
            raise ValidationError(
                "public_rows", f"must be at most the {self.n_train:,} training rows, got {self.public_rows:,}"
            )

    @cached_property
    def _ds(self) -> Dataset:
        return load(self._dataset_arg) if isinstance(self._dataset_arg, str) else self._dataset_arg

    @cached_property
    def _data(self):
        ds = self._ds
        if ds.schema.task != "classification":
            raise ValidationError("dataset", "must be a classification dataset")
        if "is_test" in ds.extra:  # the dataset's own train/test split (Adult's files): clients hold train rows
            is_test = np.asarray(ds.extra["is_test"], bool)
            train = np.flatnonzero(~is_test)[np.random.default_rng(self.seed).permutation(int((~is_test).sum()))]
            return (self._view(ds.X[train], ds), ds.y[train], self._view(ds.X[is_test], ds), ds.y[is_test])
        n_classes = ds.schema.n_classes
        per_class = np.bincount(ds.y, minlength=n_classes)
        n_tr = int(per_class.min()) - self.n_test_per_class
        if n_tr < 1:
            raise ValidationError("n_test_per_class", f"leaves no training rows (smallest class has {per_class.min()})")
        train, test = train_test_split_per_class(ds, n_tr, self.n_test_per_class, np.random.default_rng(self.seed))
        return self._view(train.X, ds), train.y, self._view(test.X, ds), test.y

    def _view(self, X: np.ndarray, ds: Dataset) -> np.ndarray:
        if self.features == "states":
            return np.asarray(X)
        k = ds.schema.states()
        if np.any(k == 0):
            lo, hi = ds.schema.bounds()
            return (np.asarray(X, float) - lo) / (hi - lo)
        return np.asarray(X, float) / (k - 1)

    @property
    def n_clients(self) -> int:
        return self._n

    @property
    def n_train(self) -> int:
        return self._data[0].shape[0]

    @property
    def schema(self) -> Schema:
        """The dataset's schema: n_states per attribute, the classes (what the planner and checks read)."""
        return self._ds.schema

    def row(self, client_id: int) -> int:
        """The training row client i holds (its position in the seeded order)."""
        i = self.check_client(client_id)
        return bootstrap_row(self.seed, i, self.n_train) if self.resample == "bootstrap" else i % self.n_train

    def record(self, client_id: int) -> tuple[np.ndarray, int]:
        i = self.row(client_id)
        X, y, _, _ = self._data
        return X[i].copy(), int(y[i])

    def mechanism(self, client_id: int) -> RecordMechanism | PairedRecordMechanism:
        i = self.check_client(client_id)
        if len(self._mechs) == 1:
            return self._mechs[0]
        u = unit_uniform(self.seed, i, "budget")
        return self._mechs[min(int(np.searchsorted(self._cdf, u, side="right")), len(self._mechs) - 1)]

    def test_set(self) -> tuple[np.ndarray, np.ndarray]:
        _, _, Xte, yte = self._data
        return Xte, yte

    def public_sample(self) -> np.ndarray | None:
        """``public_rows`` > 0: that many training rows drawn without replacement with the seed, a
        simulation's public sample of the same population (the people's rows are drawn from the same
        training rows, so it is a sample of their distribution, not a disjoint one); else None."""
        if self.public_rows == 0:
            return None
        X = self._data[0]
        rows = np.random.default_rng([self.seed, 0x9B11C]).choice(X.shape[0], self.public_rows, replace=False)
        return X[np.sort(rows)].copy()

    def describe(self) -> dict:
        out = super().describe()
        out.update(
            dataset=self._dataset_arg if isinstance(self._dataset_arg, str) else "custom",
            n_train=self.n_train,
            rows_reused=self._n > self.n_train or self.resample == "bootstrap",
            features=self.features,
            resample=self.resample,
        )
        if self.public_rows:
            out["public_sample"] = (
                f"{self.public_rows:,} training rows drawn with the seed (a simulation's public sample)"
            )
        if self.resample == "bootstrap":
            out["resampled"] = (
                f"bootstrap: {self._n:,} clients drawn with replacement from {self.n_train:,} training rows "
                f"(client i's row a function of (seed, i))"
            )
        if self.release_plans:
            out["release_plans"] = list(self.release_plans)
        return out


class TablePopulation(DatasetPopulation):
    """Clients drawn from your own table: a pandas DataFrame, or a CSV or Parquet file, read with its
    declared schema by ``fedrr.datasets.read_table`` (the label column; categorical columns with their
    domains; numeric columns cut at declared public edges — a value on an edge goes up). Client i holds
    one training row (a seeded order); the held-out clean test rows are ``test_table`` (a table of the
    same columns), or else ``n_test_per_class`` rows per class drawn with ``seed``.

    More clients than training rows only when asked: ``resample="bootstrap"`` draws client i's row as
    a function of (seed, i) (``bootstrap_row``; ``describe()`` says ``resampled``); without it a larger
    ``n_clients`` is refused.

    ``mechanisms``: record mechanism(s) as ``DatasetPopulation``'s, or a family name of
    ``record_mechanism_for`` built for the table's schema: "auto" (the release planner's design for
    ``n_clients`` records) or "paired" at ``epsilon`` per whole record; "rr" / "oracle" at ``epsilon``
    per feature and ``label_epsilon``. ``table`` may also be a ``Dataset`` that ``read_table`` made.

    ``public_table``: public clean rows with the table's feature columns (no label needed), coded by
    its declared schema, that ``public_sample`` offers the server as a prior; or ``public_rows``
    training rows (a simulation's public sample, ``DatasetPopulation``)."""

    def __init__(  # noqa: PLR0913  the table's declared schema, keyword-only
        self,
        table: Any,
        n_clients: int,
        mechanisms: str | RecordMechanism | PairedRecordMechanism | Sequence = "auto",
        weights: Sequence[float] | None = None,
        *,
        label: str | None = None,
        classes: Sequence | None = None,
        categorical: dict | None = None,
        edges: dict | None = None,
        test_table: Any = None,
        n_test_per_class: int = 50,
        resample: str = "none",
        epsilon: float | None = None,
        label_epsilon: float | None = None,
        dropout: float = 0.0,
        seed: int = 0,
        public_table: Any = None,
        public_rows: int = 0,
    ):
        if isinstance(table, Dataset):
            ds = table
        else:
            ds = read_table(table, label=label, classes=classes, categorical=categorical, edges=edges, test=test_table)
        seed = check_int("seed", seed, minimum=0)
        if "is_test" not in ds.extra:  # hold out n_test_per_class rows per class, drawn with the seed
            ds = _held_out(ds, check_int("n_test_per_class", n_test_per_class, minimum=0), seed)
        self.table_name = str(ds.extra.get("table", "table"))
        if isinstance(mechanisms, str):
            family, D, states, C = mechanisms, ds.schema.n_features, ds.schema.states(), ds.schema.n_classes
            mechanisms = record_mechanism_for(
                family, D, states, C, feature_epsilon=epsilon, label_epsilon=label_epsilon, n_records=n_clients
            )
            if family == "auto":  # the planner's choice, said by describe() as dataset_population's
                self.release_plans = (plan_line(planned_release(states, C, epsilon, n_clients)),)
        super().__init__(
            ds,
            n_clients,
            mechanisms,
            weights,
            n_test_per_class=n_test_per_class,
            dropout=dropout,
            seed=seed,
            resample=resample,
            public_rows=public_rows,
        )
        if public_table is not None and public_rows:
            raise ValidationError("public_rows", "a public sample comes from public_table or public_rows: set one")
        self._public = None if public_table is None else read_public_rows(public_table, ds)
        if self.resample == "none" and self.n_clients > self.n_train:
            raise ValidationError(
                "n_clients",
                f"must be at most the {self.n_train:,} training rows of {self.table_name}, got {self.n_clients:,}: "
                "set resample = 'bootstrap' to draw that many clients from the rows (nothing resamples unless asked)",
            )

    def public_sample(self) -> np.ndarray | None:
        """The rows of ``public_table`` coded by the table's declared schema (``read_public_rows``), or
        ``public_rows`` training rows (``DatasetPopulation.public_sample``), or None."""
        return self._public.copy() if self._public is not None else super().public_sample()

    def describe(self) -> dict:
        out = super().describe()
        ex = self._ds.extra
        out.update(
            dataset="table",
            table=self.table_name,
            test_table=ex.get("test_table", f"held out: {self.n_test_per_class} rows per class"),
            label=self._ds.schema.target,
            classes=[str(c) for c in self._ds.schema.classes],
            classes_from="declared" if ex.get("classes_declared") else "the label column's values (treated as public)",
            columns=[f.name for f in self._ds.schema.features],
            unused_columns=list(ex.get("unused_columns", [])),
        )
        if self._public is not None:
            out["public_sample"] = f"{len(self._public):,} public rows"
        if ex.get("private_edges"):
            out["private_edges"] = {c: list(e) for c, e in ex["private_edges"].items()}
            out["private_edges_note"] = "edges fitted on the private rows (quantiles): not covered by the release's ε"
        return out


def _held_out(ds: Dataset, n_test_per_class: int, seed: int) -> Dataset:
    """``ds`` with ``extra["is_test"]``: ``n_test_per_class`` rows of each class drawn with ``seed``."""
    rng = np.random.default_rng([seed, 0x7E57])
    is_test = np.zeros(len(ds.y), bool)
    for c, name in enumerate(ds.schema.classes):
        idx = np.flatnonzero(ds.y == c)
        if idx.size <= n_test_per_class:
            raise ValidationError(
                "n_test_per_class",
                f"must leave training rows of class {name!r}: it has {idx.size} rows, n_test_per_class = "
                f"{n_test_per_class} (or give a test table)",
            )
        is_test[rng.choice(idx, n_test_per_class, replace=False)] = True
    return Dataset(ds.X, ds.y, ds.schema, extra={**ds.extra, "is_test": is_test})


def check_population(population: ClientPopulation, name: str, key: str = "population", n_scan: int = 1000) -> list:
    """Before anything runs: ``population`` has clients, and for each distinct mechanism among its
    first ``n_scan`` clients, the first client holding it releases its record as a client would
    (width and domain checked by the mechanism) and the release validates as the server's would.
    Returns the distinct mechanisms, first seen first; a failure is one ``ValidationError(key, ...)``
    naming the population ``name`` and the client."""
    n = population.n_clients
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValidationError(key, f"{name} has no clients (n_clients = {n!r}); a run needs at least one")
    seen: dict[int, tuple[int, Any]] = {}  # id -> (first client, mechanism)
    specs: dict[str, int] = {}  # one entry per distinct spec, for populations that build a mechanism per call
    for i in range(min(int(n), n_scan)):
        try:
            m = population.mechanism(i)
        except Exception as exc:  # a custom population's own code: named, never a traceback
            raise ValidationError(key, f"{name}, client {i}'s mechanism: {_reason(exc)}") from None
        if id(m) in seen:
            continue
        if not isinstance(m, RECORD_MECHANISMS):
            raise ValidationError(
                key,
                f"{name}, client {i}: mechanism() must return a record mechanism (RecordMechanism, "
                f"PairedRecordMechanism, TripleRecordMechanism), got {type(m).__name__}",
            )
        spec = repr(m.to_spec())
        if spec not in specs:
            specs[spec] = id(m)
            seen[id(m)] = (i, m)
    rng = np.random.default_rng(0)
    for i, m in seen.values():
        try:
            xt, yt = population.release_record(i, rng)
            m.validate_release(np.asarray(xt)[None, :], None if yt is None else np.asarray([yt]))
        except Exception as exc:
            raise ValidationError(key, f"{name}, client {i}'s record: {_reason(exc)}") from None
    return [m for _, m in seen.values()]


def _reason(exc: Exception) -> str:
    """One line for an error raised while checking a population: fedrr's own errors as they read,
    anything else (a custom population's code) with its type."""
    return str(exc) if isinstance(exc, ValidationError) else f"{type(exc).__name__}: {exc}"
