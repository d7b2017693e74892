"""Spread's pairwise prior: how every pair of attributes co-occurs, fitted to releases of two attributes
per record (triples, or two pairs), where the tree (``_tree``) keeps only D − 1 of the pairs. Rows are
drawn from the releases' Chow–Liu tree, each with a weight per class (naive Bayes's p(c | x) of the
releases), and reweighted by EM on the releases' exact likelihood, in which a pair's table of
(x_j, x_k, y) is the weighted rows' own: each sweep takes, per released pair, one EM step of that table
and rakes the weights to it (iterative proportional fitting, Deming and Stephan 1940). The label's
p(c | s, t) is so pooled over every pair that holds x_j or x_k, where the twentieth session held it at
each pair's own table's (``label="pair"``, about 15,000 noisy reports a pair on Adult at 10⁶). The rows
are then resampled to equal weights by their x alone, a prior of rows (``JointSpreadPrior``) that the
direct solver fits.

More sweeps fit more of a pair's reports, and past some number their noise: the number kept is the one
whose prior best predicts half of the reports when fitted on the other half (``held_out_sweeps``),
read from the releases alone, up to ``PAIRWISE_SWEEPS``. On Adult's validation split at 10⁶ people
(ε 0.5 to 2, 2 seeds) spread's CV with it is above the tree's on accuracy in 6 of 6 fits (+0.5 points on
average), on balanced accuracy and on AUC; with the label held at each pair's table it tied the tree
(results/adult_scale_designs/summary.md, "Twenty-first session")."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ....errors import ValidationError
from ....mechanisms import EmpiricalPrior
from .._design import ColumnLayout
from ._factorised import SpreadPrior
from ._joint import JointSpreadPrior, joint_prior
from ._tree import TreeSpreadPrior, pair_tables, tree_prior, unit_matrix

#: the most EM sweeps over every released pair; how many are kept is chosen on held-out reports
PAIRWISE_SWEEPS = 100
#: the held-out choice stops this many sweeps after its best score
HELD_OUT_PATIENCE = 10
#: rows drawn from the tree and reweighted (a prior of rows takes up to 65,536 whole: ``JOINT_ROWS``)
PAIRWISE_ROWS = 65536


@dataclass
class PairwiseSpreadPrior(JointSpreadPrior):
    """A prior of rows (``JointSpreadPrior``) fitted to the releases' pair tables (``pairwise_prior``);
    ``tree`` is the Chow–Liu tree its rows were drawn from, ``moved`` the largest total-variation step
    of a pair's table in each sweep kept, ``loglik`` the releases' log-likelihood before the first and
    after each, ``held_out`` the held-out score per number of sweeps that chose it (``held_out_sweeps``;
    None when given), ``effective_rows`` the reweighted rows' effective number."""

    tree: TreeSpreadPrior | None = None
    moved: np.ndarray | None = None
    loglik: np.ndarray | None = None
    held_out: np.ndarray | None = None
    effective_rows: float = 0.0

    def copy(self) -> PairwiseSpreadPrior:
        base = JointSpreadPrior.copy(self)
        kept = {f.name: getattr(base, f.name) for f in fields(JointSpreadPrior)}
        fit = dict(moved=self.moved, loglik=self.loglik, held_out=self.held_out, effective_rows=self.effective_rows)
        return PairwiseSpreadPrior(**kept, tree=self.tree, **fit)

    def public(self) -> dict:
        """What users see as ``prior_``: the margins, the tree the rows were drawn from, and the fit."""
        fit = {"sweeps": int(self.moved.size), "moved": self.moved.copy(), "loglik": self.loglik.copy()}
        fit["held_out"] = None if self.held_out is None else self.held_out.copy()
        fit["effective_rows"] = self.effective_rows
        return SpreadPrior.public(self) | {"tree": self.tree.public()["tree"], "pairwise": fit}


