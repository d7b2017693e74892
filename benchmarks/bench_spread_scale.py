"""Benchmark and profile of spread-EM's whole fit at large N (issue 47 item 3): Adult rows resampled
to N people, the planner's release for (N, ε), ``SpreadLogisticRegressionCV(encoding="onehot")``
with its other defaults (selection, the fallback's test and the refit: what a user waits for),
against scikit-learn's ``LogisticRegression`` on the same N clean one-hot rows and ``LDPNaiveBayes``
on the same releases, in the same run (ratios).

    python benchmarks/bench_spread_scale.py --n 1000000 --eps 2 --out results/speed_scale
    python benchmarks/bench_spread_scale.py --quick --out /tmp/speed_scale    # N = 3,000

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
from fedrr.io import markdown_table, write_report
from fedrr.learners import classification_scores
from fedrr.mechanisms import plan_release

TOP = 25


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

    rows = []
    t = time.perf_counter()
    enc = OneHotEncoder(categories=[np.arange(k) for k in ks])
    clean = LogisticRegression(max_iter=1000).fit(enc.fit_transform(Xtr[idx]), ytr[idx])
    t_clean = time.perf_counter() - t
    acc_clean = float(np.mean(clean.predict(enc.transform(Xte)) == yte))
    rows.append(["sklearn LogisticRegression, clean one-hot rows", f"{t_clean:.1f}", "1.0", f"{acc_clean:.4f}"])

    t = time.perf_counter()
    nb = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
    t_nb = time.perf_counter() - t
    s = classification_scores(nb, Xte, yte)
    rows.append(["LDPNaiveBayes, same releases", f"{t_nb:.1f}", f"{t_nb / t_clean:.2f}", f"{s['accuracy']:.4f}"])

    prof = cProfile.Profile()
    est = SpreadLogisticRegressionCV(encoding="onehot", random_state=a.seed)
    t = time.perf_counter()
    prof.enable()
    est.fit(Xt, yt, mechanism=mech)
    prof.disable()
    t_spread = time.perf_counter() - t
    s = classification_scores(est, Xte, yte)
    name = "SpreadLogisticRegressionCV (whole fit, under cProfile)"
    rows.append([name, f"{t_spread:.1f}", f"{t_spread / t_clean:.2f}", f"{s['accuracy']:.4f}"])

    inner = est.estimator_
    body = "\n\n".join(
        [
            f"N = {n:,} people, ε {a.eps:g}, seed {a.seed}; release: {plan.best.name()} "
            f"({type(mech).__name__}); load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}.",
            markdown_table(["fit", "wall s", "ratio to sklearn clean", "test accuracy"], rows),
            f"Spread: C {est.C_}, fallback {est.fallback_} (p {est.p_value_}), refit iterations "
            f"{getattr(inner, 'n_iter_', '-')} (burn-in {getattr(inner, 'burn_in_', '-')}), "
            f"converged {getattr(inner, 'converged_', '-')}.",
            "## Profile, by cumulative time\n\n```text\n" + _stats(prof, "cumulative") + "\n```",
            "## Profile, by own time\n\n```text\n" + _stats(prof, "tottime") + "\n```",
        ]
    )
    a.out.mkdir(parents=True, exist_ok=True)
    print(
        write_report(a.out / f"bench_spread_scale_{n}.md", f"Spread-EM's whole fit at N = {n:,} (issue 47)", body, argv)
    )


if __name__ == "__main__":
    main()
