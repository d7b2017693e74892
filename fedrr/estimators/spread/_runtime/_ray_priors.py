"""How the actors of a ``_ray_shards.RayShards`` group update spread-EM's chain priors (eq 65).
Teams of several actors: the last actor of a chain's team keeps the summed E-step statistics and
sends them to the others; the driver updates its own copy from the same statistics. One actor per
chain: that actor owns the chain's prior — its statistics never cross to the driver, its updates
are not awaited, and the driver fetches the prior every ``CHECKPOINT_EVERY`` updates (what a
rebuilt actor restarts from) and at the end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._local import prior_step
from ._ray_actor import _cause, with_center
from ._wire import pack, wire

#: how often (prior updates) a chain's prior is fetched from the actor that owns it
CHECKPOINT_EVERY = 10


class PriorUpdates:
    """The prior-update calls of ``RayShards`` (a mixin: it uses the group's actors, teams,
    ``_priors``, ``_folded``, ``_pending``, ``_gather_many`` and ``_count``)."""

    def update_priors(self, updates: Sequence[tuple]) -> list[Any] | None:
        """For each (chain, stats, gamma, prior) of ``updates``, every actor of the chain's team
        updates its prior from the E-step statistics (eq 65) and the driver computes the same
        update for its own copy while they do; the driver's copies are returned. With one actor
        per chain (``solo_chains``) that actor owns the chain's prior: see ``_update_own_priors``
        (None is returned; ``fetch_priors`` gives them)."""
        self._flush()
        if self.solo_chains:
            return self._update_own_priors([u[0] for u in updates], [u[2] for u in updates])
        plans = [self._prior_plan(*u[:3]) for u in updates]
        out = [prior_step(prior, stats, gamma) for _, stats, gamma, prior in updates]
        for (_, _, chain), updated in zip(plans, out):
            self._priors[chain] = updated  # what a rebuilt actor is given
        done = self._gather_many([(p[0], self._team("update_prior", (p[2],))) for p in plans])
        for (_, send_whole, chain), ok in zip(plans, done):
            team = self._team("update_prior", (chain,))
            again = [i for i, v in zip(team, ok) if v is False]  # it lacked the change's base
            if again:
                self._gather(send_whole, again)
        return out

    def _update_own_priors(self, chains: Sequence[int], gammas: Sequence[float]) -> None:
        """One actor per chain: it updates the chain's prior from the E-step sum it kept (which
        therefore never crosses to the driver: the E-step sends only the M-step's sums), and the
        calls are not awaited — the chain's next call queues behind them on the same actor (Ray
        runs an actor's calls from one caller in order), so no round trip is spent; their outcome
        is checked when the next call is awaited (``_flush``). Every ``CHECKPOINT_EVERY`` updates
        the actor's prior is fetched the same way: a rebuilt actor restarts its chain from it."""
        self._updates += 1
        for chain, gamma in zip(chains, gammas):
            actor = self.actors[self._team("update_prior", (chain,))[0]]
            self._pending.append((None, actor.update_prior.remote(chain, None, gamma, False, None)))
            if self._updates % CHECKPOINT_EVERY == 0:
                self._pending.append((chain, actor.prior_of.remote(chain)))
        return None

    def fetch_priors(self, chains: Sequence[int]) -> list[Any]:
        """The priors the actors hold for ``chains`` (after ``update_priors`` returned None)."""
        self._flush()
        got = self._gather_many(
            [(lambda i, a, r, c=c: a.prior_of.remote(c), self._team("update_prior", (c,))[:1]) for c in chains]
        )
        self._count("fetch_priors up", sum(wire(g[0]) for g in got), one_off=True)
        return [with_center(g[0], self._priors.get(c)).copy() for c, g in zip(chains, got)]

    def _flush(self) -> None:
        """Await the calls left pending by ``update_priors``: called once the next calls are
        submitted. A shard's own error is raised; a checkpoint becomes the prior a rebuilt actor
        gets; an actor that died is the next call's to rebuild — resubmitting the update here
        would apply it twice."""
        pending, self._pending = self._pending, []
        for chain, ref in pending:
            try:
                got = self.ray.get(ref)
            except self.ray.exceptions.RayTaskError as exc:
                raise _cause(exc) from None
            except self.ray.exceptions.RayActorError:
                continue
            if chain is not None:  # a checkpoint
                self._count("prior_of up", wire(got))
                self._priors[chain] = with_center(got, self._priors.get(chain))

    def _prior_plan(self, chain: int, stats: Any, gamma: float) -> tuple:
        """(submit, send_whole, chain) for one chain's prior update: the last actor updates from
        the sum it kept, the others from its output; ``send_whole`` sends the statistics."""
        hit = self._folded.pop(chain, None)
        team = self._team("update_prior", (chain,))
        last = team[-1]
        tid = hit[3] if hit is not None else None
        whole: list = []

        def send_whole(i, a, revived):  # the statistics themselves
            whole[:] = whole or [pack(stats)]
            self._count("update_prior down", wire(whole[0]))
            return a.update_prior.remote(chain, whole[0], gamma, False, tid)

        if hit is not None and hit[0] is stats:
            out_ref, size = hit[1], hit[2]  # what each other actor fetches: the last actor's message
            self._count("update_prior down", size * (len(team) - 1))

            def submit(i, a, revived):
                if revived:  # a rebuilt actor holds nothing
                    return send_whole(i, a, revived)
                return a.update_prior.remote(chain, None if i == last else out_ref, gamma, i != last, tid)

            return submit, send_whole, chain
        return send_whole, send_whole, chain
