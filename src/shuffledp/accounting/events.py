"""Privacy events: immutable descriptions of mechanisms (parameters only, no data).

Modelled on dp-accounting's ``DpEvent`` tree. An accountant ``compose``s events; each back end
supports a subset and raises :class:`UnsupportedEventError` for the rest. Parameters are validated
when an event is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..core.errors import ValidationError
from ..core.validation import check_delta, check_epsilon, check_positive_int, check_probability, check_real

__all__ = [
    "PrivacyEvent",
    "UnsupportedEventError",
    "PureDpEvent",
    "ApproxDpEvent",
    "LaplaceEvent",
    "GaussianEvent",
    "RandomizedResponseEvent",
    "ZCdpEvent",
    "PoissonSampledEvent",
    "SelfComposedEvent",
    "ComposedEvent",
    "ParallelComposedEvent",
]


class UnsupportedEventError(ValidationError):
    """The accountant cannot account for this event (or for it under this neighbouring relation)."""


@dataclass(frozen=True)
class PureDpEvent:
    """A mechanism known only to be ``epsilon``-DP."""

    epsilon: float

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)


@dataclass(frozen=True)
class ApproxDpEvent:
    """A mechanism known only to be ``(epsilon, delta)``-DP."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        check_real(self.epsilon, "epsilon", low=0.0)
        check_delta(self.delta, allow_zero=True)


@dataclass(frozen=True)
class LaplaceEvent:
    """Laplace noise of ``scale`` b on a query of L1 sensitivity ``sensitivity`` (eps = sensitivity/b)."""

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        check_real(self.scale, "scale", low=0.0, low_open=True)
        check_real(self.sensitivity, "sensitivity", low=0.0, low_open=True)

    @property
    def epsilon(self) -> float:
        return self.sensitivity / self.scale


@dataclass(frozen=True)
class GaussianEvent:
    """Gaussian noise of standard deviation ``sigma`` on a query of L2 sensitivity ``sensitivity``."""

    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        check_real(self.sigma, "sigma", low=0.0, low_open=True)
        check_real(self.sensitivity, "sensitivity", low=0.0, low_open=True)

    @property
    def mu(self) -> float:
        """sensitivity / sigma (the Gaussian-DP parameter)."""
        return self.sensitivity / self.sigma


@dataclass(frozen=True)
class RandomizedResponseEvent:
    """k-ary randomized response with LDP parameter ``epsilon`` (truth w.p. e^eps/(e^eps+k-1)).

    Needs replace-one neighbours (a user's value changes).
    """

    epsilon: float
    k: int = 2

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_positive_int(self.k, "k", minimum=2)


@dataclass(frozen=True)
class ZCdpEvent:
    """A mechanism satisfying (xi, rho)-zCDP: ``D_a <= xi + rho a`` for all a > 1."""

    rho: float
    xi: float = 0.0

    def __post_init__(self) -> None:
        check_real(self.rho, "rho", low=0.0)
        check_real(self.xi, "xi", low=0.0)


@dataclass(frozen=True)
class PoissonSampledEvent:
    """``event`` run on a Poisson subsample (each record kept w.p. ``sampling_probability``).

    Needs add/remove-one neighbours.
    """

    sampling_probability: float
    event: "PrivacyEvent"

    def __post_init__(self) -> None:
        check_probability(self.sampling_probability, "sampling_probability")
        _check_event(self.event)


@dataclass(frozen=True)
class SelfComposedEvent:
    """``event`` composed with itself ``count`` times (adaptively)."""

    event: "PrivacyEvent"
    count: int

    def __post_init__(self) -> None:
        _check_event(self.event)
        check_positive_int(self.count, "count")


@dataclass(frozen=True)
class ComposedEvent:
    """Sequential (adaptive) composition of ``events``."""

    events: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        for e in self.events:
            _check_event(e)


@dataclass(frozen=True)
class ParallelComposedEvent:
    """``events`` applied to **disjoint** parts of the data (each record reaches one of them)."""

    events: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        if not self.events:
            raise ValidationError("events must be non-empty", parameter="events")
        for e in self.events:
            _check_event(e)


PrivacyEvent = Union[PureDpEvent, ApproxDpEvent, LaplaceEvent, GaussianEvent, RandomizedResponseEvent,
                     ZCdpEvent, PoissonSampledEvent, SelfComposedEvent, ComposedEvent, ParallelComposedEvent]

_EVENT_TYPES = (PureDpEvent, ApproxDpEvent, LaplaceEvent, GaussianEvent, RandomizedResponseEvent, ZCdpEvent,
                PoissonSampledEvent, SelfComposedEvent, ComposedEvent, ParallelComposedEvent)


def _check_event(e: object) -> None:
    if not isinstance(e, _EVENT_TYPES):
        raise ValidationError(f"expected a privacy event, got {type(e).__name__}", parameter="event")
