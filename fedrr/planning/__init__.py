"""The release planner: which record design (split, paired or triple, how many attributes, which oracle) a
person should release, scored by the variance the learner is predicted to suffer at the given n. A
policy over the mechanisms, not a mechanism: it builds ``fedrr.mechanisms`` objects and never the
other way round.

The modules are private (``_candidates.py`` scores each design, ``_planner.py`` ranks them and reports
the plan); the names below are the package's public surface."""

from ._candidates import predicted_variance
from ._co_occurrence import DEPENDENCE_TARGET
from ._planner import (
    DEFAULT_DEPENDENCE,
    DEFAULT_TARGET,
    EPSILON_SEARCH,
    LABEL_SHARES,
    TOO_FEW_PEOPLE,
    ReleasePlan,
    plan_release,
)

__all__ = [
    "plan_release",
    "ReleasePlan",
    "predicted_variance",
    "LABEL_SHARES",
    "DEFAULT_TARGET",
    "TOO_FEW_PEOPLE",
    "EPSILON_SEARCH",
    "DEPENDENCE_TARGET",
    "DEFAULT_DEPENDENCE",
]
