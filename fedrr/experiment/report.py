"""Results of a sweep directory: ``results.csv`` (one row per cell × learner), plots (PNG + SVG)
and ``summary.md``, all rebuilt from ``OUT/cells/*.json`` and ``OUT/manifest.json``."""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..learners import get as get_learner
from .spec import ScenarioSpec, parse_scenario

#: per metric: CSV column, axis label, file-name stem, table format
METRICS = {
    "accuracy": ("test accuracy (clean test split)", "accuracy", "{:.3f}"),
    "mse": ("test MSE (clean test split)", "mse", "{:.4f}"),
}

CSV_COLUMNS = [
    "scenario",
    "cell",
    "grid_index",
    "n_index",
    "repeat",
    "seed",
    "mode",
    "mechanism",
    "grid_axis",
    "grid_value",
    "requested_eps_record",
    "eps_record",
    "eps_record_min",
    "eps_record_max",
    "delta_record",
    "eps_features",
    "eps_label",
    "eps_per_feature",
    "n_features",
    "feature_flip",
    "feature_epsilon",
    "label_flip",
    "label_epsilon",
    "n_clients",
    "n_releases",
    "dropped",
    "dropped_detail",
    "learner",
    "oracle",
    "metric",
    "accuracy",
    "mse",
    "seconds",
    "cell_seconds",
    "error",
    "params_text",
]

#: above this ε per record the local-DP guarantee is nominal: the summary says so
HUGE_EPSILON = 10.0


def load_results(out: str | Path) -> tuple[ScenarioSpec, list[dict], list[str]]:
    """(config, finished cell records of the config's current grid, keys of cells not finished)."""
    out = Path(out)
    man_path = out / "manifest.json"
    if not man_path.exists():
        raise ValidationError(
            "RESULTS_DIR", f"{str(out)!r} has no manifest.json: not a results directory of `fedrr sweep`"
        )
    man = json.loads(man_path.read_text())
    cfg = parse_scenario(man["config"], path=man.get("config_path", ""), text=man.get("config_text", ""))
    recs, missing = [], []
    for c in cfg.cells():
        p = out / "cells" / f"{c.key}.json"
        rec = None
        if p.exists():
            try:
                rec = json.loads(p.read_text())
            except json.JSONDecodeError:
                rec = None
        if rec is not None and rec.get("fingerprint") == c.fingerprint() and rec.get("status") == "done":
            recs.append(rec)
        else:
            missing.append(c.key)
    return cfg, recs, missing


_INT = {"grid_index", "n_index", "repeat", "seed", "n_features", "n_clients", "n_releases", "dropped"}
_TEXT = {"scenario", "cell", "mode", "mechanism", "grid_axis", "learner", "metric", "error", "dropped_detail",
         "params_text"}


def read_csv(path: Path) -> list[dict]:
    """``results.csv`` back as typed rows (what ``rows`` built)."""
    out = []
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            row: dict[str, Any] = {}
            for k in CSV_COLUMNS:
                v = r.get(k, "")
                if k in _TEXT:
                    row[k] = v if v or k == "error" else None
                elif k == "oracle":
                    row[k] = v == "True"
                elif v == "":
                    row[k] = None
                else:
                    row[k] = int(v) if k in _INT else float(v)
            out.append(row)
    return out


def load_table(out: str | Path) -> tuple[ScenarioSpec, list[dict], list[str]]:
    """(config, one row per cell × learner, unfinished cells) from ``results.csv`` — what a
    committed results directory holds — or, before reports were written, from the cell files."""
    out = Path(out)
    if (out / "results.csv").exists() and (out / "manifest.json").exists():
        man = json.loads((out / "manifest.json").read_text())
        spec = parse_scenario(man["config"], path=man.get("config_path", ""), text=man.get("config_text", ""))
        table = read_csv(out / "results.csv")
        done = {r["cell"] for r in table}
        return spec, table, [c.key for c in spec.cells() if c.key not in done]
    spec, recs, missing = load_results(out)
    return spec, rows(recs), missing


