"""Privacy-budget sweeps: run every cell of a scenario, write each as it finishes, resume.

A cell is one population and one release of it (one federation) at one grid point, one N and one
repeat; every learner is fitted in the cell (``runner.run_cell``). Offline cells run in parallel
(Ray tasks or worker processes); Flower cells run one after another (each is a Ray simulation).

Each finished cell is written atomically to ``OUT/cells/<key>.json``. A rerun skips every cell
whose file exists with the same fingerprint (the parameters that decide its result), so a killed
sweep resumes where it stopped and every cell ends up present exactly once. A cell's seed derives
from (scenario seed, cell index) only: results do not depend on parallelism or order."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from .._validation import check_int
from ..errors import FedrrError, ValidationError
from ..io import write_json
from ..learners import fallback_note
from ..parallel import ray_map_unordered
from ._cells import CellSpec
from ._manifest import manifest
from ._resources import check_resources
from ._runner import as_config_error, run_cell
from ._spec import ScenarioSpec


def _run_cell_in_worker(task: dict) -> dict:
    """run_cell in a worker process, with any error turned into one that pickles intact."""
    if task.get("start_dir"):  # a Ray worker may predate this run: its start directory comes with the task
        from .._user_code import mark_start_dir

        mark_start_dir(task["start_dir"])
    try:
        return run_cell(task["cell"], task["out"], task["executor"])
    except (ValidationError, FedrrError):
        raise
    except Exception as exc:
        raise FedrrError(f"{type(exc).__name__}: {exc}") from None


def _worker_init() -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # one BLAS thread per worker process: the workers are the parallelism


def _run_cell_on_ray(task: dict) -> dict:
    """A Ray task: one cell, one BLAS thread (the tasks are the parallelism)."""
    _worker_init()
    return _run_cell_in_worker(task)


# ---------------------------------------------------------------------------------- sweeps
@dataclass
class SweepResult:
    out: Path
    computed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    #: cell key -> {learner: its error}, over every finished cell of the run (skipped ones included)
    learner_errors: dict[str, dict[str, str]] = field(default_factory=dict)
    seconds: float = 0.0

    def learner_failures(self) -> str | None:
        """``"k learner(s) failed in n cell(s); first: cell KEY, NAME: ERROR"``, or None."""
        if not self.learner_errors:
            return None
        k = sum(len(e) for e in self.learner_errors.values())
        key = sorted(self.learner_errors)[0]
        name, err = next(iter(self.learner_errors[key].items()))
        return f"{k} learner(s) failed in {len(self.learner_errors)} cell(s); first: cell {key}, {name}: {err}"


def learner_errors(rec: dict) -> dict[str, str]:
    """A cell record's learners that raised (an entry ``"not run: …"`` is a learner skipped on purpose)."""
    return {
        n: e["error"]
        for n, e in rec.get("learners", {}).items()
        if e.get("error") and not str(e["error"]).startswith("not run")
    }


def cell_line(rec: dict) -> str:
    """The live line of a finished cell: each learner's score, and whether it fell back, and why."""
    metric = rec.get("metric", "accuracy")
    parts = []
    for n, e in rec["learners"].items():
        note = fallback_note(e)
        parts.append((f"{n} {e[metric]:.4g}" if metric in e else f"{n} error") + (f" {note}" if note else ""))
    resampled = " (resampled)" if rec.get("population", {}).get("resample", "none") != "none" else ""
    return (
        f"[fedrr] cell {rec['cell']}: ε_record {rec['eps']['record']:.4g}, N {rec['n_clients']}{resampled}: "
        f"{'; '.join(parts)} ({rec['seconds']:.0f} s)"
    )


def is_done(cell: CellSpec, out: Path) -> bool:
    """Whether ``out/cells`` holds this cell's finished record, computed for this cell (same
    fingerprint): what a resumed sweep skips."""
    return finished(cell, out) is not None


def finished(cell: CellSpec, out: Path) -> dict | None:
    """This cell's finished record in ``out/cells`` (same fingerprint), or None."""
    p = out / "cells" / f"{cell.key}.json"
    if not p.exists():
        return None
    try:
        rec = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return rec if rec.get("status") == "done" and rec.get("fingerprint") == cell.fingerprint() else None


