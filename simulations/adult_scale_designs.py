"""Why spread-EM on Adult rows resampled to N = 10⁵–10⁶ stays below an independent paired naive Bayes,
and which release design, prior and EM settings let its accuracy rise with N (issue 46, research).

    python simulations/adult_scale_designs.py --n 100000 --eps 1 --designs plan m2 \\
        --fits nb:1 lc4:1 ldp-nb --seeds 0 1 2 --out results/adult_scale_designs/runs.csv

Adult with numerics cut at public edges (``fedrr.datasets.load("adult_binned")``). For each
(N, ε, design, seed): N training rows drawn by bootstrap (``rng.integers(0, 30162, N)``, seeded by
(seed, N)), released once through the design, and every fit of ``--fits`` is run on the SAME
releases; accuracy, balanced accuracy and AUC on adult.test's 15,060 clean rows, fit seconds.

Designs: ``plan`` (``plan_release(ks, 2, ε, N).mechanism``: the planner's pick), ``mK``
(``PairedRecordMechanism(ks, 2, ε, n_sampled=K)``: K sampled (attribute, label) pairs per person,
ε/K each, oracle "auto"), ``topK`` (``plan.mechanism_for(K - 1)``: the planner's K-th design by its
default ranking, written to the CSV as ``mK`` when it is K pairs, whose mechanism it equals, or as
``split0.25m1`` for a split release), ``triple`` (``TripleRecordMechanism(ks, 2, ε)``: one (attribute,
attribute, label) triple per person at ε; ``plan`` is the triple where the planner's default chooses it).
``--split survey-validation``: the people come from the tutorial survey's generator
(configs/data/make_survey.py, independent attributes, cut at configs/my_table.toml's public edges),
scored on 20,000 more of its rows: a data set with no dependence to find.

Fits: ``PRIOR:C[:it=I][:burn=B][:init=S][:solver=V]`` = ``SpreadLogisticRegression(C, prior, encoding="onehot",
max_iter=I (200), burn_in=B (auto), init=S (auto), solver=V (auto))`` with PRIOR ``nb`` (naive-bayes), ``lcM``
(latent-class, M components), ``tree`` (the Chow–Liu tree of the released pairs' tables: two pairs per
person, direct solver), ``learned`` or ``auto``; ``cv[:KEY=S...]`` =
``SpreadLogisticRegressionCV(encoding="onehot", KEY=S)`` for string parameters (``init=naive-bayes``,
``encoding=unit``: the estimators' default until 2026-12-02, now "auto"), otherwise defaults (the sweep's ``spread``);
``ldp-nb`` = ``LDPNaiveBayes`` (an independent paired naive Bayes); ``public:C[:rows=M][:smooth=A][:solver=V]``
= spread at C with a prior of public unlabeled rows (``EmpiricalPrior``: M rows of the pool people are drawn
from, or "all", the default: the population's own joint, an oracle no deployment has; A pseudo-rows of the
releases' naive Bayes, ``EmpiricalPrior.smoothing``) and ``cv:public=M[:smooth=A]`` the CV's
defaults with that prior (the eleventh session's ceiling of one pair per person,
results/adult_scale_designs/summary.md). With ``prior="auto"`` on two or more pairs per person,
``prior_choice`` holds the prior the releases chose and its z (``SpreadLogisticRegression.prior_choice_``).
Rows are appended to the CSV ``--out`` (created with a header naming the command), one per fit.
``pairwise:C[:sweeps=S][:label=pair]`` = spread at C with ``prior="pairwise"``'s rows (S EM sweeps, or
its held-out choice; ``label=pair``: the label held at each pair's own table, the twentieth session's)
and ``raked:C[:sweeps=S][:clean=1]`` with the tree's draws raked to every pair's own table, or with
``clean=1`` to the population's own tables (an oracle), as a prior of rows
(``fedrr.estimators.spread.pairwise_rows``; triple releases).
``--paired --fits F ...`` prints those fits against ``ldp-nb`` on the same releases (paired
differences over the seeds both have) from ``--out`` and stops.
``--split validation`` draws the people from 80 % of Adult's training rows and scores on the other 20 %
(``validation_split``, below), never on adult.test: where a default (a prior, a design) is chosen. Each
row's ``scored_on`` says which (empty in rows made before the column: adult.test), and ``--summarise``,
``--paired`` and ``--validate`` read the split ``--split`` names (default test). ``--prior-rule --split
validation`` tabulates the prior rules for two pairs against the one-pair defaults (``prior_rule``)::

    python simulations/adult_scale_designs.py --split validation --n 1000000 --eps 1 2 4 --designs m2 \\
        --fits tree:1 auto:1:solver=direct lc4:1:solver=direct ldp-nb --seeds 0 1
    python simulations/adult_scale_designs.py --split validation --n 1000000 --eps 1 2 4 --designs plan \\
        --fits cv ldp-nb --seeds 0 1
    python simulations/adult_scale_designs.py --prior-rule --split validation

``--c-rule``: which C the spread CV should refit with when its selection is cut (``selection_size``),
decided on a validation split of Adult's training rows, never on adult.test. A fixed 20 % of the
30,162 training rows is the validation split (permutation seeded 20261202); N people are drawn by
bootstrap from the other 80 % and release the planner's design once. On those releases:
``SpreadLogisticRegressionCV(Cs, solver="direct", fallback=False)`` (its fold scores per C, the
selection cut to its default 100,000 records) and, for every C of the grid, ``SpreadLogisticRegression``
refitted on all releases at C ("kept": C as chosen) and at C · n_cut / N ("scaled": the penalty as
heavy per record as in the cut folds, the CV's rule before 2026-12-02), and ``LDPNaiveBayes`` on the
same releases, all scored on the validation rows. Rows (JSON lines) go to ``--out``;
``--c-rule --summarise`` prints each rule against naive Bayes, paired per seed::

    python simulations/adult_scale_designs.py --c-rule --n 300000 1000000 --eps 0.5 1 2 --seeds 0 1 2 \\
        --out results/adult_scale_designs/c_rule.jsonl
    python simulations/adult_scale_designs.py --c-rule --summarise --out results/adult_scale_designs/c_rule.jsonl
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import time
from pathlib import Path

import numpy as np

from fedrr.datasets import load
from fedrr.estimators import LDPNaiveBayes, SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.estimators.spread import pairwise_rows
from fedrr.io import command_line
from fedrr.learners import classification_scores
from fedrr.mechanisms import EmpiricalPrior, PairedRecordMechanism, TripleRecordMechanism, plan_release

FIELDS = [
    "n",
    "eps",
    "design",
    "seed",
    "fit",
    "accuracy",
    "balanced",
    "auc",
    "seconds",
    "n_iter",
    "burn_in",
    "converged",
    "coef_norm",
    "C_chosen",
    "mechanism",
    "trace",
    "prior_choice",
    "scored_on",
]
#: iterations at which the coefficient norm is recorded in ``trace`` (does it still move at the stop?)
TRACE_AT = (10, 25, 50, 100, 150, 200, 300, 400, 600, 800)

PRIORS = {"nb": "naive-bayes", "learned": "learned", "auto": "auto", "tree": "tree", "ctree": "class-tree"}


def metrics(est, X, y) -> dict:
    s = classification_scores(est, X, y)
    return {"accuracy": s["accuracy"], "balanced": s["balanced_accuracy"], "auc": s["auc"]}


def short_name(cand) -> str:
    """A candidate's CSV name: ``mK`` for K pairs per person (the same mechanism as design ``mK``),
    ``split0.25m1`` for a split release of label share 0.25 and one attribute."""
    if cand.design == "paired":
        return f"m{cand.n_sampled}"
    return f"split{cand.label_share:g}m{cand.n_sampled}"


def mechanism(design: str, ks, eps: float, n: int):
    """(mechanism, the design's name in the CSV)."""
    if design == "plan":
        return plan_release(ks, 2, eps, n).mechanism, design
    if design.startswith("top"):  # the planner's K-th design by its variance ranking (the default)
        plan = plan_release(ks, 2, eps, n)
        rank = int(design[3:]) - 1
        return plan.mechanism_for(rank), short_name(plan.candidates[rank])
    if design.startswith("m"):
        return PairedRecordMechanism(ks, 2, eps, n_sampled=int(design[1:])), design
    if design == "triple":
        return TripleRecordMechanism(ks, 2, eps), design
    raise SystemExit(f"unknown design {design!r}: plan, topK, mK or triple")


def describe(mech) -> str:
    kind = type(mech).__name__
    m = getattr(mech, "n_sampled", "?")
    return f"{kind}(m={m})"


def public_rows(pool: np.ndarray, m: str, seed: int, smooth: str = "0") -> EmpiricalPrior:
    """A prior of public unlabeled rows: ``m`` rows of the pool people are drawn from (without
    replacement, seeded by (seed, m)), or all of them for "all" (the population's own joint: an oracle);
    ``smooth``: the prior's pseudo-rows of the releases' naive Bayes (``EmpiricalPrior.smoothing``)."""
    if m == "all":
        return EmpiricalPrior(pool, smoothing=int(smooth))
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(m), 79)))
    return EmpiricalPrior(pool[rng.choice(pool.shape[0], int(m), replace=False)], smoothing=int(smooth))


