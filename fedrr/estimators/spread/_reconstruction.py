"""Reconstruct-then-learn (Barber §4.3): spread-EM's pieces (the prior, one importance-sampling
E-step, one M-step) run once, as a baseline that is not consistent in general."""

from __future__ import annotations

from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from ..._params import seed_from
from ...parallel import SerialExecutor
from ._design import Design
from ._estep import shard_factories
from ._estimator import SpreadLogisticRegression
from ._mstep import ChainObjective
from ._prior_setup import initial_prior
from ._runtime import shard_group


class ReconstructionLogisticRegression(SpreadLogisticRegression):
    """Reconstruct-then-learn (Barber §4.3, eq 36–37): draw clean-data guesses from the
    prior-only posterior p(x | x̃) ∝ p(x̃ | x) p(x) and p(c | c̃) ∝ p(c̃ | c) (flat class prior),
    then fit logistic regression to them once. Not consistent in general (Fig 1)."""

    def __init__(  # noqa: PLR0913  sklearn estimator: parameters stored unchanged
        self,
        C: float = 1.0,
        *,
        prior: Any = "learned",
        n_samples: int | None = 10,
        encoding: str = "unit",
        numeric_prior: str = "gaussian",
        n_bins: int = 10,
        fit_intercept: bool = True,
        executor: Any = None,
        shard_size: int = 2048,
        random_state: Any = None,
        mechanism: Any = None,
    ):
        super().__init__(
            C,
            prior=prior,
            n_samples=n_samples,
            encoding=encoding,
            numeric_prior=numeric_prior,
            n_bins=n_bins,
            fit_intercept=fit_intercept,
            executor=executor,
            shard_size=shard_size,
            random_state=random_state,
            mechanism=mechanism,
        )

    def _fit_noisy(self, X, y, mechanism, p, memo=None, auto=False):  # memo: nothing shared; auto: the rule only
        with threadpool_limits(limits=1, user_api="blas"):
            Xv, yi, groups, layout = self._prepare(X, y, mechanism, p)
            C = len(self.classes_)
            design = Design(layout, p["encoding"])
            prior = initial_prior(
                layout, [(rm, Xv[rows]) for rm, rows in groups], {**p, "prior_strength": 0.0}, Xv.shape[0]
            )
            entropy = seed_from(p["random_state"])
            factories = shard_factories(groups, Xv, yi, design, C, entropy, 1, "importance", p["shard_size"])
            executor = p["executor"] if p["executor"] is not None else SerialExecutor()
            group = shard_group(executor, factories)
            try:
                rows_n = 1 if C == 2 else C
                group.call("set_prior", 0, prior)
                group.call("estep", 0, 0, np.zeros((rows_n, design.n_inputs)), np.zeros(rows_n), p["n_samples"] or 10)
                prob = ChainObjective(group, 0, rows_n, design.n_inputs, p["C"], p["fit_intercept"])
                res = prob.mstep(np.zeros(rows_n * design.n_inputs + (rows_n if p["fit_intercept"] else 0)), 1000)
            finally:
                group.close()
        self.design_, self.layout_, self.n_features_in_ = design, layout, layout.n_features
        self.coef_, self.intercept_ = prob.unpack(res.x)
        self.n_iter_, self.history_ = 1, [{"iter": 1, "objective": float(res.fun)}]
        self.prior_ = prior.public()
        return self