def longest_first(cells: list[CellSpec]) -> list[CellSpec]:
    """The order offline cells are handed to a pool of workers in: the likely longest first, so
    that the last to start are short and the workers finish together (longest-processing-time-first
    scheduling; the process pool starts them in this order, Ray schedules them in submission order
    on one node but does not promise it on a cluster). A cell's cost grows with its clients and
    with its releases' signal: spread-EM falls back to the majority class early on releases that
    show no association, and runs every iteration on those that do. So: more clients first, then
    the larger ε (the smaller flip probability). Only the wall time depends on the order: a cell's
    seed is its own."""

    def signal(c: CellSpec) -> float:
        v = c.grid_value
        if v is None:
            return 0.0
        return -v if c.spec.grid_axis == "feature_flip_grid" else v

    return sorted(cells, key=lambda c: (-c.n_clients, -signal(c), c.key))


def _plan(spec: ScenarioSpec, todo: list[CellSpec], workers: int | None) -> tuple[list[CellSpec], int]:
    """How many cells run at once (offline cells: ``workers``, else the config's, else one per
    CPU; Flower cells one at a time), and the order they start in (longest first on a pool)."""
    n_workers = workers if workers is not None else (spec.run.workers or os.cpu_count() or 1)
    n_workers = max(1, min(n_workers, len(todo))) if spec.run.mode == "offline" else 1
    return (longest_first(todo) if n_workers > 1 else todo), n_workers


def preflight(spec: ScenarioSpec) -> None:
    """Checks that need the dataset (mechanism vs feature types, test split size, ε too small or
    large for a flip probability) and the memory estimate, before any cell starts."""
    first = spec.cells()[:1] or [CellSpec(spec, 0, 0, 0)]
    for cell in [CellSpec(spec, g, 0, 0) for g in range(max(len(spec.grid), 1))]:
        cell.privacy()
    check_resources(spec)
    pop = spec.population
    if spec.task == "regression":
        from ._regression import load_regression_data

        N = load_regression_data(pop.dataset)[0].shape[0]
        if max(spec.n_grid) + pop.n_test_per_class > N:
            raise ValidationError(
                "population.n_clients",
                f"{max(spec.n_grid)} clients + {pop.n_test_per_class} test "
                f"rows (n_test_per_class) exceed the {N} rows of {pop.dataset!r}",
            )
        return
    from ..assembly import checked_population
    from ..learners import check_accepts

    # the population builds (a custom one at the smallest N), releases one record per distinct
    # mechanism, and every learner accepts those mechanisms (a budget mix, paired releases)
    cell = first[0]
    if not spec.is_dataset:
        cell = min(first + [CellSpec(spec, 0, n, 0) for n in range(len(spec.n_grid))], key=lambda c: c.n_clients)
    key = "population.dataset" if spec.is_dataset else "population.population"
    try:
        cfg = cell.run_config()
        _, mechanisms = checked_population(cfg, key)
        mech = mechanisms[0] if len(mechanisms) == 1 else mechanisms
        check_accepts(spec.learners.names, mech, population=cfg.population_name())
    except ValidationError as exc:
        raise as_config_error(exc, cell) from None


def _unfinished(cells: list[CellSpec], out: Path, res: SweepResult) -> list[CellSpec]:
    """The cells not finished in ``out``; the finished ones go to ``res.skipped`` (with their learners' errors)."""
    todo = []
    for c in cells:
        rec = finished(c, out)
        if rec is None:
            todo.append(c)
            continue
        res.skipped.append(c.key)
        if errs := learner_errors(rec):
            res.learner_errors[c.key] = errs
    return todo


def _one_ray(mode: str):
    """Flower cells, one after another, on one Ray instance (``_compat.ray_kept_up``: Flower would
    start and stop Ray for every cell); nothing to keep for offline cells."""
    if mode == "offline":
        return contextlib.nullcontext(lambda: None)
    from ..federation import ray_kept_up

    return ray_kept_up()


def _start_manifest(man_path: Path, spec: ScenarioSpec, argv: list[str] | None) -> dict:
    """The run's manifest, written at the start; a resumed sweep keeps its first start time."""
    man = manifest(spec, argv)
    if man_path.exists():
        try:
            old = json.loads(man_path.read_text())
            man["first_started_at"] = old.get("first_started_at", old.get("started_at"))
        except (OSError, json.JSONDecodeError):
            pass
    write_json(man_path, man)
    return man


