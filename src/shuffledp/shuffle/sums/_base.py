"""Shared pieces of the summation protocols: the common base class, message checks, and the
k-ary RR blanket calibration (Balle, Bell, Gascon, Nissim, CRYPTO 2019, Thm 3.1 = the survey's
eq. 8, or the numeric Bennett bound of its §5).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...accounting.shuffle import local_epsilon_for, shuffle_statement
from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from .._common import check_unit_values, krr_local_epsilon, read_only_copy, scalar_estimate, simulation_parts
from ..base import Messages, Protocol

__all__ = ["blanket_gamma", "blanket_gamma_or_none"]


#: Calibrate to a target a hair below the requested epsilon: the stated guarantee is rounded
#: outward (``round_up``: relative 1e-12 + 1 ulp per step), and without this slack the statement
#: of a protocol built from a target came out at target * (1 + 1e-13 .. 1e-12)
#: (tests/shuffle/test_targets_met.py checks ``privacy(n).eps <= target`` with no tolerance).
_CAL = 1.0 - 1e-10


def blanket_gamma(k: int, epsilon: float, delta: float, n: int) -> float:
    """Balle et al. 2019 Thm 3.1 (survey eq. 8) for k-ary RR: ``max(14 k ln(2/delta)/((n-1) eps^2),
    27 k/((n-1) eps))``; valid for eps <= 1 and a result < 1 (OutOfDomainError otherwise)."""
    if epsilon > 1.0:
        raise OutOfDomainError(f"the privacy blanket's Thm 3.1 needs epsilon <= 1, got {epsilon!r}; "
                               "use bound='bennett'", parameter="epsilon")
    if n < 2:
        raise OutOfDomainError("the privacy blanket needs n >= 2", parameter="n")
    g = max(14.0 * k * math.log(2.0 / delta) / ((n - 1) * epsilon**2), 27.0 * k / ((n - 1) * epsilon))
    # a hair more blanket than the formula: at epsilon = 1 the forward bound must not land at
    # 1 + 1 ulp, outside Thm 3.1's domain (more blanket is always safe)
    g *= 1.0 + 1e-12
    if not g < 1.0:
        raise OutOfDomainError(f"blanket probability gamma = {g:.4g} >= 1 for a {k}-ary RR at epsilon={epsilon!r}, "
                               f"delta={delta!r}, n={n}: too few users for this precision", parameter="n")
    return g


def _krr_gamma_bound(k: int, epsilon: float, delta: float, n: int, bound: str) -> tuple[float, str]:
    """Blanket probability of a k-ary RR reaching (epsilon, delta) over n users, and the bound used.

    ``bound="best"``: the smaller blanket (larger eps_l, smaller error) of the closed form (where it
    applies) and the numeric Bennett bound; both are proven bounds, so the guarantee is the same.
    """
    if bound == "closed_form":
        return blanket_gamma(k, epsilon, delta, n), "closed_form"
    # aim 1e-9 below: the numeric inverse and the forward bound's bisection differ in the last digits
    e0 = local_epsilon_for(epsilon * (1.0 - 1e-9), n, delta, method="blanket", bound="bennett", randomizer="krr",
                           k=k)
    g = k / (math.exp(e0) + k - 1.0)
    if bound == "best":
        try:
            gc = blanket_gamma(k, epsilon, delta, n)
        except OutOfDomainError:
            return g, "bennett"
        if gc < g:
            return gc, "closed_form"
    return g, "bennett"


def _krr_statement(k: int, gamma: float, n: int, delta: float, bound: str) -> PrivacyStatement:
    eps_l = krr_local_epsilon(k, gamma)
    return shuffle_statement(eps_l, n, delta, "blanket", bound=bound, randomizer="krr", k=k)


def _check_bound(bound: str) -> str:
    if bound not in ("closed_form", "bennett", "best"):
        raise ValidationError(f"bound must be 'closed_form', 'bennett' or 'best', got {bound!r}", parameter="bound")
    return bound


def _single_column(messages: Messages, col: str, name: str) -> np.ndarray:
    if set(messages) - {"shuffler"} != {col}:
        raise ValidationError(f"{name} messages must have the single column {col!r}", parameter="messages")
    return np.asarray(messages[col])


def _check_int_range(a: np.ndarray, lo: int, hi: int, what: str) -> np.ndarray:
    if a.size and (a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer) or a.min() < lo or a.max() > hi):
        raise ValidationError(f"{what} must be integers in [{lo}, {hi}]", parameter="messages")
    return a.astype(np.int64, copy=False)


class _SumProtocol(Protocol):
    model = "shuffle"
    input_kind = "unit_interval"

    def summarize(self, values: Any) -> np.ndarray:
        """The validated values, as a read-only copy: :meth:`_simulation_parts` may then keep the
        deterministic parts of their rounding for every later release on this summary."""
        return read_only_copy(check_unit_values(values))

    def _simulation_parts(self, data: Any, compute: Callable[[np.ndarray], Any]) -> Any:
        """``compute(check_unit_values(data))``, kept for the next call on the same summary
        (:func:`~shuffledp.shuffle._common.simulation_parts`)."""
        return simulation_parts(self, data, lambda d: compute(check_unit_values(d)))

    def _estimate(self, value: float, n: int, **extra: Any) -> Estimate:
        return scalar_estimate(value, self.variance(n), n, self.privacy(n), "sum", stderr_is_worst_case=True,
                               **extra)


def blanket_gamma_or_none(k: int, epsilon: float, delta: float, n: int) -> float | None:
    """:func:`blanket_gamma`, or None outside Thm 3.1's domain (for precision searches; eps > 1 uses
    the eps = 1 shape)."""
    try:
        return blanket_gamma(k, min(epsilon, 1.0), delta, n)
    except OutOfDomainError:
        return None
