"""The one learner registry: a learner's name -> how to build and fit its estimator, and one
``fit_and_score`` that sweeps, the federation's ServerApp and scripts all use.

Names follow one scheme (lower case, dashes). Learners fit on the releases only; ``oracle``
learners (``clean``, ``clean-nb``, ``spread-true``) see clean training data and sit outside the federation, as
references. Estimator classes are imported when a learner is built, so that importing this
package (the run config does, to check learner names) stays cheap for the ClientApp.

The modules are private (``_name.py``): ``_registry`` (the registry, what a learner is fitted on, the
checks of names), ``_accepts`` (what a learner accepts of a mechanism and reads of it),
``_classification`` and ``_regression`` (the learners, registered when this package is imported) and
``_scoring`` (fit and score); the names below are the package's public surface."""

from __future__ import annotations

from . import _classification, _regression  # noqa: F401  (importing them registers their learners, in this order)
from ._accepts import decode_paired, record_domain, release_prior
from ._registry import (
    TASKS,
    TRIPLE_LEARNERS,
    FitData,
    FitOptions,
    Learner,
    check_accepts,
    check_names,
    get,
    names,
)
from ._scoring import (
    LEARNER_ERRORS,
    Scored,
    classification_scores,
    fallback_note,
    fit_and_score,
    score_text,
)

__all__ = [
    "TASKS",
    "FitData",
    "FitOptions",
    "Learner",
    "TRIPLE_LEARNERS",
    "names",
    "get",
    "check_names",
    "check_accepts",
    "record_domain",
    "decode_paired",
    "release_prior",
    "Scored",
    "LEARNER_ERRORS",
    "classification_scores",
    "fallback_note",
    "score_text",
    "fit_and_score",
]
