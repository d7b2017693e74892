"""Result files, public as ``fedrr.io``: the scripts in simulations/ use it as a user's own script
would. Atomic writes: a file is written to a temporary name and renamed, so a run that dies
part-way leaves either the previous file or the new one, never half of one. And the few helpers
the scripts share: the command line that made a result, a CSV that names it in its first line,
markdown tables, per-cell seeding, and the ``--part`` switch of a script that measures one thing
several ways."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
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


# ------------------------------------------------------------- script outputs (simulations/)
def command_line(argv: list[str] | None = None) -> str:
    """``python SCRIPT ARGS`` of this process (``argv`` replaces the arguments): what every result
    file of a script names as the command that made it. SCRIPT is relative to the working
    directory when it lies below it (run the scripts from the repository root)."""
    import shlex
    import sys

    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path.cwd())
    except ValueError:
        pass
    args = sys.argv[1:] if argv is None else list(argv)
    return " ".join(["python", shlex.quote(str(script))] + [shlex.quote(str(a)) for a in args])


def git_commit() -> dict:
    """The git commit of the fedrr sources this process runs, ``{"commit": sha, "dirty": bool}``
    (``{"commit": None}`` outside a checkout): dirty when tracked files under fedrr/ or simulations/
    differ from it, the code that ran (results, configs and docs written beside it do not count; a
    sweep's manifest records its config's text itself)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "fedrr", "simulations"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    return {"commit": commit, "dirty": bool(dirty)} if commit else {"commit": None}


def provenance() -> str:
    """When, where and from which code a result was written: date, host, Python, fedrr version
    and the git commit of the code (``git_commit``: ``+dirty`` if fedrr/ or simulations/ differ from it)."""
    import platform
    import time

    from . import __version__

    g = git_commit()
    git = f"git {g['commit'][:7]}{'+dirty' if g['dirty'] else ''}" if g["commit"] else "git ?"
    return (
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} on {platform.node()} (python {platform.python_version()}); "
        f"fedrr {__version__}, {git}"
    )


def _csv_value(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return repr(float(v))  # round-trips exactly
    if isinstance(v, np.integer):
        return int(v)
    return v


def write_csv(path: str | os.PathLike, rows: list[dict], command: str, fields: list[str] | None = None) -> None:
    """Rows (dicts) to CSV, atomically, after two comment lines: ``# command: COMMAND`` and
    ``# written: provenance()``. ``fields`` defaults to every key in first-seen order; floats are
    written exactly (repr). Read back with ``pandas.read_csv(path, comment="#")``, or
    ``csv.DictReader`` over the lines that do not start with '#'."""
    import csv
    import io

    if fields is None:
        fields = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    buf.write(f"# command: {command}\n# written: {provenance()}\n")
    w = csv.DictWriter(buf, fieldnames=list(fields), extrasaction="ignore")  # RFC 4180 line ends
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_value(r.get(k)) for k in fields})
    atomic_write_text(path, buf.getvalue())


def write_report(path: str | os.PathLike, title: str, body: str, argv: list[str] | None = None) -> str:
    """A script's markdown result: ``# title``, the command that made it, ``provenance()``, then
    ``body``; written atomically to ``path`` and returned (to print)."""
    text = f"# {title}\n\ncommand: `{command_line(argv)}`\n\n{provenance()}\n\n{body}\n"
    atomic_write_text(path, text)
    return text


def markdown_table(header: list[Any], body: list[list[Any]]) -> str:
    """A GitHub markdown table: one header row, then one row per entry of ``body``."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in body])


def rng_for(seed: int, *key: int) -> np.random.Generator:
    """An independent generator for one cell of a script: ``SeedSequence(seed, spawn_key=key)``,
    so a number depends only on (seed, key), not on which cells ran before or how many."""
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=tuple(int(k) for k in key)))


def part_parser(description: str, parts: Any, default: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of one part of a script of several: it takes ``--part`` (one of
    ``parts``) itself, so that the whole command line parses and the command its results record
    (``command_line``) names the part."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--part", choices=list(parts), default=default, required=default is None)
    return ap


def run_part(description: str, parts: dict[str, Callable[[list[str]], int]], argv: list[str] | None = None,
             default: str | None = None) -> int:  # fmt: skip
    """Run the part of a script that ``--part NAME`` names (``parts``: NAME -> its function), giving it
    the whole argument list; without ``--part`` and no ``default``, print the usage with the parts
    and exit 2 (``--help`` before ``--part``: the script's own help)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--part", choices=list(parts), default=default)
    part = pre.parse_known_args(argv)[0].part
    if part is None:
        part_parser(description, parts).parse_args(argv)  # exits: --part is required
    return parts[part](argv)
