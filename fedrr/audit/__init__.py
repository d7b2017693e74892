"""Empirical differential-privacy audit of fedrr's local randomisers (issue #7).

A mechanism M claims (ε, δ)-LDP: for every pair of inputs x, x' (in LDP any two values of the
domain are neighbours) and every output set S, P(M(x) ∈ S) ≤ e^ε P(M(x') ∈ S) + δ. The audit
turns samples of ``release`` into a *certified lower bound* ε̂ on the ε that the mechanism
actually has at its claimed δ (Jagielski et al. 2020; Nasr et al. 2021; Ding et al.'s StatDP;
Bichsel et al.'s DP-Sniper):

1. fix neighbouring inputs x, x' and a family of test sets S (below);
2. draw n releases at x and n at x', count the hits of each S;
3. bound every hit probability with a one-sided Clopper–Pearson interval at level α/m, where m is
   the number of one-sided intervals used (Bonferroni), so that *all* of them hold at once with
   probability ≥ 1 − α;
4. ε̂ = max over S and both directions of log((p_lo(S|x) − δ) / p_hi(S|x')), clipped at 0.

If M really is (ε, δ)-LDP then, on the event that every interval holds,
p_lo − δ ≤ P(S|x) − δ ≤ e^ε P(S|x') ≤ e^ε p_hi, i.e. ε̂ ≤ ε. So a correctly calibrated mechanism
fails the audit (ε̂ > claimed ε) with probability at most α — the stated false-alarm rate — and
a mechanism that leaks more than it claims fails once n is large enough (``samples_needed``).

Test sets:

* discrete mechanisms (``RandomizedResponse``, ``TransitionMatrix``): single outputs S = {o}.
  For pure ε the sup over sets of P(S|x)/P(S|x') is attained by a single output, so nothing is
  lost. The exact loss max_{o,x,x'} log P(o|x)/P(o|x') is computed from ``log_likelihood`` on the
  full k × k grid (every pair of states). The sampled part uses every state when k ≤ 16 and
  otherwise the worst pair found by the exact computation (a white-box choice of the neighbours,
  as in the auditing literature; the statistics that certify ε̂ stay black-box), or ``inputs``.
* additive-noise mechanisms (Laplace, Gaussian; width 1 or a block of width d): x = lower and
  x' = upper, the opposite corners of the box, which attain both the L1 and the L2 sensitivity
  (the worst case for additive noise, whatever ``sensitivity`` the mechanism was given).
  S = {LLR(x̃) ≥ t} and {LLR(x̃) ≤ t} with LLR = log p(x̃|x) − log p(x̃|x'): the Neyman–Pearson
  optimal sets (for Gaussian noise the LLR is the projection on x − x'; ``statistic="projection"``
  uses that projection for any noise and does not rely on ``log_likelihood``). The thresholds t
  are quantiles of a separate pilot sample (``pilot_fraction`` of the draws), so the sets are
  fixed before the certifying sample is looked at and the union bound is valid.
* discrete oracles whose releases are not states (``UnaryEncoding``, ``LocalHashing``): threshold
  sets on the LLR for a pair of states (default: the exact worst pair); the LLR takes the values
  ±ε and 0, and {LLR = ε} is the optimal set.
* bounded numeric fields (``PiecewiseMechanism``, ``DuchiMechanism``): as additive noise, x = lower
  vs x' = upper, LLR threshold sets.
* whole records (``RecordMechanism``): neighbouring records that differ in every field (each
  field at its own worst pair) and threshold sets on the record's LLR
  log p(x̃, ỹ | r) − log p(x̃, ỹ | r'), again the optimal distinguisher.

Exact values (``exact_epsilon``): discrete — from the transition probabilities; unary encoding and
local hashing — ``exact_oracle_epsilon``, the likelihood on outputs that attain the sup; Piecewise
and Duchi — ``exact_bounded_epsilon``, the likelihood on every output (cell) where the ratio can
change; Laplace — ‖x − x'‖₁/b, the sup of the log-density ratio; Gaussian — the smallest ε with
δ_exact(ε; σ, ‖x − x'‖₂) ≤ claimed δ on the analytic-Gaussian curve (Balle & Wang 2018); pure-ε
records — the sum of the per-field sups (basic composition is tight for pure ε on a pair that
differs everywhere; with attribute sampling the label's plus the m largest field sups); records with
a δ > 0 field — not computed (None).
Paired releases (``PairedRecordMechanism``, ``audit_paired``): records that differ in every (attribute,
label) pair (x = 0, y = 0 vs x' = 1, y' = 1), threshold sets on the release LLR; exact value: the sum
of the n_sampled largest per-attribute pair-oracle sups.

The audit suite (every shipped mechanism plus mis-calibrated negative controls, with sample
sizes: ``simulations/audit_mechanisms.py`` runs it) is ``fedrr.testing.audit_suite``, next to the
negative controls it needs. Beyond the audit itself: the repeated-release attack (``attack_offline``,
``attack_federation``: a server that queries a client M times, Barber 2020 eq 3: resampling vs
fedrr's replaying client) and the floating-point attack (``attack_cells``: Mironov's attack on
Laplace sampling, naive vs snapped).

The modules are private (``_name.py``); the names below are the public surface.
``attack_federation`` is imported on first use, so ``import fedrr.audit`` does not import Flower.
"""

from typing import TYPE_CHECKING, Any

from ._bounds import DEFAULT_ALPHA, AuditResult, Witness, clopper_pearson, max_certifiable_epsilon, samples_needed
from ._exact import exact_additive_epsilon, exact_bounded_epsilon, exact_discrete_epsilon, exact_oracle_epsilon
from ._fp_attack import STANDARD_CELLS, attack_cells
from ._mechanism import audit_mechanism
from ._paired import audit_paired, exact_paired_epsilon
from ._record import audit_record
from ._repeated_release import M_GRID, Field, attack_offline, laplace_field, paper_formula_checks, rr_field

__all__ = [
    "AuditResult",
    "Witness",
    "audit_mechanism",
    "audit_record",
    "audit_paired",
    "exact_paired_epsilon",
    "clopper_pearson",
    "exact_discrete_epsilon",
    "exact_additive_epsilon",
    "exact_oracle_epsilon",
    "exact_bounded_epsilon",
    "samples_needed",
    "max_certifiable_epsilon",
    "DEFAULT_ALPHA",
    "Field",
    "rr_field",
    "laplace_field",
    "M_GRID",
    "attack_offline",
    "attack_federation",
    "paper_formula_checks",
    "STANDARD_CELLS",
    "attack_cells",
]


def __getattr__(name: str) -> Any:
    if name == "attack_federation":  # runs a Flower simulation: Flower is imported on first use
        from ._repeated_release_flower import attack_federation

        globals()[name] = attack_federation
        return attack_federation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:  # for static tools (type checkers, the API docs)
    from ._repeated_release_flower import attack_federation
