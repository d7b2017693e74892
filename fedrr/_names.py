"""The names a config takes, as plain tuples: the config schema (``fedrr._config_schema``) validates
against them without importing the domain, and the domain modules use these same tuples
(``fedrr.population``, ``fedrr.fake``). The built-in datasets' registry (``fedrr.datasets.LOADERS``)
and the learner registry (``fedrr.learners``) are checked against ``DATASETS`` and ``LEARNERS`` by
``tests/test_layering.py``."""

from __future__ import annotations

#: record mechanism families of the built-in population
MECHANISM_FAMILIES = ("rr", "oracle", "gaussian", "laplace", "paired", "triple", "auto")
#: families whose one budget (feature_epsilon) is the ε of a client's whole release: no label budget, no split
WHOLE_RECORD_FAMILIES = ("paired", "triple", "auto")
#: families that release discrete states (integer features)
DISCRETE_FAMILIES = ("rr", "oracle", "paired", "triple", "auto")
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
#: the learner registry's names (``fedrr.learners``), by task, in registration order
LEARNERS = {
    "classification": (
        "spread",
        "spread-robust",
        "spread-public",
        "spread-plain",
        "spread-flat",
        "spread-is",
        "spread-true",
        "naive",
        "naive-cv",
        "wdro",
        "wdro-cv",
        "ldp-sgd",
        "clean",
        "clean-nb",
        "majority",
        "ldp-nb",
        "ldp-nb-normsub",
        "ldp-nb-robust",
        "ldp-nb-ldprecover",
    ),
    "regression": ("ls", "ridge-cv", "wdro", "gauss-dro", "mean", "clean"),
}
#: the oracle learners, trained on clean records as references: never a federation's learner
ORACLE_LEARNERS = ("spread-true", "clean", "clean-nb")
#: the learners a server trains on releases (a run config's learners), the oracles left out
RELEASE_LEARNERS = tuple(n for n in LEARNERS["classification"] if n not in ORACLE_LEARNERS)
