"""The contract of a central mechanism and the fixed-point grid helpers.

A central mechanism is used in two ways, kept apart by the API:

- ``release(true_value)`` — the production path. Noise comes from the exact integer samplers of
  :mod:`shuffledp.central.exact` fed by :mod:`secrets`; any ``rng`` or ``seed`` argument is
  refused with :class:`~shuffledp.core.ValidationError`, so a service cannot be made to release
  reproducible (predictable) noise.
- ``simulate(true_values, rng)`` — the experiment path: vectorized numpy with a caller's seeded
  :class:`numpy.random.Generator`. It may use float samplers (a simulation is not a release);
  each mechanism documents how close its simulation law is to its release law.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ..core.errors import ValidationError
from ..core.privacy import PrivacyStatement
from ..core.validation import check_positive_int, check_real

__all__ = [
    "CentralMechanism",
    "refuse_seed",
    "check_integer_values",
    "check_float_values",
    "default_granularity_exponent",
    "snap_to_grid",
    "fixed_point_encode",
]

#: How fine the default grid is relative to the noise scale: 2^-40 of it (as Google's libraries).
GRID_BITS_BELOW_SCALE = 40


def refuse_seed(rng: object = None, seed: object = None) -> None:
    """Raise unless both are ``None``: release paths draw randomness from the OS only."""
    if rng is not None or seed is not None:
        raise ValidationError("release() does not accept an rng or seed: production noise is drawn "
                              "from the OS (secrets); use simulate(true_values, rng) for experiments",
                              parameter="rng" if rng is not None else "seed")


def check_integer_values(values: Any, name: str = "true_value", *, bound: int = 1 << 62) -> tuple[np.ndarray, bool]:
    """Integer query values (scalar or 1-D) as int64, with ``|v| < bound``; also returns is-scalar."""
    arr = np.asarray(values)
    scalar = arr.ndim == 0
    arr = arr.reshape(-1) if scalar else arr
    if arr.ndim != 1:
        raise ValidationError(f"{name} must be an integer or a 1-D array of integers, got shape {arr.shape}",
                              parameter=name)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise ValidationError(f"{name} must be integers (an integer query), got dtype {arr.dtype}",
                              parameter=name)
    if arr.size and (arr.min() <= -bound or arr.max() >= bound):
        raise ValidationError(f"{name} must have absolute value < 2^{bound.bit_length() - 1}", parameter=name)
    return arr.astype(np.int64, copy=False), scalar


def check_float_values(values: Any, name: str = "true_value") -> tuple[np.ndarray, bool]:
    """Finite real query values (scalar or 1-D) as float64; also returns is-scalar."""
    arr = np.asarray(values)
    scalar = arr.ndim == 0
    arr = arr.reshape(-1) if scalar else arr
    if arr.ndim != 1:
        raise ValidationError(f"{name} must be a number or a 1-D array of numbers, got shape {arr.shape}",
                              parameter=name)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValidationError(f"{name} must be real numbers, got dtype {arr.dtype}", parameter=name)
    arr = arr.astype(np.float64)
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValidationError(f"{name} must be finite, found NaN or inf", parameter=name)
    return arr, scalar


def default_granularity_exponent(noise_scale: float) -> int:
    """k such that the grid 2^k is about 2^-40 of the noise scale: ceil(log2 scale) - 40."""
    return math.ceil(math.log2(noise_scale)) - GRID_BITS_BELOW_SCALE


def snap_to_grid(values: np.ndarray, k: int) -> list[int]:
    """Each value rounded (half to even) to the nearest multiple of 2^k, as exact integers
    (in units of 2^k). Uses exact rational arithmetic, so no float rounding is involved."""
    g = Fraction(2) ** k
    return [round(Fraction(float(v)) / g) for v in values]


def fixed_point_encode(values: Any, lower: float, upper: float, k: int) -> np.ndarray:
    """Clamp real values to [lower, upper] and convert to fixed point on the grid 2^k (int64).

    ``v * 2^-k`` is an exact float operation (scaling by a power of two) and ``rint`` is exact,
    so each code is round(clamp(v) / 2^k). Summing the int64 codes is then exact (overflow is
    checked by the caller from the bounds), which also removes the float-sum sensitivity
    problem of Casacuberta et al. (CCS 2022).
    """
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValidationError("values must be finite, found NaN or inf", parameter="values")
    clamped = np.clip(arr, lower, upper)
    codes = np.rint(np.ldexp(clamped, -k))
    if codes.size and np.abs(codes).max() >= 2.0 ** 62:
        raise ValidationError("values / 2^k must stay below 2^62; use a coarser granularity", parameter="values")
    return codes.astype(np.int64)


class CentralMechanism(ABC):
    """Noise added once by a trusted curator to an exact aggregate.

    Subclasses implement :meth:`release` (exact, OS randomness, refuses seeds),
    :meth:`simulate` (vectorized numpy, seeded), :meth:`_privacy` and :meth:`_variance` (read through
    :meth:`privacy` and :meth:`variance`).
    """

    name: ClassVar[str] = ""

    @abstractmethod
    def release(self, true_value: Any, *, rng: object = None, seed: object = None) -> Any:
        """Production release: true_value + exact noise drawn from the OS."""

    @abstractmethod
    def simulate(self, true_values: Any, rng: np.random.Generator) -> np.ndarray:
        """Vectorized simulation of releases with a caller's generator (never a release)."""

    def privacy(self, n: int | None = None) -> PrivacyStatement:
        """The guarantee of one release (model ``"central"``).

        ``n``, the number of users, is accepted so that every contract (local oracles, protocols,
        central and key-value mechanisms) has one ``privacy(n=None)``; a central mechanism's
        guarantee depends on the query's sensitivity, not on ``n``, so ``n`` is only validated
        (an integer >= 1) and otherwise ignored. Subclasses state their guarantee in
        :meth:`_privacy`.
        """
        if n is not None:
            check_positive_int(n, "n")
        return self._privacy()

    @abstractmethod
    def _privacy(self) -> PrivacyStatement:
        """The guarantee of one release, independent of the number of users."""

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Variance of one released coordinate (in the query's units): the variance of the noise.

        The signature is the one of every contract (local oracles, protocols, key-value
        mechanisms): ``n`` users, true value ``value``. The noise of a central mechanism depends
        on neither, so both are only validated (``n`` an integer >= 1, ``value`` a finite real)
        and otherwise ignored. Subclasses state it in :meth:`_variance`.
        """
        if n is not None:
            check_positive_int(n, "n")
        check_real(value, "value")
        return self._variance()

    @abstractmethod
    def _variance(self) -> float:
        """Variance of the noise added to one coordinate."""

    @staticmethod
    def _check_generator(rng: Any) -> np.random.Generator:
        if not isinstance(rng, np.random.Generator):
            raise ValidationError("simulate() needs an explicit numpy Generator (e.g. "
                                  "shuffledp.core.simulation_rng(seed))", parameter="rng")
        return rng
