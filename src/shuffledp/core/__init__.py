"""Small shared types: Estimate, PrivacyStatement, validation errors, RNG policy."""

from .domain import Domain, DomainInferenceWarning
from .errors import OutOfDomainError, ShuffleDPError, ValidationError
from .estimate import Estimate
from .privacy import PrivacyStatement, round_up
from .rng import as_generator, secure_rng, simulation_rng

__all__ = [
    "Domain",
    "DomainInferenceWarning",
    "Estimate",
    "PrivacyStatement",
    "round_up",
    "ShuffleDPError",
    "ValidationError",
    "OutOfDomainError",
    "as_generator",
    "secure_rng",
    "simulation_rng",
]
