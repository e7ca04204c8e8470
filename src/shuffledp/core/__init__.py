"""Small shared types: Estimate, PrivacyStatement, validation errors, RNG policy."""

from .batch import Columns, concat_rows, n_rows, take_rows
from .errors import OutOfDomainError, ShuffleDPError, ValidationError
from .estimate import Estimate
from .privacy import PrivacyStatement, round_up
from .rng import as_generator, secure_rng, simulation_rng
from .domain import Domain, DomainInferenceWarning  # noqa: I001 (after rng: domain uses errors only)

__all__ = [
    "Columns",
    "concat_rows",
    "n_rows",
    "take_rows",
    "Estimate",
    "PrivacyStatement",
    "round_up",
    "ShuffleDPError",
    "ValidationError",
    "OutOfDomainError",
    "as_generator",
    "secure_rng",
    "simulation_rng",
    "Domain",
    "DomainInferenceWarning",
]