def reweighted_prior(
    Xt, mech, seed: int, how: str, sweeps: int | None, clean: np.ndarray | None, label: str = "rows"
) -> EmpiricalPrior:
    """``pairwise_rows`` as a prior of rows: ``how`` "pairwise", the prior itself; "raked", the tree's
    draws raked to every pair's own maximum-likelihood table, or with ``clean`` (the pool's rows) to
    the population's own pair tables (an oracle)."""
    if how == "pairwise":
        return EmpiricalPrior(pairwise_rows(Xt, mech, seed=seed, sweeps=sweeps, label=label))
    tables = "releases"
    if clean is not None:
        ks = mech.n_states
        tables = {}
        for j, k in mech.pairs:
            t = np.zeros((ks[j], ks[k]))
            np.add.at(t, (clean[:, j], clean[:, k]), 1.0 / clean.shape[0])
            tables[(j, k)] = t
    return EmpiricalPrior(pairwise_rows(Xt, mech, seed=seed, sweeps=sweeps, tables=tables))


def fit_one(spec: str, Xt, yt, mech, seed: int, pool: np.ndarray | None = None):
    """One fit of ``spec`` (see the module doc) -> (estimator, seconds, extra fields); ``pool``: the
    clean rows people are drawn from, for the public-rows priors."""
    t = time.perf_counter()
    if spec == "ldp-nb":
        est = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
        return est, time.perf_counter() - t, {}
    if spec.split(":")[0] == "cv":
        kw = {k: v for k, v in (p.split("=") for p in spec.split(":")[1:])}
        if "public" in kw:
            kw["prior"] = public_rows(pool, kw.pop("public"), seed, kw.pop("smooth", "0"))
        kw = {"encoding": "onehot", "random_state": seed} | kw  # cv:encoding=unit: the estimators' former default
        est = SpreadLogisticRegressionCV(**kw).fit(Xt, yt, mechanism=mech)
        inner = est.estimator_
        extra = {"C_chosen": est.C_}
    else:
        parts = spec.split(":")
        name, C = parts[0], float(parts[1])
        opts = dict(p.split("=") for p in parts[2:])
        kw = {}
        if name.startswith("lc"):
            kw = {"prior": "latent-class", "n_latent_classes": int(name[2:])}
        elif name == "public":
            kw = {"prior": public_rows(pool, opts.pop("rows", "all"), seed, opts.pop("smooth", "0"))}
        elif name in ("raked", "pairwise"):  # rows of the releases' tree, reweighted (reweighted_prior)
            clean = pool if opts.pop("clean", "0") == "1" else None
            sweeps = int(opts.pop("sweeps")) if "sweeps" in opts else None
            label = opts.pop("label", "rows")
            kw = {"prior": reweighted_prior(Xt, mech, seed, name, sweeps, clean, label)}
        else:
            kw = {"prior": PRIORS[name]}
        if "it" in opts:
            kw["max_iter"] = int(opts["it"])
        if "burn" in opts:
            kw["burn_in"] = int(opts["burn"])
        if "init" in opts:
            kw["init"] = opts["init"]
        if "solver" in opts:
            kw["solver"] = opts["solver"]
        est = SpreadLogisticRegression(C=C, encoding="onehot", random_state=seed, **kw).fit(Xt, yt, mechanism=mech)
        inner = est
        extra = {}
    choice = getattr(est, "prior_choice_", None)  # prior "auto" on two or more pairs: what the releases chose
    extra["prior_choice"] = f"{choice['chosen']} z={choice['z']:.2f}" if choice else ""
    pairwise = (getattr(inner, "prior_", None) or {}).get("pairwise")  # prior "pairwise": the sweeps kept
    if pairwise:
        extra["prior_choice"] = f"pairwise sweeps={pairwise['sweeps']}"
    hist = getattr(inner, "history_", None) or [{}]
    extra |= {
        "n_iter": getattr(inner, "n_iter_", ""),
        "burn_in": getattr(inner, "burn_in_", ""),
        "converged": getattr(inner, "converged_", ""),
        "coef_norm": hist[-1].get("coef_norm", ""),
        "trace": " ".join(f"{h['iter']}:{h['coef_norm']:.3f}" for h in hist if h.get("iter") in TRACE_AT),
    }
    return est, time.perf_counter() - t, extra


