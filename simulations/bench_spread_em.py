"""Benchmark of the default spread-EM fit at MNIST scale: N = 9,000 records, D = 784 pixels with
K = 256 states (the 1,000 MNIST 7/9 images resampled with replacement), randomised response with
flip 0.3 on pixels and labels. Targets: a full default fit ≤ 60 s and ≤ 2 GiB.

Measured in one process:
  * seconds per EM iteration: the fit runs through an executor wrapper that stamps the start and
    end of every E-step (the library default, ThreadExecutor over all CPUs, inside); iteration i =
    E-step i + M-step i; "setup" is everything before the first E-step;
  * the full default fit (SpreadLogisticRegression(random_state=...)) and, unless --no-serial, the
    same fit through SerialExecutor: the threads' speed-up, and a check that both give
    bit-identical coefficients;
  * peak memory: tracemalloc peak of a separate short fit (max_iter=3: the per-iteration footprint
    does not grow) and ru_maxrss (process high-water mark);
  * scikit-learn LogisticRegression(C=1) on the clean inputs of the same size, and the ratio;
  * the load average before and after (the machine may be shared: times are upper bounds).
Writes bench_spread_em.txt, .csv and .png to --out.

    python simulations/bench_spread_em.py                          # ~2 min, writes results/barber/
    python simulations/bench_spread_em.py --quick --out /tmp/barber  # N = 1,000
"""

from __future__ import annotations

import argparse
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

from fedrr._io import atomic_write_text, command_line, provenance, rng_for, write_csv
from fedrr.datasets import load_mnist_7_vs_9
from fedrr.estimators import SpreadLogisticRegression
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import SerialExecutor, ThreadExecutor

GIB = 1024**3


class TimingExecutor:
    """Wraps an executor and stamps the start and end of every E-step (one map call per EM iteration)."""

    def __init__(self, inner):
        self.inner, self.starts, self.ends = inner, [], []

    def workers(self):
        """The wrapped executor's thread count (the fit gives its M-step as many threads)."""
        return self.inner.workers() if hasattr(self.inner, "workers") else 1

    def map(self, fn, tasks):
        self.starts.append(time.perf_counter())
        out = self.inner.map(fn, tasks)
        self.ends.append(time.perf_counter())
        return out


def timed_fit(executor, Xt, yt, rm, seed) -> dict:
    """One default fit through ``TimingExecutor(executor)``: estimator, seconds, setup, per-iteration times."""
    ex = TimingExecutor(executor)
    t = time.perf_counter()
    est = SpreadLogisticRegression(random_state=seed, executor=ex).fit(Xt, yt, mechanism=rm)
    total = time.perf_counter() - t
    starts, ends = np.asarray(ex.starts) - t, np.asarray(ex.ends) - t
    it_times = np.diff(np.append(starts, total))  # E-step i start → E-step i+1 start (last: → end of fit)
    return {"est": est, "seconds": total, "setup": float(starts[0]), "it_times": it_times, "estep": ends - starts}


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f} (1/5/15 min)".format(*os.getloadavg())


