"""Local randomisers: each is the client's sampler, the server's likelihood and its own ε.

The modules are private (``_name.py``); the names below are the package's public surface."""

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
from ._oracles import frequency_oracle, unbiased_onehot_covariance
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
from ._unary import UnaryEncoding

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
    "LaplaceMechanism",
    "GaussianMechanism",
    "PiecewiseMechanism",
    "DuchiMechanism",
    "RecordRelease",
    "RecordMechanism",
    "PairedRecordMechanism",
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
]

#: names that moved to ``fedrr.planning`` (the planner is a policy over the mechanisms, not one of them)
_MOVED = ("plan_release", "ReleasePlan", "predicted_variance")


def __getattr__(name: str):
    """``fedrr.mechanisms.plan_release`` and the planner's other names, kept importable from here for
    code written before they moved to ``fedrr.planning``."""
    if name in _MOVED:
        from .. import planning

        return getattr(planning, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
