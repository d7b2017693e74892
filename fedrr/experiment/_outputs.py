"""A sweep's reports, written from its cells' results: ``results.csv`` (the table, ``_report``),
``summary.md`` (``_summary``) and the plots (``_plots``). The entry point above the three, which
read the table and never each other's callers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..io import atomic_write_text
from ._plots import plot
from ._report import load_results, rows, write_csv
from ._summary import summary_markdown


def write_reports(out: str | Path) -> dict[str, Any]:
    """results.csv, summary.md and the plots; returns what was written."""
    out = Path(out)
    cfg, recs, missing = load_results(out)
    table = rows(recs)
    write_csv(out / "results.csv", table)
    md = summary_markdown(out)
    atomic_write_text(out / "summary.md", md)
    plots = plot(out) if recs else []
    return {
        "csv": out / "results.csv",
        "summary": out / "summary.md",
        "plots": plots,
        "rows": len(table),
        "missing": missing,
        "markdown": md,
    }
