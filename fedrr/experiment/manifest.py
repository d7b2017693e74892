"""What a results directory records about how it was made: the scenario, the command, the git
commit, and every version that can change a number — Python packages, numba, the BLAS library
and its threading layer, and the CPU model. Spread-EM at low signal amplifies last-bit
floating-point differences between CPUs and BLAS builds (docs: reproducibility), so a result
reproduces for its seed on a machine with the same entries here."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = (
    "fedrr",
    "flwr",
    "ray",
    "numpy",
    "scipy",
    "scikit-learn",
    "numba",
    "llvmlite",
    "cvxpy",
    "clarabel",
    "matplotlib",
    "threadpoolctl",
)


def git_commit() -> dict:
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return {"commit": commit or None, "dirty": bool(dirty)} if commit else {"commit": None}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def blas() -> list[dict[str, Any]]:
    """The BLAS/OpenMP libraries numpy and scipy loaded (threadpoolctl), with their versions."""
    try:
        import numpy  # noqa: F401  (loads its BLAS)
        import scipy.linalg  # noqa: F401
        from threadpoolctl import threadpool_info

        return [
            {k: lib.get(k) for k in ("internal_api", "version", "threading_layer", "architecture", "prefix")}
            for lib in threadpool_info()
        ]
    except Exception:  # noqa: BLE001 - a manifest must not fail because introspection did
        return []


def cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "hostname": platform.node(),
        "blas": blas(),
    }


def manifest(spec, argv: list[str] | None = None) -> dict:
    return {
        "scenario": spec.name,
        "config_path": spec.path,
        "config": spec.as_dict(),
        "config_text": spec.text,
        "grid_axis": spec.grid_axis or "population",
        "seed": spec.scenario.seed,
        "cell_seeds": "numpy.random.SeedSequence(scenario.seed, spawn_key=(grid index, N index, repeat))",
        "versions": versions(),
        "git": git_commit(),
        "machine": machine(),
        "command": argv if argv is not None else sys.argv,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
