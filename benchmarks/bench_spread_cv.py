"""Benchmark of the whole ``SpreadLogisticRegressionCV`` fit at MNIST size on each executor: what a
user waits for (the selection's 12 fits and their held-out scores, the tested fit with its
permutation test, the refit), serial against threads against Ray, in one run.

Data: N records resampled with replacement from the 1,000 MNIST 7/9 images (D = 784 pixels of
K = 256 states), randomised response with flip 0.3 on pixels and labels, one seed. Every executor
fits the same releases with ``random_state=1`` and must give the same model (``identical``: the
same C, p-value and coefficients as the serial fit, bit for bit). Each fit runs in a fresh process;
Ray's start (``ray.init`` of a local instance of 2 CPUs, 2 actors) is timed apart from the fit and
shown beside it, since a session or a cluster pays it once, not per fit. ``--rounds R``: every
executor R times, round-robin (the ratios are the median of the per-round ratios, with their range).

    python benchmarks/bench_spread_cv.py --rounds 2 --out results/speed_issue31/cv   # ~6 min
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

EXECUTORS = ("serial", "threads", "ray")


def releases(n: int, seed: int = 0):
    from fedrr.datasets import load_mnist_7_vs_9
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    rng = np.random.default_rng(seed)
    ds = load_mnist_7_vs_9()
    idx = rng.integers(0, len(ds.y), n)
    rm = RecordMechanism(RandomizedResponse(256, 0.3), RandomizedResponse(2, 0.3), n_features=ds.X.shape[1])
    Xt, yt = rm.release(ds.X[idx], ds.y[idx], rng=rng)
    return Xt, yt, rm


def one(kind: str, n: int) -> dict:
    """One whole CV fit on ``kind``'s executor (in this fresh process)."""
    from fedrr.estimators import SpreadLogisticRegressionCV
    from fedrr.parallel import RayExecutor, SerialExecutor, ThreadExecutor

    Xt, yt, rm = releases(n)
    ex = {"serial": SerialExecutor, "threads": lambda: ThreadExecutor(2)}.get(
        kind, lambda: RayExecutor(num_cpus=2, n_actors=2)
    )()
    ray_s = float("nan")
    if kind == "ray":
        t = time.perf_counter()
        ex.map(len, [[0]])  # starts Ray (and one worker): what a session pays once
        ray_s = time.perf_counter() - t
    t = time.perf_counter()
    est = SpreadLogisticRegressionCV(executor=ex, random_state=1).fit(Xt, yt, mechanism=rm)
    fit_s = time.perf_counter() - t
    if hasattr(ex, "shutdown"):
        ex.shutdown()
    return {
        "fit_s": fit_s,
        "ray_start_s": ray_s,
        "C": est.C_,
        "p_value": est.p_value_,
        "fallback": bool(est.fallback_),
        "coef": hashlib.sha256(np.ascontiguousarray(est.coef_).tobytes()).hexdigest()[:16],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=9000, help="records (default 9000)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every executor, round-robin")
    ap.add_argument("--out", default="results/speed_issue31/cv")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(one(args.one, args.n)), flush=True)
        return 0
    from fedrr.io import atomic_write_text, command_line, markdown_table, provenance, write_csv

    command = command_line(argv)
    load0 = os.getloadavg()
    rows = []
    for r in range(args.rounds):
        for kind in EXECUTORS:
            proc = subprocess.run(
                [sys.executable, __file__, "--one", kind, "--n", str(args.n)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise RuntimeError(f"{kind} failed:\n{proc.stderr[-3000:]}")
            res = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
            rows.append({"round": r, "executor": kind, **res})
            print(f"round {r} {kind:8s} fit {res['fit_s']:6.1f} s  (Ray start {res['ray_start_s']:.1f} s)", flush=True)
    serial = {row["round"]: row for row in rows if row["executor"] == "serial"}
    for row in rows:
        base = serial[row["round"]]
        row["speedup"] = base["fit_s"] / row["fit_s"]
        start = 0.0 if np.isnan(row["ray_start_s"]) else row["ray_start_s"]
        row["speedup_with_start"] = base["fit_s"] / (row["fit_s"] + start)
        row["identical"] = all(row[k] == base[k] for k in ("C", "p_value", "fallback", "coef"))
    load1 = os.getloadavg()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "bench_spread_cv.csv", rows, command)
    body = []
    for kind in EXECUTORS:
        mine = [row for row in rows if row["executor"] == kind]
        fit = [row["fit_s"] for row in mine]
        sp = [row["speedup"] for row in mine]
        spw = [row["speedup_with_start"] for row in mine]
        start = [row["ray_start_s"] for row in mine]
        body.append(
            [
                kind,
                " / ".join(f"{v:.1f}" for v in fit),
                "–" if kind != "ray" else " / ".join(f"{v:.1f}" for v in start),
                f"{np.median(sp):.2f} ({min(sp):.2f}–{max(sp):.2f})",
                "–" if kind != "ray" else f"{np.median(spw):.2f} ({min(spw):.2f}–{max(spw):.2f})",
                all(row["identical"] for row in mine),
            ]
        )
    text = "\n".join(
        [
            "# Whole SpreadLogisticRegressionCV fit at MNIST size, per executor",
            "",
            f"command: `{command}`",
            "",
            provenance(),
            "",
            f"N {args.n:,}, D 784, K 256 (MNIST 7/9 resampled), RR flip 0.3, random_state 1, {args.rounds} round(s); "
            f"load average (1/5/15 min) {'/'.join(f'{v:.1f}' for v in load0)} before, "
            f"{'/'.join(f'{v:.1f}' for v in load1)} after.",
            "",
            markdown_table(
                ["executor", "CV fit s (rounds)", "Ray start s", "× serial", "× serial, with Ray start", "identical"],
                body,
            ),
            "",
        ]
    )
    atomic_write_text(out / "bench_spread_cv.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