def pairwise_prior(
    layout: ColumnLayout,
    units: dict,
    start: dict,
    seed: int,
    sweeps: int | None = None,
    n_rows: int = PAIRWISE_ROWS,
    label: str = "rows",
) -> PairwiseSpreadPrior:
    """``prior="pairwise"`` from the releases' ``units`` (``release_units``) and naive Bayes's table per
    pair ``start`` (``naive_bayes_pair_tables``): ``n_rows`` draws of the releases' tree (seeded by
    ``seed``), reweighted by EM sweeps (module doc; the first that would lower the releases' likelihood
    stops them), resampled to equal weights. ``sweeps`` None: as many as score best on held-out
    reports (``held_out_sweeps``)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x9A1F,)))
    chosen = None
    if sweeps is None:
        chosen = held_out_sweeps(layout, units, start, rng, label)
        sweeps = int(np.argmax(chosen))
    tree, X, W, moved, loglik = _reweighted(layout, units, start, sweeps, n_rows, rng, label=label)
    w = W.sum(axis=1)
    rows = joint_prior(layout, EmpiricalPrior(X[systematic_resample(w, n_rows, rng)]))
    kept = {f.name: getattr(rows, f.name) for f in fields(JointSpreadPrior)}
    fit = dict(moved=moved, loglik=loglik, held_out=chosen, effective_rows=float(1.0 / np.sum(w * w)))
    return PairwiseSpreadPrior(**kept, tree=tree, **fit)


def held_out_sweeps(
    layout: ColumnLayout, units: dict, start: dict, rng: np.random.Generator, label: str = "rows"
) -> np.ndarray:
    """The mean held-out log-likelihood per report after 0, 1, … sweeps (up to ``PAIRWISE_SWEEPS``):
    each distinct report's count split in two halves at random (binomial), the prior fitted on one, the
    other scored. Its argmax is where more sweeps start fitting the reports' noise. The half's pair
    tables start from, and are shrunk by 0.5 pseudo-records a cell toward, ``start`` (naive Bayes of all
    the reports), and the rows' class weights start at that naive Bayes's p(c | x): the held-out half is
    that much seen. The count is chosen on half the reports and
    used on all, which errs toward fewer sweeps."""
    fit, held = {}, {}
    for jk, (cnt, *L) in units.items():
        a = rng.binomial(cnt.astype(np.int64), 0.5).astype(float)
        fit[jk], held[jk] = (a, *L), (cnt - a, *L)
    if not all(sum(float(u[0].sum()) for u in half.values()) > 0 for half in (fit, held)):
        return np.zeros(1)  # a few reports, all on one side: nothing to choose on, no sweep
    scores = []
    _reweighted(layout, fit, start, PAIRWISE_SWEEPS, PAIRWISE_ROWS, rng, held=(held, scores), label=label)
    return np.array(scores)


def _reweighted(layout, units, start, sweeps, n_rows, rng, held=None, label="rows") -> tuple:
    """(tree, rows X, weights W, moved, loglik) of up to ``sweeps`` EM sweeps (module doc); with ``held``
    (units of other reports, a list), each state's mean log-likelihood of them appended to the list.
    ``label`` "rows": each row carries a weight per class (W: rows × classes), so a pair's table of
    (x_j, x_k, y) is the rows' own; "pair": p(c | s, t) held at each pair's own maximum-likelihood
    table's (W: rows × 1)."""
    tables = pair_tables(units, start)
    tree = tree_prior(layout, units, start, tables=tables)
    X = tree.draws(n_rows, rng)
    ks = [int(k) for k in layout.k]
    C = next(iter(tables.values())).shape[2]
    L = {jk: unit_matrix(u) for jk, u in units.items()}
    if label == "rows":  # (row, class) weights, from naive Bayes's p(c | x) of the releases (``start``)
        w = (_naive_bayes_posterior(X, start, ks, C) / n_rows).ravel()
        cells = {(j, k): ((X[:, j] * ks[k] + X[:, k]) * C)[:, None] + np.arange(C) for j, k in units}
        cells = {jk: c.ravel() for jk, c in cells.items()}
        size = {(j, k): ks[j] * ks[k] * C for j, k in units}
    else:
        w = np.full(n_rows, 1.0 / n_rows)
        cells = {(j, k): X[:, j] * ks[k] + X[:, k] for j, k in units}
        size = {(j, k): ks[j] * ks[k] for j, k in units}
        fixed = {jk: q / np.maximum(q.sum(axis=2, keepdims=True), 1e-300) for jk, q in tables.items()}  # p(c | s, t)

    def pair_model(w, j, k):
        """The weighted rows' table m of the cells they are raked on ((x_j, x_k, y) or (x_j, x_k)), the
        table with the label q (k_j·k_k·C), and p(v)."""
        m = np.bincount(cells[(j, k)], w, minlength=size[(j, k)])
        q = m if label == "rows" else (m.reshape(ks[j], ks[k], 1) * fixed[(j, k)]).ravel()
        return m, q, np.maximum(L[(j, k)] @ q, 1e-300)

    def loglik_of(w, of: dict) -> float:
        return sum(float(u[0] @ np.log(pair_model(w, *jk)[2])) for jk, u in of.items())

    moved, loglik = [], [loglik_of(w, units)]
    score, scores = held if held is not None else (None, None)
    if score is not None:
        n_held = sum(float(u[0].sum()) for u in score.values())
        scores.append(loglik_of(w, score) / n_held)
    for _ in range(sweeps):
        new, most = w, 0.0
        for (j, k), u in units.items():
            if not u[0].sum() > 0:  # a pair none of these reports holds (half of a few): nothing to fit
                continue
            m, q, pv = pair_model(new, j, k)
            step = q * (L[(j, k)].T @ (u[0] / pv)) / u[0].sum()  # EM's table
            step = step if label == "rows" else step.reshape(m.size, -1).sum(axis=1)
            most = max(most, 0.5 * float(np.abs(step - m).sum()))
            new = new * np.divide(step, m, out=np.ones_like(m), where=m > 0)[cells[(j, k)]]
            new /= new.sum()
        now = loglik_of(new, units)
        if now < loglik[-1]:  # raking pair by pair is not EM's step: a sweep that lowers it is not kept
            break
        w = new
        moved.append(most)
        loglik.append(now)
        if score is not None:
            scores.append(loglik_of(w, score) / n_held)
            if len(scores) > HELD_OUT_PATIENCE and np.argmax(scores) < len(scores) - HELD_OUT_PATIENCE:
                break  # the best is this many sweeps behind: past it the noise is being fitted
    return tree, X, w.reshape(n_rows, -1), np.array(moved), np.array(loglik)


