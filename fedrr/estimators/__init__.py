"""Server-side estimators: they see releases and mechanisms, never clean data.

The modules are private (``_name.py``, as in ``spread``); the names below are the public surface,
LDP-SGD's server pieces included (its Flower server in ``fedrr.federation`` uses them; the clients'
side is ``fedrr.gradient_release``)."""

from ._baselines import MajorityClassifier, NaiveLogisticRegression
from ._dro import GaussianDROLinearRegression, WassersteinDROLogisticRegression, WassersteinDRORegression
from ._dro_cv import WassersteinDROLogisticRegressionCV
from ._dro_radius import noise_radius, wasserstein_radius
from ._frequencies import estimate_frequencies, project_to_simplex, warner_estimate
from ._ldp_sgd import LDPSGDClassifier, LDPSGDServer, make_server
from ._ldp_sgd_design import ldp_sgd_design
from ._naive_bayes import LDPNaiveBayes, joint_frequencies
from .spread import ReconstructionLogisticRegression, SpreadLogisticRegression, SpreadLogisticRegressionCV

__all__ = [
    "estimate_frequencies",
    "project_to_simplex",
    "warner_estimate",
    "SpreadLogisticRegression",
    "SpreadLogisticRegressionCV",
    "LDPNaiveBayes",
    "LDPSGDClassifier",
    "LDPSGDServer",
    "make_server",
    "ldp_sgd_design",
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
