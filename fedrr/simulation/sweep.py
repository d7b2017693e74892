"""Privacy-budget sweeps: run every cell of a scenario, write each as it finishes, resume.

A cell is one population and one release of it (one federation) at one grid point, one N and one
repeat; every learner is fitted in the cell. Cells run

* offline: ``fedrr.federation.client_app.offline_release`` (the pool a Flower run would collect,
  without Flower) and ``ReleaseStrategy``, in parallel worker processes;
* flower / cohort: ``fedrr.federation.run_federation``, one after another (each is a Ray
  simulation already).

Each finished cell is written atomically to ``OUT/cells/<key>.json`` (temporary file, then
``os.replace``). A rerun skips every cell whose file exists with the same fingerprint (the
parameters that decide its result), so a killed sweep resumes where it stopped and every cell ends
up present exactly once. A cell's seed derives from (scenario seed, cell index) only
(``config.cell_seed``): results do not depend on parallelism or order."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._io import write_json
from ..errors import FedrrError, ValidationError
from .config import (
    Cell,
    ScenarioConfig,
    cell_fingerprint,
    cell_run_config,
    cell_seed,
    cells,
    parse_config,
    privacy_params,
)

#: federation run-config key -> scenario config path, to report population errors by config key
_FIELD_PATHS = {
    "mechanism": "privacy.mechanism",
    "feature-flip": "privacy.feature_flip_grid",
    "feature_flip": "privacy.feature_flip_grid",
    "feature-epsilon": "privacy.feature_epsilon_grid",
    "feature_epsilon": "privacy.feature_epsilon_grid",
    "label-flip": "privacy.label_flip",
    "label_flip": "privacy.label_flip",
    "label-epsilon": "privacy.label_epsilon",
    "label_epsilon": "privacy.label_epsilon",
    "flip_prob": "privacy",
    "epsilon": "privacy",
    "delta": "privacy.delta",
    "dataset": "population.dataset",
    "n_test_per_class": "population.n_test_per_class",
    "n-clients": "population.n_clients",
    "n_clients": "population.n_clients",
    "dropout": "population.dropout",
    "population": "population.population",
    "mechanisms": "privacy",
    "learners": "learners.names",
    "n-test-per-class": "population.n_test_per_class",
}


def _as_config_error(exc: ValidationError, cfg: ScenarioConfig | None = None) -> ValidationError:
    msg = str(exc)
    prefix = f"{exc.field}: "
    msg = msg[len(prefix) :] if msg.startswith(prefix) else msg
    path = _FIELD_PATHS.get(exc.field)
    if (
        cfg is not None
        and cfg.grid_key == "epsilon_grid"
        and path
        in (
            "privacy",
            "privacy.feature_flip_grid",
            "privacy.feature_epsilon_grid",
            "privacy.label_flip",
            "privacy.label_epsilon",
        )
    ):
        path = "privacy.epsilon_grid"  # the per-field budgets all come from the record budget
    return ValidationError(path, msg) if path else exc


# ------------------------------------------------------------------------------- accounting
# ------------------------------------------------------------------------------------ cells
def _oracle_fits(
    names: list[str], population, pool, test, C: float, executor, seed: int, max_iter: int
) -> dict[str, dict]:
    """Clean-data oracles, outside the federation: ``clean`` = logistic regression on the clean
    records of the clients that released (encoded like the learners encode releases);
    ``spread-true`` = spread-EM on the releases with the clean records' own per-feature prior."""
    from ..estimators import NaiveLogisticRegression, SpreadLogisticRegression

    out: dict[str, dict] = {}
    if not names:
        return out
    ids = pool.client_id
    recs = [population.record(int(i)) for i in ids]
    Xc = np.stack([np.asarray(x) for x, _ in recs])
    yc = np.asarray([y for _, y in recs])
    del recs
    mech = pool.mechanisms[0]
    for name in names:
        entry: dict[str, Any] = {}
        t0 = time.perf_counter()
        try:
            if name == "clean":
                est = NaiveLogisticRegression(C=C).fit(Xc, yc, mechanism=mech)
            else:  # spread-true
                ks = {
                    getattr(f.mechanism, "k", None)
                    for m in {id(m): m for m in pool.mechanisms}.values()
                    for f in m.fields
                }
                if None in ks or len(ks) != 1:
                    raise ValidationError(
                        "learners.names", "'spread-true' needs discrete features with one number of states"
                    )
                k = ks.pop()
                counts = (
                    np.stack([np.bincount(np.asarray(Xc[:, j], int), minlength=k) for j in range(Xc.shape[1])]) + 1e-3
                )
                prior = counts / counts.sum(axis=1, keepdims=True)
                est = SpreadLogisticRegression(
                    C=C, prior=prior, executor=executor, random_state=seed, max_iter=max_iter
                )
                est.fit(pool.X, pool.y, mechanism=pool.mechanism_arg())
            entry["seconds"] = time.perf_counter() - t0
            if test is not None:
                entry["accuracy"] = float(est.score(*test))
        except (FedrrError, ValueError, ArithmeticError) as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        out[name] = entry
    return out


