"""The client side of the central model: each user's exact value, for a trusted curator.

In the central model a client sends its value unchanged (a deployment seals it to the analyzer
and shuffles it like any report); the curator aggregates the exact histogram and adds noise
once, when it releases (:mod:`shuffledp.central.mechanisms`, a query budget per task). The
report carries no local guarantee: :class:`ExactHistogramInput` states ``eps = inf`` for one
report, and the exact aggregate's estimate is internal, never a release.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from ..core.validation import check_int_values

__all__ = ["ExactHistogramInput"]


class ExactHistogramInput:
    """Reports an item of ``[0, d)`` unchanged (column ``"y"``, int64); aggregate: its histogram.

    ``model="central"``: a central-mode task's input (the curator adds the noise per query).
    ``model="none"``: a test deployment's input, where each simulated client sends a unique
    value so the aggregated histogram is all ones iff every acknowledged report was counted
    exactly once (0 = loss, 2 = double count). Neither gives a local guarantee.
    """

    epsilon = math.inf

    def __init__(self, d: int, model: str = "central") -> None:
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValidationError(f"d must be an int >= 1, got {d!r}", parameter="d")
        if model not in ("central", "none"):
            raise ValidationError(f"model must be 'central' or 'none', got {model!r}", parameter="model")
        self.d, self.model = d, model
        self.name = "central_histogram" if model == "central" else "test_identity"

    def randomize(self, values: Any, rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
        """The values themselves (checked to lie in ``[0, d)``); ``rng`` is not used."""
        return {"y": check_int_values(values, self.d).astype(np.int64)}

    def report_schema(self) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
        """One int64 column ``"y"``."""
        return (("y", "<i8", ()),)

    def validate_reports(self, reports: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if set(reports) != {"y"}:
            raise ValidationError("reports must have exactly the field 'y'", parameter="reports")
        return {"y": check_int_values(reports["y"], self.d, "y")}

    def aggregate(self, reports: dict[str, np.ndarray]) -> np.ndarray:
        return np.bincount(reports["y"], minlength=self.d).astype(np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """The exact fractions (internal: a central-mode release adds noise to the counts)."""
        note = "exact aggregate (internal)" if self.model == "central" else "test input: no privacy"
        return Estimate(np.asarray(statistic, dtype=float) / max(n, 1), np.zeros(self.d), n,
                        PrivacyStatement(math.inf, 0.0, "central" if self.model == "central" else "local",
                                         note=note))

    def __repr__(self) -> str:
        return f"ExactHistogramInput(d={self.d}, model={self.model!r})"
