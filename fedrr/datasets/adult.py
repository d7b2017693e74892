"""UCI Adult as 12 discrete attributes on its own train/test split, for categorical learners
(naive Bayes, frequency oracles): numeric columns cut at training-set quantiles, categoricals coded.

Lives beside ``real.py`` (which holds the vendored-file reading and ``load_adult``) to keep each
module under 400 lines; the raw rows come from the same checksum-verified files.
"""

from __future__ import annotations

import numpy as np

from .._validation import check_int
from ..errors import ValidationError
from .real import _ADULT_COLUMNS, _UCI_LICENSE, ADULT_CATEGORICAL, ADULT_NUMERIC, ChecksumError, _adult_table
from .schema import Dataset, FeatureSpec, Schema

#: rows of adult.data / adult.test without a '?' (the standard 30,162 / 15,060 split)
ADULT_N_TRAIN, ADULT_N_TEST = 30_162, 15_060
CLOSED = ("right", "left")


def quantile_edges(values: np.ndarray, max_bins: int) -> np.ndarray:
    """Distinct cut points: the training-set quantiles at b / max_bins, b = 1..max_bins−1 (numpy's
    default linear interpolation), duplicates removed — so a column with ties gets fewer bins."""
    levels = np.arange(1, max_bins) / max_bins
    return np.unique(np.quantile(np.asarray(values, dtype=np.float64), levels))


def bin_states(values: np.ndarray, edges: np.ndarray, closed: str = "right") -> np.ndarray:
    """State b ∈ {0..len(edges)} of each value. closed="right": bins (e_{b−1}, e_b], so a value equal
    to an edge falls in the bin below it (pandas.cut's default); closed="left": bins [e_{b−1}, e_b),
    a value equal to an edge falls in the bin above it (numpy.digitize's default)."""
    side = "left" if closed == "right" else "right"
    return np.searchsorted(edges, np.asarray(values, dtype=np.float64), side=side).astype(np.int64)


def load_adult_binned(max_bins: int = 8, closed: str = "right") -> tuple[Dataset, Dataset]:
    """UCI Adult (income >50K = 1) as (train, test): adult.data → train, adult.test → test, rows with
    a '?' dropped (30,162 / 15,060). 12 discrete attributes, in this order:

    * ``ADULT_NUMERIC`` (age, education_num, capital_gain, capital_loss, hours_per_week): cut at the
      distinct training-set quantiles (``quantile_edges``, at most ``max_bins`` bins), both splits with
      the training edges; ``closed`` says which bin a value equal to an edge joins (``bin_states``).
      With closed="right" (default) the zero-inflated capital_gain / capital_loss (all 7 quantiles
      are 0) become 0 vs > 0; with closed="left" every training value is >= 0, so both columns are
      constant (state 1; state 0 empty) — kept as an option because it is numpy.digitize's default.
    * ``ADULT_CATEGORICAL``: integer codes in sorted order of the training values (every test value
      occurs in training).

    The quantiles treat the training data's distribution as public (the server's schema), as is
    usual in the LDP literature; extra holds the edges and the category names.
    """
    max_bins = check_int("max_bins", max_bins, minimum=2)
    if closed not in CLOSED:
        raise ValidationError("closed", f"must be one of {CLOSED!r}, got {closed!r}")
    table, is_test = _adult_table()
    keep = ~np.any(table == "?", axis=1)
    table, is_test = table[keep], is_test[keep]
    if (int((~is_test).sum()), int(is_test.sum())) != (ADULT_N_TRAIN, ADULT_N_TEST):  # pragma: no cover
        raise ChecksumError(f"Adult has {(~is_test).sum()} / {is_test.sum()} complete rows, expected 30162 / 15060")
    col = {name: j for j, name in enumerate(_ADULT_COLUMNS)}
    train = ~is_test
    y = (np.char.rstrip(table[:, col["income"]], ".") == ">50K").astype(np.int64)  # adult.test labels end in '.'

    states, specs, edges, categories = [], [], {}, {}
    for name in ADULT_NUMERIC:
        v = table[:, col[name]].astype(np.float64)
        edges[name] = quantile_edges(v[train], max_bins)
        states.append(bin_states(v, edges[name], closed))
        specs.append(FeatureSpec(name, "discrete", n_states=int(edges[name].size + 1)))
    for name in ADULT_CATEGORICAL:
        v = table[:, col[name]]
        cats = np.unique(v[train])
        codes = np.searchsorted(cats, v)
        if np.any(codes >= cats.size) or np.any(cats[np.minimum(codes, cats.size - 1)] != v):  # pragma: no cover
            raise ChecksumError(f"adult.test has a {name} value that adult.data lacks")
        categories[name] = tuple(str(c) for c in cats)
        states.append(codes.astype(np.int64))
        specs.append(FeatureSpec(name, "discrete", n_states=int(cats.size)))
    X = np.column_stack(states)
    schema = Schema(
        tuple(specs),
        classes=("<=50K", ">50K"),
        target="income",
        source="UCI Machine Learning Repository: Adult (Becker & Kohavi, 1996), DOI 10.24432/C5XW20; "
        f"numeric columns cut at <= {max_bins} training-quantile bins (closed={closed!r})",
        license=_UCI_LICENSE,
    )
    extra = {"edges": edges, "categories": categories, "closed": closed}
    return (
        Dataset(X[train], y[train], schema, extra={**extra, "split": "train"}),
        Dataset(X[is_test], y[is_test], schema, extra={**extra, "split": "test"}),
    )
