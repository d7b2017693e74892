"""The E-step on real Ray (a local instance started by the test) gives the serial result."""

import numpy as np
import pytest

from fedrr.estimators import SpreadLogisticRegression
from fedrr.parallel import SerialExecutor
from fedrr.parallel.ray_executor import RayExecutor


def test_ray_and_serial_fits_are_identical(small_rr_release):
    ray = pytest.importorskip("ray")
    Xt, yt, rm = small_rr_release
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
