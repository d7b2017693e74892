"""The paired release: each person releases sampled attributes *together with the label*, each pair
(x_j, y) as ONE value of the product domain through one frequency oracle (Yilmaz, Al-Rubaie & Chang,
"Locally differentially private naive Bayes classification", arXiv:1905.01039, §4: the feature value
and the class label are combined into one value that is perturbed by an LDP frequency oracle).

Why: a split release (label at ε/2 by randomised response, one attribute at ε/2) noises the
attribute–label association twice; the paired release noises it once, at the full ε. The pair table
P(x_j = s, y = c), which every classifier needs, then has far less variance per report at ε ≤ 2
(research notes, "Turn-3 facts").

Encoding of a pair: v = x_j · C + y ∈ {0, …, k_j·C − 1} (C = number of classes), so that the
oracle's (k_j·C,) tables reshape to (k_j, C) tables in C order: ``table.reshape(k_j, C)[s, c]`` is
the entry of the pair (x_j = s, y = c).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .._validation import as_array, as_state_array, check_int, check_positive, first_true
from ..errors import ValidationError
from ._base import register
from ._discrete import MAX_STATES, DiscreteMechanism, RandomizedResponse
from ._hashing import LocalHashing
from ._oracles import frequency_oracle
from ._record import MAX_FEATURES, RecordMechanism, RecordRelease, records_array
from ._unary import UnaryEncoding

#: oracle names a PairedRecordMechanism accepts (aliases → the mechanism's registered kind)
ORACLES = {
    "rr": RandomizedResponse.kind,
    "randomized_response": RandomizedResponse.kind,
    "oue": UnaryEncoding.kind,
    "unary_encoding": UnaryEncoding.kind,
    "olh": LocalHashing.kind,
    "local_hashing": LocalHashing.kind,
}
_BUILD = {
    RandomizedResponse.kind: lambda k, eps: RandomizedResponse(k, epsilon=eps),
    UnaryEncoding.kind: UnaryEncoding,
    LocalHashing.kind: LocalHashing,
}
#: most classes a paired release supports (the pair domain k_j·C must stay a state count)
MAX_CLASSES = 2**20


def report_floats(Xa: np.ndarray) -> np.ndarray:
    """Released reports ``X_tilde`` as floats: numbers, finite or NaN (not released), else a
    ValidationError naming ``X_tilde``."""
    if Xa.dtype.kind not in "iuf" or Xa.dtype.kind == "b":
        raise ValidationError("X_tilde", f"must be an array of numbers (NaN where not released), got {Xa.dtype}")
    X = Xa.astype(float)
    if (idx := first_true(np.isinf(X))) is not None:
        raise ValidationError("X_tilde", f"must be finite or NaN (an unreleased attribute); found inf at {idx}")
    return X


def no_label_release(y_tilde: Any, n: int, why: str) -> np.ndarray:
    """The all-NaN ``y_tilde`` of a release whose label travels inside its reports: None or an all-NaN
    float array of shape (n,), else a ValidationError naming ``y_tilde`` (``why``: where the label is)."""
    if y_tilde is not None:
        ya = as_array("y_tilde", y_tilde, f"must be None or an all-NaN array of shape ({n},)")
        if ya.shape != (n,):
            raise ValidationError("y_tilde", f"must have shape ({n},) to match X_tilde, got {ya.shape}")
        if ya.dtype.kind != "f" or not np.all(np.isnan(ya)):
            raise ValidationError("y_tilde", f"must be all NaN: {why}")
    return np.full(n, np.nan)


def oracle_kinds(oracle: Any, count: int, unit: str) -> list[str | None]:
    """``oracle`` ("auto", a name of ``ORACLES``, or one per ``unit``, ``count`` of them) as the registered
    kind of each forced oracle, None for "auto"; a ValidationError naming ``oracle`` otherwise."""
    names = sorted(ORACLES) + ["auto"]
    if isinstance(oracle, str):
        items = [oracle] * count
    else:
        try:
            items = list(oracle)
        except TypeError:
            raise ValidationError("oracle", f"must be one of {names} or a sequence of them, got {oracle!r}") from None
        if len(items) != count:
            raise ValidationError("oracle", f"a sequence must name one oracle per {unit} ({count}), got {len(items)}")
    out: list[str | None] = []
    for j, o in enumerate(items):
        if not isinstance(o, str) or (o != "auto" and o not in ORACLES):
            raise ValidationError("oracle", f"entry {j} must be one of {names}, got {o!r}")
        out.append(None if o == "auto" else ORACLES[o])
    return out


class LabelInsideRelease(RecordRelease):
    """What the releases whose label travels only inside their reports share (``PairedRecordMechanism``,
    ``TripleRecordMechanism``): the clean records' check and their domain. Subclasses set ``n_states``,
    ``n_classes``, ``n_features``, ``n_sampled`` and ``label_where`` (where the label goes, for errors)."""

    label_in_pairs = True
    label_where: ClassVar[str] = ""

    def validate_input(self, X: Any, y: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Clean records: X (n, F) integer states x_j ∈ {0..k_j−1}, y (n,) classes in {0..C−1}."""
        Xv = as_state_array("X", records_array(X, self.n_features, "X"), np.asarray(self.n_states))
        if y is None:
            raise ValidationError("y", f"is required: {self.label_where}")
        ya = as_array("y", y, f"must be an array of shape ({Xv.shape[0]},)")
        if ya.shape != (Xv.shape[0],):
            raise ValidationError("y", f"must have shape ({Xv.shape[0]},) to match X, got {ya.shape}")
        return Xv, as_state_array("y", ya, self.n_classes)

    def domain_record(self) -> RecordMechanism:
        """A ``RecordMechanism`` on the *clean* domain (attribute j with k_j states, the label with C classes,
        its n_sampled attributes sampled), for code that needs only the domain — the encoding of clean
        records, the point guesses of the ``naive`` learner, the model of ``ldp-sgd``. Its noise (randomised
        response at ε = 1, whose point guess of a state is the state itself) is never used as a likelihood:
        that of the release is the mechanism's own."""
        rr = {k: RandomizedResponse(k, epsilon=1.0) for k in set(self.n_states)}
        return RecordMechanism(
            [rr[k] for k in self.n_states],
            RandomizedResponse(self.n_classes, epsilon=1.0),
            n_features=self.n_features,
            n_sampled=self.n_sampled,
        )


