"""LDP-SGD as a Flower ``Strategy``: each training round sends the current model to a fresh disjoint
group of nodes (``configure_train``) and steps on their released gradients (``aggregate_train``); the
last round's evaluation sends the candidate and the intercept-only model to the check group
(``configure_evaluate`` / ``aggregate_evaluate``). The arithmetic is ``LDPSGDServer``'s, the one the
offline ``LDPSGDClassifier`` runs, and the replies are put back in the group's order before they are
averaged, so a federation's model equals the simulator's for a seed. A reply that fails validation
(``parse_answer``: wrong node, stale replay, foreign mechanism, out of range) is dropped and counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from logging import INFO

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy
from flwr.supercore import log

from ..estimators import LDPSGDServer
from ..gradient_release import query_mechanism
from ..pool import ReplyRejected
from ._ldp_sgd_protocol import parse_answer, query_content


class LDPSGDStrategy(Strategy):
    """``nodes[i]`` and ``client_ids[i]``, ``epsilons[i]``: the node, client id and announced ε of row i
    of the server's plan (client-id order). ``mechanism``, ``n_sampled``, ``clip``: the run's release."""

    def __init__(
        self, server: LDPSGDServer, nodes, client_ids, epsilons, *, mechanism: str, n_sampled: int | None, clip: float
    ):
        self.server, self.nodes, self.client_ids, self.epsilons = server, list(nodes), list(client_ids), epsilons
        self.mechanism, self.n_sampled, self.clip = mechanism, n_sampled, clip
        self.train_rounds = [r for r, (kind, _) in enumerate(server.plan) if kind != "check"]
        self.check_round = next((r for r, (kind, _) in enumerate(server.plan) if kind == "check"), None)
        self.realised_epsilon = np.full(len(self.nodes), np.nan)
        self.dropped: Counter = Counter()
        self.queries: dict[int, object] = {}

    def _messages(self, r: int, message_type: str) -> list[Message]:
        q = self.queries[r] = self.server.query(r)
        return [
            Message(content=query_content(q), dst_node_id=self.nodes[i], message_type=message_type, group_id=str(r))
            for i in self.server.plan[r][1]
        ]

    def _absorb(self, r: int, replies: Iterable[Message]) -> dict:
        """Validate round r's replies, order them as the group, and hand them to the server."""
        q, rows = self.queries[r], self.server.plan[r][1]
        row_of = {self.nodes[i]: i for i in rows}
        got: dict[int, np.ndarray] = {}
        seen: set[int] = set()
        for msg in replies:
            i = row_of.get(msg.metadata.src_node_id)
            if i is None or i in seen:
                self.dropped["unexpected_node"] += 1
                continue
            seen.add(i)
            d = q.theta.size if q.kind == "gradient" else (q.theta.shape[0] if q.kind == "intercept" else 1)
            bound = self.clip if q.kind == "gradient" else 1.0
            expected = query_mechanism(self.mechanism, float(self.epsilons[i]), d, self.n_sampled, bound)
            try:
                got[i] = parse_answer(msg, q, self.client_ids[i], expected)
                self.realised_epsilon[i] = expected.epsilon
            except ReplyRejected as exc:
                self.dropped[exc.reason] += 1
        order = [i for i in rows if i in got]
        if len(seen) < len(rows):
            self.dropped["no_reply"] += len(rows) - len(seen)
        R = np.array([got[i] for i in order]).reshape(len(order), -1)
        self.server.update(r, R)
        return {"round": r, "answers": len(order), "asked": len(rows)}

    # ---------------------------------------------------------------------------- Strategy
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        r = self.train_rounds[server_round - 1]
        return self._messages(r, MessageType.TRAIN)

    def aggregate_train(self, server_round: int, replies: Iterable[Message]):
        info = self._absorb(self.train_rounds[server_round - 1], replies)
        return ArrayRecord({"theta": Array(self.server.theta.copy())}), MetricRecord(info)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid):
        if self.check_round is None or server_round != len(self.train_rounds):
            return []
        return self._messages(self.check_round, MessageType.EVALUATE)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]):
        if self.check_round is None or server_round != len(self.train_rounds):
            return None
        info = self._absorb(self.check_round, replies)
        c = self.server.check or {}
        return MetricRecord({**info, "gain": float(c.get("gain", np.nan)), "se": float(c.get("se", np.nan))})

    def summary(self) -> None:
        sizes = [(kind, len(rows)) for kind, rows in self.server.plan]
        log(INFO, "LDP-SGD (Wang et al. 2019 §V): %d groups %s", len(sizes), sizes[:4])