def read_runs(path: Path, split: str) -> list[dict]:
    """The rows of a runs CSV scored on ``split`` ("test": adult.test, the rows before the column
    ``scored_on`` was added included; "validation")."""
    with path.open() as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [r for r in rows if (r.get("scored_on") or "test").startswith(split)]


def summarise(path: Path, split: str = "test") -> str:
    """Markdown table of a runs CSV: mean ± sd over seeds per (N, ε, design, fit)."""
    rows = read_runs(path, split)
    cells: dict = {}
    for r in rows:
        cells.setdefault((int(r["n"]), float(r["eps"]), r["design"], r["fit"]), []).append(r)
    out = ["| N | ε | design | fit | seeds | accuracy | balanced | AUC | fit s | iters (burn-in) |", "|" + "---|" * 10]
    for (n, eps, design, fit), rs in sorted(cells.items()):

        def ms(k, rs=rs):
            v = np.array([float(r[k]) for r in rs])
            return f"{v.mean():.4f}" + (f" ± {v.std(ddof=1):.4f}" if len(v) > 1 else "")

        its = " ".join(f"{r['n_iter']}({r['burn_in']})" for r in rs if r["n_iter"])
        sec = np.mean([float(r["seconds"]) for r in rs])
        out.append(
            f"| {n:,} | {eps:g} | {design} | {fit} | {len(rs)} | {ms('accuracy')} | {ms('balanced')} | "
            f"{ms('auc')} | {sec:.0f} | {its or '-'} |"
        )
    return "\n".join(out)


