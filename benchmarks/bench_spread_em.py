"""Benchmark of the default spread-EM fit at MNIST scale against scikit-learn: N = 9,000 records,
D = 784 pixels with K = 256 states, resampled with replacement from 800 of the 1,000 MNIST 7/9
images (the other 200, 100 per digit, are the held-out clean test set), randomised response with
flip 0.3 on pixels and labels.

Measured in one process, each fit timed in wall seconds and CPU seconds (``time.process_time``,
which adds up every thread of the process, so a threaded fit's CPU time counts both threads):
  * the default fit ``SpreadLogisticRegression(random_state=...)`` (default executor: threads over
    all CPUs); its iterations, whether its chains agreed (``diagnostics()``), held-out accuracy;
  * unless --no-serial, the same fit with ``executor=SerialExecutor()``, and whether the
    coefficients are identical to the threaded fit's (else their largest difference);
  * scikit-learn ``LogisticRegression(C=1)`` on the clean inputs of the same size;
  * the ratios spread / sklearn in wall and CPU seconds: the figure to read, since the machine
    may be shared (each file records the load average before and after);
  * peak memory: tracemalloc peak of a short fit (max_iter=3: the per-iteration footprint does not
    grow) and ru_maxrss (the process high-water mark).
``--variant JSON`` adds a threaded fit with those estimator parameters (repeatable: what a changed
default would cost or save, in the same rounds). ``--rounds R`` runs the fits R times, round-robin
(sklearn, spread threads, spread serial, the variants, then again), so that a load that comes and
goes weighs on every fit alike: each row is the median round (the faster of the middle two for an
even count), the ratio to sklearn the median of the per-round ratios (with their range). Every row
gives the whole fit's wall time (what a user waits for: validation, the prior, the shards, the EM,
the diagnostics) beside its wall seconds per EM iteration (whole fit / iterations).
Writes bench_spread_em.txt (the printed table, command first), .csv and .png to --out.

    python benchmarks/bench_spread_em.py                          # a few minutes, writes results/barber/
    python benchmarks/bench_spread_em.py --quick --out /tmp/barber  # N = 1,000
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from fedrr.datasets import load_mnist_7_vs_9, train_test_split_per_class
from fedrr.estimators import SpreadLogisticRegression
from fedrr.io import atomic_write_text, command_line, markdown_table, provenance, rng_for, write_csv
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import SerialExecutor

MIB = 2**20


def timed(make_fit) -> tuple[object, float, float]:
    """(fitted estimator, wall seconds, CPU seconds of this process) of ``make_fit()``."""
    w, c = time.perf_counter(), time.process_time()
    est = make_fit()
    return est, time.perf_counter() - w, time.process_time() - c


def _variant_fit(params: dict, seed: int, Xt, yt, rm) -> SpreadLogisticRegression:
    return SpreadLogisticRegression(random_state=seed, **params).fit(Xt, yt, mechanism=rm)


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def maxrss() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def plot(rows: list[dict], title: str, command: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    x = np.arange(len(rows))
    for off, key, label in ((-0.2, "wall_s", "wall seconds"), (0.2, "cpu_s", "CPU seconds (all threads)")):
        bars = ax.bar(x + off, [r[key] for r in rows], 0.4, label=label)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks(x, [r["fit"] for r in rows], fontsize=8)
    ax.set(ylabel="seconds per whole fit")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=8)
    fig.text(0.01, 0.005, command, fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/barber", help="output directory (default results/barber)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="N = 1,000 instead of 9,000")
    ap.add_argument("--n", type=int, default=None, help="records (default 9000)")
    ap.add_argument("--flip", type=float, default=0.3)
    ap.add_argument("--no-serial", action="store_true", help="skip the SerialExecutor comparison fit")
    ap.add_argument("--rounds", type=int, default=1, help="every fit this many times, round-robin (default 1)")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="JSON",
        help="a threaded fit with these estimator parameters too, e.g. '{\"n_chains\": 1}' (repeatable)",
    )
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    out, n, command = Path(args.out), args.n or (1000 if args.quick else 9000), command_line(argv)
    load0, rss0 = load(), maxrss()

    ds = load_mnist_7_vs_9()
    rng = rng_for(args.seed, 77)
    train, test = train_test_split_per_class(ds, 400, 100, rng)
    idx = rng.integers(0, train.X.shape[0], n)
    X, y = train.X[idx], train.y[idx]
    K, D = 256, X.shape[1]
    rm = RecordMechanism(RandomizedResponse(K, args.flip), RandomizedResponse(2, args.flip), n_features=D)
    Xt, yt = rm.release(X, y, rng=rng)
    SpreadLogisticRegression(max_iter=2, random_state=0).fit(Xt[:200], yt[:200], mechanism=rm)  # warm-up (numba)
    print(f"load average {load0}; N={n}, D={D}, K={K}, flip {args.flip}", flush=True)

    makers = {
        "sklearn LR, clean": lambda: LogisticRegression(C=1.0, max_iter=2000).fit(X / (K - 1.0), y),
        "spread, threads (default)": lambda: SpreadLogisticRegression(random_state=args.seed).fit(Xt, yt, mechanism=rm),
    }
    if not args.no_serial:
        makers["spread, serial"] = lambda: SpreadLogisticRegression(
            random_state=args.seed, executor=SerialExecutor()
        ).fit(Xt, yt, mechanism=rm)
    for v in args.variant:  # the default's parameters changed, in the same rounds
        params = json.loads(v)
        makers[f"spread, threads, {v}"] = functools.partial(_variant_fit, params, args.seed, Xt, yt, rm)
    runs: dict[str, list] = {name: [] for name in makers}  # name -> [(estimator, wall s, CPU s)] per round
    for r in range(max(1, args.rounds)):
        for name, make in makers.items():
            runs[name].append(timed(make))
            print(f"round {r + 1}: {name} {runs[name][-1][1]:.2f} s (load {load()})", flush=True)
    rounds = len(runs["sklearn LR, clean"])
    ratio = {  # per-round wall ratio to that round's sklearn fit
        name: [runs[name][i][1] / runs["sklearn LR, clean"][i][1] for i in range(rounds)] for name in makers
    }
    fits = {}  # name -> (estimator, wall s, CPU s) of the median round
    for name, rs in runs.items():
        walls = [w for _, w, _ in rs]
        fits[name] = rs[int(np.argsort(walls)[(len(walls) - 1) // 2])]
    sk, sk_wall, sk_cpu = fits["sklearn LR, clean"]
    ref = fits["spread, threads (default)"][0]
    rows = []
    for name, (est, wall, cpu) in fits.items():
        spread = isinstance(est, SpreadLogisticRegression)
        diag = est.diagnostics() if spread else {}
        n_iter = int(np.max(est.n_iter_))
        diff = float(np.max(np.abs(est.coef_ - ref.coef_))) if spread else ""
        rows.append(
            {
                "fit": name,
                "learner": "spread" if spread else "sklearn",
                "executor": (repr(est.executor) if est.executor else "None (default ThreadExecutor())")
                if spread
                else "",
                "wall_s": wall,
                "cpu_s": cpu,
                "wall_ratio_vs_sklearn": float(np.median(ratio[name])) if rounds > 1 else wall / sk_wall,
                "wall_ratio_min": min(ratio[name]),
                "wall_ratio_max": max(ratio[name]),
                "rounds": rounds,
                "wall_s_all_rounds": " ".join(f"{w:.2f}" for _, w, _ in runs[name]),
                "cpu_ratio_vs_sklearn": cpu / sk_cpu,
                "n_iter": n_iter,
                "wall_s_per_iter": wall / n_iter,
                "converged": diag.get("converged", ""),
                "convergence": diag.get("convergence", "lbfgs" if n_iter < 2000 else "lbfgs hit max_iter"),
                "prediction_distance": diag.get("prediction_distance", ""),
                "coef_max_abs_diff_vs_threads": diff,
                "coef_identical_to_threads": (
                    bool(np.array_equal(est.coef_, ref.coef_) and np.array_equal(est.intercept_, ref.intercept_))
                    if spread
                    else ""
                ),
                "test_accuracy": float(est.score(test.X if spread else test.X / (K - 1.0), test.y)),
            }
        )
        print(f"{name}: wall {wall:.2f} s, CPU {cpu:.2f} s, {n_iter} iterations", flush=True)

    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    SpreadLogisticRegression(max_iter=3, random_state=args.seed).fit(Xt, yt, mechanism=rm)
    peak = (tracemalloc.get_traced_memory()[1] - base) / MIB
    tracemalloc.stop()
    rss, load1 = maxrss() / MIB, load()
    common = {
        "N": n,
        "D": D,
        "K": K,
        "flip": args.flip,
        "cpus": os.cpu_count(),
        "tracemalloc_peak_short_fit_MiB": peak,
        "maxrss_MiB": rss,
        "loadavg_start": load0,
        "loadavg_end": load1,
    }
    write_csv(out / "bench_spread_em.csv", [{**r, **common} for r in rows], command)

    table = markdown_table(
        [
            "fit",
            "wall s (whole fit)",
            "wall s / iteration",
            "CPU s",
            "wall / sklearn",
            "CPU / sklearn",
            "iterations",
            "chains agreed",
            "test accuracy",
        ],
        [
            [
                r["fit"],
                f"{r['wall_s']:.2f}",
                f"{r['wall_s_per_iter']:.3f}" if r["learner"] == "spread" else "",
                f"{r['cpu_s']:.2f}",
                f"{r['wall_ratio_vs_sklearn']:.1f}x"
                + (f" ({r['wall_ratio_min']:.1f}-{r['wall_ratio_max']:.1f})" if rounds > 1 else ""),
                f"{r['cpu_ratio_vs_sklearn']:.1f}x",
                r["n_iter"],
                r["converged"] if r["learner"] == "spread" else "n/a",
                f"{r['test_accuracy']:.3f}",
            ]
            for r in rows
        ],
    )
    spread_rows = [r for r in rows if r["learner"] == "spread"]
    notes = [f"{r['fit']}: {r['convergence']}" for r in spread_rows]
    if not args.no_serial:
        s = spread_rows[1]
        notes.append(
            "serial coefficients identical to the threaded fit's: "
            + (
                "yes"
                if s["coef_identical_to_threads"]
                else f"no (largest difference {s['coef_max_abs_diff_vs_threads']:.3g})"
            )
            + f"; threads speed-up (serial wall / threads wall): {s['wall_s'] / spread_rows[0]['wall_s']:.2f}x"
        )
    text = "\n".join(
        [
            f"command: {command}",
            f"written: {provenance()}",
            f"machine: {platform.machine()}, {os.cpu_count()} CPUs; load average (1/5/15 min) {load0} at the start, "
            f"{load1} at the end",
            f"data: N={n} records resampled from 800 MNIST 7/9 training images, D={D}, K={K}; RR flip {args.flip} on "
            f"pixels and labels; test accuracy on the 200 held-out clean images; sklearn on the clean {n}x{D} inputs "
            "scaled to [0, 1]",
            "CPU s = time.process_time() of the whole process: a threaded fit counts every thread; spread fits run "
            "BLAS on 1 thread, sklearn with the BLAS default",
            (
                f"{rounds} rounds, round-robin: each row is its median round (the faster middle one for an even count; "
                "wall s of every round in the .csv); "
                "wall / sklearn is the median of the per-round ratios (their range in brackets)"
                if rounds > 1
                else "one round"
            ),
            "",
            table,
            "",
            *notes,
            f"peak memory: tracemalloc peak of a short fit (max_iter=3) {peak:.0f} MiB; process ru_maxrss "
            f"{rss:.0f} MiB (at start {rss0 / MIB:.0f} MiB)",
        ]
    )
    atomic_write_text(out / "bench_spread_em.txt", text + "\n")
    t0 = spread_rows[0]
    title = (
        f"N={n}, D={D}, K={K}, flip {args.flip}: default spread fit / sklearn = "
        f"{t0['wall_ratio_vs_sklearn']:.0f}x wall, {t0['cpu_ratio_vs_sklearn']:.0f}x CPU\n"
        f"load average {load0} -> {load1}"
    )
    plot(rows, title, command, out / "bench_spread_em.png")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
