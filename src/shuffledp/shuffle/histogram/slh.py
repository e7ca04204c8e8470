"""``slh``: shuffled optimized local hashing (SOLH), one message per user.

Wang, Xu, Ren, Shi, Li, Yang, Chen, Li, "Improving Utility and Security of the Shuffler-based
Differential Privacy", PVLDB 13(13) 2020, with the blanket bound of Balle et al., CRYPTO 2019,
Thm 3.1 applied to the g-ary hashed reports.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...accounting.shuffle import shuffle_amplification
from ...core.errors import OutOfDomainError, ValidationError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement, round_up
from ...local.hashing import LocalHashing
from ..base import Messages, Protocol, bits_for
from ._base import HistogramProtocol, _local_statement, _MARGIN, _PureOracleMixin, blanket_required

__all__ = ["SLH", "PROTOCOLS"]


class SLH(_PureOracleMixin, HistogramProtocol):
    """SLH: shuffled optimized local hashing (SOLH), one message per user.

    Each user draws a public hash ``H: [d] -> [g]`` (the affine family of
    :class:`shuffledp.local.hashing.LocalHashing`), and sends ``(seed, GRR_g(H(x)))`` at eps_l.
    The analyzer debiases the support counts ``S_j = #{i : H_i(j) = y_i}``.

    Amplification (derived here from BBGN19 Thm 3.1 with k = g; a blanket report supports any fixed
    value with probability exactly 1/g): (eps, delta)-DP for eps <= 1 when
    ``m := e^eps_l + g - 1 = (n-1) / max(14 ln(2/delta)/eps^2, 27/eps)``.

    ``variant="optimal"`` (default; DUMP authors' SOLH): ``g = floor((m+2)/3)`` minimises the
    zero-count variance for that m, ``e^eps_l = m + 1 - g``; ``privacy(n)`` is
    ``shuffle_amplification(eps_l, n, delta, "blanket", bound="closed_form", randomizer="krr", k=g)``.

    ``variant="v1"`` (Wang et al. arXiv v1 parameter choice, author code ``blanket_naive_olh``):
    ``g = round(e^{eps_l/2} + 1)`` and ``eps_c = 2 sqrt(14 ln(2/delta) (e^eps_l + g - 1) / (n-1))``;
    eps_l is the largest value whose eps_c meets the target (found by bisection, not by the author
    code's reverse formula, which is not its inverse -- see the docs). ``privacy(n)`` is twice the
    blanket bound (conservative).

    Privacy: each report eps_l-LDP (exact). Source: Wang et al., "Improving Utility and Security
    of the Shuffler-based Differential Privacy", PVLDB 13(13) 2020 (arXiv 1908.11515).
    Error: exact ``Var = [c p(1-p) + (n-c) q*(1-q*)] / (p-q*)^2`` with q* the exact support
    probability of the hash family (~1/g). If ``g >= d``, Hist_KR is more accurate.
    Cost: 1 message of ceil(log2 #seeds) + ceil(log2 g) bits; O(n + P^2) aggregation.
    """

    name = "slh"
    one_message_per_user = True

    def __init__(self, epsilon: float, delta: float, n: int, d: int, variant: str = "optimal") -> None:
        super().__init__(epsilon, delta, n, d)
        if variant not in ("optimal", "v1"):
            raise ValidationError(f"variant must be 'optimal' or 'v1', got {variant!r}", parameter="variant")
        self.variant = variant
        eps, delta, n = self.epsilon, self.delta, self.n
        if eps > 1.0:
            raise OutOfDomainError(f"slh uses BBGN19 Thm 3.1 and needs epsilon <= 1, got {eps!r}", parameter="epsilon")
        if n < 2:
            raise ValidationError("slh needs n >= 2 users", parameter="n")
        if variant == "optimal":
            m = (n - 1) / (blanket_required(eps, delta) * _MARGIN)
            g = int(math.floor((m + 2.0) / 3.0))
            if g < 2 or m + 1.0 - g <= 1.0:
                raise OutOfDomainError(f"slh cannot reach epsilon={eps!r}, delta={delta!r} with n={n}: the blanket "
                                       f"allows m = e^eps_l + g - 1 = {m:.4g}, which needs to be >= 4", parameter="n")
            eps_l = math.log(m + 1.0 - g)
        else:
            # m(u) = u^2 + round(u + 1) - 1 with u = e^{eps_l/2}; need 2*blanket_eps((n-1)/m) <= eps
            M = (n - 1) / (blanket_required(eps / 2.0, delta) * _MARGIN)

            def m_of(u: float) -> float:
                return u * u + round(u + 1.0) - 1.0

            if m_of(1.0 + 1e-9) > M:
                raise OutOfDomainError(f"slh variant='v1' cannot reach epsilon={eps!r}, delta={delta!r} with n={n} "
                                       f"(needs e^eps_l + g - 1 <= {M:.4g} with eps_l > 0)", parameter="n")
            lo, hi = 1.0 + 1e-9, math.sqrt(M) + 1.0
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if m_of(mid) <= M:
                    lo = mid
                else:
                    hi = mid
            eps_l, g = 2.0 * math.log(lo), int(round(lo + 1.0))
        self.eps_l, self.g = eps_l, g
        self.oracle = LocalHashing(eps_l, self.d, g)
        self.p_star, self.q_star = self.oracle.p_star, self.oracle.q_star

    @property
    def local_randomizer(self) -> LocalHashing:
        return self.oracle

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.oracle.randomize(self.check_values(values), rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        seed = self._column(messages, "seed", self.oracle.n_seeds)
        y = self._column(messages, "y", self.g)
        return self.oracle.aggregate({"seed": seed, "y": y})

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        est = self._debias(statistic, n)
        return self._estimate(est, self._var_counts(n, est), n)

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Exact (chunked client + aggregation of the hash reports; O(n), no closed form known)."""
        return self.oracle.simulate_statistic(self.check_counts(data), rng)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Exact variance of one item's estimated count when ``value`` users hold it."""
        return float(self._var_counts(self._n_of(n), value))

    def _privacy(self, n: int) -> PrivacyStatement:
        try:
            eps = shuffle_amplification(self.eps_l, n, self.delta, method="blanket", bound="closed_form",
                                        randomizer="krr", k=self.g)
        except OutOfDomainError:
            return _local_statement(self.eps_l, f"the blanket bound does not apply at n={n}")
        if self.variant == "v1":
            eps = min(self.eps_l, round_up(2.0 * eps))
        return PrivacyStatement(eps, self.delta, model="shuffle",
                                note=f"slh ({self.variant}): blanket with k=g={self.g}, eps_l={self.eps_l:.6g}")

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.oracle.n_seeds) + bits_for(self.g)


PROTOCOLS: dict[str, type[Protocol]] = {"slh": SLH}
