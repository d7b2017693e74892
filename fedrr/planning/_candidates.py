"""Each release design the planner compares, scored: the predicted variance of the unbiased estimate of
every pair-table cell P(x_j = s, y = c) and of the class prior from n records (``Candidate``), for the
paired, split and triple designs, and the record mechanism of a scored design. ``_planner`` ranks them.

Variance formulas (exact per report; the tests check each against Monte Carlo). Every oracle fedrr
builds (k-RR, OUE, OLH) reports, for each value u of its domain, an indicator b_u ("the report
supports u") with P(b_u = 1 | v) = α if u = v else β (RR: keep and other probabilities; OUE: p, q;
OLH: p, q*), and debiases it as û_u = (b_u − β)/(α − β), E[û_u | v] = 1{u = v}. Hence

    E[û_u² | v] = g₁ = 1 + α(1 − α)/(α − β)²  if u = v,    g₀ = β(1 − β)/(α − β)²  otherwise

(g₀ is Wang et al.'s Var*, ``rare_value_variance``). With π the table of (x_j, y) in the population:

* paired, cell v = (s, c) of attribute j, one report: Var = g₀ + (g₁ − g₀)·π_v − π_v²;
* split, the joint debiasing of (attribute report, label report): P̂(s, c) = mean of û_A[s]·û_L[c]
  (for RR × RR this IS (M_A ⊗ M_L)⁻¹ applied to the empirical joint, since the inverse of a
  Kronecker product is the Kronecker product of the inverses), whose second moment factorises given
  (x, y) because the two channels' noise is independent: Var = (G_A π G_Lᵀ)[s, c] − π[s, c]², with
  G[s, x] = g₁ if s = x else g₀ for each channel;
* attribute sampling: attribute j is released by n_j ≈ n·m/F people (each draws m of F uniformly),
  and P̂_j is the mean over them, so Var P̂_j(s, c) = Var(one report)·F/(m·n) (= V/E[n_j]; E[1/n_j]
  exceeds 1/E[n_j] by a relative (1 − m/F)·F/(n·m), below 10⁻³ for Adult);
* class prior, split: the label reports of all n people, Var = (g₀ + (g₁ − g₀)ρ_c − ρ_c²)/n for the
  label's k-RR, ρ the class distribution;
* class prior, paired: the mean over the F attributes of the column sums Z_jc = Σ_s û_{(s,c)},
  Var = [(m/F)·Σ_j E Z_jc² + m(m − 1)ρ_c − m²ρ_c²]/(n·m²) (one person's m sampled attributes carry
  independent noise, so E[Z_jc Z_j'c] = ρ_c for j ≠ j'). E Z_jc² needs the cross moments
  E[b_u b_w | v] of two values of one report: 0 for RR (one value is reported), the product for OUE
  (independent bits), and for OLH the average over every seed of its hash family (exact enumeration,
  up to ``_OLH_ENUMERATION`` seed × value pairs; beyond, the pairwise-independence approximation
  P(H(u) = H(w) = H(v)) ≈ c², c the family's collision probability, marked in ``describe()``).

Reference distribution: the variances depend on π only through the π_v terms above, which are small
next to g₀ for the rare cells that decide the ranking. By default π is uniform on every pair table
(each cell 1/(k_j·C), classes 1/C); ``reference=`` takes F tables (k_j, C), e.g. a public prior.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._params import Interval, check_param
from ..errors import ValidationError
from ..mechanisms import (
    DiscreteMechanism,
    LocalHashing,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
    TripleRecordMechanism,
    UnaryEncoding,
    frequency_oracle,
)
from ._co_occurrence import DEPENDENCE_TARGET, co_occurrence_error, three_way_reference, triple_cell_variance
from ._moments import (
    label_prior_variance,
    paired_cell_variance,
    paired_column_second_moment,
    set_sums_second_moments,
    split_cell_variance,
)

_SHORT = {RandomizedResponse.kind: "rr", UnaryEncoding.kind: "oue", LocalHashing.kind: "olh"}


@dataclass(frozen=True, eq=False)
class Candidate:
    """One design the planner scored: ``design`` "paired" or "split", ``n_sampled`` = m attributes per
    person, ``label_share`` = λ (split only), the oracle kind of each attribute (``oracles``) and the
    label's (split only), the predicted variance of every pair-table cell with n records
    (``cell_variance``: one (k_j, C) array per attribute) and of the class prior (``prior_variance``),
    and ``score`` = their total; ``co_occurrence_error``: the RMS relative error of the three-way tables
    P(x_j, x_k, y) that people releasing two attributes inform (``_co_occurrence``; ∞ for m = 1)."""

    design: str
    n_sampled: int
    label_share: float | None
    oracles: tuple[str, ...]
    label_oracle: str | None
    cell_variance: tuple[np.ndarray, ...] = field(repr=False)
    prior_variance: np.ndarray = field(repr=False)
    exact: bool = True
    co_occurrence_error: float = math.inf

    @property
    def identifies_dependence(self) -> bool:
        """Its releases estimate how the attributes co-occur (``co_occurrence_error`` ≤ ``DEPENDENCE_TARGET``)."""
        return self.co_occurrence_error <= DEPENDENCE_TARGET

    @property
    def score(self) -> float:
        return float(sum(v.sum() for v in self.cell_variance) + self.prior_variance.sum())

    @property
    def n_cells(self) -> int:
        return int(sum(v.size for v in self.cell_variance) + self.prior_variance.size)

    def name(self) -> str:
        if self.design == "paired":
            return f"paired, m={self.n_sampled}"
        if self.design == "triple":
            return "triple"
        return f"split λ={self.label_share:g}, m={self.n_sampled}"

    def oracle_summary(self) -> str:
        counts: dict[str, int] = {}
        for k in self.oracles:
            counts[_SHORT[k]] = counts.get(_SHORT[k], 0) + 1
        text = " ".join(f"{n}×{k}" for k, n in counts.items())
        return text + ("" if self.label_oracle is None else f" + label {_SHORT[self.label_oracle]}")


def _reference_tables(reference: Any, ks: tuple[int, ...], C: int) -> tuple[list[np.ndarray], str]:
    if reference is None:
        return [np.full((k, C), 1.0 / (k * C)) for k in ks], "uniform pair tables"
    try:
        items = list(reference)
    except TypeError:
        raise ValidationError("reference", f"must be None or {len(ks)} tables (k_j, C), got {reference!r}") from None
    if len(items) != len(ks):
        raise ValidationError("reference", f"must give one (k_j, C) table per attribute ({len(ks)}), got {len(items)}")
    tables = []
    for j, (t, k) in enumerate(zip(items, ks)):
        try:
            arr = np.asarray(t, dtype=float)
        except (TypeError, ValueError):
            raise ValidationError(f"reference[{j}]", "must be a table of probabilities") from None
        if arr.shape != (k, C):
            raise ValidationError(f"reference[{j}]", f"must have shape ({k}, {C}), got {arr.shape}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0) or abs(arr.sum() - 1) > 1e-6:
            raise ValidationError(f"reference[{j}]", "must be non-negative and sum to 1")
        tables.append(arr / arr.sum())
    return tables, "the given reference tables"


def _score_paired(oracles, ks, C, m, n, tables, rho) -> Candidate:
    F = len(ks)
    cells, moments, exact = [], [], True
    for o, t in zip(oracles, tables):
        cells.append(paired_cell_variance(o, t) * F / (m * n))
        mom, ex = paired_column_second_moment(o, t)
        moments.append(mom)
        exact &= ex
    total_second = np.sum(moments, axis=0)
    prior = ((m / F) * total_second + m * (m - 1) * rho - m * m * rho**2) / (n * m * m)
    kinds = tuple(o.kind for o in oracles)
    co = co_occurrence_error(list(oracles), list(tables), m, n)
    return Candidate("paired", m, None, kinds, None, tuple(cells), prior, exact, co)


def _score_triple(ks, C, eps, n, tables, rho, oracles: Sequence[DiscreteMechanism] | None = None) -> Candidate:
    """The triple release (``TripleRecordMechanism``): each person one pair of attributes {j, k} of the
    F(F − 1)/2, drawn uniformly, and (x_j, x_k, y) through the least-variance oracle of its k_j·k_k·C
    values at ε. Attribute j's pair table is the mean over its F − 1 partners of each triple table's
    margin Σ_s' û_(s, s', c), so its variance is the mean of those margins' variances over F − 1
    (each margin's second moment a set sum's, ``set_sums_second_moments``: exact for RR and OUE, for OLH
    over its hash seeds, a fixed subset of them for large domains, marked ≈); the class prior is the mean
    over all n reports of their class sums; the three-way error is each cell's own frequency variance.
    ``oracles``: one per pair of attributes (a mechanism's own); None: the least-variance ones at ε."""
    F = len(ks)
    pairs = [(j, k) for j in range(F) for k in range(j + 1, F)]
    n_pair = n * 2 / (F * (F - 1))  # the people who release a given pair of attributes
    built: dict[int, DiscreteMechanism] = {}
    cells = [np.zeros((k, C)) for k in ks]
    second, co_total, co_cells, exact, kinds = np.zeros(C), 0.0, 0, True, []
    for i, (j, k) in enumerate(pairs):
        K = ks[j] * ks[k] * C
        o = oracles[i] if oracles is not None else built.get(K) or built.setdefault(K, frequency_oracle(K, eps))
        kinds.append(o.kind)
        pi3 = three_way_reference(tables[j], tables[k])  # (k_j, k_k, C), value (s·k_k + t)·C + c
        s_, t_, c_ = np.indices(pi3.shape).reshape(3, -1)
        (mj, mk, mc), ex = set_sums_second_moments(o, pi3.ravel(), [s_ * C + c_, t_ * C + c_, c_])
        cells[j] += (mj.reshape(ks[j], C) - pi3.sum(axis=1) ** 2) / (n_pair * (F - 1) ** 2)
        cells[k] += (mk.reshape(ks[k], C) - pi3.sum(axis=0) ** 2) / (n_pair * (F - 1) ** 2)
        second += mc / len(pairs)
        exact &= ex
        keep = pi3 > 0
        v = triple_cell_variance(o, pi3)
        co_total += float((v[keep] / n_pair / pi3[keep] ** 2).sum())
        co_cells += int(keep.sum())
    prior = (second - rho**2) / n
    co = math.sqrt(co_total / co_cells) if co_cells else math.inf
    return Candidate("triple", 2, None, tuple(kinds), None, tuple(cells), prior, exact, co)


def _score_split(oracles, label, lam, ks, m, n, tables, rho) -> Candidate:
    F = len(ks)
    cells = [split_cell_variance(o, label, t) * F / (m * n) for o, t in zip(oracles, tables)]
    prior = label_prior_variance(label, rho) / n
    co = co_occurrence_error(list(oracles), list(tables), m, n, label)
    return Candidate("split", m, lam, tuple(o.kind for o in oracles), label.kind, tuple(cells), prior, True, co)


def _least_variance_oracles(ks: Sequence[int], epsilon: float) -> list[DiscreteMechanism]:
    built: dict[int, DiscreteMechanism] = {}
    for k in ks:
        if k not in built:
            built[k] = frequency_oracle(k, epsilon)
    return [built[k] for k in ks]


def predicted_variance(
    mechanism: PairedRecordMechanism | RecordMechanism, n_records: int, *, reference: Sequence[Any] | None = None
) -> Candidate:
    """The planner's prediction for a given record mechanism: a ``Candidate`` holding the variance of the
    unbiased estimate of every pair-table cell P(x_j = s, y = c) and of the class prior from
    ``n_records`` releases (formulas in the module doc), evaluated at ``reference`` (None: uniform).

    ``mechanism``: a ``PairedRecordMechanism``, or a ``RecordMechanism`` whose fields are each one
    discrete frequency oracle (k-RR, OUE or OLH) and whose label is randomised response (a split
    release; without attribute sampling m = F)."""
    n = check_param("n_records", n_records, [Interval(int, 1, None)])
    if isinstance(mechanism, TripleRecordMechanism):
        ks, C = mechanism.n_states, mechanism.n_classes
        tables, _ = _reference_tables(reference, ks, C)
        rho = np.mean([t.sum(axis=0) for t in tables], axis=0)
        return _score_triple(ks, C, mechanism.epsilon_requested, n, tables, rho, mechanism.oracles)
    if isinstance(mechanism, PairedRecordMechanism):
        ks, C = mechanism.n_states, mechanism.n_classes
        tables, _ = _reference_tables(reference, ks, C)
        rho = np.mean([t.sum(axis=0) for t in tables], axis=0)
        return _score_paired(list(mechanism.oracles), ks, C, mechanism.n_sampled, n, tables, rho)
    if not isinstance(mechanism, RecordMechanism):
        raise ValidationError(
            "mechanism", f"must be a PairedRecordMechanism or a RecordMechanism, got {type(mechanism).__name__}"
        )
    oracles = [f.mechanism for f in mechanism.fields]
    if not all(isinstance(o, (RandomizedResponse, UnaryEncoding, LocalHashing)) for o in oracles):
        raise ValidationError("mechanism", "every field of a split release must be a k-RR, OUE or OLH oracle")
    if not isinstance(mechanism.label, RandomizedResponse):
        raise ValidationError("mechanism", "a split release needs a RandomizedResponse label mechanism")
    ks, C = tuple(o.k for o in oracles), mechanism.label.k
    tables, _ = _reference_tables(reference, ks, C)
    rho = np.mean([t.sum(axis=0) for t in tables], axis=0)
    m = mechanism.n_sampled or len(oracles)
    lam = mechanism.label.epsilon / mechanism.epsilon
    return _score_split(oracles, mechanism.label, lam, ks, m, n, tables, rho)


def build_mechanism(
    candidate: Candidate, n_states: Sequence[int], n_classes: int, epsilon: float
) -> PairedRecordMechanism | RecordMechanism:
    """The record mechanism of a scored candidate (its oracles as scored)."""
    m = candidate.n_sampled
    if candidate.design == "triple":
        return TripleRecordMechanism(n_states, n_classes, epsilon, oracle=list(candidate.oracles))
    if candidate.design == "paired":
        return PairedRecordMechanism(n_states, n_classes, epsilon, n_sampled=m, oracle=list(candidate.oracles))
    lam = candidate.label_share
    feats = _least_variance_oracles(n_states, (1 - lam) * epsilon / m)
    return RecordMechanism(feats, RandomizedResponse(n_classes, epsilon=lam * epsilon), n_sampled=m)