def rows(recs: list[dict]) -> list[dict]:
    out = []
    for rec in recs:
        e, p = rec["eps"], rec["params"]
        for learner, entry in rec["learners"].items():
            out.append(
                {
                    "scenario": rec["scenario"],
                    "cell": rec["cell"],
                    "grid_index": rec["g"],
                    "n_index": rec["n"],
                    "repeat": rec["r"],
                    "seed": rec["seed"],
                    "mode": rec["mode"],
                    "mechanism": p["mechanism"],
                    "grid_axis": rec["grid_axis"],
                    "grid_value": rec["grid_value"],
                    "requested_eps_record": p.get("requested_eps_record"),
                    "eps_record": e["record"],
                    "eps_record_min": e["min"],
                    "eps_record_max": e["max"],
                    "delta_record": e["delta"],
                    "eps_features": e["features"],
                    "eps_label": e["label"],
                    "eps_per_feature": e.get("per_feature"),
                    "n_features": e["n_features"],
                    "feature_flip": p["feature_flip"],
                    "feature_epsilon": p["feature_epsilon"],
                    "label_flip": p["label_flip"],
                    "label_epsilon": p["label_epsilon"],
                    "n_clients": rec["n_clients"],
                    "n_releases": rec["n_releases"],
                    "dropped": int(sum(rec["dropped"].values())),
                    "dropped_detail": json.dumps(rec["dropped"], sort_keys=True),
                    "learner": learner,
                    "oracle": _is_oracle(learner, rec.get("metric", "accuracy")),
                    "metric": rec.get("metric", "accuracy"),
                    "accuracy": entry.get("accuracy"),
                    "mse": entry.get("mse"),
                    "seconds": entry.get("seconds"),
                    "cell_seconds": rec["seconds"],
                    "error": entry.get("error", ""),
                    "params_text": p.get("text"),
                }
            )
    return out


def _is_oracle(name: str, metric: str) -> bool:
    try:
        return get_learner(name, "regression" if metric == "mse" else "classification").oracle
    except Exception:  # noqa: BLE001 - a learner of an older results file
        return name in ("clean", "spread-true")


def write_csv(path: Path, table: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS)
    w.writeheader()
    for r in table:
        w.writerow({k: ("" if r[k] is None else r[k]) for k in CSV_COLUMNS})
    from .._io import atomic_write_text

    atomic_write_text(path, buf.getvalue())


def aggregate(table: list[dict]) -> dict[tuple[int, int, str], dict]:
    """(grid index, N index, learner) -> mean/sd/count of the cell's metric (accuracy or MSE), x = ε_record, N."""
    groups: dict[tuple[int, int, str], list[dict]] = defaultdict(list)
    for r in table:
        groups[(r["grid_index"], r["n_index"], r["learner"])].append(r)
    out = {}
    for k, rs in groups.items():
        acc = np.array([r[r["metric"]] for r in rs if r[r["metric"]] is not None], float)
        out[k] = {
            "mean": float(acc.mean()) if acc.size else math.nan,
            "sd": float(acc.std(ddof=1)) if acc.size > 1 else 0.0,
            "count": int(acc.size),
            "errors": sum(1 for r in rs if r["error"]),
            "eps": float(np.mean([r["eps_record"] for r in rs])),
            "delta": float(np.mean([r["delta_record"] for r in rs])),
            "n": rs[0]["n_clients"],
            "row": rs[0],
        }
    return out


def _learner_order(cfg: ScenarioSpec) -> list[str]:
    return list(cfg.learners.names)


def _fmt_eps(e: float) -> str:
    return f"{e:.3g}" if e < 1000 else f"{e:,.0f}"


def metric_of(cfg: ScenarioSpec) -> str:
    """What a scenario's cells are scored by: test accuracy, or test MSE for regression."""
    return cfg.metric


def _param_text(r: dict) -> str:
    if r.get("params_text"):
        return r["params_text"]
    bits = []
    if r["feature_flip"] is not None:
        bits.append(f"feature flip {r['feature_flip']:.4g}")
    if r["feature_epsilon"] is not None:
        bits.append(f"ε/feature {r['feature_epsilon']:.3g}")
    if r["label_flip"] is not None:
        bits.append(f"label flip {r['label_flip']:.3g}")
    if r["label_epsilon"] is not None:
        bits.append(f"label ε {r['label_epsilon']:.3g}")
    return ", ".join(bits) or "set by the population"


