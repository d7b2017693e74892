"""The level of the paired fallback's independence test itself (``fedrr.estimators.spread.independence_test``,
no estimator around it) on no-signal paired releases: its p-value by the parametric bootstrap (at most
``--boot`` draws, seeded by the pool), beside the chi-square reference of the same statistic and, with
``--hotelling``, Hotelling's T² on the same terms (their empirical covariance and an F reference).

Pools: N records with D = 3 attributes of (3, 3, 2) states and labels independent of them (two
classes with P(1) 0.43, or three), released by ``PairedRecordMechanism`` (``n_sampled`` pairs at ε
per record, oracle "auto"), or the level script's pools (400 records, 5 attributes of 3 states, two
classes with P(1) 0.35, one pair at ε per record), or OLH's regime at ε 1: one attribute of 10 states
and 333 records ("olh10"), six attributes of 4-10 states and 2,000 records ("adult6"). Rate of
p ≤ alpha over ``--pools`` pools with its 95 % Clopper–Pearson interval; ``--only`` runs some kinds,
``--rows`` some rows of ``SETTINGS`` (by index). Writes ``independence_direct.md`` (with ``--name``
another name).

    python simulations/paired_independence_level.py --pools 1000 --out results/spread_fallback_level

``--grid``: issue 45's level grid, the "adult6" attributes with one oracle forced for all (RR, OUE,
OLH) × ε per record 0.5, 1, 4 × 1 or 2 pairs per record × 2 or 3 classes × 600 or 5,000 records (72
settings), ``--pools`` no-signal pools each. Each finished setting is appended to
``independence_grid.csv`` in ``--out`` (a rerun skips the settings it holds, so a killed run keeps what
it finished); ``--shard I/K`` runs the settings whose index is I modulo K, for processes on several
cores (each reads the CSV once, at its start: run shards that do not overlap). Even indices have 600
records and odd ones 5,000, which cost 3-10 times more: the committed table ran shards 1/4 and 3/4 (the
5,000-record half), then 0/2, 2.4 CPU-hours in all. The table ``independence_grid.md`` is written
from the CSV once it holds every setting (or with ``--report``):

    python simulations/paired_independence_level.py --grid --pools 1000 --shard 1/4 --out results/spread_fallback_level
    python simulations/paired_independence_level.py --grid --pools 1000 --shard 3/4 --out results/spread_fallback_level
    python simulations/paired_independence_level.py --grid --pools 1000 --shard 0/2 --out results/spread_fallback_level

``--scenario configs/adult_paired.toml --eps 0.5,1,2 --seeds 5``: the test on that scenario's own releases
(real data with a signal), each cell's p-value now and as it was before 2026-12-03, no fit.

``--adult --eps 0.5,1,2 --pools 1000``: the test on Adult's own schema with no signal: adult_binned's
30,162 training rows (12 attributes of 2-41 states) with their labels permuted, one pair per person at
ε (``PairedRecordMechanism``, oracle "auto", as the planner's design on Adult at ε ≤ 4), pool s
seeded by 1000 + s; ``independence_adult_null.md``.

``--adult --real --people 30000,100000 --eps 0.5 --pools 200``: its power on Adult's real labels: pool
s is N people drawn with replacement from the training rows (seeded by 500 + s), one pair each at ε.
Beside the kept rate, the signal's noncentrality, what any test of these releases has to work with:
per attribute its own statistic T_j (the test on the records that released it, chi-square only) on
the real labels minus on the same people with their labels permuted (released again), mean over the
pools; ``independence_adult_power.md``.

``--grid --margins ml|ml-shrunk|true --covariance releases|draw --indices I ...``: the same settings' pools
with another bootstrap (``independence_test``'s ``margins`` and ``covariance``; ``true``: the simulation's
own margins, an oracle), rows to ``independence_grid_VARIANT.csv``, and ``independence_margins.md``
beside the test as it is (``VARIANTS``; the commands that wrote the committed one are in it).
``--pool-seed S`` (default 100): fresh pools, seeded S + s; the CSV's and the report's names end in
``_poolsS``, and only runs on the same pools go side by side.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta, binom
from scipy.stats import f as f_dist

from fedrr.datasets import load, make_logistic_discrete, make_logistic_multiclass_discrete
from fedrr.estimators.spread import independence_terms, independence_test
from fedrr.io import command_line, markdown_table, write_report
from fedrr.mechanisms import PairedRecordMechanism

#: (pools, classes, pairs per record, ε per record, records[, pair oracle: "auto" unless given])
SETTINGS = [
    ("small", 2, 1, 1.0, 600),
    ("small", 3, 1, 1.0, 600),
    ("small", 2, 2, 1.0, 600),
    ("small", 3, 2, 1.0, 600),
    ("small", 3, 2, 1.0, 3000),
    ("small", 3, 2, 4.0, 600),
    ("level", 2, 1, 1.0, 400),
    ("level", 2, 1, 2.0, 400),
    ("level", 2, 1, 4.0, 400),
    ("level", 3, 1, 2.0, 400),
    ("olh10", 2, 1, 1.0, 333),
    ("adult6", 2, 1, 1.0, 2000),
    ("adult6", 2, 1, 0.5, 600),
    ("adult6", 3, 1, 1.0, 5000),
    ("adult6", 2, 1, 1.0, 2000, "oue"),
    ("adult6", 2, 2, 1.0, 5000, "oue"),
]
#: the attributes' states per kind of pool: "olh10" one 10-state attribute (its oracle OLH at ε 1),
#: "adult6" six of 4-10 states (mostly OLH at ε 1, the review's Adult-like pools)
STATES = {"small": (3, 3, 2), "level": (3,) * 5, "olh10": (10,), "adult6": (5, 7, 10, 4, 8, 9)}


#: issue 45's level grid: (oracle, ε per record, pairs per record, classes, records), "adult6" attributes
GRID = list(itertools.product(("rr", "oue", "olh"), (0.5, 1.0, 4.0), (1, 2), (2, 3), (600, 5000)))
GRID_FIELDS = ["index", "oracle", "eps", "pairs", "classes", "records", "pools", "kept05", "kept025", "mean_p"]
GRID_FIELDS += ["mean_draws", "chi2_kept05", "seconds"]


def pool(kind: str, classes: int, n_sampled: int, eps: float, n: int, seed: int, oracle: str = "auto", signal=0.0):
    """One pool's releases; ``signal`` (two classes): the attributes' logistic coefficients on their
    states scaled to [0, 1], +signal and −signal alternately (0: no signal). Returns (groups, X, the
    true margins: the attributes' state probabilities and, with no signal, the class probabilities)."""
    rng = np.random.default_rng(seed)
    ks = STATES[kind]
    if classes == 2:
        b = {"small": -0.3, "level": np.log(0.35 / 0.65)}.get(kind, -0.5)
        ds = make_logistic_discrete(n, ks, signal * (-1.0) ** np.arange(len(ks)), b, rng=rng)
        pi = np.array([1.0 - 1.0 / (1.0 + np.exp(-b)), 1.0 / (1.0 + np.exp(-b))])
    else:
        ds = make_logistic_multiclass_discrete(n, ks, np.zeros((classes, len(ks))), rng=rng)
        pi = np.full(classes, 1.0 / classes)
    mech = PairedRecordMechanism(ks, classes, eps, n_sampled=n_sampled, oracle=oracle)
    Xt, _ = mech.release(ds.X, ds.y, rng=rng)
    return [(mech, np.arange(n))], Xt, (list(ds.extra["prior"]), pi)


def oracles(kind: str, classes: int, n_sampled: int, eps: float, oracle: str = "auto") -> str:
    """The pair oracles of this setting, by name and count."""
    mech = PairedRecordMechanism(STATES[kind], classes, eps, n_sampled=n_sampled, oracle=oracle)
    short = {"RandomizedResponse": "RR", "UnaryEncoding": "OUE", "LocalHashing": "OLH"}
    names = [short[type(o).__name__] for o in mech.oracles]
    return " ".join(f"{names.count(k)} {k}" for k in ("RR", "OUE", "OLH") if k in names)


def hotelling_p(groups, X) -> float:
    """Hotelling's T² of the same terms with their empirical covariance, F reference."""
    Z, _ = independence_terms(groups, X)
    n = Z.shape[0]
    w, V = np.linalg.eigh(np.cov(Z, rowvar=False))
    keep = w > 1e-10 * w.max()
    d = int(keep.sum())
    T2 = n * np.sum((V[:, keep].T @ Z.mean(axis=0)) ** 2 / w[keep])
    return float(f_dist.sf((n - d) / (d * (n - 1)) * T2, d, n - d))


def rate(ps: np.ndarray, alpha: float) -> str:
    return rate_of(int(np.sum(ps <= alpha)), ps.size)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", nargs="+", choices=sorted(STATES), help="these kinds of pool only")
    ap.add_argument("--rows", nargs="+", type=int, help="these rows of SETTINGS only (0-based)")
    ap.add_argument("--boot", type=int, default=99, help="bootstrap draws at most (0: chi-square only)")
    ap.add_argument("--hotelling", action="store_true", help="add Hotelling's T² columns")
    ap.add_argument("--name", default="independence_direct.md")
    ap.add_argument("--power", type=str, help="signals (comma-separated): the kept rate at alpha 0.05 per signal")
    ap.add_argument("--records", type=str, default="600,2000", help="records per pool for --power")
    ap.add_argument("--grid", action="store_true", help="issue 45's 72-setting level grid (module doc)")
    ap.add_argument("--shard", default="0/1", help="--grid: run the settings whose index is I modulo K (I/K)")
    ap.add_argument("--report", action="store_true", help="--grid: write the table from the CSV and stop")
    ap.add_argument(
        "--margins",
        choices=("releases", "ml", "ml-shrunk", "true"),
        default="ml",
        help="--grid: the bootstrap's margins (independence_test's margins; true: the simulation's, an oracle); "
        "other than the test's the rows go to independence_grid_MARGINS.csv and the table to independence_margins.md",
    )
    ap.add_argument(
        "--covariance",
        choices=("auto", "releases", "draw"),
        default="auto",
        help="--grid: each draw's S at the releases' margins, the draw's own, or the draw's own but for OLH "
        "(independence_test's covariance); other than the test's the rows go to independence_grid_MARGINS[-draw].csv",
    )
    ap.add_argument("--indices", nargs="+", type=int, help="--grid: these settings only (indices into GRID)")
    ap.add_argument(
        "--pool-seed",
        type=int,
        default=100,
        help="--grid: pool s is seeded by POOL_SEED + s (not 100: fresh pools, rows to a CSV ending _poolsPOOL_SEED)",
    )
    ap.add_argument("--scenario", type=Path, help="a paired scenario's releases: the test's p-value per cell (--eps)")
    ap.add_argument("--adult", action="store_true", help="no-signal pools on Adult's own schema (module doc)")
    ap.add_argument("--real", action="store_true", help="--adult: Adult's real labels, the test's power (module doc)")
    ap.add_argument("--people", default="30000", help="--adult --real: people per pool (comma-separated)")
    ap.add_argument("--eps", default="0.5,1,2", help="--scenario: these ε of its grid; --adult: these ε")
    ap.add_argument("--seeds", type=int, default=5, help="--scenario: its first repeats")
    args = ap.parse_args(argv)
    if args.scenario:
        return real(args, argv)
    if args.real and not args.adult:
        ap.error("--real needs --adult (the test's power on Adult's real labels)")
    if args.adult:
        return adult_power(args, argv) if args.real else adult_null(args, argv)
    if args.power:
        return power(args, argv)
    if args.grid:
        return grid(args, argv)
    rows = []
    for i, (kind, classes, n_sampled, eps, n, *oracle) in enumerate(SETTINGS):
        if (args.only and kind not in args.only) or (args.rows and i not in args.rows):
            continue
        boot, score, hot, draws = [], [], [], []
        for s in range(args.pools):
            groups, X, _ = pool(kind, classes, n_sampled, eps, n, 100 + s, *oracle)
            res = independence_test(groups, X, seed=s, n_boot=args.boot)
            boot.append(res["p_value"])
            score.append(res["p_chi2"])
            draws.append(res["n_boot"])
            if args.hotelling:
                hot.append(hotelling_p(groups, X))
        boot, score, hot = np.array(boot), np.array(score), np.array(hot)
        row = [kind, classes, n_sampled, eps, n, oracles(kind, classes, n_sampled, eps, *oracle), args.pools]
        row += [rate(boot, 0.05), rate(boot, 0.025), f"{boot.mean():.3f}", f"{np.mean(draws):.1f}"]
        row += [rate(score, 0.05), f"{score.mean():.3f}"]
        rows.append(row + ([rate(hot, 0.05), rate(hot, 0.025)] if args.hotelling else []))
        print(rows[-1], flush=True)
    head = ["pools of", "classes", "pairs per record", "ε per record", "records", "oracles", "pools"]
    head += ["bootstrap: p ≤ 0.05", "bootstrap: p ≤ 0.025", "bootstrap: mean p", "draws (mean)"]
    head += ["chi-square: p ≤ 0.05", "chi-square: mean p"]
    head += ["Hotelling: p ≤ 0.05", "Hotelling: p ≤ 0.025"] if args.hotelling else []
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        write_report(
            args.out / args.name,
            "The paired independence test on no-signal pools: the score statistic's bootstrap p-value "
            f"(at most {args.boot} draws, stopped early by its sequential rule) and its chi-square reference",
            markdown_table(head, rows),
            argv,
        )
    )
    return 0


