"""fedrr: learning from locally-private (randomised-response / LDP) data in federated simulations."""

from .errors import ConvergenceError, FedrrError, ValidationError

__version__ = "0.1.0"
__all__ = ["FedrrError", "ValidationError", "ConvergenceError", "__version__"]
