"""Spread-EM's defence against fake clients, ``robust="margins"`` (issues 32, 45). Detection and
recovery are separate steps, both run through ``LDPNaiveBayes(robust="margins")`` on the same
releases (not copied):

* detection, ``margin_consistency``: the cross-attribute consistency test decides which attributes'
  class margins disagree with the others' (level ``robust_alpha``, Bonferroni over attributes and
  classes: an honest pool has a rejected attribute with probability ≤ α);
* recovery, ``margin_trim``: for a rejected attribute, the fewest of its reports whose removal brings
  its class margin back to the reference (the median over attributes), taken from the highest
  unbiased margin contribution down (ties: the most often released value first). Only the records
  that carried those reports are dropped before spread-EM sees the pool; the attribute's other
  records stay.

Why it cannot be turned against the server (issue 45, item 2). The former recovery dropped every
record that released a rejected attribute: 1 % output-attack fakes on native country made spread
lose all its honest reports (results/fake_clients/attacks_accuracy.md: 0.797 ± 0.030 against 0.811).
The trim discards at most what the observed excess implies: removing k reports moves the margin by at
most k·(s_max − m̄·d)/n_j, so k is the least count that explains the excess Δ_j, ≈ n_j·Δ_j/(s_max − m̄·d).
Fakes that release the crafted pair (the output and maximal-gain attacks under k-RR, whose fake pair
has the largest contribution and is the most frequent of its score) are then removed almost exactly:
on Adult at ε 4 with 1 % fakes (~300) it drops 253–403 records over 4 seeds, against ~2,800 before
(results/fake_clients/attacks_target.md); an honest pool
rejected by chance loses the count its noise excess implies (tests/test_fake_defence.py measures it).
Records that released the same value are identical releases, so which of them are dropped does not
matter for one pair per record; with several reports per record the record's other reports go too
(they come from the same, possibly fake, client). Exact likelihoods and ε are unchanged: the recovery
is server-side and the fit sees a sub-pool of unchanged releases.

What it does not do: it removes the excess of the reports with the largest contribution, which are
the fakes' only when the fakes released them (not for OLH supports or padded OUE vectors spread over
many values, nor the input attack: then honest extreme reports go and fakes stay, the margin is
corrected but the table's cells need not be); it does not defend what the test does not detect
(``LDPNaiveBayes``'s docstring lists it). For split releases the label report goes with the record,
and in ``SpreadLogisticRegressionCV`` the test and the trim read the selection part A only (``reading``),
so test part B's labels cannot move them (issue 45, item 4): B is not trimmed. Learned:
``consistent_``, ``margin_z_``, ``margin_z_critical_`` (the test) and ``n_dropped_`` (the trimmed records).
Compared with LDPRecover (Sun et al., ICDE 2024; ``LDPNaiveBayes(robust="ldprecover")``, learner
``ldp-nb-ldprecover``), which subtracts an estimate of the malicious frequencies from each pair table and
projects by constrained inference: the trim works on records, which is what spread-EM's exact likelihood
needs, so the two are compared on naive Bayes, on the attack table's pools
(``python simulations/fake_attacks.py --part target-nb``, results/fake_clients/attacks_target.md; ε 4,
output attack, 10 seeds): at 5 % fakes accuracy 0.8144 (trim) against 0.6835 (LDPRecover, η_j from the
sampling counts) and 0.8011 (ldp-nb); balanced accuracy and AUC are highest for ldp-nb there
(0.8005 / 0.8890), and for LDPRecover on honest pools (0.7944 / 0.8879 against 0.7915 / 0.8870)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...errors import ValidationError
from .._naive_bayes import ROBUST, LDPNaiveBayes
from ._paired import PairedView

__all__ = ["ROBUST", "drop_inconsistent", "no_test"]


def _one_mechanism(mechanism: Any) -> Any:
    """The one mechanism of ``mechanism`` (an object, or one per record that are all the same object)."""
    if not isinstance(mechanism, (list, tuple, np.ndarray)):
        m = mechanism
    else:
        distinct = list({id(m): m for m in mechanism}.values())
        if len(distinct) != 1:
            raise ValidationError(
                "robust", "'margins' needs one record mechanism for every record (no budget mix), as ldp-nb-robust"
            )
        m = distinct[0]
    return m.paired if isinstance(m, PairedView) else m


def drop_inconsistent(X: Any, y: Any, mechanism: Any, alpha: float, reading: Any = None) -> tuple:
    """``robust="margins"`` on releases (X, y) of ``mechanism``: returns (X, y, mechanism) without the
    records whose reports ``margin_trim`` discards (y None stays None; a per-record mechanism list is
    cut alike), the kept rows' indices, and the test's ``consistent`` (F,) bool, ``z`` (F,) and
    critical z (module docstring). ``reading``: the rows the test and the trim read (default all; the
    CV's selection part), so only those rows can be dropped. A pool whose label travels inside the
    pairs (the contract's ``label_in_pairs``) has no held-out part: it reads every row."""
    m = _one_mechanism(mechanism)
    Xr, yr = X, y
    if reading is not None and not m.label_in_pairs:
        reading = np.asarray(reading, dtype=np.int64)
        Xr = np.asarray(X, dtype=float)[reading]
        yr = None if y is None else np.asarray(y)[reading]
    try:  # the test of LDPNaiveBayes(robust="margins"); "clip": its tables are not needed, only the test
        nb = LDPNaiveBayes(method="clip", robust="margins", robust_alpha=alpha).fit(Xr, yr, mechanism=m)
    except ValidationError as e:
        raise ValidationError("robust", f"'margins' runs LDPNaiveBayes's consistency test: {e.message}") from e
    consistent, z, crit = np.asarray(nb.consistent_, bool), np.asarray(nb.margin_z_), float(nb.margin_z_critical_)
    Xa = np.asarray(X, dtype=float)
    cut = np.unique(np.concatenate(nb.trimmed_)).astype(np.int64)  # rows of the test's reading
    if cut.size == 0:
        return X, y, mechanism, np.arange(Xa.shape[0]), consistent, z, crit
    if reading is not None and not m.label_in_pairs:
        cut = reading[cut]
    rows = np.setdiff1d(np.arange(Xa.shape[0]), cut)
    if rows.size == 0:
        raise ValidationError("robust", "'margins' would drop every record")
    yk = None if y is None else np.asarray(y)[rows]
    mk = [mechanism[i] for i in rows] if isinstance(mechanism, (list, tuple, np.ndarray)) else mechanism
    return Xa[rows], yk, mk, rows, consistent, z, crit


def no_test(n_features: int) -> tuple[np.ndarray, np.ndarray, float]:
    """``robust="none"``'s learned attributes: every attribute consistent, z 0, critical z ∞."""
    return np.ones(n_features, dtype=bool), np.zeros(n_features), math.inf
