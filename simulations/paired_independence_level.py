"""The level of the paired fallback's independence test itself (``fedrr.estimators.spread.independence_test``,
no estimator around it) on no-signal paired releases, beside Hotelling's T² on the same terms (their
empirical covariance and an F reference), the form it replaced.

Pools: N records with D = 3 attributes of (3, 3, 2) states and labels independent of them (two
classes with P(1) 0.43, or three), released by ``PairedRecordMechanism`` (``n_sampled`` pairs at ε
per record, oracle "auto"), or the level script's pools (400 records, 5 attributes of 3 states, two
classes with P(1) 0.35, one pair at ε per record), or OLH's regime at ε 1: one attribute of 10 states
and 333 records ("olh10"), six attributes of 4-10 states and 2,000 records ("adult6"). Rate of
p ≤ alpha over ``--pools`` pools with its 95 % Clopper–Pearson interval; ``--only`` runs some kinds.

    python simulations/paired_independence_level.py --pools 1000 --out results/spread_fallback_level
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import beta
from scipy.stats import f as f_dist

from fedrr.datasets import make_logistic_discrete, make_logistic_multiclass_discrete
from fedrr.estimators.spread import independence_terms, independence_test
from fedrr.io import markdown_table, write_report
from fedrr.mechanisms import PairedRecordMechanism

#: (pools, classes, pairs per record, ε per record, records)
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
]
#: the attributes' states per kind of pool: "olh10" one 10-state attribute (its oracle OLH at ε 1),
#: "adult6" six of 4-10 states (mostly OLH at ε 1, the review's Adult-like pools)
STATES = {"small": (3, 3, 2), "level": (3,) * 5, "olh10": (10,), "adult6": (5, 7, 10, 4, 8, 9)}


def pool(kind: str, classes: int, n_sampled: int, eps: float, n: int, seed: int):
    rng = np.random.default_rng(seed)
    ks = STATES[kind]
    if classes == 2:
        b = {"small": -0.3, "level": np.log(0.35 / 0.65)}.get(kind, -0.5)
        ds = make_logistic_discrete(n, ks, np.zeros(len(ks)), b, rng=rng)
    else:
        ds = make_logistic_multiclass_discrete(n, ks, np.zeros((classes, len(ks))), rng=rng)
    mech = PairedRecordMechanism(ks, classes, eps, n_sampled=n_sampled)
    Xt, _ = mech.release(ds.X, ds.y, rng=rng)
    return [(mech, np.arange(n))], Xt


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
    k, n = int(np.sum(ps <= alpha)), ps.size
    lo = 0.0 if k == 0 else beta.ppf(0.025, k, n - k + 1)
    hi = 1.0 if k == n else beta.ppf(0.975, k + 1, n - k)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", nargs="+", choices=sorted(STATES), help="these kinds of pool only")
    args = ap.parse_args(argv)
    rows = []
    for kind, classes, n_sampled, eps, n in SETTINGS:
        if args.only and kind not in args.only:
            continue
        score, hot = [], []
        for s in range(args.pools):
            groups, X = pool(kind, classes, n_sampled, eps, n, 100 + s)
            score.append(independence_test(groups, X)["p_value"])
            hot.append(hotelling_p(groups, X))
        score, hot = np.array(score), np.array(hot)
        rows.append(
            [kind, classes, n_sampled, eps, n, args.pools]
            + [rate(score, 0.05), rate(score, 0.025), f"{score.mean():.3f}", rate(hot, 0.05), rate(hot, 0.025)]
        )
        print(rows[-1], flush=True)
    head = ["pools of", "classes", "pairs per record", "ε per record", "records", "pools"]
    head += ["score: p ≤ 0.05", "score: p ≤ 0.025", "score: mean p", "Hotelling: p ≤ 0.05", "Hotelling: p ≤ 0.025"]
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        write_report(
            args.out / "independence_direct.md",
            "The paired independence test on no-signal pools: score form (the estimator's) and Hotelling's T²",
            markdown_table(head, rows),
            argv,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
