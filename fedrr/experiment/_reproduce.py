"""Does a results directory reproduce? ``fedrr reproduce RESULTS_DIR`` reruns its sweep from what
its ``manifest.json`` recorded (the config text, hence the seed) into a scratch directory and
compares the two ``results.csv`` cell by cell and learner by learner, every column but the two
timing ones. It prints the SHA-256 of each file's rows (sorted, timing columns dropped), so that a
result can be checked before and after a change on one machine (docs/reproducibility.md)."""

from __future__ import annotations

import csv
import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ._manifest import coretype_hint, mismatches

#: the columns that change from run to run on one machine: wall time
TIMING = ("seconds", "cell_seconds")
KEY = ("cell", "learner")


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def digest(rows: list[dict[str, str]], columns: list[str] | None = None) -> str:
    """SHA-256 of the rows as CSV lines over ``columns`` (default: all but the timing ones), sorted."""
    cols = columns if columns is not None else [c for c in (rows[0] if rows else {}) if c not in TIMING]
    lines = sorted(",".join(r.get(c, "") for c in cols) for r in rows)
    return hashlib.sha256(("\n".join([",".join(cols), *lines]) + "\n").encode()).hexdigest()


def compare(old: list[dict[str, str]], new: list[dict[str, str]]) -> dict[str, Any]:
    """The cells of ``new`` against the same cells of ``old``: differing values (cell, learner,
    column, old, new), rows present on one side only, columns present on one side only, and the
    digests of both over the columns they share."""
    cells = {r["cell"] for r in new}
    old = [r for r in old if r["cell"] in cells]
    o_cols = [c for c in (old[0] if old else {}) if c not in TIMING]
    n_cols = [c for c in (new[0] if new else {}) if c not in TIMING]
    shared = [c for c in o_cols if c in n_cols]
    o = {tuple(r[k] for k in KEY): r for r in old}
    n = {tuple(r[k] for k in KEY): r for r in new}
    diffs = [
        (*key, c, o[key][c], n[key][c]) for key in sorted(o.keys() & n.keys()) for c in shared if o[key][c] != n[key][c]
    ]
    return {
        "diffs": diffs,
        "only_old": sorted(o.keys() - n.keys()),
        "only_new": sorted(n.keys() - o.keys()),
        "columns_only_old": [c for c in o_cols if c not in n_cols],
        "columns_only_new": [c for c in n_cols if c not in o_cols],
        "digest_old": digest(old, shared),
        "digest_new": digest(new, shared),
        "rows": len(n),
    }


def reproduce(
    results_dir: str | Path,
    out: str | Path | None = None,
    grid_indices: list[int] | None = None,
    log=print,
    repeats: int | None = None,
):
    """Rerun ``results_dir``'s sweep (all cells, or those at ``grid_indices``; with ``repeats``, only
    its first ``repeats`` repeats) into ``out`` (a new scratch directory by default) and compare;
    returns ``compare``'s record plus ``out``."""
    from ._outputs import write_reports
    from ._spec import first_repeats, load_scenario
    from ._sweep import sweep

    src = Path(results_dir)
    try:
        man = json.loads((src / "manifest.json").read_text())
        old = read_rows(src / "results.csv")
    except (OSError, json.JSONDecodeError) as e:
        raise ValidationError("results_dir", f"{src} needs a readable manifest.json and results.csv ({e})") from None
    text = man.get("config_text")
    if not text:
        raise ValidationError("results_dir", f"{src}/manifest.json records no config_text to rerun")
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="fedrr-reproduce-"))
    out.mkdir(parents=True, exist_ok=True)
    path = Path(man.get("config_path") or "")
    if not (path.is_file() and path.read_text() == text):  # the config file has changed or moved: rerun the text
        path = out / "config.toml"
        path.write_text(text)
    log(f"[fedrr] rerunning {src} ({man.get('git', {}).get('commit', '?')[:10]}) from {path} into {out}")
    spec = load_scenario(path)
    ran = man.get("config", {}).get("scenario", {}).get("repeats")
    if isinstance(ran, int) and 1 <= ran < spec.scenario.repeats:  # a sweep run with --repeats: rerun what ran
        spec = first_repeats(spec, ran)
    if repeats is not None and repeats < spec.scenario.repeats:
        spec = first_repeats(spec, repeats, "repeats")
    sweep(spec, out, grid_indices=grid_indices, log=log, progress=False)
    write_reports(out)
    res = compare(old, read_rows(out / "results.csv"))
    return {**res, "out": str(out), "machine": mismatches(man), "hint": coretype_hint(man)}


def report(res: dict) -> tuple[str, bool]:
    """A plain-text verdict and whether every compared value is the same."""
    same = not (res["diffs"] or res["only_old"] or res["only_new"])
    lines = [
        f"{res['rows']} rows rerun into {res['out']}",
        f"sha256 committed {res['digest_old']}",
        f"sha256 rerun     {res['digest_new']}",
    ]
    for side in ("old", "new"):
        if res[f"columns_only_{side}"]:
            lines.append(f"columns only in the {side} file (not compared): {', '.join(res[f'columns_only_{side}'])}")
    for side in ("old", "new"):
        for cell, learner in res[f"only_{side}"]:
            lines.append(f"{cell} {learner}: only in the {side} file")
    lines += [f"{cell} {learner} {col}: {a} -> {b}" for cell, learner, col, a, b in res["diffs"]]
    lines.append("REPRODUCED: every value equal" if same else f"DIFFERS: {len(res['diffs'])} value(s)")
    if res.get("machine"):  # exact equality is promised only on the same CPU and versions
        lines.append("this machine or its versions differ from the manifest's (last bits may move):")
        lines += [f"  {m}" for m in res["machine"]]
        if res.get("hint") and not same:
            lines.append(
                f"OpenBLAS runs other kernels here than it did there: run again with {res['hint']} to use those"
            )
    elif "machine" in res:
        lines.append("same CPU, SIMD targets, BLAS and package versions as the manifest records")
    return "\n".join(lines), same
