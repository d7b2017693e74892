"""Lockstep: the chains' M-step evaluations batched on one shard group give each chain exactly the
numbers it would get alone, in fewer round trips; failures reach the caller."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fedrr.errors import ValidationError
from fedrr.estimators.spread._runtime import LocalShards, Lockstep


class _Square:
    """A shard whose ``f(who, x)`` is (index + 1)·x² summed over shards; ``bad`` raises."""

    def __init__(self, index: int):
        self.index = index

    def f(self, who: int, x: float) -> float:
        return (self.index + 1) * x * x + who

    def bad(self, who: int, x: float) -> float:
        raise ValidationError("x", f"refused {x}")


class _Counting(LocalShards):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.batches: list[int] = []
        self.lock = threading.Lock()

    def reduce_each(self, method, arg_lists):
        with self.lock:  # the lockstep never calls the group from two threads at once
            self.batches.append(len(arg_lists))
            return super().reduce_each(method, arg_lists)


def _group(n_threads: int = 1) -> _Counting:
    return _Counting([lambda i=i: _Square(i) for i in range(3)], n_threads)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_each_caller_gets_its_own_numbers_in_shared_batches(n_threads):
    group = _group(n_threads)
    lock = Lockstep(group, "f")
    asks = {0: [1.0, 2.0, 3.0], 1: [0.5, 4.0, 1.5], 2: [7.0]}  # caller 2 stops after one question

    def job(who):
        return [lock.ask(who, who, x) for x in asks[who]]

    got = lock.run([lambda w=w: job(w) for w in range(3)])
    for who, xs in asks.items():
        assert got[who] == [group.reduce("f", who, x) for x in xs]
        assert got[who] == [6 * x * x + 3 * who for x in xs]
    assert group.batches[:3] == [3, 2, 2]  # three callers, then the two still running


def test_a_caller_that_never_asks_does_not_hold_the_others():
    group = _group()
    lock = Lockstep(group, "f")
    out = lock.run([lambda: "done", lambda: lock.ask(1, 1, 2.0)])
    assert out == ["done", 24.0 + 3]
    assert group.batches == [1]


def test_a_failing_caller_or_group_reaches_run():
    group = _group()
    lock = Lockstep(group, "f")

    def fails():
        raise RuntimeError("caller broke")

    with pytest.raises(RuntimeError, match="caller broke"):
        lock.run([fails, lambda: [lock.ask(1, 1, x) for x in (1.0, 2.0, 3.0)]])
    bad = Lockstep(group, "bad")
    with pytest.raises(ValidationError, match="refused 2.0"):
        bad.run([lambda: bad.ask(0, 0, 2.0), lambda: bad.ask(1, 1, 2.0)])


def test_estep_carries_the_m_steps_first_evaluation(small_rr_release):
    """``Shard.estep``'s ``fit`` is ``loss_grad`` at the same θ on the new samples, bit for bit, and
    ``weight`` their total weight: the M-step's first evaluation and phase 2's gradient use them
    instead of a round trip."""
    from fedrr.estimators.spread._design import ColumnLayout, Design
    from fedrr.estimators.spread._estep import Shard
    from fedrr.estimators.spread._priors._factorised import given_prior
    from fedrr.mechanisms import CategoricalPrior

    Xt, yt, rm = small_rr_release
    design = Design(ColumnLayout.from_mechanism(rm), "onehot")
    shard = Shard(0, rm, Xt[:500], yt[:500], design, 2, 7, 1)
    shard.set_prior(0, given_prior(design.layout, CategoricalPrior(np.full(4, 0.25))))
    rng = np.random.default_rng(1)
    for it in range(3):
        coef, b = rng.normal(size=(1, design.n_inputs)), rng.normal(size=1)
        out = shard.estep(0, it, coef, b, 2)
        loss, gc, gb = shard.loss_grad(0, coef, b)
        assert out["fit"][0] == loss
        np.testing.assert_array_equal(out["fit"][1], gc)
        np.testing.assert_array_equal(out["fit"][2], gb)
        assert out["weight"] == shard.n_samples_weight(0) == 500.0
