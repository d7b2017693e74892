"""A worked example of a custom client population (the README's "plug in your own").

Run it with ``population = "fedrr.examples:TwoBudgetSyntheticPopulation"`` in the run
config; ``build_population`` passes the config keys the constructor names (``n-clients`` becomes
``n_clients``). A population needs three things — ``n_clients``, ``record(i)`` (client side only)
and ``mechanism(i)`` — and may offer ``test_set()`` for evaluation and ``is_present(i)``/``dropout``.
It must be deterministic given its parameters: every node and the server build their own copy."""

from __future__ import annotations

import numpy as np

from .datasets import make_logistic_discrete
from .mechanisms import RandomizedResponse, RecordMechanism
from .population import ClientPopulation


class TwoBudgetSyntheticPopulation(ClientPopulation):
    """Synthetic logistic data with known θ0 (5 features, 4 states); even clients are privacy-
    conscious (flip 0.4 on features), odd ones less so (flip 0.15); labels flip 0.2 for all."""

    def __init__(self, n_clients: int = 1000, seed: int = 0, n_test: int = 2000):
        self._n = int(n_clients)
        self.seed = int(seed)
        rng = np.random.default_rng(self.seed)
        ds = make_logistic_discrete(self._n + n_test, [4, 4, 4, 4, 4], [2.0, -1.5, 1.0, -2.0, 0.5], rng=rng)
        self.X, self.y = ds.X[: self._n], ds.y[: self._n]
        self.X_test, self.y_test = ds.X[self._n :], ds.y[self._n :]
        label = RandomizedResponse(2, 0.2)
        self.budgets = (
            RecordMechanism(RandomizedResponse(4, 0.4), label, n_features=5),
            RecordMechanism(RandomizedResponse(4, 0.15), label, n_features=5),
        )

    @property
    def n_clients(self) -> int:
        return self._n

    def record(self, client_id: int):
        i = self.check_client(client_id)
        return self.X[i], int(self.y[i])

    def mechanism(self, client_id: int) -> RecordMechanism:
        return self.budgets[self.check_client(client_id) % 2]

    def test_set(self):
        return self.X_test, self.y_test
