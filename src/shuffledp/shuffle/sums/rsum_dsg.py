"""``rsum_dsg`` (RSum_DSG): distributed symmetric geometric noise (Polya shares) plus split-and-mix
(Balle, Bell, Gascon, Nissim, CCS 2020; Ghazi, Manurangsi, Pagh, Velingker, 2020).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from ...central.distributed import (SplitAndMix, split_and_mix_delta, split_and_mix_messages,
                                    split_and_mix_security_bits)
from ...central.distributions import simulate_polya
from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int, check_real
from .._common import (check_statistic, check_unit_values, need_delta, randomized_rounding, rounding_parts,
                       split_and_mix_honest_parties, split_and_mix_sigma_at)
from ..base import Messages, Protocol
from ._base import _single_column, _SumProtocol

__all__ = ["RSumDSG", "PROTOCOLS"]


class RSumDSG(_SumProtocol):
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
        p = self.precision
        self.alpha = math.exp(-self.epsilon / p)
        self.shape = 1.0 / (self.gamma * self.n)
        self.total_shape = 1.0 / self.gamma
        self.sigma = split_and_mix_security_bits(self.epsilon, self.delta)
        tau = float(stats.nbinom.isf(beta / 2.0, self.total_shape, 1.0 - self.alpha))
        self.modulus = 1 << max(2, math.ceil(math.log2(2.0 * (self.n * p + tau + 1.0))))
        if self.modulus > 1 << 62:
            raise ValidationError("rsum_dsg: modulus would exceed 2^62; lower the precision", parameter="precision")
        #: honest parties the (robust) guarantee may rely on: split-and-mix is sized (and its
        #: security sigma evaluated) among floor(gamma n) parties, not n
        self.honest_parties = split_and_mix_honest_parties(self.gamma, self.n, "rsum_dsg")
        self.n_messages = split_and_mix_messages(self.honest_parties, math.log2(self.modulus), self.sigma)
        self._sm = SplitAndMix(self.modulus, self.n_messages)

    @property
    def robust(self) -> bool:  # type: ignore[override]
        return self.gamma < 1.0

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_unit_values(values)
        v = randomized_rounding(x, self.precision, rng)
        k = x.shape[0]
        noise = simulate_polya(self.shape, self.alpha, k, rng) - simulate_polya(self.shape, self.alpha, k, rng)
        return {"share": self._sm.simulate_encode(v + noise, rng).reshape(-1)}

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
        R = frac.shape[0] * self.shape
        z = int(simulate_polya(R, self.alpha, 1, rng)[0]) - int(simulate_polya(R, self.alpha, 1, rng)[0])
        return np.array([(total + z) % self.modulus], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        honest_needed = self.gamma * self.n
        if n < honest_needed or n < 3:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"rsum_dsg: fewer than gamma*n users at n={n}")
        # security among the floor(gamma self.n) honest parties the guarantee assumes
        sigma = split_and_mix_sigma_at(self.n_messages, self.honest_parties, self.modulus, self.sigma,
                                       self.honest_parties)
        extra = split_and_mix_delta(self.epsilon, sigma) if sigma > 0 else 1.0
        if extra >= 1.0:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"rsum_dsg: split-and-mix insecure at n={n}")
        return PrivacyStatement(self.epsilon, extra, "shuffle", gamma=min(1.0, honest_needed / n),
                                note=f"rsum_dsg: distributed geometric (alpha=e^-eps/p, p={self.precision}) + "
                                     f"split-and-mix (m={self.n_messages}, q=2^{int(math.log2(self.modulus))})")

    @property
    def messages_per_user(self) -> float:
        return float(self.n_messages)

    @property
    def bits_per_message(self) -> float:
        return math.log2(self.modulus)


PROTOCOLS: dict[str, type[Protocol]] = {"rsum_dsg": RSumDSG}
