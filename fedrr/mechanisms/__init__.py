"""Local randomisers: each is the client's sampler, the server's likelihood and its own ε.

The modules are private (``_name.py``); the names below are the package's public surface."""

from ._base import Mechanism, mechanism_from_spec
from ._calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    laplace_scale,
)
from ._discrete import DiscreteMechanism, MatrixMechanism, RandomizedResponse, TransitionMatrix
from ._discrete_posteriors import guide_table
from ._exact_sampling import libm_log
from ._hashing import LocalHashing
from ._numeric import GaussianMechanism, LaplaceMechanism
from ._oracles import frequency_oracle, unbiased_onehot_covariance
from ._paired import PairedRecordMechanism
from ._piecewise import DuchiMechanism, PiecewiseMechanism
from ._planner import DEFAULT_TARGET, EPSILON_SEARCH, TOO_FEW_PEOPLE, ReleasePlan, plan_release, predicted_variance
from ._priors import CategoricalPrior, EmpiricalPrior, GaussianPrior, HistogramPrior
from ._record import RecordMechanism
from ._records import RECORD_MECHANISMS, is_paired, is_record_mechanism, record_mechanism_from_spec
from ._snapping import SnappingLaplaceMechanism, harden
from ._unary import UnaryEncoding

__all__ = [
    "Mechanism",
    "mechanism_from_spec",
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
    "RecordMechanism",
    "PairedRecordMechanism",
    "RECORD_MECHANISMS",
    "is_record_mechanism",
    "is_paired",
    "record_mechanism_from_spec",
    "plan_release",
    "ReleasePlan",
    "predicted_variance",
    "DEFAULT_TARGET",
    "TOO_FEW_PEOPLE",
    "EPSILON_SEARCH",
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
]
