"""Shared helpers for the Barber (2020) reproduction scripts in ``simulations/barber_*.py``,
``spread_consistency.py`` and ``bench_spread_em.py``.

* seeding: every cell × repeat gets its own ``np.random.Generator`` derived from
  ``np.random.SeedSequence(seed, spawn_key=(...))``, so a number depends only on (seed, cell,
  repeat) and not on the order the cells are run in or on --quick;
* CSV: one row per cell and repeat; the first line is a ``# command: ...`` comment (read with
  ``pandas.read_csv(path, comment="#")``);
* mean ± std tables (markdown) for stdout and ``summary.md``; each script owns one section of
  ``summary.md`` between ``<!-- BEGIN key -->`` / ``<!-- END key -->`` markers and rewrites
  only that section;
* matplotlib with the Agg backend.
"""

from __future__ import annotations

import csv
import os
import platform
import shlex
import sys
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = "results/barber"


def quiet_warnings() -> None:
    """scikit-learn 1.9 FutureWarnings from LogisticRegressionCV (l1_ratios, scoring, legacy
    attributes) and convergence chatter would drown the progress lines."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    try:
        from sklearn.exceptions import ConvergenceWarning

        warnings.filterwarnings("ignore", category=ConvergenceWarning)
    except Exception:  # pragma: no cover
        pass


def command_line() -> str:
    """The command that ran this script, relative to the repository root when possible (also
    records the library fingerprint at this moment, see fingerprint())."""
    fingerprint()
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(REPO)
    except ValueError:
        pass
    return " ".join(["python", shlex.quote(str(script))] + [shlex.quote(a) for a in sys.argv[1:]])


def library_fingerprint() -> str:
    """Which fedrr code produced a result: git HEAD (short) and a hash of the working-tree
    sources fedrr/**/*.py (the library is edited between commits)."""
    import hashlib
    import subprocess

    h = hashlib.sha256()
    for f in sorted((REPO / "fedrr").rglob("*.py")):
        h.update(str(f.relative_to(REPO)).encode())
        h.update(f.read_bytes())
    try:
        head = (
            subprocess.run(
                ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or "?"
        )
    except Exception:  # pragma: no cover
        head = "?"
    return f"git {head} + fedrr sources sha256:{h.hexdigest()[:12]}"


_FINGERPRINT: str | None = None


def fingerprint() -> str:
    """library_fingerprint() taken once, when the run starts (call it early)."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = library_fingerprint()
    return _FINGERPRINT


def out_dir(path: str | os.PathLike, quick: bool = False) -> Path:
    """The output directory (created). A --quick run left at the default --out writes to
    ``results/barber/quick`` so that a smoke test never overwrites the full results."""
    if quick and str(path).rstrip("/") == DEFAULT_OUT:
        path = DEFAULT_OUT + "/quick"
    p = Path(path)
    if not p.is_absolute():
        p = Path.cwd() / p
    p.mkdir(parents=True, exist_ok=True)
    return p


# ----------------------------------------------------------------------------- seeding
def rng_for(seed: int, *key: int) -> np.random.Generator:
    """Independent generator for one cell/repeat: SeedSequence(seed, spawn_key=key)."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=tuple(int(k) for k in key)))


def int_seed(rng: np.random.Generator) -> int:
    """An integer seed for an estimator's random_state, drawn from a cell's generator."""
    return int(rng.integers(2**31 - 1))


# ----------------------------------------------------------------------------- CSV
def write_csv(
    path: Path, rows: Sequence[dict], command: str | None = None, fields: Sequence[str] | None = None
) -> None:
    """Write rows (dicts) to CSV, preceded by a ``# command: ...`` comment line."""
    if fields is None:
        fields = list(OrderedDict.fromkeys(k for r in rows for k in r))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", newline="") as fh:
        fh.write(f"# command: {command or command_line()}\n")
        fh.write(
            f"# written: {time.strftime('%Y-%m-%d %H:%M:%S')} on {platform.node()} (python {platform.python_version()}); "
            f"library: {fingerprint()}\n"
        )
        w = csv.DictWriter(fh, fieldnames=list(fields), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: _fmt_cell(r.get(k)) for k in fields})
    tmp.replace(path)


def _fmt_cell(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return repr(float(v))
    if isinstance(v, np.integer):
        return int(v)
    return v


# ----------------------------------------------------------------------------- tables
def aggregate(rows: Sequence[dict], keys: Sequence[str], value: str) -> OrderedDict[tuple, np.ndarray]:
    """{key tuple: array of values} in first-seen order."""
    out: OrderedDict[tuple, list] = OrderedDict()
    for r in rows:
        v = r.get(value)
        if v is None or (isinstance(v, float) and not np.isfinite(v)):
            continue
        out.setdefault(tuple(r[k] for k in keys), []).append(float(v))
    return OrderedDict((k, np.asarray(v)) for k, v in out.items())


def mean_std(values: np.ndarray, digits: int = 3, scale: float = 1.0) -> str:
    v = np.asarray(values, float) * scale
    if v.size == 0:
        return "—"
    if v.size == 1:
        return f"{v[0]:.{digits}f}"
    return f"{v.mean():.{digits}f} ± {v.std(ddof=1):.{digits}f}"


def pivot_table(
    rows: Sequence[dict],
    row_key: str,
    col_key: str,
    value: str,
    *,
    row_order: Sequence | None = None,
    col_order: Sequence | None = None,
    row_label: Callable[[Any], str] = str,
    col_label: Callable[[Any], str] = str,
    digits: int = 3,
    scale: float = 1.0,
    corner: str = "",
) -> str:
    """Markdown table: rows × columns of mean ± std (sample sd over repeats) of ``value``."""
    agg = aggregate(rows, [row_key, col_key], value)
    rks = list(row_order) if row_order is not None else list(OrderedDict.fromkeys(k[0] for k in agg))
    cks = list(col_order) if col_order is not None else list(OrderedDict.fromkeys(k[1] for k in agg))
    lines = ["| " + " | ".join([corner or row_key] + [col_label(c) for c in cks]) + " |", "|" + "---|" * (len(cks) + 1)]
    for rk in rks:
        cells = [mean_std(agg[(rk, ck)], digits, scale) if (rk, ck) in agg else "—" for ck in cks]
        lines.append("| " + " | ".join([row_label(rk)] + cells) + " |")
    return "\n".join(lines)


def markdown_table(header: Sequence[str], body: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in body]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- summary.md
SUMMARY_TITLE = "# Barber (2020) reproduction and spread-EM checks\n"


def update_summary(out: Path, key: str, text: str) -> Path:
    """Replace (or append) the ``key`` section of ``out/summary.md``; other sections are kept."""
    path = out / "summary.md"
    begin, end = f"<!-- BEGIN {key} -->", f"<!-- END {key} -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    old = path.read_text() if path.exists() else SUMMARY_TITLE
    if begin in old and end in old:
        pre, rest = old.split(begin, 1)
        _, post = rest.split(end, 1)
        new = pre + block + post.lstrip("\n")
    else:
        new = old.rstrip("\n") + "\n\n" + block
    path.write_text(new)
    return path


# ----------------------------------------------------------------------------- misc
class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        return False


def progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
