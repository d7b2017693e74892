"""What spread-EM's choices buy on UCI Adult, on the demo's releases (``configs/adult.toml``), one
``--part`` each: the penalty C its cross-validation picks, and a public sample as its prior.

``--part c-choice``: which penalty C the `spread` learner's cross-validation chooses on Adult, and what each C scores
on the clean test set. The demo's releases (``configs/adult.toml``, or ``--config
configs/adult_m2.toml`` for two sampled attributes); for each C of the learner's grid: the held-out
noisy log p(c̃ | x̃) the selection reads and the fallback's test (both from the fitted
``SpreadLogisticRegressionCV``: ``cv_results_``, ``gain_``, ``p_value_``), and the test accuracy
of a plain fit at that C with the same prior ("naive-bayes"). The held-out records show one or two
noisy attributes; the test records are whole and clean.

``--part public-prior``: what a public sample buys spread-EM on UCI Adult at small ε. The demo's releases
(``configs/adult.toml``: label at ε/2, one sampled attribute at ε/2 by the best frequency oracle,
the same cells and seeds), except that ``--n-public`` clients, drawn at random, publish their clean
attributes (no labels) instead of releasing: they are left out of the fit and their rows become
spread-EM's joint prior (``EmpiricalPrior``). Against it, on the same remaining releases: spread-EM
with the learned factorised prior, LDP naive Bayes, the majority class, and the clean oracle.
Both spread fits use C = 1 and the demo's EM budget (no cross-validation, so that only the prior
differs). A factorised prior imputes the attributes a record did not release independently of the
one it did; a joint prior imputes them as they co-occur in the public rows. ``--cv`` adds the demo's
``spread`` learner (C by cross-validation, fallback) with the public prior.

    python simulations/adult_spread.py --part c-choice                     # ε 2 and 8, seed 0
    python simulations/adult_spread.py --part c-choice --eps 2,8 && python simulations/adult_spread.py \
        --part c-choice --config configs/adult_m2.toml --eps 4 --out results/adult_c_choice/m2   # the committed results
    python simulations/adult_spread.py --part c-choice --eps 8 --max-iter 4 --cv-max-iter 4 --out /tmp/acc   # smoke
    python simulations/adult_spread.py --part public-prior                 # ε 2, 4, 8 x 3 seeds
    python simulations/adult_spread.py --part public-prior --eps 0.5,1,2,4,8 --cv   # the committed results, ~25 min
    python simulations/adult_spread.py --part public-prior --eps 8 --seeds 1 --max-iter 4 --out /tmp/app   # a smoke run
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from fedrr.assembly import build_population, fit_options
from fedrr.estimators import SpreadLogisticRegression, SpreadLogisticRegressionCV
from fedrr.experiment import load_scenario
from fedrr.io import markdown_table, part_parser, run_part, write_report
from fedrr.learners import FitData, fit_and_score
from fedrr.mechanisms import EmpiricalPrior
from fedrr.pool import Pool
from fedrr.release import offline_release

#: --part NAME: what it measures (its function is part_NAME, "-" read as "_")
PARTS = {
    "c-choice": "the C the cross-validation chooses and what each C scores on the test set",
    "public-prior": "a public sample of clean attributes as spread-EM's joint prior",
}


def _parser(part: str) -> argparse.ArgumentParser:
    return part_parser(f"{__doc__.splitlines()[0]} --part {part}: {PARTS[part]}.", PARTS)


# --- --part c-choice

CS = (0.01, 0.1, 1.0, 10.0)


def c_choice_cell(cell, tmp: str, max_iter: int | None, cv_max_iter: int) -> dict:
    """Per C: (held-out mean log p(c̃ | x̃), test accuracy of a plain fit); the C chosen and the
    fallback's test, all read from the fitted estimator (``cv_results_``, ``p_value_``)."""
    cfg = cell.run_config(results_dir=tmp)
    population = build_population(cfg)
    Xte, yte = population.test_set()
    pool = Pool.from_releases([offline_release(population, cfg.seed)], {})
    mech, o = pool.mechanism_arg(), fit_options(cfg)
    kw = dict(prior="naive-bayes", random_state=o.random_state, encoding=o.encoding)
    cv = SpreadLogisticRegressionCV(Cs=CS, max_iter=max_iter or o.spread_max_iter, cv_max_iter=cv_max_iter, **kw)
    cv.fit(pool.X, pool.y, mechanism=mech)
    res = cv.cv_results_
    per_c = {}
    for C in CS:
        (k,) = np.flatnonzero(res["param_C"] == C)
        est = SpreadLogisticRegression(C=C, max_iter=max_iter or o.spread_max_iter, **kw)
        acc = est.fit(pool.X, pool.y, mechanism=mech).score(Xte, yte)
        per_c[C] = (float(res["mean_test_loglik"][k]), float(acc))
    return {
        "per_c": per_c,
        "chosen": cv.C_,
        "fallback": cv.fallback_,
        "p_value": float(cv.p_value_),
        "statistic": cv.gain_["statistic"],
        "score": float(cv.score(Xte, yte)),
    }


