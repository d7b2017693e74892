"""What a Ray actor of spread-EM's runtime pays to start (issue 47 item 2), checked without Ray: the
actor's module and the shards it is sent import only what the E-step needs (no scikit-learn, cvxpy,
pandas, matplotlib or scipy's optimisers, in a fresh interpreter), and a shard travels as its
releases in small integers, not float64."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

from fedrr.estimators import SpreadLogisticRegression
from fedrr.estimators.spread._runtime._wire import Packed
from fedrr.mechanisms import RandomizedResponse, RecordMechanism

#: modules an actor must not load to build its shards (1.6 s of imports, issue 47)
HEAVY = ("sklearn", "cvxpy", "pandas", "matplotlib", "scipy.optimize", "scipy.stats", "flwr")


class _Grab:
    """An executor that keeps spread's shard factories and stops the fit (``holds_shards``)."""

    def shard_group(self, factories, chains=1):
        self.factories = list(factories)
        raise _Stop


class _Stop(Exception):
    pass


def _factories(n=512, d=20, k=8):
    """A fit's shard factories: each client releases 15 of the 20 attributes (NaN for the others)."""
    rng = np.random.default_rng(0)
    rm = RecordMechanism(RandomizedResponse(k, 0.3), RandomizedResponse(2, 0.3), n_features=d, n_sampled=15)
    X = rng.integers(0, k, (n, d))
    Xt, yt = rm.release(X, (X[:, 0] > k // 2).astype(int), rng=rng)
    assert np.isnan(Xt).any()
    grab = _Grab()
    with pytest.raises(_Stop):
        SpreadLogisticRegression(executor=grab, random_state=0, shard_size=128).fit(Xt, yt, mechanism=rm)
    return grab.factories, Xt


_CHILD = """
import pickle, sys
from fedrr.estimators.spread._runtime._ray_actor import ShardActor
actor = ShardActor(pickle.loads(sys.stdin.buffer.read()))  # the shards, as a Ray actor is sent them
assert actor.ping() > 0
heavy = {heavy!r}
print(",".join(sorted(m for m in sys.modules if m in heavy or m.split(".")[0] in heavy)))
"""


def test_an_actor_builds_its_shards_without_the_heavy_imports():
    factories, _ = _factories()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(heavy=HEAVY)],
        input=pickle.dumps(factories),
        capture_output=True,
        check=True,
        timeout=120,
    )
    assert out.stdout.decode().strip() == "", f"an actor's start imported: {out.stdout.decode()}"


def test_the_heavy_modules_are_still_imported_by_their_public_names():
    """The check above can fail: the estimators' package, asked for a name, still loads them."""
    code = (
        "import sys, fedrr.estimators as e; e.WassersteinDROLogisticRegression; e.LDPNaiveBayes;"
        "print('sklearn' in sys.modules, 'cvxpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=120)
    assert out.stdout.decode().split() == ["True", "True"]


def test_a_shard_ships_its_releases_as_small_integers_and_builds_the_same_shard():
    factories, Xt = _factories()
    sent = [pickle.dumps(f) for f in factories]
    for f, blob in zip(factories, sent):
        releases = len(pickle.dumps(f.args[2]))
        assert releases < len(pickle.dumps(f.args[2].array)) / 5  # uint8 states and a NaN bit mask, not float64
        # the rest: the labels, the record mechanism and the design (model-sized), a few scalars
        assert len(blob) - releases < 8 * f.args[3].nbytes + 12_000
    for f, blob in zip(factories, sent):
        here, there = f(), pickle.loads(blob)()
        np.testing.assert_array_equal(here.X, there.X)  # NaN where not released, the states exact
        assert here.X.dtype == there.X.dtype == np.float64 and there.X.flags.writeable


@pytest.mark.parametrize("order", ["C", "F"])
def test_packed_arrays_with_nans_round_trip_exactly(order):
    rng = np.random.default_rng(1)
    a = np.asarray(rng.integers(0, 300, (50, 7)).astype(float), order=order)
    a[rng.random(a.shape) < 0.2] = np.nan
    for compress in (True, False):
        p = Packed(a, compress=compress)
        assert p.small == np.uint16  # integer-valued: the small type, not the float bytes
        b = p.unpack()
        np.testing.assert_array_equal(a, b)
        assert b.flags.f_contiguous == a.flags.f_contiguous
    assert Packed(np.full((3, 3), np.nan)).unpack().shape == (3, 3)
    neg = Packed(np.array([np.nan, -1.0, 2.0]))  # a negative value: raw bytes, still exact
    assert neg.small is None and np.array_equal(neg.unpack(), [np.nan, -1.0, 2.0], equal_nan=True)


class _FakeRay:
    """What ``RayExecutor.actor_slots`` asks of Ray: the cluster's CPUs."""

    def __init__(self, cpus: float):
        self.cpus = cpus

    def cluster_resources(self):
        return {"CPU": self.cpus}


@pytest.mark.parametrize(
    ("cpus_per_task", "n_actors", "cpus", "expected"),
    [(0, None, 2.0, 2), (0, None, 16.0, 16), (1, None, 8.0, 8), (0.5, None, 2.0, 4), (2, None, 2.0, 1), (0, 3, 2.0, 3)],
)
def test_actors_that_ask_for_no_cpu_are_still_one_per_cpu(monkeypatch, cpus_per_task, n_actors, cpus, expected):
    """Inside a Flower simulation spread's actors ask for no CPU (``make_executor``): a job may still hold
    one per CPU, not one per shard (it held 144 actors on 2 CPUs for 3·10^5 clients, the sweep of
    configs/adult_scale.toml)."""
    from fedrr.parallel import RayExecutor

    ex = RayExecutor(cpus_per_task=cpus_per_task, n_actors=n_actors)
    monkeypatch.setattr(ex, "_ensure", lambda: _FakeRay(cpus))
    n, pool = ex.actor_slots()
    assert n == expected and pool == []
