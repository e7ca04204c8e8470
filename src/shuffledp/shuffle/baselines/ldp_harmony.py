"""``ldp_harmony``: Harmony (Nguyen, Xiao, Yang, Hui, Shin, Shin, 2016) for sums of values in
[0, 1] in the local model, eps_l = eps_c.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.validation import check_positive_int, check_real_values
from ...local.mean import Harmony
from ..base import Messages, Protocol
from .._common import read_only_copy, simulation_parts
from ._base import _columns, _LocalBaseline, _stat

__all__ = ["UnitIntervalHarmony", "LdpHarmony", "PROTOCOLS"]


class UnitIntervalHarmony:
    """Harmony (Nguyen et al. 2016) on inputs x in [0, 1]: t = 2x - 1, one sign report.

    ``P[s = +1 | x] = 1/2 + t (e^eps - 1)/(2 (e^eps + 1))``. Exposes ``epsilon``,
    ``randomize`` and ``probabilities(reports, x)`` for the exact ratio check (worst ratio
    e^eps, between x = 0 and x = 1).
    """

    def __init__(self, epsilon: float) -> None:
        self.harmony = Harmony(epsilon, 1)
        self.epsilon = self.harmony.epsilon

    def randomize(self, values: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
        x = check_real_values(values, 0.0, 1.0)
        return {"s": self.harmony.randomize(2.0 * x - 1.0, rng)["s"]}

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        s = np.asarray(reports["s"])
        return self.harmony.probabilities({"j": np.zeros(s.shape[0], dtype=np.int64), "s": s},
                                          np.array([2.0 * float(x) - 1.0]))


class LdpHarmony(_LocalBaseline):
    """``ldp_harmony``: Harmony sums in the local model (Nguyen et al. 2016), eps_l = eps_c.

    User i maps x_i in [0, 1] to t_i = 2 x_i - 1 and sends one sign s_i = +-1 with
    ``P[s = +1] = 1/2 + t (e^eps - 1)/(2 (e^eps + 1))``. With ``C = (e^eps + 1)/(e^eps - 1)``,
    ``E[C s_i] = t_i``, so the sum estimate ``S_hat = (C sum_i s_i + n)/2`` is unbiased with
    ``Var = (n C^2 - sum_i t_i^2)/4``. :meth:`variance` is the worst case ``n C^2/4`` (all t_i
    = 0); the reported standard error plugs in the estimated mean (``sum t_i^2 >= n tbar^2``, so
    it is an upper bound).

    Privacy: eps-LDP exactly. Cost: 1 one-bit message per user. Exact statistic simulation in
    O(n) (one uniform per user; the data are continuous, no finite summary).
    Source: the survey's LDP baseline for sums (§5.3).
    """

    name = "ldp_harmony"
    one_message_per_user = True
    input_kind = "unit_interval"

    def __init__(self, epsilon: float, delta: float = 0.0, n: int = 1) -> None:
        super().__init__(epsilon, delta, n)
        self.randomizer = UnitIntervalHarmony(self.epsilon)
        self.C = self.randomizer.harmony.C

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.randomizer.randomize(values, rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        _columns(messages, {"s"}, self.name)
        s = np.asarray(messages["s"])
        if s.dtype == np.bool_ or not np.issubdtype(s.dtype, np.integer) or not np.all(np.abs(s) == 1):
            raise ValidationError("ldp_harmony messages 's' must be +-1 integers", parameter="messages")
        return np.array([int(s.sum(dtype=np.int64))], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = _stat(statistic, 1)
        n = check_positive_int(n, "n")
        total = (self.C * float(s[0]) + n) / 2.0
        tbar = min(1.0, abs(2.0 * total / n - 1.0))
        var = n * (self.C**2 - tbar**2) / 4.0
        return Estimate(np.array([total]), math.sqrt(var), n, self.privacy(n), "sum", extra={"C": self.C})

    def sum_variance(self, values: Any) -> float:
        """Exact variance of the sum estimate for these inputs: (n C^2 - sum t_i^2)/4."""
        t = 2.0 * check_real_values(values, 0.0, 1.0) - 1.0
        return (t.size * self.C**2 - float(np.dot(t, t))) / 4.0

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Worst case over inputs in [0, 1]^n, ``n C^2/4`` (all t_i = 0); ``value`` (the true sum) is
        ignored; :meth:`sum_variance` is exact for given inputs."""
        n = self.n if n is None else n
        return n * self.C**2 / 4.0

    def summarize(self, values: Any) -> np.ndarray:
        """Each user's probability of sending +1 (float array, one per user)."""
        t = 2.0 * check_real_values(values, 0.0, 1.0) - 1.0
        # the randomizer's exact law, read-only: simulate_statistic validates it once per summary
        return read_only_copy(self.randomizer.harmony.sign_plus_probability(t))

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        p = simulation_parts(self, data, lambda d: check_real_values(d, 0.0, 1.0, "data"))
        plus = int(np.count_nonzero(rng.random(p.size) < p))
        return np.array([2 * plus - p.size], dtype=np.int64)

    @property
    def local_randomizer(self) -> UnitIntervalHarmony:
        return self.randomizer

    @property
    def bits_per_message(self) -> float:
        return 1.0


PROTOCOLS: dict[str, type[Protocol]] = {"ldp_harmony": LdpHarmony}
