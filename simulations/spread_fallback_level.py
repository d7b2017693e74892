"""The level and the power of spread's fallback decision (``SpreadLogisticRegressionCV``): C chosen by
cross-validation on a selection part A of the releases, the chosen model fitted on A, and a
permutation test of it on the held-out part B (issue 29).

**Level.** On pools whose labels are independent of the records (``make_logistic_discrete`` /
``make_logistic_multiclass_discrete`` with zero coefficients, unbalanced classes), the rate of kept
models, i.e. of p-values ≤ alpha, with its 95 % Clopper–Pearson interval, for

- ``split``: every attribute (K = 3 states) by k-RR (flip 0.2) and the label by k-RR (flip 0.1);
- ``sampled``: the same, each record releasing one attribute drawn at random (``n_sampled=1``);
- ``paired``: each record releasing one sampled (attribute, label) pair as one value of the product
  domain (``PairedRecordMechanism``, ε ``PAIRED_EPS`` = 2 per record, the oracle chosen by "auto";
  no label of its own, y_tilde all NaN), fitted with the ``spread`` learner's prior on paired
  releases (``prior="naive-bayes"``, ``release_prior``);

for two and three classes. The test is exact given A for split and sampled releases, so the rate
must be ≤ alpha up to chance; on paired releases it is ``fedrr.estimators.spread.independence_test``, a
chi-square approximation, whose level is what this measures (its z, the p-value as a normal
quantile, per pool is in the CSV).

**Power.** On synthetic logistic pools with a real signal (the same split releases, two classes
with coefficients ``POWER_COEF``, or three with ``POWER_COEF3``), per number of records and label
flip, the rate of kept models for each test statistic (``test_statistic``: "loglik", "accuracy",
"auc") at alpha 0.025 and 0.05; ``--release paired``: the same coefficients on paired releases (one
sampled (attribute, label) pair per record) per number of records and ε per record, the
independence test.

**Adult** (``--part adult``): the demo's releases of ``configs/adult.toml`` (label at ε/2, one
sampled attribute at ε/2 by the best frequency oracle), its ``spread`` learner (this estimator) and
``spread-plain`` (SpreadLogisticRegression at the configured C), the majority class, per ε and seed.

Each pool is small (a few hundred records, short EM runs): only the decision's p-value is read
(``p_value_``), with ``fallback=True`` so that a refit on all releases happens only when kept.

    python simulations/spread_fallback_level.py --part level --pools 2000   # split, sampled ~30 min; paired +20 min
    python simulations/spread_fallback_level.py --part power --pools 100 --records 300,1000,3000
    python simulations/spread_fallback_level.py --part power --pools 100 --classes 3 --statistics loglik,accuracy
    python simulations/spread_fallback_level.py --part power --pools 100 --release paired --records 300,1000,3000 \
        --eps 1,2,4
    python simulations/spread_fallback_level.py --part adult --eps 1,2,4 --seeds 3
    python simulations/spread_fallback_level.py --part level --pools 1000 --only paired:3
    python simulations/spread_fallback_level.py --part level --pools 5 --out /tmp/lvl   # a smoke run
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import beta

from fedrr.assembly import fit_options
from fedrr.datasets import make_logistic_discrete, make_logistic_multiclass_discrete
from fedrr.estimators import SpreadLogisticRegressionCV
from fedrr.io import command_line, markdown_table, write_csv, write_report
from fedrr.mechanisms import PairedRecordMechanism, RandomizedResponse, RecordMechanism

ROOT = Path(__file__).resolve().parents[1]
D, K = 5, 3
N_LEVEL = 400
RELEASES = ("split", "sampled", "paired")
#: ε per record of the paired releases (one sampled (attribute, label) pair of 3·C values)
PAIRED_EPS = 2.0
ALPHAS = (0.025, 0.05)
STATISTICS = ("loglik", "accuracy", "auc")
POWER_COEF = np.array([1.0, -1.0, 0.5, 0.0, 0.0])
POWER_COEF3 = np.array([[1.0, -1.0, 0.5, 0.0, 0.0], [0.0] * 5, [-1.0, 1.0, 0.0, 0.0, 0.0]])  # three classes
POWER_GRID = [(300, 0.1), (300, 0.3), (1000, 0.1), (1000, 0.3)]  # (records, label flip)
#: small and fast: two Cs, three folds, short EM runs
SMALL = dict(
    encoding="unit", Cs=(0.1, 1.0), cv=3, cv_max_iter=5, max_iter=10, n_chains=1, heldout_samples=16, n_permutations=999
)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def record_mechanism(
    release: str, n_classes: int, label_flip: float = 0.1, eps: float = PAIRED_EPS
) -> RecordMechanism | PairedRecordMechanism:
    if release == "paired":
        return PairedRecordMechanism([K] * D, n_classes, eps, n_sampled=1)
    return RecordMechanism(
        RandomizedResponse(K, 0.2),
        RandomizedResponse(n_classes, label_flip),
        n_features=D,
        n_sampled=1 if release == "sampled" else None,
    )


def pool(n: int, n_classes: int, coef: np.ndarray | None, rng: np.random.Generator):
    """Clean (X, y): no signal when coef is None (zero coefficients, classes unbalanced)."""
    if n_classes == 2:
        c = np.zeros(D) if coef is None else coef
        ds = make_logistic_discrete(n, K, c, intercept=float(np.log(0.35 / 0.65)), rng=rng)
    else:
        c = np.zeros((n_classes, D)) if coef is None else coef
        ds = make_logistic_multiclass_discrete(n, K, c, intercept=np.array([0.0, -0.5, 0.3]), rng=rng)
    return ds.X, ds.y


def fitted(Xt, yt, rm, seed: int, statistic: str, **changes) -> SpreadLogisticRegressionCV:
    """The estimator at SMALL (with ``changes``) fitted on the releases; paired releases with the
    ``spread`` learner's prior for them (naive Bayes)."""
    if isinstance(rm, PairedRecordMechanism):
        changes = {"prior": "naive-bayes"} | changes
    est = SpreadLogisticRegressionCV(test_statistic=statistic, random_state=seed, **(SMALL | changes))
    return est.fit(Xt, yt, mechanism=rm)


