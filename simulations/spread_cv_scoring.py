"""Which held-out score should choose spread-EM's C, and what does the fallback cost? For the
`spread` learner's settings (SpreadLogisticRegressionCV) with ``scoring="loglik"`` (the default:
held-out log p(c̃ | x̃)) and ``scoring="accuracy"`` (the decisions' clean accuracy estimated through
the label mechanism), on the releases of three committed settings:

- ``spread_cv_mnist``: MNIST 7 vs 9, 500 clients, RR flip 0.2 / 0.3 / 0.4 on pixels and label;
- ``barber_fig3_mnist`` at flip 0.4 (the same setting, other splits and noise);
- ``quickstart``: MNIST 7 vs 9, 300 clients, ε per record 1,000 / 3,000 / 10,000, seeds 1000-1004
  as ``simulations/quickstart_targets.py``.

Each fit runs with the fallback off, so both the refit model and the fallback's decision (the
held-out permutation test's p-value against alpha; before issue 29 the fold-summed rank test's z
against its Bonferroni threshold) are recorded; "with fallback" scores the intercept-only
model where the test fails. naive-cv (logistic regression on the releases, C by 5-fold CV
accuracy) is fitted on the same releases. Clean test accuracy and AUC.

Each row also records the held-out AUC against the released labels that the test saw, and
whether the refit's chains agreed (``converged_``, ``prediction_distance_``): what a fallback rule
could use besides the test.

    python simulations/spread_cv_scoring.py                 # ~35 min of fits on 2 cores
    python simulations/spread_cv_scoring.py --parts quickstart --seeds 2 --out /tmp/s
    python simulations/spread_cv_scoring.py --values 0.4,1000 --scorings accuracy --cv-max-iter 120 --out /tmp/s
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from fedrr.assembly import build_population, fit_options
from fedrr.estimators import MajorityClassifier, NaiveLogisticRegression, SpreadLogisticRegressionCV
from fedrr.experiment import load_scenario
from fedrr.io import command_line, markdown_table, write_csv, write_report
from fedrr.learners import release_prior
from fedrr.pool import Pool
from fedrr.release import offline_release

ROOT = Path(__file__).resolve().parents[1]
PARTS = {
    "spread_cv_mnist": ("configs/spread_cv_mnist.toml", None),
    "barber_fig3_mnist": ("configs/paper/barber_fig3_mnist.toml", [3]),  # flip 0.4
    "quickstart": ("configs/quickstart.toml", None),
}


def cells(part: str, seeds: int):
    """(grid value, repeat label, run config) of the part's cells."""
    path, grid = PARTS[part]
    spec = load_scenario(ROOT / path)
    for g in grid if grid is not None else range(len(spec.grid)):
        if part == "quickstart":  # quickstart_targets' seeds: one cell, new seeds
            for s in range(seeds):
                yield spec.grid[g], 1000 + s, spec.cells([g])[0].run_config().replace(seed=1000 + s)
        else:
            for cell in spec.cells([g])[:seeds]:
                yield spec.grid[g], cell.r, cell.run_config(results_dir="/tmp/spread_cv_scoring")


