"""Spread-EM on real Ray (a local instance started by the tests): the shard group in actors gives
the serial fit bit for bit, its traffic per EM iteration is O(model) (it does not grow with the
data), a killed actor costs a rebuild and not the fit, and a shard's own exception arrives as
itself. The executor's ``map`` (sweep cells) survives a killed worker too."""

import functools
import sys
import tempfile

import numpy as np
import pytest

from fedrr.errors import ExecutorError, ValidationError
from fedrr.estimators import SpreadLogisticRegression
from fedrr.mechanisms import RandomizedResponse, RecordMechanism
from fedrr.parallel import RayExecutor, SerialExecutor
from fedrr.testing.crash import CrashOnce, kill_count

ray = pytest.importorskip("ray")
from fedrr.estimators.spread._runtime import RayShards  # noqa: E402

KW = dict(random_state=3, max_iter=6, burn_in=3, shard_size=700)


@pytest.fixture(scope="module")
def ex():
    """One local Ray of 2 CPUs for the module; 2 actors per shard group."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this module
    if ray.is_initialized():
        ray.shutdown()
    executor = RayExecutor(num_cpus=2, n_actors=2)
    executor._ensure()
    yield executor
    executor.shutdown()
    assert not ray.is_initialized()


@pytest.fixture
def serial_fit(small_rr_release):
    Xt, yt, rm = small_rr_release
    return SpreadLogisticRegression(executor=SerialExecutor(), **KW).fit(Xt, yt, mechanism=rm)


@pytest.mark.parametrize("split", [True, False])
def test_ray_and_serial_fits_are_identical(ex, small_rr_release, serial_fit, split):
    Xt, yt, rm = small_rr_release
    ex.split_chains = split
    try:
        par = SpreadLogisticRegression(executor=ex, **KW).fit(Xt, yt, mechanism=rm)
    finally:
        ex.split_chains = True
    # split: each of the 2 chains on its own actor, over all 5 shards of 700, its burn-in M-steps
    # run there; not split: 5 shards on 2 actors (2 + 3), every sum folded across the actors in
    # shard order, each M-step gradient a round trip
    np.testing.assert_array_equal(par.coef_, serial_fit.coef_)
    np.testing.assert_array_equal(par.intercept_, serial_fit.intercept_)
    np.testing.assert_array_equal(par.prior_["categorical"][0], serial_fit.prior_["categorical"][0])
    assert par.shard_restarts_ == 0
    assert par.traffic_["per_iteration"] > 0 and par.traffic_["estep up"] > 0
    assert ("run:_local_mstep down" in par.traffic_) == split
    assert ("loss_grad down" in par.traffic_) == (not split)
    assert ("fetch_priors up" in par.traffic_) == split  # each chain's actor owns its prior: fetched


def _release(n: int, d: int, k: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, k, size=(n, d))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X / (k - 1) - 0.5) @ rng.normal(0, 2, d)))).astype(int)
    rm = RecordMechanism(RandomizedResponse(k, 0.3), RandomizedResponse(2, 0.2), n_features=d)
    return (*rm.release(X, y, rng=rng), rm)


def test_traffic_per_iteration_is_o_model_not_o_data(ex):
    """10x the records (and 10x the shards) does not add traffic: each actor sends one folded sum.
    The bound is what 2 actors exchange for a (D, K) table of counts and a model of D+1 numbers:
    per chain and iteration, counts up from each actor and down to all but the last, and at most
    ``evals`` M-step evaluations each sending the model down and one gradient up per actor."""
    d, k, n_actors, chains, evals, overhead = 20, 16, 2, 2, 25, 2048  # overhead: pickle framing per message
    counts, model = 8 * d * k + overhead, 8 * (d + 1) + overhead
    bound = chains * (2 * n_actors * counts + evals * 2 * n_actors * model)
    kw = dict(random_state=1, max_iter=4, burn_in=2, shard_size=500)
    per_iter = {}
    for n in (1_500, 15_000):
        Xt, yt, rm = _release(n, d, k, seed=n)
        est = SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=rm)
        per_iter[n] = est.traffic_["per_iteration"]
        assert per_iter[n] <= bound, (n, per_iter[n], bound, est.traffic_)
    # 3 shards vs 30: a per-shard protocol would send 10x the results; the fold sends the same
    assert per_iter[15_000] <= 1.25 * per_iter[1_500], per_iter


class _KillAt(RayShards):
    """A real Ray shard group that kills one of its actors just before a chosen call."""

    target: tuple = ("estep", 0, 3)  # (method, actor, iteration for the E-step / call number otherwise)

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.killed, self.n_calls = False, 0

    def _before(self, method, args):  # before each fold of a batch is submitted
        name, actor, when = self.target
        if method == name and self._in_iterations:  # calls counted from the first E-step on
            self.n_calls += 1
            hit = args[1] == when and args[0] == 1 if name == "estep" else self.n_calls == when
            if hit and not self.killed:
                self.kill(actor)
                self.killed = True


def _fit_with_kill(ex, data, target, kw):
    Xt, yt, rm = data
    cls = type("KillAt", (_KillAt,), {"target": target})
    ex.group_class = cls
    try:
        return SpreadLogisticRegression(executor=ex, **kw).fit(Xt, yt, mechanism=rm)
    finally:
        ex.group_class = None


KILL_KW = dict(random_state=3, max_iter=10, burn_in=5, shard_size=700)


@pytest.fixture(scope="module")
def uninterrupted(ex):
    rng = np.random.default_rng(0)  # the small_rr_release data (a module-scoped copy)
    X = rng.integers(0, 4, size=(3000, 5))
    y = (rng.random(3000) < 1 / (1 + np.exp(-(X / 3) @ np.array([2.0, -1.0, 1.0, 0.5, -2.0])))).astype(int)
    rm = RecordMechanism(RandomizedResponse(4, 0.3), RandomizedResponse(2, 0.2), n_features=5)
    data = (*rm.release(X, y, rng=rng), rm)
    return data, SpreadLogisticRegression(executor=ex, **KILL_KW).fit(data[0], data[1], mechanism=rm)


@pytest.mark.parametrize(
    "target, split",
    [
        (("estep", 0, 4), True),  # chain 0's actor, between the submissions of iteration 4's E-steps
        (("estep", 0, 4), False),  # the first actor of the fold: both chains' folds are redone
        (("run", 1, 3), True),  # chain 1's actor, as iteration 2's M-steps are submitted to the actors
        pytest.param(  # the last actor (it keeps the E-step sums) in an M-step of the burn-in
            ("loss_grad", 1, 30), False, marks=pytest.mark.slow
        ),
    ],
)
def test_an_actor_killed_mid_fit_is_rebuilt_and_the_fit_completes(ex, uninterrupted, target, split):
    """The rebuilt actor's chains restart from the driver's priors, so the fit is not bit-identical
    to the uninterrupted one: it differs by Monte Carlo noise, the kind the two chains of the
    uninterrupted fit differ by. So the tolerance: the distance between the two fits at most
    three times the chains' own relative distance (and never more than 25 % of the norm)."""
    data, base = uninterrupted
    ex.split_chains = split
    try:
        hurt = _fit_with_kill(ex, data, target, KILL_KW)
    finally:
        ex.split_chains = True
    assert hurt.shard_restarts_ == 1 and base.shard_restarts_ == 0
    assert np.all(np.isfinite(hurt.coef_)) and np.all(np.isfinite(hurt.intercept_))
    assert not np.array_equal(hurt.coef_, base.coef_)  # the kill really changed the chains
    rel = np.linalg.norm(hurt.coef_ - base.coef_) / np.linalg.norm(base.coef_)
    assert rel <= min(0.25, 3 * max(base.chain_distance_, 0.02)), (rel, base.chain_distance_)


