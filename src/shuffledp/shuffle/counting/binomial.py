"""``cnt_bn`` (Cnt_BN): robust binomial counter, a reconstruction: Balcer & Cheu's P^zsum
(ITC 2020) with the noise sized for the ``gamma n`` honest users (the robust shuffle privacy of
Balcer, Cheu, Joseph, Mao, SODA 2021).
"""

from __future__ import annotations

import math

from ...core.privacy import PrivacyStatement
from ...core.validation import check_real
from ..base import Protocol
from .two_message import Cnt2M

__all__ = ["CntBN", "PROTOCOLS"]


class CntBN(Cnt2M):
    """Cnt_BN **[R]**: robust binomial counter — Balcer & Cheu's P^zsum with n replaced by gamma n.

    Reconstruction (BCJM SODA 2021's own randomizer was not read): ``p = 1 - 50 ln(2/delta) /
    (eps^2 gamma n)``, each user sends ``x + Ber(p)`` messages "1", the analyzer outputs
    ``|y| - n p`` (no truncation: with malicious users the 0 -> 0 guarantee is void).

    Privacy: (eps, delta, gamma)-robustly shuffle private — any gamma' n >= gamma n honest users
    contribute Bin(gamma' n, 1 - p) noise with mean >= 50 ln(2/delta)/eps^2, the smoothness
    condition of P^zsum; malicious users' messages are post-processing. Requires eps <= 1 and
    gamma n >= 100 ln(2/delta)/eps^2. No local DP. Variance (all honest): ``n p (1 - p)``.
    """

    name = "cnt_bn"
    robust = True
    truncate = False

    def __init__(self, epsilon: float, delta: float, n: int, *, gamma: float = 0.5,
                 ones_fraction: float = 0.5) -> None:
        self.gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True)
        super().__init__(epsilon, delta, n, ones_fraction=ones_fraction)

    def _noise_users(self) -> float:
        return self.gamma * self.n

    def _privacy(self, n: int) -> PrivacyStatement:
        honest_needed = self.gamma * self.n
        if n < honest_needed:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"cnt_bn: fewer than gamma*n users at n={n}")
        return PrivacyStatement(self.epsilon, self.delta, "shuffle", gamma=min(1.0, honest_needed / n),
                                note="cnt_bn [R]: robust P^zsum, guarantee holds when >= gamma n users are honest")


PROTOCOLS: dict[str, type[Protocol]] = {"cnt_bn": CntBN}
