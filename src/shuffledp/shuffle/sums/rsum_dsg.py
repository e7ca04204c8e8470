"""``rsum_dsg`` (RSum_DSG): distributed symmetric geometric noise (Polya shares) plus split-and-mix
(Balle, Bell, Gascon, Nissim, CCS 2020; Ghazi, Manurangsi, Pagh, Velingker, 2020).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int, check_real
from .._common import check_statistic, check_unit_values, need_delta, randomized_rounding, rounding_parts
from .._distributed_geometric import DistributedGeometricShares
from ..base import Messages, Protocol
from ._base import _single_column, _SumProtocol

__all__ = ["RSumDSG", "PROTOCOLS"]


class RSumDSG(DistributedGeometricShares, _SumProtocol):
    """RSum_DSG: distributed symmetric geometric noise + split-and-mix (Balle, Bell, Gascón,
    Nissim, "Private Summation in the Multi-Message Shuffle Model", CCS 2020 / arXiv 1906.09116;
    Ghazi, Manurangsi, Pagh, Velingker, 2020).

    Encoder: ``v = fe_p(x)`` + X - Y with X, Y i.i.d. Pólya(1/(gamma n), alpha = e^{-eps/p}); v is
    split into m additive shares mod q. Analyzer: s = sum of all shares mod q, mapped to
    [-q/2, q/2); ``S = s / p``.
    Privacy: with >= gamma n honest users the total noise is NB(>= 1) - NB(>= 1), eps/p-DP per unit
    of the integer sum (the difference of two NB laws is log-concave with ratio <= e^{eps/p}, derived
    and tested here), and one user moves the sum by <= p: eps-DP;
    split-and-mix with security sigma adds (1 + e^eps) 2^-sigma (survey Thm 9), sigma chosen so
    that this is <= delta. Statement: (eps, (1 + e^eps) 2^-sigma[, gamma]).
    Error (all honest): ``Var = [sum_i r_i (1 - r_i) + 2 R alpha/(1 - alpha)^2] / p^2``, R = 1/gamma;
    with p = ceil(sqrt(n)) about 1/4 + 2/(gamma eps^2), independent of n.
    q: a power of two > 2 (n p + tau), tau the (1 - wrap_probability) quantile of |noise|.
    Cost: m = max(3, ceil((2 sigma + log2 q)/(log2 h - log2 e) + 1)) messages of log2 q bits,
    h = floor(gamma n) honest parties (split-and-mix must be secure among the honest users alone);
    O(n m) encode/aggregate; simulation O(n) rounding + O(1).
    Sampler: on a production generator (client SDK, ``pipeline.run(production=True)``; see
    :func:`shuffledp.core.rng.is_secure_generator`) X and Y are exact draws from the OS
    (:func:`shuffledp.central.sample_polya` with r = 1/(gamma n), rate eps/p as exact rationals),
    O(1) expected draws each whatever the rate: ~0.2 ms per user encode at eps = 1, n = 10^4;
    a seeded simulation uses numpy's negative binomial.
    """

    name = "rsum_dsg"

    def __init__(self, epsilon: float, delta: float, n: int, *, precision: int | None = None,
                 gamma: float = 1.0, wrap_probability: float = 1e-9) -> None:
        super().__init__(epsilon, delta, n)
        need_delta(self.delta, "rsum_dsg (split-and-mix adds a statistical delta)")
        if self.n < 3:
            raise ValidationError("rsum_dsg needs n >= 3 users (split-and-mix)", parameter="n")
        self.gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
        if self.gamma * self.n < 1.0:
            raise ValidationError(f"rsum_dsg needs gamma * n >= 1, got {self.gamma * self.n!r}", parameter="gamma")
        beta = check_real(wrap_probability, "wrap_probability", low=0.0, high=0.5, low_open=True)
        self.precision = (math.ceil(math.sqrt(self.n)) if precision is None
                          else check_positive_int(precision, "precision"))
        self._setup_shares(Fraction(self.epsilon) / self.precision, beta, self.n * self.precision, "precision",
                           "lower the precision")

    @property
    def robust(self) -> bool:  # type: ignore[override]
        return self.gamma < 1.0

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_unit_values(values)
        return {"share": self._noisy_shares(randomized_rounding(x, self.precision, rng), rng)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        return np.array([self._sm.aggregate(_single_column(messages, "share", self.name))], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        val = self._sm.decode_signed(int(s[0]) % self.modulus) / self.precision
        return self._estimate(val, n, precision=self.precision, modulus=self.modulus, messages=self.n_messages)

    def noise_variance(self, n: int | None = None) -> float:
        """Variance of the integer noise when all n users are honest: 2 R alpha/(1 - alpha)^2."""
        n = self.n if n is None else n
        R = n * self.shape
        return 2.0 * R * self.alpha / (1.0 - self.alpha) ** 2

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """All users honest; worst case over inputs in [0, 1]^n of the sum estimate's variance; ``value`` (the true
        sum) is ignored (the exact variance depends on every user's value, not only on the sum:
        :meth:`sum_variance`)."""
        n = self.n if n is None else n
        return (n / 4.0 + self.noise_variance(n)) / self.precision**2

    def sum_variance(self, values: Any) -> float:
        """Exact variance of the sum estimate for these inputs (n = their number), all users honest."""
        x = check_unit_values(values)
        _, r = rounding_parts(x, self.precision)
        return (float(np.sum(r * (1 - r))) + self.noise_variance(x.shape[0])) / self.precision**2

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        from .rsum_rr import _floor_sum_and_fractions

        floor_sum, frac = self._simulation_parts(data, lambda x: _floor_sum_and_fractions(x, self.precision))
        total = floor_sum + int(np.count_nonzero(rng.random(frac.shape[0]) < frac))
        return self._simulate_noisy_sum(total, frac.shape[0], rng)

    def _privacy(self, n: int) -> PrivacyStatement:
        return self._shares_privacy(n, f"rsum_dsg: distributed geometric (alpha=e^-eps/p, p={self.precision})")


PROTOCOLS: dict[str, type[Protocol]] = {"rsum_dsg": RSumDSG}
