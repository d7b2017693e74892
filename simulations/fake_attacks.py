"""The published attacks and a defence that acts, on UCI Adult (issue 32): Cao, Jia & Gong's maximal
gain attack (``fedrr.fake``, attack "mga": k-RR the target, OUE padded to the honest number of ones,
OLH the best of sampled seeds), its unpadded variant ("output"), both at the honest sampling rate
("mga-sampled") and the input attack, against spread and ldp-nb with and without a defence.

Two parts:

* accuracy: configs/adult_planned.toml's release (the release planner's, ``mechanism = "auto"``: on
  Adult at ε 2 and 4 the paired release, one (attribute, label) pair per client through the
  least-variance oracle of its pair domain — k-RR for every attribute at ε 4; at ε 2 OLH for
  native country and education), 30,162 clients, fakes at 0 / 1 / 5 / 10 % promoting (native
  country = US, >50K), the same seeds at every fraction (the honest clients' releases are the same,
  only the fakes differ). Where the target attribute's oracle is k-RR the maximal-gain attack *is*
  the output attack (the script checks that the two give the same pool on the first seed and then
  runs "output" only). Learners: ldp-nb (the published clipping), ldp-nb-normsub (Norm-Sub
  consistency, the countermeasure Cao, Jia & Gong evaluated), ldp-nb-robust
  (``LDPNaiveBayes(robust="margins")``: the attribute whose table's class margin disagrees with the
  others' is dropped), majority, at ``--seeds`` seeds in every cell; spread and spread-robust
  (``SpreadLogisticRegressionCV(robust="margins")``: the same test, the records that released the
  rejected attribute dropped before the fit) at ``--spread-seeds`` seeds in the target's cells (ε 4,
  output attack, 0 and 5 %) and ``--spread-other-seeds`` in the others' (0 there leaves them out:
  a spread fit is ~35 s on this pool). The frequency check's flags (α 0.01). Every number comes from
  the sweep's cell runner (``fedrr.experiment.run_cell``, offline); finished cells under
  OUT/cells (same fingerprint) are reused, so a killed run resumes.
* target-nb: the target rows' naive-Bayes learners (ldp-nb, ldp-nb-robust and ldp-nb-ldprecover,
  LDPRecover on each pair table: issue 45 item 2) at ``--seeds`` seeds, in a scenario of their own on
  the same pools (the spread cells are not refitted), merged into attacks_target.{csv,md} with
  accuracy, balanced accuracy and AUC.
* flags: how often the frequency check flags a pool (α 0.01, 10 seeds), with the attacked field
  released by OUE so that the padding matters: split release (label by RR at ε 2, one sampled
  attribute at ε 2, native country by OUE — fedrr's own choice there is OLH — the others by the
  least-variance oracle) with 5 % fakes on native country = US (common) or Outlying-US (rare, state
  14: one training client), by the unpadded output attack, the padded MGA, the MGA at the honest
  sampling rate and the input attack; and honest pools (split and paired ε 4).

    python simulations/fake_attacks.py                          # results/fake_clients/attacks*.{md,csv} (~2 h)
    python simulations/fake_attacks.py --part flags             # the flag counts only
    python simulations/fake_attacks.py --part target-nb         # ldp-nb / -robust / -ldprecover, 10 seeds (~2 min)
    python simulations/fake_attacks.py --quick --out /tmp/fa    # 3,000 clients, 1 seed, a minute
"""

from __future__ import annotations

import argparse
import csv
import json
import tomllib
from pathlib import Path

import numpy as np

from fedrr.assembly import build_population
from fedrr.datasets import load
from fedrr.estimators import LDPNaiveBayes
from fedrr.experiment import is_done, parse_scenario, run_cell
from fedrr.fake import FakeClients
from fedrr.frequency_check import frequency_check
from fedrr.io import provenance
from fedrr.learners import classification_scores
from fedrr.mechanisms import PairedRecordMechanism, RandomizedResponse, RecordMechanism, UnaryEncoding, frequency_oracle
from fedrr.population import DatasetPopulation
from fedrr.release import offline_release

COMMAND = "python simulations/fake_attacks.py"
FRACTIONS = (0.0, 0.01, 0.05, 0.1)
ATTACKS = ("mga", "output", "mga-sampled", "input")
NB_LEARNERS = ("ldp-nb", "ldp-nb-normsub", "ldp-nb-robust", "majority")
SPREAD_LEARNERS = ("spread", "spread-robust")
LEARNERS = SPREAD_LEARNERS + NB_LEARNERS
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "adult_planned.toml"
TARGET_CELLS = {(4.0, "none", 0.0), (4.0, "output", 0.05)}  # the target: paired ε 4, 5 % output attack
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


