"""``distinct``: a **project-original** distinct-elements counter (survey §4.4).

The protocol of Balcer, Cheu, Joseph, Mao (SODA 2021) is stated in its abstract only, so this is
not it: one-hot encoding + a robust counter per coordinate (:class:`OneHotCounters`) + a
threshold "non-empty bucket" estimator corrected for empty-bucket false positives. Error
O(sqrt(d)) plus a one-sided bias from coordinates whose count is comparable to the noise.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from scipy import stats

from ..core.estimate import Estimate
from ..core.validation import check_positive_int, check_real
from ._common import check_true_counts
from .base import Protocol
from .one_hot_counters import OneHotCounters

__all__ = ["Distinct", "PROTOCOLS"]


class Distinct(OneHotCounters):
    """``distinct`` — **project-original** distinct-elements counter (not the protocol of Balcer,
    Cheu, Joseph, Mao, "Connecting Robust Shuffle Privacy and Pan-Privacy", SODA 2021, which is
    not reconstructable from its abstract).

    From the per-coordinate robust counts ``c_hat_j`` (see :class:`OneHotCounters`): with
    ``N = #{j : c_hat_j >= theta}`` and the noise's false-positive rate ``f0 = P(eta >= theta)``,
    ``D_hat = (N - d f0)/(1 - f0)``. Then ``E[D_hat] = D - sum_{c_j > 0} P(eta < theta - c_j)/(1 - f0)``:
    unbiased when every present value has a count well above ``theta`` + noise, otherwise biased
    downwards by the expected number of missed small buckets. Variance
    ``sum_j f_j (1 - f_j)/(1 - f0)^2 <= d/(4 (1 - f0)^2)`` (independent coordinates), i.e.
    error O(sqrt(d)) — the same order as BCJM's Theta(sqrt(k)) for robust shuffle privacy.
    ``theta`` (default ``sqrt(Var eta)``) trades the two. Privacy: that of the counters.
    """

    name = "distinct"
    default_counter = "sgm"

    def __init__(self, epsilon: float, delta: float, n: int, *, d: int, gamma: float = 0.5,
                 counter: Literal["bn", "sgm"] | None = None, threshold: float | None = None) -> None:
        super().__init__(epsilon, delta, n, d=d, gamma=gamma, counter=counter)
        self.threshold = (math.sqrt(self.noise_variance()) if threshold is None
                          else check_real(threshold, "threshold"))

    def _tail(self, t: np.ndarray | float, n: int) -> np.ndarray:
        """P(eta >= t) for the (all-honest) noise law with n users."""
        t = np.asarray(t, dtype=np.float64)
        if self.counter == "bn":
            # eta = Bin(n, p) - n p
            return stats.binom.sf(np.ceil(t + n * self.p) - 1, n, self.p)
        R = n * self.shape
        a = self.alpha
        # Z = X - Y, X, Y ~ NB(R, a): P(Z >= t) = sum_y P(Y = y) P(X >= t + y)
        ymax = int(stats.nbinom.isf(1e-16, R, 1 - a)) + 1
        yv = np.arange(ymax + 1)
        py = stats.nbinom.pmf(yv, R, 1 - a)
        tt = np.ceil(t)[..., None] + yv
        return (py * stats.nbinom.sf(tt - 1, R, 1 - a)).sum(axis=-1)

    def false_positive_rate(self, n: int | None = None) -> float:
        return float(self._tail(self.threshold, self.n if n is None else n))

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        n = check_positive_int(n, "n")
        c = self.counts(statistic, n)
        f0 = self.false_positive_rate(n)
        N = int(np.count_nonzero(c >= self.threshold))
        D = (N - self.d * f0) / (1.0 - f0)
        var = self.d / (4.0 * (1.0 - f0) ** 2)
        return Estimate(np.array([D]), math.sqrt(var), n, self.privacy(n), "distinct",
                        extra={"above_threshold": N, "false_positive_rate": f0, "threshold": self.threshold,
                               "bias_note": "one-sided: present values with counts near the threshold are missed"})

    def expected_estimate(self, true_counts: Any) -> tuple[float, float]:
        """Exact (mean, variance) of D_hat for these true counts (all users honest)."""
        c = check_true_counts(true_counts, self.d)
        n = int(c.sum())
        f0 = float(self._tail(self.threshold, n))
        f = self._tail(self.threshold - c, n)
        return (float(f.sum()) - self.d * f0) / (1 - f0), float((f * (1 - f)).sum()) / (1 - f0) ** 2

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Bound d/(4 (1 - f0)^2) on Var(D_hat), whatever the true number of distinct values ``value``."""
        return self.d / (4.0 * (1.0 - self.false_positive_rate(n)) ** 2)


PROTOCOLS: dict[str, type[Protocol]] = {"distinct": Distinct}