def prior_rule(path: Path, split: str = "validation") -> str:
    """Markdown table of the prior rules for two pairs per person against the one-pair defaults, from a
    runs CSV holding, per (N, ε, seed), design m2's fits ``tree:1``, ``lc4:1:solver=direct`` and
    ``auto:1:solver=direct`` (the chooser's pick between latent-class and naive Bayes) and design plan's
    ``cv`` (the same people: the draw of people depends on (seed, N) alone). The rule "chooser, else tree"
    takes the latent-class fit where the chooser keeps it and the tree where it keeps naive Bayes. Each
    cell: mean accuracy / balanced accuracy / AUC over the seeds that have every fit, and the mean
    paired difference in accuracy from the one-pair defaults (± its sd over seeds)."""
    rows = read_runs(path, split)
    fit = {(int(r["n"]), float(r["eps"]), int(r["seed"]), r["design"], r["fit"]): r for r in rows}
    rules = {
        "tree": lambda g: g("m2", "tree:1"),
        "latent-class 4": lambda g: g("m2", "lc4:1:solver=direct"),
        "chooser, else naive Bayes (auto)": lambda g: g("m2", "auto:1:solver=direct"),
        "chooser, else tree": lambda g: (
            g("m2", "lc4:1:solver=direct")
            if g("m2", "auto:1:solver=direct")["prior_choice"].startswith("latent-class")
            else g("m2", "tree:1")
        ),
        "paired naive Bayes (m2)": lambda g: g("m2", "ldp-nb"),
    }
    out = [
        "| N | ε | seeds | one pair, defaults | " + " | ".join(rules) + " |",
        "|" + "---|" * (4 + len(rules)),
    ]
    for n, eps in sorted({k[:2] for k in fit}):
        cols, base, seeds = {name: [] for name in rules}, [], []
        for seed in sorted({k[2] for k in fit if k[:2] == (n, eps)}):

            def g(design, spec, seed=seed, n=n, eps=eps):
                return fit[(n, eps, seed, design, spec)]

            try:
                got = {name: rule(g) for name, rule in rules.items()}
                one = g("plan", "cv")
            except KeyError:  # a seed without every fit
                continue
            seeds.append(seed)
            base.append([float(one[k]) for k in ("accuracy", "balanced", "auc")])
            for name, r in got.items():
                cols[name].append([float(r[k]) for k in ("accuracy", "balanced", "auc")])
        if not seeds:
            continue
        b = np.array(base)
        cells = []
        for v in cols.values():
            v = np.array(v)
            d = v[:, 0] - b[:, 0]
            sd = f" ± {d.std(ddof=1):.3f}" if len(d) > 1 else ""
            m = v.mean(axis=0)
            cells.append(f"{m[0]:.4f} / {m[1]:.3f} / {m[2]:.3f} (Δ {d.mean():+.3f}{sd})")
        m = b.mean(axis=0)
        out.append(
            f"| {n:,} | {eps:g} | {len(seeds)} | {m[0]:.4f} / {m[1]:.3f} / {m[2]:.3f} | " + " | ".join(cells) + " |"
        )
    return "\n".join(out)


