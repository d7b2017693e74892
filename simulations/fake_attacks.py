"""The published attacks and a defence that acts, on UCI Adult (issue 32): Cao, Jia & Gong's maximal
gain attack (``fedrr.fake``, attack "mga": k-RR the target, OUE padded to the honest number of ones,
OLH the best of sampled seeds), its unpadded variant ("output"), both at the honest sampling rate
("mga-sampled") and the input attack, against ldp-nb with and without a defence.

Two parts:

* accuracy: configs/adult_paired.toml's paired release (one (attribute, label) pair per client, the
  least-variance oracle for each pair domain; at ε 4 k-RR for every attribute), 30,162 clients, fakes
  at 0 / 1 / 5 / 10 % (ε 4 and 2) promoting (native country = US, >50K), the same seeds at every fraction (the
  honest clients' releases are the same, only the fakes differ). Learners: ldp-nb (the published
  clipping), ldp-nb-normsub (Norm-Sub consistency, the countermeasure Cao, Jia & Gong evaluated),
  ldp-nb-robust (``LDPNaiveBayes(robust="margins")``: the attribute whose table's class margin
  disagrees with the others' is dropped) and majority; the frequency check's flags (α 0.01). Every
  number comes from the sweep's cell runner (``fedrr.experiment.run_cell``, offline), cells
  under OUT/cells reused. spread is left out: ~50 s per fit on Adult.
* flags: how often the frequency check flags a pool (α 0.01, 10 seeds), with the attacked field
  released by OUE so that the padding matters: split release (label by RR at ε 2, one sampled
  attribute at ε 2, native country by OUE — fedrr's own choice there is OLH — the others by the
  least-variance oracle) with 5 % fakes on native country = US (common) or Outlying-US (rare, state
  14: one training client), by the unpadded output attack, the padded MGA, the MGA at the honest
  sampling rate and the input attack; and honest pools (split and paired ε 4).

    python simulations/fake_attacks.py                          # results/fake_clients/attacks*.{md,csv} (~25 min)
    python simulations/fake_attacks.py --part flags             # the flag counts only
    python simulations/fake_attacks.py --quick --out /tmp/fa    # 3,000 clients, 1 seed, a minute
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from fedrr.datasets import load
from fedrr.experiment import parse_scenario, run_cell
from fedrr.fake import FakeClients
from fedrr.frequency_check import frequency_check
from fedrr.io import provenance
from fedrr.mechanisms import PairedRecordMechanism, RandomizedResponse, RecordMechanism, UnaryEncoding, frequency_oracle
from fedrr.population import DatasetPopulation
from fedrr.release import offline_release

COMMAND = "python simulations/fake_attacks.py"
FRACTIONS = (0.0, 0.01, 0.05, 0.1)
ATTACKS = ("mga", "output", "mga-sampled", "input")
LEARNERS = ("ldp-nb", "ldp-nb-normsub", "ldp-nb-robust", "majority")
TARGET = (11, 38, 1)  # native country = United-States, label >50K
#: flag pools: name -> (fraction, attack, state of native country)
FLAG_POOLS = {
    "honest": (0.0, "mga", 38),
    "output (unpadded), US": (0.05, "output", 38),
    "mga (padded), US": (0.05, "mga", 38),
    "mga-sampled (padded, honest rate), US": (0.05, "mga-sampled", 38),
    "output (unpadded), Outlying-US": (0.05, "output", 14),
    "mga (padded), Outlying-US": (0.05, "mga", 14),
    "mga-sampled (padded, honest rate), Outlying-US": (0.05, "mga-sampled", 14),
    "input, US": (0.05, "input", 38),
}


def scenario(name: str, args, eps: float, fraction: float, attack: str):
    """configs/adult_paired.toml at one ε with fake clients on TARGET (a ``ScenarioSpec``)."""
    attribute, state, label = TARGET
    return parse_scenario(
        {
            "scenario": {"name": name, "seed": 0, "repeats": args.seeds},
            "population": {
                "dataset": "adult_binned",
                "n_clients": args.n_clients,
                "fake_fraction": fraction,
                "fake_attack": attack,
                "fake_attribute": attribute,
                "fake_state": state,
                "fake_label": label,
            },
            "privacy": {"mechanism": "paired", "epsilon_grid": [eps], "n_sampled": 1},
            "learners": {"names": list(LEARNERS), "encoding": "onehot"},
            "run": {"mode": "offline", "check_alpha": args.alpha},
        }
    )


def accuracy_rows(args, out: Path) -> list[dict]:
    rows = []
    for eps in args.eps:
        for attack in ATTACKS:
            for f in args.fractions:
                if f == 0 and attack != ATTACKS[0]:
                    continue  # one honest pool per seed, shared by the attacks
                spec = scenario(f"acc-e{eps:g}-{attack}-f{f:g}", args, eps, f, attack)
                for cell in spec.cells():
                    rec = run_cell(cell, out / "cells" / spec.name)
                    check = rec["frequency_check"]
                    row = {"epsilon": eps, "attack": attack if f > 0 else "none", "fake_fraction": f,
                           "seed": rec["seed"], "flagged": check["flagged"],
                           "flagged_fields": " ".join(check["flagged_fields"])}  # fmt: skip
                    for name in LEARNERS:
                        row[name] = rec["learners"][name].get("accuracy")
                    rows.append(row)
                    print(f"  ε {eps:g} {row['attack']} {f:g} seed {row['seed']}: "
                          + " ".join(f"{n} {row[n]:.4f}" for n in LEARNERS), flush=True)  # fmt: skip
    return rows


def _split_oue(n_clients: int, seed: int) -> DatasetPopulation:
    """Label by RR at ε 2 and one sampled attribute at ε 2: native country by OUE, the others by the
    least-variance oracle (the split release of configs/adult.toml at ε 4, OUE forced on column 11)."""
    states = load("adult_binned").schema.states()
    fields = [frequency_oracle(int(k), 2.0) for k in states]
    fields[11] = UnaryEncoding(int(states[11]), 2.0)
    rm = RecordMechanism(fields, RandomizedResponse(2, epsilon=2.0), n_sampled=1)
    return DatasetPopulation("adult_binned", n_clients, rm, seed=seed)


def flag_rows(args) -> list[dict]:
    rows = []
    for seed in range(args.flag_seeds):
        base = _split_oue(args.n_clients, seed)
        for label, (f, attack, state) in FLAG_POOLS.items():
            pop = base if f == 0 else FakeClients(base, f, attack=attack, attribute=11, state=state, label=1)
            rel = offline_release(pop, seed=seed)
            rows.append(_flag_row("split ε 2 + 2, native country by OUE", label, f, seed, rel, pop.mechanism(0), args))
        states = load("adult_binned").schema.states()
        paired = DatasetPopulation("adult_binned", args.n_clients, PairedRecordMechanism(states, 2, 4.0), seed=seed)
        rel = offline_release(paired, seed=seed)
        rows.append(_flag_row("paired ε 4", "honest", 0.0, seed, rel, paired.mechanism(0), args))
        print(f"  flags seed {seed}: " + " ".join(str(int(r["flagged"])) for r in rows[-len(FLAG_POOLS) - 1 :]),
              flush=True)  # fmt: skip
    return rows


def _flag_row(setting: str, label: str, f: float, seed: int, rel, mech, args) -> dict:
    c = frequency_check(rel.x, rel.y, mech, alpha=args.alpha)
    nc = next((x for x in c.fields if x.name in ("x11", "pair x11")), None)
    return {
        "setting": setting,
        "pool": label,
        "fake_fraction": f,
        "seed": seed,
        "flagged": c.flagged,
        "frequency_flagged": c.frequency_flagged,
        "sampling_flagged": c.sampling_flagged,
        "native_country_z": None if nc is None else round(nc.z, 3),
        "max_frequency_z": round(max(x.z for x in c.fields), 3),
        "z_critical": round(c.z_critical, 3),
        "flagged_fields": " ".join(c.to_dict()["flagged_fields"]),
    }


def write_csv(path: Path, rows: list[dict], args) -> None:
    with open(path, "w", newline="") as fh:
        fh.write(f"# {command(args)}\n")
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _ms(a) -> str:
    a = np.asarray([v for v in a if v is not None], float)
    return f"{a.mean():.4f} ± {a.std(ddof=1) if a.size > 1 else 0:.4f}" if a.size else "n/a"


def accuracy_md(args, acc: list[dict]) -> list[str]:
    lines = [
        f"## Accuracy: paired release, {args.n_clients:,} clients, target (native country = US, >50K)",
        "",
        f"Test accuracy on adult.test, mean ± sd over {args.seeds} seeds (the same seeds in every row); "
        f"'flagged': pools the frequency check (α = {args.alpha:g}) flagged. ldp-nb-normsub: Norm-Sub "
        "consistency (Cao, Jia & Gong's evaluated countermeasure); ldp-nb-robust: robust='margins'.",
        "",
    ]
    for eps in args.eps:
        lines += [f"### ε {eps:g}", "", "| attack | fakes | " + " | ".join(LEARNERS) + " | flagged |",
                  "|---" * (len(LEARNERS) + 3) + "|"]  # fmt: skip
        base = [r for r in acc if r["epsilon"] == eps and r["fake_fraction"] == 0]
        lines.append("| none | 0 % | " + " | ".join(_ms([r[n] for r in base]) for n in LEARNERS)
                     + f" | {sum(r['flagged'] for r in base)} of {len(base)} |")  # fmt: skip
        for attack in ATTACKS:
            for f in args.fractions[1:]:
                rs = [r for r in acc if r["epsilon"] == eps and r["attack"] == attack and r["fake_fraction"] == f]
                lines.append(f"| {attack} | {100 * f:g} % | " + " | ".join(_ms([r[n] for r in rs]) for n in LEARNERS)
                             + f" | {sum(r['flagged'] for r in rs)} of {len(rs)} |")  # fmt: skip
        lines += [
            "",
            "Recovery at 5 % fakes, per seed: removed = ldp-nb(0 %) − ldp-nb(5 %); recovered = defence(5 %) − "
            "ldp-nb(5 %); share = recovered / removed (of the means over seeds).",
            "",
            "| attack | removed | Norm-Sub recovered | robust recovered | robust share |",
            "|---|---|---|---|---|",
        ]
        honest = {r["seed"]: r for r in base}
        for attack in ATTACKS:
            rs = [r for r in acc if r["epsilon"] == eps and r["attack"] == attack and r["fake_fraction"] == 0.05]
            if not rs:
                continue
            removed = np.array([honest[r["seed"]]["ldp-nb"] - r["ldp-nb"] for r in rs])
            norm = np.array([r["ldp-nb-normsub"] - r["ldp-nb"] for r in rs])
            rob = np.array([r["ldp-nb-robust"] - r["ldp-nb"] for r in rs])
            share = rob.mean() / removed.mean() if removed.mean() > 0 else float("nan")
            lines.append(f"| {attack} | {_ms(removed)} | {_ms(norm)} | {_ms(rob)} | "
                         + (f"{share:.0%}" if np.isfinite(share) else "n/a (nothing removed)") + " |")  # fmt: skip
        lines.append("")
    return lines


def flags_md(args, flags: list[dict]) -> list[str]:
    lines = [
        f"## Frequency-check flags, α = {args.alpha:g}, {args.flag_seeds} seeds, 5 % fakes, {args.n_clients:,} clients",
        "",
        "| setting | pool | flagged | debiased-frequency test | sampling-count test | median z of native country |",
        "|---|---|---|---|---|---|",
    ]
    keys = list(dict.fromkeys((r["setting"], r["pool"]) for r in flags))
    for setting, pool in keys:
        rs = [r for r in flags if r["setting"] == setting and r["pool"] == pool]
        n = len(rs)
        z = [r["native_country_z"] for r in rs if r["native_country_z"] is not None]
        lines.append(
            f"| {setting} | {pool} | {sum(r['flagged'] for r in rs)} of {n} | "
            f"{sum(r['frequency_flagged'] for r in rs)} of {n} | {sum(r['sampling_flagged'] for r in rs)} of {n} | "
            f"{np.median(z):.2f} (critical {rs[0]['z_critical']:.2f}) |"
        )
    return lines + [""]


def command(args) -> str:
    opts = " --quick" if args.quick else ""
    if args.part != "all":
        opts += f" --part {args.part}"
    for name, default in (("seeds", 5), ("flag_seeds", 10), ("alpha", 0.01)):
        if not args.quick and getattr(args, name) != default:
            opts += f" --{name.replace('_', '-')} {getattr(args, name):g}"
    if not args.quick and list(args.eps) != [4.0, 2.0]:
        opts += " --eps " + " ".join(f"{e:g}" for e in args.eps)
    return COMMAND + opts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/fake_clients", help="output folder (default results/fake_clients)")
    parser.add_argument("--part", choices=("all", "accuracy", "flags"), default="all")
    parser.add_argument("--quick", action="store_true", help="3,000 clients, 0 and 5 %%, 1 seed")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per accuracy row (default 5)")
    parser.add_argument("--flag-seeds", type=int, default=10, help="seeds per flag-count pool (default 10)")
    parser.add_argument("--alpha", type=float, default=0.01, help="the check's false-alarm probability per pool")
    parser.add_argument("--eps", type=float, nargs="+", default=[4.0, 2.0], help="record ε of the accuracy part")
    args = parser.parse_args(argv)
    args.n_clients, args.fractions = 30162, FRACTIONS
    if args.quick:
        args.n_clients, args.fractions, args.seeds, args.flag_seeds, args.eps = 3000, (0.0, 0.05), 1, 1, [4.0]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Published attacks and a defence on UCI Adult (issue 32)",
        "",
        f"Made by `{command(args)}`. The older table next to this one (fake_clients.md) used an earlier "
        "design: the unpadded output attack only, the split release, no defence.",
        "",
        provenance(),
        "",
    ]
    if args.part in ("all", "accuracy"):
        acc = accuracy_rows(args, out)
        write_csv(out / "attacks_accuracy.csv", acc, args)
        lines += accuracy_md(args, acc)
    if args.part in ("all", "flags"):
        flags = flag_rows(args)
        write_csv(out / "attacks_flags.csv", flags, args)
        lines += flags_md(args, flags)
    name = "attacks.md" if args.part == "all" else f"attacks_{args.part}.md"
    (out / name).write_text("\n".join(lines))
    print((out / name).read_text())


if __name__ == "__main__":
    main()
