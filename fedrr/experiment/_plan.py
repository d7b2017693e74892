"""``fedrr plan``: the release planner (``plan_release``) for a scenario's population or for a schema given
on the command line, with what to expect of each design and what reaches a target error."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ValidationError
from ..mechanisms import DiscreteMechanism, is_record_mechanism
from ..planning import DEFAULT_DEPENDENCE, EPSILON_SEARCH, ReleasePlan, plan_release, predicted_variance
from ..population import ClientPopulation

#: plan_release's argument names -> the command's options (errors name what the user typed)
_OPTIONS = {"n_states": "--states", "n_classes": "--classes", "epsilon": "--epsilon", "n_records": "--n"}
_OPTIONS |= {"target": "--target", "dependence": "--dependence"}


def population_schema(pop: ClientPopulation) -> tuple[list[int], int]:
    """(k_j of every attribute, C) of a population, read from client 0's record mechanism: every
    population builds its mechanisms from its public schema (a dataset's, a table's or a custom one's),
    so this is the schema its clients release under."""
    mech = pop.mechanism(0)
    if not is_record_mechanism(mech):
        raise ValidationError("population", f"client 0's mechanism is a {type(mech).__name__}, not a record mechanism")
    mech = mech.domain_record()  # the clean domain: a split record is its own, a paired one's is built
    ks = []
    for j in range(mech.n_features):
        m = mech.mechanism_for(j)
        if not isinstance(m, DiscreteMechanism):
            raise ValidationError(
                "privacy.mechanism",
                f"fedrr plan plans releases of discrete attributes; attribute {j} is numeric here "
                f"({type(m).__name__}): use a dataset with declared bins (e.g. adult_binned)",
            )
        ks.append(m.k)
    if not isinstance(mech.label, DiscreteMechanism):
        raise ValidationError("privacy.mechanism", "fedrr plan needs a discrete label (a classification population)")
    return ks, mech.label.k


def mechanisms_by_epsilon(pop: ClientPopulation, first: int = 1000) -> dict[float, object]:
    """The record mechanism of each distinct whole-release ε among the population's first clients
    (several with a budget mix), ε rounded to 6 digits as in the population's manifest."""
    out: dict[float, object] = {}
    for i in range(min(pop.n_clients, first)):
        m = pop.mechanism(i)
        out.setdefault(round(m.epsilon, 6), m)
    return dict(sorted(out.items()))


def plan(
    n_states: Sequence[int],
    n_classes: int,
    epsilon: float,
    n_records: int,
    target: float,
    dependence: str = DEFAULT_DEPENDENCE,
) -> ReleasePlan:
    """``plan_release`` whose errors name the command's options."""
    try:
        return plan_release(n_states, n_classes, epsilon, n_records, target=target, dependence=dependence)
    except ValidationError as exc:
        raise ValidationError(_OPTIONS.get(exc.field, exc.field), exc.message) from None


def parse_states(text: str) -> list[int]:
    """``--states 5,5,3``: one k ≥ 2 per attribute."""
    try:
        ks = [int(t) for t in text.split(",")]
    except ValueError:
        ks = []
    if not ks or any(k < 2 for k in ks):
        raise ValidationError("--states", f"must be comma-separated integers >= 2 (k of each attribute), got {text!r}")
    return ks


def scenario_plans(
    path: str, epsilon: float | None, n: int | None, target: float, dependence: str = DEFAULT_DEPENDENCE
) -> tuple[str, list[tuple[ReleasePlan, str | None]]]:
    """The plans of a scenario: its population's schema, at every ε of its grid (or ``epsilon``) and
    each of its n_clients (or ``n``). Returns a header line and, per plan, a line comparing the
    scenario's own mechanism when it is not the planned one (None otherwise)."""
    from ..assembly import build_population
    from ._cells import CellSpec
    from ._runner import as_config_error
    from ._spec import load_scenario
    from ._sweep import preflight

    spec = load_scenario(path)
    if spec.task != "classification":
        raise ValidationError("population.task", f"fedrr plan plans classification releases, got {spec.task!r}")
    preflight(spec)  # what `fedrr check` checks: the population builds and client 0 has a mechanism
    grid = [0] if epsilon is not None else range(max(len(spec.grid), 1))
    pops = []
    for g in grid:
        cell = CellSpec(spec, g, 0, 0)
        try:
            pops.append(build_population(cell.run_config()))
        except ValidationError as exc:
            raise as_config_error(exc, cell) from None
    ks, C = population_schema(pops[0])
    if epsilon is not None:
        by_eps = {epsilon: None}
        eps_from = "--epsilon"
    else:
        by_eps = {e: m for p in pops for e, m in mechanisms_by_epsilon(p).items()}
        eps_from = f"privacy.{spec.grid_axis}" if spec.grid_axis else "the population's budgets"
        if not spec.grid_axis and len(by_eps) > 1:
            eps_from += " (a budget mix: each ε planned as if all n people had it)"
    ns = [n] if n is not None else list(spec.n_grid)
    header = (
        f"Scenario {spec.name!r} ({path}): F = {len(ks)} attributes (k = {', '.join(map(str, ks))}), C = {C} "
        f"classes, from client 0's record mechanism; ε per person's whole release from {eps_from}; "
        f"n from {'--n' if n is not None else 'population.n_clients'}."
    )
    out = []
    for e, mech in by_eps.items():
        for nn in ns:
            p = plan(ks, C, e, nn, target, dependence)
            out.append((p, None if mech is None else _own_mechanism_line(p, mech)))
    return header, out


def _own_mechanism_line(plan: ReleasePlan, mech) -> str | None:
    """How the scenario's own mechanism compares with the plan's (None if it is the plan's, or if the
    planner cannot predict it, e.g. a numeric or whole-record-RR release)."""
    if mech.to_spec() == plan.mechanism.to_spec():
        return None
    try:
        own = predicted_variance(mech, plan.n_records, reference=plan.reference_tables)
    except ValidationError:
        return None
    r = plan.relative_errors(own)[1]
    return (
        f"This scenario's own mechanism at ε = {plan.epsilon:g} ({own.name()}, {own.oracle_summary()}): error "
        f"{plan.percent(r)} of a cell, {own.score / plan.best.score:.2f}× the plan's total variance "
        "(mechanism = 'auto' releases with the plan)."
    )


def summary(plans: Sequence[ReleasePlan]) -> str:
    """One line per plan: the chosen design, its relative error, and what reaches the target."""
    t = plans[0].target
    lines = [
        f"Summary (target: RMS error ≤ {100 * t:.3g} % of a cell):",
        f"  {'ε':>6} {'n':>10}  {'chosen':<22} {'rel err':>8}  {'people needed':>13}  {'ε needed at n':>13}",
    ]
    for p in plans:
        e = p.epsilon_needed_
        flag = "  too few people" if p.too_few_people_ else ""
        lines.append(
            f"  {p.epsilon:>6g} {p.n_records:>10,}  {p.best.name():<22} {p.relative_error_:>8.3g}  "
            f"{p.n_needed_:>13,}  {f'none ≤ {EPSILON_SEARCH[1]:g}' if e is None else f'{e:g}':>13}{flag}"
        )
    return "\n".join(lines)