def summary_markdown(out: str | Path) -> str:
    out = Path(out)
    cfg, table, missing = load_table(out)
    man = json.loads((out / "manifest.json").read_text())
    agg = aggregate(table)
    learners = _learner_order(cfg)
    G, Ns = max(len(cfg.grid), 1), cfg.n_grid
    reps = cfg.scenario.repeats
    lines = [f"# {cfg.name}", ""]
    if cfg.scenario.description:
        lines += [cfg.scenario.description.strip(), ""]
    pop = cfg.population
    who = pop.dataset if cfg.is_dataset else pop.population
    lines += [
        f"- population: {who}; mechanism: {cfg.privacy.mechanism if cfg.grid_axis or pop.budget_mix else 'set by the population'}; "
        f"mode: {cfg.run.mode}; repeats: {reps}; seed: {cfg.scenario.seed}",
        f"- cells finished: {len({r['cell'] for r in table})} of {len({r['cell'] for r in table}) + len(missing)}"
        + (f" (missing: {', '.join(missing[:8])}{' …' if len(missing) > 8 else ''})" if missing else ""),
        f"- fedrr {man['versions'].get('fedrr')}, flwr {man['versions'].get('flwr')}, git {str(man['git'].get('commit'))[:10]}"
        f"{' (dirty)' if man['git'].get('dirty') else ''}; {man['machine']['cpu_count']} CPUs",
        "",
    ]
    cell_txt = "mean ± sd over repeats" if reps > 1 else "one repeat"
    metric = metric_of(cfg)
    fmt = METRICS[metric][2]
    for j, N in enumerate(Ns):
        lines += [f"## N = {N:,} clients (test {'MSE' if metric == 'mse' else 'accuracy'}, {cell_txt})", ""]
        head = (
            "| ε per record | δ per record | per-field parameters | " + " | ".join(learners) + " | releases | dropped |"
        )
        lines += [head, "|" + "---|" * (5 + len(learners))]
        for g in range(G):
            first = next((agg[(g, j, n)] for n in learners if (g, j, n) in agg), None)
            if first is None:
                continue
            r = first["row"]
            cells_txt = []
            for n in learners:
                a = agg.get((g, j, n))
                if a is None or not a["count"]:
                    cells_txt.append("error" if a and a["errors"] else "–")
                else:
                    cells_txt.append(fmt.format(a["mean"]) + (" ± " + fmt.format(a["sd"]) if reps > 1 else ""))
            rel = [
                x["n_releases"]
                for x in table
                if x["grid_index"] == g and x["n_index"] == j and x["learner"] == learners[0]
            ]
            drp = [
                x["dropped"]
                for x in table
                if x["grid_index"] == g and x["n_index"] == j and x["learner"] == learners[0]
            ]
            eps_txt = _fmt_eps(first["eps"]) + (" ⚠" if first["eps"] > HUGE_EPSILON else "")
            if r["eps_record_max"] - r["eps_record_min"] > 1e-9 * r["eps_record_max"]:
                eps_txt += f" (mean; {_fmt_eps(r['eps_record_min'])}–{_fmt_eps(r['eps_record_max'])})"
            lines.append(
                f"| {eps_txt} | {first['delta']:.2g} | {_param_text(r)} | "
                + " | ".join(cells_txt)
                + f" | {np.mean(rel):,.0f} | {np.mean(drp):,.0f} |"
            )
        lines.append("")
    errs = sorted({(x["learner"], x["error"]) for x in table if x["error"]})
    if errs:
        lines += ["Errors:", ""] + [f"- {n}: {e[:300]}" for n, e in errs] + [""]
    if metric == "mse":
        lines += [_regression_text(cfg)]
    else:
        lines += [
            "**ε axis.** ε per record is the basic composition of every field's ε (D features + the label), "
            "computed by the mechanisms' own accounting (`RecordMechanism.epsilon`); δ likewise adds up "
            "(Gaussian: D·δ per feature). " + _split_text(cfg)
        ]
    huge = [r for r in table if r["eps_record"] > HUGE_EPSILON]
    if huge and metric == "mse":
        lines += [
            "",
            f"⚠ **Honest note:** {len({r['grid_index'] for r in huge})} grid point(s) have ε per record above "
            f"{HUGE_EPSILON:g} (up to {_fmt_eps(max(r['eps_record'] for r in huge))}): read them as 'noise of this size', "
            "not as a meaningful privacy guarantee.",
        ]
    elif huge:
        worst = max(huge, key=lambda r: r["eps_record"])
        lines += [
            "",
            f"⚠ **Honest note:** {len({r['grid_index'] for r in huge})} grid point(s) have ε per record above "
            f"{HUGE_EPSILON:g}, up to {_fmt_eps(worst['eps_record'])} (= {worst['n_features']} features × "
            f"{worst['eps_per_feature']:.3g} + label {worst['eps_label']:.3g}). Local DP with ε that large bounds "
            "almost nothing formally (an adversary's odds may move by e^ε); read these points as 'noise of this "
            "size', not as a meaningful privacy guarantee.",
        ]
    if metric == "mse" and "clean" in learners:
        lines += [
            "",
            "The oracle `clean` (dashed in the plots) is least squares on the clean records of the same clients; "
            "it sits outside the federation.",
        ]
    elif any(_is_oracle(n, 'accuracy') for n in learners):
        lines += [
            "",
            "Oracles (dashed in the plots) see clean data and sit outside the federation: `clean` = logistic "
            "regression on the clean records of the clients that released; `spread-true` = spread-EM on the releases "
            "with the clean records' own per-feature prior.",
        ]
    return "\n".join(lines) + "\n"


