"""Spread-EM's defence against fake clients, ``robust="margins"`` (issue 32): the cross-attribute
consistency test of ``LDPNaiveBayes(robust="margins")`` (``margin_consistency``, run
through that estimator on the same releases, not copied) decides which attributes' releases are not
to be trusted, and every record that released one of them is dropped before spread-EM sees the pool.

Why records are dropped rather than single reports masked. A record's release pattern is part of
its likelihood: a paired or sampled record mechanism releases exactly ``n_sampled`` attributes per
record (``validate_release`` refuses any other count), so a record with one report masked is no
longer a release of its mechanism. With one pair per record (the planner's paired release on Adult
at ε ≤ 4) dropping the record *is* masking its report: a paired record whose only pair is masked
carries nothing — neither an attribute nor the label, which travels inside the pair — and its
E-step would impute every attribute and the label from the prior and the model alone, a term that
leaves EM's fixed point where it is and only slows it. With several reports per record the rule
also drops the record's other reports; they come from the same, possibly fake, client (the fakes of
``fedrr.fake`` put crafted or uniform-label reports on their other attributes too), and which
records are dropped depends only on which attribute they sampled, so the honest records kept are an
unbiased subsample. For split releases (label by its own mechanism) dropping the record drops its
label report too: the fakes' labels do not count, as the kept tables' pooled margin is the class
prior of ``LDPNaiveBayes(robust="margins")``.

What the fit then sees: no record released a dropped attribute, so the E-step imputes it for every
record from the prior, whose table for it is uniform over its states given the class (paired: the
class margin of the other attributes, ``_paired.pair_tables``; split: ``naive_bayes_prior``'s
uniform p(x_d | c)); its coefficients are held near 0 by the penalty, and prediction on clean records
reads it through them."""

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
    records that released an attribute the consistency test rejects (y None stays None; a per-record
    mechanism list is cut alike), the kept rows' indices, and the test's ``consistent`` (F,) bool,
    ``z`` (F,) and critical z (module docstring). ``reading``: the rows the test reads (default all;
    the CV's selection part); the drop applies to every row all the same. A pool whose label travels
    inside the pairs (the contract's ``label_in_pairs``) has no held-out part: its test reads every row."""
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
    if consistent.all():
        return X, y, mechanism, np.arange(Xa.shape[0]), consistent, z, crit
    cols = np.flatnonzero(~consistent)  # paired and width-1 discrete fields: attribute j is column j
    rows = np.flatnonzero(np.all(np.isnan(Xa[:, cols]), axis=1))
    if rows.size == 0:
        raise ValidationError("robust", "'margins' would drop every record: each released a rejected attribute")
    yk = None if y is None else np.asarray(y)[rows]
    mk = [mechanism[i] for i in rows] if isinstance(mechanism, (list, tuple, np.ndarray)) else mechanism
    return Xa[rows], yk, mk, rows, consistent, z, crit


def no_test(n_features: int) -> tuple[np.ndarray, np.ndarray, float]:
    """``robust="none"``'s learned attributes: every attribute consistent, z 0, critical z ∞."""
    return np.ones(n_features, dtype=bool), np.zeros(n_features), math.inf