def p_value(Xt, yt, rm, seed: int, statistic: str, **changes) -> float:
    return float(fitted(Xt, yt, rm, seed, statistic, **changes).p_value_)


def level_name(only: str | None, seed0: int, n: int) -> str:
    """The level part's file name (without suffix)."""
    name = "level" if only is None else f"level_{only.replace(':', '_')}_seed{seed0}"
    return name if n == N_LEVEL else f"{name}_records{n}"


def run_level(
    pools: int, statistic: str, out: Path, seed0: int = 10_000, only: str | None = None, n: int = N_LEVEL
) -> list[list]:
    rows, body = [], []
    name = level_name(only, seed0, n)
    for release in RELEASES:
        for n_classes in (2, 3):
            if only is not None and only != f"{release}:{n_classes}":
                continue
            rm = record_mechanism(release, n_classes)
            ps, zs = [], []
            t = time.perf_counter()
            for s in range(pools):
                seed = seed0 + s
                rng = np.random.default_rng([seed, n_classes, RELEASES.index(release)])
                X, y = pool(n, n_classes, None, rng)
                Xt, yt = rm.release(X, y, rng=rng)  # paired: yt all NaN, passed as is
                t0 = time.perf_counter()
                est = fitted(Xt, yt, rm, seed, statistic)
                ps.append(float(est.p_value_))
                row = {"release": release, "classes": n_classes, "seed": seed, "p_value": ps[-1]}
                if "z" in est.gain_:  # paired: the independence test's p-value as a normal quantile
                    zs.append(float(est.gain_["z"]))
                    row["z"] = zs[-1]
                rows.append(row | {"seconds": round(time.perf_counter() - t0, 3)})
            ps = np.array(ps)
            line = [release, n_classes, pools, f"{ps.mean():.3f}"]
            for a in ALPHAS:
                k = int((ps <= a).sum())
                lo, hi = clopper_pearson(k, pools)
                line.append(f"{k}/{pools} = {k / pools:.4f} [{lo:.4f}, {hi:.4f}]")
            body.append(line)
            z = f" z mean {np.mean(zs):.3f} sd {np.std(zs, ddof=1):.3f}" if len(zs) > 1 else ""
            print(" | ".join(map(str, line)), f"({time.perf_counter() - t:.0f} s){z}", flush=True)
            write_csv(out / f"{name}.csv", rows, command=command_line())
    return body