def run_cell(task: dict) -> dict:
    """Run one cell and write its file; returns the cell record. ``task``: config sections, cell
    (g, n, r), out dir, executor. Top level, so worker processes can run it."""
    t_start = time.perf_counter()
    cfg = parse_config(task["config"])
    cell = Cell(*task["cell"])
    out = Path(task["out"])
    if cfg["population"]["task"] == "regression":
        return _run_regression_cell(cfg, cell, out, t_start)
    mode = cfg["run"]["mode"]
    rc = cell_run_config(cfg, cell, results_dir=str(out / "runs"), executor=task.get("executor"))
    names = cfg["learners"]["names"]
    oracles = [n for n in names if n not in rc["learners"].split(",")]
    from ..federation import Pool, ReleaseStrategy, build_population, load_run_config
    from ..federation.strategy import make_executor

    try:
        full = load_run_config(rc)
        population = build_population(full)
    except ValidationError as exc:
        raise _as_config_error(exc, cfg) from None
    test = population.test_set()
    executor = make_executor(full["executor"], full["ray-address"])
    if mode == "offline":
        from ..federation.client_app import offline_release

        t0 = time.perf_counter()
        rel = offline_release(population, full["seed"])
        dropped = (
            {"dropped_out": population.n_clients - len(rel.client_id)}
            if population.n_clients > len(rel.client_id)
            else {}
        )
        pool = Pool.from_releases([rel], dropped)
        seconds_collect = time.perf_counter() - t0
        if pool.n < full["min-valid"]:
            raise FedrrError(f"cell {cell.key}: only {pool.n} valid releases (run.min_valid = {full['min-valid']})")
        strategy = ReleaseStrategy(
            full["learners"],
            C=full["C"],
            executor=executor,
            random_state=full["seed"],
            spread_max_iter=full["spread-max-iter"],
            wdro_max_iter=full["wdro-max-iter"],
        )
        learners: dict[str, dict] = {}
        for name in strategy.learners:
            entry: dict[str, Any] = {}
            try:
                res = strategy.fit(name, pool)
                entry["seconds"] = res.seconds
                if test is not None:
                    entry["accuracy"] = float(res.estimator.score(*test))
            except (FedrrError, ValueError, ArithmeticError) as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"
            learners[name] = entry
        n_releases = pool.n
    else:
        from ..federation import run_federation

        if full["ray-address"]:
            os.environ["RAY_ADDRESS"] = full["ray-address"]
        t0 = time.perf_counter()
        metrics = run_federation(full)
        seconds_collect = float(metrics.get("seconds_collect", time.perf_counter() - t0))
        pool = Pool.load(out / "runs" / cell.key / "pool.npz")
        learners = {
            n: {k: v for k, v in metrics["learners"][n].items() if k in ("accuracy", "seconds", "error")}
            for n in metrics["learners"]
        }
        dropped = dict(metrics.get("dropped") or {})
        n_releases = int(metrics["n_releases"])
    learners.update(
        _oracle_fits(oracles, population, pool, test, full["C"], executor, full["seed"], full["spread-max-iter"])
    )
    params = privacy_params(cfg, cell.g)
    record = {
        "scenario": cfg.name,
        "cell": cell.key,
        "g": cell.g,
        "n": cell.n,
        "r": cell.r,
        "fingerprint": cell_fingerprint(cfg, cell),
        "seed": full["seed"],
        "mode": mode,
        "grid_axis": cfg.grid_key or "population",
        "grid_value": cfg.grid[cell.g] if cfg.grid_key else None,
        "params": {
            "mechanism": params["mechanism"],
            "feature_flip": params["feature-flip"] or None,
            "feature_epsilon": params["feature-epsilon"] or None,
            "label_flip": params["label-flip"] or None,
            "label_epsilon": params["label-epsilon"] or None,
            "requested_eps_record": params.get("requested_eps_record"),
            "text": _mix_text(cfg, params),
        },
        "population": population.describe() if population.n_clients <= 100_000 else {"n_clients": population.n_clients},
        "n_clients": population.n_clients,
        "n_releases": n_releases,
        "dropped": dropped,
        "eps": pool.accounting(),
        "learners": {n: learners.get(n, {"error": "not run"}) for n in names},
        "seconds_collect": seconds_collect,
        "seconds": time.perf_counter() - t_start,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "status": "done",
    }
    write_json(out / "cells" / f"{cell.key}.json", record)
    return record


