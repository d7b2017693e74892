"""Barber (2020) Fig 1, computed exactly (no sampling): the Bernoulli model p(x = 1) = θ, symmetric
binary randomised response with flip probability pf (P10 = P01 = pf), N → ∞. It shows that the
paper's figure is the flat-prior reconstruction: J∞ (eq 38) taken literally has no interior optimum,
and reconstruction iterated as EM lands on the spread MLE, θ0 itself.

For each θ0 on a grid of [0, 1] the released frequency is f̃1 = pf + (1 − 2pf)·θ0 and the curves are

  reconstruction, J∞ literally (eq 38)
        argmax_θ J∞(θ), J∞(θ) = Σ_x̃ p̃_θ0(x̃) Σ_x p_θ(x | x̃) log p_θ(x), the posterior using the same θ
        that is optimised. For pf > 0, J∞ ≤ 0 and J∞ → 0 as θ → 0 or 1, so the supremum sits at a
        boundary (0 for θ0 < ½, 1 for θ0 > ½; a tie at ½). Maximised on a grid of θ ∈ [1e-9, 1 − 1e-9];
        interior local maxima, if any, are listed in the CSV.
  reconstruction, fixed flat prior
        the posterior p(x | x̃) from a flat prior (θ = ½) held fixed, J maximised in closed form:
        θ* = pf + (1 − 2pf) f̃1 = ½ + (1 − 2pf)²(θ0 − ½) — shrinks toward ½ with slope (1 − 2pf)².
  reconstruction iterated as EM
        θ ← E_{p̃_θ0}[p_θ(x = 1 | x̃)] repeated from θ = ½ until it stops moving (|Δθ| < 1e-13, at most
        --em-steps steps): the EM iteration of the spread likelihood, which lands on the spread MLE θ0.
        At θ0 ∈ {0, 1} EM converges sublinearly (|θ − θ0| ~ 1/steps), elsewhere geometrically.
  spread MLE
        θ = (f̃1 − P10)/(1 − P10 − P01) clipped to [0, 1] (eq 24 with its sign corrected), = θ0 in the limit.
        Shaded: the exact mean ± 1 sd of the clipped estimate at finite N (default 500; binomial sums).

Writes fig1_bernoulli.csv, .png and .md to --out.

    python simulations/barber_fig1.py                              # ~5 s, writes results/barber/
    python simulations/barber_fig1.py --quick --out /tmp/barber    # coarser grids
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import binom

from fedrr.io import atomic_write_text, command_line, markdown_table, provenance, write_csv

PFS = (0.1, 0.2, 0.3, 0.4)
EPS = 1e-9


def released_f1(theta0: np.ndarray, pf: float) -> np.ndarray:
    return pf + (1.0 - 2.0 * pf) * theta0


def posterior1(theta: np.ndarray, pf: float, xt: int) -> np.ndarray:
    """p_θ(x = 1 | x̃) for symmetric flips."""
    l1 = (1 - pf) if xt == 1 else pf  # p(x̃ | x = 1)
    l0 = pf if xt == 1 else (1 - pf)  # p(x̃ | x = 0)
    return l1 * theta / (l1 * theta + l0 * (1 - theta))


def j_infinity(theta: np.ndarray, theta0: np.ndarray, pf: float) -> np.ndarray:
    """J∞(θ) of eq 38 for every (θ0, θ) pair: (len(theta0), len(theta))."""
    f1 = released_f1(np.asarray(theta0, float), pf)[:, None]
    th = np.asarray(theta, float)[None, :]
    out = np.zeros((f1.shape[0], th.shape[1]))
    for xt, px in ((1, f1), (0, 1 - f1)):
        p1 = posterior1(th, pf, xt)
        out += px * (p1 * np.log(th) + (1 - p1) * np.log1p(-th))
    return out


def literal_argmax(theta0: np.ndarray, pf: float, n_grid: int) -> tuple[np.ndarray, np.ndarray, list[list[float]]]:
    """(argmax of J∞ on the θ grid, its value, interior local maxima) per θ0."""
    grid = np.linspace(EPS, 1 - EPS, n_grid)
    J = j_infinity(grid, theta0, pf)
    best = J.max(axis=1)
    # exact ties (θ0 = ½ is symmetric): report ½, the midpoint of the two boundary maximisers
    tie = np.isclose(J[:, 0], J[:, -1], rtol=0, atol=1e-12) & np.isclose(best, J[:, 0], rtol=0, atol=1e-12)
    arg = np.where(tie, 0.5, grid[np.argmax(J, axis=1)])
    interior = []
    for row in J:
        lm = np.flatnonzero((row[1:-1] > row[:-2]) & (row[1:-1] > row[2:])) + 1
        interior.append([float(grid[i]) for i in lm])
    return arg, best, interior


def flat_prior_reconstruction(theta0: np.ndarray, pf: float) -> np.ndarray:
    f1 = released_f1(theta0, pf)
    return f1 * posterior1(np.array(0.5), pf, 1) + (1 - f1) * posterior1(np.array(0.5), pf, 0)


def em_reconstruction(
    theta0: np.ndarray, pf: float, max_steps: int = 20_000, tol: float = 1e-13
) -> tuple[np.ndarray, np.ndarray]:
    """Iterate θ ← E_{p̃_θ0}[p_θ(x = 1 | x̃)] from ½; returns θ and the steps each θ0 needed
    (max_steps: not converged)."""
    f1 = released_f1(theta0, pf)
    th = np.full(theta0.shape, 0.5)
    steps = np.full(theta0.shape, max_steps)
    for t in range(1, max_steps + 1):
        new = f1 * posterior1(th, pf, 1) + (1 - f1) * posterior1(th, pf, 0)
        steps[(np.abs(new - th) < tol) & (steps == max_steps)] = t
        th = new
        if np.all(steps < max_steps):
            break
    return th, steps


def spread_exact(theta0: np.ndarray, pf: float) -> np.ndarray:
    return np.clip((released_f1(theta0, pf) - pf) / (1 - 2 * pf), 0.0, 1.0)


def spread_finite_n(theta0: np.ndarray, pf: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact mean and sd of the clipped Warner estimate from n releases (binomial sums)."""
    k = np.arange(n + 1)
    est = np.clip((k / n - pf) / (1 - 2 * pf), 0.0, 1.0)
    pmf = binom.pmf(k[None, :], n, released_f1(theta0, pf)[:, None])
    m = pmf @ est
    return m, np.sqrt(np.maximum(pmf @ est**2 - m**2, 0.0))


