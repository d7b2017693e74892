"""Server-side estimators: they see releases and mechanisms, never clean data.

The modules are private (``_name.py``, as in ``spread``); the names below are the public surface,
LDP-SGD's server pieces included (its Flower server in ``fedrr.federation`` uses them; the clients'
side is ``fedrr.gradient_release``). The names are imported on first use (``fedrr._lazy``), so that a light
submodule (a Ray actor's) imports without scikit-learn or cvxpy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

#: public name -> the module that defines it (imported on first access)
_HOMES = {
    "MajorityClassifier": "._baselines",
    "NaiveLogisticRegression": "._baselines",
    "naive_inputs": "._baselines",
    "GaussianDROLinearRegression": "._dro",
    "WassersteinDROLogisticRegression": "._dro_logistic",
    "WassersteinDRORegression": "._dro",
    "WassersteinDROLogisticRegressionCV": "._dro_cv",
    "noise_radius": "._dro_radius",
    "wasserstein_radius": "._dro_radius",
    "estimate_frequencies": "._frequencies",
    "project_to_simplex": "._frequencies",
    "warner_estimate": "._frequencies",
    "LDPSGDClassifier": "._ldp_sgd",
    "LDPSGDServer": "._ldp_sgd",
    "make_server": "._ldp_sgd",
    "ldp_sgd_design": "._ldp_sgd_design",
    "LDPNaiveBayes": "._naive_bayes",
    "joint_frequencies": "._naive_bayes",
    "ReconstructionLogisticRegression": ".spread",
    "SpreadLogisticRegression": ".spread",
    "SpreadLogisticRegressionCV": ".spread",
}

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
    "naive_inputs",
    "MajorityClassifier",
    "ReconstructionLogisticRegression",
    "WassersteinDRORegression",
    "WassersteinDROLogisticRegression",
    "WassersteinDROLogisticRegressionCV",
    "GaussianDROLinearRegression",
    "noise_radius",
    "wasserstein_radius",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())

if TYPE_CHECKING:  # for static tools (type checkers, the API docs): the same names, eagerly
    from ._baselines import MajorityClassifier, NaiveLogisticRegression, naive_inputs
    from ._dro import GaussianDROLinearRegression, WassersteinDRORegression
    from ._dro_cv import WassersteinDROLogisticRegressionCV
    from ._dro_logistic import WassersteinDROLogisticRegression
    from ._dro_radius import noise_radius, wasserstein_radius
    from ._frequencies import estimate_frequencies, project_to_simplex, warner_estimate
    from ._ldp_sgd import LDPSGDClassifier, LDPSGDServer, make_server
    from ._ldp_sgd_design import ldp_sgd_design
    from ._naive_bayes import LDPNaiveBayes, joint_frequencies
    from .spread import ReconstructionLogisticRegression, SpreadLogisticRegression, SpreadLogisticRegressionCV