def paired(path: Path, fits: list[str], split: str = "test") -> str:
    """Markdown table of ``fits`` against ``ldp-nb`` on the same releases (same N, ε, design and seed):
    each metric's mean ± sd over the seeds both have, and the paired difference's."""
    rows = read_runs(path, split)
    by = {(int(r["n"]), float(r["eps"]), r["design"], r["fit"], int(r["seed"])): r for r in rows}  # the last run
    out = ["| N | ε | design | fit | seeds | accuracy | balanced | AUC | Δ accuracy | Δ balanced | Δ AUC | fit s |"]
    out.append("|" + "---|" * 12)
    metrics = ("accuracy", "balanced", "auc")

    def ms(v, sign: str = "") -> str:
        v = np.asarray(v, float)
        return f"{v.mean():{sign}.4f}" + (f" ± {v.std(ddof=1):.4f}" if len(v) > 1 else "")

    for n, eps, design in sorted({k[:3] for k in by if k[3] in fits}):
        for fit in [*fits, "ldp-nb"]:
            seeds = sorted(
                k[4] for k in by if k[:4] == (n, eps, design, fit) and (n, eps, design, "ldp-nb", k[4]) in by
            )
            if not seeds:
                continue
            got = [by[(n, eps, design, fit, s)] for s in seeds]
            nb = [by[(n, eps, design, "ldp-nb", s)] for s in seeds]
            cols = [ms([float(r[k]) for r in got]) for k in metrics]
            if fit == "ldp-nb":
                cols += ["–"] * 3
            else:
                cols += [ms([float(a[k]) - float(b[k]) for a, b in zip(got, nb)], "+") for k in metrics]
            sec = np.mean([float(r["seconds"]) for r in got])
            out.append(f"| {n:,} | {eps:g} | {design} | {fit} | {len(seeds)} | " + " | ".join(cols) + f" | {sec:.1f} |")
    return "\n".join(out)


def validate(path: Path, fit: str = "cv", split: str = "test") -> str:
    """The planner against measurement (issue 46 item 3): per (N, ε) of the runs CSV, the planner's top
    three designs by its default ranking, each with its predicted errors (pair tables' RMS relative
    error, three-way co-occurrence error) and its measured ``fit`` (mean ± sd over seeds: accuracy,
    balanced, AUC); which design each ranking chooses ("report", the default, and "prefer") and
    whether the choice is within 0.3 points of accuracy of the best measured of the three."""
    rows = read_runs(path, split)
    ks = load("adult_binned").schema.states()
    runs: dict = {}
    for r in rows:  # the latest row of a (N, ε, design, seed) wins; "plan" is the planner's own pick
        n, eps = int(r["n"]), float(r["eps"])
        if r["fit"] != fit:
            continue
        design = r["design"]
        if design == "plan":
            design = short_name(plan_release(ks, 2, eps, n).best)
        runs.setdefault((n, eps), {}).setdefault(design, {})[int(r["seed"])] = r
    out = [
        "| N | ε | design (rank) | rel err | co-occ | seeds | accuracy | balanced | AUC | report | prefer |",
        "|" + "---|" * 11,
    ]
    verdicts = []
    for (n, eps), by_design in sorted(runs.items()):
        plan = plan_release(ks, 2, eps, n)
        prefer = short_name(plan_release(ks, 2, eps, n, dependence="prefer").best)
        top = [short_name(c) for c in plan.candidates[:3]]
        if not any(d in by_design for d in top):
            continue
        means = {}
        for rank, (d, cand) in enumerate(zip(top, plan.candidates[:3]), 1):
            rs = list(by_design.get(d, {}).values())
            _, rel = plan.relative_errors(cand)
            cells = []
            for k in ("accuracy", "balanced", "auc"):
                v = np.array([float(r[k]) for r in rs])
                cells.append(
                    "–" if not len(v) else f"{v.mean():.4f}" + (f" ± {v.std(ddof=1):.4f}" if len(v) > 1 else "")
                )
            if rs:
                means[d] = (np.mean([float(r["accuracy"]) for r in rs]), len(rs))
            mark = {True: "chosen", False: ""}
            out.append(
                f"| {n:,} | {eps:g} | {d} ({rank}) | {rel:.3f} | {cand.co_occurrence_error:.3g} | {len(rs)} | "
                + " | ".join(cells)
                + f" | {mark[d == top[0]]} | {mark[d == prefer]} |"
            )
        if means:
            best = max(means, key=lambda d: means[d][0])
            for rule, chosen in (("report", top[0]), ("prefer", prefer)):
                if chosen in means:
                    gap = means[best][0] - means[chosen][0]
                    seeds = min(m[1] for m in means.values())
                    verdicts.append(
                        f"- N {n:,}, ε {eps:g}, {rule}: chose {chosen}; best measured {best}; gap "
                        f"{100 * gap:.2f} points ({'within' if gap <= 0.003 else 'OUTSIDE'} 0.3; "
                        f"{len(means)} of 3 designs measured, ≥ {seeds} seeds each)"
                    )
                else:
                    verdicts.append(f"- N {n:,}, ε {eps:g}, {rule}: chose {chosen}, not measured")
    return "\n".join(out + [""] + verdicts)


