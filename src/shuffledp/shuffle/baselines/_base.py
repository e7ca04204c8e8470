"""Input checks and the common local/central base classes of the baselines.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...central.distributions import simulate_discrete_laplace
from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_int_values, check_positive_int
from ..base import Messages, Protocol

__all__ = []


# ----------------------------------------------------------------------------- helpers

def _bits(values: Any) -> np.ndarray:
    """Users' bits (0/1 ints or bools) as int64; floats and other types are refused."""
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValidationError(f"values must be a 1-D array of bits, got shape {arr.shape}", parameter="values")
    if arr.dtype == np.bool_:
        return arr.astype(np.int64)
    return check_int_values(arr, 2, "values")


def _stat(statistic: Any, length: int) -> np.ndarray:
    s = np.asarray(statistic)
    if s.shape != (length,) or s.dtype == np.bool_ or not (np.issubdtype(s.dtype, np.integer)
                                                            or np.issubdtype(s.dtype, np.floating)):
        raise ValidationError(f"statistic must be a numeric array of shape ({length},), got shape {s.shape}",
                              parameter="statistic")
    if not np.all(np.isfinite(s)):
        raise ValidationError("statistic must be finite", parameter="statistic")
    return s


def _columns(messages: Messages, expected: set[str], name: str) -> None:
    if set(messages) - {"shuffler"} != expected:
        raise ValidationError(f"{name} messages must have the columns {sorted(expected)}, got {sorted(messages)}",
                              parameter="messages")


def _blanket_counts(counts: np.ndarray, p: float, q: float, rng: np.random.Generator) -> np.ndarray:
    """Exact law of the GRR support counts given the true counts, in O(d).

    GRR with keep probability p and q = (1 - p)/(d - 1) for every other item is the blanket form
    "keep w.p. 1 - lam, else report a uniform item of all d" with lam = d q (P[y = x] =
    1 - lam + lam/d = p). Kept reports are Binomial(c_j, 1 - lam) per item, the others one
    Multinomial(n - kept, uniform) over the d items.
    """
    d = counts.size
    lam = d * q
    kept = rng.binomial(counts, 1.0 - lam)
    rest = int(counts.sum() - kept.sum())
    return kept + rng.multinomial(rest, np.full(d, 1.0 / d))


class _LocalBaseline(Protocol):
    """Common part of the local-model baselines: one eps_l = eps_c report per user."""

    model = "local"

    def _privacy(self, n: int) -> PrivacyStatement:
        """Each report is eps-LDP (eps_l = eps_c), hence the analyzer's whole view is eps-DP."""
        return PrivacyStatement(self.epsilon, 0.0, "local",
                                note=f"{self.name}: every report is eps-LDP with eps_l = eps_c (no shuffler)")

    @property
    def messages_per_user(self) -> float:
        return 1.0


class _CentralBaseline(Protocol):
    """A trusted curator: users send raw values, the curator releases aggregate + exact noise."""

    model = "central"

    @property
    def messages_per_user(self) -> float:
        return 1.0



class _DiscreteLaplaceRelease(_CentralBaseline):
    """A curator that releases ``released_counts`` integer counts, each plus i.i.d. exact discrete
    Laplace noise from ``self.mechanism`` (a :class:`~shuffledp.central.DiscreteLaplaceMechanism`)."""

    mechanism: Any
    #: how many counts the curator releases (the statistic's length)
    released_counts: int = 1

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = _stat(statistic, self.released_counts)
        n = check_positive_int(n, "n")
        return Estimate(np.asarray(s, dtype=np.float64), math.sqrt(self.variance(n)), n, self.privacy(n), "count")

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """The curator's noise variance: exact, independent of ``n`` and of the true ``value``."""
        return self.mechanism.variance()

    def noise_pmf(self, z: Any) -> np.ndarray:
        return self.mechanism.noise_pmf(z)

    def _simulated_release(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``counts`` plus the release noise, drawn with a seeded generator (simulation only)."""
        return counts + simulate_discrete_laplace(float(self.mechanism.scale), self.released_counts, rng)