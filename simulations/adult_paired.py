"""UCI Adult's paired releases (each person releases sampled (attribute, label) pairs as values of the
product domain, ``PairedRecordMechanism``): four measurements on them, one ``--part`` each.

Data: ``fedrr.datasets.load("adult_binned")`` — 12 discrete attributes, the numeric ones cut at the
public edges declared in its schema; the rows of adult.data (30,162 one-record clients, ``extra
["is_test"]`` False) release, the 15,060 clean rows of adult.test only report.

``--part release``: paired vs split release for naive Bayes (fedrr issue 28; Yilmaz, Al-Rubaie & Chang,
"Locally differentially private naive Bayes classification", arXiv:1905.01039, §4). At ε per person:

* paired: ``PairedRecordMechanism`` — one uniformly sampled attribute released *with* the label as one
  value of the k_j·2 domain through one frequency oracle at the full ε ("auto": the least rare-value
  variance of k-RR / OUE / OLH);
* split: ``RecordMechanism`` — the label by k-RR at ε/2 and one uniformly sampled attribute at ε/2
  through ``frequency_oracle`` (the least-variance oracle for its k_j).

``LDPNaiveBayes()`` (defaults: "clip", Yilmaz et al.'s protocol, on paired releases; "mle" on split
ones) fits each release; the test file gives accuracy, balanced accuracy and AUC (mean ± sd over
seeds), with the majority class and clean naive Bayes for reference; ``--method clip`` gives both
designs the paper's treatment (negative estimates clipped). Every (design d, ε, seed s) has its own
generator SeedSequence(--seed, spawn_key=(d, round(1000 ε), s)). Writes summary.md and results.csv.

``--part spread``: spread-EM next to LDP naive Bayes on the same releases, each client releasing ONE
sampled (attribute, label) pair at the full ε (``PairedRecordMechanism(schema.states(), 2, ε,
n_sampled=1)``; ``--n-sampled 2``: two pairs at ε/2 each).

1. Selection (training rows only): 20 % of the training rows are held out as a clean validation set;
   the other 80 % are released (seed 0), every (prior, C) of ``--grid`` is fitted on them (a prior
   "latent-class/M": ``prior="latent-class"`` with M components), and the
   configuration with the best validation accuracy is kept, per ε. The test file plays no part.
2. Headline: the chosen ``SpreadLogisticRegression(encoding="onehot", prior, C)`` and ``LDPNaiveBayes``
   fitted on releases of ALL training rows, ``--seeds`` seeds; accuracy, balanced accuracy and AUC on
   the test rows (adult.test), the fit's seconds and whether its chains agreed.
3. Why (``--ceiling-eps``): what pairs can identify at all. At a large ε (pairs ≈ clean) the same
   estimators with one pair per client (pair marginals only: no co-occurrence of attributes) and
   with every pair per client (co-occurrences), next to clean logistic regression and clean naive Bayes.

Writes selection.csv, results.csv, ceiling.csv, summary.md (each names its command).

``--part naive``: why `naive` falls from ε 4 to ε 8 on configs/adult_paired.toml's releases
(results/adult_paired: 0.814 → 0.763 while its AUC rises): the calibration of logistic regression on
decoded pair reports. ``naive`` reads each report as a clean (attribute, label) point guess
(``learners._classification._naive_data``): every training row carries ONE attribute, so each coefficient is that
attribute's marginal log-odds contrast, learned in isolation. A test record has all 12 attributes,
and the model adds 12 such contrasts: the sum counts shared evidence many times over. At small ε the
noise attenuates every coefficient, which hides the over-counting; as ε grows the coefficients reach
full size, the logits spread and the predicted positive rate passes the true one, so accuracy falls
while the ranking (AUC) improves. Measured on the sweep's own cells (same seeds): per ε, naive's test
accuracy, AUC, predicted positive rate, mean p and the sd of its logits (naive_calibration.md, .csv).

``--part naive-auc``: why ``naive``'s AUC is below chance on the planned Adult release
(configs/adult_planned.toml) at ε 0.5 and 1 (issue 45 item 5). ``naive`` reads each paired report as a
clean record through its point guess v̂ = argmax_v P(report | v) (``fedrr.learners.decode_paired``;
ties to the lowest value), x̂_j = v̂ // C, ŷ = v̂ mod C, and fits logistic regression, unreleased
attributes at their column mean. This part rebuilds the first repeat's pool at each ε, fits ``naive``
as the sweep does (one-hot encoding, C 1) and the clean oracle, and measures, per ε:

* the AUC of ``naive`` on the clean test set (the sweep's figure) and on its own training data (the
  decoded releases against the decoded labels);
* the agreement of its coefficients with the clean logistic regression's: within each attribute the
  one-hot coefficients centred (a one-hot block is identified up to a constant), the share of
  indicators whose sign agrees (weighted by the clean |coefficient|) and the correlation;
* per oracle (the planner's choice per attribute: RR, OUE, OLH): how often a report's point guess has
  ties (more than one value of largest likelihood, the lowest taken), and the share of records whose
  decoded label is 1 against the clean share;
* the AUC on the clean test set of the score restricted to the RR attributes and to the others;
* the same clients with their labels shuffled (no signal), released through the same mechanism and
  fitted alike: that model's AUC on the clean test set, the correlation of its non-RR coefficients
  with the real fit's, and its decoded label-1 share among reports decoded to the lower and the
  upper half of an attribute's states (the attributes not released by RR);
* the clean records' label-1 share in the lower and the upper half of the same attributes' states.

Writes summary.md and results.csv.

    python simulations/adult_paired.py --part release --out results/adult_paired_release   # 5 ε x 5 seeds, ~10 s
    python simulations/adult_paired.py --part release --method clip --out results/adult_paired_release/clip
    python simulations/adult_paired.py --part release --quick --out /tmp/paired             # 2 ε x 1 seed
    python simulations/adult_paired.py --part spread --eps 1 2 4 --out results/adult_paired_spread   # ~10 min
    python simulations/adult_paired.py --part naive --out results/adult_paired
    python simulations/adult_paired.py --part naive-auc --out results/naive_auc --epsilons 0.5 1 2 4   # a minute or two
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from fedrr.assembly import build_population, fit_options
from fedrr.datasets import load
from fedrr.estimators import LDPNaiveBayes, NaiveLogisticRegression, SpreadLogisticRegression, naive_inputs
from fedrr.experiment import load_scenario
from fedrr.io import command_line, markdown_table, part_parser, provenance, run_part, write_csv, write_report
from fedrr.learners import FitData, FitOptions, decode_paired, fit_and_score, get
from fedrr.mechanisms import (
    LocalHashing,
    PairedRecordMechanism,
    RandomizedResponse,
    RecordMechanism,
    UnaryEncoding,
    frequency_oracle,
)
from fedrr.pool import Pool
from fedrr.release import offline_release

ROOT = Path(__file__).resolve().parents[1]
#: --part NAME: what it measures (its function is part_NAME)
PARTS = {
    "release": "paired vs split release for LDP naive Bayes",
    "spread": "spread-EM next to LDP naive Bayes on one (or more) sampled pairs per person",
    "naive": "naive logistic regression's calibration on the sweep's paired cells",
    "naive-auc": "why naive's AUC is below chance on the planned release at small ε",
}


def _parser(part: str) -> argparse.ArgumentParser:
    return part_parser(f"{__doc__.splitlines()[0]} --part {part}: {PARTS[part]}.", PARTS)


def main(argv: list[str] | None = None) -> int:
    return run_part(
        __doc__.split("\n\n")[0],
        {"release": part_release, "spread": part_spread, "naive": part_naive, "naive-auc": part_naive_auc},
        argv,
    )


# --- --part release

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DESIGNS = ("paired", "split")
METRICS = ("accuracy", "balanced_accuracy", "auc")


def mechanism(design: str, k: np.ndarray, epsilon: float):
    """The release of one design at ε per person (one sampled attribute)."""
    if design == "paired":
        return PairedRecordMechanism([int(kj) for kj in k], 2, epsilon, n_sampled=1)
    feats = [frequency_oracle(int(kj), epsilon / 2) for kj in k]
    return RecordMechanism(feats, RandomizedResponse(2, epsilon=epsilon / 2), n_sampled=1)


def scores(model, X, y) -> dict[str, float]:
    p = model.predict_proba(X)[:, 1]
    pred = model.predict(X)
    return {
        "accuracy": float(np.mean(pred == y)),
        "balanced_accuracy": float(balanced_accuracy_score(y, pred)),
        "auc": float(roc_auc_score(y, p)),
    }


def release_rows(epsilons=EPSILONS, n_seeds: int = 5, *, seed: int = 0, method: str = "auto") -> list[dict]:
    ds = load("adult_binned")
    test = ds.extra["is_test"]
    Xtr, ytr, Xte, yte = ds.X[~test], ds.y[~test], ds.X[test], ds.y[test]
    k = ds.schema.states()
    rows = []
    for d, design in enumerate(DESIGNS):
        for eps in epsilons:
            mech = mechanism(design, k, eps)
            for s in range(n_seeds):
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(d, round(1000 * eps), s)))
                X_tilde, y_tilde = mech.release(Xtr, ytr, rng=rng)
                model = LDPNaiveBayes(method=method).fit(X_tilde, y_tilde, mechanism=mech)
                row = {"design": design, "epsilon": eps, "seed": s, "record_epsilon": mech.epsilon}
                rows.append(row | scores(model, Xte, yte))
    return rows


def references() -> dict[str, dict[str, float]]:
    ds = load("adult_binned")
    test = ds.extra["is_test"]
    clean = LDPNaiveBayes().fit(ds.X[~test], ds.y[~test])
    majority = float(max(np.mean(ds.y[test]), 1 - np.mean(ds.y[test])))
    return {
        "clean naive Bayes": scores(clean, ds.X[test], ds.y[test]),
        "majority class": {"accuracy": majority, "balanced_accuracy": 0.5, "auc": 0.5},
    }


def table(rows: list[dict], epsilons, refs: dict[str, dict[str, float]]) -> str:
    head = "| ε | design | accuracy | balanced accuracy | AUC |"
    lines = [head, "|---:|---|---:|---:|---:|"]
    for eps in epsilons:
        for design in DESIGNS:
            sel = [r for r in rows if r["design"] == design and r["epsilon"] == eps]
            cells = []
            for m in METRICS:
                v = np.array([r[m] for r in sel])
                sd = v.std(ddof=1) if v.size > 1 else float("nan")
                cells.append(f"{v.mean():.3f} ± {sd:.3f}")
            lines.append(f"| {eps:g} | {design} | " + " | ".join(cells) + " |")
    for name, sc in refs.items():
        lines.append(f"| — | {name} | " + " | ".join(f"{sc[m]:.3f}" for m in METRICS) + " |")
    return "\n".join(lines)


def part_release(argv: list[str]) -> int:
    parser = _parser("release")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per ε (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="master seed (default 0)")
    parser.add_argument("--method", default="auto", choices=("auto", "clip", "mle", "projection"))
    parser.add_argument("--quick", action="store_true", help="ε 1 and 4, one seed (a smoke run)")
    parser.add_argument("--out", type=Path, default=None, help="directory for results.csv and summary.md")
    args = parser.parse_args(argv)
    command = command_line(argv)
    epsilons, n_seeds = ((1.0, 4.0), 1) if args.quick else (EPSILONS, args.seeds)
    t0 = time.perf_counter()
    rows = release_rows(epsilons, n_seeds, seed=args.seed, method=args.method)
    refs = references()
    text = (
        f"command: {command}\n\n{provenance()}\n\n"
        f"Adult (load('adult_binned'), public edges): 30,162 one-record clients release once at ε per person, "
        f"one sampled attribute; LDPNaiveBayes(method={args.method!r}); adult.test (15,060) scores; mean ± sd over "
        f"{n_seeds} seed(s).\n\n" + table(rows, epsilons, refs) + f"\n\n({time.perf_counter() - t0:.1f} s)\n"
    )
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.md").write_text(text)
        with open(args.out / "results.csv", "w", newline="") as fh:
            fh.write(f"# command: {command}\n")
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


# --- --part spread

FIELDS = [
    "stage",
    "eps",
    "n_sampled",
    "seed",
    "model",
    "prior",
    "C",
    "accuracy",
    "balanced",
    "auc",
    "seconds",
    "agreed",
]


def metrics(est, X, y) -> dict:
    p = est.predict_proba(X)[:, 1]
    return {
        "accuracy": float(np.mean((p > 0.5) == y)),
        "balanced": float(balanced_accuracy_score(y, p > 0.5)),
        "auc": float(roc_auc_score(y, p)),
    }


def paired_release(X, y, ks, eps, m, seed):
    mech = PairedRecordMechanism(ks, 2, eps, n_sampled=m)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(int(round(eps * 1000)), m)))
    Xt, yt = mech.release(X, y, rng=rng)
    return mech, Xt, yt


def fit_spread(Xt, yt, mech, prior, C, seed, max_iter):
    """``prior`` as the estimator takes it, or "latent-class/M": the latent-class prior of M components."""
    t = time.perf_counter()
    name, _, m = prior.partition("/")
    kw = {"n_latent_classes": int(m)} if m else {}
    est = SpreadLogisticRegression(C=C, prior=name, encoding="onehot", max_iter=max_iter, random_state=seed, **kw)
    est.fit(Xt, yt, mechanism=mech)
    return est, time.perf_counter() - t


def fit_nb(Xt, yt, mech):
    t = time.perf_counter()
    est = LDPNaiveBayes().fit(Xt, yt, mechanism=mech)
    return est, time.perf_counter() - t


class Writer:
    """One CSV of rows (FIELDS), appended and flushed row by row, headed by the command."""

    def __init__(self, path: Path, command: str):
        self.f = path.open("w", newline="")
        self.f.write(f"# {command}\n")
        self.w = csv.DictWriter(self.f, FIELDS)
        self.w.writeheader()
        self.rows: list[dict] = []

    def add(self, **row):
        row = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
        self.w.writerow(row)
        self.f.flush()
        self.rows.append(row)
        print(row, flush=True)


def part_spread(argv: list[str]) -> int:
    ap = _parser("spread")
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--grid", default="learned:1,naive-bayes:1,learned:0.05,naive-bayes:0.05")
    ap.add_argument("--ceiling-eps", type=float, default=20.0, help="0: skip the 'why' stage")
    ap.add_argument("--max-iter", type=int, default=200)
    ap.add_argument("--n-sampled", type=int, default=1, help="pairs per client in stages 1-2 (each at ε/n)")
    ap.add_argument("--out", type=Path, default=Path("results/adult_paired_spread"))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)

    ds = load("adult_binned")
    ks = ds.schema.states()
    test = ds.extra["is_test"]
    Xtr, ytr, Xte, yte = ds.X[~test], ds.y[~test], ds.X[test], ds.y[test]
    val = np.random.default_rng(2026).random(len(ytr)) < 0.2
    grid = [(g.split(":")[0], float(g.split(":")[1])) for g in a.grid.split(",")]

    sel = Writer(a.out / "selection.csv", command_line(argv))
    chosen = {}
    for eps in a.eps:
        mech, Xt, yt = paired_release(Xtr[~val], ytr[~val], ks, eps, a.n_sampled, 0)
        best = None
        for prior, C in grid:
            est, sec = fit_spread(Xt, yt, mech, prior, C, 0, a.max_iter)
            r = metrics(est, Xtr[val], ytr[val])
            sel.add(stage="validation", eps=eps, n_sampled=a.n_sampled, seed=0, model="spread", prior=prior, C=C, **r,
                    seconds=sec, agreed=bool(est.converged_))  # fmt: skip
            if best is None or r["accuracy"] > best[0]:
                best = (r["accuracy"], prior, C)
        nb, sec = fit_nb(Xt, yt, mech)
        r = metrics(nb, Xtr[val], ytr[val])
        sel.add(stage="validation", eps=eps, n_sampled=a.n_sampled, seed=0, model="ldp-nb", **r, seconds=sec)
        chosen[eps] = best[1:]

    res = Writer(a.out / "results.csv", command_line(argv))
    for eps in a.eps:
        prior, C = chosen[eps]
        for seed in range(a.seeds):
            mech, Xt, yt = paired_release(Xtr, ytr, ks, eps, a.n_sampled, 100 + seed)
            est, sec = fit_spread(Xt, yt, mech, prior, C, seed, a.max_iter)
            res.add(stage="test", eps=eps, n_sampled=a.n_sampled, seed=seed, model="spread", prior=prior, C=C,
                    **metrics(est, Xte, yte), seconds=sec, agreed=bool(est.converged_))  # fmt: skip
            nb, sec = fit_nb(Xt, yt, mech)
            res.add(
                stage="test",
                eps=eps,
                n_sampled=a.n_sampled,
                seed=seed,
                model="ldp-nb",
                **metrics(nb, Xte, yte),
                seconds=sec,
            )

    ceil = Writer(a.out / "ceiling.csv", command_line(argv))
    if a.ceiling_eps > 0:
        onehot = np.concatenate([np.eye(k)[Xtr[:, j]][:, 1:] for j, k in enumerate(ks)], axis=1)
        onehot_te = np.concatenate([np.eye(k)[Xte[:, j]][:, 1:] for j, k in enumerate(ks)], axis=1)
        lr = LogisticRegression(C=1.0, max_iter=2000).fit(onehot, ytr)
        p = lr.predict_proba(onehot_te)[:, 1]
        ceil.add(stage="clean", eps=float("inf"), model="logistic", accuracy=float(np.mean((p > 0.5) == yte)),
                 balanced=float(balanced_accuracy_score(yte, p > 0.5)), auc=float(roc_auc_score(yte, p)))  # fmt: skip
        ceil.add(
            stage="clean", eps=float("inf"), model="naive-bayes", **metrics(LDPNaiveBayes().fit(Xtr, ytr), Xte, yte)
        )
        for m in (1, len(ks)):
            eps = a.ceiling_eps * m  # ε per pair = ceiling_eps: every pair almost clean
            mech, Xt, yt = paired_release(Xtr, ytr, ks, eps, m, 7)
            for prior in ("learned", "naive-bayes"):
                est, sec = fit_spread(Xt, yt, mech, prior, 1.0, 0, a.max_iter)
                ceil.add(stage="ceiling", eps=eps, n_sampled=m, seed=0, model="spread", prior=prior, C=1.0,
                         **metrics(est, Xte, yte), seconds=sec, agreed=bool(est.converged_))  # fmt: skip
            nb, sec = fit_nb(Xt, yt, mech)
            ceil.add(
                stage="ceiling", eps=eps, n_sampled=m, seed=0, model="ldp-nb", **metrics(nb, Xte, yte), seconds=sec
            )

    spread_summary(a, sel.rows, res.rows, ceil.rows, chosen, command_line(argv))
    return 0


def spread_summary(a, sel, res, ceil, chosen, command: str):
    lines = [f"# Spread-EM on Adult paired releases ({a.n_sampled} pair(s) per client)\n", f"Command: `{command}`\n"]
    lines.append(provenance() + "\n")
    lines.append(
        "Selection of (prior, C) on a validation split of the training rows (20 %, clean; releases of the "
        "other 80 %, seed 0), best validation accuracy:\n"
    )
    lines.append("| ε | prior | C | validation accuracy |\n|---|---|---|---|")
    for eps, (prior, C) in chosen.items():
        acc = max(r["accuracy"] for r in sel if r["eps"] == eps and r["model"] == "spread")
        lines.append(f"| {eps:g} | {prior} | {C:g} | {acc:.4f} |")
    lines.append(
        f"\nTest rows (adult.test, 15,060), releases of all 30,162 training rows, {a.seeds} seeds, mean ± sd:\n"
    )
    lines.append(
        "| ε | model | accuracy | balanced accuracy | AUC | fit s | chains agreed |\n|---|---|---|---|---|---|---|"
    )
    for eps in a.eps:
        for model in ("spread", "ldp-nb"):
            rs = [r for r in res if r["eps"] == eps and r["model"] == model]

            def ms(k, rs=rs):
                v = np.array([r[k] for r in rs], float)
                return f"{v.mean():.4f} ± {v.std(ddof=1) if len(v) > 1 else 0:.4f}"

            agreed = sum(bool(r.get("agreed")) for r in rs) if model == "spread" else "-"
            sec = np.mean([r["seconds"] for r in rs])
            lines.append(
                f"| {eps:g} | {model} | {ms('accuracy')} | {ms('balanced')} | {ms('auc')} | {sec:.1f} | {agreed} |"
            )
    if ceil:
        lines.append("\nWhat pairs identify (one seed; ε per pair = --ceiling-eps, so the pairs are almost clean):\n")
        lines.append(
            "| stage | ε | pairs per client | model | prior | accuracy | balanced | AUC |\n"
            "|---|---|---|---|---|---|---|---|"
        )
        for r in ceil:
            lines.append(
                f"| {r['stage']} | {r['eps']} | {r.get('n_sampled', '-')} | {r['model']} | {r.get('prior', '-')} | "
                f"{r['accuracy']:.4f} | {r['balanced']:.4f} | {r['auc']:.4f} |"
            )
    (a.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


# --- --part naive


def part_naive(argv: list[str]) -> int:
    ap = _parser("naive")
    ap.add_argument("--config", default=str(ROOT / "configs" / "adult_paired.toml"))
    ap.add_argument("--seeds", type=int, default=1, help="repeats of each ε (the sweep's cells r = 0 …)")
    ap.add_argument("--out", default=str(ROOT / "results" / "adult_paired"))
    args = ap.parse_args(argv)
    spec = load_scenario(args.config)
    rows, body = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for cell in [c for c in spec.cells() if c.r < args.seeds]:
            cfg = cell.run_config(results_dir=tmp)
            population = build_population(cfg)
            Xt, yt = population.test_set()
            pool = Pool.from_releases([offline_release(population, cfg.seed)], {})
            res = fit_and_score("naive", FitData(pool.X, pool.y, pool.mechanism_arg()), (Xt, yt), fit_options(cfg))
            p = np.clip(res.estimator.predict_proba(Xt)[:, 1], 1e-12, 1 - 1e-12)
            row = {
                "epsilon": cell.grid_value,
                "seed": cell.r,
                "accuracy": round(float(np.mean((p > 0.5) == yt)), 4),
                "auc": round(float(roc_auc_score(yt, p)), 4),
                "predicted_positive_rate": round(float(np.mean(p > 0.5)), 3),
                "true_positive_rate": round(float(np.mean(yt)), 3),
                "mean_p": round(float(p.mean()), 3),
                "logit_sd": round(float(np.std(np.log(p / (1 - p)))), 2),
            }
            rows.append(row)
            body.append(list(row.values()))
            print(row, flush=True)
    out = Path(args.out)
    write_csv(out / "naive_calibration.csv", rows, command=command_line(argv))
    title = "naive on Adult's paired releases: accuracy, AUC and calibration per ε"
    print(write_report(out / "naive_calibration.md", title, markdown_table(list(rows[0]), body), argv))
    return 0


# --- --part naive-auc


def oracle_name(m) -> str:
    return {RandomizedResponse: "RR", UnaryEncoding: "OUE", LocalHashing: "OLH"}.get(type(m), type(m).__name__)


def centred_blocks(coef: np.ndarray, design) -> list[np.ndarray]:
    """Per attribute, its one-hot coefficients with the reference state's 0 added, centred."""
    out = []
    for d in range(len(design.widths)):
        c = coef[design.offsets[d] : design.offsets[d] + design.widths[d]]
        full = np.r_[0.0, c] if design.widths[d] == design.layout.k[d] - 1 else c
        out.append(full - full.mean())
    return out