# --- --c-rule


#: --c-rule: the C grid (the CV's default and 100)
CS = (0.01, 0.1, 1.0, 10.0, 100.0)


def c_rule_scores(est, X, y) -> list[float]:
    s = classification_scores(est, X, y)
    return [s["accuracy"], s["balanced_accuracy"], s["auc"]]


def validation_split():
    """(X, y) to draw people from, (X, y) to validate on: 80 % / 20 % of Adult's training rows."""
    ds = load("adult_binned")
    train = ~ds.extra["is_test"]
    X, y = ds.X[train], ds.y[train]
    perm = np.random.default_rng(20261202).permutation(len(y))
    nv = len(y) // 5
    return ds.schema.states(), (X[perm[nv:]], y[perm[nv:]]), (X[perm[:nv]], y[perm[:nv]])


def c_rule_cell(ks, pool, val, n: int, eps: float, seed: int) -> dict:
    (Xp, yp), (Xv, yv) = pool, val
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(n, 77)))
    idx = rng.integers(0, len(yp), n)
    mech = plan_release(ks, 2, eps, n).mechanism
    rel = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(n, int(eps * 1000), 78)))
    Xt, yt = mech.release(Xp[idx], yp[idx], rng=rel)
    t = time.perf_counter()
    cv = SpreadLogisticRegressionCV(Cs=CS, solver="direct", fallback=False, random_state=seed)
    cv.fit(Xt, yt, mechanism=mech)
    res = cv.cv_results_
    row = {
        "n": n,
        "eps": eps,
        "seed": seed,
        "p_value": cv.p_value_,
        "n_cut": cv.n_selection_fit_,
        "cv_seconds": time.perf_counter() - t,
        "fold_scores": [[float(res[f"split{f}_test_score"][i]) for f in range(cv.cv)] for i in range(len(CS))],
    }
    scale = cv.n_selection_fit_ / n
    for rule, factor in (("kept", 1.0), ("scaled", scale)):
        row[rule] = {}
        for C in CS:
            if rule == "scaled" and factor == 1.0:
                row[rule][str(C)] = row["kept"][str(C)]
                continue
            est = SpreadLogisticRegression(C=C * factor, solver="direct", random_state=seed)
            row[rule][str(C)] = c_rule_scores(est.fit(Xt, yt, mechanism=mech), Xv, yv)
    row["ldp_nb"] = c_rule_scores(LDPNaiveBayes().fit(Xt, yt, mechanism=mech), Xv, yv)
    return row


def c_rule_choice(fold_scores, rule: str) -> float:
    """The C a CV selection rule takes, on the CV's default grid, from the per-C fold scores: "best"
    (the highest mean) or "2se" (the largest C whose mean is within two standard errors of the per-fold
    differences from it: ``SpreadLogisticRegressionCV(selection="2se")``'s rule, equal fold weights)."""
    grid = SpreadLogisticRegressionCV().Cs  # the CV's default grid (CS adds C 100, fitted for reference)
    S = np.asarray(fold_scores)[: len(grid)]
    b = int(np.argmax(S.mean(axis=1)))
    if rule == "best":
        return grid[b]
    d = S[b] - S  # (C, fold): the best's fold scores minus each candidate's
    within = d.mean(axis=1) <= 2.0 * d.std(axis=1, ddof=1) / np.sqrt(S.shape[1])
    return max(C for C, ok in zip(grid, within) if ok)


