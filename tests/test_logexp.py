"""spread's logsumexp / log_softmax give scipy.special's bits (committed multiclass results stay)."""

import warnings

import numpy as np
import pytest
from scipy.special import log_softmax as scipy_log_softmax
from scipy.special import logsumexp as scipy_logsumexp

from fedrr.estimators.spread._logexp import log_softmax, logsumexp

_RNG = np.random.default_rng(0)
_CASES = [
    _RNG.normal(size=(1000, 7)),
    np.round(_RNG.normal(size=(500, 4))),  # ties at the maximum
    _RNG.normal(size=(20, 5, 3)) * 50,
    np.array([[-np.inf, -np.inf], [0.0, -np.inf], [1.0, 1.0], [np.inf, 0.0], [np.nan, 0.0], [800.0, 799.0]]),
    _RNG.normal(size=(3, 4, 5)).astype(np.float32),
    np.arange(12).reshape(3, 4),  # integers become float64
    np.zeros((0, 3)),
    np.array(2.5),
]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("a", _CASES, ids=lambda a: f"{a.dtype}{a.shape}")
def test_logsumexp_and_log_softmax_are_scipys_bits(a):
    axes = ([None] if a.size else []) + list(
        range(-1, a.ndim)
    )  # scipy itself fails on an empty array's axis None + ([(1, 2)] if a.ndim == 3 else [])
    for axis in axes:
        for keepdims in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = scipy_logsumexp(a, axis=axis, keepdims=keepdims)
            assert _same(logsumexp(a, axis=axis, keepdims=keepdims), want), (axis, keepdims)
        if a.size and np.issubdtype(a.dtype, np.floating):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = scipy_log_softmax(a, axis=axis)
                got = log_softmax(a, axis=axis)
            assert _same(got, want), axis