def part_c_choice(argv: list[str]) -> int:
    ap = _parser("c-choice")
    ap.add_argument("--config", default="configs/adult.toml")
    ap.add_argument("--eps", default="2,8", help="ε per record, a subset of the config's grid")
    ap.add_argument("--seeds", type=int, default=1, help="repeats of each ε (the config's seeds, first ones)")
    ap.add_argument("--max-iter", type=int, default=None, help="EM iterations (default: the config's spread_max_iter)")
    ap.add_argument("--cv-max-iter", type=int, default=40, help="EM iterations of each selection fit (the learner's)")
    ap.add_argument("--out", default="results/adult_c_choice")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    spec = load_scenario(args.config)
    eps = [float(e) for e in args.eps.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for cell in [c for c in spec.cells() if c.grid_value in eps and c.r < args.seeds]:
            got = c_choice_cell(cell, tmp, args.max_iter, args.cv_max_iter)
            chosen = "falls back" if got["fallback"] else f"C = {got['chosen']:g}"
            if got["chosen"] is None:  # paired releases whose test kept no model: no candidate fitted
                chosen += " (no candidate fitted)"
            cols = [" / ".join(f"{got['per_c'][C][i]:{fmt}}" for C in CS) for i, fmt in ((0, ".5f"), (1, ".3f"))]
            test = f"{got['statistic']}, p {got['p_value']:.3g}"
            rows.append([f"{cell.grid_value:g}", str(cell.r), chosen, test, f"{got['score']:.3f}", *cols])
            print(" | ".join(rows[-1]), flush=True)
    head = [
        "ε per record",
        "seed",
        "chosen",
        "fallback test",
        "spread (CV) accuracy",
        "held-out log p(c̃|x̃)",
        "accuracy",
    ]
    body = (
        f"Releases of {args.config}; per C in {' / '.join(f'{C:g}' for C in CS)}: the held-out noisy "
        "log p(c̃ | x̃) per record over the selection's folds (what C is chosen on, `cv_results_`), and the "
        'clean test accuracy of a plain fit at that C, prior "naive-bayes". The fallback test is the '
        "estimator's own (`gain_`, `p_value_`; alpha 0.05).\n\n" + markdown_table(head, rows)
    )
    print(write_report(Path(args.out) / "summary.md", "What the cross-validation's C scores on Adult", body, argv))
    return 0


# --- --part public-prior

LEARNERS = ["spread, public prior", "spread, learned prior", "ldp-nb", "majority", "clean"]
CV = "spread (CV, fallback), public prior"


def public_prior_cell(cell, n_public: int, tmp: str, max_iter: int | None = None, cv: bool = False) -> dict:
    cfg = cell.run_config(results_dir=tmp)
    population = build_population(cfg)
    Xte, yte = population.test_set()
    pool = Pool.from_releases([offline_release(population, cfg.seed)], {})
    rng = np.random.default_rng([cell.seed, 1])
    public = np.zeros(pool.n, bool)
    public[rng.choice(pool.n, n_public, replace=False)] = True
    mech = pool.mechanism_arg()
    mech = [m for m, p in zip(mech, public) if not p] if isinstance(mech, list) else mech
    ids = pool.client_id[~public]
    clean = [population.record(int(i)) for i in ids]
    data = FitData(
        pool.X[~public],
        pool.y[~public],
        mech,
        clean_X=np.stack([np.asarray(x) for x, _ in clean]),
        clean_y=np.asarray([y for _, y in clean]),
        client_id=ids,
    )
    rows = np.stack([np.asarray(population.record(int(i))[0]) for i in pool.client_id[public]])
    options = fit_options(cfg)
    out: dict = {}
    for name, prior in (("spread, public prior", EmpiricalPrior(rows)), ("spread, learned prior", "learned")):
        t = time.perf_counter()
        est = SpreadLogisticRegression(
            C=1.0,
            prior=prior,
            random_state=options.random_state,
            max_iter=max_iter or options.spread_max_iter,
            encoding=options.encoding,
        ).fit(data.X, data.y, mechanism=data.mechanism)
        out[name] = (float(est.score(Xte, yte)), time.perf_counter() - t)
    if cv:  # as the demo's `spread` learner (fedrr.learners), with the public rows as its prior
        t = time.perf_counter()
        it = max_iter or options.spread_max_iter
        est = SpreadLogisticRegressionCV(
            Cs=tuple(sorted({0.01, 0.1, 1.0, 10.0, float(options.C)})),
            prior=EmpiricalPrior(rows),
            random_state=options.random_state,
            max_iter=it,
            cv_max_iter=min(40, it),
            encoding=options.encoding,
        ).fit(data.X, data.y, mechanism=data.mechanism)
        out[CV] = (float(est.score(Xte, yte)), time.perf_counter() - t)
    for name in ("ldp-nb", "majority", "clean"):
        e = fit_and_score(name, data, (Xte, yte), options).entry
        out[name] = (float(e.get("accuracy", np.nan)), float(e.get("seconds", np.nan)))
    return out


def part_public_prior(argv: list[str]) -> int:
    ap = _parser("public-prior")
    ap.add_argument("--config", default="configs/adult.toml")
    ap.add_argument("--eps", default="2,4,8", help="ε per record, a subset of the config's grid")
    ap.add_argument("--seeds", type=int, default=3, help="repeats of each ε (the config's seeds, first ones)")
    ap.add_argument("--n-public", type=int, default=1000, help="clients who publish their clean attributes")
    ap.add_argument("--max-iter", type=int, default=None, help="EM iterations (default: the config's spread_max_iter)")
    ap.add_argument("--cv", action="store_true", help=f"also {CV!r}: C by cross-validation, fallback")
    ap.add_argument("--out", default="results/adult_public_prior")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    spec = load_scenario(args.config)
    eps = [float(e) for e in args.eps.split(",")]
    cells = [c for c in spec.cells() if c.grid_value in eps and c.r < args.seeds]
    acc: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for cell in cells:
            got = public_prior_cell(cell, args.n_public, tmp, args.max_iter, args.cv)
            acc.setdefault(cell.grid_value, []).append(got)
            print(
                f"ε {cell.grid_value:g} seed {cell.r}: "
                + ", ".join(f"{k} {a:.4f} ({s:.0f} s)" for k, (a, s) in got.items()),
                flush=True,
            )
    names = [CV, *LEARNERS] if args.cv else LEARNERS
    head = ["ε per record", *names]
    table = []
    for e, runs in sorted(acc.items()):
        cols = []
        for name in names:
            a = np.array([r[name][0] for r in runs])
            cols.append(f"{a.mean():.3f} ± {a.std(ddof=1):.3f}" if len(a) > 1 else f"{a[0]:.3f}")
        table.append([f"{e:g}", *cols])
    body = (
        f"{args.n_public} clients publish their clean attributes (no labels) and do not release; "
        f"the other clients release as in {args.config}. Test accuracy on adult.test, mean ± sd over "
        f"{args.seeds} seed(s); the two plain spread fits at C = 1, no fallback"
        + (f"; {CV!r} as the demo's spread learner" if args.cv else "")
        + ".\n\n"
        + markdown_table(head, table)
    )
    title = "Spread-EM on UCI Adult with a public sample as its joint prior"
    print(write_report(Path(args.out) / "summary.md", title, body, argv))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_part(__doc__.split("\n\n")[0], {"c-choice": part_c_choice, "public-prior": part_public_prior}, argv)


if __name__ == "__main__":
    raise SystemExit(main())
