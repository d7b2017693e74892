"""The E-step on real Ray (a local instance started by the test) gives the serial result."""

import numpy as np
import pytest

from fedrr.estimators import SpreadLogisticRegression
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import SerialExecutor
from fedrr.parallel.ray_executor import RayExecutor


def test_ray_and_serial_fits_are_identical():
    ray = pytest.importorskip("ray")
    rng = np.random.default_rng(0)
    n, d, k = 3000, 5, 4
    X = rng.integers(0, k, size=(n, d))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X / 3) @ np.array([2.0, -1.0, 1.0, 0.5, -2.0])))).astype(int)
    rm = RecordMechanism(RandomizedResponse(k, 0.3), RandomizedResponse(2, 0.2), n_features=d)
    Xt, yt = rm.release(X, y, rng=rng)
    kw = dict(random_state=3, max_iter=6, shard_size=700)
    ex = RayExecutor(num_cpus=2)
    try:
        par = SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=rm)
        assert ray.is_initialized()
    finally:
        ex.shutdown()
    assert not ray.is_initialized()
    ser = SpreadLogisticRegression(executor=SerialExecutor(), **kw).fit(Xt, yt, mechanism=rm)
    np.testing.assert_array_equal(par.coef_, ser.coef_)
    np.testing.assert_array_equal(par.intercept_, ser.intercept_)