def c_rule_summary(path: Path) -> str:
    rows = [json.loads(line) for line in path.open() if not line.startswith("#")]
    cells = sorted({(r["n"], r["eps"]) for r in rows})
    rules = [("best, kept", "kept", "best"), ("best, scaled", "scaled", "best"), ("2 SE, kept", "kept", "2se")]
    rules += [(f"C {C:g}, kept", "kept", C) for C in (1.0, 10.0)]
    out = [
        "Validation split of Adult's training rows; each cell: mean over seeds of (rule − LDP naive Bayes) "
        "in accuracy / balanced accuracy / AUC (± the sd over seeds of the accuracy difference). Rules: the "
        "CV's C by its fold scores (best: the highest mean; 2 SE: the largest C within two standard errors), "
        "refitted kept or scaled by n_cut / N; or a fixed C.",
        "",
        "| N | ε | seeds | p ≤ 0.05 | C by best; by 2 SE (per seed) | "
        + " | ".join(r[0] for r in rules)
        + " | naive Bayes |",
        "|" + "---|" * (6 + len(rules)),
    ]
    for n, eps in cells:
        rs = [r for r in rows if (r["n"], r["eps"]) == (n, eps)]
        chosen = {rule: [c_rule_choice(r["fold_scores"], rule) for r in rs] for rule in ("best", "2se")}
        cols = []
        for _, kind, rule in rules:
            Cs = chosen[rule] if rule in chosen else [rule] * len(rs)
            d = np.array([np.subtract(r[kind][str(c)], r["ldp_nb"]) for r, c in zip(rs, Cs)])
            m = d.mean(axis=0)
            sd = f" (± {d[:, 0].std(ddof=1):.3f})" if len(rs) > 1 else ""
            cols.append(f"{m[0]:+.3f} / {m[1]:+.3f} / {m[2]:+.3f}{sd}")
        nb = np.mean([r["ldp_nb"] for r in rs], axis=0)
        n_sig = sum(r["p_value"] <= 0.05 for r in rs)
        out.append(
            f"| {n:,} | {eps:g} | {len(rs)} | {n_sig} | "
            + "; ".join(" ".join(f"{c:g}" for c in chosen[rule]) for rule in ("best", "2se"))
            + " | "
            + " | ".join(cols)
            + f" | {nb[0]:.3f} / {nb[1]:.3f} / {nb[2]:.3f} |"
        )
    return "\n".join(out)


def open_runs(out: Path, argv) -> tuple:
    """(file, csv writer) appending to the runs CSV ``out``, whose columns must be FIELDS."""
    out.parent.mkdir(parents=True, exist_ok=True)
    new = not out.exists()
    if not new:
        with out.open() as f:
            header = next(line for line in f if not line.startswith("#")).strip().split(",")
        if header != FIELDS:
            raise SystemExit(f"{out} has the columns {header}; this script writes {FIELDS}")
    f = out.open("a", newline="")
    f.write(f"# {'' if new else '+ '}{command_line(argv)}\n")
    w = csv.DictWriter(f, FIELDS, lineterminator="\n")  # the committed CSV's line ends
    if new:
        w.writeheader()
    return f, w


#: the tutorial survey's public cut points (configs/my_table.toml) and category orders
SURVEY_EDGES = {"age": [30, 45, 60], "hours": [30, 40, 50]}
SURVEY_CATEGORIES = {"region": ["north", "south", "east", "west"], "education": ["school", "college", "degree"]}


