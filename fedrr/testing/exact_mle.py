"""Brute-force reference for spread-EM: the exact maximiser of the noisy log-likelihood (Barber
eq 47) for a softmax model over a few discrete features, by enumerating every clean state per
record. Used by the multi-class fixed-point test and ``simulations/multiclass_burn_in.py``."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp


def exact_spread_mle(rm, Xt: np.ndarray, yt: np.ndarray, prior: np.ndarray, n_classes: int) -> np.ndarray:
    """argmax over (coef, intercept) of Σ_i log Σ_x Σ_c p(x̃_i|x) π(x) p_θ(c|x) p(c̃_i|c), model input
    s/(k−1) per state, features released by ``rm``'s first field mechanism, a known product prior
    (D, k): the coefficients (C, D), centred over the classes."""
    D, k = prior.shape
    C = n_classes
    states = np.array(list(itertools.product(range(k), repeat=D)))
    P = rm.fields[0].mechanism.matrix
    base = (
        np.sum(np.log(P[Xt[:, None, :], states[None]]), axis=2)
        + np.sum(np.log(prior[np.arange(D), states]), axis=1)[None]
    )
    L = np.log(rm.label.matrix)[yt]
    Z = states / (k - 1)

    def nll(v):
        lp = Z @ v[: C * D].reshape(C, D).T + v[C * D :]
        lp = lp - logsumexp(lp, axis=1, keepdims=True)
        return -logsumexp((base[:, :, None] + lp[None] + L[:, None, :]).reshape(len(yt), -1), axis=1).sum()

    mle = minimize(nll, np.zeros(C * D + C), method="BFGS").x[: C * D].reshape(C, D)
    return mle - mle.mean(axis=0)
