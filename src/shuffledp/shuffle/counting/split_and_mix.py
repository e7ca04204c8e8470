"""``cnt_sgm`` (Cnt_SGM): robust distributed symmetric-geometric counter over a sum-only channel.

Each user adds Polya noise and sends additive shares (split-and-mix: Ishai, Kushilevitz,
Ostrovsky, Sahai, FOCS 2006; security bound of Balle, Bell, Gascon, Nissim, CCS 2020). A
reconstruction: (eps, delta_split, gamma)-DP, not pure.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from ...central.distributed import (SplitAndMix, split_and_mix_delta, split_and_mix_messages,
                                    split_and_mix_security_bits)
from ...central.distributions import discrete_laplace_variance, simulate_polya
from ...core.errors import ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int, check_real
from .._common import (check_bits, check_statistic, need_delta, scalar_estimate, split_and_mix_honest_parties,
                       split_and_mix_sigma_at)
from ..base import Messages, Protocol
from ._base import _check_counts, _counts

__all__ = ["CntSGM", "PROTOCOLS"]


class CntSGM(Protocol):
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
    Cost: m = O(1 + sigma / log(gamma n)) messages of log2 q bits per user; O(n m) encode/aggregate;
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
        self.alpha = math.exp(-self.epsilon)
        #: Pólya shape per user, 1/(gamma n)
        self.shape = 1.0 / (self.gamma * self.n)
        #: total shape when all n users are honest, 1/gamma
        self.total_shape = 1.0 / self.gamma
        self.sigma = split_and_mix_security_bits(self.epsilon, self.delta)
        tau = float(stats.nbinom.isf(beta / 2.0, self.total_shape, 1.0 - self.alpha))
        self.modulus = 1 << max(2, math.ceil(math.log2(2.0 * (self.n + tau + 1.0))))
        if self.modulus > 1 << 62:
            raise ValidationError("cnt_sgm: modulus would exceed 2^62; n is too large", parameter="n")
        #: honest parties the robust guarantee may rely on: split-and-mix is sized (and its
        #: security sigma evaluated) among floor(gamma n) parties, not n
        self.honest_parties = split_and_mix_honest_parties(self.gamma, self.n, "cnt_sgm")
        self.n_messages = split_and_mix_messages(self.honest_parties, math.log2(self.modulus), self.sigma)
        self._sm = SplitAndMix(self.modulus, self.n_messages)

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_bits(values)
        noise = simulate_polya(self.shape, self.alpha, x.shape[0], rng) - simulate_polya(self.shape, self.alpha,
                                                                                           x.shape[0], rng)
        shares = self._sm.simulate_encode(x + noise, rng)
        return {"share": shares.reshape(-1)}

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
        R = (n0 + n1) * self.shape
        z = int(simulate_polya(R, self.alpha, 1, rng)[0]) - int(simulate_polya(R, self.alpha, 1, rng)[0])
        return np.array([(n1 + z) % self.modulus], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        honest_needed = self.gamma * self.n
        if n < honest_needed or n < 3:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_sgm: fewer than gamma*n users at n={n}")
        # security of m shares among the floor(gamma self.n) honest parties the robust guarantee
        # assumes (BBGN CCS'20 bound solved for sigma), whatever the batch size n
        sigma = split_and_mix_sigma_at(self.n_messages, self.honest_parties, self.modulus, self.sigma,
                                       self.honest_parties)
        if sigma <= 0:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_sgm: split-and-mix insecure at n={n}")
        extra = split_and_mix_delta(self.epsilon, sigma)
        if extra >= 1.0:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_sgm: split-and-mix insecure at n={n}")
        return PrivacyStatement(self.epsilon, extra, "shuffle", gamma=min(1.0, honest_needed / n),
                                note=f"cnt_sgm [R]: distributed geometric (Pólya shares) + split-and-mix "
                                     f"(m={self.n_messages}, q=2^{int(math.log2(self.modulus))}, sigma={sigma:.4g})")

    @property
    def messages_per_user(self) -> float:
        return float(self.n_messages)

    @property
    def bits_per_message(self) -> float:
        return math.log2(self.modulus)


PROTOCOLS: dict[str, type[Protocol]] = {"cnt_sgm": CntSGM}
