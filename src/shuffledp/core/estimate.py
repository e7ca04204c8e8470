"""The result type of every analyzer: estimates with error bars and a privacy statement."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import ValidationError
from .privacy import PrivacyStatement

__all__ = ["Estimate"]


@dataclass(frozen=True)
class Estimate:
    """Unbiased estimates with standard errors and the privacy statement of the release.

    Attributes
    ----------
    values : numpy.ndarray
        The (raw, unbiased) estimates: fractions of users per item for frequency oracles,
        the mean for mean oracles, counts or sums where a protocol says so.
    stderr : numpy.ndarray
        Standard error of each value (closed form from the mechanism's variance, evaluated
        at the estimate clipped to the valid range).
    n : int
        Number of users the estimate is based on.
    privacy : PrivacyStatement
        The guarantee this release carries.
    kind : str
        What ``values`` are: ``"frequency"``, ``"mean"``, ``"count"``, ``"sum"``, ...
    """

    values: np.ndarray
    stderr: np.ndarray
    n: int
    privacy: PrivacyStatement
    kind: str = "frequency"
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        v = np.atleast_1d(np.asarray(self.values, dtype=np.float64))
        s = np.broadcast_to(np.asarray(self.stderr, dtype=np.float64), v.shape).copy()
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "stderr", s)

    def ci(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation confidence interval (lower, upper) at the given level."""
        if not (0.0 < level < 1.0):
            raise ValidationError(f"level must lie in (0, 1), got {level!r}", parameter="level")
        from scipy import stats

        z = float(stats.norm.ppf(0.5 + level / 2.0))
        return self.values - z * self.stderr, self.values + z * self.stderr

    def counts(self) -> np.ndarray:
        """Estimated counts (values times n) for frequency estimates."""
        return self.values * self.n

    def clipped(self, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """Post-processing: values clipped to [low, high] (no longer unbiased)."""
        return np.clip(self.values, low, high)
