"""Spread-EM on 2 cores: serial vs threads vs Ray, timed in one run on the same fit.

MNIST 7/9 resampled to N = 9,000, D = 784, K = 256 (RR flip 0.3 on pixels and labels), a fixed
schedule of ``--iters`` EM iterations with each executor (``executor=`` of
SpreadLogisticRegression); each whole fit is timed (wall seconds, and CPU seconds of this
process: Ray's work runs in other processes and is not counted), and the fitted coefficients must
be bit-identical (the shards carry their own seeds, so the executor cannot change the result).
Every executor is warmed (compilation, Ray's start) outside the timing; Ray's fit includes
creating its shard actors. Writes ``parallel_estep.md`` to --out.

    python benchmarks/bench_parallel_estep.py                     # ~1 min, writes results/federation_scale/
    python benchmarks/bench_parallel_estep.py --n 3000 --iters 5 --out /tmp/bench
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from fedrr.datasets import load_mnist_7_vs_9
from fedrr.estimators import SpreadLogisticRegression
from fedrr.io import atomic_write_text, command_line, markdown_table, provenance
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import RayExecutor, SerialExecutor, ThreadExecutor


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=9000)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--shard-size", type=int, default=2048, help="records per E-step shard (library default 2048)")
    ap.add_argument("--out", default="results/federation_scale")
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    ds = load_mnist_7_vs_9()
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(ds.y), args.n)
    rm = RecordMechanism(RandomizedResponse(256, 0.3), RandomizedResponse(2, 0.3), n_features=784)
    Xt, yt = rm.release(ds.X[idx], ds.y[idx], rng=rng)
    kw = dict(
        random_state=1, max_iter=args.iters, burn_in=args.iters - 5, n_average=5, tol=1e-12, shard_size=args.shard_size
    )
    ray_ex = RayExecutor(num_cpus=2)
    executors = {"serial": SerialExecutor(), "threads (2)": ThreadExecutor(2), "ray (local, 2 CPUs)": ray_ex}
    results = {}
    for name, ex in executors.items():
        warm = {**kw, "max_iter": 2, "burn_in": 1, "n_average": 1}  # compile, start Ray: outside the timing
        SpreadLogisticRegression(executor=ex, **warm).fit(Xt[:3000], yt[:3000], mechanism=rm)
        w, c = time.perf_counter(), time.process_time()
        est = SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=rm)
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        results[name] = {"wall": wall, "cpu": cpu, "n_iter": est.n_iter_, "coef": (est.coef_, est.intercept_)}
        print(f"{name}: fit {wall:.2f} s wall, {cpu:.2f} s CPU, {est.n_iter_} iterations", flush=True)
    ray_ex.shutdown()
    base = results["serial"]["wall"]
    body = [
        [
            name,
            f"{r['wall']:.2f}",
            f"{r['cpu']:.2f}",
            r["n_iter"],
            f"{r['wall'] / r['n_iter']:.3f}",
            f"{base / r['wall']:.2f}x",
            all(map(np.array_equal, r["coef"], results["serial"]["coef"])),
        ]
        for name, r in results.items()
    ]
    lines = [
        f"command: {command_line(argv)}",
        f"written: {provenance()}",
        f"machine: {os.cpu_count()} CPUs, load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end",
        f"data: MNIST 7/9 resampled to N={args.n}, D=784, K=256, RR flip 0.3; {args.iters} EM iterations per fit; "
        f"shard size {args.shard_size} "
        f"({-(-args.n // args.shard_size)} shards, the same for every executor)",
        "",
        markdown_table(
            [
                "executor",
                "whole fit wall s",
                "CPU s (this process)",
                "iterations",
                "wall s / iteration",
                "speed-up vs serial (wall)",
                "coefficients equal serial",
            ],
            body,
        ),
    ]
    text = "\n".join(lines)
    atomic_write_text(Path(args.out) / "parallel_estep.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
