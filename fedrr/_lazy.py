"""Public names of a package imported on first use (PEP 562's module ``__getattr__``), so that importing
one light submodule (a Ray actor's, say) does not run the package's heavy imports (scikit-learn, cvxpy)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str], namespace: dict) -> tuple[Callable, Callable]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``homes`` maps each public name to the
    submodule (relative, ``"._name"``) that defines it; a name is imported on first access and
    then kept in the package's ``namespace`` (its ``globals()``)."""

    def __getattr__(name: str) -> Any:
        try:
            home = homes[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__
