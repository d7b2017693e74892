"""The triple release: each person draws one pair of attributes {j, k} and releases (x_j, x_k, y) as
ONE value of the product domain through one frequency oracle at the full ε: the paired release
(``_paired``, Yilmaz et al. 2019 §4) with two attributes combined with the label instead of one.

Why: one (attribute, label) pair per person identifies only the pair tables p(x_j, y), so a prior
imputes how the attributes depend on each other from nothing; two pairs per person at ε/2 each
identify the three-way tables p(x_j, x_k, y) only through the product of two reports at ε/2. A
triple reports each three-way cell once at ε: on Adult's schema its three-way error is 2.5–7.8×
lower than two pairs' (docs/concepts/release-planner.md, "the (attribute, attribute, label)
triple"), at the cost of the pair tables, which become margins of the triples' cells.

Encoding of a triple: v = (x_j·k_k + x_k)·C + y ∈ {0, …, k_j·k_k·C − 1} for j < k, so that
``table.reshape(k_j, k_k, C)[s, t, c]`` is the entry of (x_j = s, x_k = t, y = c).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .._validation import check_int, check_positive, first_true
from ..errors import ValidationError
from ._base import register
from ._discrete import MAX_STATES, DiscreteMechanism
from ._oracles import frequency_oracle
from ._paired import _BUILD, MAX_CLASSES, LabelInsideRelease, no_label_release, oracle_kinds, report_floats
from ._record import records_array

#: most attributes a triple release takes (it holds one oracle entry per pair of attributes: 2,016 at 64)
MAX_TRIPLE_FEATURES = 64


@register
class TripleRecordMechanism(LabelInsideRelease):
    """Releases one sampled (attribute, attribute, label) triple of a record (x, y), x_j ∈ {0..k_j−1},
    y ∈ {0..C−1}.

    Client side (``release``): every person draws one of the F(F−1)/2 pairs of attributes {j, k},
    j < k, uniformly, independently of the data, from the given generator, and releases
    v = (x_j·k_k + x_k)·C + y through that pair's triple oracle, a frequency oracle on the k_j·k_k·C
    values at the full ε: k-ary randomised response, optimized unary encoding (OUE) or optimized
    local hashing (OLH). ``oracle="auto"`` picks per pair the oracle with the least rare-value
    variance (``frequency_oracle``); a name forces one oracle for every pair.

    Release format. ``X_tilde`` (n, F) float: columns j and k of a row both hold its one report (the
    same number: an integer state for RR, the oracle's packed integer for OUE/OLH), NaN elsewhere, so
    "which attributes were released" reads as for two pairs per person (two columns per row).
    ``y_tilde`` (n,) is all NaN: the label lives inside the report. Decode a report with
    ``triple_log_likelihood``.

    Accounting, exact: with ε_jk the realised ε of pair {j, k}'s oracle (ε up to floating-point
    rounding),

        ε = max_{j<k} ε_jk,    δ = 0.

    Proof. A release o reveals its pair {j, k}, drawn with probability 1/C(F, 2) whatever the record,
    and given the pair its one report depends on the record only through v. The oracle is ε_jk-LDP on
    its whole domain, so P(o | r) = P(o_jk | v) / C(F, 2) ≤ e^{ε_jk} P(o_jk | v') / C(F, 2) =
    e^{ε_jk} P(o | r') for any records r, r'; summing over o ∈ E bounds every event. It is tight: two
    records with different labels differ in every triple, and the output of the worst pair at its
    oracle's extreme ratio attains it."""

    kind = "triple_record"
    label_where = "a triple release carries the label inside its report"
    #: why code that reads (attribute, label) pair reports refuses a triple release
    NOT_PAIRS: ClassVar[str] = (
        "is a TripleRecordMechanism, whose reports are (attribute, attribute, label) triples, not (attribute, "
        "label) pairs: SpreadLogisticRegression fits them (solver 'direct'; prior 'naive-bayes' gives naive "
        "Bayes's tables)"
    )
    #: attributes each release carries (inside its one report)
    n_sampled = 2

    def __init__(
        self,
        n_states: Sequence[int],
        n_classes: int = 2,
        epsilon: float | None = None,
        *,
        oracle: str | Sequence[str] = "auto",
    ):
        try:
            ks = list(n_states)
        except TypeError:
            raise ValidationError(
                "n_states", f"must be a sequence of integers >= 2 (states per attribute), got {n_states!r}"
            ) from None
        if not 2 <= len(ks) <= MAX_TRIPLE_FEATURES:
            raise ValidationError(
                "n_states",
                f"must list between 2 and {MAX_TRIPLE_FEATURES} attributes (a triple holds two), got {len(ks)}",
            )
        self.n_classes = check_int("n_classes", n_classes, minimum=2, maximum=MAX_CLASSES)
        self.n_states = tuple(check_int(f"n_states[{j}]", k, minimum=2) for j, k in enumerate(ks))
        self.n_features = len(self.n_states)
        #: the pairs of attributes a person may draw, j < k, in the order of their oracles
        self.pairs: tuple[tuple[int, int], ...] = tuple(itertools.combinations(range(self.n_features), 2))
        for j, k in self.pairs:
            if self.n_states[j] * self.n_states[k] * self.n_classes > MAX_STATES:
                raise ValidationError(
                    "n_states",
                    f"attributes {j} and {k} give a triple domain of {self.n_states[j]}·{self.n_states[k]}·"
                    f"{self.n_classes} values, more than {MAX_STATES}",
                )
        if epsilon is None:
            raise ValidationError("epsilon", "is required: the ε of one person's whole release (a real number > 0)")
        self.epsilon_requested = check_positive("epsilon", epsilon)
        kinds = oracle_kinds(oracle, len(self.pairs), "pair of attributes")
        built: dict[tuple[int, str | None], DiscreteMechanism] = {}  # pairs with equal k_j·k_k·C share one oracle
        oracles: list[DiscreteMechanism] = []
        for (j, k), kind in zip(self.pairs, kinds):
            K = self.n_states[j] * self.n_states[k] * self.n_classes
            if (K, kind) not in built:
                try:
                    o = (
                        frequency_oracle(K, self.epsilon_requested)
                        if kind is None
                        else _BUILD[kind](K, self.epsilon_requested)
                    )
                except ValidationError as exc:
                    field = "epsilon" if kind is None else "oracle"  # "auto" fails only on ε itself
                    raise ValidationError(
                        field,
                        f"{kind or 'no oracle'!r} can release attributes {j} and {k}'s triples ({K} values) at ε "
                        f"{self.epsilon_requested:g}: {exc}",
                    ) from None
                built[K, kind] = o
            oracles.append(built[K, kind])
        #: the triple oracle of each pair of attributes (``pairs``' order), on its k_j·k_k·C values
        self.oracles: tuple[DiscreteMechanism, ...] = tuple(oracles)
        self._index = {jk: i for i, jk in enumerate(self.pairs)}
        self.label = None  # the label is released inside the triple

    def oracle_of(self, j: int, k: int) -> DiscreteMechanism:
        """The triple oracle of attributes j < k."""
        try:
            return self.oracles[self._index[(int(j), int(k))]]
        except KeyError:
            raise ValidationError(
                "(j, k)", f"must be two attributes j < k in [0, {self.n_features}), got ({j}, {k})"
            ) from None

    # --- accounting -------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """ε of one person's release: the largest realised triple-oracle ε (class docstring)."""
        return float(max(o.epsilon for o in self.oracles))

    @property
    def delta(self) -> float:
        return 0.0

    @property
    def features_epsilon(self) -> float:
        """The triple's ε, which is the whole record's (the label has no channel of its own)."""
        return self.epsilon

    def epsilon_breakdown(self) -> dict[str, Any]:
        """Where the budget goes, in ``RecordMechanism.epsilon_breakdown``'s keys: ``features`` =
        ``record`` = the triple's ε, ``label`` = 0 (paid inside the triple), ``n_sampled`` = 2 attributes
        in one report, ``per_triple``: each pair of attributes' realised ε."""
        eps = self.epsilon
        return {
            "features": eps,
            "label": 0.0,
            "record": eps,
            "n_sampled": self.n_sampled,
            "n_fields": self.n_features,
            "per_triple": [float(o.epsilon) for o in self.oracles],
        }

    # --- validation -------------------------------------------------------------------------
    def released_fields(self, X_tilde: Any) -> np.ndarray:
        """(n, F) bool: the two attributes each release carries (checked: NaN elsewhere, exactly two per
        row holding the same report, no infinities); the report itself is not checked here."""
        return self._pattern(records_array(X_tilde, self.n_features, "X_tilde"))[1]

    def _pattern(self, Xa: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = report_floats(Xa)
        released = ~np.isnan(X)
        count = released.sum(axis=1)
        if np.any(count != 2):
            r = int(np.argmax(count != 2))
            raise ValidationError(
                "X_tilde", f"row {r} releases {int(count[r])} attributes; a triple release holds two (NaN elsewhere)"
            )
        if X.shape[0]:
            two = X[released].reshape(-1, 2)
            if (r := first_true(two[:, 0] != two[:, 1])) is not None:
                raise ValidationError(
                    "X_tilde", f"row {r[0]}'s two released columns differ: both must hold the row's one triple report"
                )
        return X, released

    def _rows_by_pair(self, released: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each row's pair index into ``pairs``, its first column j) from the release pattern."""
        cols = np.argwhere(released)[:, 1].reshape(-1, 2)
        F = self.n_features
        j, k = cols[:, 0], cols[:, 1]
        index = j * F - j * (j + 1) // 2 + (k - j - 1)  # combinations' order
        return index, j

    def validate_release(self, X_tilde: Any, y_tilde: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Check releases could have come from this mechanism: two equal non-NaN columns per row, a valid
        report of that pair's triple oracle (RR: a state in [0, k_j·k_k·C); OUE/OLH: the packed integer
        range), and ``y_tilde`` None or all NaN. Returns (X_tilde as floats, y_tilde all NaN)."""
        X, released = self._pattern(records_array(X_tilde, self.n_features, "X_tilde"))
        index, first = self._rows_by_pair(released)
        n = X.shape[0]
        report = X[np.arange(n), first]
        for i in np.unique(index):
            rows = index == i
            o, (j, k) = self.oracles[i], self.pairs[i]
            try:
                o.validate_release(report[rows], "X_tilde")
            except ValidationError as exc:
                raise ValidationError(
                    "X_tilde",
                    f"columns {j} and {k} (their triple reports, {type(o).__name__} on {o.k} values; indices "
                    f"among those rows): {exc.message}",
                ) from None
        return X, no_label_release(y_tilde, n, "a triple release sends the label only inside its report")

    # --- client side --------------------------------------------------------------------------
    def release(self, X: Any, y: Any = None, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One noisy release of each record (X, y): (X_tilde (n, F), the report in the pair's two columns
        and NaN elsewhere; y_tilde (n,) all NaN). Draws, in order: one uniform pair index per row, then
        pair by pair (``pairs``' order) the oracle noise of the rows that drew it."""
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("rng", f"must be a numpy.random.Generator, got {type(rng).__name__}")
        Xv, yv = self.validate_input(X, y)
        n, C = Xv.shape[0], self.n_classes
        index = rng.integers(len(self.pairs), size=n)
        out = np.full((n, self.n_features), np.nan)
        for i, (j, k) in enumerate(self.pairs):
            rows = np.flatnonzero(index == i)
            if rows.size:
                v = (Xv[rows, j] * self.n_states[k] + Xv[rows, k]) * C + yv[rows]
                out[rows, j] = out[rows, k] = self.oracles[i].sample_valid(v, rng)
        return out, np.full(n, np.nan)

    # --- server side --------------------------------------------------------------------------
    def triple_log_likelihood(self, j: int, k: int, x_tilde: Any) -> np.ndarray:
        """(m, k_j, k_k, C): log P(report | x_j = s, x_k = t, y = c) of the reports ``x_tilde`` (m,) of
        attributes j < k, for every (s, t, c) (the pair's sampling factor 1/C(F, 2) is common to all
        cells and left out)."""
        L = self.oracle_of(j, k).log_likelihood_matrix(np.asarray(x_tilde, dtype=float).reshape(-1))
        return L.reshape(-1, self.n_states[j], self.n_states[k], self.n_classes)

    def log_likelihood(self, X_tilde: Any, y_tilde: Any, X: Any, y: Any) -> np.ndarray:
        """Exact log P(x̃ | x, y) per record (n,): the report's oracle term plus log(1/C(F, 2)), the
        probability of the release's pair."""
        Xt, _ = self.validate_release(X_tilde, y_tilde)
        Xc, yc = self.validate_input(X, y)
        n = Xt.shape[0]
        if Xc.shape[0] != n:
            raise ValidationError("X", f"must have one clean record per release ({n}), got {Xc.shape[0]}")
        total = np.full(n, -math.log(len(self.pairs)))
        index, first = self._rows_by_pair(~np.isnan(Xt))
        for i in np.unique(index):
            rows = np.flatnonzero(index == i)
            j, k = self.pairs[i]
            v = (Xc[rows, j] * self.n_states[k] + Xc[rows, k]) * self.n_classes + yc[rows]
            total[rows] += self.oracles[i].log_likelihood(Xt[rows, j], v)
        return total

    # --- specs --------------------------------------------------------------------------------
    def to_spec(self) -> dict:
        """The parameters with each pair's oracle *resolved* (its registered kind)."""
        return {
            "kind": self.kind,
            "n_features": self.n_features,
            "n_states": list(self.n_states),
            "n_classes": self.n_classes,
            "epsilon": self.epsilon_requested,
            "oracle": [o.kind for o in self.oracles],
        }

    @classmethod
    def from_spec(cls, spec: dict) -> TripleRecordMechanism:
        if not isinstance(spec, dict):
            raise ValidationError("spec", f"must be a dict (a TripleRecordMechanism spec), got {type(spec).__name__}")
        mech = cls(spec["n_states"], spec["n_classes"], spec["epsilon"], oracle=spec["oracle"])
        if "n_features" in spec and spec["n_features"] != mech.n_features:
            raise ValidationError(
                "spec.n_features", f"is {spec['n_features']!r} but n_states lists {mech.n_features} attributes"
            )
        return mech

    def __repr__(self) -> str:
        kinds = sorted({o.kind for o in self.oracles})
        return (
            f"TripleRecordMechanism(n_features={self.n_features}, n_classes={self.n_classes}, "
            f"oracles={kinds}, epsilon={self.epsilon:.4g}, delta=0)"
        )
