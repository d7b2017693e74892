"""Mironov's floating-point attack on Laplace releases, naive vs snapped.

For each (ε, x0, x1) cell, one feature in [0, 1] is released ``--n`` times from x0 by numpy's
Laplace sampler (``LaplaceMechanism``), the textbook sampler x + S·b·log(k·2⁻⁵³) and
``SnappingLaplaceMechanism`` at the same requested ε, and each release is attacked by an exact
replay of its sampler's arithmetic: is it reachable from x1 at all? The table gives the fraction
of releases that prove "the input was not x1" (an infinite privacy loss), with a 95%
Clopper–Pearson interval, and the releases wrongly declared unreachable from their true input x0
(a soundness check: must be 0). The attack is ``fedrr.audit.attack_cells``; this script
writes ``fp_attack.md`` and ``fp_attack.csv``.

    python simulations/fp_laplace_attack.py --n 20000 --seed 0 --out results/fp_attack   # ~25 s
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedrr.audit import STANDARD_CELLS, attack_cells
from fedrr.io import atomic_write_text, command_line, provenance, write_csv

FIELDS = [
    "epsilon",
    "x0",
    "x1",
    "sampler",
    "n",
    "excluded",
    "rate",
    "ci_low",
    "ci_high",
    "false_exclusions",
    "stated_epsilon",
    "seconds",
]


def markdown(rows: list[dict], command: str) -> str:
    by_cell: dict[tuple, dict] = {}
    for r in rows:
        by_cell.setdefault((r["epsilon"], r["x0"], r["x1"]), {})[r["sampler"]] = r

    def fmt(r):
        return f"{r['rate']:.4f} [{r['ci_low']:.4f}, {r['ci_high']:.4f}]"

    lines = [
        "# Floating-point attack on Laplace sampling (Mironov 2012): naive vs snapping",
        "",
        f"Command: `{command}`  ",
        f"Written: {provenance()}  ",
        f"Releases per cell: {rows[0]['n']}; domain [0, 1] (sensitivity 1); 95% Clopper–Pearson intervals.",
        "",
        "Each entry is the fraction of releases from x0 that *prove* the input was not x1 (no sampler state",
        "reaches the release from x1: an unbounded privacy loss). `false` counts releases declared unreachable",
        "from their true input x0 (soundness of the exact search; 0 everywhere).",
        "",
        "| ε | x0 | x1 | numpy Laplace (LaplaceMechanism) | textbook x+S·b·log U | snapping (stated ε) "
        "| false (numpy/textbook/snap) |",
        "|---|---|---|---|---|---|---|",
    ]
    for (eps, x0, x1), d in by_cell.items():
        nl, tb, sn = d["numpy Laplace"], d["textbook Laplace"], d["snapping"]
        lines.append(
            f"| {eps:g} | {x0!r} | {x1!r} | {fmt(nl)} | {fmt(tb)} | {fmt(sn)} (ε={sn['stated_epsilon']!r}) | "
            f"{nl['false_exclusions']}/{tb['false_exclusions']}/{sn['false_exclusions']} |"
        )
    lines += [
        "",
        "Reading: with numpy's sampler most releases rule out the other input with certainty — even an input",
        "that differs only in the last bit (x1 = nextafter(0.3)). Snapped releases are grid values reachable",
        "from every input, so the same exact search never excludes anything; their stated ε is Mironov's bound",
        "(1 + 12·B·η')/λ + 2η' with η' = 2⁻⁵², at most the requested ε (see fedrr/mechanisms/_snapping.py).",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="releases per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/fp_attack")
    ap.add_argument("--quick", action="store_true", help="1,000 releases per cell (smoke test)")
    args = ap.parse_args(argv)
    command = command_line(argv)
    rows = attack_cells(
        STANDARD_CELLS, 1000 if args.quick else args.n, args.seed, progress=lambda s: print(s, flush=True)
    )
    out = Path(args.out)
    write_csv(out / "fp_attack.csv", rows, command, fields=FIELDS)
    atomic_write_text(out / "fp_attack.md", markdown(rows, command))
    print(f"wrote {out / 'fp_attack.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
