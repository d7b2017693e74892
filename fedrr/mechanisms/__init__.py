"""Local randomisers: each is the client's sampler, the server's likelihood and its own ε."""

from .base import Mechanism, mechanism_from_spec
from .calibration import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    laplace_scale,
)
from .discrete import DiscreteMechanism, RandomizedResponse, TransitionMatrix
from .hashing import LocalHashing
from .numeric import GaussianMechanism, LaplaceMechanism
from .oracles import frequency_oracle
from .paired import PairedRecordMechanism
from .piecewise import DuchiMechanism, PiecewiseMechanism
from .planner import ReleasePlan, plan_release, predicted_variance
from .priors import CategoricalPrior, EmpiricalPrior, GaussianPrior, HistogramPrior
from .record import RecordMechanism
from .records import RECORD_MECHANISMS, is_paired, is_record_mechanism, record_mechanism_from_spec
from .snapping import SnappingLaplaceMechanism, harden
from .unary import UnaryEncoding

__all__ = [
    "Mechanism",
    "mechanism_from_spec",
    "RandomizedResponse",
    "TransitionMatrix",
    "DiscreteMechanism",
    "UnaryEncoding",
    "LocalHashing",
    "frequency_oracle",
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
]
