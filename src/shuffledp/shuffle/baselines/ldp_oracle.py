"""``ldp_oracle``: any local frequency oracle of :mod:`shuffledp.local`, by name, eps_l = eps_c.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.validation import check_domain_size, check_int_values, check_positive_int
from ...local.base import FrequencyOracle
from ...local.registry import FREQUENCY_ORACLES, frequency_oracle
from .._common import check_true_counts
from ..base import Messages, Protocol, bits_for
from ._base import _LocalBaseline

__all__ = ["LdpOracle", "PROTOCOLS"]


class LdpOracle(_LocalBaseline):
    """``ldp_oracle``: any eps-LDP frequency oracle of :mod:`shuffledp.local` by name, eps_l = eps_c.

    ``protocol("ldp_oracle", epsilon=eps, n=n, d=d, oracle="olh", oracle_params={...})``. The
    statistic is the oracle's own mergeable aggregate; the estimate is the oracle's unbiased
    fraction estimate times n (counts), with its closed-form standard errors times n.
    ``variance(n, value)`` is n^2 times the oracle's fraction variance at ``f = value/n`` (as for
    every histogram protocol, the default ``value = 0`` is an empty item; ``value = n/d`` gives
    the per-item average for the pure oracles, whose variance is affine in f).

    Privacy: that of the oracle (eps-LDP). Exact statistic simulation when the oracle has one
    (:attr:`has_exact_simulation` says so). Bits per message: the report's size (see
    :attr:`bits_per_message`).
    """

    name = "ldp_oracle"
    one_message_per_user = True
    input_kind = "categorical"

    def __init__(self, epsilon: float, delta: float = 0.0, n: int = 1, *, d: int, oracle: str = "olh",
                 oracle_params: dict[str, Any] | None = None) -> None:
        super().__init__(epsilon, delta, n)
        self.d = check_domain_size(d)
        if not isinstance(oracle, str) or oracle.lower() not in FREQUENCY_ORACLES:
            raise ValidationError(f"unknown frequency oracle {oracle!r}; choose one of {sorted(FREQUENCY_ORACLES)}",
                                  parameter="oracle")
        self.oracle_name = oracle.lower()
        self.oracle: FrequencyOracle = frequency_oracle(self.oracle_name, self.epsilon, self.d,
                                                        **(oracle_params or {}))

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.oracle.randomize(check_int_values(values, self.d), rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            raise ValidationError("ldp_oracle: no reports to aggregate", parameter="messages")
        reports = {k: v for k, v in messages.items() if k != "shuffler"}
        return np.asarray(self.oracle.aggregate(self.oracle.validate_reports(reports)))

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        n = check_positive_int(n, "n")
        est = self.oracle.estimate(statistic, n)
        return Estimate(est.values * n, est.stderr * n, n, self.privacy(n), "count",
                        extra={"oracle": self.oracle_name, **est.extra})

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """n^2 times the oracle's frequency variance at ``f = value / n`` (one item's count variance
        when ``value`` users hold it)."""
        n = self.n if n is None else n
        return float(n) ** 2 * float(self.oracle.variance(n, value / n))

    @property
    def has_exact_simulation(self) -> bool:
        return type(self.oracle).simulate_statistic is not FrequencyOracle.simulate_statistic

    def summarize(self, values: Any) -> np.ndarray:
        return np.bincount(check_int_values(values, self.d), minlength=self.d).astype(np.int64)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(self.oracle.simulate_statistic(check_true_counts(data, self.d), rng))

    @property
    def local_randomizer(self) -> FrequencyOracle:
        return self.oracle

    @property
    def bits_per_message(self) -> float:
        """Report size: ceil(log2 d) (grr), 64-bit hash seed + ceil(log2 g) (blh/olh), omega
        ceil(log2 d) (ss); otherwise the dtype size of one user's report (an upper bound)."""
        o = self.oracle
        if self.oracle_name == "grr":
            return bits_for(self.d)
        if self.oracle_name in ("olh", "blh") and hasattr(o, "g"):
            return 64.0 + bits_for(int(o.g))
        if self.oracle_name == "ss" and hasattr(o, "omega"):
            return float(o.omega) * bits_for(self.d)
        rep = o.randomize(np.zeros(1, dtype=np.int64), np.random.default_rng(0))
        return float(sum(np.asarray(v)[0].nbytes * 8 for v in rep.values()))


PROTOCOLS: dict[str, type[Protocol]] = {"ldp_oracle": LdpOracle}
