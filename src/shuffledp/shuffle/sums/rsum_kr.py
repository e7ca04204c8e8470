"""``rsum_kr`` (RSum_KR): single-message summation, one (k+1)-ary RR report of the randomly
rounded value (Balle, Bell, Gascon, Nissim, "The Privacy Blanket of the Shuffle Model",
CRYPTO 2019, Alg. 2).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from ...core.errors import OutOfDomainError
from ...core.estimate import Estimate
from ...core.privacy import PrivacyStatement
from ...core.validation import check_positive_int
from .._common import (check_statistic, check_unit_values, krr_local_epsilon, krr_report_variance,
                       krr_sum_given_levels, need_delta, randomized_rounding, rounding_parts, sampled_blanket)
from ..base import Messages, Protocol, bits_for
from ._base import (_CAL, _check_bound, _check_int_range, _krr_gamma_bound, _krr_statement, _single_column,
                    _SumProtocol, blanket_gamma_or_none)

__all__ = ["RSumKR", "PROTOCOLS"]


class _RoundedKRRRandomizer:
    """fe_k(x) through (k+1)-ary RR with blanket gamma: P(y | x) = (1 - gamma) P(fe_k(x) = y) + gamma/(k+1)."""

    def __init__(self, k: int, gamma: float) -> None:
        self.k, self.gamma = k, sampled_blanket(gamma)  # the blanket probability sampled exactly
        self.epsilon = krr_local_epsilon(k + 1, self.gamma)

    def randomize(self, values: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
        x = check_unit_values(values)
        v = randomized_rounding(x, self.k, rng)
        blank = rng.random(v.shape[0]) < self.gamma
        u = rng.integers(0, self.k + 1, size=v.shape[0])
        return {"y": np.where(blank, u, v).astype(np.int64)}

    def probabilities(self, reports: dict[str, np.ndarray], x: Any) -> np.ndarray:
        y = np.asarray(reports["y"]).astype(np.int64)
        lo, r = rounding_parts(np.array([float(x)]), self.k)
        p_round = np.where(y == lo[0], 1.0 - r[0], 0.0) + np.where(y == lo[0] + 1, r[0], 0.0)
        return (1.0 - self.gamma) * p_round + self.gamma / (self.k + 1)


class RSumKR(_SumProtocol):
    """RSum_KR: Balle, Bell, Gascón, Nissim (CRYPTO 2019) single-message summation (Alg. 2).

    Encoder: ``v = fe_k(x)`` in {0..k}; w.p. 1 - gamma send v, else a uniform value of {0..k}.
    Analyzer: ``S = (sum y / k - gamma n / 2) / (1 - gamma)`` (unbiased).
    Privacy: a (k+1)-ary RR, eps_l = ln(1 + (k+1)(1 - gamma)/gamma); gamma from Thm 3.1 with k+1
    values (``bound="closed_form"``, needs eps <= 1) or the numeric Bennett bound
    (``bound="bennett"``), or the smaller blanket of the two (``bound="best"``, the default: the
    tightest valid calibration, recorded in ``bound_used``; Bennett at eps in [0.1, 2],
    n in [1e3, 1e6], about half the closed form's variance); :meth:`privacy` is the accounting
    module's blanket bound for eps_l.
    Precision: ``precision=None`` picks the k that minimizes the worst-case MSE (the paper's
    k = Theta((eps^2 n / ln(1/delta))^{1/3}), MSE O(n^{1/3})); the survey used k = 10.
    Cost: 1 message of log2(k+1) bits; O(n) encode/aggregate; simulation O(n) rounding + O(k).
    """

    name = "rsum_kr"
    one_message_per_user = True

    def __init__(self, epsilon: float, delta: float, n: int, *, precision: int | None = None,
                 bound: Literal["closed_form", "bennett", "best"] = "best") -> None:
        super().__init__(epsilon, delta, n)
        need_delta(self.delta, self.name)
        self.bound = _check_bound(bound)
        if precision is None:
            self.k = self._best_precision()
        else:
            self.k = check_positive_int(precision, "precision")
        #: the blanket bound actually used ("best" resolves to "closed_form" or "bennett")
        self.gamma, self.bound_used = _krr_gamma_bound(self.k + 1, self.epsilon * _CAL, self.delta, self.n,
                                                       self.bound)
        self.randomizer = _RoundedKRRRandomizer(self.k, self.gamma)
        self.gamma = self.randomizer.gamma
        self.eps_l = self.randomizer.epsilon

    def _worst_user_variance(self, k: int, gamma: float) -> float:
        # Var(y) as a function of t = k x is gamma(1-gamma)(t^2 - k t) + (1-gamma) r(1-r) + const:
        # its maximum lies in the first (or, symmetrically, the last) unit interval, at the
        # stationary point t* = (1 - gamma k) / (2 (1 - gamma)) clipped to [0, 1], or an end.
        t_star = min(max((1.0 - gamma * k) / (2.0 * (1.0 - gamma)), 0.0), 1.0)
        t = np.array([0.0, t_star, 1.0 if k > 1 else 0.5])
        frac = t - np.floor(t)
        frac = np.where(t >= k, 0.0, frac)
        return float(krr_report_variance(t, t * t + frac * (1 - frac), k + 1, gamma).max())

    def _best_precision(self) -> int:
        k0 = (self.epsilon**2 * self.n / math.log(1.0 / self.delta)) ** (1.0 / 3.0)
        best, best_mse = None, math.inf
        for k in range(1, max(8, int(4 * k0) + 8)):
            # closed-form (Thm 3.1) shape, also used to choose k for the Bennett calibration
            g = blanket_gamma_or_none(k + 1, self.epsilon, self.delta, self.n)
            if g is None:
                break
            mse = self.n * self._worst_user_variance(k, g) / (k * k * (1.0 - g) ** 2)
            if mse < best_mse:
                best, best_mse = k, mse
        if best is None:
            raise OutOfDomainError(f"rsum_kr: no precision k gives a blanket gamma < 1 at epsilon={self.epsilon!r}, "
                                   f"delta={self.delta!r}, n={self.n}", parameter="n")
        return best

    def encode(self, values: Any, rng: np.random.Generator) -> Messages:
        return self.randomizer.randomize(values, rng)

    def aggregate(self, messages: Messages) -> np.ndarray:
        if not messages:
            return np.zeros(1, dtype=np.int64)
        y = _check_int_range(_single_column(messages, "y", self.name), 0, self.k, "rsum_kr messages")
        return np.array([int(y.sum())], dtype=np.int64)

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        s = check_statistic(statistic, 1)
        n = check_positive_int(n, "n")
        val = (float(s[0]) / self.k - self.gamma * n / 2.0) / (1.0 - self.gamma)
        return self._estimate(val, n, precision=self.k, gamma=self.gamma)

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Worst case over inputs in [0, 1]^n of the sum estimate's variance; ``value`` (the true
        sum) is ignored (the exact variance depends on every user's value, not only on the sum:
        :meth:`sum_variance`)."""
        n = self.n if n is None else n
        return n * self._worst_user_variance(self.k, self.gamma) / (self.k * (1.0 - self.gamma)) ** 2

    def sum_variance(self, values: Any) -> float:
        """Exact variance of the sum estimate for these inputs (n = their number)."""
        den = (self.k * (1.0 - self.gamma)) ** 2
        x = check_unit_values(values)
        lo, r = rounding_parts(x, self.k)
        t = lo + r
        return float(np.sum(krr_report_variance(t, t * t + r * (1 - r), self.k + 1, self.gamma))) / den

    def simulate_statistic(self, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        lo, frac = self._simulation_parts(data, lambda x: rounding_parts(x, self.k))
        levels = np.bincount(lo + (rng.random(lo.shape[0]) < frac), minlength=self.k + 1)
        return np.array([krr_sum_given_levels(levels, self.k + 1, self.gamma, rng)], dtype=np.int64)

    def _privacy(self, n: int) -> PrivacyStatement:
        try:
            st = _krr_statement(self.k + 1, self.gamma, n, self.delta, self.bound_used)
        except OutOfDomainError:
            return PrivacyStatement(self.eps_l, 0.0, "shuffle", note=f"rsum_kr: blanket out of domain at n={n}")
        return PrivacyStatement(st.eps, st.delta, "shuffle", note=f"rsum_kr (k={self.k}): {st.note}")

    @property
    def local_randomizer(self) -> _RoundedKRRRandomizer:
        return self.randomizer

    @property
    def messages_per_user(self) -> float:
        return 1.0

    @property
    def bits_per_message(self) -> float:
        return bits_for(self.k + 1)


PROTOCOLS: dict[str, type[Protocol]] = {"rsum_kr": RSumKR}
