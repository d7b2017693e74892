"""Spread-EM's input priors p(x): factorised (``_factorised``: per column, learned, flat or given),
the naive-Bayes and latent-class mixtures (``_mixture``) and the joint prior of public clean rows (``_joint``). Each
owns its parameters, the statistics it is re-estimated from, and its sampler's tables."""

from ._factorised import SpreadPrior, flat_prior, given_prior, marginal_mle_prior
from ._joint import JointSpreadPrior, PatternSampler, joint_prior
from ._mixture import MixtureSpreadPrior, latent_class_prior, naive_bayes_prior

__all__ = [
    "JointSpreadPrior",
    "MixtureSpreadPrior",
    "PatternSampler",
    "SpreadPrior",
    "flat_prior",
    "given_prior",
    "joint_prior",
    "latent_class_prior",
    "marginal_mle_prior",
    "naive_bayes_prior",
]
