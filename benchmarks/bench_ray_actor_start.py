"""Ray actors of spread-EM's runtime: their start timed apart from the fit (issue 47 item 2).

MNIST 7/9 resampled to N = 9,000, D = 784, K = 256 (RR flip 0.3 on pixels and labels), the fit of
``benchmarks/bench_parallel_estep.py`` (20 EM iterations, the estimator's default chains, shards of
2,048 records). In one run, each figure the median of ``--rounds`` repetitions:

  (a) Ray's own start: ``ray.init`` of a local 2-CPU instance (shut down and started again);
  (b) the actors' start, Ray running: empty actors until they answer a no-op (``ping``: worker
      process and the actor module's imports), then actors given the fit's shards until they answer
      (what a fit waits for: process, imports, the shards shipped and built); the bytes shipped
      (the actors' blocks of shard factories, pickled) and the heavy modules loaded in an actor;
  (c) the 20-iteration fit: serial; on Ray with actors that start inside the fit (a process's first
      Ray fit, Ray already running); on Ray with running actors (kept from the previous fit).
      Coefficients must equal the serial fit's.

    python benchmarks/bench_ray_actor_start.py                      # ~3 min, writes results/ray_actor_start/
    python benchmarks/bench_ray_actor_start.py --n 3000 --rounds 1 --out /tmp/bench
    python benchmarks/bench_ray_actor_start.py --fit-rounds 0 --out /tmp/bench  # (a) and (b) only, ~1 min
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from fedrr.datasets import load_mnist_7_vs_9
from fedrr.estimators import SpreadLogisticRegression
from fedrr.estimators.spread import shard_group
from fedrr.io import atomic_write_text, command_line, markdown_table, provenance
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import RayExecutor, SerialExecutor

HEAVY = ("sklearn", "cvxpy", "pandas", "matplotlib", "scipy.optimize", "scipy.stats")


class _Grab:
    """An executor that keeps the fit's shard factories and stops it (spread's ``holds_shards``)."""

    def shard_group(self, factories, chains=1):
        self.factories, self.chains = list(factories), chains
        raise _Stop


class _Stop(Exception):
    pass


def _heavy(block):
    """Run on an actor (``ShardActor.run``): the heavy modules its process has loaded."""
    import sys

    heavy = ("sklearn", "cvxpy", "pandas", "matplotlib", "scipy.optimize", "scipy.stats")
    return sorted(m for m in heavy if m in sys.modules)


def _median(xs):
    return statistics.median(xs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=9000)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3, help="repetitions of (a) and (b)")
    ap.add_argument("--fit-rounds", type=int, default=3, help="repetitions of (c); 0: no fits")
    ap.add_argument("--out", default="results/ray_actor_start")
    args = ap.parse_args(argv)
    import ray

    import fedrr

    load0 = os.getloadavg()
    ds = load_mnist_7_vs_9()
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(ds.y), args.n)
    rm = RecordMechanism(RandomizedResponse(256, 0.3), RandomizedResponse(2, 0.3), n_features=784)
    Xt, yt = rm.release(ds.X[idx], ds.y[idx], rng=rng)
    kw = dict(random_state=1, max_iter=args.iters, burn_in=args.iters - 5, n_average=5, tol=1e-12, shard_size=2048)
    grab = _Grab()
    try:
        SpreadLogisticRegression(executor=grab, **kw).fit(Xt, yt, mechanism=rm)
    except _Stop:
        pass
    # compile the E-step here (numba caches it on disk for the actors too): outside every timing
    SpreadLogisticRegression(executor=SerialExecutor(), **{**kw, "max_iter": 2, "burn_in": 1, "n_average": 1}).fit(
        Xt[:3000], yt[:3000], mechanism=rm
    )

    init_s = []  # (a)
    for _ in range(args.rounds):
        if ray.is_initialized():
            ray.shutdown()
        t = time.perf_counter()
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        init_s.append(time.perf_counter() - t)

    empty_s, full_s, shipped, heavy = [], [], [], None  # (b)
    for _ in range(args.rounds):
        t = time.perf_counter()
        g = shard_group(RayExecutor(num_cpus=2, reuse_actors=False), [lambda: None] * 2, chains=1)
        empty_s.append(time.perf_counter() - t)
        g.close()
        t = time.perf_counter()
        g = shard_group(RayExecutor(num_cpus=2, reuse_actors=False), grab.factories, chains=grab.chains)
        full_s.append(time.perf_counter() - t)
        shipped.append(sum(len(ray.cloudpickle.dumps(b)) for b in g.blocks))
        heavy = ray.get(g.actors[0].run.remote(_heavy, ()))
        where = ray.get(g.actors[0].run.remote(lambda block: __import__("fedrr").__file__, ()))
        g.close()

    fits = {"serial": [], "ray, actors starting in the fit": [], "ray, running actors": []}  # (c)
    coefs = {}
    for _ in range(args.fit_rounds):
        warm = RayExecutor(num_cpus=2)
        for name in fits:
            if name == "serial":
                ex = SerialExecutor()
            elif name.startswith("ray, actors starting"):
                ex = RayExecutor(num_cpus=2)  # no actors yet: they start inside the fit
            else:
                ex = warm
                SpreadLogisticRegression(executor=warm, **{**kw, "max_iter": 2, "burn_in": 1, "n_average": 1}).fit(
                    Xt[:3000], yt[:3000], mechanism=rm
                )  # its actors started, outside the timing
            t = time.perf_counter()
            est = SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=rm)
            fits[name].append(time.perf_counter() - t)
            coefs[name] = (est.coef_, est.intercept_)
            if name.startswith("ray, actors starting"):
                ex.shutdown_actors()
            print(f"{name}: {fits[name][-1]:.2f} s", flush=True)
        warm.shutdown_actors()
    ray.shutdown()

    fits = {k: v for k, v in fits.items() if v}
    serial = _median(fits["serial"]) if fits else float("nan")

    def cell(xs):
        return f"{_median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"

    rows = [
        ["(a) Ray's own start (ray.init, 2 CPUs)", cell(init_s), ""],
        ["(b) empty actors until they answer a no-op", cell(empty_s), ""],
        ["(b) actors with the fit's shards until they answer", cell(full_s), ""],
    ] + [
        [f"(c) {args.iters}-iteration fit, {name}", cell(xs), f"{serial / _median(xs):.2f}x"]
        for name, xs in fits.items()
    ]
    same = all(all(map(np.array_equal, c, coefs["serial"])) for c in coefs.values())
    lines = [
        f"command: {command_line(argv)}",
        f"written: {provenance()}",
        f"fedrr: {Path(fedrr.__file__).parent.parent.name}/fedrr; actors import {Path(where).parent.parent.name}/fedrr",
        f"machine: {os.cpu_count()} CPUs, load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end",
        f"data: MNIST 7/9 resampled to N={args.n}, D=784, K=256, RR flip 0.3; {args.iters} EM iterations, "
        f"{grab.chains} chains, {len(grab.factories)} shards; {args.rounds} rounds of (a) and (b), "
        f"{args.fit_rounds} of (c), median (range) in seconds",
        f"shipped to the actors at start (their blocks of shard factories, pickled): {shipped[-1] / 1e6:.1f} MB",
        f"heavy modules loaded in an actor after its start: {', '.join(heavy) or 'none'}",
        f"coefficients of every fit equal the serial fit's: {same}" if fits else "no fits (--fit-rounds 0)",
        "",
        markdown_table(["what", "wall s", "speed-up vs serial"], rows),
    ]
    text = "\n".join(lines)
    atomic_write_text(Path(args.out) / "bench_ray_actor_start.md", text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
