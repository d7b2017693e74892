"""The regression learners (least squares, ridge, the W-DRO regressions, the mean, the clean oracle):
the regression scenarios' registry entries."""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ._registry import FitData, FitOptions, _learner


@_learner("regression", "ls", "least squares on the noisy inputs (= W-DRO with ρ = 0)")
def _ls(d: FitData, o: FitOptions):
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit(d.X, d.y)


@_learner("regression", "ridge-cv", "ridge, α tuned by leave-one-out CV on the noisy data")
def _ridge_cv(d: FitData, o: FitOptions):
    from sklearn.linear_model import RidgeCV

    return RidgeCV(alphas=np.logspace(-4, 6, 21)).fit(d.X, d.y)


@_learner("regression", "wdro", "Wasserstein-DRO regression, Lipschitz regulariser (Farokhi 2020 eq 8)")
def _wdro_reg(d: FitData, o: FitOptions):
    from ..estimators import WassersteinDRORegression

    # W-DRO's Lipschitz constant needs target bounds: [0, 1] for clean targets; Laplace-noised
    # targets leave [0, 1], so their observed range is the bound (ρ still covers the inputs' noise only)
    bounds = dict(y_lower=None, y_upper=None) if d.label_noised else dict(y_lower=0.0, y_upper=1.0)
    return WassersteinDRORegression(rho="auto", mechanism=d.feature_mechanism, **bounds).fit(d.X, d.y)


@_learner("regression", "gauss-dro", "Gaussian-optimal W-DRO linear regression (Farokhi 2020 Thm 6)")
def _gauss_dro(d: FitData, o: FitOptions):
    from ..estimators import GaussianDROLinearRegression

    if getattr(d.feature_mechanism, "kind", None) != "gaussian":
        raise ValidationError(
            "learners", "'gauss-dro' is the Gaussian-optimal W-DRO (Thm 6): it needs mechanism 'gaussian'"
        )
    return GaussianDROLinearRegression(rho="auto", mechanism=d.feature_mechanism).fit(d.X, d.y)


@_learner("regression", "mean", "predict the training mean of the (released) target")
def _mean(d: FitData, o: FitOptions):
    from sklearn.dummy import DummyRegressor

    return DummyRegressor(strategy="mean").fit(d.X, d.y)


@_learner("regression", "clean", "least squares on the clean records of the same clients (oracle)", oracle=True)
def _clean_reg(d: FitData, o: FitOptions):
    from sklearn.linear_model import LinearRegression

    return LinearRegression().fit(d.clean_X, d.clean_y)
