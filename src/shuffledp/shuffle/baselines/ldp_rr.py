"""``ldp_rr``: binary randomized response in the local model (Warner 1965), eps_l = eps_c.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.estimate import Estimate
from ...core.validation import check_int_values, check_positive_int
from ...local.grr import GeneralizedRandomizedResponse
from .._common import check_true_counts
from ..base import Messages, Protocol
from ._base import _bits, _columns, _LocalBaseline, _stat

__all__ = ["LdpRR", "PROTOCOLS"]


class LdpRR(_LocalBaseline):
    """``ldp_rr``: binary randomized response in the local model (Warner 1965), eps_l = eps_c.

    Each user reports its bit with probability ``p = e^eps/(e^eps + 1)``, else the other bit
    (GRR with d = 2). The analyzer counts the reported ones S and outputs
    ``c_hat = (S - n q)/(p - q)``, q = 1 - p: unbiased, with the data-independent variance
    ``n p q/(p - q)^2`` (every user's report has variance p q).

    Privacy: eps-LDP exactly (p/q = e^eps). Cost: 1 one-bit message per user; O(n)
    aggregate; O(1) exact statistic simulation (S = Bin(c, p) + Bin(n - c, q)).
    Source: the survey's LDP baseline for counting (§5.1).
    """

    name = "ldp_rr"
    one_message_per_user = True
    input_kind = "bit"

    def __init__(self, epsilon: float, delta: float = 0.0, n: int = 1) -> None:
        super().__init__(epsilon, delta, n)
        self.randomizer = GeneralizedRandomizedResponse(self.epsilon, 2)
        self.p, self.q = self.randomizer.p, self.randomizer.q

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = _bits(values)
        return {"y": self.randomizer.randomize(x, rng)["y"].astype(np.int8)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        _columns(messages, {"y"}, self.name)
        y = check_int_values(messages["y"], 2, "y")
        return np.array([int(y.sum())], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = _stat(statistic, 1)
        n = check_positive_int(n, "n")
        c = (float(s[0]) - n * self.q) / (self.p - self.q)
        return Estimate(np.array([c]), math.sqrt(self.variance(n)), n, self.privacy(n), "count",
                        extra={"p": self.p})

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """``n p q / (p - q)^2``, exact and data independent."""
        n = self.n if n is None else n
        return n * self.p * self.q / (self.p - self.q) ** 2

    def summarize(self, values: Any) -> np.ndarray:
        return np.bincount(_bits(values), minlength=2).astype(np.int64)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = check_true_counts(data, 2)
        return np.array([rng.binomial(n1, self.p) + rng.binomial(n0, self.q)], dtype=np.int64)

    @property
    def local_randomizer(self) -> GeneralizedRandomizedResponse:
        return self.randomizer

    @property
    def bits_per_message(self) -> float:
        return 1.0


PROTOCOLS: dict[str, type[Protocol]] = {"ldp_rr": LdpRR}