def _mix_text(cfg: ScenarioConfig, params: dict) -> str | None:
    """The per-field parameters of a budget-mix cell, for the summary table (None otherwise)."""
    mix = cfg["population"]["budget_mix"]
    if not mix:
        return None
    unit = "flip" if params["mechanism"] == "rr" else "ε/feature"
    label = (
        f"label flip {params['label-flip']:.3g}" if params["label-flip"] else f"label ε {params['label-epsilon']:.3g}"
    )
    parts = ", ".join(f"{v:.3g} (weight {w:g})" for v, w in zip(mix["values"], mix["weights"]))
    return f"feature {unit} mix {parts}, {label}"


def _run_regression_cell(cfg, cell: Cell, out: Path, t_start: float) -> dict:
    """A regression cell (Farokhi 2020 setting, offline): see fedrr.simulation.regression."""
    from .regression import run_regression_cell

    params = privacy_params(cfg, cell.g)
    pop = cfg["population"]
    n = cfg.n_grid[cell.n]
    res = run_regression_cell(
        n,
        pop["n_test_per_class"],
        pop["dataset"],
        params,
        list(cfg["learners"]["names"]),
        np.random.SeedSequence(cell_seed(cfg, cell)),
    )
    acc = res["eps"]
    label_txt = "label public" if params["label-public"] else f"label ε {params['label-epsilon']:.3g} (Laplace)"
    noise = f", {params['calibration']} σ {res['sigma']:.3g}" if params["mechanism"] == "gaussian" else ""
    record = {
        "scenario": cfg.name,
        "cell": cell.key,
        "g": cell.g,
        "n": cell.n,
        "r": cell.r,
        "fingerprint": cell_fingerprint(cfg, cell),
        "seed": cell_seed(cfg, cell),
        "mode": "offline",
        "grid_axis": cfg.grid_key,
        "grid_value": cfg.grid[cell.g],
        "metric": "mse",
        "params": {
            "mechanism": params["mechanism"],
            "feature_flip": None,
            "feature_epsilon": None,
            "label_flip": None,
            "label_epsilon": params["label-epsilon"] or None,
            "requested_eps_record": params["requested_eps_record"],
            "calibration": params.get("calibration"),
            "label_public": params["label-public"],
            "sigma": res["sigma"],
            "text": f"input block ε {acc['features']:.3g}{noise}, {label_txt}",
        },
        "population": {
            "dataset": pop["dataset"],
            "task": "regression",
            "n_clients": n,
            "n_test": res["n_test"],
            "p": res["p"],
        },
        "n_clients": n,
        "n_releases": res["n_releases"],
        "dropped": {},
        "eps": {
            **acc,
            "per_feature": None,
            "n_features": res["p"],
            "label": acc["label"] if acc["label"] != "public" else None,
        },
        "learners": res["learners"],
        "seconds_collect": 0.0,
        "seconds": time.perf_counter() - t_start,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "status": "done",
    }
    write_json(out / "cells" / f"{cell.key}.json", record)
    return record


def _run_cell_in_worker(task: dict) -> dict:
    """run_cell in a worker process, with any error turned into one that pickles intact."""
    try:
        return run_cell(task)
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


def _run_cells_on_ray(tasks: dict[str, dict], n_workers: int, address: str, done: Callable) -> None:
    """Cells as Ray tasks (one CPU each), reported to ``done`` as each finishes. Starts a local
    Ray of ``n_workers`` CPUs, or joins the cluster at ``address`` / RAY_ADDRESS (then every
    node must have fedrr installed); a Ray this call started is stopped at the end."""
    import ray

    from ..parallel.ray_executor import init_ray

    started = init_ray(address or None, n_workers)
    try:
        remote = ray.remote(num_cpus=1, max_retries=2)(_run_cell_on_ray)
        refs = {remote.remote(t): k for k, t in tasks.items()}
        pending = list(refs)
        try:
            while pending:
                finished, pending = ray.wait(pending, num_returns=1)
                for ref in finished:
                    try:
                        rec = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:  # the cell's own error
                        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
                        if isinstance(cause, ValidationError):
                            raise cause from None
                        done(refs[ref], None, cause)
                    except ray.exceptions.RayError as exc:  # its worker died after every retry
                        done(refs[ref], None, exc)
                    else:
                        done(refs[ref], rec, None)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()


