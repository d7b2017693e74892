"""Streaming pools: the directory layout (uncompressed .npy + pool.json) round-trips, opens
without reading arrays, and ``fit_pool`` gives ``fit``'s result bit for bit — serially and with
shards in Ray actors, where the rows are read from the file inside the actors and the driver
never holds X."""

import pickle
import sys
import tracemalloc

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.estimators import SpreadLogisticRegression
from fedrr.mechanisms import LocalHashing, RandomizedResponse, RecordMechanism
from fedrr.parallel import SerialExecutor
from fedrr.pool import Pool

# one input per attribute: the driver's peak below is measured against X for a model of 40 inputs
# (with "auto" the 40 attributes of 8 states are 280 one-hot inputs, and the driver's peak is 2.7 MB at
# N 20,000 and at 40,000 alike: model-sized, it does not grow with X, but it is over X / 4 at this N)
KW = dict(random_state=3, max_iter=6, burn_in=3, shard_size=700, encoding="unit")


def _pool(n=3000, d=5, k=4, per_record=False, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, k, size=(n, d))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X / (k - 1) - 0.5) @ rng.normal(0, 2, d)))).astype(int)
    rm = RecordMechanism(RandomizedResponse(k, 0.3), RandomizedResponse(2, 0.2), n_features=d)
    Xt, yt = rm.release(X, y, rng=rng)
    if per_record:  # two record mechanisms interleaved: the shards group them as fit does
        rm2 = RecordMechanism(RandomizedResponse(k, 0.2), RandomizedResponse(2, 0.1), n_features=d)
        return Pool(Xt, yt, np.arange(n), [rm if i % 3 else rm2 for i in range(n)])
    return Pool(Xt, yt, np.arange(n), [rm] * n)


def test_pool_dir_round_trips_and_opens_without_arrays(tmp_path):
    pool = _pool(500, per_record=True)
    pool.counts = {"dropped": 2}
    pool.save(tmp_path / "p", layout="dir")
    pool.save(tmp_path / "p", layout="dir")  # overwritten atomically
    assert sorted(x.name for x in (tmp_path / "p").iterdir()) == [
        "X.npy",
        "client_id.npy",
        "mechanism_index.npy",
        "pool.json",
        "y.npy",
    ]
    f = Pool.open(tmp_path / "p")
    assert (f.n, f.n_features, len(f.mechanisms), f.counts) == (500, 5, 2, {"dropped": 2})
    assert isinstance(f.array("X"), np.memmap)
    back = Pool.load(tmp_path / "p")
    np.testing.assert_array_equal(back.X, pool.X)
    np.testing.assert_array_equal(back.y, pool.y)
    assert [m.to_spec() for m in back.mechanisms] == [m.to_spec() for m in pool.mechanisms]
    pool.save(tmp_path / "p.npz")  # the compressed layout still works
    np.testing.assert_array_equal(Pool.load(tmp_path / "p.npz").X, pool.X)
    with pytest.raises(ValidationError, match="layout"):
        pool.save(tmp_path / "q", layout="zip")
    with pytest.raises(ValidationError, match="not a pool directory"):
        Pool.open(tmp_path)


@pytest.mark.parametrize("per_record", [False, True])
def test_fit_pool_equals_fit_serially(tmp_path, per_record):
    pool = _pool(per_record=per_record)
    pool.save(tmp_path / "p", layout="dir")
    kw = dict(KW, executor=SerialExecutor())
    a = SpreadLogisticRegression(**kw).fit(pool.X, pool.y, mechanism=pool.mechanism_arg())
    b = SpreadLogisticRegression(**kw).fit_pool(tmp_path / "p")
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    np.testing.assert_array_equal(a.prior_["categorical"][1], b.prior_["categorical"][1])


def test_fit_pool_rejects_what_it_cannot_do_from_counts(tmp_path):
    rng = np.random.default_rng(1)
    rm = RecordMechanism(LocalHashing(8, 1.0, g=3), RandomizedResponse(2, 0.2), n_features=3)
    Xt, yt = rm.release(rng.integers(0, 8, (200, 3)), rng.integers(0, 2, 200), rng=rng)
    Pool(Xt, yt, np.arange(200), [rm] * 200).save(tmp_path / "p", layout="dir")
    with pytest.raises(ValidationError, match="matrix mechanisms|discrete columns only"):
        SpreadLogisticRegression(executor=SerialExecutor(), max_iter=2).fit_pool(tmp_path / "p")
    # a corrupt row is found by the shard that reads it, and named like fit names it
    pool = _pool(300)
    pool.X[7, 2] = 9  # state 9 of a 4-state column
    pool.save(tmp_path / "bad", layout="dir")
    with pytest.raises(ValidationError, match="X_tilde"):
        SpreadLogisticRegression(executor=SerialExecutor(), max_iter=2).fit_pool(tmp_path / "bad")


# ---------------------------------------------------------------------------- on Ray
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ex():
    from fedrr.parallel import RayExecutor

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if ray.is_initialized():
        ray.shutdown()
    executor = RayExecutor(num_cpus=2, n_actors=2)
    executor._ensure()
    yield executor
    executor.shutdown()


def test_fit_pool_on_ray_equals_fit_and_the_driver_never_holds_x(ex, tmp_path):
    from fedrr.estimators.spread._runtime import RayShards

    seen = {}

    class Spy(RayShards):  # what the driver ships to the actors: the factories, pickled
        def __init__(self, factories, *a, **kw):
            seen["factory_bytes"] = len(pickle.dumps(list(factories)))
            super().__init__(factories, *a, **kw)

    pool = _pool(20_000, d=40, k=8)  # X: 6.4 MB of float64
    pool.save(tmp_path / "p", layout="dir")
    xbytes = pool.X.nbytes
    a = SpreadLogisticRegression(executor=SerialExecutor(), **KW).fit(pool.X, pool.y, mechanism=pool.mechanism_arg())
    del pool
    ex.group_class = Spy
    try:
        SpreadLogisticRegression(executor=ex, **dict(KW, max_iter=2, burn_in=1)).fit_pool(tmp_path / "p")  # warm
        tracemalloc.start()
        b = SpreadLogisticRegression(executor=ex, **KW).fit_pool(tmp_path / "p")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        ex.group_class = None
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    # 29 shard factories name a path and a slice of rows: a few kB, not the 6.4 MB of releases
    assert seen["factory_bytes"] < xbytes / 100, seen
    # the driver's allocations at their peak (numpy reports to tracemalloc): well under one copy of X
    assert peak < xbytes / 4, (peak, xbytes)
