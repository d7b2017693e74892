"""The release planner: which record release gives the learners the most precise statistics for a
budget ε per person, n records and the schema (k_j states per attribute, C classes).

What the learners need. Naive Bayes and spread-EM's association signal rest on the pair tables
P(x_j = s, y = c) of every attribute j, and on the class prior P(y = c). The planner predicts, for
each candidate design, the variance of the unbiased estimate of every such cell from n records, and
picks the design with the least **total** variance

    score = Σ_j Σ_{s,c} Var P̂_j(s, c) + Σ_c Var P̂(y = c),

the expected squared L2 error E‖P̂ − P‖² of all the tables together. The total (not the mean) is the
loss of the whole set of tables; every design estimates the same Σ_j k_j·C + C cells, so the mean
ranks the designs identically.

Candidates (``plan_release``), for m = 1 … min(F, max_sampled) sampled attributes per person:

* **paired**: each sampled pair (x_j, y) as one value of the k_j·C domain through one frequency
  oracle at ε/m (``PairedRecordMechanism``), the oracle with the least rare-value variance for
  k_j·C values at ε/m (``frequency_oracle``);
* **split**: the label by C-ary randomised response at λ·ε, and each of m sampled attributes by its
  own least-variance oracle at (1 − λ)·ε/m (``RecordMechanism``), for λ in ``label_shares``
  (default 0.25, 0.5, 0.75).

Dependence. The pair tables say nothing about how the attributes co-occur; the three-way tables
P(x_j, x_k, y) do, and only people who release two attributes inform them. Every plan reports the
predicted RMS relative error of those tables (``_co_occurrence``; it falls as 1/√n) and from how many
people a design identifies them. With ``dependence="prefer"`` (the default) the designs whose error is
at most ``DEPENDENCE_TARGET`` rank before every other, the one that estimates it best first (the triple,
``TripleRecordMechanism``, where it can be built), so the ranking depends on n; with ``"report"`` the
total variance alone ranks the designs of (attribute, label) pairs, the triple after them. The error
says how well a design would estimate the dependence, not whether the data has any. Measured on a
validation split of Adult's training rows (docs/concepts/release-planner.md), the triple beat one pair
by 0.7 to 3.2 points wherever its error is within the line and lost where it is over it; on the
tutorial survey's generator (independent attributes) it costs 3.6 ± 1.8 points at 2,000 people and
ε 2, 0.1 to 0.4 at 3·10⁴, and nothing from 3·10⁵.

(The variance formulas and the reference distribution: ``_candidates``.)

What to expect (``ReleasePlan``'s ``relative_error_`` and what follows from it; the ranking does not
use them). A cell's error is judged against the cell itself: r_j(s, c) = sd P̂_j(s, c) / π_j(s, c),
the predicted standard deviation over the reference cell (cells with π = 0 are left out). The plan
reports their root mean square over every pair-table cell, r = √(mean r²), and per attribute. Since
every variance is ∝ 1/n, r(n) = r(n₀)·√(n₀/n): the people a design needs for r ≤ target are
⌈n₀·(r₀/target)²⌉, closed form. The ε needed at n is found by re-planning at trial ε (the chosen
design can change with ε), a bracketed search on log r against log ε.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from .._params import Interval, IsNone, ListOf, Options, check_param
from ..errors import ValidationError
from ..mechanisms import (
    MAX_CLASSES,
    MAX_FEATURES,
    MAX_STATES,
    MAX_TRIPLE_FEATURES,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
)
from ._candidates import (
    Candidate,
    _least_variance_oracles,
    _reference_tables,
    _score_paired,
    _score_split,
    _score_triple,
    build_mechanism,
)
from ._co_occurrence import DEPENDENCE_TARGET

#: ``plan_release``'s ranking by default (``_rank``): the designs that identify the dependence first
DEFAULT_DEPENDENCE = "prefer"
#: the label's share λ of ε in the split designs the planner compares
LABEL_SHARES = (0.25, 0.5, 0.75)
#: most attributes per person the planner tries by default (m = 1 … min(F, this))
MAX_PLANNED_SAMPLED = 16


#: default target of ``relative_error_`` (RMS sd/π per pair-table cell). At 0.25 a cell's log is off by
#: ≈ 0.25 (one sd, δ log π ≈ δπ/π), so two cells a factor 2 apart are ordered rightly with probability
#: Φ(ln 2/(0.25·√2)) = Φ(1.96) ≈ 97.5 %; Adult at 10⁶ people and ε 1 (r = 0.35) is where paired naive
#: Bayes reaches 0.808, within 0.4 points of its clean ceiling 0.812 (issue 46's measurement).
DEFAULT_TARGET = 0.25
#: ``too_few_people_`` from this ``relative_error_`` on: a typical cell's ±2 sd interval reaches 0, so
#: the tables cannot tell it from an empty cell (the error is as large as the cells themselves)
TOO_FEW_PEOPLE = 0.5
#: the range ``epsilon_needed_`` searches (ε per person)
EPSILON_SEARCH = (0.01, 32.0)
#: one line per oracle: what a person sends, and what it costs
ORACLE_LINES = {
    "rr": "k-ary randomised response: sends one of the k values, its own with probability e^ε/(e^ε + k − 1), "
    "else another at random; ⌈log₂ k⌉ bits, the least variance on small domains (k < 3e^ε + 2)",
    "oue": "optimised unary encoding: sends k bits, its own value's bit 1 with probability ½ and each other "
    "with 1/(e^ε + 1); k bits per report (k ≤ 52 here)",
    "olh": "optimised local hashing: sends a random hash seed and its value's bucket among g ≈ e^ε + 1, "
    "by g-ary randomised response; a short report, but the server hashes every value for every report",
}

_CONSTRAINTS = {
    "n_states": [ListOf(Interval(int, 2, None), distinct=False)],
    "n_classes": [Interval(int, 2, MAX_CLASSES)],
    "epsilon": [Interval(float, 0, None, closed="neither")],
    "n_records": [Interval(int, 1, None)],
    "label_shares": [ListOf(Interval(float, 0, 1, closed="neither"))],
    "max_sampled": [IsNone(), Interval(int, 1, None)],
    "target": [Interval(float, 0, None, closed="neither")],
    "dependence": [Options("report", "prefer")],
}


# --- candidates ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ReleasePlan:
    """What ``plan_release`` returns: the chosen ``mechanism`` (a ``PairedRecordMechanism`` or a
    ``RecordMechanism``), every scored ``candidates`` (best first) and the inputs. ``describe()`` is the
    readable reason and what to expect.

    What to expect from the chosen design (module doc, "What to expect"; at the reference tables):

    * ``cell_relative_error_``: per attribute, the (k_j, C) array sd P̂_j(s, c)/π_j(s, c) (NaN where π = 0);
    * ``attribute_relative_error_``: (F,) their RMS per attribute; ``worst_attribute_`` its argmax;
    * ``relative_error_``: their RMS over every pair-table cell (π > 0), the plan's headline error;
    * ``too_few_people_``: ``relative_error_`` ≥ ``TOO_FEW_PEOPLE`` (0.5), the error as large as the cells;
    * ``n_needed_``: the fewest people for which the chosen design's ``relative_error_`` ≤ ``target``;
    * ``relative_error_floor_``: the ``relative_error_`` of noise-free releases of as many pairs per
      person as the planner tries: no ε beats it with ``n_records`` people;
    * ``epsilon_needed_``: the least ε per person at which the design planned for ``n_records`` people
      reaches ``target``, found within 2 % and rounded up to two significant digits; None if no ε in
      ``EPSILON_SEARCH`` does (at once when ``relative_error_floor_`` > ``target``).
      It re-plans at trial ε (about six plans), so it is computed on first use."""

    mechanism: PairedRecordMechanism | RecordMechanism
    candidates: tuple[Candidate, ...]
    n_states: tuple[int, ...]
    n_classes: int
    epsilon: float
    n_records: int
    reference: str
    target: float = DEFAULT_TARGET
    reference_tables: tuple[np.ndarray, ...] = field(default=(), repr=False)
    label_shares: tuple[float, ...] = field(default=LABEL_SHARES, repr=False)
    max_sampled: int | None = field(default=None, repr=False)
    dependence: str = field(default=DEFAULT_DEPENDENCE, repr=False)

    @property
    def best(self) -> Candidate:
        return self.candidates[0]

    def mechanism_for(self, candidate: Candidate | int) -> PairedRecordMechanism | RecordMechanism:
        """The record mechanism of one of this plan's ``candidates`` (the object, or its rank from 0), at
        the plan's ε: ``mechanism_for(0)`` is ``mechanism``; a runner-up's, to measure it against."""
        if isinstance(candidate, (int, np.integer)) and not isinstance(candidate, bool):
            if not 0 <= candidate < len(self.candidates):
                raise ValidationError("candidate", f"rank must be in [0, {len(self.candidates) - 1}], got {candidate}")
            candidate = self.candidates[candidate]
        if not any(candidate is c for c in self.candidates):
            raise ValidationError("candidate", "must be one of this plan's candidates (or its rank)")
        return build_mechanism(candidate, self.n_states, self.n_classes, self.epsilon)

    # --- what to expect -------------------------------------------------------------------------
    def relative_errors(self, candidate: Candidate | None = None) -> tuple[np.ndarray, float]:
        """(per attribute RMS of sd/π, RMS over every cell) of ``candidate`` (default: the chosen one)."""
        cand = self.best if candidate is None else candidate
        per, allsq = [], []
        for v, t in zip(cand.cell_variance, self.reference_tables):
            r2 = v[t > 0] / t[t > 0] ** 2
            per.append(math.sqrt(r2.mean()))
            allsq.append(r2)
        return np.array(per), float(math.sqrt(np.concatenate(allsq).mean()))

    @cached_property
    def cell_relative_error_(self) -> tuple[np.ndarray, ...]:
        with np.errstate(divide="ignore", invalid="ignore"):
            return tuple(
                np.where(t > 0, np.sqrt(v) / t, np.nan) for v, t in zip(self.best.cell_variance, self.reference_tables)
            )

    @cached_property
    def attribute_relative_error_(self) -> np.ndarray:
        return self.relative_errors()[0]

    @cached_property
    def relative_error_(self) -> float:
        return self.relative_errors()[1]

    @property
    def worst_attribute_(self) -> int:
        return int(np.argmax(self.attribute_relative_error_))

    @property
    def too_few_people_(self) -> bool:
        return self.relative_error_ >= TOO_FEW_PEOPLE

    @cached_property
    def relative_error_floor_(self) -> float:
        # ε → ∞: g₀ → 0, g₁ → 1, so a cell's variance is at least π(1 − π)·F/(m·n) with m as large as
        # the planner goes (split likewise: G ≥ the identity entrywise); no design at any ε does better
        F = len(self.n_states)
        m = min(F, MAX_PLANNED_SAMPLED if self.max_sampled is None else self.max_sampled)
        r2 = [((1 - t[t > 0]) / t[t > 0]) * F / (m * self.n_records) for t in self.reference_tables]
        return float(math.sqrt(np.concatenate(r2).mean()))

    @cached_property
    def n_needed_(self) -> int:
        # every variance is ∝ 1/n: r(n) = r(n₀)·√(n₀/n); the small margin absorbs rounding in the ratio
        return max(1, math.ceil(self.n_records * (self.relative_error_ / self.target) ** 2 * (1 - 1e-12)))

    @cached_property
    def epsilon_needed_(self) -> float | None:
        eps = _epsilon_needed(self)
        return None if eps is None else float(f"{_up(eps):.2g}")

    @property
    def co_occurrence_error_(self) -> float:
        """The chosen design's RMS relative error of the three-way tables P(x_j, x_k, y) (∞: m = 1)."""
        return self.best.co_occurrence_error

    @property
    def dependence_design_(self) -> Candidate | None:
        """The candidate whose releases estimate the three-way tables best (None: no candidate releases
        two attributes per person)."""
        finite = [c for c in self.candidates if math.isfinite(c.co_occurrence_error)]
        return min(finite, key=lambda c: (c.co_occurrence_error, c.score)) if finite else None

    @property
    def n_needed_for_dependence_(self) -> int | None:
        """The fewest people for which ``dependence_design_`` identifies the dependence at this ε
        (its error ∝ 1/√n); None without such a design."""
        d = self.dependence_design_
        if d is None:
            return None
        return max(1, math.ceil(self.n_records * (d.co_occurrence_error / DEPENDENCE_TARGET) ** 2 * (1 - 1e-12)))

    # --- text -----------------------------------------------------------------------------------
    def _dependence_text(self) -> str:
        """What the chosen design tells a learner about how the attributes depend on each other."""
        best, r = self.best, self.best.co_occurrence_error
        if best.identifies_dependence:
            return (
                f"Dependence identified: {best.name()} releases {best.n_sampled} attributes per person, and its "
                f"three-way tables P(x_j, x_k, y) are off by {r:.3g} (RMS sd/π; ≤ {DEPENDENCE_TARGET:g}, the line "
                "calibrated on Adult): a learner can estimate how the attributes co-occur."
            )
        d = self.dependence_design_
        why = (
            "one attribute per person identifies the pair tables alone"
            if best.n_sampled == 1
            else f"its three-way tables P(x_j, x_k, y) are off by {r:.3g} (RMS sd/π)"
        )
        text = (
            f"Dependence not identified: {why}, so a learner's model of how the attributes co-occur is its "
            "prior's, whatever n (on Adult, naive Bayes's tables stop 3 points below clean logistic regression)."
        )
        if d is None:
            return text
        best_for_it = (
            f"The design that estimates it best, {d.name()}, is off by {d.co_occurrence_error:.3g} (RMS sd/π of "
            f"the three-way cells; the line is {DEPENDENCE_TARGET:g}, calibrated on Adult)"
        )
        if d.identifies_dependence:  # the variance ranking (dependence="report") kept a design that does not
            return (
                f"{text} {best_for_it}: it identifies it with these {self.n_records:,} people, at "
                f"{d.score / best.score:.2f}× the pair tables' variance; dependence='prefer' chooses it."
            )
        need = self.n_needed_for_dependence_
        return f"{text} {best_for_it}; it identifies it from {need:,} people at ε = {self.epsilon:g}."

    def expectation(self) -> str:
        """Plain words: the predicted error of the chosen design, a warning if it is as large as the
        cells, and what reaches ``target`` (people at this ε, ε at these people)."""
        r, t, n = self.relative_error_, self.target, self.n_records
        j = self.worst_attribute_
        C = self.n_classes
        n_cells = sum(int((tab > 0).sum()) for tab in self.reference_tables)
        per = self.attribute_relative_error_
        worst = (
            "every attribute alike"
            if per.max() <= per.min() * (1 + 1e-9)
            else f"worst attribute: x_{j} (k = {self.n_states[j]}, {self.n_states[j] * C} cells), {_pct(per[j])}"
        )
        lines = [
            f"Expected error: each pair-table cell P(x_j=s, y=c) is off by {_pct(r)} of its own size (RMS of "
            f"sd/π over the {n_cells} cells, π: {self.reference}); {worst}."
        ]
        if self.too_few_people_:
            lines.append(
                f"WARNING: too few people for ε = {self.epsilon:g}: the error is as large as the cells themselves "
                f"(≥ {_pct(TOO_FEW_PEOPLE)}: a typical cell's ±2 sd interval reaches 0), so the tables, and every "
                "learner built on them, are mostly noise."
            )
        eps_n = self.epsilon_needed_
        if r > t:
            more = f"collect ≥ {self.n_needed_:,} people at ε = {self.epsilon:g} ({self.best.name()})"
            if eps_n is not None:
                how = f"{more}, or raise ε to {eps_n:g} per person"
            else:
                how = (
                    f"{more}; raising ε alone cannot: no ε up to {EPSILON_SEARCH[1]:g} reaches it with {n:,} "
                    f"people (even noise-free releases leave {_pct(self.relative_error_floor_)})"
                )
            lines.append(f"To bring it under the target {_pct(t)}: {how}.")
        else:
            lower = f"; ε = {eps_n:g} would also reach it" if eps_n is not None and eps_n < self.epsilon else ""
            lines.append(
                f"Target {_pct(t)} met: {self.best.name()} needs {self.n_needed_:,} people at "
                f"ε = {self.epsilon:g}, and there are {n:,}{lower}."
            )
        lines.append(self._dependence_text())
        return "\n".join(lines)

    def describe(self, top: int | None = None, *, oracles: bool = True) -> str:
        """The chosen design, what to expect of it (``expectation``), then a text table of the
        candidates, the chosen one first: total predicted variance of the pair tables and class prior,
        its ratio to the best, the RMS error per cell and the RMS relative error sd/π per pair-table
        cell; and (``oracles``) one line on each oracle."""
        best = self.best.score
        rows = self.candidates if top is None else self.candidates[:top]
        F, C = len(self.n_states), self.n_classes
        lines = [
            f"Release plan: ε = {self.epsilon:g} per person, n = {self.n_records:,} records, F = {F} attributes "
            f"(k = {', '.join(map(str, self.n_states))}), C = {C} classes; reference: {self.reference}.",
            f"Chosen: {self.best.name()} ({self.best.oracle_summary()}) -> {self.mechanism!r}",
            self.expectation(),
            "",
            (
                f"The designs that identify how the attributes co-occur (co-occ ≤ {DEPENDENCE_TARGET:g}) first, then "
                "ranking"
                if self.dependence == "prefer"
                else "Ranking"
            )
            + " by the total predicted variance of every pair-table cell P(x_j=s, y=c) and the class prior "
            f"({self.best.n_cells} cells), from n records; rel err: RMS of sd/π per pair-table cell; co-occ: the "
            "same for the three-way tables P(x_j, x_k, y) (∞: one attribute per person).",
            f"{'rank':>4}  {'design':<22} {'oracles':<28} {'total var':>11} {'× best':>8} {'RMS/cell':>9} "
            f"{'rel err':>8} {'co-occ':>8}",
        ]
        for i, c in enumerate(rows, 1):
            mark = "" if c.exact else " ≈"
            lines.append(
                f"{i:>4}  {c.name():<22} {c.oracle_summary():<28} {c.score:>11.4g} {c.score / best:>8.2f} "
                f"{math.sqrt(c.score / c.n_cells):>9.3g} {self.relative_errors(c)[1]:>8.3g} "
                f"{c.co_occurrence_error:>8.3g}{mark}"
            )
        if top is not None and len(self.candidates) > top:
            lines.append(f"      … {len(self.candidates) - top} more candidates")
        if not all(c.exact for c in rows):
            lines.append("≈: an OLH class-prior moment averaged over a random subset of hash seeds (module doc).")
        if oracles:
            lines += ["", "Oracles (what one report sends, what it costs):"]
            lines += [f"  {k:<4} {text}" for k, text in ORACLE_LINES.items()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    @staticmethod
    def percent(r: float) -> str:
        """How ``describe()`` writes a relative error ``r`` (0.25 -> "25 %")."""
        return _pct(r)


def _pct(r: float) -> str:
    """A relative error as a percentage: 3 significant digits, whole percents from 1,000 % on."""
    return f"{100 * r:,.0f} %" if r >= 10 else f"{100 * r:.3g} %"


def _up(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant digits (people and ε to recommend stay on the safe side)."""
    if x <= 0:
        return x
    scale = 10 ** (math.floor(math.log10(x)) - digits + 1)
    return math.ceil(x / scale * (1 - 1e-12)) * scale


def _epsilon_needed(plan: ReleasePlan) -> float | None:
    if plan.relative_error_floor_ > plan.target:  # not even noise-free releases reach it
        return None
    tables = tuple((t.shape, t.tobytes()) for t in plan.reference_tables)
    key = (plan.n_states, plan.n_classes, plan.n_records, tables, plan.label_shares, plan.max_sampled, plan.dependence)
    return _epsilon_search(key, plan.target, plan.epsilon, plan.relative_error_)


@lru_cache(maxsize=512)
def _planned_relative_error(key: tuple, eps: float) -> float:
    """``relative_error_`` of the plan for ε (``key``: schema, n, reference tables, options); inf where
    no design can be built."""
    ks, C, n, tables, shares, cap, dep = key
    ref = [np.frombuffer(b).reshape(shape) for shape, b in tables]
    try:
        plan = plan_release(ks, C, eps, n, reference=ref, label_shares=shares, max_sampled=cap, dependence=dep)
        return plan.relative_error_
    except ValidationError:
        return math.inf


def _epsilon_search(key: tuple, target: float, eps0: float, r0: float) -> float | None:
    """The least ε in ``EPSILON_SEARCH`` at which ``plan_release`` (``key``: this schema, n, reference
    tables and options) plans a design whose ``relative_error_`` ≤ ``target``, within 2 % (its safe end).
    From the plan's own ε (``eps0``, error ``r0``) it brackets by factors of 4, then tries ±1 % around
    the point where log r, interpolated linearly in log ε, meets the target (r falls with ε; each try
    re-plans, once per process)."""
    lo_lim, hi_lim = EPSILON_SEARCH

    def rel(eps: float) -> float:
        return r0 if eps == eps0 else _planned_relative_error(key, eps)

    e = min(max(eps0, lo_lim), hi_lim)
    r = rel(e)
    if r > target:  # lo misses, hi reaches
        lo, rlo = e, r
        while True:
            if lo >= hi_lim:
                return None
            hi = min(4 * lo, hi_lim)
            rhi = rel(hi)
            if rhi <= target:
                break
            lo, rlo = hi, rhi
    else:
        hi, rhi = e, r
        while True:
            if hi <= lo_lim:
                return lo_lim
            lo = max(hi / 4, lo_lim)
            rlo = rel(lo)
            if rlo > target:
                break
            hi, rhi = lo, rlo
    while hi / lo > 1.02:
        w = 0.5
        if math.isfinite(rlo) and rlo > rhi > 0:
            w = min(max(math.log(rlo / target) / math.log(rlo / rhi), 0.0), 1.0)
        est = math.exp(math.log(lo) + w * math.log(hi / lo))
        trials = {min(max(est * f, lo * 1.001), hi / 1.001) for f in (1 / 1.01, 1.01)}  # inside the bracket
        for trial in sorted(trials):
            r_t = rel(trial)
            if r_t <= target:
                hi, rhi = trial, r_t
                break
            lo, rlo = trial, r_t
    return hi


def _rank(c: Candidate, dependence: str, i: int) -> tuple:
    """A candidate's sort key. "report": the total variance, the triple after every design of (attribute,
    label) pairs (its tables are the learners' own only for spread); "prefer": the designs that identify
    the dependence first, the one that estimates it best (least ``co_occurrence_error``: the triple, where
    it can be built) first among them, then the total variance. Ties: fewer attributes, paired first."""
    if dependence == "prefer" and c.identifies_dependence:
        return (0, c.co_occurrence_error, c.score, i)
    return (1, c.design == "triple", c.score, i)


def plan_release(  # noqa: PLR0913  keyword-only options, each a separate choice of the plan
    n_states: Sequence[int],
    n_classes: int,
    epsilon: float,
    n_records: int,
    *,
    reference: Sequence[Any] | None = None,
    label_shares: Sequence[float] = LABEL_SHARES,
    max_sampled: int | None = None,
    target: float = DEFAULT_TARGET,
    dependence: str = DEFAULT_DEPENDENCE,
) -> ReleasePlan:
    """Plan one person's release for learning from ``n_records`` records with ε per person: score the
    paired and split designs for m = 1 … min(F, ``max_sampled`` or 16) sampled attributes (split: label
    share λ in ``label_shares``) by the total predicted variance of the pair tables P(x_j = s, y = c)
    and the class prior (see the module doc for the formulas), and return a ``ReleasePlan`` whose
    ``mechanism`` is the best design's and whose ``describe()`` tabulates every candidate.

    ``reference``: None (uniform pair tables) or one (k_j, C) probability table per attribute, the
    distribution the variances are evaluated at (a public prior; never the private records).

    ``dependence``: "prefer" (the default) ranks first the designs that identify how the attributes
    co-occur (two attributes or more per person, the three-way tables' predicted ``co_occurrence_error``
    ≤ ``DEPENDENCE_TARGET``; ``_co_occurrence``), the one that estimates it best first: the triple
    (``TripleRecordMechanism``), which spread fits with a prior of every pair's table learned from it
    ("pairwise"). A design of one attribute per person identifies the pair tables alone, and a learner's model of the
    dependence is then its prior's at any n (on Adult 3 points below clean logistic regression). The
    error falls as 1/√n, so the ranking depends on n: on Adult's schema the triple is chosen from about
    7.6·10⁵ people at ε 0.5, 1.8·10⁵ at ε 1, 3.5·10⁴ at ε 2 and 3,700 at ε 4 (``n_needed_for_dependence_``;
    module doc: what it gained and cost where measured).
    "report" ranks by the pair tables' total variance alone, whatever n (the triple after the designs
    of pairs), and the plan reports whether the chosen design identifies the dependence (``describe()``,
    ``co_occurrence_error_``, ``n_needed_for_dependence_``). plan_release is deterministic (the same plan
    on every machine).

    ``target``: the RMS relative error sd/π per pair-table cell the plan's ``n_needed_`` and
    ``epsilon_needed_`` aim at (default ``DEFAULT_TARGET`` = 0.25; reporting only, not the ranking)."""
    if isinstance(n_states, np.ndarray):
        n_states = n_states.tolist()
    if isinstance(label_shares, np.ndarray):
        label_shares = label_shares.tolist()
    ks = check_param("n_states", n_states, _CONSTRAINTS["n_states"])
    C = check_param("n_classes", n_classes, _CONSTRAINTS["n_classes"])
    eps = check_param("epsilon", epsilon, _CONSTRAINTS["epsilon"])
    n = check_param("n_records", n_records, _CONSTRAINTS["n_records"])
    shares = check_param("label_shares", label_shares, _CONSTRAINTS["label_shares"])
    cap = check_param("max_sampled", max_sampled, _CONSTRAINTS["max_sampled"])
    tgt = check_param("target", target, _CONSTRAINTS["target"])
    dep = check_param("dependence", dependence, _CONSTRAINTS["dependence"])
    if len(ks) > MAX_FEATURES:
        raise ValidationError("n_states", f"must list at most {MAX_FEATURES} attributes, got {len(ks)}")
    for j, k in enumerate(ks):
        if k * C > MAX_STATES:
            raise ValidationError(f"n_states[{j}]", f"times n_classes must be <= {MAX_STATES}, got {k}·{C}")
    tables, ref_text = _reference_tables(reference, ks, C)
    rho = np.mean([t.sum(axis=0) for t in tables], axis=0)
    F = len(ks)
    top_m = min(F, MAX_PLANNED_SAMPLED if cap is None else cap)
    cands: list[Candidate] = []
    skipped: list[str] = []
    for m in range(1, top_m + 1):
        try:
            pair_oracles = _least_variance_oracles([k * C for k in ks], eps / m)
            cands.append(_score_paired(pair_oracles, ks, C, m, n, tables, rho))
        except ValidationError as exc:  # ε/m too small (or large) for an oracle on some domain
            skipped.append(f"paired m={m}: {exc}")
        for lam in shares:
            try:
                label = RandomizedResponse(C, epsilon=lam * eps)
                attr = _least_variance_oracles(ks, (1 - lam) * eps / m)
                cands.append(_score_split(attr, label, lam, ks, m, n, tables, rho))
            except ValidationError as exc:
                skipped.append(f"split λ={lam:g} m={m}: {exc}")
    two = cap is None or cap >= 2  # the triple releases two attributes per person
    if (
        two
        and 2 <= F <= MAX_TRIPLE_FEATURES
        and all(ks[j] * ks[k] * C <= MAX_STATES for j in range(F) for k in range(j))
    ):
        try:
            cands.append(_score_triple(ks, C, eps, n, tables, rho))
        except ValidationError as exc:
            skipped.append(f"triple: {exc}")
    if not cands:
        raise ValidationError("epsilon", f"no release design can be built at ε = {eps:g}: {skipped[0]}")
    order = sorted(range(len(cands)), key=lambda i: _rank(cands[i], dep, i))
    ranked = tuple(cands[i] for i in order)
    mech = build_mechanism(ranked[0], ks, C, eps)
    return ReleasePlan(mech, ranked, tuple(ks), C, eps, n, ref_text, tgt, tuple(tables), tuple(shares), cap, dep)
