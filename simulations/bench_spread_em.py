"""Benchmark of the default spread-EM fit at MNIST scale: N = 9,000 records, D = 784 pixels with
K = 256 states (the 1,000 MNIST 7/9 images resampled with replacement), randomised response with
flip 0.3 on pixels and labels.

Measured in one process:
  * seconds per EM iteration: the fit runs through a timing executor that wraps the executor
    under test (by default the library default, ThreadExecutor over all CPUs), so the start of
    every E-step is stamped; iteration i = E-step i + M-step i; "setup" is everything before the
    first E-step (validation, deconvolved prior, naive initial fit);
  * the full default fit (SpreadLogisticRegression(random_state=...), library-default EM schedule),
    and, unless --no-serial, the same fit through SerialExecutor: the same-run speed-up of the
    threads, and a check that both give bit-identical coefficients;
  * peak memory: tracemalloc peak of a separate short fit (max_iter=3: setup + iterations, the
    per-iteration footprint does not grow) and ru_maxrss (process high-water mark) before/after;
  * scikit-learn LogisticRegression(C=1) on the clean inputs of the same size, and the ratio;
  * the load average (os.getloadavg) before and after: the machine is shared with other jobs.
Targets (issue): full default fit ≤ 60 s and ≤ 2 GiB.

    .venv/bin/python simulations/bench_spread_em.py                   # ~2 min
    .venv/bin/python simulations/bench_spread_em.py --quick --out /tmp/barber
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _common import (
    DEFAULT_OUT,
    command_line,
    fingerprint,
    markdown_table,
    out_dir,
    progress,
    pyplot,
    quiet_warnings,
    rng_for,
    update_summary,
    write_csv,
)  # noqa: E402

GIB = 1024**3


class TimingExecutor:
    """Wraps an executor and stamps the start and end of every E-step (one map call per EM iteration)."""

    def __init__(self, inner):
        self.inner = inner
        self.starts, self.ends = [], []

    def workers(self):
        """The wrapped executor's thread count (the fit gives its M-step as many threads)."""
        return self.inner.workers() if hasattr(self.inner, "workers") else 1

    def map(self, fn, tasks):
        self.starts.append(time.perf_counter())
        out = self.inner.map(fn, tasks)
        self.ends.append(time.perf_counter())
        return out


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f} (1/5/15 min)".format(*os.getloadavg())