def adult_null(args, argv) -> int:
    """``--adult`` (module doc): the test's kept rates on Adult's own schema with the labels permuted."""
    ds = load("adult_binned")
    train = ~ds.extra["is_test"]
    X, y = ds.X[train], ds.y[train]
    ks = ds.schema.states()
    rows = []
    for eps in (float(e) for e in args.eps.split(",")):
        mech = PairedRecordMechanism(ks, 2, eps)
        short = {"RandomizedResponse": "RR", "UnaryEncoding": "OUE", "LocalHashing": "OLH"}
        names = [short[type(o).__name__] for o in mech.oracles]
        t = time.perf_counter()
        boot, score = [], []
        for s in range(args.pools):
            rng = np.random.default_rng(1000 + s)
            Xt, _ = mech.release(X, rng.permutation(y), rng=rng)
            res = independence_test([(mech, np.arange(len(y)))], Xt, seed=s, n_boot=args.boot)
            boot.append(res["p_value"])
            score.append(res["p_chi2"])
        boot, score = np.array(boot), np.array(score)
        used = " ".join(f"{names.count(k)} {k}" for k in ("RR", "OUE", "OLH") if k in names)
        rows.append([eps, len(y), used, args.pools, rate(boot, 0.05), rate(boot, 0.025), f"{boot.mean():.3f}"])
        rows[-1] += [rate(score, 0.05), f"{time.perf_counter() - t:.0f}"]
        print(rows[-1], flush=True)
    head = ["ε per person", "people", "oracles", "pools", "bootstrap (the test): p ≤ 0.05", "p ≤ 0.025"]
    head += ["mean p", "chi-square: p ≤ 0.05", "seconds"]
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        write_report(
            args.out / "independence_adult_null.md",
            "The paired independence test on Adult's own schema with no signal (the training rows, labels "
            "permuted; one pair per person): kept rates with 95 % Clopper-Pearson intervals",
            markdown_table(head, rows),
            argv,
        )
    )
    return 0


