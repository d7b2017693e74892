"""Benchmark and profile of spread-EM's whole fit at large N (issue 47 item 3): Adult rows resampled
to N people, the planner's release for (N, ε), ``SpreadLogisticRegressionCV(encoding="onehot")``
with its other defaults (selection, the fallback's test and the refit: what a user waits for),
against scikit-learn's ``LogisticRegression`` on the same N clean one-hot rows and ``LDPNaiveBayes``
on the same releases, in the same run (ratios).

    python benchmarks/bench_spread_scale.py --n 1000000 --eps 2 --whole-selection --out results/speed_scale
    python benchmarks/bench_spread_scale.py --quick --whole-selection --out /tmp/speed_scale    # N = 3,000

``--solver`` is the spread fits' solver: "auto" (the default, the estimator's: the direct solver on one
pair per record), or "em" or "direct" forced; a forced solver writes ``bench_spread_scale_N_SOLVER.md``
(the committed 10⁶ report holds the defaults' run and, below it, spread-EM's from when "em" was the
default):

    python benchmarks/bench_spread_scale.py --n 1000000 --eps 2 --solver em --whole-selection --out results/speed_scale

``--cells`` also fits the defaults with every pair table of a prior of rows by the cells' weights over
each (s, t, row) (``TwoPairLikelihood.ROWS_OWN_CELL = False``, the path before each row took its own
cell; the same objective) on the same releases, after the defaults: that change's speed-up on the
whole fit, in one run (``bench_spread_scale_N_cells.md``). On the planner's triple at 10⁶ people and
at the demo's 3·10⁴, ε 8::

    python benchmarks/bench_spread_scale.py --n 1000000 --eps 2 --cells --out results/speed_scale
    python benchmarks/bench_spread_scale.py --n 30000 --eps 8 --cells --out results/speed_scale

``--whole-selection`` also fits ``SpreadLogisticRegressionCV(selection_size=None)`` (C chosen on
folds of every record, the default before ``selection_size``) on the same releases: the default's
speed-up and what the cut selection costs, in one run. Both fits then run without the profiler, the
defaults' first (it pays the first fit's warm-up).

Rows: ``rng.integers(0, 30162, N)`` seeded by (seed, N), as ``simulations/adult_scale_designs.py``,
released once. The spread fit runs under ``cProfile``; the report gives its wall time, the ratios,
the test accuracy of each fit on adult.test's 15,060 clean rows, and the functions with the most
cumulative and own time. Writes ``bench_spread_scale_N.md`` to --out. The machine may be shared:
the load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import OneHotEncoder

from fedrr.datasets import load
from fedrr.estimators import LDPNaiveBayes, SpreadLogisticRegressionCV
from fedrr.estimators.spread import TwoPairLikelihood
from fedrr.io import markdown_table, write_report
from fedrr.learners import classification_scores
from fedrr.mechanisms import plan_release

TOP = 25
METRICS = ("accuracy", "balanced_accuracy", "auc")


def _spread_line(label: str, est) -> str:
    inner = est.estimator_
    return (
        f"- Spread ({label}): C {est.C_}, fallback {est.fallback_} (p {est.p_value_}), refit iterations "
        f"{getattr(inner, 'n_iter_', '-')} (burn-in {getattr(inner, 'burn_in_', '-')}), "
        f"converged {getattr(inner, 'converged_', '-')}."
    )


def _stats(prof: cProfile.Profile, key: str) -> str:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(TOP)
    text = buf.getvalue()
    return text[text.find("   ncalls") :].rstrip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--eps", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="N = 3,000")
    ap.add_argument("--whole-selection", action="store_true", help="also fit with selection_size=None")
    ap.add_argument("--cells", action="store_true", help="also fit with pair tables by the cells' weights")
    ap.add_argument("--solver", choices=("auto", "em", "direct"), default="auto", help="the spread fits' solver")
    ap.add_argument("--out", type=Path, default=Path("results/speed_scale"))
    a = ap.parse_args(argv)
    n = 3000 if a.quick else a.n
    load_before = os.getloadavg()
    ds = load("adult_binned")
    ks = ds.schema.states()
    test = ds.extra["is_test"]
    Xtr, ytr, Xte, yte = ds.X[~test], ds.y[~test], ds.X[test], ds.y[test]
    rng = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(n,)))
    idx = rng.integers(0, len(ytr), n)
    plan = plan_release(ks, 2, a.eps, n)
    mech = plan.mechanism
    rel = np.random.default_rng(np.random.SeedSequence(a.seed, spawn_key=(n, int(a.eps * 1000), 1)))
    Xt, yt = mech.release(Xtr[idx], ytr[idx], rng=rel)

    t = time.perf_counter()
    enc = OneHotEncoder(categories=[np.arange(k) for k in ks])
    clean = LogisticRegression(max_iter=1000).fit(enc.fit_transform(Xtr[idx]), ytr[idx])
    t_clean = time.perf_counter() - t

    def row(name, secs, s):
        return [name, f"{secs:.1f}", f"{secs / t_clean:.2f}"] + [f"{s[k]:.4f}" for k in METRICS]

    clean_scores = classification_scores(clean, enc.transform(Xte), yte)
    rows = [row("sklearn LogisticRegression, clean one-hot rows", t_clean, clean_scores)]

    t = time.perf_counter()
    nb = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
    rows.append(row("LDPNaiveBayes, same releases", time.perf_counter() - t, classification_scores(nb, Xte, yte)))

    # with --whole-selection both fits run unprofiled, the defaults' first (it pays the first fit's
    # warm-up: the ratio errs against the defaults); else the defaults' fit runs under cProfile
    prof = None if a.whole_selection or a.cells else cProfile.Profile()
    est = SpreadLogisticRegressionCV(encoding="onehot", random_state=a.seed, solver=a.solver)
    t = time.perf_counter()
    if prof is not None:
        prof.enable()
    est.fit(Xt, yt, mechanism=mech)
    if prof is not None:
        prof.disable()
    t_spread = time.perf_counter() - t
    how = "under cProfile" if prof is not None else "run first"
    what = "defaults" if a.solver == "auto" else f"solver={a.solver!r}"
    name = f"SpreadLogisticRegressionCV {what} (whole fit, {how}; selection on {est.n_selection_fit_:,})"
    rows.append(row(name, t_spread, classification_scores(est, Xte, yte)))
    lines = [_spread_line(what, est)]
    if a.whole_selection:
        whole = SpreadLogisticRegressionCV(encoding="onehot", random_state=a.seed, selection_size=None, solver=a.solver)
        t = time.perf_counter()
        whole.fit(Xt, yt, mechanism=mech)
        t_whole = time.perf_counter() - t
        name = f"SpreadLogisticRegressionCV(selection_size=None) (whole fit; selection on {whole.n_selection_fit_:,})"
        rows.append(row(name, t_whole, classification_scores(whole, Xte, yte)))
        lines.append(_spread_line("selection_size=None", whole))
        lines.append(f"\nThe defaults' whole fit took {t_spread / t_whole:.2f}× the time of selection_size=None's.")

    if a.cells:
        TwoPairLikelihood.ROWS_OWN_CELL = False
        try:
            cells = SpreadLogisticRegressionCV(encoding="onehot", random_state=a.seed, solver=a.solver)
            t = time.perf_counter()
            cells.fit(Xt, yt, mechanism=mech)
            t_cells = time.perf_counter() - t
        finally:
            TwoPairLikelihood.ROWS_OWN_CELL = True
        name = "SpreadLogisticRegressionCV, pair tables by the cells' weights (whole fit, run second)"
        rows.append(row(name, t_cells, classification_scores(cells, Xte, yte)))
        lines.append(_spread_line("cells' weights", cells))
        same = np.array_equal(est.predict_proba(Xte), cells.predict_proba(Xte))
        gap = np.max(np.abs(est.predict_proba(Xte) - cells.predict_proba(Xte)))
        lines.append(
            f"\nThe cells' weights' whole fit took {t_cells / t_spread:.2f}× the defaults'; their test "
            f"probabilities {'are identical' if same else f'differ by at most {gap:.1e}'}."
        )

    body = "\n\n".join(
        [
            f"N = {n:,} people, ε {a.eps:g}, seed {a.seed}; release: {plan.best.name()} "
            f"({type(mech).__name__}); load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}.",
            markdown_table(["fit", "wall s", "ratio to sklearn clean", *METRICS], rows),
            "\n".join(lines),
        ]
        + (
            []
            if prof is None
            else [
                "## Profile, by cumulative time\n\n```text\n" + _stats(prof, "cumulative") + "\n```",
                "## Profile, by own time\n\n```text\n" + _stats(prof, "tottime") + "\n```",
            ]
        )
    )
    a.out.mkdir(parents=True, exist_ok=True)
    suffix = ("" if a.solver == "auto" else "_" + a.solver) + ("_cells" if a.cells else "")
    print(
        write_report(
            a.out / f"bench_spread_scale_{n}{suffix}.md",
            f"Spread's whole fit at N = {n:,} (issue 47){'' if a.solver == 'auto' else ', solver ' + a.solver}",
            body,
            argv,
        )
    )


if __name__ == "__main__":
    main()
