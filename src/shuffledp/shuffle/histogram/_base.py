"""Shared pieces of the histogram protocols: input handling (:class:`HistogramProtocol`), the
estimator and exact variance of a pure (p*, q*) oracle with fake reports
(:class:`_PureOracleMixin`), and the privacy-blanket arithmetic of Balle, Bell, Gascon,
Nissim, "The Privacy Blanket of the Shuffle Model", CRYPTO 2019, Thm 3.1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_domain_size, check_int_values, check_positive_int
from ..base import Messages, Protocol

__all__ = ["HistogramProtocol", "blanket_epsilon", "blanket_required"]


_CELLS = 1 << 22  # cells per chunk on O(n * d) client paths


def blanket_required(epsilon: float, delta: float) -> float:
    """Blanket size per value needed by BBGN19 Thm 3.1: ``max(14 ln(2/delta)/eps^2, 27/eps)``."""
    return max(14.0 * math.log(2.0 / delta) / epsilon**2, 27.0 / epsilon)


#: relative extra blanket used when calibrating, so that the forward bound evaluated in floating
#: point does not land an ulp above the target (and, at eps = 1, outside Thm 3.1's domain). It must
#: also outweigh the statements' outward rounding (``round_up``: relative 1e-12 + 1 ulp, applied up
#: to twice, e.g. fragmenting's composition): eps ~ c^-1/2 drops by 5e-12 here. With 1e-12 the
#: stated eps was target * (1 + 5e-13).
_MARGIN = 1.0 + 1e-11


def blanket_epsilon(c: float, delta: float) -> float:
    """Central eps certified by a blanket of expected size ``c`` per value (BBGN19 Thm 3.1 proof):
    the smallest eps with ``c >= max(14 ln(2/delta)/eps^2, 27/eps)``. Valid only when <= 1."""
    if c <= 0:
        return math.inf
    return max(math.sqrt(14.0 * math.log(2.0 / delta) / c), 27.0 / c)


def _local_statement(eps_l: float, why: str) -> PrivacyStatement:
    return PrivacyStatement(eps_l, 0.0, model="shuffle", note=f"only the local guarantee eps_l={eps_l:.6g} ({why})")


class HistogramProtocol(Protocol):
    """Common input handling of the histogram protocols (values: ints in [0, d)).

    ``summarize(values)`` is the vector of true counts; ``estimate`` returns counts;
    ``variance(n, value)`` is the variance (or stated squared error) of one item's estimated
    count when its true count is ``value``.
    """

    input_kind = "categorical"

    def __init__(self, epsilon: float, delta: float, n: int, d: int) -> None:
        super().__init__(epsilon, delta, n)
        if self.delta <= 0:
            raise ValidationError(f"{self.name} is an approximate-DP protocol: delta must lie in (0, 1)",
                                  parameter="delta")
        self.d = check_domain_size(d)

    # --- input ------------------------------------------------------------------------
    def check_values(self, values: Any) -> np.ndarray:
        return check_int_values(values, self.d)

    def summarize(self, values: Any) -> np.ndarray:
        return np.bincount(self.check_values(values), minlength=self.d).astype(np.int64)

    def check_counts(self, data: Any) -> np.ndarray:
        c = np.asarray(data)
        if c.shape != (self.d,) or not np.issubdtype(c.dtype, np.integer) or (c.size and c.min() < 0):
            raise ValidationError(f"true counts must be {self.d} non-negative integers", parameter="data")
        return c.astype(np.int64)

    def _column(self, messages: Messages, key: str, high: int) -> np.ndarray:
        if key not in messages:
            raise ValidationError(f"{self.name} messages need a {key!r} column, got {sorted(messages)}",
                                  parameter="messages")
        col = np.asarray(messages[key])
        if col.size and np.issubdtype(col.dtype, np.unsignedinteger):
            if int(col.max()) >= high:
                raise ValidationError(f"column {key!r} must hold integers in [0, {high})", parameter="messages")
            return col.astype(np.int64)
        return check_int_values(col, high, key)

    def _estimate(self, values: np.ndarray, var: np.ndarray, n: int, **extra: Any) -> Estimate:
        return Estimate(values, np.sqrt(np.maximum(var, 0.0)), n, self.privacy(n), kind="count", extra=extra)

    def _n_of(self, n: int | None) -> int:
        return self.n if n is None else check_positive_int(n, "n")


class _PureOracleMixin:
    """Estimator and exact variance of a pure (p*, q*) oracle plus a fixed number of fakes.

    ``C_j = Bin(c_j, p*) + Bin(n - c_j, q*) + Bin(n_fake, pi_f)`` (independent users/fakes);
    ``c^_j = (C_j - n q* - n_fake pi_f) / (p* - q*)`` is unbiased and
    ``Var = [c p*(1-p*) + (n-c) q*(1-q*) + n_fake pi_f(1-pi_f)] / (p*-q*)^2`` exactly.
    """

    p_star: float
    q_star: float
    fake_total: int = 0
    fake_support: float = 0.0

    def _debias(self, stat: np.ndarray, n: int) -> np.ndarray:
        return (np.asarray(stat, dtype=np.float64) - n * self.q_star - self.fake_total * self.fake_support) / (
            self.p_star - self.q_star)

    def _var_counts(self, n: int, c: np.ndarray | float) -> np.ndarray:
        p, q, f = self.p_star, self.q_star, self.fake_support
        c = np.clip(np.asarray(c, dtype=np.float64), 0.0, n)
        return (c * p * (1 - p) + (n - c) * q * (1 - q) + self.fake_total * f * (1 - f)) / (p - q) ** 2