def adult_power(args, argv) -> int:
    """``--adult --real`` (module doc): the test's kept rate on Adult's real labels, and the signal's
    noncentrality per attribute: mean T_j on the real labels minus mean T_j on the same people with
    their labels permuted (T_j does not average its df under no signal)."""
    ds = load("adult_binned")
    train = ~ds.extra["is_test"]
    X, y = ds.X[train], ds.y[train]
    ks = ds.schema.states()
    names = [f.name for f in ds.schema.features]
    rows, excess_rows = [], []
    settings = itertools.product((float(e) for e in args.eps.split(",")), (int(n) for n in args.people.split(",")))
    for eps, people in settings:
        mech = PairedRecordMechanism(ks, 2, eps)
        if mech.n_sampled != 1:  # T is the sum of its attributes' blocks only with one pair per person
            raise SystemExit(f"--adult --real needs one pair per person, got {mech.n_sampled}")
        t = time.perf_counter()
        ps, with_labels, permuted, dfs = [], [], [], []
        for s in range(args.pools):
            rng = np.random.default_rng(500 + s)
            idx = rng.integers(0, len(y), people)
            groups = [(mech, np.arange(people))]
            shuffled = rng.permutation(y[idx])  # drawn before the releases: the committed run's stream
            Xt, _ = mech.release(X[idx], y[idx], rng=rng)
            ps.append(independence_test(groups, Xt, seed=s, n_boot=args.boot)["p_value"])
            with_labels.append(attribute_statistics(groups, Xt)[0])
            stats, df = attribute_statistics(groups, mech.release(X[idx], shuffled, rng=rng)[0])
            permuted.append(stats)
            dfs.append(df)
        ps, lam = np.array(ps), np.mean(with_labels, axis=0) - np.mean(permuted, axis=0)
        sums = np.sum(with_labels, axis=1) - np.sum(permuted, axis=1)  # per pool: real minus permuted, summed
        se = np.std(sums, ddof=1) / np.sqrt(len(sums))
        df = int(np.median(dfs))
        null_excess = np.sum(permuted, axis=1).mean() - df
        rows.append([eps, people, args.pools, rate(ps, 0.05), f"{ps.mean():.3f}", df])
        rows[-1] += [f"{null_excess:.1f}", f"{lam.sum():.1f} ± {se:.1f}", f"{time.perf_counter() - t:.0f}"]
        top = np.argsort(-lam)[:4]
        excess_rows.append([eps, people, ", ".join(f"{names[j]} {lam[j]:.1f}" for j in top)])
        print(rows[-1], excess_rows[-1], flush=True)
        head = ["ε per person", "people", "pools", "the test: p ≤ 0.05", "mean p", "df"]
        head += ["labels permuted: mean T − df", "noncentrality: Σ_j mean T_j, real − permuted", "seconds"]
        args.out.mkdir(parents=True, exist_ok=True)
        report = write_report(  # after every setting: a killed run keeps what it finished
            args.out / "independence_adult_power.md",
            "The paired independence test's power on Adult's real labels (people drawn with replacement from "
            "the training rows, one pair each): kept rate with its 95 % Clopper-Pearson interval, and the "
            "signal's noncentrality (each attribute's mean statistic T_j on the real labels minus on the same "
            "people's releases with their labels permuted, summed, ± its standard error over the pools)",
            markdown_table(head, rows)
            + "\n\nThe attributes with the largest noncentrality:\n\n"
            + markdown_table(["ε per person", "people", "attributes"], excess_rows),
            argv,
        )
    print(report)
    return 0


