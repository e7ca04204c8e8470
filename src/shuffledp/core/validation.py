"""Validation at the edge: every public constructor and entry point checks its inputs here.

Each function raises :class:`~shuffledp.core.errors.ValidationError` whose message names the
parameter and the allowed range. Inner code trusts validated inputs.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np

from .errors import ValidationError

__all__ = [
    "check_epsilon",
    "check_delta",
    "check_positive_int",
    "check_domain_size",
    "check_probability",
    "check_real",
    "check_int_values",
    "check_real_values",
    "check_order",
]


def _is_real_scalar(x: Any) -> bool:
    return isinstance(x, (Real, np.floating, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_real(x: Any, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``x`` as a float after checking it is a finite real within the given bounds."""
    if not _is_real_scalar(x):
        raise ValidationError(f"{name} must be a real number, got {x!r}", parameter=name)
    v = float(x)
    if not math.isfinite(v):
        raise ValidationError(f"{name} must be finite, got {v!r}", parameter=name)
    lo_ok = low is None or (v > low if low_open else v >= low)
    hi_ok = high is None or (v < high if high_open else v <= high)
    if not (lo_ok and hi_ok):
        lb = "-inf" if low is None else repr(low)
        hb = "inf" if high is None else repr(high)
        rng = f"{'(' if low_open or low is None else '['}{lb}, {hb}{')' if high_open or high is None else ']'}"
        raise ValidationError(f"{name} must lie in {rng}, got {v!r}", parameter=name)
    return v


def check_epsilon(eps: Any, name: str = "epsilon") -> float:
    """A privacy parameter eps: finite and > 0."""
    if not _is_real_scalar(eps) or not math.isfinite(float(eps)) or float(eps) <= 0:
        raise ValidationError(f"{name} must be a finite number > 0, got {eps!r}", parameter=name)
    return float(eps)


def check_delta(delta: Any, name: str = "delta", *, allow_zero: bool = False) -> float:
    """A privacy parameter delta in (0, 1) (or [0, 1) with ``allow_zero``)."""
    if not _is_real_scalar(delta) or not math.isfinite(float(delta)):
        raise ValidationError(f"{name} must be a number in {'[' if allow_zero else '('}0, 1), got {delta!r}",
                              parameter=name)
    v = float(delta)
    if not ((0 <= v if allow_zero else 0 < v) and v < 1):
        raise ValidationError(f"{name} must be a number in {'[' if allow_zero else '('}0, 1), got {delta!r}",
                              parameter=name)
    return v


def check_probability(p: Any, name: str, *, open_low: bool = False, open_high: bool = False) -> float:
    """A probability in [0, 1] (ends optionally open)."""
    return check_real(p, name, low=0.0, high=1.0, low_open=open_low, high_open=open_high)


def check_positive_int(k: Any, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (bools and non-integral floats are rejected)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (Integral, np.integer)):
        raise ValidationError(f"{name} must be an integer >= {minimum}, got {k!r}", parameter=name)
    if int(k) < minimum:
        raise ValidationError(f"{name} must be an integer >= {minimum}, got {int(k)}", parameter=name)
    return int(k)


def check_domain_size(d: Any, name: str = "d") -> int:
    """A domain size d >= 2."""
    return check_positive_int(d, name, minimum=2)


def check_order(alpha: Any, name: str = "alpha") -> float:
    """A Renyi order alpha > 1."""
    return check_real(alpha, name, low=1.0, low_open=True)


def check_int_values(values: Any, d: int, name: str = "values") -> np.ndarray:
    """Users' categorical inputs: a 1-D integer array with entries in [0, d).

    Floats (even integral ones), bools, strings and objects are rejected so that a
    mis-typed column never silently becomes a wrong category. Returns an int64 array.
    """
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValidationError(f"{name} must be a 1-D array of integers, got shape {arr.shape}", parameter=name)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if arr.size == 0 and arr.dtype == np.float64:
            return arr.astype(np.int64)
        raise ValidationError(f"{name} must be integers in [0, {d}), got dtype {arr.dtype}", parameter=name)
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi >= d:
            bad = lo if lo < 0 else hi
            raise ValidationError(f"{name} must be integers in [0, {d}), found {int(bad)}", parameter=name)
    return arr.astype(np.int64, copy=False)


def check_real_values(values: Any, low: float = -1.0, high: float = 1.0, name: str = "values",
                      *, ndim: int = 1) -> np.ndarray:
    """Users' numeric inputs: a float array (``ndim`` 1 or 2) with finite entries in [low, high]."""
    arr = np.asarray(values)
    if ndim == 1 and arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != ndim:
        raise ValidationError(f"{name} must be a {ndim}-D numeric array, got shape {arr.shape}", parameter=name)
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValidationError(f"{name} must be numbers in [{low}, {high}], got dtype {arr.dtype}", parameter=name)
    arr = arr.astype(np.float64, copy=False)
    if arr.size:
        if not np.all(np.isfinite(arr)):
            raise ValidationError(f"{name} must be finite numbers in [{low}, {high}], found NaN or inf",
                                  parameter=name)
        lo, hi = arr.min(), arr.max()
        if lo < low or hi > high:
            bad = lo if lo < low else hi
            raise ValidationError(f"{name} must be numbers in [{low}, {high}], found {float(bad)!r}",
                                  parameter=name)
    return arr
