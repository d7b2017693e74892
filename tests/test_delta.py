"""Delta messages of the E-step's count totals (``fedrr.estimators.spread._runtime._delta``): exact round trips, the
whole result where a change cannot be sent, None for a change against a total not held."""

import numpy as np

from fedrr.estimators.spread._runtime import _delta as delta
from fedrr.estimators.spread._runtime._wire import pack, wire


def _result(counts):
    return {"stats": {"counts": counts}, "accepted": 7, "fit": (1.5, np.arange(3.0))}


def test_a_change_of_integer_counts_round_trips_exactly_and_is_smaller():
    rng = np.random.default_rng(0)
    old = rng.integers(0, 90_000, (784, 256)).astype(float)
    old[0, :4] = [0.0, 2.0**52 - 1, 5.0, 2.0**40]
    new = np.maximum(old + rng.integers(-40, 41, old.shape), 0.0)
    new[0, :4] = [2.0**52 - 2, 0.0, 5.0, 2.0**40 + 3]  # changes of ±(2**52 − 2), 0, +3
    msg = delta.encode(_result(new), 11, (11, _result(old)))
    assert "__delta_of__" in msg
    got = delta.decode(msg, (11, _result(old)))
    np.testing.assert_array_equal(got["stats"]["counts"], new)
    assert got["stats"]["counts"].dtype == np.float64 and got["accepted"] == 7
    small = np.maximum(old + rng.integers(-40, 41, old.shape), 0.0)
    small[0, :4] = old[0, :4]  # ordinary changes only: they go as bytes, the totals as 4-byte integers
    assert wire(delta.encode(_result(small), 11, (11, _result(old)))) < wire(pack(_result(small))) / 2
    assert delta.decode(msg, (10, _result(old))) is None  # a change against a total it does not hold
    assert delta.decode(msg, None) is None


def test_what_cannot_go_as_a_change_goes_whole():
    old = np.ones((3, 4))
    for new, prev, base in [
        (np.full((3, 4), 1.5), (1, _result(old)), 1),  # not integer-valued
        (np.ones((3, 4)) * 2, (1, _result(old)), 2),  # the receivers hold another total
        (np.ones((3, 4)) * 2, None, 1),  # nothing sent before
        (np.ones((2, 4)) * 2, (1, _result(old)), 1),  # another shape
    ]:
        msg = delta.encode(_result(new), base, prev)
        assert "__delta_of__" not in msg
        np.testing.assert_array_equal(delta.decode(msg, None)["stats"]["counts"], new)


def test_packed_arrays_come_back_in_the_memory_order_they_went():
    """A Fortran-ordered matrix (cho_solve's inverse, say) must not come back C-ordered: BLAS sums
    ``inv @ v`` in another order for the other layout, and a Ray fit would differ from the serial
    one in the last bit."""
    from fedrr.estimators.spread._runtime._wire import unpack

    rng = np.random.default_rng(1)
    floats = np.asfortranarray(rng.normal(size=(40, 30)))
    counts = np.asfortranarray(rng.integers(0, 300, (40, 30)).astype(float))
    for a in (floats, counts, np.ascontiguousarray(floats)):
        b = unpack(pack(a))
        np.testing.assert_array_equal(b, a)
        assert (b.flags.f_contiguous, b.flags.c_contiguous) == (a.flags.f_contiguous, a.flags.c_contiguous)
        assert b.flags.writeable
    v = rng.normal(size=30)
    assert np.array_equal(unpack(pack(floats)) @ v, floats @ v)