def attribute_statistics(groups: list, Xt: np.ndarray) -> tuple[list[float], int]:
    """Each attribute's own statistic T_j (the test on the records that released it: the other columns
    hidden, chi-square only) and the df of all of them together. With one pair per person the test's T
    is their sum."""
    stats, df = [], 0
    for j in range(Xt.shape[1]):
        Xj = np.full_like(Xt, np.nan)
        Xj[:, j] = Xt[:, j]
        res = independence_test(groups, Xj, n_boot=0)
        stats.append(res["statistic"])
        df += res["df"]
    return stats, df


def grid(args, argv) -> int:
    """Issue 45's level grid (module doc): each setting's kept rates over ``--pools`` no-signal pools,
    appended to the CSV as it finishes; the table once every setting is there."""
    args.out.mkdir(parents=True, exist_ok=True)
    if bootstrap_variant(args) and args.report:
        return margins_report(args, argv)
    path = args.out / f"independence_grid{variant(args)}.csv"
    done = set()
    if path.exists():
        with path.open() as f:
            done = {int(r["index"]) for r in csv.DictReader(line for line in f if not line.startswith("#"))}
    i_shard, k_shard = (int(v) for v in args.shard.split("/"))
    todo = [i for i in range(len(GRID)) if i % k_shard == i_shard and i not in done]
    todo = [i for i in todo if args.indices is None or i in args.indices]
    if not args.report:
        head = f"# {command_line(argv)}\n" + ",".join(GRID_FIELDS) + "\r\n"
        try:  # shards started together: one creates the file with its header in one write, the others append
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_APPEND)
            os.write(fd, head.encode())
            os.close(fd)
        except FileExistsError:
            with path.open("a") as f:
                f.write(f"# + {command_line(argv)}\n")
        with path.open("a", newline="") as f:
            for i in todo:
                oracle, eps, m, classes, n = GRID[i]
                t = time.perf_counter()
                boot, score, draws = [], [], []
                for s in range(args.pools):
                    groups, X, truth = pool("adult6", classes, m, eps, n, args.pool_seed + s, oracle)
                    margins = truth if args.margins == "true" else args.margins
                    res = independence_test(
                        groups, X, seed=s, n_boot=args.boot, margins=margins, covariance=args.covariance
                    )
                    boot.append(res["p_value"])
                    score.append(res["p_chi2"])
                    draws.append(res["n_boot"])
                boot, score = np.array(boot), np.array(score)
                row = dict(index=i, oracle=oracle, eps=eps, pairs=m, classes=classes, records=n, pools=args.pools)
                row |= dict(kept05=int(np.sum(boot <= 0.05)), kept025=int(np.sum(boot <= 0.025)))
                row |= dict(mean_p=round(float(boot.mean()), 4), mean_draws=round(float(np.mean(draws)), 1))
                row |= dict(chi2_kept05=int(np.sum(score <= 0.05)), seconds=round(time.perf_counter() - t, 1))
                csv.DictWriter(f, GRID_FIELDS).writerow(row)
                f.flush()
                print(row, flush=True)
    if bootstrap_variant(args):
        return margins_report(args, argv)
    rows = read_grid(path)
    if len({int(r["index"]) for r in rows}) < len(GRID) and not args.report:
        print(f"{len(rows)} of {len(GRID)} settings in {path}: the table is written once all are there")
        return 0
    table, inside = [], 0
    for r in sorted(rows, key=lambda r: int(r["index"])):
        pools, k = int(r["pools"]), int(r["kept05"])
        lo, hi = clopper_pearson(k, pools)
        inside += 0.035 <= k / pools <= 0.065
        table.append(
            [r["oracle"].upper(), r["eps"], r["pairs"], r["classes"], r["records"], pools]
            + [f"{k / pools:.3f} [{lo:.3f}, {hi:.3f}]", rate_of(int(r["kept025"]), pools), r["mean_p"], r["mean_draws"]]
            + [rate_of(int(r["chi2_kept05"]), pools)]
        )
    head = ["oracle", "ε per record", "pairs per record", "classes", "records", "pools", "bootstrap: p ≤ 0.05"]
    head += ["bootstrap: p ≤ 0.025", "bootstrap: mean p", "draws (mean)", "chi-square: p ≤ 0.05"]
    title = "The paired independence test's level over issue 45's grid: six attributes of 4-10 states, one "
    title += "oracle forced for all, no-signal pools; kept rate at alpha 0.05 with its 95 % Clopper-Pearson interval"
    note = f"{inside} of {len(table)} settings have their kept rate at alpha 0.05 in [0.035, 0.065].\n\n"
    note += pooled_level(rows)
    name = f"independence_grid{pools_suffix(args)}.md"
    print(write_report(args.out / name, title, markdown_table(head, table) + "\n\n" + note, argv))
    return 0


