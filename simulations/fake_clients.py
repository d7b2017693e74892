"""Fake clients on UCI Adult, measured (issue 18): accuracy with 0/1/5/10 % fake clients, and how
often the server's frequency check flags a pool, honest or attacked.

The setting is configs/adult.toml's at ε 4 per record: 30,162 one-record clients, each releasing its
label and ONE uniformly drawn attribute at ε 2 each by the best frequency oracle (attribute sampling);
spread, ldp-nb, naive, majority and the clean oracle are fitted on the same pool. A fraction of the
clients are fake (``fedrr.fake``, after Cheu, Smith & Ullman 2021 and Cao, Jia & Gong 2021):

* accuracy: the output attack (maximal gain) on age bin 0 (the youngest, 1 % of whom earn >50K) and
  the label >50K, at 0/1/5/10 % fake clients, 3 seeds (the same cell seeds at every fraction, so
  the honest clients' releases are the same and only the fakes differ);
* flags: ``fedrr.frequency_check`` at α = 0.01 on 10 seeds of an honest pool and of pools with 5 %
  fakes: the output attack on age bin 0 and on native country = US (a common state), the
  output-sampled attack (crafted reports at the honest sampling rate) and the input attack (fake
  records, honestly randomised). Counts: any flag, the debiased-frequency test, the sampling count.

Every number comes from the sweep's own cell runner (``fedrr.experiment.run_cell``, offline:
the pool a Flower run would collect); finished cells under OUT/cells are reused.

    python simulations/fake_clients.py                             # results/fake_clients/ (~25 min, 2 cores)
    python simulations/fake_clients.py --quick --out /tmp/fake     # 2,000 clients, a minute
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from fedrr.experiment import parse_scenario, run_cell
from fedrr.io import provenance

COMMAND = "python simulations/fake_clients.py"
FRACTIONS = (0.0, 0.01, 0.05, 0.1)
LEARNERS = ("spread", "ldp-nb", "naive", "majority", "clean")
#: name -> (fraction, attack, attribute, state) of the flag-count pools (label >50K throughout)
FLAG_RUNS = {
    "honest": (0.0, "output", 0, 0),
    "output, age bin 0": (0.05, "output", 0, 0),
    "output, native country US": (0.05, "output", 11, 38),
    "output-sampled, age bin 0": (0.05, "output-sampled", 0, 0),
    "input, age bin 0": (0.05, "input", 0, 0),
}


def scenario(name: str, n_clients: int, repeats: int, learners, fraction: float, attack: str, attribute: int,
             state: int, alpha: float):  # fmt: skip
    """configs/adult.toml at ε 4 with fake clients (a ``ScenarioSpec``)."""
    return parse_scenario(
        {
            "scenario": {"name": name, "seed": 0, "repeats": repeats},
            "population": {
                "dataset": "adult_binned",
                "n_clients": n_clients,
                "fake_fraction": fraction,
                "fake_attack": attack,
                "fake_attribute": attribute,
                "fake_state": state,
                "fake_label": 1,
            },
            "privacy": {
                "mechanism": "oracle",
                "epsilon_grid": [4.0],
                "split": {"features": 0.5, "label": 0.5},
                "n_sampled": 1,
            },
            "learners": {"names": list(learners), "encoding": "onehot", "spread_max_iter": 60},
            "run": {"mode": "offline", "check_alpha": alpha},
        }
    )


def run_cells(spec, out: Path) -> list[dict]:
    """Every cell of ``spec``: reused from out/<name>/cells when its fingerprint matches, else run."""
    recs = []
    for cell in spec.cells():
        path = out / spec.name / "cells" / f"{cell.key}.json"
        rec = json.loads(path.read_text()) if path.exists() else None
        if rec is None or rec.get("fingerprint") != cell.fingerprint() or rec.get("status") != "done":
            rec = run_cell(cell, out / spec.name)
        recs.append(rec)
        check = rec["frequency_check"]
        print(f"  {spec.name} {cell.key}: flagged {check['flagged']} {check['flagged_fields']}", flush=True)
    return recs


def accuracy_rows(args, out: Path) -> list[dict]:
    rows = []
    for f in args.fractions:
        spec = scenario(f"acc-f{f:g}", args.n_clients, args.seeds, args.learners, f, "output", 0, 0, args.alpha)
        for rec in run_cells(spec, out / "cells"):
            for name, entry in rec["learners"].items():
                n_fake = rec["population"].get("fake_clients", {}).get("n_fake", 0)
                rows.append(
                    {
                        "fake_fraction": f,
                        "n_fake": n_fake,
                        "seed": rec["seed"],
                        "repeat": rec["r"],
                        "learner": name,
                        "accuracy": entry.get("accuracy"),
                        "error": entry.get("error", ""),
                        "flagged": rec["frequency_check"]["flagged"],
                    }  # fmt: skip
                )
    return rows


def flag_rows(args, out: Path) -> list[dict]:
    rows = []
    for i, (label, (f, attack, attr, state)) in enumerate(FLAG_RUNS.items()):
        spec = scenario(f"flags-{i}", args.n_clients, args.flag_seeds, ["majority"], f, attack, attr, state, args.alpha)
        for rec in run_cells(spec, out / "cells"):
            c = rec["frequency_check"]
            z_freq = max(v["z"] for v in c["fields"].values())
            z_samp = max((abs(v["z"]) for v in c["sampling"].values()), default=float("nan"))
            rows.append(
                {
                    "pool": label,
                    "fake_fraction": f,
                    "seed": rec["seed"],
                    "flagged": c["flagged"],
                    "frequency_flagged": c["frequency_flagged"],
                    "sampling_flagged": c["sampling_flagged"],
                    "max_frequency_z": z_freq,
                    "max_sampling_abs_z": z_samp,
                    "z_critical": c["z_critical"],
                    "flagged_fields": " ".join(c["flagged_fields"]),
                }  # fmt: skip
            )
    return rows


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as fh:
        fh.write(f"# {command(ARGS)}\n")
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def markdown(args, acc: list[dict], flags: list[dict]) -> str:
    lines = [
        "# Fake clients on UCI Adult (ε 4 per record, label + one sampled attribute)",
        "",
        f"Made by `{command(args)}`.",
        "",
        provenance(),
        "",
        f"{args.n_clients:,} clients; fake clients send the output attack (maximal gain) on age bin 0 and the "
        f"label >50K. Test accuracy, mean ± sd over {args.seeds} seeds (the same seeds at every fraction); "
        f"'flagged' counts the cells the frequency check (α = {args.alpha:g}) flagged.",
        "",
        "| fake clients | " + " | ".join(args.learners) + " | flagged |",
        "|---" * (len(args.learners) + 2) + "|",
    ]
    for f in args.fractions:
        cells = []
        for name in args.learners:
            a = np.array([r["accuracy"] for r in acc if r["fake_fraction"] == f and r["learner"] == name], float)
            a = a[np.isfinite(a)]
            cells.append(f"{a.mean():.3f} ± {a.std(ddof=1) if a.size > 1 else 0:.3f}" if a.size else "n/a")
        fl = [r["flagged"] for r in acc if r["fake_fraction"] == f and r["learner"] == args.learners[0]]
        lines.append(f"| {100 * f:g} % | " + " | ".join(cells) + f" | {sum(fl)} of {len(fl)} |")
    lines += [
        "",
        f"## Frequency-check flags over {args.flag_seeds} seeds (α = {args.alpha:g} per pool)",
        "",
        "| pool | flagged | debiased-frequency test | sampling-count test | median max z (frequency) |",
        "|---|---|---|---|---|",
    ]
    for label in FLAG_RUNS:
        rs = [r for r in flags if r["pool"] == label]
        n = len(rs)
        med = float(np.median([r["max_frequency_z"] for r in rs]))
        lines.append(
            f"| {label} ({100 * FLAG_RUNS[label][0]:g} % fake) | {sum(r['flagged'] for r in rs)} of {n} | "
            f"{sum(r['frequency_flagged'] for r in rs)} of {n} | {sum(r['sampling_flagged'] for r in rs)} of {n} | "
            f"{med:.2f} (critical {rs[0]['z_critical']:.2f}) |"
        )
    return "\n".join(lines) + "\n"


def figure(path: Path, args, acc: list[dict]) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    x = 100 * np.asarray(args.fractions)
    for name in args.learners:
        per = [np.array([r["accuracy"] for r in acc if r["fake_fraction"] == f and r["learner"] == name], float)
               for f in args.fractions]  # fmt: skip
        ax.errorbar(x, [p.mean() for p in per], yerr=[p.std() for p in per], marker="o", capsize=3, label=name,
                    linestyle="--" if name == "clean" else "-")  # fmt: skip
    ax.set_xlabel("fake clients (%), output attack on age bin 0 → >50K")
    ax.set_ylabel("test accuracy (clean test split)")
    ax.set_title(f"UCI Adult, {args.n_clients:,} clients, ε 4 per record")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


ARGS = argparse.Namespace()


def command(args) -> str:
    """The command that makes these results (the options that differ from the defaults)."""
    opts = " --quick" if args.quick else ""
    for name, default in (("seeds", 3), ("flag_seeds", 10), ("alpha", 0.01)):
        if not args.quick and getattr(args, name) != default:
            opts += f" --{name.replace('_', '-')} {getattr(args, name):g}"
    return COMMAND + opts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/fake_clients", help="output folder (default results/fake_clients)")
    parser.add_argument("--quick", action="store_true", help="2,000 clients, 0 and 5 %%, naive and majority, 2 seeds")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per fake fraction (default 3)")
    parser.add_argument("--flag-seeds", type=int, default=10, help="seeds per flag-count pool (default 10)")
    parser.add_argument("--alpha", type=float, default=0.01, help="the check's false-alarm probability per pool")
    args = parser.parse_args(argv)
    ARGS.__dict__.update(vars(args))
    args.n_clients, args.fractions, args.learners = 30162, FRACTIONS, LEARNERS
    if args.quick:
        args.n_clients, args.fractions, args.learners = 2000, (0.0, 0.05), ("naive", "majority")
        args.seeds, args.flag_seeds = min(args.seeds, 2), min(args.flag_seeds, 2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    acc, flags = accuracy_rows(args, out), flag_rows(args, out)
    write_csv(out / "fake_clients.csv", acc)
    write_csv(out / "fake_clients_flags.csv", flags)
    (out / "fake_clients.md").write_text(markdown(args, acc, flags))
    figure(out / "fake_clients.png", args, acc)
    print((out / "fake_clients.md").read_text())


if __name__ == "__main__":
    main()