class _Toy:
    """A shard whose ``boom`` raises a ValidationError on one chosen shard."""

    def __init__(self, index: int, bad: int):
        self.index, self.bad = index, bad

    def value(self):
        return np.full(3, float(self.index))

    def boom(self):
        if self.index == self.bad:
            raise ValidationError("shard", f"shard {self.index} refuses")
        return self.value()


@pytest.mark.parametrize("bad", [0, 4])  # in the first actor (its error reaches the second through the fold) or last
def test_a_shards_own_exception_is_raised_as_itself_not_retried(ex, bad):
    import functools

    ex.shutdown_actors()  # the executor's idle actors hold the CPUs
    group = RayShards([functools.partial(_Toy, i, bad) for i in range(5)], 2)
    try:
        np.testing.assert_array_equal(group.reduce("value"), np.full(3, 10.0))
        with pytest.raises(ValidationError, match=f"shard {bad} refuses") as info:
            group.reduce("boom")
        assert type(info.value) is ValidationError
        with pytest.raises(ValidationError, match=f"shard {bad} refuses"):
            group.call("boom")
        assert group.restarts == 0
    finally:
        group.close()


class _ToyPrior:
    def estimate(self, stats):
        return self

    def blend(self, other, gamma):
        return self

    def copy(self):
        return self


