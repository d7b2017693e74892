"""fedrr's own exception types: every rejected input names the field and the allowed range."""

from __future__ import annotations


class FedrrError(Exception):
    """Base class of every error fedrr raises on purpose."""


class ValidationError(FedrrError, ValueError):
    """An input is invalid. ``field`` names it; the message states the allowed range."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __reduce__(self):  # picklable, so it crosses process boundaries (worker pools, Ray) intact
        return (type(self), (self.field, self.message))


class ConvergenceError(FedrrError, RuntimeError):
    """A numerical solver did not reach a valid solution (never returned as a silent zero model)."""


class ExecutorError(FedrrError, RuntimeError):
    """A parallel task could not be completed: its worker died and every retry was used."""


class CleanDataWarning(UserWarning):
    """An estimator that learns from releases was fitted without ``mechanism=``: it read X and y as
    clean records. A warning, not an error, so that the estimators stay scikit-learn estimators
    (``check_estimator`` fits them on plain arrays); silence it where the data are clean on purpose."""
