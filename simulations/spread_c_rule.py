"""Which C the spread CV should refit with when its selection is cut (``selection_size``), decided on
a validation split of Adult's training rows, never on adult.test (issue 46).

    python simulations/spread_c_rule.py --n 300000 1000000 --eps 0.5 1 2 --seeds 0 1 2 \\
        --out results/spread_c_rule/runs.jsonl
    python simulations/spread_c_rule.py --summarise --out results/spread_c_rule/runs.jsonl

Adult binned at the public edges; a fixed 20 % of the 30,162 training rows is the validation split
(permutation seeded 20261202), and N people are drawn by bootstrap from the other 80 %; each releases
the planner's design once (``plan_release(ks, 2, ε, N)``: one pair per person here). On those releases:
``SpreadLogisticRegressionCV(Cs, solver="direct", fallback=False)`` (its fold scores per C; the
selection cut to its default 100,000 records) and, for every C of the grid, ``SpreadLogisticRegression``
refitted on all releases at C ("kept": C as chosen) and at C · n_cut / N ("scaled": the penalty as
heavy per record as in the cut folds, the CV's rule before 2026-12-03), and ``LDPNaiveBayes`` on the
same releases. Every model is scored on the validation rows (accuracy, balanced accuracy, AUC).
The summary gives each rule (the C with the highest mean held-out pair likelihood, refitted kept or
scaled; or a fixed C) against naive Bayes, paired per seed. The independence test's p-value is
recorded; with ``fallback=True`` a pool with p > 0.05 would get the intercept-only model under every rule.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from fedrr.datasets import load
from fedrr.estimators import LDPNaiveBayes, SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.io import command_line
from fedrr.learners import classification_scores
from fedrr.mechanisms import plan_release

CS = (0.01, 0.1, 1.0, 10.0, 100.0)
METRICS = ("accuracy", "balanced", "AUC")


def scores(est, X, y) -> list[float]:
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


def run_cell(ks, pool, val, n: int, eps: float, seed: int) -> dict:
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
            row[rule][str(C)] = scores(est.fit(Xt, yt, mechanism=mech), Xv, yv)
    row["ldp_nb"] = scores(LDPNaiveBayes().fit(Xt, yt, mechanism=mech), Xv, yv)
    return row


def summarise(path: Path) -> str:
    rows = [json.loads(line) for line in path.open() if not line.startswith("#")]
    cells = sorted({(r["n"], r["eps"]) for r in rows})
    rules = [("CV's C, kept", "kept", None), ("CV's C, scaled", "scaled", None)]
    rules += [(f"C {C:g}, kept", "kept", C) for C in (1.0, 10.0)]
    out = [
        "Validation split of Adult's training rows; each cell: mean over seeds of (rule − LDP naive Bayes) "
        "in accuracy / balanced accuracy / AUC (± the sd over seeds of the accuracy difference).",
        "",
        "| N | ε | seeds | p ≤ 0.05 | CV's C (per seed) | " + " | ".join(r[0] for r in rules) + " | naive Bayes |",
        "|" + "---|" * (6 + len(rules)),
    ]
    for n, eps in cells:
        rs = [r for r in rows if (r["n"], r["eps"]) == (n, eps)]
        chosen = [CS[int(np.argmax(np.mean(r["fold_scores"], axis=1)))] for r in rs]
        cols = []
        for _, kind, fixed in rules:
            d = np.array([np.subtract(r[kind][str(fixed if fixed else c)], r["ldp_nb"]) for r, c in zip(rs, chosen)])
            m = d.mean(axis=0)
            sd = f" (± {d[:, 0].std(ddof=1):.3f})" if len(rs) > 1 else ""
            cols.append(f"{m[0]:+.3f} / {m[1]:+.3f} / {m[2]:+.3f}{sd}")
        nb = np.mean([r["ldp_nb"] for r in rs], axis=0)
        n_sig = sum(r["p_value"] <= 0.05 for r in rs)
        out.append(
            f"| {n:,} | {eps:g} | {len(rs)} | {n_sig} | {' '.join(f'{c:g}' for c in chosen)} | "
            + " | ".join(cols)
            + f" | {nb[0]:.3f} / {nb[1]:.3f} / {nb[2]:.3f} |"
        )
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[300_000, 1_000_000])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", type=Path, default=Path("results/spread_c_rule/runs.jsonl"))
    ap.add_argument("--summarise", action="store_true", help="print the table of --out and stop")
    a = ap.parse_args(argv)
    if a.summarise:
        print(summarise(a.out))
        return
    a.out.parent.mkdir(parents=True, exist_ok=True)
    ks, pool, val = validation_split()
    with a.out.open("a") as f:
        f.write(f"# {command_line(argv)}\n")
        for n in a.n:
            for eps in a.eps:
                for seed in a.seeds:
                    row = run_cell(ks, pool, val, n, eps, seed)
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    print(n, eps, seed, f"p {row['p_value']:.3f}", f"{row['cv_seconds']:.0f} s", flush=True)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
