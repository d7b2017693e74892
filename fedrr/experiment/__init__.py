"""Experiments: a TOML scenario parsed once into a typed ``ScenarioSpec`` (``spec``), its cells
(``cells``) run offline or as Flower simulations (``runner``), resumable sweeps (``sweep``), the
results tables and plots (``report``, ``plots``) and the ``fedrr`` command (``cli``)."""

from .cells import CellSpec
from .report import load_table, write_reports
from .runner import run_cell
from .spec import ScenarioSpec, load_scenario, parse_scenario
from .summary import summary_markdown
from .sweep import sweep

__all__ = [
    "CellSpec",
    "ScenarioSpec",
    "load_scenario",
    "parse_scenario",
    "load_table",
    "summary_markdown",
    "write_reports",
    "run_cell",
    "sweep",
]