def _bound(v: float) -> str:
    return "→ 0" if v < 1e-6 else "→ 1" if v > 1 - 1e-6 else f"{v:.3g}"


def plot(theta0, curves, rows, finite_n: int, command: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 9), sharex=True, sharey=True)
    for ax, pf in zip(axes.ravel(), PFS):
        c = curves[pf]
        ax.fill_between(
            theta0,
            c["fm"] - c["fsd"],
            c["fm"] + c["fsd"],
            color="tab:green",
            alpha=0.15,
            label=f"spread estimate, N={finite_n}: exact mean ± 1 sd",
        )
        ax.plot(theta0, c["spread"], color="tab:green", lw=3, alpha=0.7, label="spread MLE, N→∞ (= θ0)")
        ax.plot(theta0, c["em"], color="k", ls=":", lw=1.8, label="reconstruction iterated as EM (→ spread MLE)")
        ax.plot(theta0, c["flat"], color="tab:orange", lw=1.8, label="reconstruction, fixed flat prior: slope (1−2pf)²")
        ax.step(
            theta0,
            c["lit"],
            where="mid",
            color="tab:red",
            lw=1.5,
            ls="--",
            label="argmax J∞ literally (eq 38): boundary",
        )
        pts = [
            (r["theta0"], float(v))
            for r in rows
            if r["pf"] == pf and r["j_inf_interior_local_maxima"]
            for v in r["j_inf_interior_local_maxima"].split(";")
        ]
        if pts:
            ax.plot(*zip(*pts), ".", color="tab:red", ms=4, label="J∞: interior local (not global) maximum")
        ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, zorder=0)
        ax.set_title(f"flip probability pf = {pf}  (ε = {np.log((1 - pf) / pf):.2f})")
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("true θ0")
    for ax in axes[:, 0]:
        ax.set_ylabel("estimated θ")
    axes[0, 0].legend(fontsize=7.5, loc="upper left")
    fig.suptitle(
        "Barber Fig 1, exact (no sampling): Bernoulli θ from randomised response.\n"
        "Red: J∞ (eq 38) taken literally has its sup at θ→0 or 1; orange: reconstruction with a fixed flat "
        "prior;\nblack dotted: reconstruction iterated (EM) = spread MLE; green: spread MLE (eq 24, sign "
        "corrected)",
        fontsize=9.5,
    )
    fig.text(0.01, 0.005, command, fontsize=7, color="0.4")
    fig.tight_layout(rect=(0, 0.015, 1, 0.95))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="results/barber", help="output directory (default results/barber)")
    ap.add_argument("--quick", action="store_true", help="coarser grids (θ0 step 0.05, 20,001 θ points)")
    ap.add_argument("--n-theta0", type=int, default=None, help="θ0 grid points on [0, 1] (default 101; quick 21)")
    ap.add_argument(
        "--n-theta", type=int, default=None, help="θ grid for maximising J∞ (default 200,001; quick 20,001)"
    )
    ap.add_argument("--em-steps", type=int, default=None, help="max EM steps (default 20,000; quick 2,000)")
    ap.add_argument(
        "--finite-n", type=int, default=500, help="N for the exact finite-sample band of the spread estimate"
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    n0 = args.n_theta0 or (21 if args.quick else 101)
    nt = args.n_theta or (20_001 if args.quick else 200_001)
    em_steps = args.em_steps or (2_000 if args.quick else 20_000)
    theta0 = np.linspace(0.0, 1.0, n0)
    command = command_line(argv)
    t0 = time.perf_counter()
    rows, curves = [], {}
    for pf in PFS:
        lit, lit_val, interior = literal_argmax(theta0, pf, nt)
        em, steps = em_reconstruction(theta0, pf, max_steps=em_steps)
        fm, fsd = spread_finite_n(theta0, pf, args.finite_n)
        c = curves[pf] = dict(
            lit=lit, flat=flat_prior_reconstruction(theta0, pf), em=em, spread=spread_exact(theta0, pf), fm=fm, fsd=fsd
        )
        for i, t in enumerate(theta0):
            rows.append(
                {
                    "pf": pf,
                    "theta0": float(t),
                    "f1_tilde": float(released_f1(t, pf)),
                    "j_inf_literal_argmax": float(lit[i]),
                    "j_inf_literal_max": float(lit_val[i]),
                    "j_inf_interior_local_maxima": ";".join(f"{v:.6f}" for v in interior[i]),
                    "recon_flat_prior": float(c["flat"][i]),
                    "recon_em_iterated": float(em[i]),
                    "em_steps": int(steps[i]),
                    "spread_mle": float(c["spread"][i]),
                    f"spread_mean_N{args.finite_n}": float(fm[i]),
                    f"spread_sd_N{args.finite_n}": float(fsd[i]),
                }
            )
    seconds = time.perf_counter() - t0
    write_csv(out / "fig1_bernoulli.csv", rows, command)
    plot(theta0, curves, rows, args.finite_n, command, out / "fig1_bernoulli.png")

    body = []
    for pf in PFS:
        c = curves[pf]
        for t in (0.1, 0.3, 0.5, 0.7, 0.9):
            i = int(np.argmin(np.abs(theta0 - t)))
            body.append(
                [
                    pf,
                    f"{theta0[i]:.2f}",
                    _bound(c["lit"][i]),
                    f"{c['flat'][i]:.4f}",
                    f"{c['em'][i]:.4f}",
                    f"{c['spread'][i]:.4f}",
                    f"{c['fm'][i]:.4f} ± {c['fsd'][i]:.4f}",
                ]
            )
    table = markdown_table(
        [
            "pf",
            "θ0",
            "argmax J∞ (literal)",
            "recon., flat prior",
            "recon. iterated (EM)",
            "spread MLE (N→∞)",
            f"spread, N={args.finite_n} (exact mean ± sd)",
        ],
        body,
    )
    slopes = {pf: float(np.polyfit(theta0, curves[pf]["flat"], 1)[0]) for pf in PFS}
    inner = (theta0 > 0) & (theta0 < 1)
    max_em_err = max(float(np.max(np.abs(curves[pf]["em"] - theta0)[inner])) for pf in PFS)
    max_em_end = max(float(np.max(np.abs(curves[pf]["em"] - theta0)[~inner])) for pf in PFS)
    interior_txt = []
    for pf in PFS:
        pts = [
            (r["theta0"], [float(v) for v in r["j_inf_interior_local_maxima"].split(";")])
            for r in rows
            if r["pf"] == pf and r["j_inf_interior_local_maxima"]
        ]
        loc = [v for _, vs in pts for v in vs]
        interior_txt.append(
            f"pf={pf}: for θ0 ∈ [{pts[0][0]:.2f}, {pts[-1][0]:.2f}] a local (never global) maximum at "
            f"θ ∈ [{min(loc):.3f}, {max(loc):.3f}]"
            if pts
            else f"pf={pf}: none"
        )
    md = "\n".join(
        [
            "# Barber (2020) Fig 1 — Bernoulli model, reconstruction vs spread (exact, N → ∞)",
            "",
            f"Command: `{command}` ({seconds:.1f} s). Written: {provenance()}. Files: `fig1_bernoulli.csv`, "
            "`fig1_bernoulli.png`.",
            "",
            "Which curve is which (all exact, no sampling; symmetric flips P10 = P01 = pf; f̃1 = pf + (1 − 2pf)θ0):",
            "",
            "* **argmax J∞, literally (eq 38)** — the posterior p_θ(x | x̃) uses the θ being optimised. J∞ ≤ 0 and "
            "J∞ → 0 at θ → 0 or 1, so for every pf > 0 the supremum is at a boundary: 0 for θ0 < ½, 1 for θ0 > ½ "
            "(tie at ½). Interior local maxima of J∞ on the θ grid (drawn as dots): "
            + "; ".join(interior_txt)
            + ". Barber's Fig 1 therefore cannot be J∞ maximised literally.",
            "* **reconstruction with a fixed flat prior** — θ* = ½ + (1 − 2pf)²(θ0 − ½); fitted slopes "
            + ", ".join(f"{slopes[pf]:.4f} (pf={pf}; (1−2pf)² = {(1 - 2 * pf) ** 2:.4f})" for pf in PFS)
            + ". This is the shrunk, non-diagonal shape of Barber's Fig 1.",
            f"* **reconstruction iterated as EM** (from θ = ½, at most {em_steps} steps) — lands on the spread MLE: "
            f"max |θ − θ0| = {max_em_err:.1e} for 0 < θ0 < 1; {max_em_end:.1e} at θ0 ∈ {{0, 1}}, where EM converges "
            "sublinearly (|θ − θ0| ~ 1/steps).",
            "* **spread MLE** — (f̃1 − P10)/(1 − P10 − P01) clipped to [0, 1] = θ0 on the whole diagonal; the band "
            f"is the exact mean ± 1 sd at N = {args.finite_n} (the clipping biases it slightly inward near θ0 = 0 "
            "and 1).",
            "",
            table,
            "",
        ]
    )
    atomic_write_text(out / "fig1_bernoulli.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