def _naive_bayes_posterior(X: np.ndarray, start: dict, ks: list, C: int) -> np.ndarray:
    """Naive Bayes's p(c | x) (n, C) of rows X, from its pair tables ``start`` (π_c p(s | c) p(t | c))."""
    logp = np.zeros((X.shape[0], C))
    seen = set()
    for (j, k), t in start.items():
        if not seen:
            logp += np.log(np.maximum(t.sum(axis=(0, 1)), 1e-300))
        for v, margin in ((j, t.sum(axis=1)), (k, t.sum(axis=0))):  # (k_v, C): p(x_v = s, c)
            if v not in seen:
                seen.add(v)
                logp += np.log(np.maximum(margin / margin.sum(axis=0, keepdims=True), 1e-300))[X[:, v]]
    logp -= logp.max(axis=1, keepdims=True)
    p = np.exp(logp)
    return p / p.sum(axis=1, keepdims=True)


def systematic_resample(w: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n indices drawn in proportion to the weights w (summing to 1) by systematic resampling: each
    index's count within one of n·w_i."""
    c = np.cumsum(w)
    return np.minimum(np.searchsorted(c, (rng.random() + np.arange(n)) / n * c[-1]), w.size - 1)


def pairwise_rows(
    X_released: np.ndarray,
    mechanism,
    *,
    seed: int = 0,
    sweeps: int | None = None,
    tables="reports",
    label: str = "rows",
) -> np.ndarray:
    """The rows (n, D) of ``prior="pairwise"`` fitted to triple releases (``mechanism`` a
    ``TripleRecordMechanism``; pass ``EmpiricalPrior(rows)`` as a prior), for studying what it learns.
    ``tables="reports"``: the prior itself (EM on the reports; ``sweeps`` fixed, or None for its
    held-out choice; ``label`` "rows", each row with a weight per class, or "pair", the label held at
    each pair's own table as before the twenty-first session). Otherwise the tree's draws are raked by
    iterative proportional fitting (``sweeps``, default 30) to every pair's table: ``"releases"``, each
    pair's own maximum-likelihood table, or a dict {(j, k): (k_j, k_k) table}, e.g. a population's own,
    whose tree the rows are drawn from (an oracle no deployment has)."""
    from .._design import ColumnLayout
    from .._pair_reports import triple_units
    from ._tree import naive_bayes_pair_tables, triple_naive_bayes_prior

    if label not in ("rows", "pair"):
        raise ValidationError("label", f"must be 'rows' or 'pair', got {label!r}")
    X_released = np.asarray(X_released, float)
    layout = ColumnLayout.from_states(mechanism.n_states)
    units = triple_units([(mechanism, np.arange(X_released.shape[0]))], X_released)[0]
    start = naive_bayes_pair_tables(triple_naive_bayes_prior(layout, units), units)
    if isinstance(tables, str) and tables == "reports":
        return pairwise_prior(layout, units, start, seed, sweeps, label=label).rows
    given = pair_tables(units, start) if isinstance(tables, str) and tables == "releases" else None
    if given is None:
        given = {jk: np.asarray(tables[jk], float)[:, :, None] for jk in units}
    ks = [int(k) for k in layout.k]
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x9A1F,)))
    X = tree_prior(layout, units, start, tables=given).draws(PAIRWISE_ROWS, rng)
    w = np.full(X.shape[0], 1.0 / X.shape[0])
    for _ in range(30 if sweeps is None else sweeps):
        for (j, k), q in given.items():
            cell = X[:, j] * ks[k] + X[:, k]
            m = np.bincount(cell, w, minlength=ks[j] * ks[k]).reshape(ks[j], ks[k])
            target = q.sum(axis=2) / q.sum()
            w = w * np.divide(target, m, out=np.ones_like(m), where=m > 0).ravel()[cell]
            w /= w.sum()
    return X[systematic_resample(w, X.shape[0], rng)]