def power_name(classes: int, release: str, changes: dict) -> str:
    """The power part's file name (without suffix)."""
    extra = ("_3classes" if classes == 3 else "") + ("_paired" if release == "paired" else "")
    return "power" + extra + "".join(f"_{k}{v}" for k, v in changes.items())


def run_power(
    pools: int, out: Path, statistics=STATISTICS, grid=POWER_GRID, classes=2, release="split", **changes
) -> list[list]:
    """Kept models per (records, label flip) of split releases, or per (records, ε per record) of
    paired releases (``release="paired"``: the independence test, so the statistic is "loglik" only)."""
    out_name = power_name(classes, release, changes)
    rows, body = [], []
    for n, flip in grid:
        if release == "paired":
            rm = record_mechanism("paired", classes, eps=flip)
        else:
            rm = record_mechanism("split", classes, flip)
        ps = {st: [] for st in statistics}
        t = time.perf_counter()
        for s in range(pools):
            seed = 20_000 + s
            rng = np.random.default_rng([seed, n, int(flip * 100)])
            X, y = pool(n, classes, POWER_COEF if classes == 2 else POWER_COEF3, rng)
            Xt, yt = rm.release(X, y, rng=rng)
            row = {"records": n, ("epsilon" if release == "paired" else "label_flip"): flip, "seed": seed}
            for st in statistics:
                ps[st].append(p_value(Xt, yt, rm, seed, st, **changes))
                row[f"p_{st}"] = ps[st][-1]
            rows.append(row)
        line = [n, flip, pools]
        for st in statistics:
            p = np.array(ps[st])
            line.append(" / ".join(f"{(p <= a).mean():.2f}" for a in ALPHAS))
        body.append(line)
        print(" | ".join(map(str, line)), f"({time.perf_counter() - t:.0f} s)", flush=True)
        write_csv(out / f"{out_name}.csv", rows, command=command_line())
    return body


