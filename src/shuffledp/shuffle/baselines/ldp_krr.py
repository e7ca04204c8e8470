"""``ldp_krr``: k-ary randomized response in the local model, eps_l = eps_c.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.estimate import Estimate
from ...core.validation import check_domain_size, check_int_values, check_positive_int
from ...local.grr import GeneralizedRandomizedResponse
from .._common import check_true_counts
from ..base import Messages, Protocol, bits_for
from ._base import _blanket_counts, _columns, _LocalBaseline, _stat

__all__ = ["LdpKRR", "PROTOCOLS"]


class LdpKRR(_LocalBaseline):
    """``ldp_krr``: k-ary (generalized) randomized response in the local model, eps_l = eps_c.

    Each user reports its value x in [0, d) w.p. ``p = e^eps/(e^eps + d - 1)``, any other value
    w.p. ``q = 1/(e^eps + d - 1)``. Per-item counts ``c_hat_j = (C_j - n q)/(p - q)`` are
    unbiased with ``Var = [n q (1 - q) + c_j (1 - p - q)(p - q)]/(p - q)^2``.
    ``variance(n, value)`` is that variance for an item held by ``value`` users (default 0, an
    empty item, as for every histogram protocol); at ``value = n/d`` it is the **average over the
    d items**, which is data independent (sum_j c_j = n):
    ``[n q (1 - q) + (n/d)(1 - p - q)(p - q)]/(p - q)^2``.

    Privacy: eps-LDP exactly. Cost: 1 message of ceil(log2 d) bits; O(n) aggregate (bincount);
    O(d) exact statistic simulation. Source: the survey's LDP baseline for histograms (§5.2).
    """

    name = "ldp_krr"
    one_message_per_user = True
    input_kind = "categorical"

    def __init__(self, epsilon: float, delta: float = 0.0, n: int = 1, *, d: int) -> None:
        super().__init__(epsilon, delta, n)
        self.d = check_domain_size(d)
        self.randomizer = GeneralizedRandomizedResponse(self.epsilon, self.d)
        self.p, self.q = self.randomizer.p, self.randomizer.q

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.randomizer.randomize(check_int_values(values, self.d), rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(self.d, dtype=np.int64)
        _columns(messages, {"y"}, self.name)
        y = check_int_values(messages["y"], self.d, "y")
        return np.bincount(y, minlength=self.d).astype(np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = _stat(statistic, self.d).astype(np.float64)
        n = check_positive_int(n, "n")
        p, q = self.p, self.q
        c = (s - n * q) / (p - q)
        cc = np.clip(c, 0.0, float(n))
        var = (n * q * (1 - q) + cc * (1 - p - q) * (p - q)) / (p - q) ** 2
        return Estimate(c, np.sqrt(var), n, self.privacy(n), "count", extra={"p": p, "q": q})

    def item_variance(self, n: int, count: float | np.ndarray) -> float | np.ndarray:
        """Exact variance of one item's count estimate when ``count`` users hold it."""
        p, q = self.p, self.q
        return (n * q * (1 - q) + np.asarray(count, dtype=np.float64) * (1 - p - q) * (p - q)) / (p - q) ** 2

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Exact variance of one item's count estimate when ``value`` users hold it
        (:meth:`item_variance`; affine in the count, so ``value = n/d`` gives the average over the items)."""
        n = self.n if n is None else n
        return float(self.item_variance(n, value))

    def summarize(self, values: Any) -> np.ndarray:
        return np.bincount(check_int_values(values, self.d), minlength=self.d).astype(np.int64)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return _blanket_counts(check_true_counts(data, self.d), self.p, self.q, rng).astype(np.int64)

    @property
    def local_randomizer(self) -> GeneralizedRandomizedResponse:
        return self.randomizer

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.d)


PROTOCOLS: dict[str, type[Protocol]] = {"ldp_krr": LdpKRR}