@functools.cache
def survey_generator():
    """configs/data/make_survey.py's ``make`` (loaded once per process)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "configs" / "data" / "make_survey.py"
    spec = importlib.util.spec_from_file_location("make_survey", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make


def survey_people(n: int, rng: np.random.Generator) -> tuple:
    """n people from the tutorial survey's generator (configs/data/make_survey.py: independent
    attributes, a logistic label), cut at its public edges: (X (n, 5) states, y)."""
    df = survey_generator()(n, rng)
    cols = [np.digitize(df[c], SURVEY_EDGES[c]) for c in ("age", "hours")]
    cols += [df[c].map({v: i for i, v in enumerate(SURVEY_CATEGORIES[c])}).to_numpy() for c in SURVEY_CATEGORIES]
    cols.append((df["smoker"] == "yes").to_numpy())
    return np.stack(cols, axis=1).astype(np.int64), (df["buys"] == "yes").to_numpy().astype(np.int64)


def study_rows(split: str) -> tuple:
    """(states per attribute, (X, y) people are drawn from, (X, y) scored on): all training rows and
    adult.test, or ``validation_split``'s 80 % and 20 % (never adult.test: where choices are made);
    "survey-validation": None (each cell draws its people from the survey's generator, ``survey_people``)
    and 20,000 rows of it drawn apart (seed 999)."""
    if split == "validation":
        return validation_split()
    if split == "survey-validation":
        return [4, 4, 4, 3, 2], None, survey_people(20_000, np.random.default_rng(999))
    ds = load("adult_binned")
    test = ds.extra["is_test"]
    return ds.schema.states(), (ds.X[~test], ds.y[~test]), (ds.X[test], ds.y[test])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--designs", nargs="+", default=["plan"])
    ap.add_argument("--fits", nargs="+", default=["nb:1", "ldp-nb"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--out", type=Path, default=Path("results/adult_scale_designs/runs.csv"))
    ap.add_argument(
        "--split",
        choices=["test", "validation", "survey-validation"],
        default="test",
        help="draw people from all training rows and score on adult.test, or from 80 %% and score on the other "
        "20 %%; survey-validation: from the tutorial survey's generator, scored on 20,000 more of its rows",
    )
    ap.add_argument("--summarise", action="store_true", help="print the table of --out and stop")
    ap.add_argument(
        "--validate", action="store_true", help="print the planner's top three designs against --out's cv fits, stop"
    )
    ap.add_argument("--c-rule", action="store_true", help="the C-rule study on a validation split (module doc)")
    ap.add_argument(
        "--paired", action="store_true", help="print --fits against ldp-nb on the same releases (paired Δ) and stop"
    )
    ap.add_argument("--prior-rule", action="store_true", help="print the prior rules' table of --out and stop")
    a = ap.parse_args(argv)
    if a.c_rule:
        return c_rule(a, argv)
    if a.prior_rule:
        print(prior_rule(a.out, a.split))
        return
    if a.paired:
        print(paired(a.out, [f for f in a.fits if f != "ldp-nb"], a.split))
        return
    if a.summarise:
        print(summarise(a.out, a.split))
        return
    if a.validate:
        print(validate(a.out, split=a.split))
        return
    f, w = open_runs(a.out, argv)
    ks, train, (Xte, yte) = study_rows(a.split)
    Xtr, ytr = train if train is not None else (None, None)
    for n in a.n:
        for eps in a.eps:
            for design in a.designs:
                for seed in a.seeds:
                    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(n,)))
                    if Xtr is None:  # the survey's generator: n new people
                        Xp, yp = survey_people(n, rng)
                    else:
                        idx = rng.integers(0, len(ytr), n)
                        Xp, yp = Xtr[idx], ytr[idx]
                    mech, name = mechanism(design, ks, eps, n)
                    rel = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(n, int(eps * 1000), 1)))
                    Xt, yt = mech.release(Xp, yp, rng=rel)
                    for spec in a.fits:
                        est, sec, extra = fit_one(spec, Xt, yt, mech, seed, Xtr)
                        row = {"n": n, "eps": eps, "design": name, "seed": seed, "fit": spec}
                        row |= metrics(est, Xte, yte) | {"seconds": sec, "mechanism": describe(mech)} | extra
                        row["scored_on"] = a.split
                        row = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                        w.writerow(row)
                        f.flush()
                        print(row, flush=True)
    f.close()


def c_rule(a, argv) -> None:
    """``--c-rule``: the study's cells appended to ``--out`` (JSON lines), or its table."""
    if a.summarise:
        print(c_rule_summary(a.out))
        return
    a.out.parent.mkdir(parents=True, exist_ok=True)
    ks, pool, val = validation_split()
    with a.out.open("a") as f:
        f.write(f"# {command_line(argv)}\n")
        for n in a.n:
            for eps in a.eps:
                for seed in a.seeds:
                    row = c_rule_cell(ks, pool, val, n, eps, seed)
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    print(n, eps, seed, f"p {row['p_value']:.3f}", f"{row['cv_seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