class _PriorToy(_Toy):
    """A shard whose prior the actor updates; ``bad`` refuses the update."""

    def __init__(self, index: int, bad: int):
        super().__init__(index, bad)
        self.prior = {0: _ToyPrior(), 1: _ToyPrior()}

    def estep(self, chain, it):
        return {"stats": {"n": np.ones(3)}, "accepted": self.index}

    def set_prior(self, chain, prior):
        if self.index == self.bad:
            raise ValidationError("prior", f"shard {self.index} refuses its prior")


def test_a_prior_update_is_not_awaited_but_its_error_reaches_the_next_call(ex):
    """With one actor per chain, that actor owns the chain's prior: the E-step's statistics stay
    there (only the rest comes back), the prior updates are submitted and left (the next call
    queues behind them), and a shard's error in one is raised by the next call that is awaited."""
    import functools

    ex.shutdown_actors()
    group = RayShards([functools.partial(_PriorToy, i, 4) for i in range(5)], 2, chains=2)
    try:
        assert group.solo_chains
        assert group.reduce_each("estep", [(0, 1), (1, 1)]) == [{"accepted": 10}] * 2  # the statistics stayed
        assert group.update_priors([(c, None, 0.5, _ToyPrior()) for c in range(2)]) is None
        assert len(group._pending) == 2  # submitted, not awaited
        with pytest.raises(ValidationError, match="shard 4 refuses its prior"):
            group.reduce("value")
        np.testing.assert_array_equal(group.reduce("value"), np.full(3, 10.0))  # raised once, then on
        assert group.restarts == 0
    finally:
        group.close()


class _CountPrior:
    """A prior that counts its updates."""

    def __init__(self, n: int = 0):
        self.n = n

    def estimate(self, stats):
        return self

    def blend(self, other, gamma):
        return _CountPrior(self.n + 1)

    def copy(self):
        return _CountPrior(self.n)


class _CountToy(_PriorToy):
    def __init__(self, index: int):
        super().__init__(index, -1)
        self.prior = {0: _CountPrior(), 1: _CountPrior()}

    def set_prior(self, chain, prior):
        self.prior[chain] = prior


def test_an_owned_prior_is_checkpointed_and_a_rebuilt_actor_restarts_from_it(ex):
    import functools

    from fedrr.estimators.spread._runtime._ray_priors import CHECKPOINT_EVERY

    ex.shutdown_actors()
    group = RayShards([functools.partial(_CountToy, i) for i in range(3)], 2, chains=2)
    try:
        for c in range(2):
            group.call("set_prior", c, _CountPrior())
        for it in range(CHECKPOINT_EVERY + 2):
            group.reduce_each("estep", [(0, it), (1, it)])
            group.update_priors([(c, None, 0.5, None) for c in range(2)])
        assert [p.n for p in group.fetch_priors([0, 1])] == [CHECKPOINT_EVERY + 2] * 2
        group.kill(0)  # chain 0's actor
        group.reduce_each("estep", [(0, 99), (1, 99)])
        assert group.restarts == 1
        # chain 0 restarted from its checkpoint, chain 1 went on
        assert [p.n for p in group.fetch_priors([0, 1])] == [CHECKPOINT_EVERY, CHECKPOINT_EVERY + 2]
    finally:
        group.close()


class _Where:
    """A shard that says which process holds it, under a chain method's name."""

    def __init__(self, index: int):
        self.index = index

    def n_samples_weight(self, chain: int):
        import os

        return (self.index, chain, os.getpid())

    def value(self):
        return self.n_samples_weight(-1)


@pytest.mark.parametrize(
    "actors, chains, teams", [(2, 2, [[0], [1]]), (2, 1, [[0, 1]]), (2, 3, [[0, 1]]), (4, 2, [[0, 1], [2, 3]])]
)
def test_chains_go_to_teams_of_actors_that_each_hold_every_shard(ex, actors, chains, teams):
    """Teams: gcd(chains, actors); chain c to team c mod teams, which holds the 5 shards in
    blocks; a call without a chain to team 0. (4 actors on 2 CPUs: a quarter CPU each.)"""
    ex.shutdown_actors()
    group = RayShards([functools.partial(_Where, i) for i in range(5)], actors, cpus=0.25, chains=chains)
    try:
        assert group.teams == teams and len(group) == 5
        pids = [group.ray.get(a.call.remote(None, "value", (), False))[0][2] for a in group.actors]
        for c in range(chains + 1):
            got = group.call("n_samples_weight", c)
            team = teams[c % len(teams)]
            assert [g[:2] for g in got] == [(i, c) for i in range(5)]  # every shard once, in order
            assert {g[2] for g in got} == {pids[i] for i in team}
        assert {g[2] for g in group.call("value")} == {pids[i] for i in teams[0]}
    finally:
        group.close()