def scenario(name: str, args, eps: float, fraction: float, attack: str, learners: tuple, repeats: int):
    """configs/adult_planned.toml's population and release (mechanism "auto") at one ε with fake
    clients on TARGET (a ``ScenarioSpec``); repeat r has the same seed whatever the learners."""
    with open(CONFIG, "rb") as fh:
        cfg = tomllib.load(fh)
    attribute, state, label = TARGET
    population = dict(cfg["population"], n_clients=args.n_clients, fake_fraction=fraction, fake_attack=attack,
                      fake_attribute=attribute, fake_state=state, fake_label=label)  # fmt: skip
    return parse_scenario(
        {
            "scenario": {"name": name, "seed": 0, "repeats": repeats},
            "population": population,
            "privacy": {"mechanism": cfg["privacy"]["mechanism"], "epsilon_grid": [eps]},
            "learners": {"names": list(learners), "encoding": cfg["learners"]["encoding"]},
            "run": {"mode": "offline", "check_alpha": args.alpha},
        }
    )


def _cell(cell, out: Path) -> dict:
    """The cell's record: the finished file when its fingerprint matches, else a run."""
    path = out / "cells" / f"{cell.key}.json"
    if is_done(cell, out):
        return json.loads(path.read_text())
    return run_cell(cell, out)


def same_pools(args, eps: float) -> bool:
    """Do "mga" and "output" give the same pool at this ε (5 % fakes, the first seed)?"""
    pools = []
    for attack in ("mga", "output"):
        cell = scenario("probe", args, eps, 0.05, attack, NB_LEARNERS, 1).cells()[0]
        rel = offline_release(build_population(cell.run_config(results_dir="/tmp")), cell.seed)
        pools.append(np.nan_to_num(np.asarray(rel.x, float), nan=-1.0))
    return pools[0].shape == pools[1].shape and bool(np.array_equal(pools[0], pools[1]))


def cells_plan(args) -> list[tuple]:
    """(ε, attack, fraction) of every row, "mga" left out where it gives "output"'s pools."""
    plan = []
    for eps in args.eps:
        attacks = [a for a in ATTACKS if not (a == "mga" and args.mga_is_output[eps])]
        plan.append((eps, "none", 0.0))
        plan += [(eps, a, f) for a in attacks for f in args.fractions[1:]]
    return plan


def accuracy_rows(args, out: Path) -> list[dict]:
    """One row per (ε, attack, fraction, seed): the ldp-nb learners at every seed, spread's at the
    seeds its budget gives the cell (the target's cells first, so a cut run keeps them)."""
    plan = cells_plan(args)
    target = [c for c in plan if c in TARGET_CELLS]
    # the order a cut run keeps: spread on the target's cells, the ldp-nb learners everywhere, spread elsewhere
    jobs = [("spread", c, args.spread_seeds) for c in target] + [("nb", c, args.seeds) for c in plan]
    jobs += [
        ("spread", c, args.spread_other_seeds) for c in plan if c not in TARGET_CELLS and c[2] in args.spread_fractions
    ]
    recs: dict[tuple, dict] = {}
    for family, (eps, attack, f), seeds in jobs:
        learners = SPREAD_LEARNERS if family == "spread" else NB_LEARNERS
        if seeds > 0:
            name = f"acc-{family}-e{eps:g}-{'output' if attack == 'none' else attack}-f{f:g}"
            spec = scenario(name, args, eps, f, "output" if attack == "none" else attack, learners, seeds)
            for cell in spec.cells():
                rec = _cell(cell, out / "cells" / spec.name)
                key = (eps, attack, f, cell.r)
                row = recs.setdefault(key, {"epsilon": eps, "attack": attack, "fake_fraction": f, "seed": rec["seed"]})
                for n in learners:
                    row[n] = rec["learners"][n].get("accuracy")
                if family == "spread":
                    diag = rec["learners"]["spread-robust"].get("diagnostics") or {}
                    row["robust_dropped"] = " ".join(str(j) for j in diag.get("robust_dropped", []))
                    row["robust_n_dropped"] = diag.get("robust_n_dropped")
                    row["spread_fallback"] = (rec["learners"]["spread"].get("diagnostics") or {}).get("fallback")
                    row["spread_robust_fallback"] = diag.get("fallback")
                check = rec["frequency_check"]
                row["flagged"], row["flagged_fields"] = check["flagged"], " ".join(check["flagged_fields"])
                print(f"  ε {eps:g} {attack} {f:g} seed {row['seed']} ({family}): "
                      + " ".join(f"{n} {row[n]:.4f}" for n in learners), flush=True)  # fmt: skip
    cols = ["epsilon", "attack", "fake_fraction", "seed", *LEARNERS, "flagged", "flagged_fields", "robust_dropped",
            "robust_n_dropped", "spread_fallback", "spread_robust_fallback"]  # fmt: skip
    rows = [{c: recs[k].get(c) for c in cols} for k in sorted(recs, key=lambda k: (-k[0], plan.index(k[:3]), k[3]))]
    return rows


