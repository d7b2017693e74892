"""Empirical differential-privacy audit of every fedrr mechanism: for each mechanism, draw releases
at the worst-case neighbouring inputs and certify, with Clopper–Pearson intervals and a Bonferroni
union bound at overall α = 1e-6, a lower bound ε̂ on the ε the mechanism really has at its claimed
δ. PASS means ε̂ ≤ claimed ε. Deliberately mis-calibrated mechanisms must FAIL.

The suite and its sample sizes are ``fedrr.testing.audit_suite`` (the method: ``fedrr.audit``); this
script runs it and writes ``audit.md`` and ``audit.csv``.

    python simulations/audit_mechanisms.py            # ~1 min; writes results/audit/
    python simulations/audit_mechanisms.py --quick    # seconds; writes results/audit/quick/
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from fedrr.audit import DEFAULT_ALPHA
from fedrr.io import atomic_write_text, command_line, markdown_table, provenance, write_csv
from fedrr.mechanisms import RandomizedResponse
from fedrr.testing.audit_suite import run_cases, standard_cases

FIELDS = [
    "group",
    "mechanism",
    "claimed_epsilon",
    "claimed_delta",
    "epsilon_lower_bound",
    "ratio",
    "exact_epsilon",
    "n_samples",
    "n_certify",
    "n_intervals",
    "alpha",
    "max_certifiable",
    "expected",
    "result",
    "as_expected",
    "seconds",
    "witness",
    "method",
    "note",
]


def fmt(v, digits=4):
    return "—" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def report(results: list[dict], command: str, alpha: float, seconds: float) -> str:
    header = [
        "group",
        "mechanism",
        "claimed ε",
        "δ",
        "ε̂ lower bound",
        "ε̂/ε",
        "exact ε",
        "n / input",
        "max certifiable",
        "expected",
        "result",
        "note",
    ]
    body = [
        [
            r["group"],
            r["mechanism"],
            fmt(r["claimed_epsilon"]),
            f"{r['claimed_delta']:g}",
            fmt(r["epsilon_lower_bound"]),
            fmt(r["ratio"], 2),
            fmt(r["exact_epsilon"]),
            f"{r['n_samples']:,}",
            fmt(r["max_certifiable"], 2),
            r["expected"],
            r["result"] + ("" if r["as_expected"] else " (UNEXPECTED)"),
            r["note"],
        ]
        for r in results
    ]
    n_bad = sum(not r["as_expected"] for r in results)
    witnesses = "\n".join(f"* {r['mechanism']}: {r['witness']}" for r in results)
    eps_px = RandomizedResponse(256, 0.4).epsilon
    br = "  "  # a markdown line break
    return f"""# Empirical DP audit of fedrr's mechanisms

Command: `{command}`{br}
Written: {provenance()}{br}
Overall false-alarm probability per audit α = {alpha:g} (Bonferroni over all one-sided Clopper–Pearson
intervals of that audit); {len(results)} audits in {seconds:.0f} s; {n_bad} outcome(s) differ from the expectation.

ε̂ is a lower bound on the true ε (at the claimed δ) that holds with probability ≥ 1 − α; PASS ⇔ ε̂ ≤ claimed ε.
"exact ε" is the true ε of the audited neighbouring pair computed from the noise distribution (discrete:
transition probabilities over every pair of states; Laplace: ‖x − x'‖₁/b; Gaussian: analytic-Gaussian ε at δ;
pure-ε records: sum of the per-field sups). "max certifiable" is the largest ε̂ any mechanism could obtain with
that many draws (≈ log n): a claim above it cannot fail. n / input counts all draws per neighbouring input;
continuous and record audits spend 10 % of them on a pilot that fixes the threshold sets.

{markdown_table(header, body)}

Why no joint audit of a 784-pixel MNIST record: its claimed record ε is 785·ε_pixel (flip 0.4 at K = 256:
ε_pixel = {eps_px:.2f}, record ε ≈ {785 * eps_px:.0f}),
far above max certifiable ≈ 11 at n = 10⁶, and the sets that attain the composed ε (every pixel and the label
kept) have probability ≈ 0.6^785 ≈ 10^{785 * math.log10(0.6):.0f}. Such a claim can neither pass meaningfully nor
fail at any feasible n; the informative checks are the per-field audits (RR k = 256 rows) and the exact
composition, which the small records confirm (exact record ε = record.epsilon).

Witnesses (the neighbouring inputs and the test set that achieved ε̂):

{witnesses}
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/audit", help="output directory (default: results/audit)")
    parser.add_argument("--seed", type=int, default=0, help="master seed (default: 0)")
    parser.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA, help="overall false-alarm probability per audit (default: 1e-6)"
    )
    parser.add_argument("--rr-cap", type=int, default=10_000_000, help="max draws per state for RR rows (default: 1e7)")
    parser.add_argument("--quick", action="store_true", help="10x fewer draws for continuous/record rows (smoke test)")
    args = parser.parse_args(argv)
    command = command_line(argv)
    out = Path(args.out.rstrip("/") + "/quick" if args.quick and args.out.rstrip("/") == "results/audit" else args.out)
    t0 = time.perf_counter()
    results = run_cases(
        standard_cases(args.quick, args.alpha, args.rr_cap),
        args.seed,
        args.alpha,
        progress=lambda s: print(s, flush=True),
    )
    seconds = time.perf_counter() - t0
    write_csv(out / "audit.csv", results, command, fields=FIELDS)
    atomic_write_text(out / "audit.md", report(results, command, args.alpha, seconds))
    n_bad = sum(not r["as_expected"] for r in results)
    print(f"\nwrote {out / 'audit.md'} and {out / 'audit.csv'} ({seconds:.0f} s)")
    if n_bad and args.quick:
        print(f"note: {n_bad} unexpected outcome(s) at --quick sample sizes (the expectations are for the full run)")
        return 0
    return 0 if n_bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