def run_adult(eps: list[float], seeds: int, config: str, out: Path) -> list[list]:
    """The demo's Adult releases: ``spread`` (this estimator, the demo's settings) against
    ``spread-plain`` and the majority class, per ε and seed."""
    from fedrr.assembly import build_population
    from fedrr.experiment import load_scenario
    from fedrr.learners import FitData, fit_and_score
    from fedrr.pool import Pool
    from fedrr.release import offline_release

    spec = load_scenario(config)
    rows, body = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for cell in [c for c in spec.cells() if c.grid_value in eps and c.r < seeds]:
            cfg = cell.run_config(results_dir=tmp)
            population = build_population(cfg)
            test = population.test_set()
            pool_ = Pool.from_releases([offline_release(population, cfg.seed)], {})
            data = FitData(pool_.X, pool_.y, pool_.mechanism_arg())
            o = fit_options(cfg)
            row = {"epsilon": cell.grid_value, "seed": cell.r}
            for name in ("spread", "spread-plain", "majority"):
                t = time.perf_counter()
                res = fit_and_score(name, data, test, o)
                row[name] = round(float(res.entry.get("accuracy", np.nan)), 4)
                if name == "spread":
                    est = res.estimator
                    row.update(
                        kept=not est.fallback_,
                        p_value=round(float(est.p_value_), 4),
                        C=est.C_,
                        heldout_auc=round(float(est.gain_.get("auc", np.nan)), 4),
                    )
                row[f"{name}_seconds"] = round(time.perf_counter() - t, 1)
            rows.append(row)
            print(row, flush=True)
            write_csv(out / "adult.csv", rows, command=command_line())
            body.append(
                [row["epsilon"], row["seed"], row["spread-plain"], row["majority"], row["spread"], row["kept"]]
                + [row["p_value"], row["heldout_auc"]]
            )
    return body


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("level", "power", "adult"), required=True)
    ap.add_argument("--pools", type=int, default=400, help="pools per setting (level, power)")
    ap.add_argument("--statistic", default="loglik", choices=STATISTICS, help="the level part's test statistic")
    ap.add_argument("--seed0", type=int, default=10_000, help="level: the first pool's seed")
    ap.add_argument(
        "--only",
        default=None,
        choices=[f"{r}:{c}" for r in RELEASES for c in (2, 3)],
        help="level: one setting, release:classes (e.g. sampled:3, paired:2)",
    )
    ap.add_argument("--statistics", default=",".join(STATISTICS), help="power: the test statistics compared")
    ap.add_argument(
        "--records",
        default=None,
        help=f"power: numbers of records (default: the grid's); level: the records per pool (default {N_LEVEL})",
    )
    ap.add_argument("--classes", type=int, default=2, choices=(2, 3), help="power: classes (3: coef POWER_COEF3)")
    ap.add_argument("--test-fraction", type=float, default=None, help="power: test_fraction (default: the estimator's)")
    ap.add_argument("--max-iter", type=int, default=None, help="power: max_iter of the tested fit and refit")
    ap.add_argument("--eps", default="1,2", help="Adult, and the power of paired releases: ε per record")
    ap.add_argument("--release", default="split", choices=("split", "paired"), help="power: the release")
    ap.add_argument("--seeds", type=int, default=3, help="Adult: seeds per ε")
    ap.add_argument("--config", default=str(ROOT / "configs" / "adult.toml"))
    ap.add_argument("--out", default=str(ROOT / "results" / "spread_fallback_level"))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.part == "level":
        n = int(args.records) if args.records else N_LEVEL
        body = run_level(args.pools, args.statistic, out, args.seed0, args.only, n)
        args.part = level_name(args.only, args.seed0, n)
        head = ["release", "classes", "pools", "mean p"] + [f"kept at alpha {a} [95 % CI]" for a in ALPHAS]
        title = f"Fallback level: kept models on no-signal pools (N {n}, D {D}, statistic {args.statistic})"
    elif args.part == "power":
        paired = args.release == "paired"
        stats = ["loglik"] if paired else args.statistics.split(",")
        grid = POWER_GRID
        if args.records or paired:
            second = [float(e) for e in args.eps.split(",")] if paired else sorted({f for _, f in POWER_GRID})
            records = args.records or ",".join(str(n) for n in sorted({n for n, _ in POWER_GRID}))
            grid = [(n, f) for n in map(int, records.split(",")) for f in second]
        changes = {k: v for k, v in (("test_fraction", args.test_fraction), ("max_iter", args.max_iter)) if v}
        body = run_power(args.pools, out, stats, grid, args.classes, args.release, **changes)
        head = ["records", "ε per record" if paired else "label flip", "pools"] + [
            f"kept, {st} (alpha {' / '.join(map(str, ALPHAS))})" for st in stats
        ]
        coef = (POWER_COEF if args.classes == 2 else POWER_COEF3).tolist()
        title = f"Fallback power: kept models, synthetic logistic, coef {coef}, {args.release} release" + "".join(
            f", {k} {v}" for k, v in changes.items()
        )
        args.part = power_name(args.classes, args.release, changes)
    else:
        body = run_adult([float(e) for e in args.eps.split(",")], args.seeds, args.config, out)
        head = ["ε", "seed", "spread-plain", "majority", "spread (CV)", "kept", "p-value", "held-out AUC"]
        title = f"Fallback on Adult: the releases of {os.path.relpath(Path(args.config).resolve(), ROOT)}"
    print(write_report(out / f"{args.part}.md", title, markdown_table(head, body), argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
