"""Spread-EM (Barber 2020 §5): logistic regression fitted from locally-private releases only, by
Monte Carlo EM over the unreleased clean records, learning the input prior on the way.

The package is cut along the algorithm's seams (as ``sklearn.mixture``): ``_estimator`` (the
estimator, one fit path over one shard source: arrays in memory or a pool on disk), ``_design``
(model inputs of clean states), ``_estep`` (a shard of records and its chains: the E-step),
``_kernels`` (the compiled E-step), ``_mstep`` (the M-step's objective), ``_em`` (the iterations),
``_priors`` (the input priors, each with its tables and sampler), ``_prior_setup`` (which prior a
fit starts from, shared by a CV's fits), ``_paired`` (paired releases),
``_pool`` (shards read from a pool directory), ``_cv`` (the cross-validated estimator: its
parameters and its one sequence), ``_cv_select`` (the candidates' held-out scores and the rule that
chooses C), ``_cv_fallback`` (the fallback's held-out permutation test), ``_cv_paired`` (the paired
independence test), ``_reconstruction`` (reconstruct-then-learn, spread-EM's one-step
baseline) and ``_runtime`` (groups of shards in this process or in Ray actors, ``ShardGroup``).

Besides the estimators, the names the other estimators share (``fedrr.estimators._baselines``):
the model inputs of clean states (``Design``, ``ColumnLayout``, ``ENCODINGS``), the check of clean
records for ``predict`` (``check_clean_X``), the debiased class frequencies (``class_freqs``) and the
per-record mechanisms grouped (``group_records``). The names are imported on first use
(``fedrr._lazy``), so that a light submodule (a Ray actor's) imports without scikit-learn or cvxpy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

#: public name -> the module that defines it (imported on first access)
_HOMES = {
    "SpreadLogisticRegressionCV": "._cv",
    "independence_terms": "._cv_paired",
    "independence_test": "._cv_paired",
    "class_freqs": "._cv_scores",
    "ENCODINGS": "._design",
    "ColumnLayout": "._design",
    "Design": "._design",
    "SpreadLogisticRegression": "._estimator",
    "auto_prior": "._prior_setup",
    "pairwise_rows": "._priors._pairwise",
    "check_clean_X": "._estimator",
    "group_records": "._pool",
    "ReconstructionLogisticRegression": "._reconstruction",
    "ShardGroup": "._runtime",
    "TwoPairLikelihood": "._direct",
    "shard_group": "._runtime",
}

__all__ = [
    "ENCODINGS",
    "ColumnLayout",
    "Design",
    "ReconstructionLogisticRegression",
    "ShardGroup",
    "SpreadLogisticRegression",
    "SpreadLogisticRegressionCV",
    "TwoPairLikelihood",
    "auto_prior",
    "check_clean_X",
    "class_freqs",
    "group_records",
    "independence_terms",
    "independence_test",
    "pairwise_rows",
    "shard_group",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())

if TYPE_CHECKING:  # for static tools (type checkers, the API docs): the same names, eagerly
    from ._cv import SpreadLogisticRegressionCV
    from ._cv_paired import independence_terms, independence_test
    from ._cv_scores import class_freqs
    from ._design import ENCODINGS, ColumnLayout, Design
    from ._direct import TwoPairLikelihood
    from ._estimator import SpreadLogisticRegression, check_clean_X
    from ._pool import group_records
    from ._prior_setup import auto_prior
    from ._priors._pairwise import pairwise_rows
    from ._reconstruction import ReconstructionLogisticRegression
    from ._runtime import ShardGroup, shard_group