def _regression_text(cfg: ScenarioSpec) -> str:
    priv = cfg.privacy
    mech = priv.mechanism
    cal = f" ({priv.calibration} calibration)" if mech == "gaussian" else ""
    text = (
        f"**ε axis.** Each client releases its whole input vector in [0, 1]^p through one {mech} mechanism{cal} "
        "(Farokhi 2020, Thm 1). "
    )
    if priv.label_public:
        text += (
            "⚠ **The label is public**: the target is released in the clear, as in the paper (ỹ = y), so ε per "
            "record covers the inputs only and the target is not protected at all. "
        )
    else:
        s = priv.split
        text += (
            f"The record budget is split {s['features']:g} to the input block and {s['label']:g} to the target "
            "(Laplace noise on y in [0, 1]). "
        )
    if mech == "gaussian" and priv.calibration == "farokhi":
        text += (
            "Farokhi's calibration (Δ = p_x, σ = √(2 ln(1.25/δ))·Δ/ε at any ε) states a nominal ε; the x-axis is "
            "the larger of that and the exact ε of the noise at the same δ (`GaussianMechanism.epsilon_exact`, kept "
            "as `exact_features` in each cell file), so it is a valid bound either way. "
        )
    return text + "Learners are scored by test mean squared error on a clean held-out split (lower is better)."


def _split_text(cfg: ScenarioSpec) -> str:
    if cfg.grid_axis == "epsilon_grid":
        s = cfg.privacy.split
        return (
            f"The grid is a record budget ε_record split {s['features']:g} to the features (ε per feature = "
            f"{s['features']:g}·ε_record / D) and {s['label']:g} to the label; for randomised response ε is converted "
            "to a flip probability by `RandomizedResponse(k, epsilon=...)`."
        )
    if cfg.grid_axis == "feature_flip_grid":
        return "The grid sets the flip probability per feature; the x-axis is the resulting ε per record."
    if cfg.grid_axis == "feature_epsilon_grid":
        return "The grid sets ε per feature; the x-axis is the resulting ε per record."
    if cfg.population.budget_mix:
        return (
            "`population.budget_mix` draws each client's feature budget from the mix; the x-axis is the mean ε per "
            "record over the pool (its range in brackets)."
        )
    return "The population sets each client's budget; the x-axis is the mean ε per record over the pool."


def write_reports(out: str | Path) -> dict[str, Any]:
    """results.csv, summary.md and the plots; returns what was written."""
    out = Path(out)
    cfg, recs, missing = load_results(out)
    table = rows(recs)
    write_csv(out / "results.csv", table)
    from .._io import atomic_write_text

    md = summary_markdown(out)
    atomic_write_text(out / "summary.md", md)
    from .plots import plot

    plots = plot(out) if recs else []
    return {
        "csv": out / "results.csv",
        "summary": out / "summary.md",
        "plots": plots,
        "rows": len(table),
        "missing": missing,
        "markdown": md,
    }
