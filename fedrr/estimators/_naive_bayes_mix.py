"""LDP naive Bayes on a budget mix (issue 45): people who chose different budgets release through
different record mechanisms of one design — every record paired, or every record split — over the
same attributes and classes. Each mechanism's group of records gives its own unbiased tables, exactly
as one mechanism does (``_naive_bayes``); the groups are pooled cell by cell with weights
n_gj / v_gj, v_gj the variance of one report's estimate of a rare cell (the cells that decide the
ranking): Var* = ``rare_value_variance`` of the pair oracle (paired), the product of the attribute's
and the label's (split, the two noises independent). Any weights keep the pooled table unbiased; these
are inverse-variance for rare cells. ``method="mle"`` on paired releases maximises the exact
likelihood of every group's reports together (their likelihood rows stacked), which needs no weights."""

from __future__ import annotations

from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..errors import ValidationError
from ..mechanisms import rare_value_variance
from ._frequencies import simplex_mle
from ._naive_bayes_releases import MLE_CALLER as _MLE
from ._naive_bayes_releases import check_naive_bayes_mechanism, check_releases


def mechanism_groups(mechanisms: Any, n: int) -> list[tuple[Any, np.ndarray]]:
    """(mechanism, its records) per distinct mechanism object of a per-record list of ``n``; every
    group of one design, attributes and classes, or a ValidationError naming what differs."""
    ms = list(mechanisms)
    if len(ms) != n:
        raise ValidationError("mechanism", f"one per record: got {len(ms)} mechanisms for {n} records")
    index: dict[int, int] = {}
    owner = np.array([index.setdefault(id(m), len(index)) for m in ms])
    distinct = list({id(m): m for m in ms}.values())
    groups = [(m, np.flatnonzero(owner == g)) for g, m in enumerate(distinct)]
    first = distinct[0]
    for m in distinct[1:]:
        if bool(getattr(m, "label_in_pairs", False)) != bool(getattr(first, "label_in_pairs", False)):
            raise ValidationError("mechanism", "a budget mix must be all paired or all split releases")
        if _shape(m) != _shape(first):
            raise ValidationError(
                "mechanism", f"a budget mix must share attributes and classes: {_shape(m)} against {_shape(first)}"
            )
    return groups


def _shape(m: Any) -> tuple:
    if getattr(m, "label_in_pairs", False):
        return tuple(m.n_states), int(m.n_classes)
    mechs, label = check_naive_bayes_mechanism(m)
    return tuple(int(o.k) for o in mechs), int(label.k)


def paired_mix_tables(X: np.ndarray, groups: list) -> tuple[list[np.ndarray], np.ndarray, list]:
    """Pooled unbiased pair tables (k_j, C) per attribute, the reports per attribute n_j, and per
    attribute the groups' (mechanism, reports) for the exact likelihood."""
    D = groups[0][0].n_features
    num = [0.0] * D
    den, n_released = np.zeros(D), np.zeros(D, dtype=np.int64)
    reports: list[list] = [[] for _ in range(D)]
    for m, rows in groups:
        Xg, _ = m.validate_release(X[rows], None)
        for j in range(D):
            v = Xg[~np.isnan(Xg[:, j]), j]
            if v.size:
                w = v.size / rare_value_variance(m.oracles[j])
                num[j] = num[j] + w * m.unbiased_pair_table(j, v).mean(axis=0)
                den[j] += w
                n_released[j] += v.size
                reports[j].append((m, v))
    missing = np.flatnonzero(n_released == 0)
    if missing.size:
        raise ValidationError("X_tilde", f"column {int(missing[0])} is NaN for every client: no client released it")
    return [t / d for t, d in zip(num, den)], n_released, reports


def split_mix_tables(X: np.ndarray, y: np.ndarray, groups: list) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Pooled unbiased joint tables (k_j, C) of split releases, the releases per attribute n_j and the
    pooled class frequencies (each group's mean of v̂(ỹ), weighted n_g / Var*(label_g))."""
    D = len(check_naive_bayes_mechanism(groups[0][0])[0])
    num, den, n_released = [0.0] * D, np.zeros(D), np.zeros(D, dtype=np.int64)
    fnum, fden = 0.0, 0.0
    for m, rows in groups:
        rel = check_releases(X[rows], y[rows], m, allow_empty=True)  # a small group may miss a column
        V = rel.label.unbiased_onehot(rel.y)
        rl = rare_value_variance(rel.label)
        w = rows.size / rl
        fnum, fden = fnum + w * V.mean(axis=0), fden + w
        for j, (o, x, r) in enumerate(zip(rel.mechs, rel.values, rel.rows)):
            if r.size:
                wj = r.size / (rare_value_variance(o) * rl)
                num[j] = num[j] + wj * (o.unbiased_onehot(x).T @ V[r] / r.size)
                den[j] += wj
                n_released[j] += r.size
    missing = np.flatnonzero(n_released == 0)
    if missing.size:
        raise ValidationError("X_tilde", f"column {int(missing[0])} is NaN for every client: no client released it")
    return [t / d for t, d in zip(num, den)], n_released, fnum / fden


def paired_mix_mle(reports: list, start: list[np.ndarray], *, tol: float, max_iter: int) -> tuple[list, int]:
    """Maximum-likelihood pair table per attribute from the exact likelihood of every group's reports
    (distinct reports grouped per mechanism, their likelihood rows stacked), from halfway between
    ``start`` and uniform."""
    out, steps = [], 0
    with threadpool_limits(limits=1, user_api="blas"):
        for j, (parts, p0) in enumerate(zip(reports, start)):
            Ls, cs = [], []
            for m, v in parts:
                uniq, counts = np.unique(v, return_counts=True)
                Ls.append(m.pair_log_likelihood(j, uniq).reshape(uniq.size, -1))
                cs.append(counts.astype(float))
            p0 = 0.5 * p0.ravel() + 0.5 / p0.size
            p, it = simplex_mle(np.vstack(Ls), np.concatenate(cs), p0, tol=tol, max_iter=max_iter, caller=_MLE)
            out.append(p.reshape(start[j].shape))
            steps = max(steps, it)
    return out, steps