TARGET_LEARNERS = ("spread-robust", "ldp-nb", "ldp-nb-robust")


def _target_cell(cell, out: Path, args) -> dict | None:
    """``_cell``, or with ``--finished-only`` the finished cell's record and None for the others."""
    if args.finished_only and not is_done(cell, out):
        return None
    return _cell(cell, out)


def target_rows(args, out: Path) -> list[dict]:
    """The issue's target rows only (ε 4, output attack, ``--target-fractions``): the learners the
    defence changes at ``--spread-seeds`` seeds, and spread (robust="none") at ``--baseline-seeds``
    (the first of the same seeds). Where spread did not run on a seed whose spread-robust rejected
    nothing, spread is spread-robust's figure: with nothing rejected the defence passes the pool on
    unchanged (``drop_inconsistent``), so the two fits are the same fit ('spread from robust')."""
    rows = []
    for f in args.target_fractions:
        if args.spread_seeds == 0:  # spread's cells only (run beside the robust ones)
            spec = scenario(f"target-spread-e4-output-f{f:g}", args, 4.0, f, "output", ("spread",), args.baseline_seeds)
            [_target_cell(c, out / "cells" / spec.name, args) for c in spec.cells()]
            continue
        spec = scenario(f"target-e4-output-f{f:g}", args, 4.0, f, "output", TARGET_LEARNERS, args.spread_seeds)
        base = scenario(f"target-spread-e4-output-f{f:g}", args, 4.0, f, "output", ("spread",), args.baseline_seeds)
        plain = {c.r: _target_cell(c, out / "cells" / base.name, args) for c in base.cells()}
        plain = {r: rec for r, rec in plain.items() if rec is not None}
        for cell in spec.cells():
            rec = _target_cell(cell, out / "cells" / spec.name, args)
            if rec is None:
                continue
            diag = rec["learners"]["spread-robust"].get("diagnostics") or {}
            rejected = " ".join(str(j) for j in diag.get("robust_dropped", []))
            spread, copied = None, False
            if cell.r in plain:
                spread = plain[cell.r]["learners"]["spread"]
            elif not rejected:
                spread, copied = rec["learners"]["spread-robust"], True
            robust = rec["learners"]["spread-robust"]
            other = {f"{n} {c}": e.get(k) for n, e in (("spread", spread or {}), ("spread-robust", robust))
                     for k, c in METRICS[1:]}  # fmt: skip
            spread = spread.get("accuracy") if spread else None
            row = {"epsilon": 4.0, "attack": "none" if f == 0 else "output", "fake_fraction": f, "seed": rec["seed"],
                   "spread": spread, **{n: rec["learners"][n].get("accuracy") for n in TARGET_LEARNERS},
                   "spread_from_robust": copied, "flagged": rec["frequency_check"]["flagged"],
                   "robust_rejected": rejected, "robust_n_dropped": diag.get("robust_n_dropped"), **other}  # fmt: skip
            rows.append(row)
            print("  " + " ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    return rows


def target_md(args, rows: list[dict]) -> list[str]:
    """mean ± sd per row, and the recovery share at each attacked fraction against 0 %."""
    cols = ("spread", *TARGET_LEARNERS)
    lines = [
        f"## ε 4, output attack on (native country = US, >50K), {args.n_clients:,} clients: the trimming recovery",
        "",
        "Test accuracy on adult.test, mean ± sd over seeds (seed r is the same honest pool in every row; the "
        "number of seeds in brackets). spread-robust and ldp-nb-robust: robust='margins' with the trimming "
        "recovery; spread: robust='none'. 'spread from robust': seeds where spread was not fitted and is "
        "spread-robust's figure, which is the same fit when the test rejected nothing (the pool passes "
        "unchanged). 'flagged': pools the frequency check (α = 0.01) flagged; 'rejected': spread-robust fits "
        "whose consistency test rejected an attribute; 'records dropped': spread-robust's trimmed records, "
        "mean (min–max).",
        "",
        "| fakes | " + " | ".join(cols) + " | spread from robust | flagged | rejected | records dropped |",
        "|---" * (len(cols) + 5) + "|",
    ]
    by_f = {f: [r for r in rows if r["fake_fraction"] == f] for f in args.target_fractions}
    for f, rs in sorted(by_f.items()):
        nd = [r["robust_n_dropped"] or 0 for r in rs]
        lines.append(
            f"| {100 * f:g} % | "
            + " | ".join(_ms([r[c] for r in rs], True) for c in cols)
            + f" | {sum(r['spread_from_robust'] for r in rs)} of {len(rs)}"
            + f" | {sum(r['flagged'] for r in rs)} of {len(rs)}"
            + f" | {sum(bool(r['robust_rejected']) for r in rs)} of {len(rs)}"
            + f" | {np.mean(nd):.0f} ({min(nd)}–{max(nd)}) |"
        )
    lines += ["", "Against spread, per seed: gap = spread-robust − spread (target at 0 and 1 %: ≥ −0.003); "
              "removed = spread(0 %) − spread(f); recovered = spread-robust(f) − spread(f); share = "
              "recovered / removed (means over the seeds that have both; target at 5 %: ≥ 50 %).", "",
              "| fakes | seeds | gap | removed | recovered | share |", "|---|---|---|---|---|---|"]  # fmt: skip
    honest = {r["seed"]: r for r in by_f.get(0.0, []) if r["spread"] is not None}
    for f, rs in sorted(by_f.items()):
        rs = [r for r in rs if r["spread"] is not None and r["spread-robust"] is not None]
        gap = _ms([r["spread-robust"] - r["spread"] for r in rs])
        both = [r for r in rs if r["seed"] in honest] if f > 0 else []
        removed = np.array([honest[r["seed"]]["spread"] - r["spread"] for r in both])
        rec = np.array([r["spread-robust"] - r["spread"] for r in both])
        share = rec.mean() / removed.mean() if both and removed.mean() > 0 else float("nan")
        cells = [_ms(removed), _ms(rec)] if both else ["–", "–"]
        pct = f"{share:.0%}" if np.isfinite(share) else "–"
        lines.append(f"| {100 * f:g} % | {len(rs)} | {gap} | {cells[0]} | {cells[1]} | {pct} |")
    lines += ["", "Balanced accuracy and AUC of the same fits, mean ± sd over the seeds (the naive-Bayes "
              "learners' are in the next section):", "",
              "| fakes | spread balanced | spread-robust balanced | spread auc | spread-robust auc |",
              "|---|---|---|---|---|"]  # fmt: skip
    for f, rs in sorted(by_f.items()):
        vals = [[r.get(f"{n} {c}") for r in rs] for c in ("balanced", "auc") for n in ("spread", "spread-robust")]
        lines.append(
            f"| {100 * f:g} % | " + " | ".join(_ms([v for v in vs if v is not None], True) for vs in vals) + " |"
        )
    return lines + [""]


#: the naive-Bayes comparison added to the target table (issue 45 item 2): the trim against LDPRecover
TARGET_NB_LEARNERS = ("ldp-nb", "ldp-nb-robust", "ldp-nb-ldprecover")
#: the table's columns: the learners and LDPRecover given the whole pool's η (``_given_eta``)
TARGET_NB_COLUMNS = (*TARGET_NB_LEARNERS, "ldprecover-given-eta")
METRICS = (("accuracy", "accuracy"), ("balanced_accuracy", "balanced"), ("auc", "auc"))
NB_SECTION = "## ε 4, output attack: ldp-nb, the trim (ldp-nb-robust) and LDPRecover (ldp-nb-ldprecover)"


def target_nb_rows(args, out: Path) -> list[dict]:
    """The target rows' naive-Bayes learners only, at ``--seeds`` seeds per fraction: a scenario of its
    own (cells under OUT/cells/target-nb-*), so the spread cells' fingerprints are untouched; repeat r
    has the same seed, hence the same honest releases and fakes, as the spread rows' repeat r."""
    rows = []
    for f in args.target_fractions:
        spec = scenario(f"target-nb-e4-output-f{f:g}", args, 4.0, f, "output", TARGET_NB_LEARNERS, args.seeds)
        for cell in spec.cells():
            rec = _cell(cell, out / "cells" / spec.name)
            row = {"fake_fraction": f, "seed": rec["seed"]}
            for n in TARGET_NB_LEARNERS:
                for key, col in METRICS:
                    row[n if key == "accuracy" else f"{n} {col}"] = rec["learners"][n].get(key)
            row.update(_given_eta(cell, f))
            rows.append(row)
            print("  " + " ".join(f"{k} {v}" for k, v in row.items()), flush=True)
    return rows


def _given_eta(cell, f: float) -> dict:
    """The same pool refitted (``offline_release`` of the cell's population and seed, as the cell runner
    does) with LDPRecover given the whole pool's η = m/n = f/(1 − f) on every table (the attack's size
    known; not a registered learner), and the η_j that ldp-nb-ldprecover's counts
    estimator learned on native country (attribute 11)."""
    population = build_population(cell.run_config(results_dir="/tmp"))
    rel = offline_release(population, cell.seed)
    X, mech = np.asarray(rel.x, float), population.mechanism(0)
    given = LDPNaiveBayes(robust="ldprecover", recover_eta=f / (1 - f)).fit(X, rel.y, mechanism=mech)
    counts = LDPNaiveBayes(robust="ldprecover").fit(X, rel.y, mechanism=mech)
    scores = classification_scores(given, *population.test_set())
    row = {f"ldprecover-given-eta{'' if k == 'accuracy' else ' ' + c}": scores[k] for k, c in METRICS}
    row["ldprecover eta native country"] = float(counts.recover_eta_[TARGET[0]])
    clip = LDPNaiveBayes().fit(X, rel.y, mechanism=mech)  # learner ldp-nb: method "auto", "clip" on paired releases
    attribute, state, label = TARGET
    row["target cell clip"] = float(clip.joint_[attribute][state, label])
    row["target cell ldprecover"] = float(counts.joint_[attribute][state, label])
    return row


def merge_target_csv(path: Path, nb: list[dict], args) -> tuple[list[dict], int, int]:
    """attacks_target.csv with the naive-Bayes rows merged in by (fraction, seed): the existing rows keep
    every column (their ldp-nb and ldp-nb-robust are checked against the new cells': the same pools give
    the same fits), the new columns are added, the seeds spread did not run get rows of their own.
    Returns the rows, how many existing figures were compared and how many differed (> 1e-12)."""
    lines = path.read_text().splitlines() if path.exists() else []  # none yet: the naive-Bayes rows alone
    head = [ln for ln in lines if ln.startswith("#") and "--part target-nb" not in ln]
    old = list(csv.DictReader([ln for ln in lines if not ln.startswith("#")]))
    by_key = {(float(r["fake_fraction"]), int(r["seed"])): r for r in old}
    compared = differ = 0
    for r in nb:
        key = (r["fake_fraction"], r["seed"])
        if key not in by_key:
            by_key[key] = {"epsilon": 4.0, "attack": "none" if key[0] == 0 else "output", **r}
            continue
        row = by_key[key]
        for n in ("ldp-nb", "ldp-nb-robust"):
            compared += 1
            differ += abs(float(row[n]) - r[n]) > 1e-12
        row.update(r)
    cols = list(dict.fromkeys([*(old[0].keys() if old else ("epsilon", "attack")), *nb[0].keys()]))
    rows = [{c: by_key[k].get(c) for c in cols} for k in sorted(by_key)]
    with open(path, "w", newline="") as fh:
        fh.write("\n".join(head) + f"\n# naive-Bayes columns merged by {command(args)}; {provenance()}\n")
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return rows, compared, differ


def target_nb_md(args, nb: list[dict], compared: int, differ: int) -> list[str]:
    """The three naive-Bayes learners by fraction and metric (mean ± sd over the seeds), and per-seed
    paired differences against ldp-nb-robust: which leads."""
    metrics = [(k, c, (lambda n, c=c, k=k: n if k == "accuracy" else f"{n} {c}")) for k, c in METRICS]
    lines = [
        NB_SECTION,
        "",
        f"Made by `{command(args)}` ({provenance()}): a naive-Bayes-only scenario (cells target-nb-*) on the "
        f"same pools as the table above (repeat r has the same seed: the same honest releases and fakes), "
        f"{args.seeds} seeds per row; spread is not refitted. Check: {compared} ldp-nb / ldp-nb-robust "
        f"accuracies of the seeds above were refitted here, {differ} differed. Test metrics on adult.test, "
        "mean ± sd over seeds. ldp-nb-robust: robust='margins' (the consistency test and the trim); "
        "ldp-nb-ldprecover: robust='ldprecover', LDPRecover (Sun et al., ICDE 2024) on every pair table with "
        "η_j from the attribute-sampling counts (fedrr/estimators/_ldprecover.py); ldprecover-given-eta: the same "
        "LDPRecover given the whole pool's η = m/n = f/(1 − f) on every table (the attack's size known; "
        "refitted on the same pool, not a registered learner).",
        "",
        "| fakes | metric | " + " | ".join(TARGET_NB_COLUMNS) + " | ldprecover − robust | ldprecover − ldp-nb |",
        "|---" * (len(TARGET_NB_COLUMNS) + 4) + "|",
    ]
    for f in args.target_fractions:
        rs = [r for r in nb if r["fake_fraction"] == f]
        for key, _, col in metrics:
            vals = {n: [r[col(n)] for r in rs] for n in TARGET_NB_COLUMNS}
            d_rob = [a - b for a, b in zip(vals["ldp-nb-ldprecover"], vals["ldp-nb-robust"])]
            d_nb = [a - b for a, b in zip(vals["ldp-nb-ldprecover"], vals["ldp-nb"])]
            lines.append(f"| {100 * f:g} % | {key.replace('_', ' ')} | "
                         + " | ".join(_ms(vals[n]) for n in TARGET_NB_COLUMNS)
                         + f" | {_ms(d_rob)} | {_ms(d_nb)} |")  # fmt: skip
    lines += ["", "Leader per row: the highest mean, 'tie' when the two best differ by at most two standard errors "
              "of their paired per-seed difference:", ""]  # fmt: skip
    for f in args.target_fractions:
        rs = [r for r in nb if r["fake_fraction"] == f]
        leads = []
        for key, _, col in metrics:
            means = {n: np.mean([r[col(n)] for r in rs]) for n in TARGET_NB_COLUMNS}
            best, second = sorted(means, key=means.get, reverse=True)[:2]
            d = np.array([r[col(best)] - r[col(second)] for r in rs])
            se = d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else 0.0
            leads.append(
                f"{key.replace('_', ' ')}: {best}"
                + (" (one seed)" if d.size < 2 else f" (tie with {second})" if d.mean() <= 2 * se else "")
            )
        lines.append(f"- {100 * f:g} %: " + "; ".join(leads))
    etas, cells = [], []
    for f in args.target_fractions:
        rs = [r for r in nb if r["fake_fraction"] == f]
        e = [r["ldprecover eta native country"] for r in rs]
        etas.append(f"{100 * f:g} % fakes {np.mean(e):.3f} ({min(e):.3f}–{max(e):.3f}), given η {f / (1 - f):.3f}")
        cells.append(f"{100 * f:g} % fakes {np.mean([r['target cell clip'] for r in rs]):.3f} clipped, "
                     f"{np.mean([r['target cell ldprecover'] for r in rs]):.3f} LDPRecover")  # fmt: skip
    lines += ["", "η_j that ldp-nb-ldprecover learned on native country (the target's attribute), mean (min–max): "
              + "; ".join(etas) + ".", "",
              "The target cell P̂(native country = US, >50K) of the native-country pair table, mean over seeds "
              "(the clipped debiased table of ldp-nb's published protocol, method 'clip', and LDPRecover's): "
              + "; ".join(cells) + "."]  # fmt: skip
    return lines + [""]


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
        fh.write(f"# {command(args)}\n# {provenance()}\n")
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _ms(a, n: bool = False) -> str:
    a = np.asarray([v for v in a if v is not None], float)
    if not a.size:
        return "–"
    out = f"{a.mean():.4f} ± {a.std(ddof=1) if a.size > 1 else 0:.4f}"
    return out + (f" ({a.size})" if n else "")


def _rows(acc: list[dict], eps: float, attack: str, f: float) -> list[dict]:
    return [r for r in acc if r["epsilon"] == eps and r["attack"] == attack and r["fake_fraction"] == f]


def accuracy_md(args, acc: list[dict]) -> list[str]:
    fracs = " / ".join(f"{100 * f:g} %" for f in args.spread_fractions)
    lines = [
        f"## Accuracy: the planner's release (configs/adult_planned.toml), {args.n_clients:,} clients, "
        "target (native country = US, >50K)",
        "",
        f"Test accuracy on adult.test, mean ± sd over seeds (the same seeds in every row: seed r is the same "
        f"honest pool in every row). ldp-nb and its variants and majority: {args.seeds} seeds per row; spread and "
        f"spread-robust: {args.spread_seeds} seeds in the target's rows (ε 4, output attack, 0 and 5 %), "
        f"{args.spread_other_seeds} in the other rows at fakes {fracs} (the number of seeds in brackets; '–': "
        f"not run, for the CPU budget). 'flagged': pools the frequency check (α = {args.alpha:g}) flagged, of "
        "the rows' seeds. "
        "ldp-nb-normsub: Norm-Sub consistency (Cao, Jia & Gong's evaluated countermeasure); ldp-nb-robust and "
        "spread-robust: robust='margins'. 'dropped': spread-robust's fits whose test rejected an attribute (and "
        "which: 11 is native country).",
        "",
    ]
    for eps in args.eps:
        if args.mga_is_output[eps]:
            note = ("The maximal-gain attack gave the output attack's pool exactly (checked on the first seed: "
                    "native country's pair oracle is k-RR here), so its rows are the output attack's.")  # fmt: skip
        else:
            note = "The maximal-gain and output attacks give different pools here (native country's oracle: OLH)."
        head = "| attack | fakes | " + " | ".join(LEARNERS) + " | flagged | dropped |"
        lines += [f"### ε {eps:g}", "", note, "", head, "|---" * (len(LEARNERS) + 4) + "|"]
        for e, attack, f in [c for c in cells_plan(args) if c[0] == eps]:
            rs = _rows(acc, e, attack, f)
            sp = [r for r in rs if r["spread"] is not None]
            drops = sorted({r["robust_dropped"] for r in sp if r["robust_dropped"]})
            dropped = f"{sum(bool(r['robust_dropped']) for r in sp)} of {len(sp)}" if sp else "–"
            if drops:
                dropped += " (" + ", ".join(d for d in drops) + ")"
            lines.append(
                f"| {attack} | {100 * f:g} % | "
                + " | ".join(_ms([r[n] for r in rs], n in SPREAD_LEARNERS) for n in LEARNERS)
                + f" | {sum(r['flagged'] for r in rs)} of {len(rs)} | {dropped} |"
            )
        lines += ["", *recovery_md(acc, eps, args), ""]
    return lines


def recovery_md(acc: list[dict], eps: float, args) -> list[str]:
    """removed / recovered / share at 5 % fakes, per seed, for ldp-nb and for spread."""
    lines = [
        "Recovery at 5 % fakes, per seed: removed = learner(0 %) − learner(5 %); recovered = defence(5 %) − "
        "learner(5 %); share = recovered / removed (of the means over the seeds that have both).",
        "",
        "| learner | attack | seeds | removed | Norm-Sub recovered | robust recovered | robust share |",
        "|---|---|---|---|---|---|---|",
    ]
    for base, normsub, robust in (("ldp-nb", "ldp-nb-normsub", "ldp-nb-robust"), ("spread", None, "spread-robust")):
        honest = {r["seed"]: r for r in _rows(acc, eps, "none", 0.0) if r[base] is not None}
        for attack in ATTACKS:
            rs = [r for r in _rows(acc, eps, attack, 0.05) if r[base] is not None and r["seed"] in honest]
            if not rs:
                continue
            removed = np.array([honest[r["seed"]][base] - r[base] for r in rs])
            rec = np.array([r[robust] - r[base] for r in rs])
            norm = _ms([r[normsub] - r[base] for r in rs]) if normsub else "–"
            share = rec.mean() / removed.mean() if removed.mean() > 0 else float("nan")
            lines.append(f"| {base} | {attack} | {len(rs)} | {_ms(removed)} | {norm} | {_ms(rec)} | "
                         + (f"{share:.0%}" if np.isfinite(share) else "n/a (nothing removed)") + " |")  # fmt: skip
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
    defaults = (("seeds", 10), ("spread_seeds", 10), ("spread_other_seeds", 2), ("flag_seeds", 10), ("alpha", 0.01))
    for name, default in defaults:
        if not args.quick and getattr(args, name) != default:
            opts += f" --{name.replace('_', '-')} {getattr(args, name):g}"
    if not args.quick and list(args.spread_fractions) != list(FRACTIONS):
        opts += " --spread-fractions " + " ".join(f"{f:g}" for f in args.spread_fractions)
    if args.part == "target" and args.finished_only:
        opts += " --finished-only"
    if args.part == "target" and args.baseline_seeds != args.spread_seeds:
        opts += f" --baseline-seeds {args.baseline_seeds}"
    if args.part in ("target", "target-nb") and list(args.target_fractions) != [0.0, 0.01, 0.05]:
        opts += " --target-fractions " + " ".join(f"{f:g}" for f in args.target_fractions)
    if not args.quick and list(args.eps) != [4.0, 2.0]:
        opts += " --eps " + " ".join(f"{e:g}" for e in args.eps)
    return COMMAND + opts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/fake_clients", help="output folder (default results/fake_clients)")
    parser.add_argument("--part", choices=("all", "accuracy", "flags", "target", "target-nb"), default="all",
                        help="target-nb: the naive-Bayes learners (with ldp-nb-ldprecover) at --seeds seeds on the "
                        "target rows' pools, merged into attacks_target.{csv,md}")  # fmt: skip
    parser.add_argument(
        "--target-fractions",
        type=float,
        nargs="+",
        default=[0.0, 0.01, 0.05],
        help="--part target: the fake fractions of its ε 4 output-attack rows (default 0 0.01 0.05)",
    )
    parser.add_argument(
        "--baseline-seeds",
        type=int,
        default=None,
        help="--part target: spread's seeds per row (default --spread-seeds)",
    )
    parser.add_argument("--finished-only", action="store_true",
                        help="--part target: read the finished cells, run none (the table of a cut run)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="3,000 clients, 0 and 5 %%, 1 seed")
    parser.add_argument("--seeds", type=int, default=10, help="ldp-nb's seeds per accuracy row (default 10)")
    parser.add_argument("--spread-seeds", type=int, default=10,
                        help="spread's seeds in the target's rows: ε 4, output, 0 and 5 %% (default 10)")  # fmt: skip
    parser.add_argument("--spread-other-seeds", type=int, default=2,
                        help="spread's seeds in the other rows (default 2; 0: not run)")  # fmt: skip
    parser.add_argument("--spread-fractions", type=float, nargs="+", default=list(FRACTIONS),
                        help="the fake fractions of spread's other rows (default all)")  # fmt: skip
    parser.add_argument("--flag-seeds", type=int, default=10, help="seeds per flag-count pool (default 10)")
    parser.add_argument("--alpha", type=float, default=0.01, help="the check's false-alarm probability per pool")
    parser.add_argument("--eps", type=float, nargs="+", default=[4.0, 2.0], help="record ε of the accuracy part")
    args = parser.parse_args(argv)
    args.n_clients, args.fractions = 30162, FRACTIONS
    if args.quick:
        args.n_clients, args.fractions, args.seeds, args.flag_seeds, args.eps = 3000, (0.0, 0.05), 1, 1, [4.0]
        args.spread_seeds = args.spread_other_seeds = 1
    if args.baseline_seeds is None:
        args.baseline_seeds = args.spread_seeds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Published attacks and a defence on UCI Adult (issue 32)",
        "",
        f"Made by `{command(args)}`. The older table next to this one (fake_clients.md) used an earlier "
        "design: the unpadded output attack only, the split release, no defence. The accuracy part's cells "
        "are those of the sweep's cell runner on the planner's release of configs/adult_planned.toml.",
        "",
        provenance(),
        "",
    ]
    if args.part in ("all", "accuracy"):
        args.mga_is_output = {eps: same_pools(args, eps) for eps in args.eps}
        acc = accuracy_rows(args, out)
        write_csv(out / "attacks_accuracy.csv", acc, args)
        lines += accuracy_md(args, acc)
    if args.part == "target":
        rows = target_rows(args, out)
        if not rows:
            return
        write_csv(out / "attacks_target.csv", rows, args)
        lines += target_md(args, rows)
    if args.part == "target-nb":  # merged into the target table: its spread rows and text are kept
        nb = target_nb_rows(args, out)
        _, compared, differ = merge_target_csv(out / "attacks_target.csv", nb, args)
        md = out / "attacks_target.md"
        kept = md.read_text().split(NB_SECTION)[0].rstrip("\n") if md.exists() else "\n".join(lines).rstrip("\n")
        md.write_text(kept + "\n\n" + "\n".join(target_nb_md(args, nb, compared, differ)))
        print(md.read_text())
        return
    if args.part in ("all", "flags"):
        flags = flag_rows(args)
        write_csv(out / "attacks_flags.csv", flags, args)
        lines += flags_md(args, flags)
    name = "attacks.md" if args.part == "all" else f"attacks_{args.part}.md"
    (out / name).write_text("\n".join(lines))
    print((out / name).read_text())


if __name__ == "__main__":
    main()