# ------------------------------------------------------------------------------- manifest
def _git_commit() -> dict:
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


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("fedrr", "flwr", "ray", "numpy", "scipy", "scikit-learn", "matplotlib"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def manifest(cfg: ScenarioConfig, argv: list[str] | None = None) -> dict:
    return {
        "scenario": cfg.name,
        "config_path": cfg.path,
        "config": cfg.as_dict(),
        "config_text": cfg.text,
        "grid_axis": cfg.grid_key or "population",
        "seed": cfg["scenario"]["seed"],
        "cell_seeds": "numpy.random.SeedSequence(scenario.seed, spawn_key=(grid index, N index, repeat))",
        "versions": _versions(),
        "git": _git_commit(),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "hostname": platform.node(),
        },
        "command": argv if argv is not None else sys.argv,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


# ---------------------------------------------------------------------------------- sweeps
@dataclass
class SweepResult:
    out: Path
    computed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def is_done(cfg: ScenarioConfig, cell: Cell, out: Path) -> bool:
    p = out / "cells" / f"{cell.key}.json"
    if not p.exists():
        return False
    try:
        rec = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return rec.get("status") == "done" and rec.get("fingerprint") == cell_fingerprint(cfg, cell)


def preflight(cfg: ScenarioConfig) -> None:
    """Checks that need the dataset (mechanism vs feature types, test split size, ε too small or
    large for a flip probability), before any cell starts."""
    for g in range(max(len(cfg.grid), 1)):
        privacy_params(cfg, g)
    if cfg["population"]["task"] == "regression":
        from .regression import load_regression_data

        N = load_regression_data(cfg["population"]["dataset"])[0].shape[0]
        need = max(cfg.n_grid) + cfg["population"]["n_test_per_class"]
        if need > N:
            raise ValidationError(
                "population.n_clients",
                f"{max(cfg.n_grid)} clients + {cfg['population']['n_test_per_class']} "
                f"test rows (n_test_per_class) exceed the {N} rows of {cfg['population']['dataset']!r}",
            )
        return
    if cfg.is_dataset:
        from ..federation.population import dataset_population_from_config

        rc = cell_run_config(cfg, Cell(0, 0, 0))
        try:
            pop = dataset_population_from_config(rc)
            pop.test_set()
        except ValidationError as exc:
            raise _as_config_error(exc, cfg) from None


def sweep(
    cfg: ScenarioConfig,
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
    preflight(cfg)
    (out / "cells").mkdir(parents=True, exist_ok=True)
    for stale in (out / "cells").glob(".*.tmp"):  # a write cut short by a kill: never a finished cell
        stale.unlink(missing_ok=True)
    man_path = out / "manifest.json"
    man = manifest(cfg, argv)
    if man_path.exists():
        try:
            old = json.loads(man_path.read_text())
            man["first_started_at"] = old.get("first_started_at", old.get("started_at"))
        except (OSError, json.JSONDecodeError):
            pass
    write_json(man_path, man)
    all_cells = cells(cfg, grid_indices)
    res = SweepResult(out)
    todo = []
    for c in all_cells:
        if is_done(cfg, c, out):
            res.skipped.append(c.key)
        else:
            todo.append(c)
    if res.skipped:
        log(f"[fedrr] {len(res.skipped)} of {len(all_cells)} cells already finished in {out}/cells (skipped)")
    mode = cfg["run"]["mode"]
    n_workers = workers if workers is not None else (cfg["run"]["workers"] or os.cpu_count() or 1)
    n_workers = max(1, min(n_workers, len(todo))) if mode == "offline" else 1
    executor = "serial" if n_workers > 1 else None
    tasks = {
        c.key: {"config": cfg.as_dict(), "cell": (c.g, c.n, c.r), "out": str(out), "executor": executor} for c in todo
    }
    bar = tqdm(
        total=len(all_cells),
        initial=len(res.skipped),
        desc=f"{cfg.name} cells",
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
        metric = rec.get("metric", "accuracy")
        accs = ", ".join(f"{n} {e[metric]:.4g}" if metric in e else f"{n} error" for n, e in rec["learners"].items())
        bar.write(
            f"[fedrr] cell {key}: ε_record {rec['eps']['record']:.4g}, N {rec['n_clients']}: {accs} ({rec['seconds']:.0f} s)"
        )

    parallel = parallel if parallel is not None else cfg["run"]["parallel"]
    if parallel not in ("ray", "processes"):
        raise ValidationError("run.parallel", f"must be 'ray' or 'processes', got {parallel!r}")
    try:
        if n_workers > 1 and parallel == "ray":
            _run_cells_on_ray(tasks, n_workers, cfg["run"]["ray_address"], done)
        elif n_workers > 1:
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
        else:
            for key, t in tasks.items():
                try:
                    rec = run_cell(t)
                except ValidationError:
                    raise
                except Exception as exc:  # one failed cell must not lose the others
                    done(key, None, exc)
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
