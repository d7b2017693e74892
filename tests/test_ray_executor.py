"""The E-step on real Ray (a local instance started by the test) gives the serial result, also
when a Ray worker is killed in the middle of an E-step."""

import numpy as np
import pytest

from fedrr.errors import ExecutorError, ValidationError
from fedrr.estimators import SpreadLogisticRegression
from fedrr.parallel import SerialExecutor
from fedrr.parallel.ray_executor import RayExecutor
from fedrr.testing.crash import CrashOnce, kill_count

KW = dict(random_state=3, max_iter=6, shard_size=700)


def _iteration_2_shard_1(task) -> bool:
    return tuple(task["seed"].spawn_key) == (2, 1)


class _KillingRay(RayExecutor):
    """The real RayExecutor, whose task function kills its worker on a chosen shard (fault injection)."""

    def __init__(self, marker_dir, times=1, **kw):
        super().__init__(**kw)
        self.marker_dir, self.times = marker_dir, times

    def map(self, fn, tasks):
        return super().map(CrashOnce(fn, _iteration_2_shard_1, self.marker_dir, self.times), tasks)


@pytest.fixture
def serial_fit(small_rr_release):
    Xt, yt, rm = small_rr_release
    return SpreadLogisticRegression(executor=SerialExecutor(), **KW).fit(Xt, yt, mechanism=rm)


def test_ray_and_serial_fits_are_identical(small_rr_release, serial_fit):
    ray = pytest.importorskip("ray")
    Xt, yt, rm = small_rr_release
    import sys

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    ex = RayExecutor(num_cpus=2)
    try:
        par = SpreadLogisticRegression(executor=ex, **KW).fit(Xt, yt, mechanism=rm)
        assert ray.is_initialized()

        # a worker SIGKILLed in the middle of the E-step of iteration 2: Ray reruns that shard
        # (same seed), the fit completes and equals the serial fit bit for bit
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            killer = _KillingRay(d, times=1)
            par_killed = SpreadLogisticRegression(executor=killer, **KW).fit(Xt, yt, mechanism=rm)
            assert kill_count(d) == 1  # the fault really happened
        np.testing.assert_array_equal(par_killed.coef_, serial_fit.coef_)
        np.testing.assert_array_equal(par_killed.intercept_, serial_fit.intercept_)

        # more deaths than retries: a clear ExecutorError naming the task, not a hang or a Ray traceback
        with tempfile.TemporaryDirectory() as d:
            est = SpreadLogisticRegression(executor=_KillingRay(d, times=3, max_retries=1), **KW)
            with pytest.raises(ExecutorError, match=r"task 1 of \d+ failed after 1 retries: .*WorkerCrashedError"):
                est.fit(Xt, yt, mechanism=rm)
            assert kill_count(d) == 2
            assert not hasattr(est, "coef_")

        # an exception raised by the task itself is not retried and arrives as its own type
        with pytest.raises(ValidationError):
            ex.map(_raise_validation, [1])
    finally:
        ex.shutdown()
    assert not ray.is_initialized()
    np.testing.assert_array_equal(par.coef_, serial_fit.coef_)
    np.testing.assert_array_equal(par.intercept_, serial_fit.intercept_)


def _raise_validation(task):
    raise ValidationError("task", "raised inside a Ray task")


def test_max_retries_is_validated():
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValidationError, match="max_retries"):
            RayExecutor(max_retries=bad)