def _iteration_2_shard_1(task) -> bool:
    return task == 1


def _double(task):
    return 2 * task


def _raise_validation(task):
    raise ValidationError("task", "raised inside a Ray task")


def test_map_survives_a_killed_worker_and_raises_task_errors_as_themselves(ex):
    ex.shutdown_actors()  # the executor's idle actors hold the CPUs the tasks need
    with tempfile.TemporaryDirectory() as d:
        assert ex.map(CrashOnce(_double, _iteration_2_shard_1, d, 1), [0, 1, 2]) == [0, 2, 4]
        assert kill_count(d) == 1  # the fault really happened; Ray reran the task
    with tempfile.TemporaryDirectory() as d:
        few = RayExecutor(max_retries=1)
        with pytest.raises(ExecutorError, match=r"task 1 of 3 failed after 1 retries: .*WorkerCrashedError"):
            few.map(CrashOnce(_double, _iteration_2_shard_1, d, 3), [0, 1, 2])
        assert kill_count(d) == 2
    with pytest.raises(ValidationError):
        ex.map(_raise_validation, [1])


def test_max_retries_is_validated():
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValidationError, match="max_retries"):
            RayExecutor(max_retries=bad)


def test_wdro_radius_grid_on_ray_tasks_equals_serial(ex):
    """W-DRO's cross-validated radius grid as Ray tasks (the data put in the object store once):
    the same held-out scores and model as in this process."""
    from fedrr.estimators import WassersteinDROLogisticRegressionCV

    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 4))
    y = (rng.random(400) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5, 0.0])))).astype(int)
    rr = RandomizedResponse(2, 0.2)
    yt = rr.release(y, rng)
    kw = {"rhos": 3, "cv": 3, "label_mechanism": rr}
    a = WassersteinDROLogisticRegressionCV(**kw).fit(X, yt)
    b = WassersteinDROLogisticRegressionCV(**kw, executor=ex).fit(X, yt)
    np.testing.assert_array_equal(a.scores_, b.scores_)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert b.scores_.shape == (4, 3)


def _task_pid(data, executor, i):
    import os

    return os.getpid(), int(data["x"][i]), type(executor).__name__


def _task_fails(data, executor, i):
    if i == 2:
        raise ValidationError("task", f"task {i} refuses")
    return i


def test_held_data_is_sent_once_and_its_tasks_run_on_the_pooled_actors(ex):
    """``HeldData``: every actor holds the data for the whole job; the tasks come back in order,
    spread over the actors (each a serial executor there), the same actors job after job; a task's
    own error arrives as itself."""
    from fedrr.estimators.spread._runtime import HeldData

    data = {"x": np.arange(10) * 3}
    with HeldData(ex, data) as held:
        assert held.remote and len(held.actors) == 2
        out = held.run(_task_pid, [(i,) for i in range(10)])
    assert [v for _, v, _ in out] == list(range(0, 30, 3))
    assert {k for _, _, k in out} == {"SerialExecutor"}
    pids = {p for p, _, _ in out}
    assert len(pids) == 2  # both actors worked
    with HeldData(ex, data) as held:
        again = {p for p, _, _ in held.run(_task_pid, [(i,) for i in range(4)])}
        with pytest.raises(ValidationError, match="task 2 refuses"):
            held.run(_task_fails, [(i,) for i in range(4)])
    assert again == pids  # the executor's pooled actors: started once
    local = HeldData(SerialExecutor(), data)
    assert not local.remote and local.run(_task_pid, [(1,)])[0][1:] == (3, "SerialExecutor")


def _kernel_types(data, executor, i):
    """On an actor: its pid and the argument types of every kernel it has compiled or loaded."""
    import os

    from fedrr.estimators.spread import _direct_kernels, _kernels

    kernels = {n: f for m in (_kernels, _direct_kernels) for n, f in vars(m).items() if hasattr(f, "signatures")}
    return os.getpid(), {n: [str(t) for sig in f.signatures for t in sig] for n, f in kernels.items()}


