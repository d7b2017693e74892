"""The aggregate test on supported values per report (``fedrr.frequency_check.support_count_check``,
issue 45 item 3): its level on honest pools and its power against Cao, Jia & Gong's maximal gain
attack (``fedrr.fake.mga_release``: OUE padded to ⌊p + (k − 1)q⌋ ones; OLH the best of sampled seeds).

Each pool is one attribute released by one oracle (k, ε) from n clients, plus a label by RR (not
tested): honest values drawn from π (uniform, or "skewed": 0.9 on one state, the rest uniform, as
native country = US on Adult), and a fraction f of the n reports (exactly round(f·n)) replaced by MGA
reports on r target states. Kept rate = the share of pools the test flags at α 0.05 (one field: no
Bonferroni), with its 95 % Clopper–Pearson interval: ``--pools`` honest pools per setting for the level,
``--power-pools`` per fake fraction for the power.

    python simulations/support_count_check.py --out results/support_count_check      # ~5 min of CPU
    python simulations/support_count_check.py --pools 50 --power-pools 20 --out /tmp/scc   # a minute
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from fedrr.audit import clopper_pearson
from fedrr.fake import mga_release, padded_ones
from fedrr.frequency_check import support_count_check
from fedrr.io import markdown_table, rng_for, write_report
from fedrr.mechanisms import LocalHashing, RandomizedResponse, RecordMechanism, UnaryEncoding

ALPHA = 0.05
FRACTIONS = (0.01, 0.05, 0.1)
#: (oracle, k, ε, n, π, MGA targets)
SETTINGS = [
    ("OUE", 41, 2.0, 10000, "skewed", 1),
    ("OUE", 16, 1.0, 5000, "uniform", 1),
    ("OLH", 41, 2.0, 10000, "skewed", 1),
    ("OLH", 41, 2.0, 10000, "skewed", 5),
    ("OLH", 20, 1.0, 5000, "skewed", 5),
]


def oracle(kind: str, k: int, eps: float):
    return UnaryEncoding(k, eps) if kind == "OUE" else LocalHashing(k, eps)


def pool(mech, shape: str, n: int, fraction: float, targets: int, rng: np.random.Generator):
    """One pool's column of reports: honest from π, round(fraction·n) of them MGA reports."""
    pi = np.full(mech.k, 1.0 / mech.k)
    if shape == "skewed":
        pi = np.full(mech.k, 0.1 / (mech.k - 1))
        pi[mech.k - 3] = 0.9
    x = rng.choice(mech.k, size=n, p=pi)
    col = np.asarray(mech.release(x, rng), dtype=float)
    n_fake = int(round(fraction * n))
    T = list(range(targets))
    col[:n_fake] = [mga_release(mech, T, rng, n_seeds=200) for _ in range(n_fake)]
    return col


def rate(flags: list[bool]) -> tuple[float, float, float]:
    c, n = int(np.sum(flags)), len(flags)
    lo, hi = clopper_pearson(c, n, 0.025)
    return c / n, float(lo), float(hi)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=1000, help="honest pools per setting (the level)")
    ap.add_argument("--power-pools", type=int, default=100, help="pools per fake fraction (the power)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows, table = [], []
    for si, (kind, k, eps, n, shape, targets) in enumerate(SETTINGS):
        mech = oracle(kind, k, eps)
        rm = RecordMechanism([mech], RandomizedResponse(2, epsilon=eps))
        y = np.zeros(n, dtype=np.int64)
        cells = [(0.0, args.pools)] + [(f, args.power_pools) for f in FRACTIONS]
        out = [kind, k, eps, n, shape, targets]
        if kind == "OUE":
            out.append(f"{padded_ones(mech, targets)} (honest {mech.p + (k - 1) * mech.q:.2f})")
        else:
            out.append("—")
        for fi, (fraction, pools) in enumerate(cells):
            flags, pvals = [], []
            for s in range(pools):
                rng = rng_for(45, si, fi, s)
                col = pool(mech, shape, n, fraction, targets, rng)
                res = support_count_check(col[:, None], y, rm, alpha=ALPHA)
                flags.append(res.flagged)
                pvals.append(res.fields[0].p_value)
            r, lo, hi = rate(flags)
            rows.append(
                {
                    "oracle": kind,
                    "k": k,
                    "epsilon": eps,
                    "n": n,
                    "pi": shape,
                    "targets": targets,
                    "fake_fraction": fraction,
                    "pools": pools,
                    "flagged": int(np.sum(flags)),
                    "rate": round(r, 4),
                    "cp_low": round(lo, 4),
                    "cp_high": round(hi, 4),
                    "median_p": float(np.median(pvals)),
                }
            )
            out.append(f"{r:.3f} [{lo:.3f}, {hi:.3f}]")
            print(rows[-1], flush=True)
        table.append(out)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    head = ["oracle", "k", "ε", "n", "π", "MGA targets", "fake's ones (OUE)"]
    head += [f"honest: flagged ({args.pools} pools)"] + [f"{f:.0%} fakes ({args.power_pools} pools)" for f in FRACTIONS]
    body = (
        f"Flagged rate at α {ALPHA} with its 95 % Clopper–Pearson interval. Level: the honest column "
        f"(target ≤ {ALPHA}); power: the fake columns.\n\n" + markdown_table(head, table)
    )
    title = "Support-count check: level on honest pools, power against MGA"
    print(write_report(args.out / "summary.md", title, body, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
