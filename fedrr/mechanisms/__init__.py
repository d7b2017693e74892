"""Local randomisers: each is the client's sampler, the server's likelihood and its own ε.

The modules are private (``_name.py``); the names below are the package's public surface, imported on first use
(``fedrr._lazy``): a Ray actor's shard imports the discrete mechanisms without scipy's optimisers and distributions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

#: public name -> the module that defines it (imported on first access); the planner's names moved to
#: ``fedrr.planning`` (a policy over the mechanisms, not one of them) and stay importable from here
_HOMES = {
    "ContinuousPosterior": "._base",
    "DiscretePosterior": "._base",
    "Mechanism": "._base",
    "mechanism_from_spec": "._base",
    "analytic_gaussian_delta": "._calibration",
    "analytic_gaussian_epsilon": "._calibration",
    "analytic_gaussian_sigma": "._calibration",
    "classic_gaussian_sigma": "._calibration",
    "laplace_scale": "._calibration",
    "MAX_STATES": "._discrete",
    "DiscreteMechanism": "._discrete",
    "MatrixMechanism": "._discrete",
    "RandomizedResponse": "._discrete",
    "TransitionMatrix": "._discrete",
    "guide_table": "._discrete_posteriors",
    "libm_log": "._exact_sampling",
    "LocalHashing": "._hashing",
    "GaussianMechanism": "._numeric",
    "LaplaceMechanism": "._numeric",
    "frequency_oracle": "._oracles",
    "unbiased_onehot_covariance": "._oracles",
    "onehot_covariance_is_cheap": "._oracles",
    "rare_value_variance": "._oracles",
    "MAX_CLASSES": "._paired",
    "PairedRecordMechanism": "._paired",
    "MAX_TRIPLE_FEATURES": "._triple",
    "TripleRecordMechanism": "._triple",
    "DuchiMechanism": "._piecewise",
    "PiecewiseMechanism": "._piecewise",
    "CategoricalPrior": "._priors",
    "EmpiricalPrior": "._priors",
    "GaussianPrior": "._priors",
    "HistogramPrior": "._priors",
    "MAX_FEATURES": "._record",
    "RECORD_MECHANISMS": "._record",
    "RecordMechanism": "._record",
    "RecordRelease": "._record",
    "is_paired": "._record",
    "is_record_mechanism": "._record",
    "record_mechanism_from_spec": "._record",
    "SnappingLaplaceMechanism": "._snapping",
    "harden": "._snapping",
    "UnaryEncoding": "._unary",
    "plan_release": "..planning",
    "ReleasePlan": "..planning",
    "predicted_variance": "..planning",
}

__all__ = [
    "Mechanism",
    "mechanism_from_spec",
    "DiscretePosterior",
    "ContinuousPosterior",
    "RandomizedResponse",
    "TransitionMatrix",
    "DiscreteMechanism",
    "MatrixMechanism",
    "UnaryEncoding",
    "LocalHashing",
    "frequency_oracle",
    "unbiased_onehot_covariance",
    "onehot_covariance_is_cheap",
    "rare_value_variance",
    "LaplaceMechanism",
    "GaussianMechanism",
    "PiecewiseMechanism",
    "DuchiMechanism",
    "RecordRelease",
    "RecordMechanism",
    "PairedRecordMechanism",
    "TripleRecordMechanism",
    "RECORD_MECHANISMS",
    "is_record_mechanism",
    "is_paired",
    "record_mechanism_from_spec",
    "CategoricalPrior",
    "GaussianPrior",
    "HistogramPrior",
    "EmpiricalPrior",
    "analytic_gaussian_delta",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "laplace_scale",
    "SnappingLaplaceMechanism",
    "harden",
    "libm_log",
    "guide_table",
    "MAX_STATES",
    "MAX_CLASSES",
    "MAX_FEATURES",
    "MAX_TRIPLE_FEATURES",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())

if TYPE_CHECKING:  # for static tools (type checkers, the API docs): the same names, eagerly
    from ._base import ContinuousPosterior, DiscretePosterior, Mechanism, mechanism_from_spec
    from ._calibration import (
        analytic_gaussian_delta,
        analytic_gaussian_epsilon,
        analytic_gaussian_sigma,
        classic_gaussian_sigma,
        laplace_scale,
    )
    from ._discrete import MAX_STATES, DiscreteMechanism, MatrixMechanism, RandomizedResponse, TransitionMatrix
    from ._discrete_posteriors import guide_table
    from ._exact_sampling import libm_log
    from ._hashing import LocalHashing
    from ._numeric import GaussianMechanism, LaplaceMechanism
    from ._oracles import frequency_oracle, onehot_covariance_is_cheap, rare_value_variance, unbiased_onehot_covariance
    from ._paired import MAX_CLASSES, PairedRecordMechanism
    from ._piecewise import DuchiMechanism, PiecewiseMechanism
    from ._priors import CategoricalPrior, EmpiricalPrior, GaussianPrior, HistogramPrior
    from ._record import (
        MAX_FEATURES,
        RECORD_MECHANISMS,
        RecordMechanism,
        RecordRelease,
        is_paired,
        is_record_mechanism,
        record_mechanism_from_spec,
    )
    from ._snapping import SnappingLaplaceMechanism, harden
    from ._triple import MAX_TRIPLE_FEATURES, TripleRecordMechanism
    from ._unary import UnaryEncoding
