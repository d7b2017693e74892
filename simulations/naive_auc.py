"""Why ``naive``'s AUC is below chance on the planned Adult release at ε 0.5 and 1 (issue 45 item 5).

``naive`` reads each paired report as a clean record through its point guess v̂ = argmax_v P(report | v)
(``fedrr.learners.decode_paired``; ties to the lowest value), x̂_j = v̂ // C, ŷ = v̂ mod C, and fits
logistic regression, unreleased attributes at their column mean. This script rebuilds the first
repeat's pool of configs/adult_planned.toml at each ε, fits ``naive`` as the sweep does (one-hot
encoding, C 1) and the clean oracle, and measures, per ε:

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

    python simulations/naive_auc.py --out results/naive_auc        # a minute or two
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from fedrr.assembly import build_population
from fedrr.estimators import NaiveLogisticRegression, naive_inputs
from fedrr.experiment import load_scenario
from fedrr.io import markdown_table, write_report
from fedrr.learners import FitData, FitOptions, decode_paired, get
from fedrr.mechanisms import LocalHashing, RandomizedResponse, UnaryEncoding
from fedrr.pool import Pool
from fedrr.release import offline_release

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "adult_planned.toml"


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    args = ap.parse_args(argv)
    spec = load_scenario(CONFIG)
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
