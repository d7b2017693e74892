"""Atomic result files: written to a temporary name and renamed, so a run that dies part-way
leaves either the previous file or the new one, never half of one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def jsonable(o: Any) -> Any:
    """``json.dumps`` fallback for numpy scalars and arrays (anything else: its str)."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, default=jsonable) + "\n")
