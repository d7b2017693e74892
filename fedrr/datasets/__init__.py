"""Datasets for fedrr: real ones (offline, deterministic) and synthetic ones with known ground truth.

The modules are private (``_adult``, ``_real``, ``_schema``, ``_synthetic``); the names below are the
public surface."""

from __future__ import annotations

from ..errors import ValidationError
from ._adult import ADULT_PUBLIC_EDGES, load_adult, load_adult_binned, load_adult_split
from ._real import (
    CHECKSUMS,
    ChecksumError,
    load_breast_cancer,
    load_diabetes,
    load_digits_7_vs_9,
    load_digits_binary,
    load_lending_club,
    load_mnist_7_vs_9,
    load_mnist_binary,
    train_test_split_per_class,
    verify_checksum,
)
from ._schema import Dataset, FeatureSpec, Schema
from ._synthetic import (
    encode_states,
    make_linear_gaussian,
    make_logistic_discrete,
    make_logistic_gaussian,
    make_logistic_multiclass_discrete,
    non_isotropic_cov,
)
from ._table import read_public_rows, read_table

#: Real datasets reachable through ``load(name, **kw)``.
LOADERS = {
    "mnist_7_vs_9": load_mnist_7_vs_9,
    "digits_7_vs_9": load_digits_7_vs_9,
    "breast_cancer": load_breast_cancer,
    "diabetes": load_diabetes,
    "adult": load_adult,
    "adult_binned": load_adult_split,
    "lending_club": load_lending_club,
}


def load(name: str, **kw) -> Dataset:
    """Load a real dataset by name (see ``LOADERS``), passing keyword options to its loader."""
    try:
        loader = LOADERS[name]
    except (KeyError, TypeError):
        raise ValidationError("name", f"unknown dataset {name!r}; valid names: {', '.join(LOADERS)}") from None
    return loader(**kw)


__all__ = [
    "Dataset",
    "Schema",
    "FeatureSpec",
    "ChecksumError",
    "CHECKSUMS",
    "ADULT_PUBLIC_EDGES",
    "LOADERS",
    "load",
    "load_mnist_7_vs_9",
    "load_mnist_binary",
    "load_digits_7_vs_9",
    "load_digits_binary",
    "load_breast_cancer",
    "load_diabetes",
    "load_adult",
    "load_adult_binned",
    "load_adult_split",
    "load_lending_club",
    "read_public_rows",
    "read_table",
    "train_test_split_per_class",
    "verify_checksum",
    "make_logistic_gaussian",
    "make_logistic_discrete",
    "make_logistic_multiclass_discrete",
    "make_linear_gaussian",
    "non_isotropic_cov",
    "encode_states",
]
