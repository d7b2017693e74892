"""Memory a sweep will need, estimated from the config before anything is allocated: a cell that
would not fit is refused with an error naming the knob that drives the estimate, instead of dying
out of memory half-way through a sweep. The estimate counts the arrays that grow with the data
(releases, spread-EM's samples and chain state, the clean test set), not interpreter overhead."""

from __future__ import annotations

import os

from .._resources import available_bytes
from ..errors import ValidationError

#: a cell may use at most this fraction of the memory the machine has available
MEMORY_FRACTION = 0.8
#: spread-EM's samples per record and iteration by default (mcmc)
SPREAD_SAMPLES = 2


def cell_bytes(
    n_clients: int,
    n_features: int,
    n_classes: int,
    learners: tuple[str, ...],
    n_samples: int = SPREAD_SAMPLES,
    n_states: int = 256,
) -> int:
    """Peak bytes of one classification cell: the pool (float64 releases, ids, labels), clean
    records for oracles, and, if a spread learner runs, its S samples per record (float32 model
    inputs), responsibilities, chain state (int32) and prior tables."""
    pool = n_clients * (n_features * 8 + 8 * 3 + 8)
    total = pool + (
        n_clients * n_features * 8 if any(n in ("clean", "clean-nb", "spread-true") for n in learners) else 0
    )
    if any(n.startswith("spread") for n in learners):
        samples = n_clients * n_samples * (n_features * 4 + n_classes * 8 + 8)
        state = n_clients * n_features * 4
        total += samples + state + n_features * n_states * 8 * 4
    if "naive" in learners or "naive-cv" in learners or "clean" in learners:
        total += 2 * n_clients * n_features * 8  # the decoded copy and sklearn's own
    return int(total)


def check_resources(spec, available: int | None = None) -> int:
    """The estimated peak bytes of the scenario's biggest cell times the cells running at once;
    ValidationError naming the driving knob if it exceeds MEMORY_FRACTION of ``available``."""
    if spec.task == "regression":
        return 0
    from ._cells import population_shape

    if spec.is_dataset:
        D, k, C = population_shape(spec)
    else:
        return 0  # a custom population's size is its own business
    n = max(spec.n_grid)
    per_cell = cell_bytes(n, D, C, spec.learners.names, n_states=k or 1)
    workers = 1 if spec.run.mode != "offline" else (spec.run.workers or os.cpu_count() or 1)
    workers = min(workers, len(spec.cells()))
    need = per_cell * workers
    avail = available if available is not None else available_bytes()
    if need > MEMORY_FRACTION * avail:
        knob = "run.workers" if per_cell <= MEMORY_FRACTION * avail else "population.n_clients"
        raise ValidationError(
            knob,
            f"the sweep would need about {need / 2**30:.1f} GiB ({workers} cell(s) at once × "
            f"{per_cell / 2**30:.2f} GiB for N = {n:,} clients × D = {D} features), more than "
            f"{MEMORY_FRACTION:.0%} of the {avail / 2**30:.1f} GiB available; lower {knob}",
        )
    return need
