"""Server-side estimators: they see releases and mechanisms, never clean data."""

from .frequencies import estimate_frequencies, project_to_simplex, warner_estimate

__all__ = ["estimate_frequencies", "project_to_simplex", "warner_estimate"]
