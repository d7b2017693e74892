"""The names a config takes, as plain tuples: the config schema (``fedrr._config_schema``) validates
against them without importing the domain, and the domain modules use these same tuples
(``fedrr.population``, ``fedrr.fake``). The built-in datasets' registry (``fedrr.datasets.LOADERS``)
is checked against ``DATASETS`` by ``tests/test_layering.py``."""

from __future__ import annotations

#: record mechanism families of the built-in population
MECHANISM_FAMILIES = ("rr", "oracle", "gaussian", "laplace", "paired", "auto")
#: families whose one budget (feature_epsilon) is the ε of a client's whole release: no label budget, no split
WHOLE_RECORD_FAMILIES = ("paired", "auto")
#: families that release discrete states (integer features)
DISCRETE_FAMILIES = ("rr", "oracle", "paired", "auto")
GAUSSIAN_NOISE = ("joint", "per-feature")  #: "gaussian" family: one block on all features, or one per feature
#: how a population with more clients than rows gets its clients' rows: "none" (refused by a table
#: population; a built-in dataset cycles its rows and says ``rows_reused``) or "bootstrap"
RESAMPLE = ("none", "bootstrap")
#: the run config's budget fields (unset: None)
BUDGET_KEYS = ("feature_flip", "feature_epsilon", "label_flip", "label_epsilon")
#: what fake clients send (``fedrr.fake``)
FAKE_ATTACKS = ("output", "output-sampled", "mga", "mga-sampled", "input")
#: the built-in datasets, in the order of ``fedrr.datasets.LOADERS``
DATASETS = ("mnist_7_vs_9", "digits_7_vs_9", "breast_cancer", "diabetes", "adult", "adult_binned", "lending_club")
