"""Spread-EM on Ray: seconds per EM iteration, bytes per iteration, speed-up over the serial and
threaded paths, peak memory of the driver and of the actors — on a local Ray instance and on a
real two-node Ray cluster started on this machine (``ray start --head`` + ``ray start
--address``, one CPU each, joined through RAY_ADDRESS).

Data: synthetic discrete records (``make_logistic_discrete``), randomised response with flip probability 0.3
on every feature and the label. Every fit runs the same fixed schedule (``--iters`` EM iterations, 20 by
default — the default fit at MNIST size runs about 80, and fewer would weigh the one-off preconditioner of
phase 2 too much — burn-in ``iters // 2``, no early stop) with the same seed, so every executor does the
same work and must give the same coefficients (checked: ``identical``). Ray: ``ray_local`` / ``ray_cluster``
place the 2 chains as ``RayExecutor`` does by default (2 actors: one chain each, over all the data);
``ray_warm`` is ``ray_local``'s second fit on the same executor (its pooled actors already up, as in a CV,
a sweep or any fit after a session's first), its ``fit ×serial`` taken against ``serial_warm``, a serial
fit after one before it in the same process (kernels loaded; a warm row's peak RSS includes the fit
before it); at
MNIST size ``ray_data`` (``split_chains=False``) gives each of the 2 actors a block of the data for both
chains, its sums folded from one actor to the other. Seconds per iteration are the steady state: the wall
time from the second E-step to the end over the iterations after the first (the first carries one-off costs
on every executor: loading the compiled kernel, building its tables); set-up (actor start, shipping or
reading the data, the initial prior and M-step) and the first iteration are in ``fit_s``, the whole fit a
user waits for (``fit ×serial``: its ratio to the serial fit's), which starts with the released data in
memory and, on Ray, a running Ray instance (its start, ``Ray start s``, is timed apart). The driver's wall
time per call (E-step batch, M-step gradient, prior update) is listed for the same iterations. Every
configuration runs in a fresh process, so peak RSS is that fit's; streaming rows (``fit_pool``) read a pool
directory written beforehand by another process. ``--rounds R``: every executor R times, round-robin (one
run's speed-up moves by ±0.2 on a shared machine); the median of ratios within a round, and their range.

Usage:
  python benchmarks/bench_ray_scaling.py [--iters 20] [--rounds 1] [--parts mnist,local,cluster]
      [--sizes 10000,100000,1000000] [--out results/ray_scaling]
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from fedrr.io import provenance

ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
FIELDS = [
    "part", "executor", "n", "d", "k", "data", "iters", "s_per_iter", "fit_s", "speedup_vs_serial",
    "speedup_vs_threads", "bytes_per_iter", "bytes_total_per_iter", "bytes_setup", "driver_rss_mib",
    "actor_rss_mib", "identical", "rounds", "speedup_vs_serial_min", "speedup_vs_serial_max", "fit_vs_serial",
    "fit_vs_serial_min", "fit_vs_serial_max", "ray_start_s",
]  # fmt: skip


# ----------------------------------------------------------------------------- one fit
class Clock:
    """Wraps an executor: its shard group notes when the first E-step starts and when the group
    closes (the EM's end), and the actors' peak memory before they let go of their shards."""

    def __init__(self, inner):
        self.inner, self.t_second, self.t_end, self.actor_rss, self.n_esteps = inner, None, None, [], 0
        self.calls: dict[str, list] = {}  # method -> [calls, wall seconds] after the first E-step batch

    def timed(self, method, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        if self.n_esteps >= 2:  # the steady state, as s/iter
            c = self.calls.setdefault(method, [0, 0.0])
            c[0] += 1
            c[1] += time.perf_counter() - t0
        return out

    def shard_group(self, factories, chains=1):  # the group the inner executor would give, timed
        from fedrr.estimators.spread import shard_group

        return _TimedGroup(shard_group(self.inner, factories, chains), self)


class _TimedGroup:
    def __init__(self, group, clock):
        self._g, self._clock = group, clock

    def reduce_each(self, method, arg_lists):
        if method == "estep":  # one batch of E-steps (all chains) per EM iteration
            self._clock.n_esteps += 1
            if self._clock.n_esteps == 2:
                self._clock.t_second = time.perf_counter()
        return self._clock.timed(method, self._g.reduce_each, method, arg_lists)

    def reduce(self, method, *args):
        return self._clock.timed(method, self._g.reduce, method, *args)

    def update_priors(self, updates):
        return self._clock.timed("update_priors", self._g.update_priors, updates)

    def run_each(self, fn, jobs, **kw):  # a chain's whole M-step (or its preconditioner) on its actor
        return self._clock.timed("mstep_on_actor", lambda: self._g.run_each(fn, jobs, **kw))

    def close(self):
        self._clock.t_end = time.perf_counter()
        if hasattr(self._g, "actor_peak_rss"):
            self._clock.actor_rss = self._g.actor_peak_rss()
        self._g.close()

    def __len__(self):
        return len(self._g)

    def __getattr__(self, name):
        return getattr(self._g, name)


def make_release(n: int, d: int, k: int, seed: int = 0, data: str = "synthetic"):
    """Synthetic records (independent Dirichlet(1) state probabilities per column), or MNIST 7/9
    resampled to n (``data="mnist"``: d = 784, k = 256), released by RR flip 0.3."""
    from fedrr.datasets import load_mnist_7_vs_9, make_logistic_discrete
    from fedrr.mechanisms import RandomizedResponse, RecordMechanism

    rng = np.random.default_rng(seed)
    if data == "mnist":
        ds = load_mnist_7_vs_9()
        idx = rng.integers(0, len(ds.y), n)
        X, y = ds.X[idx], ds.y[idx]
    else:
        coef = rng.normal(0.0, 3.0 / np.sqrt(d), d)
        ds = make_logistic_discrete(n, k, coef, rng=rng)
        X, y = ds.X, ds.y
    rm = RecordMechanism(RandomizedResponse(k, 0.3), RandomizedResponse(2, 0.3), n_features=d)
    Xt, yt = rm.release(X, y, rng=rng)
    return Xt, yt, rm


def run_one(cfg: dict) -> dict:
    """One fit as ``cfg`` says; its measurements (run in a fresh process)."""
    from fedrr.estimators import SpreadLogisticRegression
    from fedrr.parallel import RayExecutor, SerialExecutor, ThreadExecutor

    kind = cfg["executor"]
    inner = {
        "serial": lambda: SerialExecutor(),
        "serial_warm": lambda: SerialExecutor(),
        "threads": lambda: ThreadExecutor(2),
    }.get(
        kind,
        lambda: RayExecutor(
            num_cpus=None if os.environ.get("RAY_ADDRESS") else 2, n_actors=2, split_chains=kind != "ray_data"
        ),
    )()
    ray_start_s = float("nan")
    if isinstance(inner, RayExecutor):  # Ray's start is a session's, timed apart from the fit
        t0 = time.perf_counter()
        inner.map(len, [[0]])
        ray_start_s = time.perf_counter() - t0
    it = cfg["iters"]
    kw = dict(random_state=1, max_iter=it, burn_in=it // 2, n_average=10 * it, shard_size=2048)
    if not cfg.get("pool"):
        Xt, yt, rm = make_release(cfg["n"], cfg["d"], cfg["k"], data=cfg.get("data", "synthetic"))
    if kind.endswith("_warm"):  # a fit before, on the same executor (Ray: its pooled actors are up)
        SpreadLogisticRegression(executor=inner, **kw).fit(Xt, yt, mechanism=rm)
    clock = Clock(inner)
    est = SpreadLogisticRegression(executor=clock, **kw)
    t0 = time.perf_counter()
    if cfg.get("pool"):
        est.fit_pool(cfg["pool"])
    else:
        est.fit(Xt, yt, mechanism=rm)
    fit_s = time.perf_counter() - t0
    if hasattr(inner, "shutdown"):
        inner.shutdown()
    tr = est.traffic_
    return {
        "s_per_iter": (clock.t_end - clock.t_second) / (est.n_iter_ - 1),
        "fit_s": fit_s,
        "ray_start_s": ray_start_s,
        "bytes_per_iter": tr.get("per_iteration", float("nan")),
        "bytes_total_per_iter": est.bytes_per_iter_,
        "bytes_setup": tr.get("setup", float("nan")),
        "driver_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "actor_rss_mib": max(clock.actor_rss, default=0) / 2**20,
        "traffic": {k: v for k, v in tr.items() if k not in ("per_iteration", "setup")},
        "coef": est.coef_.ravel().tolist(),
        "calls": clock.calls,
        "n_iter": est.n_iter_,
    }


def make_pool(cfg: dict) -> None:
    from fedrr.pool import Pool

    Xt, yt, rm = make_release(cfg["n"], cfg["d"], cfg["k"])
    Pool(Xt, yt, np.arange(cfg["n"]), [rm] * cfg["n"]).save(cfg["pool"], layout="dir")


# ------------------------------------------------------------------------ orchestration
def child(cfg: dict, env: dict, what: str = "--one") -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, what, json.dumps(cfg)], env=env, capture_output=True, text=True, timeout=7200
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{cfg} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pids_with(marker: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if marker in (p / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(p.name))
            except OSError:
                pass
    return out


class TwoNodeCluster:
    """A Ray head (1 CPU) and a worker node (1 CPU) on this machine, in their own temp dir (so no
    other process's ``ray.init()`` finds them); stopped by pid, never by name."""

    def __enter__(self):
        ray = str(Path(sys.executable).with_name("ray"))
        self.temp = tempfile.mkdtemp(prefix="rb", dir="/tmp")
        port = _free_port()
        self.address = f"127.0.0.1:{port}"
        common = ["--num-cpus=1", "--disable-usage-stats", f"--temp-dir={self.temp}", "--node-ip-address=127.0.0.1"]
        env = {**os.environ, **ENV}
        head = [ray, "start", "--head", f"--port={port}", "--include-dashboard=false", *common]
        head.append(f"--ray-client-server-port={_free_port()}")
        for cmd in (head, [ray, "start", f"--address={self.address}", *common]):
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                self.__exit__()
                raise RuntimeError(f"{' '.join(cmd)}:\n{proc.stderr[-3000:]}")
        return self

    def __exit__(self, *exc):
        for pid in _pids_with(self.temp):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + 30
        while time.time() < deadline and _pids_with(self.temp):
            time.sleep(0.5)
        for pid in _pids_with(self.temp):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.temp, ignore_errors=True)
        left = _pids_with(self.temp)
        print(f"cluster stopped; processes left: {left}", flush=True)


def main(argv=None) -> int:  # noqa: C901  a benchmark script's CLI: one branch per mode and part
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--make-pool", help=argparse.SUPPRESS)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1, help="runs of every executor, round-robin (ratios: median)")
    ap.add_argument("--parts", default="mnist,local,cluster", help="of mnist, mnist-real, local, cluster")
    ap.add_argument("--sizes", default="10000,100000,1000000", help="N of the scaling runs (D = 50, K = 8)")
    ap.add_argument("--serial-max", type=int, default=100_000, help="largest N also fitted serially / threaded")
    ap.add_argument("--out", default="results/ray_scaling")
    args = ap.parse_args(argv)
    if args.one:
        print("RESULT " + json.dumps(run_one(json.loads(args.one))), flush=True)
        return 0
    if args.make_pool:
        make_pool(json.loads(args.make_pool))
        return 0
    env = {**os.environ, **ENV}
    env.pop("RAY_ADDRESS", None)
    parts, sizes = args.parts.split(","), [int(s) for s in args.sizes.split(",")]
    rows: list[dict] = []
    load0 = os.getloadavg()

    def record(part, ex, n, d, k, res, data="synthetic"):
        row = {"part": part, "executor": ex, "n": n, "d": d, "k": k, "data": data, "iters": args.iters, **res}
        rows.append(row)
        print(
            f"{part:8s} {ex:22s} N={n:>8,} D={d:>3} {row['s_per_iter']:8.3f} s/iter  fit {row['fit_s']:7.1f} s  "
            f"{row['bytes_per_iter'] / 1e6:7.3f} MB/iter (all {row['bytes_total_per_iter'] / 1e6:.3f})  "
            f"driver {row['driver_rss_mib']:7.0f} MiB  actors {row['actor_rss_mib']:7.0f} MiB",
            flush=True,
        )
        return row

    def compare(part, n, d, k, kinds, data="synthetic"):
        """Every executor once per round, round-robin (the order reversed every other round, so a
        drift of the machine's speed falls on both sides); a ratio is taken within a round, between
        runs next to each other in time, and the median round is reported."""
        cfg = dict(n=n, d=d, k=k, iters=args.iters, data=data)
        rounds = []
        for r in range(args.rounds):
            rounds.append({ex: child({**cfg, "executor": ex}, env) for ex in (kinds if r % 2 == 0 else kinds[::-1])})
        got = {}
        for ex in kinds:  # the run of the median round (by s/iter) stands for the executor
            runs = sorted((g[ex] for g in rounds), key=lambda res: res["s_per_iter"])
            got[ex] = record(part, ex, n, d, k, runs[(len(runs) - 1) // 2], data)
        for ex, row in got.items():
            row["identical"] = all(g[ex]["coef"] == rounds[0][kinds[0]]["coef"] for g in rounds)
            row["rounds"] = len(rounds)
            row["round_s_per_iter"] = ", ".join(f"{g[ex]['s_per_iter']:.3f}" for g in rounds)
            for base, key in (("serial", "speedup_vs_serial"), ("threads", "speedup_vs_threads")):
                if base in got:
                    ratios = sorted(g[base]["s_per_iter"] / g[ex]["s_per_iter"] for g in rounds)
                    row[key] = statistics.median(ratios)
                    row[key + "_min"], row[key + "_max"] = ratios[0], ratios[-1]
            base = "serial_warm" if ex.endswith("_warm") and "serial_warm" in got else "serial"
            if base in got:  # what a user waits for: the whole fit (Ray's start apart); warm against warm
                ratios = sorted(g[base]["fit_s"] / g[ex]["fit_s"] for g in rounds)
                row["fit_vs_serial"] = statistics.median(ratios)
                row["fit_vs_serial_min"], row["fit_vs_serial_max"] = ratios[0], ratios[-1]

    if "mnist" in parts:  # MNIST size: the speed-up and traffic targets (ray_data: split_chains=False)
        compare("mnist", 9000, 784, 256, ["serial", "threads", "ray_local", "serial_warm", "ray_warm", "ray_data"])
    if "mnist-real" in parts:  # MNIST 7/9 itself, resampled to 9,000
        compare("mnist", 9000, 784, 256, ["serial", "threads", "ray_local"], data="mnist")
    if "local" in parts:
        for n in sizes:
            if n <= args.serial_max:
                compare("local", n, 50, 8, ["serial", "threads", "ray_local"])
    if "cluster" in parts:
        with tempfile.TemporaryDirectory(prefix="fedrr-pools-", dir="/tmp") as pools, TwoNodeCluster() as cl:
            cenv = {**env, "RAY_ADDRESS": cl.address}
            print(f"two-node cluster at {cl.address}", flush=True)
            for n in sizes:
                pool = os.path.join(pools, f"n{n}")
                child(dict(n=n, d=50, k=8, pool=pool), env, "--make-pool")
                cfg = dict(n=n, d=50, k=8, iters=args.iters, executor="ray_cluster", pool=pool)
                res = child(cfg, cenv)
                row = record("cluster", "ray_cluster (fit_pool)", n, 50, 8, res, data="synthetic, pool dir")
                shutil.rmtree(pool, ignore_errors=True)
                ref = next((r for r in rows if r["n"] == n and r["executor"] == "serial"), None)
                if ref is not None:
                    row["speedup_vs_serial"] = ref["s_per_iter"] / row["s_per_iter"]
                    row["identical"] = row["coef"] == ref["coef"]
    write(rows, args, argv, load0)
    return 0


def write(rows: list[dict], args, argv, load0) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})
    cmd = "python benchmarks/bench_ray_scaling.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        "# Spread-EM on Ray: scaling, traffic, memory",
        "",
        f"command: `{cmd}`",
        "",
        f"{provenance()}; machine: {os.cpu_count()} CPUs shared with other sessions; load average "
        f"(1/5/15 min) {_load(load0)} at the start, {_load(os.getloadavg())} at the end",
        "",
        "| part | data | executor | N | D | K | s/iter | ×serial | ×threads | fit s | fit ×serial | Ray start s "
        "| MB/iter | MB/iter all | setup MB | driver MiB | actor MiB | identical |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        f = functools.partial(_fmt, r)
        lines.append(
            f"| {r['part']} | {r['data']} | {r['executor']} | {r['n']:,} | {r['d']} | {r['k']} "
            f"| {f('s_per_iter', '{:.3f}')} | {_ratio(r, 'speedup_vs_serial')} | {_ratio(r, 'speedup_vs_threads')} "
            f"| {f('fit_s', '{:.1f}')} | {_ratio(r, 'fit_vs_serial')} | {f('ray_start_s', '{:.1f}')} "
            f"| {r['bytes_per_iter'] / 1e6:.3f} | {r['bytes_total_per_iter'] / 1e6:.3f} | {r['bytes_setup'] / 1e6:.1f} "
            f"| {r['driver_rss_mib']:.0f} | {r['actor_rss_mib']:.0f} | {r.get('identical', '')} |"
        )
    if any(r.get("rounds", 1) > 1 for r in rows):
        lines += ["", "Seconds per iteration in each round (the order alternated):", ""]
        lines += [f"- {r['part']} {r['executor']} N={r['n']:,}: {r['round_s_per_iter']}" for r in rows if "rounds" in r]
    lines += ["", "Traffic per call and direction (bytes over the whole fit), Ray runs:", ""]
    for r in rows:
        if r["traffic"]:
            top = sorted(r["traffic"].items(), key=lambda kv: -kv[1])
            lines.append(
                f"- {r['part']} {r['executor']} N={r['n']:,} D={r['d']}: " + ", ".join(f"{k} {v:,}" for k, v in top)
            )
    lines += ["", "Driver's wall time per call after the first iteration (a call: every chain's batch), all runs:"]
    lines.append("")
    for r in rows:
        top = sorted(r.get("calls", {}).items(), key=lambda kv: -kv[1][1])
        lines.append(
            f"- {r['part']} {r['executor']} N={r['n']:,} D={r['d']}: "
            + ", ".join(f"{k} {n} × {1000 * s / max(n, 1):.1f} ms" for k, (n, s) in top)
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _fmt(r: dict, k: str, fmt: str = "{:.2f}") -> str:
    return fmt.format(r[k]) if isinstance(r.get(k), (int, float)) else ""


def _ratio(r: dict, k: str) -> str:
    """A speed-up; over several rounds their median and (range)."""
    many = r.get("rounds", 1) > 1 and isinstance(r.get(k), float)
    return _fmt(r, k) + (f" ({r[k + '_min']:.2f}–{r[k + '_max']:.2f})" if many else "")


def _load(avg) -> str:
    return "/".join(f"{x:.1f}" for x in avg)


if __name__ == "__main__":
    sys.exit(main())