def test_the_actors_kernels_get_writeable_arrays_as_the_drivers_do(ex, small_rr_release):
    """Ray hands a message's arrays over read-only (zero-copy from its object store), and numba
    compiles a kernel again for a read-only array: 8–10 s more in a process's first Ray fit at MNIST
    size whenever the cache is fresh (a new install or a changed kernel). The actors own the
    messages' arrays and rebuild a design's cached tables, so every kernel takes the driver's types."""
    from fedrr.estimators.spread._runtime import HeldData

    Xt, yt, rm = small_rr_release
    SpreadLogisticRegression(executor=ex, **KW).fit(Xt, yt, mechanism=rm)
    # a scalar design started at naive Bayes: the driver caches its state table before the shards
    # are built, and the table travels inside them
    SpreadLogisticRegression(executor=ex, encoding="unit", shrink_to="naive-bayes", **KW).fit(Xt, yt, mechanism=rm)
    with HeldData(ex, {}) as held:  # the executor's pooled actors: the fits'
        seen = held.run(_kernel_types, [(i,) for i in range(4)])
    assert len({pid for pid, _ in seen}) == 2
    for _, types in seen:
        assert types["rr_chain"] and types["rr_tables"]  # the fit's E-steps ran here
        assert not [t for ts in types.values() for t in ts if t.startswith("readonly")]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # the short latent-class EM
@pytest.mark.parametrize("paired", [False, True])
def test_spread_cv_on_ray_equals_the_serial_cv(ex, paired):
    """SpreadLogisticRegressionCV on a Ray executor (the selection's fits spread over actors that hold
    the releases; on record releases the tested fit beside the refit) gives the serial CV's model,
    scores and test bit for bit."""
    from fedrr.datasets import make_logistic_discrete
    from fedrr.estimators import SpreadLogisticRegressionCV
    from fedrr.mechanisms import PairedRecordMechanism

    rng = np.random.default_rng(4)
    ds = make_logistic_discrete(1200, 3, np.array([3.0, -3.0, 2.0, 2.0]), rng=rng)
    if paired:
        rm = PairedRecordMechanism([3] * 4, 2, 4.0, n_sampled=2)
    else:
        rm = RecordMechanism(RandomizedResponse(3, 0.25), RandomizedResponse(2, 0.2), n_features=4)
    Xt, yt = rm.release(ds.X, ds.y, rng=rng)
    kw = dict(random_state=5, Cs=[1.0, 0.1], max_iter=20, cv_max_iter=10, n_permutations=99)
    a = SpreadLogisticRegressionCV(executor=SerialExecutor(), **kw).fit(Xt, yt, mechanism=rm)
    b = SpreadLogisticRegressionCV(executor=ex, **kw).fit(Xt, yt, mechanism=rm)
    assert (a.C_, a.prior_strength_, a.p_value_, a.fallback_) == (b.C_, b.prior_strength_, b.p_value_, b.fallback_)
    for k, v in a.cv_results_.items():
        if k != "params":
            np.testing.assert_array_equal(np.asarray(v), np.asarray(b.cv_results_[k]))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert not b.fallback_ and b.estimator_.executor is ex  # a model was kept: the refit path ran


def _task_dies_once(data, executor, i, marker):
    import os

    if i == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)  # the actor's process dies mid-task
    import warnings

    warnings.warn(f"task {i} warns", UserWarning, stacklevel=1)
    return i * 10


def test_held_data_reruns_a_task_whose_actor_died_and_raises_its_warnings_here(ex, tmp_path):
    """An actor killed mid-task is replaced (holding the data again) and the task runs again; the
    tasks' warnings reach the driver; ``max_actors`` caps the actors a job holds."""
    from fedrr.estimators.spread._runtime import HeldData

    with HeldData(ex, {"x": np.arange(3)}) as held:
        with pytest.warns(UserWarning, match="task 3 warns"):
            out = held.run(_task_dies_once, [(i, str(tmp_path / "died")) for i in range(4)])
    assert out == [0, 10, 20, 30] and (tmp_path / "died").exists()
    with HeldData(ex, {"x": np.arange(3)}, max_actors=1) as held:
        assert len(held.actors) == 1
        with pytest.raises(ValidationError, match="task 2 refuses"):
            held.run(_task_fails, [(i,) for i in range(4)])
