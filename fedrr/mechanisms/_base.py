"""The Mechanism contract: one object that is the client's sampler, the server's likelihood,
and the statement of its own LDP guarantee (ε, δ) for one release."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import ValidationError


@runtime_checkable
class DiscretePosterior(Protocol):
    """Exact p(x | x̃) over a discrete field's k states, batched over the releases (what a discrete
    mechanism's ``posterior`` returns: ``DensePosterior``, ``RRPosterior``)."""

    def proba(self) -> np.ndarray:
        """(..., k) posterior probabilities of the states."""
        ...

    def log_proba(self) -> np.ndarray:
        """(..., k) their logarithms."""
        ...

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Exact draws of x (``size`` leading draws per release), with the given generator."""
        ...


@runtime_checkable
class ContinuousPosterior(Protocol):
    """Exact p(x | x̃) of a numeric field, batched over the releases (what an additive-noise,
    piecewise or snapping mechanism's ``posterior`` returns)."""

    def logpdf(self, x: Any) -> np.ndarray:
        """log p(x | x̃), elementwise."""
        ...

    def mean(self) -> np.ndarray:
        """E[x | x̃] per release."""
        ...

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Exact draws of x (``size`` leading draws per release), with the given generator."""
        ...


class Mechanism(ABC):
    """A local randomiser for one field of a record.

    ``width`` is how many feature columns one release covers: 1 for a scalar (discrete
    randomised response, or a numeric mechanism on one feature); d for a numeric mechanism
    calibrated jointly on a block of d features. ``epsilon``/``delta`` are the guarantee of one
    release of that field (the whole block for a numeric block).
    """

    #: short name used in specs ("randomized_response", "laplace", ...)
    kind: str = ""

    @property
    @abstractmethod
    def epsilon(self) -> float:
        """ε of one release of this field."""

    @property
    def delta(self) -> float:
        """δ of one release of this field (0 for pure ε-LDP)."""
        return 0.0

    @property
    def width(self) -> int:
        return 1

    def marginal(self, j: int) -> Mechanism:
        """The width-1 mechanism of column ``j`` alone (what the server's per-column posteriors use):
        the mechanism itself for a scalar one; additive-noise blocks with independent coordinates
        override it. Its stated ε, δ are the whole field's (releasing one column is post-processing)."""
        if self.width == 1:
            return self
        raise ValidationError(
            "mechanism", f"{type(self).__name__} of width {self.width} has no per-column marginal mechanism"
        )

    @abstractmethod
    def release(self, x: Any, rng: np.random.Generator) -> np.ndarray:
        """Client side: one noisy release of ``x`` (vectorised over leading axes)."""

    def sample_valid(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``release`` of values already returned by ``validate_input`` with a checked generator: the
        same draws, without validating again (``RecordMechanism`` validates a record once)."""
        return self.release(x, rng)

    @abstractmethod
    def log_likelihood(self, x_tilde: Any, x: Any) -> np.ndarray:
        """Server side: log p(x̃ | x), elementwise (broadcast), a density for numeric fields."""

    @abstractmethod
    def posterior(self, x_tilde: Any, prior: Any) -> DiscretePosterior | ContinuousPosterior:
        """Exact p(x | x̃) under a factorised prior: a ``DiscretePosterior`` (discrete fields) or a
        ``ContinuousPosterior`` (numeric fields)."""

    @abstractmethod
    def validate_input(self, x: Any, field: str = "x") -> np.ndarray:
        """Check clean values are in the mechanism's domain; return them as an array."""

    @abstractmethod
    def validate_release(self, x_tilde: Any, field: str = "x_tilde") -> np.ndarray:
        """Check released values could have come from this mechanism; return them as an array."""

    @abstractmethod
    def to_spec(self) -> dict:
        """A JSON-serialisable description; ``mechanism_from_spec`` inverts it exactly."""

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.to_spec().items() if k != "kind")
        return f"{type(self).__name__}({params})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and _spec_equal(self.to_spec(), other.to_spec())

    def __hash__(self) -> int:
        return hash(repr(self))


def box_spec(mech: Mechanism, epsilon: Any, lower: Any, upper: Any, **extra: Any) -> dict:
    """The spec of a mechanism of ε on the box [lower, upper]: kind, epsilon, lower, upper, then ``extra``."""
    return {"kind": mech.kind, "epsilon": epsilon, "lower": lower, "upper": upper, **extra}


def _spec_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_spec_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_spec_equal(x, y) for x, y in zip(a, b))
    return a == b


_REGISTRY: dict[str, type] = {}
#: the modules whose classes ``register`` their kinds (the package loads its names lazily, so a spec
#: read first in a process would otherwise meet an empty registry)
_REGISTERING = (
    "_discrete",
    "_hashing",
    "_numeric",
    "_paired",
    "_piecewise",
    "_record",
    "_snapping",
    "_triple",
    "_unary",
)


def registry() -> dict[str, type]:
    """Every registered kind and its class, each registering module imported first."""
    from importlib import import_module

    for name in _REGISTERING:
        import_module(f"{__package__}.{name}")
    return _REGISTRY


def register(cls):
    """Class decorator: make a mechanism constructible from its spec."""
    _REGISTRY[cls.kind] = cls
    return cls


def _from_kind(classes: dict[str, type], kind: Any, spec: dict, unknown: str) -> Any:
    """``classes[kind].from_spec(spec)``: a kind that is not a key of ``classes`` is refused with
    ``ValidationError("spec.kind", unknown)``, a parameter missing from the spec with
    ``ValidationError("spec.<name>", ...)``."""
    if not isinstance(kind, str) or kind not in classes:
        raise ValidationError("spec.kind", unknown)
    try:
        return classes[kind].from_spec(spec)
    except KeyError as exc:  # from_spec reads its parameters with spec[...]
        raise ValidationError(f"spec.{exc.args[0]}", f"is missing from the {kind!r} spec") from None


def mechanism_from_spec(spec: dict) -> Mechanism:
    """Rebuild a mechanism from ``to_spec()`` output; unknown kinds are rejected."""
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ValidationError("spec", "must be a dict with a 'kind' entry")
    kind, kinds = spec["kind"], registry()
    return _from_kind(kinds, kind, spec, f"unknown mechanism {kind!r}; known: {sorted(kinds)}")
