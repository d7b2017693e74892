"""Server-side estimators: they see releases and mechanisms, never clean data."""

from .baselines import MajorityClassifier, NaiveLogisticRegression, ReconstructionLogisticRegression
from .dro import GaussianDROLinearRegression, WassersteinDROLogisticRegression, WassersteinDRORegression
from .dro_cv import WassersteinDROLogisticRegressionCV
from .dro_radius import noise_radius, wasserstein_radius
from .frequencies import estimate_frequencies, project_to_simplex, warner_estimate
from .ldp_sgd import LDPSGDClassifier
from .naive_bayes import LDPNaiveBayes, joint_frequencies
from .spread import SpreadLogisticRegression, SpreadLogisticRegressionCV

__all__ = [
    "estimate_frequencies",
    "project_to_simplex",
    "warner_estimate",
    "SpreadLogisticRegression",
    "SpreadLogisticRegressionCV",
    "LDPNaiveBayes",
    "LDPSGDClassifier",
    "joint_frequencies",
    "NaiveLogisticRegression",
    "MajorityClassifier",
    "ReconstructionLogisticRegression",
    "WassersteinDRORegression",
    "WassersteinDROLogisticRegression",
    "WassersteinDROLogisticRegressionCV",
    "GaussianDROLinearRegression",
    "noise_radius",
    "wasserstein_radius",
]
