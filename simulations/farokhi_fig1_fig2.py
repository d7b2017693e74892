"""Reproduce Farokhi (2020) Fig 1 (Lending Club interest rate) and Fig 2 (Adult), then go beyond.

Setting of the paper (§5): inputs and target scaled to [0, 1]; Gaussian mechanism on the inputs
only, δ = 1e-2, ε·p_x on a log grid over [1, 100]; n = 50 training rows; test on the remaining
clean rows; linear regression trained (a) without regularisation, (b) with the Lipschitz
regulariser of eq (8) and (c) with the Gaussian-optimal regulariser of §4 (Thm 6). The metric is
the regression loss, test mean squared error, for both datasets (the paper treats Adult's 0/1
income label by linear regression too); for Adult the accuracy of thresholding at 0.5 is kept
in the CSV as well.

Methods (column ``method``):
  mean        predict the training mean of y (the baseline every method collapses to)
  ls          least squares on the noisy inputs (= W-DRO with ρ = 0)
  ridge_cv    ridge, α tuned by leave-one-out CV on the noisy data (a fair tuned baseline)
  lipschitz   WassersteinDRORegression(rho="auto"): eq (8) with the corrected squared-loss
              constant ρ(R_x‖θ‖² + Y‖θ‖), intercept unpenalised, y bounds [0, 1]
  remark2     the same with Remark 2's printed constant (X + 1 + Y)‖(θ, b)‖² (paper as printed)
  gauss_dro   GaussianDROLinearRegression(rho="auto"): Thm 6, solved as the equivalent SOCP; the
              SDP itself is run at repeat 0 of every point of the paper's setting and compared
              (file sdp_check.csv)
ρ = √p_x·σ (the noise part of Thms 2-5; ζ = 0).

Calibrations: "farokhi" (Thm 1: Δ = range·p_x = p_x, classic σ = √(2 ln(1.25/δ))Δ/ε at every ε) and
fedrr's "analytic" Gaussian mechanism (L2 sensitivity √p_x, exact (ε, δ)). Sweep: both
calibrations × n ∈ {50, 1000, 10000} (Lending Club has 9,182 rows: 8,000 there) × ε·p_x on a log
grid over [1, 10⁶] with 4 points per decade (the paper's [1, 100] is the first 9), 20 repeats.
The random stream of a fit depends only on (seed, dataset, calibration, n, ε index, repeat).
Each worker process uses one BLAS thread (oversubscribed BLAS threads made the run 5x slower).

    .venv/bin/python simulations/farokhi_fig1_fig2.py                 # full run (~6 min on 2 cores)
    .venv/bin/python simulations/farokhi_fig1_fig2.py --quick --out /tmp/farokhi   # smoke test
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from multiprocessing import get_context
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one BLAS thread per worker
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

DELTA = 1e-2
METHODS = ("mean", "ls", "ridge_cv", "lipschitz", "remark2", "gauss_dro")
LABELS = {
    "mean": "training mean",
    "ls": "least squares (unregularised)",
    "ridge_cv": "ridge, LOO-CV α",
    "lipschitz": "Lipschitz-regularised (eq 8, corrected L)",
    "remark2": "Lipschitz, Remark 2 as printed",
    "gauss_dro": "Gaussian-optimal (Thm 6)",
}
STYLE = {
    "mean": ("k", "--"),
    "ls": ("tab:blue", "-"),
    "ridge_cv": ("tab:gray", ":"),
    "lipschitz": ("tab:orange", "-"),
    "remark2": ("tab:red", "-."),
    "gauss_dro": ("tab:green", "-"),
}
# the mean predictor on top of the (often identical) Lipschitz fit, which is drawn wide underneath
LINE = {"mean": {"zorder": 5, "lw": 1.2}, "lipschitz": {"zorder": 1, "lw": 4, "alpha": 0.5}}
_DATA: dict = {}


def load(name: str):
    """(X, y) scaled to [0, 1]. Adult: the 5 numeric inputs plus the 7 categoricals integer-coded and
    scaled to [0, 1] (the paper encodes categoricals as integers); p_x = 12."""
    if name not in _DATA:
        from fedrr.datasets import load_adult, load_lending_club

        if name == "lending_club":
            d = load_lending_club(scale="unit")
            X, y = np.asarray(d.X, float), np.asarray(d.y, float)
        else:
            d = load_adult(encoding="ordinal", scale="unit")
            X = np.asarray(d.X, float)
            top = X.max(axis=0)
            X = X / np.where(top > 0, top, 1.0)
            y = np.asarray(d.y, float)
        _DATA[name] = (X, y)
    return _DATA[name]


def n_grid(name: str, quick: bool) -> list[int]:
    if quick:
        return [50, 200]
    return [50, 1000, 8000 if name == "lending_club" else 10000]


def run_task(task: dict) -> tuple[list[dict], list[dict]]:
    """Fit every method on one noisy training sample; return (result rows, SDP-check rows)."""
    warnings.filterwarnings("ignore")
    from sklearn.linear_model import LinearRegression, RidgeCV

    from fedrr.errors import ConvergenceError
    from fedrr.estimators.dro import GaussianDROLinearRegression, WassersteinDRORegression
    from fedrr.mechanisms import GaussianMechanism

    X, y = load(task["dataset"])
    N, p = X.shape
    rng = np.random.default_rng(
        [task["seed"], task["ds_id"], task["cal_id"], task["n"], task["eps_id"], task["repeat"]]
    )
    idx = rng.permutation(N)
    tr, te = idx[: task["n"]], idx[task["n"] :]
    eps = task["eps_px"] / p
    mech = GaussianMechanism(eps, DELTA, np.zeros(p), np.ones(p), calibration=task["calibration"])
    Xt = mech.release(X[tr], rng)
    ytr, Xte, yte = y[tr], X[te], y[te]
    models = {
        "ls": lambda: LinearRegression(),
        "ridge_cv": lambda: RidgeCV(alphas=np.logspace(-4, 6, 21)),
        "lipschitz": lambda: WassersteinDRORegression(rho="auto", mechanism=mech, y_lower=0.0, y_upper=1.0),
        "remark2": lambda: WassersteinDRORegression(
            rho="auto", mechanism=mech, y_lower=0.0, y_upper=1.0, lipschitz="remark2"
        ),
        "gauss_dro": lambda: GaussianDROLinearRegression(rho="auto", mechanism=mech),
    }
    base = dict(
        dataset=task["dataset"],
        calibration=task["calibration"],
        n=task["n"],
        eps_px=task["eps_px"],
        eps=eps,
        sigma=mech.sigma,
        eps_exact=mech.epsilon_exact,
        repeat=task["repeat"],
    )
    rows, checks = [], []
    fitted = {}
    for method in METHODS:
        t0 = time.perf_counter()
        err, rho = "", float("nan")
        if method == "mean":
            pred, coef_norm = np.full(yte.shape, ytr.mean()), 0.0
        else:
            try:
                m = models[method]().fit(Xt, ytr)
                fitted[method] = m
                pred, coef_norm = m.predict(Xte), float(np.linalg.norm(m.coef_))
                rho = float(getattr(m, "rho_", float("nan")))
            except ConvergenceError as exc:  # recorded, never replaced by a zero model
                pred, coef_norm, err = np.full(yte.shape, np.nan), float("nan"), str(exc)[:200]
        mse = float(np.mean((pred - yte) ** 2))
        acc = float(np.mean((pred > 0.5) == (yte > 0.5))) if task["dataset"] == "adult" else float("nan")
        rows.append(
            dict(
                base,
                method=method,
                rho=rho,
                test_mse=mse,
                test_acc=acc,
                coef_norm=coef_norm,
                seconds=time.perf_counter() - t0,
                error=err,
            )
        )
    if task.get("sdp_check") and "gauss_dro" in fitted:
        socp = fitted["gauss_dro"]
        t0 = time.perf_counter()
        try:
            sdp = GaussianDROLinearRegression(rho="auto", mechanism=mech, method="sdp").fit(Xt, ytr)
            checks.append(
                dict(
                    base,
                    rho=sdp.rho_,
                    sdp_seconds=time.perf_counter() - t0,
                    socp_seconds=socp.solve_seconds_,
                    rel_objective_diff=abs(sdp.objective_ - socp.objective_) / socp.objective_,
                    max_coef_diff=float(np.max(np.abs(sdp.coef_ - socp.coef_))),
                    intercept_diff=abs(sdp.intercept_ - socp.intercept_),
                    error="",
                )
            )
        except ConvergenceError as exc:
            checks.append(dict(base, rho=socp.rho_, sdp_seconds=time.perf_counter() - t0, error=str(exc)[:200]))
    return rows, checks


def write_csv(path: Path, rows: list[dict]) -> None:
    """CSV (gzip-compressed if the name ends in .gz), floats to 7 significant digits."""
    import csv
    import gzip

    keys = list(dict.fromkeys(k for r in rows for k in r))
    fmt = [{k: (f"{v:.7g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(fmt)


def _nanmean(values) -> float:
    a = np.asarray(values, dtype=float)
    return float(np.mean(a[np.isfinite(a)])) if np.isfinite(a).any() else float("nan")


def summarise(rows: list[dict]) -> list[dict]:
    """Mean, standard error and paired ratio to the mean predictor per (dataset, calibration, n, ε·p_x, method)."""
    from collections import defaultdict

    groups = defaultdict(list)
    mean_mse = {
        (r["dataset"], r["calibration"], r["n"], r["eps_px"], r["repeat"]): r["test_mse"]
        for r in rows
        if r["method"] == "mean"
    }
    for r in rows:
        groups[(r["dataset"], r["calibration"], r["n"], r["eps_px"], r["method"])].append(r)
    out = []
    for (ds, cal, n, epx, method), rs in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2], kv[0][3], METHODS.index(kv[0][4]))
    ):
        mse = np.array([r["test_mse"] for r in rs])
        ratio = np.array([r["test_mse"] / mean_mse[(ds, cal, n, epx, r["repeat"])] for r in rs])
        ok = np.isfinite(mse)
        out.append(
            dict(
                dataset=ds,
                calibration=cal,
                n=n,
                eps_px=epx,
                eps=rs[0]["eps"],
                sigma=rs[0]["sigma"],
                eps_exact=rs[0]["eps_exact"],
                rho=_nanmean([r["rho"] for r in rs]),
                method=method,
                repeats=len(rs),
                failures=int((~ok).sum()),
                test_mse=float(np.mean(mse[ok])) if ok.any() else float("nan"),
                test_mse_se=float(np.std(mse[ok], ddof=1) / math.sqrt(ok.sum())) if ok.sum() > 1 else float("nan"),
                ratio_to_mean=float(np.mean(ratio[ok])) if ok.any() else float("nan"),
                ratio_to_mean_se=float(np.std(ratio[ok], ddof=1) / math.sqrt(ok.sum()))
                if ok.sum() > 1
                else float("nan"),
                test_acc_mean=_nanmean([r["test_acc"] for r in rs]),
                coef_norm_mean=_nanmean([r["coef_norm"] for r in rs]),
            )
        )
    return out


def plot(summary: list[dict], out: Path, paper_max: float, datasets: list[str]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(ds, cal, n, method, key, max_eps=np.inf):
        pts = sorted(
            (s["eps_px"], s[key], s[key + "_se"])
            for s in summary
            if s["dataset"] == ds
            and s["calibration"] == cal
            and s["n"] == n
            and s["method"] == method
            and s["eps_px"] <= max_eps * (1 + 1e-9)
        )
        return tuple(np.array(v) for v in zip(*pts)) if pts else None

    files = []
    titles = {
        "lending_club": "Fig 1: Lending Club interest rate",
        "adult": "Fig 2: Adult (income >50K, linear regression)",
    }
    for k, ds in enumerate(datasets):
        n0 = min(s["n"] for s in summary if s["dataset"] == ds)
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.3))
        for ax, key, ylabel in (
            (axes[0], "test_mse", "test MSE (clean data)"),
            (axes[1], "ratio_to_mean", "test MSE / MSE of training mean"),
        ):
            for method in METHODS:
                x, m, se = series(ds, "farokhi", n0, method, key, paper_max)
                c, ls = STYLE[method]
                ax.errorbar(
                    x,
                    m,
                    yerr=se,
                    color=c,
                    ls=ls,
                    marker="o",
                    ms=3,
                    capsize=2,
                    label=LABELS[method],
                    **LINE.get(method, {}),
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("ε · p_x  (ε per record, Farokhi calibration, δ = 0.01)")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle(f"{titles[ds]} — paper setting: n = {n0}, mean ± s.e. over repeats")
        fig.tight_layout()
        f = out / f"fig{k + 1}_{ds}_paper_setting.png"
        fig.savefig(f, dpi=130)
        plt.close(fig)
        files.append(f)

        ns = sorted({s["n"] for s in summary if s["dataset"] == ds})
        cals = ["farokhi", "analytic"]
        fig, axes = plt.subplots(
            len(cals), len(ns), figsize=(4.2 * len(ns), 3.6 * len(cals)), sharex=True, sharey=True, squeeze=False
        )
        for i, cal in enumerate(cals):
            for j, n in enumerate(ns):
                ax = axes[i][j]
                for method in METHODS:
                    got = series(ds, cal, n, method, "ratio_to_mean")
                    if got is None:
                        continue
                    x, m, se = got
                    c, ls = STYLE[method]
                    ax.errorbar(
                        x,
                        m,
                        yerr=se,
                        color=c,
                        ls=ls,
                        marker="o",
                        ms=2.5,
                        capsize=1.5,
                        label=LABELS[method],
                        **LINE.get(method, {}),
                    )
                ax.axvspan(1, paper_max, color="y", alpha=0.08)
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_title(f"{cal} calibration, n = {n}", fontsize=10)
                ax.grid(True, which="both", alpha=0.3)
                if i == len(cals) - 1:
                    ax.set_xlabel("ε · p_x")
                if j == 0:
                    ax.set_ylabel("test MSE / MSE of training mean")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{ds}: where the methods separate (shaded: the paper's ε·p_x range)")
        fig.tight_layout()
        f = out / f"sweep_{ds}_n_and_calibration.png"
        fig.savefig(f, dpi=130)
        plt.close(fig)
        files.append(f)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="tiny grid and 2 repeats (smoke test)")
    ap.add_argument("--out", type=Path, default=Path("results/farokhi"))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--datasets", nargs="+", default=["lending_club", "adult"], choices=["lending_club", "adult"])
    args = ap.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    paper_max = 100.0
    # 4 points per decade over [1, 1e6]; the paper's range [1, 100] is the first 9 (paper_grid is kept
    # separate so that the sweep can be thinned without thinning the paper setting)
    sweep_grid = [1.0, 10.0, 100.0, 1e4] if args.quick else [float(10 ** (k / 4)) for k in range(25)]
    paper_grid = [] if args.quick else [float(10 ** (k / 4)) for k in range(9)]
    n_paper = 50

    def grid(cal, n):
        g = sweep_grid + (paper_grid if cal == "farokhi" and n == n_paper else [])
        return sorted({round(e, 9) for e in g})

    args.out.mkdir(parents=True, exist_ok=True)

    tasks = []
    for ds_id, ds in enumerate(args.datasets):
        for cal_id, cal in enumerate(("farokhi", "analytic")):
            for n in n_grid(ds, args.quick):
                for eps_id, epx in enumerate(grid(cal, n)):
                    for r in range(repeats):
                        paper = cal == "farokhi" and n == n_paper and epx <= paper_max * (1 + 1e-9)
                        tasks.append(
                            dict(
                                dataset=ds,
                                ds_id=ds_id,
                                calibration=cal,
                                cal_id=cal_id,
                                n=n,
                                eps_px=epx,
                                eps_id=eps_id,
                                repeat=r,
                                seed=args.seed,
                                sdp_check=paper and r == 0 and (not args.quick or epx == 1.0),
                            )
                        )
    tasks.sort(key=lambda t: not t["sdp_check"])  # the slow SDP checks first, so the pool stays busy
    t0 = time.perf_counter()
    rows, checks = [], []
    with get_context("fork").Pool(args.jobs) as pool:
        for k, (r, c) in enumerate(pool.imap_unordered(run_task, tasks, chunksize=4), 1):
            rows += r
            checks += c
            if k % 200 == 0 or k == len(tasks):
                print(f"  {k}/{len(tasks)} tasks, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    rows.sort(
        key=lambda r: (r["dataset"], r["calibration"], r["n"], r["eps_px"], r["repeat"], METHODS.index(r["method"]))
    )
    summary = summarise(rows)
    write_csv(args.out / "runs.csv.gz", rows)
    write_csv(args.out / "summary.csv", summary)
    if checks:
        write_csv(args.out / "sdp_check.csv", sorted(checks, key=lambda c: (c["dataset"], c["eps_px"])))
    files = plot(summary, args.out, paper_max, args.datasets)
    elapsed = time.perf_counter() - t0

    print(f"\n{len(tasks)} fits of {len(METHODS) - 1} learners in {elapsed:.0f} s with {args.jobs} processes")
    fails = [r for r in rows if r["error"]]
    print(f"solver failures: {len(fails)}" + (f" (e.g. {fails[0]['method']}: {fails[0]['error']})" if fails else ""))
    if checks:
        ok = [c for c in checks if not c["error"]]
        print(
            f"SDP vs SOCP on {len(checks)} paper-setting problems: {len(checks) - len(ok)} SDP failures; "
            f"max rel. objective diff {max(c['rel_objective_diff'] for c in ok):.1e}, max coef diff "
            f"{max(c['max_coef_diff'] for c in ok):.1e}; SDP {np.median([c['sdp_seconds'] for c in ok]):.2f} s vs "
            f"SOCP {np.median([c['socp_seconds'] for c in ok]):.3f} s (median)"
        )
    for ds in args.datasets:
        for cal in ("farokhi", "analytic"):
            for n in n_grid(ds, args.quick):
                print(f"\n{ds}, {cal}, n = {n}: test MSE / MSE of the training mean (mean over {repeats} repeats)")
                print("  ε·p_x   σ        " + "".join(f"{m:>11}" for m in METHODS[1:]))
                for epx in grid(cal, n):
                    ss = {
                        s["method"]: s
                        for s in summary
                        if s["dataset"] == ds and s["calibration"] == cal and s["n"] == n and s["eps_px"] == epx
                    }
                    print(
                        f"  {epx:<7.3g} {ss['mean']['sigma']:<8.3g} "
                        + "".join(f"{ss[m]['ratio_to_mean']:>11.3f}" for m in METHODS[1:])
                    )
    print("\nwrote", ", ".join(str(p) for p in [args.out / "runs.csv.gz", args.out / "summary.csv", *files]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
