"""The server's training strategy: fits fedrr's scikit-learn estimators on a pool of releases.
It wraps the estimators (it does not re-implement them) and hands spread-EM's per-record E-step
to an executor — serial, threads, or Ray (a local instance, the simulation's own Ray, or a
cluster at ``RAY_ADDRESS``) — with results identical for a seed whatever runs it."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..estimators import NaiveLogisticRegression, SpreadLogisticRegression, WassersteinDROLogisticRegression
from ..estimators.dro_radius import noise_radius
from ..mechanisms import RecordMechanism
from ..parallel import SerialExecutor, ThreadExecutor
from .config import LEARNERS  # one list: the run config is checked against it before anything runs
from .pool import Pool


def parse_learners(spec: str | list[str]) -> list[str]:
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    names = [n for n in names if n]
    bad = [n for n in names if n not in LEARNERS]
    if not names or bad:
        raise ValidationError("learners", f"must be a comma list of {LEARNERS}, got {spec!r}")
    return names


def make_executor(kind: str, ray_address: str = "") -> Any:
    """serial | threads | ray. Inside a Flower simulation Ray is already up and its actors hold the
    CPUs, so Ray tasks ask for no CPU there (else they could never be scheduled)."""
    if kind == "serial":
        return SerialExecutor()
    if kind == "threads":
        return ThreadExecutor()
    if kind == "ray":
        import ray

        from ..parallel import RayExecutor

        if ray.is_initialized():
            return RayExecutor(cpus_per_task=0)
        return RayExecutor(address=ray_address or None)
    raise ValidationError("executor", f"must be 'serial', 'threads' or 'ray', got {kind!r}")


def _features_only(m: RecordMechanism) -> RecordMechanism:
    spec = m.to_spec()
    spec["label"] = None
    return RecordMechanism.from_spec(spec)


@dataclass
class FitResult:
    name: str
    estimator: Any
    seconds: float


class ReleaseStrategy:
    """Trains each named learner on a pool. ``C`` is the L2 penalty (scikit-learn's meaning),
    ``random_state`` seeds spread-EM, ``executor`` runs its E-step shards, ``wdro_max_iter`` caps
    W-DRO's solver (0: its default; a solve that does not converge raises ConvergenceError)."""

    def __init__(
        self,
        learners: str | list[str] = "spread,naive",
        *,
        C: float = 1.0,
        executor: Any = None,
        random_state: int = 0,
        spread_max_iter: int = 200,
        wdro_max_iter: int = 0,
    ):
        self.learners = parse_learners(learners)
        self.C = C
        self.executor = executor if executor is not None else SerialExecutor()
        self.random_state = random_state
        self.spread_max_iter = spread_max_iter
        self.wdro_max_iter = wdro_max_iter

    def estimator(self, name: str, pool: Pool) -> Any:
        if name in ("spread", "spread-flat"):
            return SpreadLogisticRegression(
                C=self.C,
                prior="learned" if name == "spread" else "flat",
                executor=self.executor,
                random_state=self.random_state,
                max_iter=self.spread_max_iter,
            )
        if name in ("naive", "naive-cv"):
            return NaiveLogisticRegression(C=self.C, cv=5 if name == "naive-cv" else None)
        if name == "wdro":
            # ρ = √E‖w‖² of the pool's noise: the root mean square over records of each one's own noise
            radii = {id(m): noise_radius(_features_only(m), pool.X.shape[1]) for m in pool.mechanisms}
            rho = math.sqrt(float(np.mean([radii[id(m)] ** 2 for m in pool.mechanisms])))
            return WassersteinDROLogisticRegression(
                rho=rho, solver_options={"max_iter": int(self.wdro_max_iter)} if self.wdro_max_iter else None
            )
        raise ValidationError("learners", f"unknown learner {name!r}")

    def fit(self, name: str, pool: Pool) -> FitResult:
        est = self.estimator(name, pool)
        t0 = time.perf_counter()
        if name == "wdro":
            est.fit(np.asarray(pool.X, float), pool.y)
        else:
            est.fit(pool.X, pool.y, mechanism=pool.mechanism_arg())
        return FitResult(name, est, time.perf_counter() - t0)

    def __repr__(self) -> str:
        return f"ReleaseStrategy(learners={self.learners}, C={self.C}, executor={self.executor!r})"
