"""Privacy budget vs accuracy sweeps: TOML scenario configs (``config``), resumable sweeps that
write one file per finished cell (``sweep``), results tables and plots (``report``) and the
``fedrr`` command (``cli``)."""

from .config import LEARNERS, ScenarioConfig, cell_run_config, cells, load_config, parse_config
from .report import load_results, plot, summary_markdown, write_reports
from .sweep import run_cell, sweep

__all__ = [
    "LEARNERS",
    "ScenarioConfig",
    "cell_run_config",
    "cells",
    "load_config",
    "parse_config",
    "load_results",
    "plot",
    "summary_markdown",
    "write_reports",
    "run_cell",
    "sweep",
]