@register
class PairedRecordMechanism(LabelInsideRelease):
    """Releases sampled (attribute, label) pairs of a record (x, y), x_j ∈ {0..k_j−1}, y ∈ {0..C−1}.

    Client side (``release``): every person draws ``n_sampled`` = m of the F attributes uniformly
    without replacement, independently of the data, from the given generator (a uniform permutation
    per row, as ``RecordMechanism``'s attribute sampling), and releases each sampled pair
    v_j = x_j·C + y through the pair oracle of attribute j, a frequency oracle on the k_j·C values at
    ε/m: k-ary randomised response, optimized unary encoding (OUE) or optimized local hashing (OLH).
    ``oracle="auto"`` picks per attribute the oracle with the least rare-value variance for k_j·C
    values at ε/m (``frequency_oracle``, Wang et al. 2017 §5 with the exact variances); a name
    ("rr", "oue", "olh" or the registered kinds) forces one oracle for all attributes; a sequence of
    F names sets each attribute's.

    Release format. ``X_tilde`` (n, F) float: column j holds attribute j's *pair* report (an integer
    state in [0, k_j·C) for RR, the oracle's packed integer for OUE/OLH) on the rows that sampled j,
    NaN elsewhere (exactly m released columns per row) — the same layout as ``RecordMechanism``'s
    sampled releases, so "which attribute was released" reads the same way. ``y_tilde`` (n,) float is
    all NaN: the label is never released on its own (a separate label report would cost ε of its own);
    it lives inside the pair reports. NaN keeps the pool's (X_tilde, y_tilde) arrays of the usual
    shapes while making any code that would read y_tilde as a label report fail loudly instead of
    silently learning from a wrong channel. Decode a pair report with ``pair_log_likelihood``.

    Accounting, exact: with ε_(1) ≥ … ≥ ε_(F) the realised ε of the F pair oracles (all ε/m up to the
    2⁻⁵³ rounding of OUE/OLH, which only lowers ε),

        ε = ε_(1) + … + ε_(m),    δ = 0.

    Proof (as ``RecordMechanism``'s). A release o reveals its sampled set S, drawn with probability
    π(S) = 1/C(F, m) whatever the record, and given S the m pair reports are independent, report j
    depending on the record only through v_j = x_j·C + y. Each pair oracle is ε_j-LDP on its whole
    domain (any two values of v_j are neighbours), so for any two records r, r' and any output o,
    P(o | r) = π(S) Π_{j∈S} P_j(o_j | v_j) ≤ π(S) Π_{j∈S} e^{ε_j} P_j(o_j | v'_j) ≤ e^{ε*} P(o | r')
    with ε* the largest Σ_{j∈S} ε_j over |S| = m, the sum of the m largest; summing over o ∈ E gives
    the bound for every event. It is tight: two records with different labels differ in every pair, and
    the output sampling the m worst attributes with each report at its own oracle's extreme ratio
    attains it. The label thus costs nothing separately: it is paid for inside every pair it joins.
    """

    kind = "paired_record"
    label_where = "a paired release carries the label inside every pair"

    def __init__(
        self,
        n_states: Sequence[int],
        n_classes: int = 2,
        epsilon: float | None = None,
        *,
        n_sampled: int = 1,
        oracle: str | Sequence[str] = "auto",
    ):
        try:
            ks = list(n_states)
        except TypeError:
            raise ValidationError(
                "n_states", f"must be a sequence of integers >= 2 (states per attribute), got {n_states!r}"
            ) from None
        if not 1 <= len(ks) <= MAX_FEATURES:
            raise ValidationError("n_states", f"must list between 1 and {MAX_FEATURES} attributes, got {len(ks)}")
        self.n_classes = check_int("n_classes", n_classes, minimum=2, maximum=MAX_CLASSES)
        self.n_states = tuple(
            check_int(f"n_states[{j}]", k, minimum=2, maximum=MAX_STATES // self.n_classes) for j, k in enumerate(ks)
        )
        if epsilon is None:
            raise ValidationError("epsilon", "is required: the ε of one person's whole release (a real number > 0)")
        self.epsilon_requested = check_positive("epsilon", epsilon)
        self.n_features = len(self.n_states)
        self.n_sampled = check_int("n_sampled", n_sampled, minimum=1, maximum=self.n_features)
        self.pair_epsilon = self.epsilon_requested / self.n_sampled
        kinds = oracle_kinds(oracle, self.n_features, "attribute")
        oracles: list[DiscreteMechanism] = []
        built: dict[tuple[int, str | None], DiscreteMechanism] = {}  # attributes with equal k_j share one oracle
        for j, (k, kind) in enumerate(zip(self.n_states, kinds)):
            K = k * self.n_classes
            if (K, kind) in built:
                oracles.append(built[K, kind])
                continue
            if kind is None:
                oracles.append(built.setdefault((K, kind), frequency_oracle(K, self.pair_epsilon)))
                continue
            try:
                oracles.append(built.setdefault((K, kind), _BUILD[kind](K, self.pair_epsilon)))
            except ValidationError as exc:
                raise ValidationError(
                    "oracle",
                    f"{kind!r} cannot release attribute {j}'s pairs (k_j·C = {k}·{self.n_classes} = {K} values at "
                    f"ε/n_sampled = {self.pair_epsilon:g}): {exc}",
                ) from None
        #: the pair oracle of each attribute, on its k_j·C values
        self.oracles: tuple[DiscreteMechanism, ...] = tuple(oracles)
        self.label = None  # no separate label mechanism: the label is released inside the pairs

    # --- accounting -------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """ε of one person's release: the sum of the n_sampled largest realised pair-oracle ε (see the
        class docstring for the proof)."""
        return float(sum(sorted((o.epsilon for o in self.oracles), reverse=True)[: self.n_sampled]))

    @property
    def delta(self) -> float:
        return 0.0

    @property
    def features_epsilon(self) -> float:
        """The pairs' ε, which is the whole record's (the label has no channel of its own)."""
        return self.epsilon

    def epsilon_breakdown(self) -> dict[str, Any]:
        """Where the budget goes, in ``RecordMechanism.epsilon_breakdown``'s keys (so pool accounting reads
        it alike): ``features`` = ``record`` = the pairs' ε and ``label`` = 0 — the label is paid for inside
        the pairs, it has no separate release; ``per_pair`` = each attribute's realised pair ε."""
        eps = self.epsilon
        return {
            "features": eps,
            "label": 0.0,
            "record": eps,
            "n_sampled": self.n_sampled,
            "n_fields": self.n_features,
            "per_pair": [float(o.epsilon) for o in self.oracles],
        }

    # --- validation -------------------------------------------------------------------------
    def _check_X(self, X: Any, field: str) -> np.ndarray:
        return records_array(X, self.n_features, field)

    def released_fields(self, X_tilde: Any) -> np.ndarray:
        """(n, F) bool: which attributes each release carries (checked: NaN elsewhere, exactly
        n_sampled per row, no infinities); the released values themselves are not checked here."""
        return self._pattern(self._check_X(X_tilde, "X_tilde"))[1]

    def _pattern(self, Xa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = report_floats(Xa)
        released = ~np.isnan(X)
        count = released.sum(axis=1)
        if np.any(count != self.n_sampled):
            r = int(np.argmax(count != self.n_sampled))
            raise ValidationError(
                "X_tilde", f"row {r} releases {int(count[r])} attributes, n_sampled is {self.n_sampled} (NaN elsewhere)"
            )
        return X, released

    def validate_release(self, X_tilde: Any, y_tilde: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Check releases could have come from this mechanism: exactly n_sampled non-NaN columns per row,
        each a valid report of that attribute's pair oracle (RR: a state in [0, k_j·C); OUE/OLH: the
        packed integer range), and ``y_tilde`` None or all NaN (the label is only inside the pairs).
        Returns (X_tilde as floats, y_tilde as an all-NaN float array)."""
        X, released = self._pattern(self._check_X(X_tilde, "X_tilde"))
        for j, o in enumerate(self.oracles):
            rows = released[:, j]
            if rows.any():
                try:
                    o.validate_release(X[rows, j], "X_tilde")
                except ValidationError as exc:
                    raise ValidationError(
                        "X_tilde",
                        f"column {j} (attribute {j}'s pair reports, {type(o).__name__} on {o.k} values; indices "
                        f"among its released entries): {exc.message}",
                    ) from None
        return X, no_label_release(y_tilde, X.shape[0], "a paired release sends the label only inside its pair reports")

    # --- client side --------------------------------------------------------------------------
    def release(self, X: Any, y: Any = None, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One noisy release of each record (X, y): (X_tilde (n, F) with NaN on unsampled attributes,
        y_tilde (n,) all NaN). Draws, in order: one uniform permutation of the F attributes per row, then
        attribute by attribute (j = 0..F−1) the pair-oracle noise of the rows that sampled j."""
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("rng", f"must be a numpy.random.Generator, got {type(rng).__name__}")
        Xv, yv = self.validate_input(X, y)
        n, F, C = Xv.shape[0], self.n_features, self.n_classes
        perm = rng.permuted(np.broadcast_to(np.arange(F), (n, F)), axis=1)
        released = np.zeros((n, F), dtype=bool)
        released[np.arange(n)[:, None], perm[:, : self.n_sampled]] = True
        out = np.full((n, F), np.nan)
        for j, o in enumerate(self.oracles):
            rows = released[:, j]
            if rows.any():
                out[rows, j] = o.sample_valid(Xv[rows, j] * C + yv[rows], rng)
        return out, np.full(n, np.nan)

    # --- server side --------------------------------------------------------------------------
    def pair_log_likelihood(self, j: int, x_tilde: Any) -> np.ndarray:
        """(m, k_j, C): log P(report | x_j = s, y = c) of attribute j's pair reports ``x_tilde`` (m,),
        for every (s, c) — the table spread-EM's E-step and maximum-likelihood naive Bayes use (the
        sampling factor 1/C(F, m) is common to all (s, c) and left out)."""
        j = check_int("j", j, minimum=0, maximum=self.n_features - 1)
        L = self.oracles[j].log_likelihood_matrix(np.asarray(x_tilde, dtype=float).reshape(-1))
        return L.reshape(-1, self.n_states[j], self.n_classes)

    def pair_log_likelihoods(self, X_tilde: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per attribute j: (rows that released j, their (n_j, k_j, C) tables log P(report | x_j = s, y = c)),
        validated. The posterior of a released record over (x_j, y) under a prior table π_j(s, c) is
        ∝ exp(table) · π_j; over (the unreleased attributes, y) it multiplies in the prior of those."""
        X, _ = self.validate_release(X_tilde)
        released = ~np.isnan(X)
        out = []
        for j in range(self.n_features):
            rows = np.flatnonzero(released[:, j])
            out.append((rows, self.pair_log_likelihood(j, X[rows, j])))
        return out

    def unbiased_pair_table(self, j: int, x_tilde: Any) -> np.ndarray:
        """(m, k_j, C): the pair oracle's unbiased one-hot estimate of each report's pair, E[·| x_j, y] =
        e_(x_j, y); its mean over the records that released j is unbiased for P(x_j = s, y = c) (attribute
        sampling is independent of the data, so those records are a uniform subsample)."""
        j = check_int("j", j, minimum=0, maximum=self.n_features - 1)
        U = self.oracles[j].unbiased_onehot(np.asarray(x_tilde, dtype=float).reshape(-1))
        return U.reshape(-1, self.n_states[j], self.n_classes)

    def log_likelihood(self, X_tilde: Any, y_tilde: Any, X: Any, y: Any) -> np.ndarray:
        """Exact log P(x̃ | x, y) per record (n,): the released pairs' oracle terms plus log(1/C(F, m)),
        the probability of the release's sampled set (as ``RecordMechanism`` with attribute sampling)."""
        Xt, _ = self.validate_release(X_tilde, y_tilde)
        Xc, yc = self.validate_input(X, y)
        n = Xt.shape[0]
        if Xc.shape[0] != n:
            raise ValidationError("X", f"must have one clean record per release ({n}), got {Xc.shape[0]}")
        F, m = self.n_features, self.n_sampled
        total = np.full(n, -(math.lgamma(F + 1) - math.lgamma(m + 1) - math.lgamma(F - m + 1)))
        released = ~np.isnan(Xt)
        for j, o in enumerate(self.oracles):
            rows = released[:, j]
            if rows.any():
                total[rows] += o.log_likelihood(Xt[rows, j], Xc[rows, j] * self.n_classes + yc[rows])
        return total

    # --- specs --------------------------------------------------------------------------------
    def to_spec(self) -> dict:
        """The parameters with the oracle *resolved* per attribute (its registered kind), so a spec
        rebuilds the same likelihood even if the "auto" rule changes."""
        return {
            "kind": self.kind,
            "n_features": self.n_features,  # redundant with n_states; what pools check a spec's width by
            "n_states": list(self.n_states),
            "n_classes": self.n_classes,
            "epsilon": self.epsilon_requested,
            "n_sampled": self.n_sampled,
            "oracle": [o.kind for o in self.oracles],
        }

    @classmethod
    def from_spec(cls, spec: dict) -> PairedRecordMechanism:
        if not isinstance(spec, dict):
            raise ValidationError("spec", f"must be a dict (a PairedRecordMechanism spec), got {type(spec).__name__}")
        mech = cls(
            spec["n_states"], spec["n_classes"], spec["epsilon"], n_sampled=spec["n_sampled"], oracle=spec["oracle"]
        )
        if "n_features" in spec and spec["n_features"] != mech.n_features:
            raise ValidationError(
                "spec.n_features", f"is {spec['n_features']!r} but n_states lists {mech.n_features} attributes"
            )
        return mech

    def __repr__(self) -> str:
        kinds = sorted({o.kind for o in self.oracles})
        return (
            f"PairedRecordMechanism(n_features={self.n_features}, n_classes={self.n_classes}, "
            f"n_sampled={self.n_sampled}, oracles={kinds}, epsilon={self.epsilon:.4g}, delta=0)"
        )