def _run_in_processes(tasks: dict, n_workers: int, done: Callable) -> None:
    """The cells on a pool of ``n_workers`` spawned processes, each reported to ``done`` as it finishes;
    on an exception (Ctrl-C included) the cells not started are cancelled."""
    import multiprocessing as mp

    with ProcessPoolExecutor(n_workers, mp_context=mp.get_context("spawn"), initializer=_worker_init) as pool:
        futs = {pool.submit(_run_cell_in_worker, t): k for k, t in tasks.items()}
        pending = set(futs)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    err = f.exception()
                    done(futs[f], None if err else f.result(), err)
        except BaseException:
            for f in pending:
                f.cancel()
            raise


def sweep(
    spec: ScenarioSpec,
    out: str | Path,
    *,
    grid_indices: list[int] | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    log: Callable[[str], None] = print,
    argv: list[str] | None = None,
    parallel: str | None = None,
) -> SweepResult:
    """Run the scenario's cells (all, or those at ``grid_indices``) into ``out``; skip finished ones.
    Offline cells run ``workers`` at a time on Ray or in a process pool (``parallel``, default the
    config's ``run.parallel``); Flower cells run one after another (each is a Ray simulation)."""
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    out = Path(out)
    if workers is not None:
        check_int("workers", workers, minimum=1)
    from .._user_code import mark_start_dir

    start_dir = mark_start_dir()  # worker processes and Ray workers import populations from there too
    for note in spec.notes:  # a budget the user did not set, said once at the start
        log(note)
    preflight(spec)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    for stale in (out / "cells").glob(".*.tmp"):  # a write cut short by a kill: never a finished cell
        stale.unlink(missing_ok=True)
    man_path = out / "manifest.json"
    man = _start_manifest(man_path, spec, argv)
    all_cells = spec.cells(grid_indices)
    res = SweepResult(out)
    todo = _unfinished(all_cells, out, res)
    if res.skipped:
        log(f"[fedrr] {len(res.skipped)} of {len(all_cells)} cells already finished in {out}/cells (skipped)")
    mode = spec.run.mode
    todo, n_workers = _plan(spec, todo, workers)
    executor = "serial" if n_workers > 1 else None
    tasks = {c.key: {"cell": c, "out": str(out), "executor": executor, "start_dir": start_dir} for c in todo}
    bar = tqdm(
        total=len(all_cells),
        initial=len(res.skipped),
        desc=f"{spec.name} cells",
        unit="cell",
        disable=(not progress) if progress is not None else None,
        file=sys.stderr,
    )

    def done(key: str, rec: dict | None, err: BaseException | None) -> None:
        bar.update(1)
        if err is not None:
            res.failed[key] = f"{type(err).__name__}: {err}"
            bar.write(f"[fedrr] cell {key} FAILED: {res.failed[key]}")
            return
        res.computed.append(key)
        if errs := learner_errors(rec):
            res.learner_errors[key] = errs
        bar.write(cell_line(rec))

    parallel = parallel if parallel is not None else spec.run.parallel
    if parallel not in ("ray", "processes"):
        raise ValidationError("run.parallel", f"must be 'ray' or 'processes', got {parallel!r}")
    try:
        if n_workers > 1 and parallel == "ray":
            ray_map_unordered(_run_cell_on_ray, tasks, n_workers, spec.run.ray_address, done, fatal=(ValidationError,))
        elif n_workers > 1:
            _run_in_processes(tasks, n_workers, done)
        else:
            with _one_ray(mode if tasks else "offline") as restart:
                for key, t in tasks.items():
                    try:
                        rec = run_cell(t["cell"], t["out"], t["executor"])
                    except ValidationError:
                        raise
                    except Exception as exc:  # one failed cell must not lose the others
                        done(key, None, exc)
                        restart()  # nor leave them a Ray instance it may have broken
                    else:
                        done(key, rec, None)
    finally:
        bar.close()
    res.seconds = time.perf_counter() - t0
    man["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    man["cells"] = {
        "total": len(all_cells),
        "computed": len(res.computed),
        "skipped": len(res.skipped),
        "failed": res.failed,
    }
    man["seconds"] = res.seconds
    write_json(man_path, man)
    return res
