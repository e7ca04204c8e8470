"""``hist_mm`` (Hist_MM): Balcer & Cheu's P^hist, the zero-sum counter P^zsum on every coordinate
("Separating Local & Shuffled Differential Privacy via Histograms", ITC 2020, §3).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import OutOfDomainError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, round_up
from .._common import sampled_blanket
from ..base import Messages, Protocol, bits_for
from ._base import HistogramProtocol, _CELLS, _MARGIN

__all__ = ["HistMM", "PROTOCOLS"]


class HistMM(HistogramProtocol):
    """Hist_MM: Balcer & Cheu's P^hist, the zero-sum counter P^zsum on each coordinate.

    Each user sends her label ``x`` once, and every label ``j`` in [d] once more with probability
    ``p`` (``1 + Bin(d, p)`` messages of ceil(log2 d) bits). Per coordinate this is P^zsum at
    ``(eps/2, delta/2)``::

        p = 1 - 50 ln(2/delta') / (eps'^2 n) = 1 - 200 ln(4/delta) / (eps^2 n)

    valid for ``eps' <= 1`` (``epsilon <= 2``) and ``n >= 100 ln(2/delta')/eps'^2`` (i.e.
    ``1 - p <= 1/2``). Analyzer: ``c^_j = |y_j| - n p`` if ``|y_j| > n`` else 0 (the truncation
    makes zero counts exact and biases counts below about ``n (1-p)`` towards 0).

    Privacy: (epsilon, delta)-DP central (one user moves two coordinates: 2 x (eps/2, delta/2));
    **no local DP** (a user's label is always sent). Source: Balcer & Cheu, ITC 2020, §3.
    Error (no truncation): ``Var = n p (1-p)`` exactly (``|y_j| = c_j + Bin(n, p)``), independent
    of d.
    """

    name = "hist_mm"

    def __init__(self, epsilon: float, delta: float, n: int, d: int) -> None:
        super().__init__(epsilon, delta, n, d)
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 2.0:
            raise OutOfDomainError(f"hist_mm (Balcer-Cheu P^zsum at eps/2 per coordinate) needs epsilon <= 2, "
                                   f"got {eps!r}", parameter="epsilon")
        n_min = 400.0 * math.log(4.0 / delta) / eps**2
        if n < n_min:
            raise OutOfDomainError(f"hist_mm needs n >= 400 ln(4/delta)/epsilon^2 = {math.ceil(n_min)} users "
                                   f"for epsilon={eps!r}, delta={delta!r}; got n={n}", parameter="n")
        # eps' stays <= 1 at eps = 2; rounded up to the 2^-53 grid, so 1 - p is sampled exactly
        self.one_minus_p = sampled_blanket(200.0 * math.log(4.0 / delta) / (eps**2 * n) * _MARGIN)
        self.p = 1.0 - self.one_minus_p

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = self.check_values(values)
        parts = [x]
        step = max(1, _CELLS // self.d)
        for lo in range(0, x.shape[0], step):  # chunks of users
            m = min(step, x.shape[0] - lo)
            parts.append(np.nonzero(rng.random((m, self.d)) < self.p)[1].astype(np.int64))
        return {"y": np.concatenate(parts)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        return np.bincount(self._column(messages, "y", self.d), minlength=self.d).astype(np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        stat = np.asarray(statistic, dtype=np.float64)
        est = np.where(stat > n, stat - n * self.p, 0.0)
        return self._estimate(est, np.full(self.d, self.variance(n)), n, truncated=stat <= n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact: ``|y_j| = c_j + Bin(n, p)`` independently per label; O(d)."""
        c = self.check_counts(data)
        return c + rng.binomial(int(c.sum()), self.p, size=self.d)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """``n p (1-p)``: the exact variance for counts above the truncation (``value`` unused)."""
        return self._n_of(n) * self.p * self.one_minus_p

    def _privacy(self, n: int) -> PrivacyStatement:
        mass = n * self.one_minus_p  # mean of the Bin(n, 1-p) smoothing noise
        eps_c = math.sqrt(50.0 * math.log(4.0 / self.delta) / mass)
        if eps_c > 1.0 or self.one_minus_p > 0.5:
            return PrivacyStatement(math.inf, 0.0, model="shuffle",
                                    note=f"hist_mm: P^zsum's condition fails at n={n} and there is no local DP")
        return PrivacyStatement(round_up(2.0 * eps_c), self.delta, model="shuffle",
                                note=f"hist_mm: Balcer-Cheu P^zsum (eps'={eps_c:.6g}, delta/2) per coordinate, x2")

    @property
    def messages_per_user(self) -> float:
        return 1.0 + self.d * self.p

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.d)


PROTOCOLS: dict[str, type[Protocol]] = {"hist_mm": HistMM}
