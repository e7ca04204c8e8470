"""``cnt_sgm`` (Cnt_SGM): robust distributed symmetric-geometric counter over a sum-only channel.

Each user adds Polya noise and sends additive shares (split-and-mix: Ishai, Kushilevitz,
Ostrovsky, Sahai, FOCS 2006; security bound of Balle, Bell, Gascon, Nissim, CCS 2020). A
reconstruction: (eps, delta_split, gamma)-DP, not pure.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ...central.distributions import discrete_laplace_variance
from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int, check_real
from .._common import check_bits, check_statistic, need_delta, scalar_estimate
from .._distributed_geometric import DistributedGeometricShares
from ..base import Messages, Protocol
from ._base import _check_counts, _counts

__all__ = ["CntSGM", "PROTOCOLS"]


class CntSGM(DistributedGeometricShares, Protocol):
    """Cnt_SGM **[R]**: robust distributed symmetric-geometric counter over a sum-only channel.

    Each user draws X, Y i.i.d. Pólya NB(1/(gamma n), alpha = e^{-eps}), forms ``v = x + X - Y``
    and sends ``m`` additive shares of v mod q (split-and-mix, Ishai et al. 2006). The analyzer
    adds all shares mod q and maps the residue to a signed integer: ``c + Z`` with
    ``Z = NB(h/(gamma n)) - NB(h/(gamma n))`` from h honest users.

    Privacy: if h >= gamma n users are honest, Z is symmetric log-concave with
    P(Z = z)/P(Z = z + 1) <= e^eps, so the sum is eps-DP (derived here, and tested); split-and-mix with
    security sigma adds (1 + e^eps) 2^-sigma to delta (survey Thm 9). Result:
    (eps, (1 + e^eps) 2^-sigma, gamma)-robust, **not pure**: sending the noise as unary messages
    would leak the user's own value, the sum-only channel is what the reconstruction needs.
    sigma is chosen so that the extra delta is at most ``delta``.
    Variance (all honest): ``2 (1/gamma) alpha / (1 - alpha)^2``. No local DP.
    Split-and-mix is sized for, and its sigma evaluated among, the floor(gamma n) honest parties.
    Sampler: on a production generator (client SDK, ``pipeline.run(production=True)``; see
    :func:`shuffledp.core.rng.is_secure_generator`) X and Y are exact draws from the OS
    (:func:`shuffledp.central.sample_polya` with r = 1/(gamma n), rate eps as exact rationals);
    a seeded simulation uses numpy's negative binomial.
    Cost: m = O(1 + sigma / log(gamma n)) messages of log2 q bits per user; O(n m) encode/aggregate;
    the two exact Pólya draws cost ~20-30 us per user at eps = 1 (whole encode ~0.15 ms);
    O(1) exact simulation (sum of all shares = c + NB(1/gamma) - NB(1/gamma) mod q).
    """

    name = "cnt_sgm"
    model = "shuffle"
    input_kind = "bit"
    robust = True

    def __init__(self, epsilon: float, delta: float, n: int, *, gamma: float = 0.5,
                 wrap_probability: float = 1e-12) -> None:
        super().__init__(epsilon, delta, n)
        need_delta(self.delta, "cnt_sgm (split-and-mix adds a statistical delta)")
        if self.n < 3:
            raise ValidationError("cnt_sgm needs n >= 3 users (split-and-mix)", parameter="n")
        self.gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
        beta = check_real(wrap_probability, "wrap_probability", low=0.0, high=0.5, low_open=True)
        if self.gamma * self.n < 1.0:
            raise ValidationError(f"cnt_sgm needs gamma * n >= 1, got {self.gamma * self.n!r}", parameter="gamma")
        self._setup_shares(Fraction(self.epsilon), beta, self.n, "n", "n is too large")

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_bits(values)
        return {"share": self._noisy_shares(x, rng)}

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        if set(messages) - {"shuffler"} != {"share"}:
            raise ValidationError("cnt_sgm messages must have the single column 'share'", parameter="messages")
        return np.array([self._sm.aggregate(messages["share"])], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        c = float(self._sm.decode_signed(int(s[0]) % self.modulus))
        return scalar_estimate(c, self.variance(n), n, self.privacy(n), "count", modulus=self.modulus,
                               messages=self.n_messages)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """All users honest, whatever the true count ``value``: the noise is NB(R) - NB(R),
        R = n / (gamma * self.n): 2 R alpha/(1-alpha)^2."""
        n = self.n if n is None else n
        R = n * self.shape
        return R * discrete_laplace_variance(1.0 / self.epsilon)

    def summarize(self, values: Any) -> np.ndarray:
        return _counts(values)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = _check_counts(data)
        return self._simulate_noisy_sum(n1, n0 + n1, rng)

    def _privacy(self, n: int) -> PrivacyStatement:
        return self._shares_privacy(n, "cnt_sgm [R]: distributed geometric (Pólya shares)")


PROTOCOLS: dict[str, type[Protocol]] = {"cnt_sgm": CntSGM}
