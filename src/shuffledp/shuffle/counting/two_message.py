"""``cnt_2m`` (Cnt_2M): unary counting with binomial noise, 0, 1 or 2 one-bit messages per user.

Balcer & Cheu, "Separating Local & Shuffled Differential Privacy via Histograms", ITC 2020,
protocol P^zsum (§3).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

from ...core.errors import OutOfDomainError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int, check_real
from .._common import check_bits, check_statistic, need_delta, sampled_blanket, scalar_estimate, shift_hockey_stick
from ..base import Messages, Protocol
from ._base import _check_counts, _count_ones_messages, _counts, _ones_messages

__all__ = ["Cnt2M", "PROTOCOLS"]


class Cnt2M(Protocol):
    """Cnt_2M: Balcer & Cheu's P^zsum (ITC 2020, §3) — unary counting with binomial noise.

    Each user sends ``x + Ber(p)`` copies of the one-bit message "1" (0, 1 or 2 messages), with
    ``p = 1 - 50 ln(2/delta) / (eps^2 n)``. The analyzer counts the messages |y| and outputs
    ``|y| - n p`` if ``|y| > n``, else 0 (the truncation makes an all-zero input give exactly 0;
    it biases counts below about ``n (1 - p)`` towards 0).

    Privacy: (eps, delta)-DP for eps, delta in (0, 1] and n >= 100 ln(2/delta)/eps^2 (paper's
    theorem; |y| = c + n - Bin(n, 1 - p) and Bin(n, 1 - p) is smooth, Ghazi et al. Lemma 4.12).
    There is **no local DP** (a user holding 1 always sends a message): ``local_randomizer`` is None.
    ``exact_delta(eps)`` computes the exact privacy curve of |y| (hockey-stick, O(n)).
    Variance without truncation: ``n p (1 - p)`` (≈ 50 ln(2/delta)/eps^2).
    Cost: O(n) encode/aggregate; expected ``q + p`` messages of 1 bit per user (q = fraction of
    ones, ``ones_fraction``); O(1) exact simulation (|y| = c + Bin(n, p)).
    Source: Balcer & Cheu, "Separating Local & Shuffled Differential Privacy via Histograms",
    ITC 2020, §3 (two independent transcriptions of the protocol agree).
    """

    name = "cnt_2m"
    model = "shuffle"
    input_kind = "bit"
    truncate = True

    def __init__(self, epsilon: float, delta: float, n: int, *, ones_fraction: float = 0.5) -> None:
        super().__init__(epsilon, delta, n)
        need_delta(self.delta, self.name)
        self.ones_fraction = check_real(ones_fraction, "ones_fraction", low=0.0, high=1.0)
        self._setup()

    def _noise_users(self) -> float:
        return float(self.n)

    def _setup(self) -> None:
        eps, dlt = self.epsilon, self.delta
        if eps > 1.0:
            raise OutOfDomainError(f"{self.name} (Balcer–Cheu P^zsum) needs epsilon <= 1, got {eps!r}",
                                   parameter="epsilon")
        m = self._noise_users()
        need = 100.0 * math.log(2.0 / dlt) / eps**2
        if m < need:
            what = "gamma * n" if self.robust else "n"
            raise OutOfDomainError(f"{self.name} needs {what} >= 100 ln(2/delta)/epsilon^2 = {need:.6g}, got {m:.6g}",
                                   parameter="n")
        #: 1 - p: probability that a user does *not* add its noise message
        # sampled exactly: rounded up to the 2^-53 grid (never less noise than the theorem asks for)
        self.q_noise = sampled_blanket(50.0 * math.log(2.0 / dlt) / (eps**2 * m))
        #: probability of the extra "1" message
        self.p = 1.0 - self.q_noise

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        x = check_bits(values)
        z = rng.random(x.shape[0]) < self.p
        return _ones_messages(x, z)

    def aggregate(self, messages: Messages) -> np.ndarray:
        return _count_ones_messages(messages)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        k = float(s[0])
        c = k - n * self.p
        if self.truncate and k <= n:
            c = 0.0
        return scalar_estimate(c, self.variance(n), n, self.privacy(n), "count", p=self.p,
                               truncated=bool(self.truncate and k <= n))

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """``n p (1 - p)`` whatever the true count ``value``: exact for the untruncated estimator
        (truncation only moves estimates with |y| <= n to 0, which happens w.p. ≈ 0 once c >> n (1 - p))."""
        n = self.n if n is None else n
        return n * self.p * (1.0 - self.p)

    def summarize(self, values: Any) -> np.ndarray:
        return _counts(values)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n0, n1 = _check_counts(data)
        return np.array([n1 + rng.binomial(n0 + n1, self.p)], dtype=np.int64)

    def exact_delta(self, eps: float, n: int | None = None) -> float:
        """Exact delta(eps) of the released message count |y| = c + Bin(n, p) for neighbouring
        counts c, c + 1 (all users honest). O(n)."""
        n = self.n if n is None else n
        pmf = stats.binom.pmf(np.arange(n + 1), n, self.p)
        return shift_hockey_stick(pmf, eps)

    def _privacy(self, n: int) -> PrivacyStatement:
        # the smoothness argument needs the noise Bin(n, 1-p) to have mean >= 50 ln(2/delta)/eps^2
        mean_noise = n * self.q_noise
        eps = math.sqrt(50.0 * math.log(2.0 / self.delta) / mean_noise)
        if eps > 1.0 or self.q_noise > 0.5:
            return PrivacyStatement(math.inf, 0.0, "shuffle", note=f"{self.name}: no guarantee at n={n}")
        return PrivacyStatement(max(eps, 0.0), self.delta, "shuffle",
                                note=f"{self.name}: Balcer–Cheu P^zsum, n(1-p) = {mean_noise:.6g} binomial noise")

    @property
    def messages_per_user(self) -> float:
        """Expected messages per user when a fraction ``ones_fraction`` holds 1: q + p."""
        return self.ones_fraction + self.p

    def expected_messages_per_user(self, q: float) -> float:
        """Expected messages per user when a fraction q of users hold 1."""
        return check_real(q, "q", low=0.0, high=1.0) + self.p

    @property
    def bits_per_message(self) -> float:
        return 1.0


PROTOCOLS: dict[str, type[Protocol]] = {"cnt_2m": Cnt2M}