def maxrss() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def plot(fit: dict, t_sk: float, n: int, command: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    ax = axes[0]
    ax.plot(np.arange(1, len(fit["it_times"]) + 1), fit["it_times"], "o-", ms=3, label="EM iteration (E + M)")
    ax.plot(np.arange(1, len(fit["estep"]) + 1), fit["estep"], "s-", ms=3, label="E-step")
    ax.axhline(t_sk, color="k", ls=":", label=f"sklearn LR on clean data, whole fit ({t_sk:.2f} s)")
    ax.set(xlabel="EM iteration", ylabel="seconds", ylim=(0, None))
    ax.set_title(
        f"N={n}, D=784, K=256: full fit {fit['seconds']:.1f} s (setup {fit['setup']:.1f} s), "
        f"{fit['seconds'] / t_sk:.0f}x sklearn",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    ax, h = axes[1], fit["est"].history_
    ax.plot([e["iter"] for e in h], [e["coef_norm"] for e in h], "o-", ms=3, label="‖coef‖ (current θ)")
    ax.set(xlabel="EM iteration", ylabel="‖coef‖")
    ax2 = ax.twinx()
    ax2.semilogy([e["iter"] for e in h], [e["avg_change"] for e in h], "r.-", label="relative change of averaged coef")
    ax2.set_ylabel(f"averaged-coef change (stops below tol={fit['est'].tol:g})", color="r", fontsize=8)
    ax.set_title("convergence of the benchmark fit", fontsize=9)
    ax.legend(fontsize=8, loc="center right")
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
    ap.add_argument("--threads", type=int, default=None, help="ThreadExecutor workers (default: all CPUs)")
    ap.add_argument("--no-serial", action="store_true", help="skip the SerialExecutor comparison fit")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    out, n, command = Path(args.out), args.n or (1000 if args.quick else 9000), command_line(argv)
    load0 = load()
    rss0 = maxrss()
    ds = load_mnist_7_vs_9()
    rng = rng_for(args.seed, 77)
    idx = rng.integers(0, ds.X.shape[0], n)
    X, y = ds.X[idx], ds.y[idx]
    K, D = 256, X.shape[1]
    rm = RecordMechanism(RandomizedResponse(K, args.flip), RandomizedResponse(2, args.flip), n_features=D)
    Xt, yt = rm.release(X, y, rng=rng)
    rss_data = maxrss()
    SpreadLogisticRegression(max_iter=2, random_state=0).fit(Xt[:200], yt[:200], mechanism=rm)  # warm-up (numba)
    t = time.perf_counter()
    LogisticRegression(C=1.0, max_iter=2000).fit(X / (K - 1.0), y)
    t_sk = time.perf_counter() - t
    print(f"{load0}; N={n}, D={D}, K={K}, flip {args.flip}; sklearn on clean data {t_sk:.2f} s", flush=True)

    threads = ThreadExecutor(args.threads)
    fit = timed_fit(threads, Xt, yt, rm, args.seed)
    est = fit["est"]
    print(
        f"full default fit ({threads.workers()} threads): {fit['seconds']:.1f} s, {est.n_iter_} iterations", flush=True
    )
    ser = None if args.no_serial else timed_fit(SerialExecutor(), Xt, yt, rm, args.seed)
    same = ser is not None and bool(
        np.array_equal(ser["est"].coef_, est.coef_) and np.array_equal(ser["est"].intercept_, est.intercept_)
    )
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    SpreadLogisticRegression(max_iter=3, random_state=args.seed).fit(Xt, yt, mechanism=rm)
    peak_fit = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    rss_end, load1 = maxrss(), load()

    it, es = fit["it_times"], fit["estep"]
    row = {
        "N": n,
        "D": D,
        "K": K,
        "flip": args.flip,
        "repeat": 0,
        "executor": repr(threads),
        "threads": threads.workers(),
        "n_iter": est.n_iter_,
        "burn_in": getattr(est, "burn_in_", ""),
        "fit_seconds": fit["seconds"],
        "setup_seconds": fit["setup"],
        "sec_per_iter_mean": float(it.mean()),
        "sec_per_iter_median": float(np.median(it)),
        "estep_sec_per_iter": float(es.mean()),
        "mstep_sec_per_iter": float((it - es).mean()),
        "sklearn_clean_seconds": t_sk,
        "ratio_spread_over_sklearn": fit["seconds"] / t_sk,
        "accuracy_on_all_1000_clean": est.score(ds.X, ds.y),
        "machine": platform.node(),
        "tracemalloc_peak_fit_MiB": peak_fit / 2**20,
        "maxrss_end_MiB": rss_end / 2**20,
        "serial_fit_seconds": ser["seconds"] if ser else "",
        "serial_sec_per_iter": float(ser["it_times"].mean()) if ser else "",
        "serial_identical": same if ser else "",
        "loadavg_start": load0,
        "loadavg_end": load1,
    }
    write_csv(out / "bench_spread_em.csv", [row], command)
    ok_time, ok_mem = fit["seconds"] <= 60.0, max(peak_fit, rss_end) <= 2 * GIB
    serial_line = (
        (
            f"same fit through SerialExecutor (1 thread): {ser['seconds']:.1f} s [{ser['est'].n_iter_} "
            f"iterations], {ser['it_times'].mean():.3f} s/iteration (E-step {ser['estep'].mean():.3f} + M-step "
            f"{(ser['it_times'] - ser['estep']).mean():.3f}); threads speed-up {ser['seconds'] / fit['seconds']:.2f}x; "
            f"coefficients bit-identical: {same}"
        )
        if ser
        else "SerialExecutor comparison skipped (--no-serial)"
    )
    text = "\n".join(
        [
            f"spread-EM benchmark: {command}",
            f"written: {provenance()}",
            f"machine: {platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
            f"{load0} at start, {load1} at the end",
            f"executor: {threads!r} = {threads.workers()} threads over the fixed shards (the library default)",
            f"data: MNIST 7/9 resampled with replacement to N={n}, D={D}, K={K}; RR flip {args.flip} on pixels and "
            "labels",
            "",
            f"full default fit (SpreadLogisticRegression(): mcmc E-step, S=2, library-default EM schedule, "
            f"{threads.workers()} threads): {fit['seconds']:.1f} s  [{est.n_iter_} iterations; averaging started "
            f"after iteration {row['burn_in']}]",
            f"  setup before the first E-step:      {fit['setup']:.2f} s",
            f"  seconds per EM iteration:           {it.mean():.3f} (median {np.median(it):.3f}; "
            f"E-step {es.mean():.3f} + M-step {(it - es).mean():.3f})",
            serial_line,
            f"sklearn LogisticRegression(C=1) on the clean {n}x{D} inputs: {t_sk:.2f} s",
            f"ratio full spread fit / sklearn clean fit: {fit['seconds'] / t_sk:.1f}x",
            f"peak memory: tracemalloc peak of a fit {peak_fit / 2**20:.0f} MiB; process ru_maxrss "
            f"{rss_end / 2**20:.0f} MiB (after loading data {rss_data / 2**20:.0f} MiB, at start "
            f"{rss0 / 2**20:.0f} MiB)",
            f"accuracy of the fitted model on all 1,000 clean images: {row['accuracy_on_all_1000_clean']:.3f}",
            "",
            f"target full fit <= 60 s: {'MET' if ok_time else 'NOT met'} ({fit['seconds']:.1f} s)",
            f"target memory <= 2 GiB: {'MET' if ok_mem else 'NOT met'} ({max(peak_fit, rss_end) / GIB:.2f} GiB, "
            "the larger of the two measures)",
        ]
    )
    atomic_write_text(out / "bench_spread_em.txt", text + "\n")
    plot(fit, t_sk, n, command, out / "bench_spread_em.png")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