def maxrss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT}; with --quick {DEFAULT_OUT}/quick)"
    )
    ap.add_argument("--repeats", type=int, default=1, help="full default fits to time (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="N = 1,000 instead of 9,000")
    ap.add_argument("--n", type=int, default=None, help="records (default 9000)")
    ap.add_argument("--flip", type=float, default=0.3)
    ap.add_argument(
        "--threads", type=int, default=None, help="ThreadExecutor workers (default: all CPUs, as the library default)"
    )
    ap.add_argument("--no-serial", action="store_true", help="skip the SerialExecutor comparison fit")
    args = ap.parse_args(argv)
    quiet_warnings()
    from sklearn.linear_model import LogisticRegression

    from fedrr.datasets import load_mnist_7_vs_9
    from fedrr.estimators import SpreadLogisticRegression
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism
    from fedrr.parallel import SerialExecutor, ThreadExecutor

    out = out_dir(args.out, args.quick)
    n = args.n or (1000 if args.quick else 9000)
    cmd = command_line()
    load0 = load()
    progress(load0)
    rss0 = maxrss_bytes()
    ds = load_mnist_7_vs_9()
    rng = rng_for(args.seed, 77)
    idx = rng.integers(0, ds.X.shape[0], n)
    X, y = ds.X[idx], ds.y[idx]
    K, D = 256, X.shape[1]
    rm = RecordMechanism(RandomizedResponse(K, args.flip), RandomizedResponse(2, args.flip), n_features=D)
    Xt, yt = rm.release(X, y, rng=rng)
    rss_data = maxrss_bytes()
    progress(f"N={n}, D={D}, K={K}, flip {args.flip}; data ready (ru_maxrss {rss_data / 2**20:.0f} MiB)")

    # warm-up: numba kernels are cached on disk but still loaded on first use
    t = time.perf_counter()
    SpreadLogisticRegression(max_iter=2, random_state=0).fit(Xt[:200], yt[:200], mechanism=rm)
    warm = time.perf_counter() - t
    progress(f"warm-up fit (200 rows, 2 iterations): {warm:.2f} s")

    # scikit-learn on clean data of the same size
    Xc = X / (K - 1.0)
    t = time.perf_counter()
    LogisticRegression(C=1.0, max_iter=2000).fit(Xc, y)
    t_sk = time.perf_counter() - t
    progress(f"sklearn LogisticRegression(C=1) on clean {n}x{D}: {t_sk:.2f} s")

    threads = ThreadExecutor(args.threads)
    n_threads = threads.workers()
    rows, fits = [], []
    for r in range(args.repeats):
        ex = TimingExecutor(threads)
        rss_before = maxrss_bytes()
        t = time.perf_counter()
        est = SpreadLogisticRegression(random_state=args.seed + r, executor=ex).fit(Xt, yt, mechanism=rm)
        t_full = time.perf_counter() - t
        rss_after = maxrss_bytes()
        starts, ends = np.asarray(ex.starts) - t, np.asarray(ex.ends) - t
        setup = float(starts[0])
        it_times = np.diff(np.append(starts, t_full))  # E-step i start → E-step i+1 start (last: → end of fit)
        estep = ends - starts
        fits.append({"est": est, "it_times": it_times, "estep": estep})
        acc = est.score(ds.X, ds.y)
        row = {
            "N": n,
            "D": D,
            "K": K,
            "flip": args.flip,
            "repeat": r,
            "executor": repr(threads),
            "threads": n_threads,
            "n_iter": est.n_iter_,
            "burn_in": getattr(est, "burn_in_", ""),
            "fit_seconds": t_full,
            "setup_seconds": setup,
            "sec_per_iter_mean": float(it_times.mean()),
            "sec_per_iter_median": float(np.median(it_times)),
            "estep_sec_per_iter": float(estep.mean()),
            "mstep_sec_per_iter": float((it_times - estep).mean()),
            "sklearn_clean_seconds": t_sk,
            "ratio_spread_over_sklearn": t_full / t_sk,
            "maxrss_before_MiB": rss_before / 2**20,
            "maxrss_after_MiB": rss_after / 2**20,
            "accuracy_on_all_1000_clean": acc,
            "machine": platform.node(),
        }
        rows.append(row)
        progress(
            f"full default fit {r + 1}/{args.repeats} ({n_threads} threads): {t_full:.1f} s, {est.n_iter_} iterations, setup {setup:.2f} s, "
            f"{it_times.mean():.3f} s/iteration (E {estep.mean():.3f} + M {(it_times - estep).mean():.3f}); "
            f"ru_maxrss {rss_after / 2**20:.0f} MiB"
        )

    # the same first fit through SerialExecutor: same-run speed-up, and bit-identical coefficients
    ser = None
    if not args.no_serial:
        ex = TimingExecutor(SerialExecutor())
        t = time.perf_counter()
        est_s = SpreadLogisticRegression(random_state=args.seed, executor=ex).fit(Xt, yt, mechanism=rm)
        t_ser = time.perf_counter() - t
        it_s = np.diff(np.append(np.asarray(ex.starts) - t, t_ser))
        e_s = np.asarray(ex.ends) - np.asarray(ex.starts)
        same = bool(
            np.array_equal(est_s.coef_, fits[0]["est"].coef_)
            and np.array_equal(est_s.intercept_, fits[0]["est"].intercept_)
        )
        ser = {
            "seconds": t_ser,
            "n_iter": est_s.n_iter_,
            "sec_per_iter": float(it_s.mean()),
            "estep": float(e_s.mean()),
            "mstep": float((it_s - e_s).mean()),
            "identical": same,
        }
        progress(
            f"same fit through SerialExecutor: {t_ser:.1f} s, {est_s.n_iter_} iterations, {it_s.mean():.3f} s/iteration "
            f"(E {e_s.mean():.3f} + M {(it_s - e_s).mean():.3f}); coefficients bit-identical to the threaded fit: {same}"
        )

    # peak memory of a fit: tracemalloc on a short fit (numpy reports its buffers to tracemalloc)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    t = time.perf_counter()
    SpreadLogisticRegression(max_iter=3, random_state=args.seed).fit(Xt, yt, mechanism=rm)
    t_tm = time.perf_counter() - t
    cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_fit = peak - base
    rss_end = maxrss_bytes()
    progress(f"tracemalloc peak during a 3-iteration fit: {peak_fit / 2**20:.0f} MiB ({t_tm:.1f} s under tracing)")

    t_full = np.array([r["fit_seconds"] for r in rows])
    spi = np.array([r["sec_per_iter_mean"] for r in rows])
    load1 = load()
    progress(load1)
    for r in rows:
        r.update(
            {
                "tracemalloc_peak_fit_MiB": peak_fit / 2**20,
                "maxrss_end_MiB": rss_end / 2**20,
                "serial_fit_seconds": ser["seconds"] if ser else "",
                "serial_sec_per_iter": ser["sec_per_iter"] if ser else "",
                "serial_identical": ser["identical"] if ser else "",
                "loadavg_start": load0,
                "loadavg_end": load1,
            }
        )
    write_csv(out / "bench_spread_em.csv", rows, cmd)

    ok_time = t_full.max() <= 60.0
    ok_mem = max(peak_fit, rss_end) <= 2 * GIB
    lines = [
        f"spread-EM benchmark: {cmd}",
        f"library: {fingerprint()}",
        f"machine: {platform.node()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}; "
        f"shared with other jobs, this process at nice {os.nice(0)}; {load0} at start, {load1} at the end",
        f"executor: {threads!r} = {n_threads} threads over the fixed shards (the library default); BLAS limited to 1 thread",
        f"data: MNIST 7/9 resampled with replacement to N={n}, D={D}, K={K}; RR flip {args.flip} on pixels and labels",
        "",
        f"full default fit (SpreadLogisticRegression(): mcmc E-step, S=2, library-default EM schedule, {n_threads} threads): "
        + ", ".join(f"{v:.1f} s" for v in t_full)
        + f"  [{rows[0]['n_iter']} iterations; averaging started after iteration {rows[0]['burn_in']}]",
        f"  setup before the first E-step:      {np.mean([r['setup_seconds'] for r in rows]):.2f} s",
        f"  seconds per EM iteration:           {spi.mean():.3f} (median {np.mean([r['sec_per_iter_median'] for r in rows]):.3f}; "
        f"E-step {np.mean([r['estep_sec_per_iter'] for r in rows]):.3f} + M-step {np.mean([r['mstep_sec_per_iter'] for r in rows]):.3f})",
        *(
            [
                f"same fit through SerialExecutor (1 thread): {ser['seconds']:.1f} s [{ser['n_iter']} iterations], "
                f"{ser['sec_per_iter']:.3f} s/iteration (E-step {ser['estep']:.3f} + M-step {ser['mstep']:.3f}); "
                f"threads speed-up {ser['seconds'] / t_full[0]:.2f}x; coefficients bit-identical: {ser['identical']}"
            ]
            if ser
            else []
        ),
        f"sklearn LogisticRegression(C=1) on the clean {n}x{D} inputs: {t_sk:.2f} s",
        f"ratio full spread fit / sklearn clean fit: {t_full.mean() / t_sk:.1f}x",
        f"peak memory: tracemalloc peak of a fit {peak_fit / 2**20:.0f} MiB; process ru_maxrss {rss_end / 2**20:.0f} MiB "
        f"(after loading data {rss_data / 2**20:.0f} MiB, at start {rss0 / 2**20:.0f} MiB)",
        f"accuracy of the fitted model on all 1,000 clean images: {rows[0]['accuracy_on_all_1000_clean']:.3f}",
        "",
        f"target full fit <= 60 s: {'MET' if ok_time else 'NOT met'} ({t_full.max():.1f} s)",
        f"target memory <= 2 GiB: {'MET' if ok_mem else 'NOT met'} ({max(peak_fit, rss_end) / GIB:.2f} GiB, the larger of the two measures)",
    ]
    text = "\n".join(lines)
    print("\n" + text)
    name = "bench_spread_em.txt"
    (out / name).write_text(text + "\n")

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    f0 = fits[0]
    ax = axes[0]
    ax.plot(np.arange(1, len(f0["it_times"]) + 1), f0["it_times"], "o-", ms=3, label="EM iteration (E + M)")
    ax.plot(np.arange(1, len(f0["estep"]) + 1), f0["estep"], "s-", ms=3, label="E-step")
    ax.axhline(t_sk, color="k", ls=":", label=f"sklearn LR on clean data, whole fit ({t_sk:.2f} s)")
    ax.set_xlabel("EM iteration")
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.set_title(
        f"N={n}, D={D}, K={K}: full fit {t_full[0]:.1f} s (setup {rows[0]['setup_seconds']:.1f} s), "
        f"{t_full[0] / t_sk:.0f}x sklearn",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    ax = axes[1]
    h = f0["est"].history_
    ax.plot([e["iter"] for e in h], [e["coef_norm"] for e in h], "o-", ms=3, label="‖coef‖ (current θ)")
    ax.set_xlabel("EM iteration")
    ax.set_ylabel("‖coef‖")
    ax2 = ax.twinx()
    ax2.semilogy([e["iter"] for e in h], [e["avg_change"] for e in h], "r.-", label="relative change of averaged coef")
    ax2.set_ylabel(f"averaged-coef change (stops below tol={f0['est'].tol:g})", color="r", fontsize=8)
    ax.set_title("convergence of the benchmark fit", fontsize=9)
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    fig.savefig(out / "bench_spread_em.png", dpi=120)
    plt.close(fig)

    md = [
        f"## Benchmark — default spread-EM fit at N = {n:,}, D = {D}, K = {K}"
        + (" (QUICK configuration)" if args.quick else ""),
        "",
        f"Command: `{cmd}`; library: {fingerprint()}. Files: `bench_spread_em.txt`, `bench_spread_em.csv`, `bench_spread_em.png`.",
        "",
        markdown_table(
            ["measure", "value"],
            [
                [
                    "full default fit",
                    ", ".join(f"{v:.1f} s" for v in t_full)
                    + f" ({rows[0]['n_iter']} iterations, burn-in {rows[0]['burn_in']})",
                ],
                [
                    "setup (prior deconvolution, naive initial fit)",
                    f"{np.mean([r['setup_seconds'] for r in rows]):.2f} s",
                ],
                [
                    "seconds per EM iteration (E + M)",
                    f"{spi.mean():.3f} (E {np.mean([r['estep_sec_per_iter'] for r in rows]):.3f}, "
                    f"M {np.mean([r['mstep_sec_per_iter'] for r in rows]):.3f})",
                ],
                *(
                    [
                        [
                            "same fit, SerialExecutor (1 thread)",
                            f"{ser['seconds']:.1f} s ({ser['sec_per_iter']:.3f} s/iteration); "
                            f"speed-up {ser['seconds'] / t_full[0]:.2f}×; bit-identical: {'yes' if ser['identical'] else 'NO'}",
                        ]
                    ]
                    if ser
                    else []
                ),
                ["sklearn LogisticRegression(C=1), clean, same size", f"{t_sk:.2f} s"],
                ["ratio spread / sklearn", f"{t_full.mean() / t_sk:.1f}×"],
                ["tracemalloc peak of a fit", f"{peak_fit / 2**20:.0f} MiB"],
                ["process ru_maxrss (whole run)", f"{rss_end / 2**20:.0f} MiB"],
                ["target ≤ 60 s", "met" if ok_time else "NOT met"],
                ["target ≤ 2 GiB", "met" if ok_mem else "NOT met"],
            ],
        ),
        "",
        f"Default executor: {n_threads} threads over the fixed shards ({os.cpu_count()}-CPU machine shared with other jobs; "
        f"{load0} at start, {load1} at the end), so the times are upper bounds for an idle machine.",
    ]
    update_summary(out, "bench", "\n".join(md))
    progress(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