def fit_cell(part: str, value, rep, cfg, scorings=("loglik", "accuracy"), cv_max_iter=40) -> list[dict]:
    pop = build_population(cfg)
    X_test, y_test = pop.test_set()
    pool = Pool.from_releases([offline_release(pop, cfg.seed)])
    mech = pool.mechanism_arg()
    o = fit_options(cfg)
    majority = int(MajorityClassifier().fit(pool.X, pool.y, mechanism=mech).predict(pool.X[:1])[0])
    naive = NaiveLogisticRegression(C=o.C, cv=5, encoding=o.encoding).fit(pool.X, pool.y, mechanism=mech)
    rows = []
    for scoring in scorings:
        t = time.perf_counter()
        est = SpreadLogisticRegressionCV(
            Cs=tuple(sorted({0.01, 0.1, 1.0, 10.0, float(o.C)})),
            prior=release_prior(mech),
            random_state=o.random_state,
            max_iter=o.spread_max_iter,
            cv_max_iter=min(cv_max_iter, o.spread_max_iter),
            encoding=o.encoding,
            scoring=scoring,
            fallback=False,
        ).fit(pool.X, pool.y, mechanism=mech)
        falls = bool(est.p_value_ > est.alpha)  # the held-out permutation test (fallback off: not applied)
        acc = float(est.score(X_test, y_test))
        auc = float(roc_auc_score(y_test, est.decision_function(X_test)))
        rows.append(
            {
                "part": part,
                "grid_value": value,
                "repeat": rep,
                "scoring": scoring,
                "C": est.C_,
                "cv_max_iter": min(cv_max_iter, o.spread_max_iter),
                "heldout_auc": round(float(est.gain_["auc"]), 4),
                "p_value": round(float(est.p_value_), 4),
                "alpha": est.alpha,
                "falls_back": falls,
                "accuracy_refit": acc,
                "auc_refit": round(auc, 4),
                "accuracy_with_fallback": float(np.mean(y_test == majority)) if falls else acc,
                "auc_with_fallback": 0.5 if falls else round(auc, 4),
                "refit_chains_agree": bool(est.estimator_.converged_),
                "refit_prediction_distance": round(float(est.estimator_.prediction_distance_), 3),
                "naive_cv_accuracy": float(naive.score(X_test, y_test)),
                "naive_cv_auc": round(float(roc_auc_score(y_test, naive.decision_function(X_test))), 4),
                "seconds": round(time.perf_counter() - t, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _mean_sd(rs: list[dict], k: str) -> str:
    v = np.array([r[k] for r in rs], float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}"


def summarise(rows: list[dict]) -> str:
    head = ["setting", "value", "scoring", "refit acc", "with fallback", "falls back", "naive-cv acc"]
    head += ["min AUC w/ fallback", "min AUC − naive", "held-out AUC", "p-value", "refit chains agree"]
    body = []
    keys = sorted({(r["part"], r["grid_value"], r["scoring"]) for r in rows}, key=lambda k: (k[0], k[1], k[2]))
    for part, value, scoring in keys:
        rs = [r for r in rows if (r["part"], r["grid_value"], r["scoring"]) == (part, value, scoring)]

        body.append(
            [
                part,
                f"{value:g}",
                scoring,
                _mean_sd(rs, "accuracy_refit"),
                _mean_sd(rs, "accuracy_with_fallback"),
                f"{sum(r['falls_back'] for r in rs)}/{len(rs)}",
                _mean_sd(rs, "naive_cv_accuracy"),
                f"{min(r['auc_with_fallback'] for r in rs):.3f}",
                f"{min(r['auc_with_fallback'] - r['naive_cv_auc'] for r in rs):+.3f}",
                f"{min(r['heldout_auc'] for r in rs):.3f}–{max(r['heldout_auc'] for r in rs):.3f}",
                f"{min(r['p_value'] for r in rs):.3g}–{max(r['p_value'] for r in rs):.3g}",
                f"{sum(r['refit_chains_agree'] for r in rs)}/{len(rs)}",
            ]
        )
    return markdown_table(head, body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--values", default="", help="only these grid values (comma-separated), e.g. 0.4,1000")
    ap.add_argument("--scorings", default="loglik,accuracy")
    ap.add_argument("--cv-max-iter", type=int, default=40, help="EM budget of each cross-validation fit")
    ap.add_argument("--out", default=str(ROOT / "results" / "spread_cv_scoring"))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # the naive fits' convergence warnings at tiny signal
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    for part in args.parts.split(","):
        for value, rep, cfg in cells(part, args.seeds):
            if args.values and float(value) not in {float(v) for v in args.values.split(",")}:
                continue
            rows += fit_cell(part, value, rep, cfg, args.scorings.split(","), args.cv_max_iter)
            write_csv(out / "spread_cv_scoring.csv", rows, command=command_line())  # keeps what finished
    print(write_report(out / "spread_cv_scoring.md", "Spread-EM's CV: scoring and fallback", summarise(rows), argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