def scores_by(model, Zt: np.ndarray, design, attrs: list[int]) -> np.ndarray:
    """The part of the decision function carried by ``attrs`` (their indicator columns)."""
    cols = np.concatenate([np.arange(design.offsets[d], design.offsets[d] + design.widths[d]) for d in attrs])
    return Zt[:, cols] @ model.coef_[0, cols]


def part_naive_auc(argv: list[str]) -> int:
    ap = _parser("naive-auc")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    args = ap.parse_args(argv)
    spec = load_scenario(ROOT / "configs" / "adult_planned.toml")
    rows = []
    for eps in args.epsilons:
        g = [float(e) for e in spec.grid].index(eps)
        cfg = spec.cells([g])[0].run_config()
        pop = build_population(cfg)
        pool = Pool.from_releases([offline_release(pop, cfg.seed)])
        mech = pool.mechanism_arg()
        pm = mech[0] if isinstance(mech, (list, tuple)) else mech
        Xte, yte = pop.test_set()
        naive = get("naive").fit(FitData(pool.X, pool.y, mech), FitOptions(encoding="onehot"))
        ids = np.asarray(pool.client_id)
        clean_X = np.array([pop.record(int(i))[0] for i in ids])
        clean_y = np.array([pop.record(int(i))[1] for i in ids])
        clean = NaiveLogisticRegression(encoding="onehot", clean=True).fit(clean_X, clean_y, pm.domain_record())
        design = naive.design_
        Zt = naive._inputs(Xte)
        auc_test = roc_auc_score(yte, naive.decision_function(Xte))
        Xd, yd = decode_paired(pool.X, mech)
        Ztrain = naive_inputs(Xd, pm.domain_record(), design)
        auc_train = roc_auc_score(yd, Ztrain @ naive.coef_[0] + naive.intercept_[0])
        bn, bc = centred_blocks(naive.coef_[0], design), centred_blocks(clean.coef_[0], design)
        a, b = np.concatenate(bn), np.concatenate(bc)
        agree = float(np.sum(np.abs(b) * (np.sign(a) == np.sign(b))) / np.sum(np.abs(b)))
        corr = float(np.corrcoef(a, b)[0, 1])
        kinds = [oracle_name(o) for o in pm.oracles]
        rr = [d for d, k in enumerate(kinds) if k == "RR"]
        other = [d for d, k in enumerate(kinds) if k != "RR"]
        X = np.asarray(pool.X, float)
        ties, ones = {}, {}
        for kind in sorted(set(kinds)):
            t, n_rel, y1 = 0, 0, 0
            for d in (d for d, k in enumerate(kinds) if k == kind):
                r = ~np.isnan(X[:, d])
                L = pm.oracles[d].log_likelihood_matrix(X[r, d])
                t += int(np.sum((L >= L.max(axis=1, keepdims=True) - 1e-12).sum(axis=1) > 1))
                n_rel += int(r.sum())
                y1 += int((pm.oracles[d].decode(X[r, d]) % pm.n_classes == 1).sum())
            ties[kind], ones[kind] = t / n_rel, y1 / n_rel
        per_attr = []
        for d in range(len(kinds)):
            s = scores_by(naive.model_, Zt, design, [d])
            per_attr.append(roc_auc_score(yte, s) if np.ptp(s) > 0 else 0.5)
        # the same clients with their labels shuffled (no signal), released and fitted alike: what the
        # decoder's structure alone teaches naive
        perm = np.random.default_rng(45).permutation(clean_y)
        Xn, _ = pm.release(clean_X, perm, rng=np.random.default_rng(46))
        Xnd, ynd = decode_paired(Xn, pm)
        null = NaiveLogisticRegression(C=1.0, encoding="onehot").fit(Xnd, ynd, pm.domain_record())
        bnull = centred_blocks(null.coef_[0], design)
        olh_real = np.concatenate([bn[d] for d in other]) if other else np.zeros(1)
        olh_null = np.concatenate([bnull[d] for d in other]) if other else np.zeros(1)
        # OLH: decoded label 1 among reports decoded to the lower vs the upper half of an attribute's states
        lo_hi = [0, 0, 0, 0]
        for d in other:
            r = ~np.isnan(Xnd[:, d])
            low = Xnd[r, d] < pm.n_states[d] / 2
            lo_hi[0] += int((ynd[r][low] == 1).sum())
            lo_hi[1] += int(low.sum())
            lo_hi[2] += int((ynd[r][~low] == 1).sum())
            lo_hi[3] += int((~low).sum())
        # the clean records' label-1 share in the lower vs the upper half of the same attributes' states
        c_lo_hi = [0, 0, 0, 0]
        for d in other:
            low = clean_X[:, d] < pm.n_states[d] / 2
            c_lo_hi[0] += int((clean_y[low] == 1).sum())
            c_lo_hi[1] += int(low.sum())
            c_lo_hi[2] += int((clean_y[~low] == 1).sum())
            c_lo_hi[3] += int((~low).sum())
        row = {
            "epsilon": eps,
            "oracles": " ".join(f"{k}:{kinds.count(k)}" for k in ("RR", "OUE", "OLH") if k in kinds),
            "auc_clean_test": round(auc_test, 3),
            "auc_own_training": round(auc_train, 3),
            "sign_agreement": round(agree, 3),
            "coef_correlation": round(corr, 3),
            "auc_rr_part": round(roc_auc_score(yte, scores_by(naive.model_, Zt, design, rr)), 3) if rr else "",
            "auc_other_part": round(roc_auc_score(yte, scores_by(naive.model_, Zt, design, other)), 3) if other else "",
            "ties": " ".join(f"{k}:{v:.2f}" for k, v in ties.items()),
            "decoded_y1": " ".join(f"{k}:{v:.2f}" for k, v in ones.items()),
            "clean_y1": round(float(np.mean(clean_y == 1)), 3),
            "no_signal_auc_clean_test": round(roc_auc_score(yte, null.decision_function(Xte)), 3),
            "no_signal_vs_real_corr_nonRR": round(float(np.corrcoef(olh_real, olh_null)[0, 1]), 3) if other else "",
            "no_signal_y1_low_high_nonRR": f"{lo_hi[0] / max(lo_hi[1], 1):.2f} / {lo_hi[2] / max(lo_hi[3], 1):.2f}"
            if other
            else "",
            "clean_y1_low_high_nonRR": f"{c_lo_hi[0] / max(c_lo_hi[1], 1):.3f} / {c_lo_hi[2] / max(c_lo_hi[3], 1):.3f}"
            if other
            else "",
            "per_attribute_auc": " ".join(f"{k}{d}:{v:.2f}" for d, (k, v) in enumerate(zip(kinds, per_attr))),
        }
        rows.append(row)
        print(row, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    head = list(rows[0])
    body = markdown_table(head, [[r[h] for h in head] for r in rows])
    print(write_report(args.out / "summary.md", "Why naive's AUC is below chance (Adult, planned release)", body, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
