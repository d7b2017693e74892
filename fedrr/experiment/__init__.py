"""Experiments: a TOML scenario parsed once into a typed ``ScenarioSpec`` (``spec``), its cells
(``cells``) run offline or as Flower simulations (``runner``), resumable sweeps (``sweep``), the
results tables and plots (``report``, ``plots``) and the ``fedrr`` command (``cli``).

The modules are private (``_name.py``) and the names below are the public surface, except two that
keep public paths as entry points: ``cli`` (the ``fedrr`` console script, ``fedrr.experiment.cli:main``,
and ``python -m fedrr.experiment.cli``) and ``reference`` (``python -m fedrr.experiment.reference``
regenerates docs/reference/config.md)."""

from ._cells import CellSpec
from ._manifest import machine, versions
from ._outputs import write_reports
from ._report import load_table
from ._reproduce import digest, reproduce
from ._runner import run_cell
from ._spec import ScenarioSpec, load_scenario, parse_scenario
from ._summary import summary_markdown
from ._sweep import is_done, sweep

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
    "is_done",
    "reproduce",
    "digest",
    "machine",
    "versions",
]