def pooled_level(rows: list[dict], lo: float = 0.035, hi: float = 0.065, alpha: float = 0.05) -> str:
    """What the grid's settings say together: the kept rate pooled over them, by ε and oracle, against
    what a test of exact level alpha would show over the same numbers of pools (how many settings it
    leaves outside [lo, hi] by chance, and how likely it keeps every one inside)."""
    pools = [int(r["pools"]) for r in rows]
    inside = [
        binom.cdf(np.floor(hi * n + 1e-9), n, alpha) - binom.cdf(np.ceil(lo * n - 1e-9) - 1, n, alpha) for n in pools
    ]
    out = f"A test of exact level {alpha} run on the same pools would leave {sum(1 - q for q in inside):.2f} of "
    out += f"{len(rows)} settings outside [{lo}, {hi}] on average, by chance alone, and keep every one inside "
    out += f"with probability {np.prod(inside):.2f}: the band is a screen, and the pooled rates below are "
    out += "what tell a biased test from an exact one.\n\n"
    groups = [("all settings", rows)]
    groups += [(f"ε {e}", [r for r in rows if r["eps"] == e]) for e in dict.fromkeys(r["eps"] for r in rows)]
    groups += [(o.upper(), [r for r in rows if r["oracle"] == o]) for o in dict.fromkeys(r["oracle"] for r in rows)]
    table = []
    for name, part in groups:
        k, n = sum(int(r["kept05"]) for r in part), sum(int(r["pools"]) for r in part)
        z = (k / n - alpha) / np.sqrt(alpha * (1 - alpha) / n)
        table.append([name, len(part), n, rate_of(k, n, digits=4), f"{z:+.1f}"])
    head = ["settings", "count", "pools", f"pooled: p ≤ {alpha}", f"z against {alpha}"]
    return out + markdown_table(head, table)


