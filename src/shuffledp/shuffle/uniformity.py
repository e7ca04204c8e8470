"""``put`` / ``aut``: uniformity testers (survey §4.4; Balcer, Cheu, Joseph, Mao, SODA 2021), a
reconstruction on one robust binary counter per coordinate (:class:`OneHotCounters`; PUT: the
distributed symmetric-geometric counter Cnt_SGM over a split-and-mix sum channel, AUT: the
binomial counter Cnt_BN), then an unbiased collision statistic ``T`` estimating
``||p - u||_2^2`` and a threshold ``tau``. The exact statistic, threshold and constants of the
paper's PUT/AUT are not stated in its abstract; ours are documented in ``docs/protocols-other.md``.
The two testers differ only in their counter, so they share this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..core.estimate import Estimate
from ..core.validation import check_int_values, check_positive_int, check_real
from .base import Protocol
from .one_hot_counters import OneHotCounters

__all__ = ["UniformityTestResult", "UniformityTester", "PUT", "AUT", "PROTOCOLS"]


@dataclass(frozen=True)
class UniformityTestResult:
    """Outcome of a uniformity test: reject H0 (p = uniform) iff ``statistic > threshold``."""

    reject: bool
    statistic: float
    threshold: float
    null_sd: float
    counts: np.ndarray

    @property
    def accept(self) -> bool:
        return not self.reject


class UniformityTester(OneHotCounters):
    """Uniformity tester on per-coordinate robust counters [DERIVED reconstruction of BCJM's PUT/AUT].

    Statistic (unbiased for ``||p - u||_2^2`` with n i.i.d. samples of p, fixed n, and noise of
    variance s^2 independent of the data):
    ``T = sum_j (c_hat_j^2 - c_hat_j - s^2) / (n (n - 1)) - 1/d``
    (E[c_hat_j^2 - c_hat_j - s^2] = E[c_j (c_j - 1)] = n (n-1) p_j^2). Under H0 E[T] = 0; if
    TV(p, u) >= alpha then ``||p - u||_2^2 >= 4 alpha^2/d`` (Cauchy–Schwarz), so the threshold
    is the midpoint ``tau = 2 alpha^2/d`` (``alpha`` = the distance parameter). The exact null
    variance (:meth:`null_variance`) uses the noise's central moments; by Chebyshev the type-I
    error is at most ``Var_0(T)/tau^2`` (:meth:`type1_bound`).
    The form ``sum_j [(c_hat_j - n/d)^2 - c_hat_j] - d s^2`` is the Poissonized statistic (its
    mean is -n/d, not 0, under fixed-n sampling); we use the fixed-n unbiased form.
    """

    default_counter = "bn"

    def __init__(self, epsilon: float, delta: float, n: int, *, d: int, alpha: float = 0.25,
                 gamma: float = 0.5, counter: Literal["bn", "sgm"] | None = None) -> None:
        super().__init__(epsilon, delta, n, d=d, gamma=gamma, counter=counter)
        self.alpha_tv = check_real(alpha, "alpha", low=0.0, high=1.0, low_open=True)
        self.threshold = 2.0 * self.alpha_tv**2 / self.d

    def statistic_T(self, statistic: np.ndarray, n: int) -> float:
        n = check_positive_int(n, "n", minimum=2)
        c = self.counts(statistic, n)
        s2 = self.noise_variance(n)
        return float(np.sum(c * c - c - s2) / (n * (n - 1.0)) - 1.0 / self.d)

    def null_variance(self, n: int | None = None) -> float:
        """Exact Var(T) under H0 (p uniform, all users honest)."""
        n = self.n if n is None else n
        d = self.d
        s2, m3, m4 = self._noise_cumulants(n)
        ec = n / d
        ec2 = n / d * (1 - 1 / d) + ec**2
        v_data = 2.0 * n * (n - 1.0) / d * (1 - 1 / d)
        v_noise = d * ((4 * ec2 - 4 * ec + 1) * s2 + 2 * m3 * (2 * ec - 1) + (m4 - s2**2))
        return (v_data + v_noise) / (n * (n - 1.0)) ** 2

    def type1_bound(self, n: int | None = None) -> float:
        """Chebyshev bound on the false-rejection probability: Var_0(T)/tau^2 (capped at 1)."""
        return min(1.0, self.null_variance(n) / self.threshold**2)

    def test_statistic(self, statistic: np.ndarray, n: int) -> UniformityTestResult:
        T = self.statistic_T(statistic, n)
        return UniformityTestResult(bool(T > self.threshold), T, self.threshold, math.sqrt(self.null_variance(n)),
                                    self.counts(statistic, n))

    def test(self, values: Any, rng: np.random.Generator) -> UniformityTestResult:
        """Run the whole protocol (encode, shuffle, analyze) on samples ``values`` (simulation)."""
        from .shuffler import run_shufflers

        x = check_int_values(values, self.d)
        stat = self.aggregate(run_shufflers(self, self.encode(x, rng), rng))
        return self.test_statistic(stat, x.shape[0])

    def estimate(self, statistic: np.ndarray, n: int) -> Estimate:
        """values = [T] (estimate of ||p - u||_2^2), stderr = null sd; extra: reject/accept, tau."""
        r = self.test_statistic(statistic, n)
        return Estimate(np.array([r.statistic]), r.null_sd, n, self.privacy(n), "uniformity",
                        extra={"reject": r.reject, "accept": r.accept, "threshold": r.threshold,
                               "alpha": self.alpha_tv})

    def variance(self, n: int | None = None, value: float = 0.0) -> float:
        """Var(T) under the null hypothesis (:meth:`null_variance`); ``value`` is ignored."""
        return self.null_variance(n)


class PUT(UniformityTester):
    """``put`` — uniformity tester on robust distributed-geometric counters (Cnt_SGM per coordinate).

    BCJM's PUT is robust *pure* shuffle private; our counter needs a split-and-mix sum channel,
    which adds a statistical delta, so the statement is (eps, d (1 + e^eps) 2^-sigma, gamma)
    with sigma chosen to make that <= delta (see :class:`OneHotCounters`). [DERIVED/R]
    """

    name = "put"
    default_counter = "sgm"


class AUT(UniformityTester):
    """``aut`` — uniformity tester on robust binomial counters (Cnt_BN per coordinate):
    (eps, delta, gamma)-robustly shuffle private. [DERIVED/R]"""

    name = "aut"
    default_counter = "bn"


PROTOCOLS: dict[str, type[Protocol]] = {"put": PUT, "aut": AUT}
