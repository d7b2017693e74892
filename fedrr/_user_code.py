"""Where a run finds its users' code and files, the same in every process it starts (worker
processes, Ray workers, Flower's apps): the start directory (``mark_start_dir``), an object imported
from a ``"module:attribute"`` path (``load_object``; a custom population's factory), that factory's
parameters (``population_parameters``: the config keys it takes) and table paths made absolute against
the start directory (``table_path``). Split from ``fedrr.population``, which re-exports these names."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from .errors import ValidationError


def table_path(path: str, base: str | os.PathLike | None = None) -> str:
    """A table path as given, made absolute against ``base`` (default: the run's start directory,
    ``mark_start_dir``, else the working directory): every process of a run reads the same file."""
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else Path(base or os.environ.get(START_DIR_ENV) or os.getcwd()) / p)


#: environment variable naming the directory a run was started from; every process a run starts
#: (worker processes, Ray workers, Flower's apps) inherits it and imports populations from there too
START_DIR_ENV = "FEDRR_START_DIR"


def mark_start_dir(path: str | os.PathLike | None = None) -> str:
    """Record where this run starts (default: the working directory) for every process it starts:
    a population module there imports the same way in the driver, worker processes, Ray workers
    and Flower's apps. Each entry point (the ``fedrr`` command, ``sweep``, ``run_federation``,
    ``flwr_cli``) calls it."""
    os.environ[START_DIR_ENV] = str(Path(path or os.getcwd()).resolve())
    return os.environ[START_DIR_ENV]


def _import(module: str):
    """Import ``module`` from sys.path, or else from the run's start directory (``mark_start_dir``;
    without one, the working directory): the same rule in the driver, worker processes, Ray workers
    and Flower's apps, where sys.path differs (a console script's has no working directory)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        start = os.environ.get(START_DIR_ENV) or os.getcwd()
        if (
            exc.name != top
            or start in sys.path
            or not ((Path(start) / f"{top}.py").is_file() or (Path(start) / top / "__init__.py").is_file())
        ):
            raise
        sys.path.append(start)
        return importlib.import_module(module)


def load_object(path: str) -> Any:
    """Import ``"package.module:attribute"`` (the module from sys.path, or the run's start directory)."""
    if not isinstance(path, str) or ":" not in path:
        raise ValidationError("population", f"must be 'dataset' or an import path 'module:Class', got {path!r}")
    mod, _, attr = path.partition(":")
    try:
        obj = _import(mod)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:  # empty or relative module name
        start = os.environ.get(START_DIR_ENV) or os.getcwd()
        raise ValidationError(
            "population", f"cannot import {path!r}: {exc} (looked on sys.path and in the start directory {start})"
        ) from None
    except Exception as exc:  # the module itself raised while importing
        raise ValidationError("population", f"importing {path!r} failed: {type(exc).__name__}: {exc}") from None
    return obj


def population_parameters(path: str) -> set[str] | None:
    """The parameter names (underscored) the population factory at ``path`` takes by name, or None
    when its signature cannot be read. Importing it is the check that it imports at all."""
    factory = load_object(path)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None
    return {
        n for n, p in params.items() if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    }