#: the bootstrap variants of the margins table, by their CSV's suffix
VARIANTS = {
    "": "ML margins, S per draw but OLH's (the test)",
    "_releases": "releases' margins (the test before 2026-12-03)",
    "_releases-draw": "releases' margins, S per draw",
    "_ml": "ML margins",
    "_ml-draw": "ML margins, S per draw",
    "_true": "true margins (oracle)",
    "_true-draw": "true margins, S per draw (oracle: exact)",
    "_ml-shrunk-auto": "ML margins shrunk toward uniform (refuted: over-shrinks)",
}


def bootstrap_variant(args) -> str:
    """The bootstrap part of a grid run's CSV suffix: empty for the test as it is, else its margins
    and covariance (a key of ``VARIANTS``)."""
    if args.margins == "ml" and args.covariance == "auto":
        return ""
    return f"_{args.margins}" + {"releases": "", "draw": "-draw", "auto": "-auto"}[args.covariance]


def pools_suffix(args) -> str:
    """The pools part of a grid run's CSV suffix: empty for the grid's own pools (seeds 100 + s)."""
    return "" if args.pool_seed == 100 else f"_pools{args.pool_seed}"


def variant(args) -> str:
    """The suffix of a grid run's CSV: its bootstrap, then its pools."""
    return bootstrap_variant(args) + pools_suffix(args)


