"""What a results directory records about how it was made: the scenario, the command, the git
commit, and every version that can change a number — Python packages, numba, the BLAS library
and its threading layer, the CPU's vendor/family/model/stepping and numpy's SIMD targets on it.
Spread-EM at low signal amplifies last-bit floating-point differences between CPUs and BLAS
builds (docs: reproducibility), so a result reproduces for its seed on a machine with the same
entries here; ``mismatches`` lists those that differ."""

from __future__ import annotations

import os
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ..io import git_commit

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


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pkg in PACKAGES:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def blas() -> list[dict[str, Any]]:
    """The BLAS libraries numpy and scipy loaded (threadpoolctl), with their versions; only theirs,
    so that the record does not depend on what else the process imported (a solver's own BLAS)."""
    try:
        import numpy
        import scipy
        import scipy.linalg  # noqa: F401  (loads its BLAS)
        from threadpoolctl import threadpool_info

        homes = tuple(str(Path(m.__file__).resolve().parent) for m in (numpy, scipy))  # numpy(.libs), scipy(.libs)
        libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
        own = [lib for lib in libs if str(Path(lib["filepath"]).resolve()).startswith(homes)]
        keys = ("internal_api", "version", "threading_layer", "architecture", "prefix")
        return sorted(([{k: lib.get(k) for k in keys} for lib in own or libs]), key=lambda d: str(sorted(d.items())))
    except Exception:  # noqa: BLE001 - a manifest must not fail because introspection did
        return []


def cpu_model() -> str | None:
    return cpu_id().get("model name") or platform.processor() or None


def cpu_id() -> dict[str, str]:
    """The first CPU's vendor, family, model, stepping and microcode (/proc/cpuinfo): a virtual
    machine may name every AMD part "AMD EPYC", but family 25 and 26 run different kernels."""
    keys = ("vendor_id", "model name", "cpu family", "model", "stepping", "microcode")
    out: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            if not k.strip():
                break  # the end of the first CPU's block
            if k.strip() in keys:
                out.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return out


def simd() -> list[str]:
    """The SIMD targets numpy dispatches to on this CPU (of those it was built for): its reductions,
    exp and log take different last bits on AVX2 and AVX-512."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        return [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]
    except Exception:  # noqa: BLE001 - a private numpy API: a manifest must not fail because it moved
        return []


#: the machine entries that can change a number (a different hostname or platform string alone cannot)
FINGERPRINT = ("cpu_count", "cpu", "simd", "python", "blas")


def mismatches(recorded: dict) -> list[str]:
    """How this machine and its package versions differ from a manifest's record, one line each
    (empty: the same as far as it recorded). An entry the manifest lacks is reported as unrecorded."""
    out = []
    now_v, old_v = versions(), recorded.get("versions") or {}
    out += [f"{k} {old_v[k]} -> {now_v.get(k)}" for k in old_v if k != "fedrr" and old_v[k] != now_v.get(k)]
    now_m, old_m = machine(), recorded.get("machine") or {}
    for k in FINGERPRINT:
        if k not in old_m:
            out.append(f"{k}: not recorded by that manifest")
            continue
        a, b = old_m[k], now_m[k]
        if k == "cpu":  # a microcode update does not change arithmetic
            a, b = ({i: v for i, v in d.items() if i != "microcode"} for d in (a, b))
        if k == "blas":  # older manifests listed OpenMP too, in threadpoolctl's order: compare BLAS, sorted
            a, b = (
                sorted(
                    (lib for lib in d if lib.get("internal_api") != "openmp"), key=lambda lib: str(sorted(lib.items()))
                )
                for d in (a, b)
            )
        if a != b:
            out.append(f"{k} {a} -> {b}")
    return out


def coretype_hint(recorded: dict) -> str | None:
    """``OPENBLAS_CORETYPE=<kernels>`` when the manifest's OpenBLAS ran one set of kernels and this
    machine's runs others: OpenBLAS picks its kernels by CPU, and set to the recorded ones it
    computes the recorded bits (measured: sweeps made on AMD family 26, where OpenBLAS chose its
    Haswell kernels, reproduce on family 25, where it chooses SkylakeX, with
    ``OPENBLAS_CORETYPE=Haswell``). None when there is nothing to set."""
    arch = lambda libs: {b.get("architecture") for b in libs if b.get("internal_api") == "openblas"} - {None}  # noqa: E731
    old = arch((recorded.get("machine") or {}).get("blas") or [])
    return f"OPENBLAS_CORETYPE={next(iter(old))}" if len(old) == 1 and arch(blas()) != old else None


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "cpu": cpu_id(),
        "simd": simd(),
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
