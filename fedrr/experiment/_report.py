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
from ._spec import ScenarioSpec, parse_scenario

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
    "balanced_accuracy",
    "auc",
    "mse",
    "seconds",
    "cell_seconds",
    "error",
    "params_text",
    "fake_fraction",
    "check_flagged",
    "fell_back",
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
_TEXT = {
    "scenario",
    "cell",
    "mode",
    "mechanism",
    "grid_axis",
    "learner",
    "metric",
    "error",
    "dropped_detail",
    "params_text",
}


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
                elif k in ("check_flagged", "fell_back"):
                    row[k] = None if v == "" else v == "True"
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
                    "balanced_accuracy": entry.get("balanced_accuracy"),
                    "auc": entry.get("auc"),
                    "mse": entry.get("mse"),
                    "seconds": entry.get("seconds"),
                    "cell_seconds": rec["seconds"],
                    "error": entry.get("error", ""),
                    "params_text": p.get("text"),
                    "fake_fraction": rec.get("fake_fraction"),
                    "check_flagged": (rec.get("frequency_check") or {}).get("flagged"),
                    "fell_back": (entry.get("diagnostics") or {}).get("fallback"),
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
    from ..io import atomic_write_text

    atomic_write_text(path, buf.getvalue())


def aggregate(table: list[dict], metric: str | None = None) -> dict[tuple[int, int, str], dict]:
    """(grid index, N index, learner) -> mean/sd/count of the cell's metric (accuracy or MSE; or the
    column ``metric`` names, e.g. balanced_accuracy or auc), x = ε_record, N."""
    groups: dict[tuple[int, int, str], list[dict]] = defaultdict(list)
    for r in table:
        groups[(r["grid_index"], r["n_index"], r["learner"])].append(r)
    out = {}
    for k, rs in groups.items():
        acc = np.array([r[metric or r["metric"]] for r in rs if r.get(metric or r["metric"]) not in (None, "")], float)
        out[k] = {
            "mean": float(acc.mean()) if acc.size else math.nan,
            "sd": float(acc.std(ddof=1)) if acc.size > 1 else 0.0,
            "count": int(acc.size),
            "errors": sum(1 for r in rs if r["error"]),
            "fell_back": sum(1 for r in rs if r.get("fell_back")),
            "balanced_accuracy": _mean_of(rs, "balanced_accuracy"),
            "auc": _mean_of(rs, "auc"),
            "eps": float(np.mean([r["eps_record"] for r in rs])),
            "delta": float(np.mean([r["delta_record"] for r in rs])),
            "n": rs[0]["n_clients"],
            "row": rs[0],
        }
    return out


def _mean_of(rows: list[dict], key: str) -> float | None:
    """The mean of a column over rows that have it (None when none does: older results, regression)."""
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "")]
    return float(np.mean(vals)) if vals else None


def _learner_order(cfg: ScenarioSpec) -> list[str]:
    return list(cfg.learners.names)


def _fmt_eps(e: float) -> str:
    return f"{e:.3g}" if e < 1000 else f"{e:,.0f}"


def metric_of(cfg: ScenarioSpec) -> str:
    """What a scenario's cells are scored by: test accuracy, or test MSE for regression."""
    return cfg.metric
