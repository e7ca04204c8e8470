"""Error types shared by every layer."""

from __future__ import annotations


class ShuffleDPError(Exception):
    """Base class of all errors raised by shuffledp."""


class ValidationError(ShuffleDPError, ValueError):
    """A public parameter or input is outside its allowed range.

    The message names the parameter and the allowed range, e.g.
    ``"epsilon must be a finite number > 0, got -1.0"``.
    """

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class OutOfDomainError(ValidationError):
    """A parameter combination lies outside the validity domain of a theorem."""
