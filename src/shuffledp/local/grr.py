"""Generalized randomized response (k-RR, direct encoding)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import ValidationError
from ..core.estimate import Estimate
from ..core.privacy import PrivacyStatement
from .base import FrequencyOracle, Reports, check_n
from .bits import UNIFORM_PRECISION, calibrate_probability

__all__ = ["GeneralizedRandomizedResponse"]


class GeneralizedRandomizedResponse(FrequencyOracle):
    """Generalized randomized response (GRR / k-RR / direct encoding).

    Each user reports her true value with probability ``p`` and each other value with
    probability ``q = (1 - p) / (d - 1)``. Ideally ``p = e^eps / (e^eps + d - 1)``; the sampled
    ``p`` is that value rounded **down** to the ``2^-53`` grid (then ``rng.random() < p`` draws it
    exactly, and the other value is an exact uniform integer draw), lowered further by grid steps
    until ``p (d-1) / (1-p) <= e^eps`` holds in exact arithmetic.

    Privacy: exactly ``effective_epsilon``-LDP, ``effective_epsilon = ln(p (d-1) / (1-p)) <=
    epsilon`` for the sampled ``p`` (rounded up); the privacy statement carries it, and the
    estimator, variance and :meth:`probabilities` use the sampled ``p`` and ``q``.
    Source: Warner 1965; Kairouz et al. 2014; Wang, Blocki, Li, Jha, USENIX Security 2017.
    Cost: O(n) encode, O(n) aggregate (a bincount); ceil(log2 d) bits per report.
    Variance of one fraction: [q(1-q) + f(1-p-q)(p-q)] / (n (p-q)^2).
    """

    name = "grr"

    def __init__(self, epsilon: float, d: int) -> None:
        super().__init__(epsilon, d)
        e = math.exp(self.epsilon) if self.epsilon < 700.0 else math.inf
        p_ideal = e / (e + self.d - 1) if e < math.inf else 1.0
        others = self.d - 1
        p, self.effective_epsilon = calibrate_probability(p_ideal, self.epsilon,
                                                          lambda t: t * others / (1 - t), "down")
        #: exact sampled probabilities (``p`` is a double on the 2^-53 grid)
        self.p_exact, self.q_exact = p, (1 - p) / others
        self.p = float(p)
        self.q = float(self.q_exact)

    def _privacy(self) -> PrivacyStatement:
        """Each report is ``effective_epsilon``-LDP (replace-one), ``effective_epsilon <= epsilon``."""
        return PrivacyStatement(self.effective_epsilon, 0.0, "local", "replace_one",
                                note=f"GeneralizedRandomizedResponse: p={self.p!r} on the grid 2^-{UNIFORM_PRECISION}; "
                                     f"exact eps of the sampled p <= requested {self.epsilon:g}")

    def randomize(self, values: Any, rng: np.random.Generator) -> Reports:
        x = self.check_values(values)
        keep = rng.random(x.shape[0]) < self.p  # exact Bernoulli(p): p is on the 2^-53 grid
        r = rng.integers(0, self.d - 1, size=x.shape[0])
        y = np.where(keep, x, r + (r >= x))
        return {"y": y.astype(np.int64)}

    def validate_reports(self, reports: Reports) -> Reports:
        if set(reports) != {"y"}:
            raise ValidationError("GRR reports must have exactly the field 'y'", parameter="reports")
        return {"y": self._check_y(reports["y"])}

    def _check_y(self, y: Any) -> np.ndarray:
        from ..core.validation import check_int_values

        return check_int_values(y, self.d, "y")

    def aggregate(self, reports: Reports) -> np.ndarray:
        return np.bincount(reports["y"], minlength=self.d).astype(np.int64)

    def _recorded_users(self, statistic: np.ndarray) -> float:
        """Every report adds 1 to one item's count: the counts sum to n."""
        return float(np.sum(statistic))

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        return self._pure_estimate(statistic, n, self.p, self.q)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        return self._pure_variance(check_n(n), value, self.p, self.q)

    def probabilities(self, reports: Reports, x: Any) -> np.ndarray:
        """``Pr[y | x]``: the sampled ``p`` if ``y = x``, else ``q = (1-p)/(d-1)``."""
        y = np.asarray(reports["y"])
        return np.where(y == int(x), self.p, self.q)

    def simulate_statistic(self, true_counts: Any, rng: np.random.Generator) -> np.ndarray:
        """Exact aggregate simulation in O(d^2), independent of n.

        Item i's kept reports are Binomial(n_i, p); its n_i - kept flipped reports are
        Multinomial over the other d - 1 items. Sources are processed in blocks of rows so
        memory stays O(block * d).
        """
        c = self.check_counts(true_counts)
        kept = rng.binomial(c, self.p)
        flipped = c - kept
        out = kept.astype(np.int64)
        d, block = self.d, max(1, (1 << 22) // self.d)
        for s in range(0, d, block):  # blocks of source items, not a per-item loop
            rows = np.arange(s, min(d, s + block))
            probs = np.full((rows.size, d), 1.0 / (d - 1))
            probs[np.arange(rows.size), rows] = 0.0
            out += rng.multinomial(flipped[rows], probs).sum(axis=0)
        return out
