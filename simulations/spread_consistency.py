"""Is spread-EM consistent? Parameter error ‖(coef, intercept) − θ0‖₂ against N on synthetic logistic
data with a known θ0, for spread-EM (fedrr's default MCMC E-step), Barber's importance-sampling
E-step (S = 10), naive logistic regression on the releases and the clean-data oracle. No penalty
anywhere (C = ∞), so every estimator targets θ0 itself.

Cases
  discrete        D = 6 independent features with K = 5 states (model input s/(K−1)), per-feature state
                  probabilities drawn once from Dirichlet(1); 5-ary RR (flip 0.3) on every feature, label
                  flip 0.2. The factorised learned prior is correctly specified.
  gaussian_corr   d = 4 correlated inputs x ~ N(0, Σ), Σ = non_isotropic_cov(d, condition=10) drawn once;
                  GaussianMechanism(sigma=0.5, delta=1e-5) per feature needs declared bounds, so inputs
                  lie in the box |x_j| ≤ B = 4·max_j √Σ_jj (rows outside are redrawn, ~1e-4 of rows,
                  which keeps p(y | x) exactly logistic); label flip 0.2. The learned prior is a product
                  of per-feature Gaussians: misspecified here, so the spread MLE may have a bias floor.
  gaussian_indep  the same with Σ replaced by diag(eigenvalues of Σ): non-isotropic but independent,
                  so the factorised prior is right. Separates "the algorithm is inconsistent" from "the
                  factorised prior is wrong".

Each (case, N, repeat) draws its data and noise from SeedSequence(seed, spawn_key=(case, N, repeat)).
Writes spread_consistency.csv, .png and .md to --out.

    python simulations/spread_consistency.py                              # N ∈ {1e3, 1e4, 1e5}, 3 repeats (~35 min)
    python simulations/spread_consistency.py --quick --out /tmp/barber    # N ∈ {1e3, 3e3}, 1 repeat
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from fedrr.datasets import make_logistic_discrete, make_logistic_gaussian, non_isotropic_cov
from fedrr.estimators import NaiveLogisticRegression, SpreadLogisticRegression
from fedrr.io import atomic_write_text, command_line, markdown_table, provenance, rng_for, write_csv
from fedrr.mechanisms import GaussianMechanism, RandomizedResponse, RecordMechanism

CASES = ("discrete", "gaussian_corr", "gaussian_indep")
METHODS = ("spread", "paper", "naive", "clean")
LABELS = {
    "spread": "spread-EM (default, mcmc)",
    "paper": "paper variant (IS, S=10)",
    "naive": "naive LR on releases",
    "clean": "clean-data oracle",
}
STYLE = {
    "spread": ("tab:blue", "o", "-"),
    "paper": ("tab:purple", "x", "-."),
    "naive": ("tab:red", "v", "-"),
    "clean": ("k", "s", ":"),
}
D_DISC, K_DISC, FLIP_X, FLIP_Y = 6, 5, 0.3, 0.2
COEF_DISC, B_DISC = np.array([2.0, -1.5, 1.0, -2.0, 1.5, -1.0]), 0.0  # mean logit ≈ 0: balanced classes
D_GAUSS, COEF_GAUSS, B_GAUSS, SIGMA_X, BOX_SD = 4, np.array([1.5, -1.0, 0.5, 2.0]), -0.5, 0.5, 4.0


class Setup:
    """θ0, the input law and the mechanism of one case, fixed for the whole study."""

    def __init__(self, case: str, seed: int):
        rng = rng_for(seed, 900, CASES.index(case))
        self.case = case
        if case == "discrete":
            self.coef, self.intercept = COEF_DISC, B_DISC
            self.probs = [rng.dirichlet(np.ones(K_DISC)) for _ in range(D_DISC)]
            self.rm = RecordMechanism(
                RandomizedResponse(K_DISC, FLIP_X), RandomizedResponse(2, FLIP_Y), n_features=D_DISC
            )
            self.encode = lambda X: X / (K_DISC - 1.0)
        else:
            self.coef, self.intercept = COEF_GAUSS, B_GAUSS
            self.cov = non_isotropic_cov(D_GAUSS, rng_for(seed, 900, 1), condition=10.0)  # one Σ for both cases
            if case == "gaussian_indep":
                self.cov = np.diag(np.linalg.eigvalsh(self.cov))
            sd = np.sqrt(np.diag(self.cov))
            self.box = BOX_SD * float(sd.max())
            self.max_corr = float(np.max(np.abs(self.cov / np.outer(sd, sd) - np.eye(D_GAUSS))))
            mech = GaussianMechanism(sigma=SIGMA_X, delta=1e-5, lower=-self.box, upper=self.box)
            self.rm = RecordMechanism(mech, RandomizedResponse(2, FLIP_Y), n_features=D_GAUSS)
            self.encode = lambda X: X
        self.theta0 = np.concatenate([self.coef, [self.intercept]])

    def sample(self, n: int, rng: np.random.Generator):
        """(X, y, rows rejected by the box) of n clean records."""
        if self.case == "discrete":
            ds = make_logistic_discrete(n, K_DISC, self.coef, self.intercept, feature_probs=self.probs, rng=rng)
            return ds.X, ds.y, 0
        Xs, ys, rejected, need = [], [], 0, n
        while need > 0:
            ds = make_logistic_gaussian(int(need * 1.01) + 10, self.coef, self.intercept, cov=self.cov, rng=rng)
            ok = np.all(np.abs(ds.X) <= self.box, axis=1)
            rejected += int((~ok).sum())
            Xs.append(ds.X[ok][:need])
            ys.append(ds.y[ok][:need])
            need -= Xs[-1].shape[0]
        return np.concatenate(Xs), np.concatenate(ys), rejected


def fit(method: str, setup: Setup, X, y, Xt, yt, seed: int, max_iter: int | None):
    """(θ̂ = (coef, intercept), seconds, EM iterations or '') of one method."""
    t0, n_iter = time.perf_counter(), ""
    if method == "clean":
        m = LogisticRegression(C=np.inf, max_iter=5000).fit(setup.encode(X), y)
    elif method == "naive":
        m = NaiveLogisticRegression(C=np.inf, max_iter=5000).fit(Xt, yt, mechanism=setup.rm)
    else:
        kw = dict(C=np.inf, random_state=seed, encoding="unit", **({} if max_iter is None else {"max_iter": max_iter}))
        if method == "paper":
            kw.update(e_step="importance", n_samples=10)
        m = SpreadLogisticRegression(**kw).fit(Xt, yt, mechanism=setup.rm)
        n_iter = m.n_iter_
    return np.concatenate([m.coef_.ravel(), [float(m.intercept_[0])]]), time.perf_counter() - t0, n_iter


def _mean_sd(v, digits=3) -> str:
    v = np.asarray(v, float)
    return (
        "—"
        if v.size == 0
        else f"{v[0]:.{digits}f}"
        if v.size == 1
        else f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}"
    )


def tables(rows, cases, methods, ns):
    """Per case: the error table (method × N), the ratio table, and the requirement verdicts."""
    by: dict[tuple, list] = {}
    for r in rows:
        by.setdefault((r["case"], r["method"], r["N"]), []).append(r)
    get = lambda c, m, n, k: [r[k] for r in by.get((c, m, n), [])]  # noqa: E731
    n_lo, n_hi = ns[0], ns[-1]
    blocks, verdicts = [], []
    for c in cases:
        tab = markdown_table(
            [f"{c}: ‖θ̂ − θ0‖₂"] + [f"N={n:,}" for n in ns],
            [[LABELS[m]] + [_mean_sd(get(c, m, n, "param_error")) for n in ns] for m in methods],
        )
        ratio_rows = []
        for m in methods:
            lo, hi = get(c, m, n_lo, "param_error"), get(c, m, n_hi, "param_error")
            if not (lo and hi):
                continue
            ratio = np.mean(lo) / np.mean(hi)
            ratio_rows.append(
                [
                    LABELS[m],
                    f"{ratio:.2f}",
                    _mean_sd(get(c, m, n_hi, "coef_norm_ratio"), 2),
                    " / ".join(f"{np.mean(get(c, m, n, 'seconds')):.1f}" for n in ns if get(c, m, n, "seconds")),
                ]
            )
            if m == "spread":
                verdicts.append(
                    f"{c}: default spread-EM error falls {ratio:.2f}× from N={n_lo:,} to N={n_hi:,} "
                    f"({'≥ 2×: holds' if ratio >= 2 else '< 2×: does NOT hold'})"
                )
            if m == "naive":
                verdicts.append(
                    f"{c}: naive error ratio {ratio:.2f} ("
                    + ("does not fall 2×: holds" if ratio < 2 else "falls ≥ 2×: the naive part does NOT hold")
                    + ")"
                )
        rtab = markdown_table(
            [
                "method",
                f"err(N={n_lo:,}) / err(N={n_hi:,})",
                f"‖coef‖/‖coef0‖ at N={n_hi:,}",
                "seconds per fit at " + " / ".join(f"{n:,}" for n in ns),
            ],
            ratio_rows,
        )
        blocks.append((tab, rtab))
    return blocks, verdicts, get


def plot(get, cases, methods, ns, repeats, command, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(cases), figsize=(5.5 * len(cases), 4.6), squeeze=False)
    titles = {
        "discrete": f"discrete: D={D_DISC}, K={K_DISC}, RR {FLIP_X} / label {FLIP_Y}",
        "gaussian_corr": f"correlated Gaussian: d={D_GAUSS}, cond 10, σ={SIGMA_X} / label {FLIP_Y}\n"
        "(factorised prior misspecified)",
        "gaussian_indep": f"independent Gaussian, variances 0.32…3.2: d={D_GAUSS}, σ={SIGMA_X} / label {FLIP_Y}",
    }
    for ax, c in zip(axes[0], cases):
        for m in methods:
            xs = [n for n in ns if get(c, m, n, "param_error")]
            errs = [np.asarray(get(c, m, n, "param_error")) for n in xs]
            col, mk, ls = STYLE[m]
            ax.errorbar(
                xs,
                [e.mean() for e in errs],
                yerr=[e.std(ddof=1) if e.size > 1 else 0.0 for e in errs],
                color=col,
                marker=mk,
                ls=ls,
                capsize=3,
                label=LABELS[m],
            )
        if get(c, "clean", ns[0], "param_error"):
            ref = np.mean(get(c, "clean", ns[0], "param_error")) * np.sqrt(ns[0] / np.asarray(ns, float))
            ax.plot(ns, ref, color="0.6", lw=0.8, ls="--", label="∝ 1/√N (from the oracle)")
        ax.set(xscale="log", yscale="log", xlabel="N (records)", ylabel="‖(coef, intercept) − θ0‖₂")
        ax.set_title(titles[c], fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"Spread-EM consistency (C = ∞, mean ± sd over {repeats} repeats)", fontsize=10)
    fig.text(0.01, 0.005, command, fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/barber", help="output directory (default results/barber)")
    ap.add_argument("--repeats", type=int, default=None, help="default 3 (quick: 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="N ∈ {1e3, 3e3}, 1 repeat")
    ap.add_argument("--n", type=int, nargs="+", default=None, help="sample sizes (default 1000 10000 100000)")
    ap.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--max-iter", type=int, default=None, help="EM iterations (default: the library's)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)  # scikit-learn deprecation and convergence chatter
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    out = Path(args.out)
    repeats = args.repeats or (1 if args.quick else 3)
    ns = tuple(args.n) if args.n else ((1000, 3000) if args.quick else (1000, 10_000, 100_000))
    cases, methods, command = tuple(args.cases), tuple(args.methods), command_line(argv)
    setups = {c: Setup(c, args.seed) for c in cases}
    rows, t0 = [], time.perf_counter()
    for c in cases:
        s = setups[c]
        for n in ns:
            for r in range(repeats):
                rng = rng_for(args.seed, CASES.index(c), n, r)
                X, y, rejected = s.sample(n, rng)
                Xt, yt = s.rm.release(X, y, rng=rng)
                seed = int(rng.integers(2**31 - 1))
                line = []
                for mi, m in enumerate(methods):
                    theta, secs, n_iter = fit(m, s, X, y, Xt, yt, seed + mi, args.max_iter)
                    err = float(np.linalg.norm(theta - s.theta0))
                    rows.append(
                        {
                            "case": c,
                            "N": n,
                            "repeat": r,
                            "method": m,
                            "param_error": err,
                            "coef_error": float(np.linalg.norm(theta[:-1] - s.theta0[:-1])),
                            "coef_norm_ratio": float(np.linalg.norm(theta[:-1]) / np.linalg.norm(s.theta0[:-1])),
                            "seconds": secs,
                            "n_iter": n_iter,
                            "rejected_rows": rejected,
                            "theta": " ".join(f"{v:.4f}" for v in theta),
                            "seed": args.seed,
                        }
                    )
                    line.append(f"{m}={err:.3f}({secs:.1f}s)")
                write_csv(out / "spread_consistency.csv", rows, command)
                print(
                    f"{c} N={n} repeat {r + 1}/{repeats} [{time.perf_counter() - t0:.0f} s] " + " ".join(line),
                    flush=True,
                )
    total = time.perf_counter() - t0
    blocks, verdicts, get = tables(rows, cases, methods, ns)
    plot(get, cases, methods, ns, repeats, command, out / "spread_consistency.png")
    desc = {
        "discrete": lambda s: (
            f"* discrete: D={D_DISC} independent features, K={K_DISC} states (input s/4), state "
            f"probabilities from one Dirichlet(1) draw, θ0 = {np.round(s.theta0, 3).tolist()}; "
            f"{K_DISC}-ary RR flip {FLIP_X} on every feature, label flip {FLIP_Y}."
        ),
        "gaussian_corr": lambda s: (
            f"* gaussian_corr: d={D_GAUSS} correlated inputs, Σ = non_isotropic_cov(condition=10) "
            f"(max |corr| {s.max_corr:.2f}), θ0 = {np.round(s.theta0, 3).tolist()}; "
            f"GaussianMechanism(sigma={SIGMA_X}, delta=1e-5) per feature with declared bounds "
            f"±{s.box:.2f} = ±{BOX_SD:g}·max sd (rows outside the box redrawn — keeps p(y|x) "
            f"exactly logistic); label flip {FLIP_Y}. The learned prior is a product of "
            "per-feature Gaussians: misspecified for correlated inputs, so the spread MLE has a "
            "bias floor here."
        ),
        "gaussian_indep": lambda s: (
            "* gaussian_indep: as gaussian_corr with Σ replaced by the diagonal matrix of its "
            f"eigenvalues ({', '.join(f'{v:.2f}' for v in np.diag(s.cov))}): non-isotropic but "
            f"independent, so the factorised prior is right; bounds ±{s.box:.2f}."
        ),
    }
    md = [
        "# Consistency of spread-EM on synthetic data with known θ0",
        "",
        f"Command: `{command}` (wall time {total / 60:.1f} min, serial). Written: {provenance()}. "
        "Files: `spread_consistency.csv`, `spread_consistency.png`.",
        f"No penalty (C = ∞) for every estimator. Error = ‖(coef, intercept) − θ0‖₂, mean ± sd over {repeats} "
        "repeats (new data and noise each). Spread fits use the library defaults otherwise (default EM schedule, "
        "learned prior)"
        + (f", here max_iter={args.max_iter}" if args.max_iter else "")
        + "; EM iterations and seconds per fit are in the CSV.",
        "",
    ]
    md += [desc[c](setups[c]) for c in cases] + [""]
    for tab, rtab in blocks:
        md += [tab, "", rtab, ""]
    md += [
        "Requirements (default spread-EM's error falls ≥ 2× from the smallest to the largest N; the naive one does "
        "not)" + (" — QUICK configuration, not a test of the requirement" if args.quick else "") + ":",
        "",
    ]
    md += [f"* {v}" for v in verdicts]
    atomic_write_text(out / "spread_consistency.md", "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
