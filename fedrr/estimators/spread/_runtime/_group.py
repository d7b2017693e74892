"""The interface spread-EM's iterations (``_em``, ``_mstep``) use on a group of shards, declared:
``LocalShards`` (this process) and ``RayShards`` (Ray actors) implement it, and so must a group that
an executor's own ``shard_group(factories, chains)`` builds (a wrapper that times one, say)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ShardGroup(Protocol):
    """Shards that own a block of the records for a whole fit and answer the EM's small calls.
    Results come back in shard order and sums are taken in shard order, so every group gives the
    same numbers. The shards' methods (``estep``, ``loss_grad``, ``hessian``, ...) are ``_estep.Shard``'s."""

    #: bytes of every message so far, both ways (a local group: their raw size; Ray: what it sent)
    bytes: int
    #: of those, the calls from the first E-step on, set-up methods excepted (``_wire.SETUP_METHODS``)
    iteration_bytes: int
    #: actors rebuilt after a failure (0 in this process)
    restarts: int

    @property
    def solo_chains(self) -> bool:
        """Does one worker hold every shard of each chain, so that ``run_each`` can run a chain's
        whole M-step there and the prior of each chain stays on it (``update_priors`` gives None)?"""
        ...

    def __len__(self) -> int:
        """The number of shards."""
        ...

    def call(self, method: str, *args: Any, packed: bool = False) -> list[Any]:
        """``shard.method(*args)`` on every shard, results in shard order."""
        ...

    def reduce(self, method: str, *args: Any) -> Any:
        """The sum, in shard order, of ``shard.method(*args)`` over the shards."""
        ...

    def reduce_each(self, method: str, arg_lists: Sequence[tuple]) -> list[Any]:
        """``[reduce(method, *args) for args in arg_lists]`` as one batch."""
        ...

    def update_priors(self, updates: Sequence[tuple]) -> list[Any] | None:
        """For each (chain, stats, gamma, prior): the chain's prior updated from its E-step
        statistics (``prior_step``) on every shard; the updated priors, or None when the workers own
        them (``solo_chains``: ``fetch_priors`` gives them)."""
        ...

    def fetch_priors(self, chains: Sequence[int]) -> list[Any]:
        """The priors the shards hold for ``chains``."""
        ...

    def run_each(self, fn: Callable, jobs: Sequence[tuple], one_off: bool = False) -> list[Any]:
        """``fn(block, *args)`` for every (chain, args) of ``jobs``, ``block`` a group of the shards
        of that chain (its ``reduce`` the same sums as this group's)."""
        ...

    def close(self) -> None:
        """Release the shards (and the workers' threads or actors)."""
        ...