def read_grid(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def margins_report(args, argv) -> int:
    """``--grid --margins ... --covariance ...``: the settings run with another bootstrap (``VARIANTS``)
    beside the same pools' rates with the test as it is (``independence_grid.csv``)."""
    pools = pools_suffix(args)  # only runs on the same pools go side by side
    found = sorted(p.stem.removeprefix("independence_grid") for p in args.out.glob("independence_grid*.csv"))
    found = [v for v in found if (v.endswith(pools) if pools else "_pools" not in v)]
    runs = {
        v.removesuffix(pools): {int(r["index"]): r for r in read_grid(args.out / f"independence_grid{v}.csv")}
        for v in found
    }
    shown = sorted(set().union(*(set(rows) for v, rows in runs.items() if v)))
    modes = list(runs)
    table = []
    for i in shown:
        oracle, eps, m, classes, n = GRID[i]
        row = [oracle.upper(), eps, m, classes, n]
        for mode in modes:
            r = runs[mode].get(i)
            row += [rate_of(int(r["kept05"]), int(r["pools"])) + f", mean p {r['mean_p']}" if r else "–"]
        table.append(row)
    head = ["oracle", "ε per record", "pairs per record", "classes", "records"]
    head += [VARIANTS.get(m, m.lstrip("_")) for m in modes]
    title = "The paired test's bootstrap drawn at other margins, the same no-signal pools: kept rate at alpha 0.05 "
    title += "[95 % Clopper-Pearson] and mean p-value"
    if pools:
        title += f" (pools seeded {args.pool_seed} + s)"
    print(write_report(args.out / f"independence_margins{pools}.md", title, markdown_table(head, table), argv))
    return 0


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Clopper–Pearson interval of k successes in n."""
    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def rate_of(k: int, n: int, digits: int = 3) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{k / n:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def real(args, argv) -> int:
    """The test on a scenario's own releases (``--scenario``, e.g. configs/adult_paired.toml: real data with
    a signal), per ε and repeat: its p-value, and as it was before 2026-12-03, with T and its df; no fit."""
    import tempfile

    from fedrr.assembly import build_population
    from fedrr.experiment import load_scenario
    from fedrr.pool import Pool
    from fedrr.release import offline_release

    eps = [float(e) for e in args.eps.split(",")]
    spec = load_scenario(args.scenario)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for cell in [c for c in spec.cells() if c.grid_value in eps and c.r < args.seeds]:
            cfg = cell.run_config(results_dir=tmp)
            population = build_population(cfg)
            pool_ = Pool.from_releases([offline_release(population, cfg.seed)], {})
            mech = pool_.mechanism_arg()
            groups = [(mech, np.arange(pool_.n))]
            now = independence_test(groups, pool_.X, seed=cfg.seed)
            old = independence_test(groups, pool_.X, seed=cfg.seed, **BEFORE)
            rows.append([cell.grid_value, cell.r, pool_.n, f"{now['statistic']:.1f}", now["df"]])
            rows[-1] += [f"{now['p_value']:.3f}", f"{old['p_value']:.3f}", f"{now['p_chi2']:.3g}"]
            print(rows[-1], flush=True)
    head = ["ε per record", "repeat", "releases", "T", "df", "p (the test)", "p (before)", "chi-square p"]
    title = f"The paired independence test on the releases of {args.scenario.name} (real data with a signal): "
    title += "its bootstrap p-value, as it was before 2026-12-03, and the chi-square reference"
    args.out.mkdir(parents=True, exist_ok=True)
    print(write_report(args.out / args.name, title, markdown_table(head, rows), argv))
    return 0


#: the test as it was before 2026-12-03 (the power table's comparison column)
BEFORE = {"margins": "releases", "covariance": "releases"}


def power(args, argv) -> int:
    """The kept rate at alpha 0.05 (bootstrap and chi-square p of the same pools) against the signal
    for each number of records, in the settings of ``--rows`` (two classes; default the first adult6)."""
    rows = []
    for i in args.rows or [SETTINGS.index(("adult6", 2, 1, 1.0, 2000))]:
        kind, classes, n_sampled, eps, _, *oracle = SETTINGS[i]
        for n in (int(v) for v in args.records.split(",")):
            for signal in (float(v) for v in args.power.split(",")):
                boot, before, score = [], [], []
                for s in range(args.pools):
                    groups, X, _ = pool(kind, classes, n_sampled, eps, n, 100 + s, *(oracle or ["auto"]), signal=signal)
                    res = independence_test(groups, X, seed=s, n_boot=args.boot)
                    boot.append(res["p_value"])
                    score.append(res["p_chi2"])
                    old = independence_test(groups, X, seed=s, n_boot=args.boot, **BEFORE)
                    before.append(old["p_value"])
                row = [kind, n_sampled, eps, n, oracles(kind, classes, n_sampled, eps, *oracle), signal, args.pools]
                rows.append(row + [rate(np.array(v), 0.05) for v in (boot, before, score)])
                print(rows[-1], flush=True)
    head = ["pools of", "pairs per record", "ε per record", "records", "oracles", "signal", "pools"]
    head += ["bootstrap (the test): p ≤ 0.05", "bootstrap at the releases' margins (before): p ≤ 0.05"]
    head += ["chi-square: p ≤ 0.05"]
    args.out.mkdir(parents=True, exist_ok=True)
    title = "The paired independence test's power: kept rate at alpha 0.05 against the signal (the attributes' "
    title += "logistic coefficients on their states scaled to [0, 1], ±signal alternately), bootstrap p-value "
    title += "(the test; and as it was before 2026-12-03, drawn at the releases' margins, on the same pools) "
    title += "and chi-square reference"
    print(write_report(args.out / args.name, title, markdown_table(head, rows), argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
